"""Validation gates: GX suites run on DuckDB over Parquet and fail with a readable summary."""

from __future__ import annotations

import json

import pytest

from baleen_storage.catalog import query
from baleen_tasks.gates import GateFailed, run_gate


def _write(store, name, rows, run="r1", producer="corpus", params=None):
    with store.writer(name, run_id=run, producer=producer, fingerprint="fp", params=params) as w:
        w.write(rows)
    return w.ref


def _passage_rows(pids, titles, n_sentences):
    n = len(pids)
    return {"pid": pids, "title": titles, "source": ["s"] * n, "source_id": [None] * n, "source_file": ["f"] * n,
            "source_line": list(range(n)), "n_sentences": n_sentences, "n_chars": [1] * n}


def test_good_corpus_passes_and_result_is_stored(store):
    refs = {
        "passages": _write(store, "passages", _passage_rows([1, 2], ["A", "B"], [2, 1])),
        "sentences": _write(store, "sentences", {"pid": [1, 1, 2], "sid": [0, 1, 0], "text": ["a", "b", "c"]}),
    }
    gate = run_gate(store, "passages", refs)
    assert gate.success and gate.evaluated == 7 and gate.failures == []
    assert json.loads(gate.report_path.read_text())["success"] is True
    assert run_gate(store, "sentences", refs).success
    rows = query(store, "SELECT artifact, success FROM validations ORDER BY artifact").to_pylist()
    assert rows == [{"artifact": "passages", "success": True}, {"artifact": "sentences", "success": True}]


def test_duplicate_keys_and_count_mismatch_fail_with_examples(store):
    refs = {
        "passages": _write(store, "passages", _passage_rows([1, 1, 3], ["A", "B", "B"], [1, 1, 5])),
        "sentences": _write(store, "sentences", {"pid": [1, 3], "sid": [0, 0], "text": ["a", "c"]}),
    }
    with pytest.raises(GateFailed) as failed:
        run_gate(store, "passages", refs)
    message = str(failed.value)
    assert "4/7 expectations passed" in message
    assert message.splitlines()[0].startswith("gate 'passages' failed and 2 more: ")  # what the CLI's one line shows
    assert "expect_column_values_to_be_unique(column=pid): 2 unexpected rows" in message
    assert "expect_column_values_to_be_unique(column=title): 2 unexpected rows" in message
    assert "n_sentences equals the passage's rows in sentences" in message
    summary = json.loads((store.root / "reports" / "r1" / "validation" / "corpus" / "passages.summary.json").read_text())
    assert summary["success"] is False and summary["failed"] == 3


def test_gaps_in_sentence_ids_fail(store):
    refs = {"sentences": _write(store, "sentences", {"pid": [1, 1, 2], "sid": [0, 2, 1], "text": ["a", "b", "c"]})}
    gate = run_gate(store, "sentences", refs, raise_on_failure=False)
    assert [(f["expectation"], f["unexpected"]) for f in gate.failures] == [("sentence ids run 0..n-1 without gaps in every passage", 2)]


def test_unresolved_gold_fact_and_bad_claim_values_fail(store):
    sentences = _write(store, "sentences", {"pid": [1], "sid": [0], "text": ["a"]})
    claims = _write(store, "claims", {
        "uid": ["u1", "u2"], "claim": ["c", "d"], "label": ["SUPPORTED", "MAYBE"], "num_hops": [2, 9], "split": ["dev", "dev"],
        "hpqa_id": [None, None], "n_facts": [2, 2], "n_resolved_facts": [2, 1], "n_gold_passages": [1, 1], "resolved": [True, True],
    }, producer="claims")
    facts = _write(store, "gold_facts", {"uid": ["u1", "u1"], "title": ["A", "A"], "sid": [0, 1], "pid": [1, 1]}, producer="claims")
    refs = {"sentences": sentences, "claims": claims, "gold_facts": facts}
    fact_gate = run_gate(store, "gold_facts", refs, raise_on_failure=False)
    assert [f["expectation"] for f in fact_gate.failures] == ["every gold fact resolves to a corpus sentence"]
    claim_gate = run_gate(store, "claims", refs, raise_on_failure=False)
    names = " ".join(f["expectation"] for f in claim_gate.failures)
    assert "label" in names and "num_hops" in names and "resolved claims have every fact resolved" in names


def test_a_concurrent_tmp_sweep_leaves_a_running_gate_alone(store, monkeypatch):
    # another run's catalog refresh sweeps tmp/ while this gate reads its views database
    from baleen_tasks import gates

    validate, swept = gates._validate, []

    def sweep_then_validate(db_path, artifact, expectations):
        swept.extend(store.sweep_tmp())
        return validate(db_path, artifact, expectations)

    monkeypatch.setattr(gates, "_validate", sweep_then_validate)
    refs = {
        "passages": _write(store, "passages", _passage_rows([1, 2], ["A", "B"], [2, 1])),
        "sentences": _write(store, "sentences", {"pid": [1, 1, 2], "sid": [0, 1, 0], "text": ["a", "b", "c"]}),
    }
    assert run_gate(store, "passages", refs).success and swept == []
    assert not any((store.root / "tmp").iterdir())  # the gate cleaned up after itself


