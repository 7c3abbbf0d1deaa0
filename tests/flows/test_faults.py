"""Faults for real: a pipeline process killed with SIGKILL in the middle of indexing, then run
again, finishes without redoing finished shards and without corrupt artifacts (training killed
after an epoch: tests/flows/test_training_flow.py, on the session's pipeline run); two runs at
once on one store do not corrupt each other.

The killed and concurrent runs are separate processes (the `baleen` CLI) that report to the
session's Prefect test server, exactly as a user's runs would."""

from __future__ import annotations

import os
import signal
import time

import pytest

from baleen_storage import ArtifactStore
from baleen_storage.catalog import query
from helpers import assert_no_partial_artifacts, kill_when, published, start_cli, temporary_servers_of


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


def test_sigkilled_index_update_resumes_and_leaves_nothing_retired_searchable(ingested_world, tiny_world):
    """A changed corpus (3 removed, 2 rewritten, 25 new passages: 3 delta shards of ≤ 10), its
    `baleen index` SIGKILLed once the first delta shard is published; the rerun reuses it, and
    the index holds every current passage once and nothing removed or replaced."""
    from baleen_core.config import SearchConfig
    from baleen_flows.index import index_flow
    from baleen_flows.ingest import corpus_flow
    from baleen_storage.indexes import open_searcher
    from helpers import change_beir_records

    store, tmp_path = ingested_world
    settings = "retriever: {device: cpu}\nindex: {rebuild_added_share: 0.5, "  # 27 of 118 passages new: an update, not a rebuild
    quick, slow = tmp_path / "quick.yaml", tmp_path / "slow.yaml"  # the same codec settings: the slow one updates the quick one's index
    quick.write_text(settings + "shard_passages: 40, batch_size: 16}\n")
    slow.write_text(settings + "shard_passages: 10, batch_size: 2}\n")  # small shards and batches: the kill lands mid-way
    base = index_flow(str(quick))["flipr_index"]
    changed = change_beir_records(tiny_world / "beir_corpus.jsonl.gz", remove=3, rewrite=2, add=25)
    corpus_flow(str(tiny_world))
    log = tmp_path / "killed-update.log"
    kill_when(start_cli(["index", "--config", str(slow)], store.root, log), lambda: "delta-shard-00000" in published(store.root, "flipr_shard"), log)

    before = {p: r for p, r in published(store.root, "flipr_shard").items() if p.startswith("delta-")}
    assert published(store.root, "flipr_index") == {"index": base.manifest.run_id}, "the update finished before the kill: nothing was tested"
    assert 1 <= len(before) < 3
    assert_no_partial_artifacts(store.root)

    refs = index_flow(str(slow))
    stats = refs["flipr_index"].manifest.stats
    assert stats["base_index"] == base.manifest.run_id and stats["changes"] == {"added": 25, "updated": 2, "removed": 3}
    delta = {s["producer"]: s["run_id"] for s in stats["shards"] if s["producer"].startswith("delta-")}
    assert len(delta) == 3 and {p: delta[p] for p in before} == before, "delta shards finished before the kill were encoded again"
    assert stats["n_positions"] == 118 + 27 and stats["dead_positions"] == 5 and stats["n_passages"] == 118 - 3 + 25
    assert_no_partial_artifacts(store.root)

    current = set(store.passage_ids(store.latest("passages", "corpus")).tolist())
    searcher, _ = open_searcher(store, SearchConfig(), device="cpu")
    queries = [r["text"] for r in changed["removed"]] + [r["text"] for r in changed["updated"]]
    for hits in searcher.exhaustive(queries, k=1000):
        pids = [h.pid for h in hits]
        assert len(pids) == len(set(pids)) == len(current) and set(pids) == current  # each current passage once, nothing else


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


def test_ctrl_c_ends_a_command_on_the_temporary_server_at_once_with_one_line(ingested_world):
    """SIGINT to the command's process group, as a terminal sends it, in the middle of encoding:
    at f597893 the temporary server died first and the command retried it for 6 minutes (rc 1,
    26 lines). Now: rc 130 promptly (the bound below only guards against a hang; the measured
    seconds are in docs/reliability.md), one line on stderr, no server left, nothing
    half-published."""
    from baleen_flows.interrupts import MESSAGE

    store, tmp_path = ingested_world
    config = tmp_path / "index.yaml"
    config.write_text("index: {shard_passages: 20, batch_size: 2}\nretriever: {device: cpu}\n")
    home, log, err = tmp_path / "prefect-home", tmp_path / "interrupted.log", tmp_path / "interrupted.err"
    run = start_cli(["index", "--config", str(config)], store.root, log, prefect_home=home, stderr=err)
    deadline = time.monotonic() + 300
    while "encode shard" not in log.read_text():  # the encoding's progress: tasks are running
        assert run.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:] + err.read_text()
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGINT)
    assert run.wait(timeout=30) == 130, log.read_text()[-3000:] + err.read_text()
    assert err.read_text() == MESSAGE
    assert "Crashed" in log.read_text()  # the runs were told they ended, on the server that was still up
    time.sleep(1)
    assert temporary_servers_of(home) == []
    assert not published(store.root, "flipr_index")
    assert_no_partial_artifacts(store.root)  # and a rerun resumes, as after a SIGKILL (the test above)


def test_two_commands_at_once_on_temporary_servers_neither_race_nor_duplicate(ingested_world):
    """At f597893 one temporary server crashed at start-up on the shared SQLite database
    (`table csrf_token already exists`) and both runs encoded the same shards. Now the second
    gets a database of its own, and waits for each shard, codec and index the first is making,
    then reuses it."""
    store, tmp_path = ingested_world
    config = tmp_path / "index.yaml"
    config.write_text("index: {shard_passages: 40, batch_size: 8}\nretriever: {device: cpu}\n")
    home = tmp_path / "prefect-home"
    logs = [tmp_path / f"index-{i}.log" for i in range(2)]
    runs = [start_cli(["index", "--config", str(config)], store.root, log, prefect_home=home) for log in logs]
    for run, log in zip(runs, logs, strict=True):
        assert run.wait(timeout=600) == 0, log.read_text()[-3000:]
    outputs = [log.read_text() for log in logs]
    assert sum("this one's runs go to a temporary database" in out for out in outputs) == 1, outputs
    for name in ("flipr_codec", "flipr_shard", "flipr_index"):
        manifests = list((store.root / "artifacts" / name).glob("run=*/producer=*/_manifest.json"))
        producers = [m.parent.name for m in manifests]
        assert len(producers) == len(set(producers)), f"{name} made twice: {sorted(producers)}"
    assert "waiting to reuse it" in "".join(outputs)
    assert temporary_servers_of(home) == [] and list(home.glob("temporary-prefect-*")) == []
    assert_no_partial_artifacts(store.root)
