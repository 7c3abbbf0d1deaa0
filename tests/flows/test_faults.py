"""Faults for real: a pipeline process killed with SIGKILL in the middle of indexing or training,
then run again, finishes without redoing finished shards or epochs and without corrupt
artifacts; two runs at once on one store do not corrupt each other.

The killed and concurrent runs are separate processes (the `baleen` CLI) that report to the
session's Prefect test server, exactly as a user's runs would."""

from __future__ import annotations

import pytest

from baleen_storage import ArtifactStore
from baleen_storage.catalog import query
from helpers import assert_no_partial_artifacts, kill_when, published, start_cli


@pytest.fixture
def ingested_world(prefect_server, tiny_world, tmp_path, monkeypatch):
    from baleen_flows.ingest import ingest_flow

    monkeypatch.setenv("BALEEN_STORE", str(tmp_path / "store"))
    ingest_flow(str(tiny_world))
    return ArtifactStore(tmp_path / "store"), tmp_path


def test_sigkilled_index_run_resumes_without_redoing_shards(ingested_world):
    from baleen_flows.index import index_flow
    from baleen_storage.indexes import open_index

    store, tmp_path = ingested_world
    config = tmp_path / "index.yaml"  # 6 shards of ≤ 20 passages, small batches: the kill lands mid-way
    config.write_text("index: {shard_passages: 20, batch_size: 4}\nretriever: {device: cpu}\n")
    log = tmp_path / "killed.log"
    run = start_cli(["index", "--config", str(config)], store.root, log)
    kill_when(run, lambda: "shard-00000" in published(store.root, "flipr_shard"), log)

    before = published(store.root, "flipr_shard")
    assert not published(store.root, "flipr_index"), "the run finished before the kill: nothing was tested"
    assert 1 <= len(before) < 6
    assert_no_partial_artifacts(store.root)

    refs = index_flow(str(config))
    shards = {s["producer"]: s["run_id"] for s in refs["flipr_index"].manifest.stats["shards"]}
    assert len(shards) == 6
    assert {p: shards[p] for p in before} == before, "shards finished before the kill were encoded again"
    rerun = refs["flipr_index"].manifest.run_id
    assert all(run_id == rerun for p, run_id in shards.items() if p not in before)
    assert_no_partial_artifacts(store.root)
    assert list((store.root / "tmp").iterdir()) == [], "the rerun's catalog refresh sweeps the killed run's tmp/ debris"
    index, _ = open_index(store)
    assert index.n_passages == 118
    assert query(store, "SELECT bool_and(success) AS ok FROM validations WHERE artifact = 'index_passages'").to_pylist() == [{"ok": True}]


def test_sigkilled_training_run_resumes_at_the_last_finished_epoch(pipeline_world):
    """The session's pipeline (conftest.py) ran after a `baleen train` SIGKILLed as soon as
    FLIPR's first epoch was checkpointed."""
    store, refs, killed = pipeline_world.store, pipeline_world.refs, pipeline_world.killed
    assert not killed.published["flipr_checkpoint"], "FLIPR finished before the kill: nothing was tested"
    assert killed.epoch0_steps and {s["epoch"] for s in killed.epoch0_steps} == {0}

    steps = refs["training/flipr-r0/steps"].manifest
    rows = query(store, f"SELECT epoch, step, loss, seconds FROM training_steps WHERE run = '{steps.run_id}' AND producer = '{steps.producer}' ORDER BY step").to_pylist()
    # the finished epoch's steps come back from its checkpoint bit for bit (a redone epoch would
    # have new timings); the second epoch was trained after the resume
    assert [r for r in rows if r["epoch"] == 0] == [{k: s[k] for k in ("epoch", "step", "loss", "seconds")} for s in killed.epoch0_steps]
    assert {r["epoch"] for r in rows} == {0, 1}
    assert published(store.root, "hop_labels")["labels-r0"] == killed.published["hop_labels"]["labels-r0"], "round-0 labels were redone"
    assert not list(store.root.glob("work/flipr-*")), "epoch checkpoints (and their locks) are removed once the model is published"
    assert_no_partial_artifacts(store.root)
    assert list((store.root / "tmp").iterdir()) == []


def test_two_concurrent_runs_on_one_store_do_not_corrupt_each_other(prefect_server, tiny_world, tmp_path):
    store = ArtifactStore(tmp_path / "store")
    logs = [tmp_path / f"run-{i}.log" for i in range(2)]
    runs = [start_cli(["corpus", str(tiny_world), "--force"], store.root, log) for log in logs]
    for run, log in zip(runs, logs, strict=True):
        assert run.wait(timeout=600) == 0, log.read_text()[-3000:]

    manifests = list((store.root / "artifacts" / "passages").glob("run=*/producer=corpus/_manifest.json"))
    assert len(manifests) == 2, "each run publishes under its own run id"
    assert_no_partial_artifacts(store.root)
    counts = query(store, "SELECT run, count(*) AS n, count(DISTINCT pid) AS pids FROM passages GROUP BY run").to_pylist()
    assert [(r["n"], r["pids"]) for r in counts] == [(118, 118), (118, 118)]
    same = query(
        store,
        "SELECT count(*) AS n FROM (SELECT pid, title, source_line, n_sentences, n_chars FROM passages WHERE run = (SELECT min(run) FROM passages) "
        "INTERSECT SELECT pid, title, source_line, n_sentences, n_chars FROM passages WHERE run = (SELECT max(run) FROM passages))",
    ).to_pylist()
    assert same == [{"n": 118}], "the two runs wrote different passages from the same input"
    gates = query(store, "SELECT count(*) AS n, bool_and(success) AS ok FROM validations WHERE artifact = 'passages'").to_pylist()
    assert gates == [{"n": 2, "ok": True}]
