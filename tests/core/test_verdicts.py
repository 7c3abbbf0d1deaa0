"""Verdicts as rows: what the evaluation stores and the per-claim metrics it scores, worked by hand."""

from __future__ import annotations

import pytest

from baleen_core.condensing import Sentence
from baleen_core.engine import HopTrace, Verdict
from baleen_core.verdicts import claim_metric_rows, prediction_rows, trace_rows


def fact(pid: int, sid: int) -> Sentence:
    return Sentence(pid, sid, f"T{pid}", f"sentence {sid} of {pid}")


def two_hop_verdict() -> Verdict:
    """Gold passages 1 and 2: passage 1 enters the pool at hop 1, passage 2 at hop 2; stage 1
    puts forward passage 1 only at hop 1; the final facts are (1, 0) and (3, 0)."""
    hop1 = HopTrace(1, [(1, 9.0), (3, 8.0)], [(fact(1, 0), 2.0)], [(fact(1, 0), 1.5)], [(fact(1, 0), 1.5), (fact(3, 0), 0.2)], [1, 3])
    hop2 = HopTrace(2, [(2, 7.0), (3, 6.0)], [(fact(3, 0), 1.0)], [(fact(1, 0), 1.2)], [(fact(1, 0), 1.2), (fact(3, 0), 0.1)], [2])
    return Verdict("c1", 0.8, hop2.evidence, [hop1, hop2])


def test_rows_of_a_verdict():
    verdict = two_hop_verdict()
    (prediction,) = prediction_rows("baleen", [verdict])
    assert prediction["label"] == "SUPPORTED" and prediction["hops"] == 2
    assert (prediction["fact_pids"], prediction["fact_sids"], prediction["fact_scores"]) == ([1, 3], [0, 0], [1.2, 0.1])
    traces = trace_rows("baleen", [verdict])
    assert [t["hop"] for t in traces] == [1, 2] and [t["pool_pids"] for t in traces] == [[1, 3], [2]]
    assert traces[1]["stage1_pids"] == [3] and traces[0]["retrieved_scores"] == [9.0, 8.0]


def test_claim_metrics_worked_by_hand():
    verdict = two_hop_verdict()
    claims = {"c1": {"claim": "…", "label": "NOT_SUPPORTED", "num_hops": 2}}
    gold = {"c1": {(1, 0), (2, 0)}}
    traces = list(reversed(trace_rows("baleen", [verdict])))  # stored order does not matter: rows are sorted by hop
    (row,) = claim_metric_rows(prediction_rows("baleen", [verdict]), traces, claims, gold, depth=4)
    # final passages {1, 3} against gold {1, 2}: P = R = 1/2; facts {(1,0), (3,0)} against {(1,0), (2,0)}: the same
    assert row["passage_f1"] == pytest.approx(0.5) and row["sentence_f1"] == pytest.approx(0.5) and row["passage_em"] == 0
    assert row["retrieval_at_depth"] == 1  # both gold passages are in the pool [1, 3, 2]
    assert row["gold_first_hop"] == [1, 2]  # passage 1 entered the pool at hop 1, passage 2 at hop 2
    assert (row["gold_retrieved"], row["gold_in_stage1"], row["gold_in_facts"]) == (1.0, 0.5, 0.5)
    assert row["label"] == "SUPPORTED" and row["gold_label"] == "NOT_SUPPORTED" and row["label_accuracy"] == 0
    assert (row["final_facts"], row["final_passages"], row["depth"], row["num_hops"]) == (2, 2, 4, 2)
