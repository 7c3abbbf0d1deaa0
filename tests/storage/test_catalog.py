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
