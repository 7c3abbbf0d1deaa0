"""The index flow end to end on a tiny demo world: artifacts, gate, SQL, resume after a crash, CLI."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from baleen_storage import ArtifactStore
from baleen_storage.catalog import query
from baleen_storage.indexes import open_index


@pytest.fixture
def indexed_world(prefect_server, tiny_world, tmp_path, monkeypatch):
    """A tiny demo world ingested into a fresh store, and a config with 3 shards of ≤ 40 passages."""
    from baleen_flows.ingest import ingest_flow

    monkeypatch.setenv("BALEEN_STORE", str(tmp_path / "store"))
    ingest_flow(str(tiny_world))
    config = tmp_path / "config.yaml"
    config.write_text("index:\n  shard_passages: 40\n  batch_size: 16\nretriever:\n  device: cpu\n")
    return ArtifactStore(tmp_path / "store"), str(config)


def test_index_flow_builds_a_validated_queryable_index(indexed_world):
    from baleen_flows.index import index_flow

    store, config = indexed_world
    refs = index_flow(config)
    stats = refs["flipr_index"].manifest.stats
    assert refs["index_passages"].rows == 118 and stats["n_passages"] == 118
    assert [s["passages"] for s in stats["shards"]] == [40, 40, 38]
    assert stats["bytes_per_token"] == 32 + 2 and stats["dim"] == 128
    assert stats["n_tokens"] == sum(s["tokens"] for s in stats["shards"])
    rows = query(store, "SELECT count(*) AS n, sum(n_tokens) AS tokens FROM index_passages i JOIN passages p USING (pid)").to_pylist()
    assert rows == [{"n": 118, "tokens": stats["n_tokens"]}]
    gate = query(store, "SELECT success FROM validations WHERE artifact = 'index_passages'").to_pylist()
    assert gate == [{"success": True}]
    manifest = query(store, "SELECT stats->>'codec' AS codec FROM artifacts WHERE name = 'flipr_index'").to_pylist()
    assert manifest == [{"codec": "pq"}]

    index, _ = open_index(store)
    assert index.n_passages == 118 and index.n_tokens == stats["n_tokens"]


def test_killed_index_run_resumes_at_the_first_unfinished_shard(indexed_world, monkeypatch):
    import baleen_tasks.index as index_tasks
    from baleen_flows.index import index_flow

    store, config = indexed_world
    real_encode, calls = index_tasks.encode_shard, []

    def crash_on_second_shard(*args, **kwargs):
        calls.append(len(args[2]))
        if len(calls) == 2:
            raise RuntimeError("simulated crash in shard 1")
        return real_encode(*args, **kwargs)

    monkeypatch.setattr(index_tasks, "encode_shard", crash_on_second_shard)
    with pytest.raises(RuntimeError, match="simulated crash"):
        index_flow(config)
    assert [r.manifest.producer for r in store.refs("flipr_shard")] == ["shard-00000"]
    assert store.refs("flipr_index") == [] and not list((store.root / "tmp").glob("flipr_shard-*"))

    calls.clear()
    monkeypatch.setattr(index_tasks, "encode_shard", lambda *a, **k: calls.append(len(a[2])) or real_encode(*a, **k))
    refs = index_flow(config)
    assert calls == [40, 38]  # shard 0 and the codec were reused, only shards 1 and 2 encoded
    assert len(store.refs("flipr_codec")) == 1 and refs["index_passages"].rows == 118


def test_search_cli_prints_ranked_passages_and_token_matches(indexed_world):
    from baleen_flows.cli import app
    from baleen_flows.index import index_flow

    store, config = indexed_world
    index_flow(config)
    claim = query(store, "SELECT claim FROM claims ORDER BY uid LIMIT 1").to_pylist()[0]["claim"]
    result = CliRunner().invoke(app, ["search", claim, "-k", "3", "--explain", "1", "--context", "Somewhere | A fact about it.", "--config", config])
    assert result.exit_code == 0, result.output
    assert "118 passages" in result.output and "  1. " in result.output and "  3. " in result.output
    assert "claim (32 of 64 positions count)" in result.output
    assert "context (8 of" in result.output


def test_search_cli_without_an_index_says_what_to_run(prefect_server, tmp_path):
    from baleen_flows.cli import app

    result = CliRunner().invoke(app, ["search", "anything", "--store", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "flipr_index" in result.output
