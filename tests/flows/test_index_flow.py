"""The index flow end to end on a tiny demo world: artifacts, gate, SQL, the Dask path, CLI."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from baleen_storage import ArtifactStore
from baleen_storage.catalog import query
from baleen_storage.indexes import open_index
from helpers import change_beir_records, linked_store_copy


@dataclass
class IndexedWorld:
    store: ArtifactStore
    config: str
    refs: dict
    ingested: Path  # a copy of the store taken before indexing
    world: Path  # the upstream files it was ingested from


@pytest.fixture(scope="module")
def indexed_world(prefect_server, tmp_path_factory) -> IndexedWorld:
    """The tiny demo world ingested and indexed once for this module: 3 shards of ≤ 40 passages,
    fp16 copies kept (the Dask test compares vectors)."""
    from baleen_core.demo_world import write_demo_world
    from baleen_flows.index import index_flow
    from baleen_flows.ingest import ingest_flow
    from helpers import TINY

    tmp = tmp_path_factory.mktemp("indexed")
    store = ArtifactStore(tmp / "store")
    config = tmp / "config.yaml"
    config.write_text(f"store_root: {store.root}\nindex: {{shard_passages: 40, batch_size: 16, keep_fp16: true}}\nretriever: {{device: cpu}}\n")
    world = write_demo_world(tmp / "demo", TINY)
    ingest_flow(str(world), str(config))
    shutil.copytree(store.root, tmp / "ingested")
    return IndexedWorld(store, str(config), index_flow(str(config)), tmp / "ingested", world)


def test_index_flow_builds_a_validated_queryable_index(indexed_world):
    store, refs = indexed_world.store, indexed_world.refs
    stats = refs["flipr_index"].manifest.stats
    assert refs["index_passages"].rows == 118 and stats["n_passages"] == 118
    assert [s["passages"] for s in stats["shards"]] == [40, 40, 38]
    assert stats["bytes_per_token"] == 32 + 2 and stats["dim"] == 128 and stats["fp16_bytes_per_token"] == 2 * 128
    assert stats["n_tokens"] == sum(s["tokens"] for s in stats["shards"])
    rows = query(store, "SELECT count(*) AS n, sum(n_tokens) AS tokens FROM index_passages i JOIN passages p USING (pid)").to_pylist()
    assert rows == [{"n": 118, "tokens": stats["n_tokens"]}]
    gate = query(store, "SELECT success FROM validations WHERE artifact = 'index_passages'").to_pylist()
    assert gate == [{"success": True}]
    manifest = query(store, "SELECT stats->>'codec' AS codec FROM artifacts WHERE name = 'flipr_index'").to_pylist()
    assert manifest == [{"codec": "pq"}]

    index, _ = open_index(store)
    assert index.n_passages == 118 and index.n_tokens == stats["n_tokens"]


def test_dask_local_cluster_builds_the_same_index_as_sequential(indexed_world, tmp_path):
    """The shards as mapped tasks on a 2-worker Dask LocalCluster: same passages in the same
    places, same vectors within float tolerance, as one process encoding them in turn; and no Dask
    client, cluster or scheduler outlives the flow (a closed client kept DuckDB alive until exit, a
    closed cluster and distributed's handler cache kept the scheduler and the flow run's context:
    docs/known-issues.md)."""
    import gc

    from distributed import Client, LocalCluster, Scheduler

    from baleen_flows.index import index_flow

    store, sequential = indexed_world.store, indexed_world.refs
    dask_store = tmp_path / "dask-store"
    shutil.copytree(indexed_world.ingested, dask_store)  # the same ingested passages, not yet indexed
    config = tmp_path / "dask.yaml"
    config.write_text(
        f"store_root: {dask_store}\nindex: {{shard_passages: 40, batch_size: 16, keep_fp16: true}}\nretriever: {{device: cpu}}\n"
        "orchestration: {task_runner: dask, dask_workers: 2}\n"
    )
    dask = index_flow(str(config))
    gc.collect()
    survivors = [type(o).__name__ for o in gc.get_objects() if issubclass(type(o), (Client, LocalCluster, Scheduler))]  # type(), not isinstance: no lazy module attribute is touched
    assert not survivors, survivors

    columns = "pid, position, shard, n_tokens"
    assert query(store, f"SELECT {columns} FROM index_passages ORDER BY position").to_pylist() == query(
        ArtifactStore(dask_store), f"SELECT {columns} FROM index_passages ORDER BY position"
    ).to_pylist()
    assert [s["passages"] for s in dask["flipr_index"].manifest.stats["shards"]] == [40, 40, 38]
    for a, b in zip(sequential["flipr_index"].manifest.stats["shards"], dask["flipr_index"].manifest.stats["shards"], strict=True):
        assert a["producer"] == b["producer"] and a["tokens"] == b["tokens"]
        shard_a, shard_b = (r / "artifacts" / "flipr_shard" / f"run={s['run_id']}" / f"producer={s['producer']}" for r, s in ((store.root, a), (dask_store, b)))
        assert np.array_equal(np.load(shard_a / "pids.npy"), np.load(shard_b / "pids.npy"))
        assert np.array_equal(np.load(shard_a / "doclens.npy"), np.load(shard_b / "doclens.npy"))
        np.testing.assert_allclose(np.load(shard_a / "fp16.npy").astype(np.float32), np.load(shard_b / "fp16.npy").astype(np.float32), atol=2e-3)
        # centroid ids may differ only where a residual sits on a border between two centroids
        assert (np.load(shard_a / "codes.npy") == np.load(shard_b / "codes.npy")).mean() > 0.99


def test_search_cli_prints_ranked_passages_and_token_matches(indexed_world):
    from baleen_flows.cli import app

    store, config = indexed_world.store, indexed_world.config
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


def test_a_changed_corpus_updates_the_index_in_place(indexed_world, tmp_path):
    """The refresh flow on a corpus with removed, rewritten and new passages: only the rewritten
    and new ones are encoded (one delta shard), the removed and the old text are never found
    again, the new texts are; a second refresh publishes nothing."""
    from baleen_core.config import SearchConfig
    from baleen_core.retrieval import passage_text
    from baleen_flows.refresh import refresh_flow
    from baleen_storage.indexes import open_searcher

    store_dir, config = linked_store_copy(indexed_world.store.root, indexed_world.config, tmp_path)
    world = tmp_path / "world"
    shutil.copytree(indexed_world.world, world)
    changed = change_beir_records(world / "beir_corpus.jsonl.gz", remove=1, rewrite=1, add=2)

    store, base = ArtifactStore(store_dir), indexed_world.refs["flipr_index"]
    refreshed = refresh_flow(str(world), str(config))  # ingest what changed, then update the index
    refs = {name: refreshed[f"index/untrained/{name}"] for name in ("flipr_index", "index_passages")}
    stats = refs["flipr_index"].manifest.stats
    assert stats["base_index"] == base.manifest.run_id and stats["changes"] == {"added": 2, "updated": 1, "removed": 1}
    assert stats["passages_run"] == store.latest("passages", "corpus").manifest.run_id != base.manifest.stats["passages_run"]
    assert [s["passages"] for s in stats["shards"]] == [40, 40, 38, 3]  # the base's shards, reused, and one delta shard
    assert stats["shards"][:3] == base.manifest.stats["shards"]
    assert stats["n_positions"] == 121 and stats["dead_positions"] == 2 and stats["n_passages"] == refs["index_passages"].rows == 119
    assert stats["added_since_codec"] == 3 and stats["codec_passages"] == 118 and stats["rebuild_due"] is None
    # the tiny corpus trained its codec on every passage: no unseen token to measure its error on
    assert stats["delta_error"] > 0 and stats["codec_error"] is None
    assert query(store, f"SELECT success FROM validations WHERE artifact = 'index_passages' AND run_id = '{refs['flipr_index'].manifest.run_id}'").to_pylist() == [{"success": True}]

    searcher, ref = open_searcher(store, SearchConfig(nprobe=64, ncandidates=1000), device="cpu")
    assert ref.path == refs["flipr_index"].path  # the newest index is the updated one
    title_of = dict(zip(*(store.read_table(store.latest("passages", "corpus"), ["pid", "title"]).column(c).to_pylist() for c in ("pid", "title")), strict=True))
    (removed,), (updated,) = changed["removed"], changed["updated"]
    queries = [removed["text"], updated["text"], *(a["text"] for a in changed["added"])]
    for query_text, hits in zip(queries, searcher.search(queries, k=200), strict=True):
        found = [title_of.get(h.pid) for h in hits]
        assert None not in found and len(found) == 119, "a hit that is not in the current corpus"  # removed: never returned
        if query_text != removed["text"]:
            assert found[0] == next(r["title"] for r in [updated, *changed["added"]] if r["text"] == query_text)
    updated_pid = next(pid for pid, title in title_of.items() if title == updated["title"])
    new_text = passage_text(updated["title"], updated["text"])
    fresh = searcher.flipr.encode_passages([new_text], 1)[0]
    assert searcher.index.doclens[searcher.index.position_of_pid[updated_pid]] == len(fresh)  # its tokens are the new text's

    manifests = sorted(store_dir.glob("artifacts/*/run=*/producer=*/_manifest.json"))
    again = refresh_flow(str(world), str(config))  # nothing changed since: everything is reused, nothing new is published
    assert again["index/untrained/flipr_index"].path == refs["flipr_index"].path
    assert sorted(store_dir.glob("artifacts/*/run=*/producer=*/_manifest.json")) == manifests


def test_the_readmes_python_example_runs(indexed_world, tmp_path):
    """The README's Python block, on a copy of this module's store and world (its paths swapped
    for theirs): the refresh finds everything current, the added passage is found first, the
    index's history shows the addition and the deletion."""
    import ast
    import json
    import re

    _, config = linked_store_copy(indexed_world.store.root, indexed_world.config, tmp_path, "my-config.yaml")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    for placeholder, path in (("/data/my-corpus", indexed_world.world), ("my-config.yaml", config)):
        assert f'"{placeholder}"' in block
        block = block.replace(f'"{placeholder}"', repr(str(path)))
    lines: list[str] = []  # what the block prints (the flows' logs go to the console too)
    exec(compile(block, "README.md", "exec"), {"print": lambda *values: lines.append(" ".join(map(str, values)))})
    assert len(lines) == 4 and lines[0].startswith("Velmora Quay "), lines
    history = [json.loads(row["changes"]) if row["changes"] else None for row in ast.literal_eval(lines[3])]
    assert history == [None, {"added": 1, "updated": 0, "removed": 0}, {"added": 0, "updated": 0, "removed": 1}]
    # each call was a gated corpus delta, then the index updated; the deleted passage is gone
    from baleen_flows.api import Baleen

    baleen = Baleen(config)
    deltas = baleen.sql("SELECT stats->>'delta' AS delta FROM artifacts WHERE name = 'passages' AND stats->>'delta' IS NOT NULL ORDER BY created_at").column("delta").to_pylist()
    assert [json.loads(d) for d in deltas] == [
        {"kept": 118, "added": 1, "updated": 0, "unchanged": 0, "deleted": 0, "rejected": 0},
        {"kept": 118, "added": 0, "updated": 0, "unchanged": 0, "deleted": 1, "rejected": 0},
    ]
    assert "Velmora Quay" not in {hit["title"] for hit in baleen.search("Velmora Quay, a harbour wall", k=200)}
    assert baleen.delete(["Velmora Quay"])["index/flipr_index"].path == baleen.store.latest("flipr_index", "index").path  # nothing left to delete: nothing new