def test_an_empty_artifact_fails_its_gate(store):
    refs = {"passages": _write(store, "passages", _passage_rows([], [], []))}
    with pytest.raises(GateFailed, match=r"^gate 'passages' failed: passages holds at least one row"):
        run_gate(store, "passages", refs)
    empty_rejects = _write(store, "rejects", {c: [] for c in ("artifact", "reason", "source_file", "line", "key", "detail", "record")})
    assert run_gate(store, "rejects", {"rejects": empty_rejects}).success  # no rejects is good news


def test_mostly_quarantined_input_fails_the_rejects_gate(store):
    from baleen_core.config import GateConfig

    facts = _write(store, "gold_facts", {"uid": ["u1"], "title": ["A"], "sid": [0], "pid": [1]}, producer="claims")
    n = 3  # 3 of 4 gold facts quarantined: 75%
    rejects = _write(store, "rejects", {
        "artifact": ["gold_facts"] * n, "reason": ["unknown_title"] * n, "source_file": ["claims_train.json"] * n,
        "line": [2, 9, 16], "key": ["u2|x|0", "u3|y|0", "u4|z|1"], "detail": ["no passage titled"] * n, "record": [None] * n,
    }, producer="claims")
    refs = {"gold_facts": facts, "rejects": rejects}
    with pytest.raises(GateFailed) as failed:
        run_gate(store, "rejects", refs)
    first_line = str(failed.value).splitlines()[0]
    assert first_line.startswith("gate 'rejects' failed: at most 20% of an artifact's rows are quarantined (gates.max_reject_share)")
    assert "gold_facts" in first_line and "unknown_title" in first_line and "(1 unexpected rows)" in first_line
    assert run_gate(store, "rejects", refs, GateConfig(max_reject_share=0.75)).success  # exactly at the limit passes


def _trace_row(uid, hop, stage2, kept, evidence, pool):
    """One hop_traces row: facts as (pid, sid) pairs, scores made up."""

    def facts(prefix, pairs):
        return {f"{prefix}_pids": [p for p, _ in pairs], f"{prefix}_sids": [s for _, s in pairs], f"{prefix}_scores": [0.0] * len(pairs)}

    return {"system": "baleen", "uid": uid, "hop": hop, "retrieved_pids": [p for p, _ in stage2], "retrieved_scores": [0.0] * len(stage2), "pool_pids": pool,
            **facts("stage1", []), **facts("stage2", stage2), **facts("kept", kept), **facts("evidence", evidence)}


def test_hop_traces_whose_evidence_breaks_the_l3x_rule_fail(store):
    import pyarrow as pa

    from baleen_schemas import HOP_TRACES

    read = [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]
    good = [_trace_row("a", 1, read, read[:1], read[:3], [1, 2, 3]), _trace_row("a", 2, read, [], read[:4], [4, 5])]
    refs = {"hop_traces": _write(store, "hop_traces", pa.Table.from_pylist(good, schema=HOP_TRACES.schema), producer="reader-facts")}
    assert run_gate(store, "hop_traces", refs).success
    bad = [
        _trace_row("b", 1, read, [], read, [1, 2]),  # 5 passages of evidence
        _trace_row("c", 1, read, [], read[:1], [1]),  # one fact though stage 2 read five
        _trace_row("d", 1, read, [(9, 0)], read[:2], [1]),  # a context fact stage 2 never read
        _trace_row("e", 2, read, [], read[:2], [1]),  # hops do not start at 1
        _trace_row("f", 1, read, [], read[:2], [1, 2]), _trace_row("f", 2, read, [], read[:2], [2]),  # passage 2 enters the pool twice
    ]
    refs = {"hop_traces": _write(store, "hop_traces", pa.Table.from_pylist(bad, schema=HOP_TRACES.schema), run="r2", producer="reader-facts")}
    gate = run_gate(store, "hop_traces", refs, raise_on_failure=False)
    assert sorted(f["unexpected"] for f in gate.failures) == [2, 3]  # b, c, d by row; e, f by claim


def test_hop_traces_are_checked_against_the_evidence_rule_the_engine_ran_with(store):
    import pyarrow as pa

    from baleen_schemas import HOP_TRACES

    read = [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]
    rows = pa.Table.from_pylist([_trace_row("b", 1, read, [], read, [1, 2])], schema=HOP_TRACES.schema)  # 5 facts from 5 passages
    five = {"condenser": {"evidence_min_facts": 2, "evidence_max_passages": 5}}
    refs = {"hop_traces": _write(store, "hop_traces", rows, producer="reader-facts", params=five)}
    assert run_gate(store, "hop_traces", refs).success
    three = {"condenser": {"evidence_min_facts": 3, "evidence_max_passages": 5}}
    short = pa.Table.from_pylist([_trace_row("c", 1, read, [], read[:2], [1])], schema=HOP_TRACES.schema)  # 2 facts where 3 were due
    refs = {"hop_traces": _write(store, "hop_traces", short, run="r2", producer="reader-facts", params=three)}
    assert not run_gate(store, "hop_traces", refs, raise_on_failure=False).success
