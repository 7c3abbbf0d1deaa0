"""Flows end to end on a real (test) Prefect server: demo world and hover-mini."""

from __future__ import annotations

import pytest

from baleen_storage import ArtifactStore
from baleen_storage.catalog import query



@pytest.fixture
def store_env(tmp_path, monkeypatch):
    monkeypatch.setenv("BALEEN_STORE", str(tmp_path / "store"))
    return ArtifactStore(tmp_path / "store")


def test_ingest_flow_on_demo_world_reconciles_and_reuses(prefect_server, store_env, tiny_world):
    from baleen_flows.ingest import ingest_flow

    data = tiny_world
    first = ingest_flow(str(data))
    assert first["corpus/passages"].rows == 40 + 20 + 10 + 10 + 12 + 5 + 6 + 15  # = 118
    assert first["claims/claims"].rows == 42 and first["claims/rejects"].rows == 0
    counts = query(store_env, "SELECT (SELECT count(*) FROM gold_facts) AS facts, (SELECT sum(n_facts) FROM claims) AS listed").to_pylist()
    assert counts == [{"facts": first["claims/gold_facts"].rows, "listed": first["claims/gold_facts"].rows}]
    assert query(store_env, "SELECT bool_and(success) AS ok, count(*) AS n FROM validations").to_pylist() == [{"ok": True, "n": 6}]

    second = ingest_flow(str(data))  # unchanged inputs: every artifact is reused, nothing recomputed
    assert {k: v.path for k, v in second.items()} == {k: v.path for k, v in first.items()}
    assert first["corpus/passages"].manifest.flow_run_id is not None


def test_bad_input_is_quarantined_and_counts_reconcile(prefect_server, store_env, tiny_world):
    import bz2
    import json

    from baleen_flows.ingest import ingest_flow

    data = tiny_world
    extra = data / "wiki" / "AB" / "wiki_00.bz2"
    extra.parent.mkdir()
    lines = [json.dumps({"id": "x1", "title": "The Broken", "text": []}), "{not json", json.dumps({"id": "x2", "title": "Dorvenven"})]
    extra.write_bytes(bz2.compress(("\n".join(lines) + "\n").encode()))
    claims = json.loads((data / "claims_dev.json").read_text())
    claims[0]["supporting_facts"].append(["No Such Page", 0])
    (data / "claims_dev.json").write_text(json.dumps(claims))

    refs = ingest_flow(str(data))
    corpus_in = query(store_env, "SELECT sum(rows) AS n FROM artifacts WHERE producer = 'corpus' AND name IN ('passages', 'rejects')").to_pylist()
    assert corpus_in == [{"n": 118 + 3}]  # 118 good passages + 3 rejected rows = every input row
    reasons = query(store_env, "SELECT artifact, reason FROM rejects ORDER BY ALL").to_pylist()
    assert reasons == [
        {"artifact": "gold_facts", "reason": "unknown_title"},
        {"artifact": "passages", "reason": "empty_text"},
        {"artifact": "passages", "reason": "invalid_json"},
        {"artifact": "passages", "reason": "missing_field"},
    ]
    flagged = query(store_env, "SELECT uid FROM claims WHERE NOT resolved").to_pylist()
    assert flagged == [{"uid": claims[0]["uid"]}] and refs["claims/claims"].rows == 42


@pytest.mark.hover_mini
def test_hover_mini_ingests_with_zero_rejects(prefect_server, store_env, hover_mini):
    from baleen_flows.ingest import ingest_flow

    refs = ingest_flow(str(hover_mini))
    assert refs["corpus/passages"].rows == 31_235 and refs["corpus/rejects"].rows == 0
    assert refs["claims/claims"].rows == 1_435 and refs["claims/rejects"].rows == 0
    rows = query(store_env, "SELECT split, count(*) AS n, bool_and(resolved) AS all_resolved FROM claims GROUP BY split ORDER BY split").to_pylist()
    assert rows == [{"split": "dev", "n": 383, "all_resolved": True}, {"split": "train", "n": 1052, "all_resolved": True}]
