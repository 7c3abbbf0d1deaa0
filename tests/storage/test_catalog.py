"""DuckDB catalog: views over every run with run/producer columns; read-only access."""

from __future__ import annotations

import duckdb
import pytest

from baleen_storage.catalog import CATALOG_FILE, build_catalog, connect_readonly, query
from test_store import _passages


def _publish(store, run, n):
    with store.writer("passages", run_id=run, producer="corpus", fingerprint=run) as w:
        w.write(_passages(n))


def test_views_cover_all_runs_with_a_run_column(store):
    _publish(store, "r1", 2)
    _publish(store, "r2", 3)
    rows = query(store, "SELECT run, producer, count(*) AS n FROM passages GROUP BY ALL ORDER BY run").to_pylist()
    assert rows == [{"run": "r1", "producer": "corpus", "n": 2}, {"run": "r2", "producer": "corpus", "n": 3}]
    manifests = query(store, "SELECT name, run_id, rows FROM artifacts ORDER BY run_id").to_pylist()
    assert manifests == [{"name": "passages", "run_id": "r1", "rows": 2}, {"name": "passages", "run_id": "r2", "rows": 3}]


def test_artifacts_without_files_have_empty_typed_views(store):
    assert query(store, "SELECT count(*) AS n FROM gold_facts").to_pylist() == [{"n": 0}]
    assert query(store, "SELECT * FROM sentences").column_names == ["pid", "sid", "text", "run", "producer"]


def test_catalog_file_opens_in_any_duckdb_client_and_refreshes(store):
    path = build_catalog(store)
    assert path == store.root / CATALOG_FILE
    _publish(store, "r1", 4)  # first files of passages: the view must switch from empty to the glob
    with connect_readonly(store) as con:
        assert con.execute("SELECT count(*) FROM passages").fetchone() == (4,)


def test_catalog_is_read_only(store):
    _publish(store, "r1", 1)
    con = connect_readonly(store)
    try:
        with pytest.raises(duckdb.Error):
            con.execute("CREATE TABLE x AS SELECT 1")
        with pytest.raises(duckdb.Error):
            con.execute("DROP VIEW passages")
    finally:
        con.close()


def test_sql_cannot_write_nor_read_outside_the_store(store, tmp_path):
    """Every statement kind that could touch something outside the catalog is refused, and no
    file appears anywhere."""
    from baleen_storage.catalog import ReadOnlyQueryError

    _publish(store, "r1", 2)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_text("a,b\n1,2\n")
    inside = store.root / "artifacts" / "x.csv"
    refused = {
        "COPY out": f"COPY (SELECT 1) TO '{outside / 'x.csv'}'",
        "COPY into the store": f"COPY (SELECT 1) TO '{inside}'",
        "ATTACH": f"ATTACH '{outside / 'other.duckdb'}' AS other",
        "INSTALL": "INSTALL httpfs",
        "LOAD": "LOAD httpfs",
        "SET": "SET enable_external_access = true",
        "RESET": "RESET lock_configuration",
        "CREATE": "CREATE TEMP TABLE t AS SELECT 1",
        "EXPORT": f"EXPORT DATABASE '{outside / 'export'}'",
        "PRAGMA": "PRAGMA enable_profiling",
        "two statements": "SELECT 1; SELECT 2",
    }
    for name, sql in refused.items():
        keyword = "" if name == "two statements" else sql.split()[0]  # named as written: INSTALL is DuckDB's LOAD kind
        with pytest.raises(ReadOnlyQueryError, match=f"^{keyword}" if keyword else "expected one SQL statement"):
            query(store, sql)
    # a query is allowed, but the files it may read are the store's artifacts and reports only
    for sql in (f"SELECT * FROM read_csv('{outside / 'secret.csv'}')", "SELECT * FROM read_csv('/etc/passwd')",
                f"SELECT * FROM read_parquet('{outside}/*.parquet')", "SELECT * FROM glob('/etc/*')", f"SELECT * FROM read_text('{store.root / 'catalog.sql'}')"):
        with pytest.raises(duckdb.PermissionException):
            query(store, sql)
    assert query(store, f"SELECT count(*) AS n FROM read_parquet('{store.parquet_glob('passages')}')").to_pylist() == [{"n": 2}]
    assert query(store, "EXPLAIN SELECT * FROM passages").num_rows >= 1
    assert sorted(p.name for p in outside.iterdir()) == ["secret.csv"] and not inside.exists()
    # and a connection cannot be unlocked by hand either
    con = connect_readonly(store)
    try:
        with pytest.raises(duckdb.Error):
            con.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.Error):
            con.execute(f"COPY (SELECT 1) TO '{outside / 'y.csv'}'")
    finally:
        con.close()


def test_rows_stream_in_batches_and_only_those_read_are_computed(store):
    """A query's rows arrive in batches as they are read: a row past the first batches is never
    computed (DuckDB's error() would raise on it), which holding the whole result would do."""
    from baleen_storage.catalog import stream

    sql = "SELECT i, CASE WHEN i = 5000000 THEN error('row 5,000,000 was computed') ELSE i END AS v FROM range(10000000) t(i)"
    with stream(store, sql, batch_rows=1000) as reader:
        first = reader.read_next_batch()
    assert first.num_rows == 1000 and first.column("v").to_pylist()[:3] == [0, 1, 2]
    with pytest.raises(duckdb.Error, match="row 5,000,000 was computed"):
        query(store, sql)  # reading them all does reach it


def test_duckdb_advice_to_set_a_limit_becomes_what_a_user_of_the_read_only_catalog_can_do(store):
    deep = "SELECT " + " + ".join(["1"] * 3000)
    with pytest.raises(duckdb.Error) as raised:
        query(store, deep)
    assert "Max expression depth limit of 1000 exceeded" in str(raised.value) and "SET" not in str(raised.value)
    assert "simplify the query, or open the catalog in a DuckDB client of your own" in str(raised.value)

    from baleen_storage.catalog import stream

    with pytest.raises(duckdb.OutOfMemoryException) as raised, stream(store, "SELECT count(*) FROM (SELECT * FROM range(30000000) ORDER BY random())", memory_limit="50MB") as reader:
        reader.read_all()
    message = str(raised.value)
    assert "SET" not in message and "Possible solutions" not in message
    assert message.endswith("(the query needs more than its memory limit, 50MB: raise it with `baleen sql --memory-limit`, or narrow the query)")
