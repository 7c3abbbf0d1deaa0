"""A DuckDB catalog over the artifact store.

One view per artifact over the Parquet files of *all* runs, with two extra columns from the
directory layout: ``run`` and ``producer``. Plus ``artifacts`` (every manifest) and ``validations``
(every gate's summary). The views are saved in ``<store>/catalog.duckdb`` so any DuckDB client can
open it; because they are globs, new runs show up without rebuilding it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa

from baleen_schemas import ARTIFACTS, ArtifactSchema
from baleen_storage.integrity import Damage, sizes_match, verify
from baleen_storage.store import GATE_SUMMARY_SUFFIX, MANIFEST_FILE, ArtifactStore

CATALOG_FILE = "catalog.duckdb"
CATALOG_SQL_FILE = "catalog.sql"

_MANIFEST_COLUMNS = {
    "name": "VARCHAR",
    "producer": "VARCHAR",
    "run_id": "VARCHAR",
    "schema_version": "INTEGER",
    "rows": "BIGINT",
    "bytes": "BIGINT",
    "files": "VARCHAR[]",
    "fingerprint": "VARCHAR",
    "inputs": "JSON",
    "params": "JSON",
    "stats": "JSON",
    "flow_run_id": "VARCHAR",
    "flow_run_name": "VARCHAR",
    "created_at": "TIMESTAMPTZ",
    "code_version": "VARCHAR",
    "gated": "BOOLEAN",
}
_VALIDATION_COLUMNS = {
    "artifact": "VARCHAR",
    "run_id": "VARCHAR",
    "producer": "VARCHAR",
    "success": "BOOLEAN",
    "evaluated": "INTEGER",
    "failed": "INTEGER",
    "failures": "JSON",
    "validated_at": "TIMESTAMPTZ",
}


def _sql_type(dtype: pa.DataType) -> str:
    mapping = {
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INTEGER",
        pa.int64(): "BIGINT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
        pa.string(): "VARCHAR",
    }
    if dtype in mapping:
        return mapping[dtype]
    if pa.types.is_list(dtype):
        return f"{_sql_type(dtype.value_type)}[]"
    raise TypeError(f"no DuckDB type mapping for {dtype}")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def artifact_view_sql(store: ArtifactStore, schema: ArtifactSchema, left_out: Collection[Path] = ()) -> str:
    """CREATE VIEW for one artifact over every run's files but those of the artifact directories
    ``left_out`` (damaged ones); an artifact with no files (left) gets an empty, typed view."""
    name = schema.name
    files = sorted((store.root / "artifacts" / name).glob("*/*/*.parquet"))
    kept = [f for f in files if f.parent not in left_out]
    options = "hive_partitioning = true, hive_types = {'run': VARCHAR, 'producer': VARCHAR}, union_by_name = true"
    if kept and len(kept) == len(files):  # a glob: runs published later show up without a rebuild
        return f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({_quote(store.parquet_glob(name))}, {options})"
    if kept:
        return f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet([{', '.join(_quote(str(f)) for f in kept)}], {options})"
    cols = ", ".join(f"CAST(NULL AS {_sql_type(f.type)}) AS {f.name}" for f in schema.schema)
    return f"CREATE OR REPLACE VIEW {name} AS SELECT {cols}, CAST(NULL AS VARCHAR) AS run, CAST(NULL AS VARCHAR) AS producer WHERE false"


def _damage(store: ArtifactStore, name: str, footers: bool = False) -> list[Damage]:
    """The damaged files of ``name``'s artifacts: by their sizes, or (``footers``) by reading
    their Parquet footers and row counts too."""
    refs = store.refs(name, unreleased=True)
    if footers:
        return [d for ref in refs for d in verify(ref, checksums=False)]
    return [d for ref in refs if (d := sizes_match(ref)) is not None]


def _json_select(glob: str, columns: dict[str, str], present: bool) -> str:
    """SELECT over the JSON files matching ``glob``, typed; an empty typed SELECT when none is."""
    if present:
        spec = "{" + ", ".join(f"{_quote(k)}: {_quote(v)}" for k, v in columns.items()) + "}"
        return f"SELECT * FROM read_json({_quote(glob)}, columns = {spec}, format = 'auto')"
    cols = ", ".join(f"CAST(NULL AS {t}) AS {k}" for k, t in columns.items())
    return f"SELECT {cols} WHERE false"


def _artifacts_view_sql(manifests: str) -> str:
    """``artifacts``: every manifest, with ``status`` as :meth:`ArtifactStore.release_state`
    decides it: ``failed`` when a gate of its step (run and producer) failed, ``pending`` when a
    gated artifact of the step has no verdict yet, else ``released`` (what later stages read)."""
    return (
        f"CREATE OR REPLACE VIEW artifacts AS WITH m AS ({manifests}), "
        "steps AS (SELECT m.run_id, m.producer, bool_or(v.success IS NOT NULL AND NOT v.success) AS failed, "
        "bool_or(coalesce(m.gated, false) AND v.success IS NULL) AS pending "
        "FROM m LEFT JOIN validations v ON v.run_id = m.run_id AND v.producer = m.producer AND v.artifact = m.name GROUP BY ALL) "
        "SELECT m.*, CASE WHEN s.failed THEN 'failed' WHEN s.pending THEN 'pending' ELSE 'released' END AS status "
        "FROM m JOIN steps s USING (run_id, producer)"
    )


def catalog_statements(store: ArtifactStore, left_out: Mapping[str, list[Damage]] | None = None) -> list[str]:
    """The catalog's views; each artifact's leaves out the runs whose files are damaged (by
    size, or as given in ``left_out``, by artifact name)."""
    left_out = left_out if left_out is not None else {}
    statements = []
    for name, schema in ARTIFACTS.items():
        damage = left_out.get(name) or _damage(store, name)
        statements.append(artifact_view_sql(store, schema, {d.ref.path for d in damage}))
    validations = str(store.root / "reports" / "*" / "validation" / "*" / f"*{GATE_SUMMARY_SUFFIX}")
    has_validations = any((store.root / "reports").glob(f"*/validation/*/*{GATE_SUMMARY_SUFFIX}"))
    statements.append(f"CREATE OR REPLACE VIEW validations AS {_json_select(validations, _VALIDATION_COLUMNS, has_validations)}")
    manifests = str(store.root / "artifacts" / "*" / "*" / "*" / MANIFEST_FILE)
    has_manifests = any((store.root / "artifacts").glob(f"*/*/*/{MANIFEST_FILE}"))
    statements.append(_artifacts_view_sql(_json_select(manifests, _MANIFEST_COLUMNS, has_manifests)))
    return statements


def build_catalog(store: ArtifactStore, left_out: list[Damage] | None = None) -> Path:
    """(Re)write ``<store>/catalog.duckdb`` atomically and return its path. Damaged files never
    break it: their runs are left out of their artifact's view and added to ``left_out`` (one
    whose size is right is found when its view fails to build, by its footer).

    The statements used are saved beside it (``catalog.sql``): readers rebuild only when the
    statements they would use now differ (a new artifact got its first files)."""
    damage = {name: _damage(store, name) for name in ARTIFACTS}
    final = store.root / CATALOG_FILE
    with store.scratch_dir("catalog") as scratch:
        tmp = scratch / CATALOG_FILE
        con = duckdb.connect(str(tmp))
        try:
            for name, schema in ARTIFACTS.items():
                try:
                    con.execute(artifact_view_sql(store, schema, {d.ref.path for d in damage[name]}))
                except duckdb.Error:  # a file its size does not give away: find it by its footer
                    damage[name] = _damage(store, name, footers=True)
                    con.execute(artifact_view_sql(store, schema, {d.ref.path for d in damage[name]}))
            statements = catalog_statements(store, damage)
            for statement in statements[len(ARTIFACTS):]:
                con.execute(statement)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, final)
    store.write_text(CATALOG_SQL_FILE, ";\n".join(statements) + ";\n")
    if left_out is not None:
        left_out.extend(d for found in damage.values() for d in found)
    return final


#: What ``baleen sql`` runs: queries (SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE parse
#: as SELECT) and EXPLAIN of one. COPY, ATTACH, INSTALL/LOAD, SET, CREATE, EXPORT… are refused.
READ_ONLY_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


class ReadOnlyQueryError(ValueError):
    """A statement that is not one read-only query over the catalog."""


#: The memory a ``baleen sql`` query may use before DuckDB refuses it (a DuckDB size string).
DEFAULT_MEMORY_LIMIT = "2GB"


def connect_readonly(store: ArtifactStore, memory_limit: str = DEFAULT_MEMORY_LIMIT) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the catalog, rebuilt first when missing or out of date, that
    can read the store's artifacts and reports and nothing else: no other file, no network, no
    extension install or load, at most ``memory_limit`` of memory, and a locked configuration (a
    query cannot ``SET`` its way out)."""
    path = store.root / CATALOG_FILE
    sql_path = store.root / CATALOG_SQL_FILE
    current = ";\n".join(catalog_statements(store)) + ";\n"
    if not path.exists() or not sql_path.exists() or sql_path.read_text() != current:
        build_catalog(store)
    con = duckdb.connect(str(path), read_only=True, config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    readable = [str(store.root / part) + os.sep for part in ("artifacts", "reports")]
    # in this order: the allowed directories can only be set while external access is on
    con.execute(f"SET allowed_directories = [{', '.join(_quote(d) for d in readable)}]")
    con.execute(f"SET memory_limit = {_quote(memory_limit)}")
    con.execute("SET enable_progress_bar = false")  # it would print into the rows a command streams to stdout
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


class QueryRows:
    """A query's rows, read batch by batch (``for batch in rows``, :meth:`read_next_batch`,
    :meth:`read_all`); an error DuckDB meets while producing them is a :class:`duckdb.Error`,
    as an error in parsing or planning is."""

    def __init__(self, reader: pa.RecordBatchReader, memory_limit: str) -> None:
        self._reader = reader
        self._memory_limit = memory_limit
        self.schema = reader.schema

    def _read(self, read):
        try:
            return read()
        except duckdb.Error as err:
            raise _without_set_advice(err, self._memory_limit) from None
        except (pa.ArrowException, OSError) as err:  # how Arrow reports DuckDB's error mid-stream
            raise _without_set_advice(duckdb.Error(str(err)), self._memory_limit) from None

    def read_next_batch(self) -> pa.RecordBatch:
        return self._read(self._reader.read_next_batch)

    def read_all(self) -> pa.Table:
        return self._read(self._reader.read_all)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            try:
                yield self.read_next_batch()
            except StopIteration:
                return


@contextmanager
def stream(store: ArtifactStore, sql: str, batch_rows: int = 10_000, memory_limit: str = DEFAULT_MEMORY_LIMIT) -> Iterator[QueryRows]:
    """Run one read-only query over the catalog and stream its rows in Arrow batches of at most
    ``batch_rows`` (the result is never held whole, however large; rows not read are not
    computed); anything but one read-only query (a second statement, COPY, ATTACH, INSTALL, SET,
    CREATE …) raises :class:`ReadOnlyQueryError` before it runs."""
    con = connect_readonly(store, memory_limit)
    try:
        try:
            statements = con.extract_statements(sql)
            if len(statements) != 1:
                raise ReadOnlyQueryError(f"expected one SQL statement, got {len(statements)}")
            if statements[0].type not in READ_ONLY_STATEMENTS:
                keyword = (statements[0].query.split() or [statements[0].type.name])[0].upper()
                raise ReadOnlyQueryError(f"{keyword} statements are not allowed: the catalog is read-only (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)")
            reader = con.sql(sql).to_arrow_reader(batch_rows)
        except duckdb.Error as err:
            raise _without_set_advice(err, memory_limit) from None
        try:
            yield QueryRows(reader, memory_limit)
        finally:
            reader.close()  # ends the query: a reader left open would keep the database busy after the block
    finally:
        con.close()


def query(store: ArtifactStore, sql: str) -> pa.Table:
    """Run one read-only query over the catalog (see :func:`stream`) and return all its rows."""
    with stream(store, sql) as reader:
        return reader.read_all()


#: DuckDB's advice to change a setting with SET, which the read-only catalog refuses: an inline
#: sentence, or a "Possible solutions" list at the end of an out-of-memory error.
_SET_ADVICE = re.compile(r'\s*Use "SET [^"]*" to [^.]*\.|\s*Possible solutions:.*', re.DOTALL)


def _without_set_advice(err: duckdb.Error, memory_limit: str) -> duckdb.Error:
    """``err`` with DuckDB's advice to ``SET`` something replaced by what a user of this read-only
    catalog can do."""
    message = str(err)
    if not _SET_ADVICE.search(message):
        return err
    if isinstance(err, duckdb.OutOfMemoryException):
        advice = f" (the query needs more than its memory limit, {memory_limit}: raise it with `baleen sql --memory-limit`, or narrow the query)"
    else:
        advice = " (`baleen sql` cannot change DuckDB's settings: simplify the query, or open the catalog in a DuckDB client of your own)"
    return type(err)(_SET_ADVICE.sub("", message).strip() + advice)
