"""A DuckDB catalog over the artifact store.

One view per artifact over the Parquet files of *all* runs, with two extra columns from the
directory layout: ``run`` and ``producer``. Plus ``artifacts`` (every manifest) and ``validations``
(every gate's summary). The views are saved in ``<store>/catalog.duckdb`` so any DuckDB client can
open it; because they are globs, new runs show up without rebuilding it.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa

from baleen_schemas import ARTIFACTS, ArtifactSchema
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


def artifact_view_sql(store: ArtifactStore, schema: ArtifactSchema) -> str:
    """CREATE VIEW for one artifact; an artifact with no files yet gets an empty, typed view."""
    name = schema.name
    has_files = any((store.root / "artifacts" / name).glob("*/*/*.parquet"))
    if has_files:
        return (
            f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({_quote(store.parquet_glob(name))}, "
            "hive_partitioning = true, hive_types = {'run': VARCHAR, 'producer': VARCHAR}, union_by_name = true)"
        )
    cols = ", ".join(f"CAST(NULL AS {_sql_type(f.type)}) AS {f.name}" for f in schema.schema)
    return f"CREATE OR REPLACE VIEW {name} AS SELECT {cols}, CAST(NULL AS VARCHAR) AS run, CAST(NULL AS VARCHAR) AS producer WHERE false"


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


def catalog_statements(store: ArtifactStore) -> list[str]:
    statements = [artifact_view_sql(store, schema) for schema in ARTIFACTS.values()]
    validations = str(store.root / "reports" / "*" / "validation" / "*" / f"*{GATE_SUMMARY_SUFFIX}")
    has_validations = any((store.root / "reports").glob(f"*/validation/*/*{GATE_SUMMARY_SUFFIX}"))
    statements.append(f"CREATE OR REPLACE VIEW validations AS {_json_select(validations, _VALIDATION_COLUMNS, has_validations)}")
    manifests = str(store.root / "artifacts" / "*" / "*" / "*" / MANIFEST_FILE)
    has_manifests = any((store.root / "artifacts").glob(f"*/*/*/{MANIFEST_FILE}"))
    statements.append(_artifacts_view_sql(_json_select(manifests, _MANIFEST_COLUMNS, has_manifests)))
    return statements


def build_catalog(store: ArtifactStore) -> Path:
    """(Re)write ``<store>/catalog.duckdb`` atomically and return its path.

    The statements used are saved beside it (``catalog.sql``): readers rebuild only when the
    statements they would use now differ (a new artifact got its first files)."""
    statements = catalog_statements(store)
    final = store.root / CATALOG_FILE
    with store.scratch_dir("catalog") as scratch:
        tmp = scratch / CATALOG_FILE
        con = duckdb.connect(str(tmp))
        try:
            for statement in statements:
                con.execute(statement)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, final)
    store.write_text(CATALOG_SQL_FILE, ";\n".join(statements) + ";\n")
    return final


#: What ``baleen sql`` runs: queries (SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE parse
#: as SELECT) and EXPLAIN of one. COPY, ATTACH, INSTALL/LOAD, SET, CREATE, EXPORT… are refused.
READ_ONLY_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


class ReadOnlyQueryError(ValueError):
    """A statement that is not one read-only query over the catalog."""


def connect_readonly(store: ArtifactStore) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the catalog, rebuilt first when missing or out of date, that
    can read the store's artifacts and reports and nothing else: no other file, no network, no
    extension install or load, and a locked configuration (a query cannot ``SET`` its way out)."""
    path = store.root / CATALOG_FILE
    sql_path = store.root / CATALOG_SQL_FILE
    current = ";\n".join(catalog_statements(store)) + ";\n"
    if not path.exists() or not sql_path.exists() or sql_path.read_text() != current:
        build_catalog(store)
    con = duckdb.connect(str(path), read_only=True, config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    readable = [str(store.root / part) + os.sep for part in ("artifacts", "reports")]
    # in this order: the allowed directories can only be set while external access is on
    con.execute(f"SET allowed_directories = [{', '.join(_quote(d) for d in readable)}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def query(store: ArtifactStore, sql: str) -> pa.Table:
    """Run one read-only query over the catalog and return an Arrow table; anything else (a
    second statement, COPY, ATTACH, INSTALL, SET, CREATE …) raises :class:`ReadOnlyQueryError`
    before it runs."""
    con = connect_readonly(store)
    try:
        statements = con.extract_statements(sql)
        if len(statements) != 1:
            raise ReadOnlyQueryError(f"expected one SQL statement, got {len(statements)}")
        kind = statements[0].type
        if kind not in READ_ONLY_STATEMENTS:
            raise ReadOnlyQueryError(f"{kind.name} statements are not allowed: the catalog is read-only (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN)")
        return con.sql(sql).to_arrow_table()
    finally:
        con.close()
