"""The evaluation report's tables: the paired comparison of the full system with each baseline,
and where each system loses the gold passages."""

from __future__ import annotations

import pytest

from baleen_tasks.evaluation import COMPARED, difference_rows, differences_table, funnel_table


def _row(uid, hops, passage_f1, label_accuracy=1.0):
    return {"uid": uid, "num_hops": hops, "passage_f1": passage_f1, "sentence_f1": passage_f1, "retrieval_at_hops": 1.0, "label_accuracy": label_accuracy}


def test_differences_pair_claims_by_uid_per_hop_count():
    metric_rows = {
        "baleen": [_row("a", 2, 0.5), _row("b", 2, 1.0), _row("c", 3, 0.4, None), _row("d", 3, 0.2)],
        # another order, a claim baleen did not verify ("e"), and one it did that this one did not ("d")
        "bm25-multihop": [_row("c", 3, 0.1, 0.0), _row("e", 3, 0.9), _row("b", 2, 0.5), _row("a", 2, 0.5, 0.0)],
    }
    rows = {r["hops"]: r for r in difference_rows(metric_rows, "baleen", samples=200, seed=0)}
    assert set(rows) == {"2", "3", "all"} and {r["system"] for r in rows.values()} == {"baleen − bm25-multihop"}
    assert [rows[h]["claims"] for h in ("2", "3", "all")] == [2, 1, 3]
    assert rows["2"]["passage_f1"] == pytest.approx(0.25)  # (0.0 + 0.5) / 2
    assert rows["3"]["passage_f1"] == pytest.approx(0.3) and rows["3"]["passage_f1_ci"] == pytest.approx((0.3, 0.3)) and rows["3"]["passage_f1_p"] == 0.0
    assert rows["all"]["passage_f1"] == pytest.approx(0.8 / 3)
    assert rows["3"]["label_accuracy"] is None  # claim c has no label for baleen: nothing to pair
    assert rows["2"]["label_accuracy"] == pytest.approx(0.5) and rows["2"]["retrieval_at_hops"] == 0.0

    table = differences_table(list(rows.values()))
    assert "| baleen − bm25-multihop | 3 | 1 | +0.300 [+0.300, +0.300] p=0.000 |" in table and table.count("\n| baleen") == 3
    assert all(f"Δ {m}" in table for m in COMPARED)


def test_funnel_table_averages_each_stage_per_hop_count():
    def funnel(hops, retrieved, stage1, facts, sentences, n):
        return {"num_hops": hops, "gold_retrieved": retrieved, "gold_in_stage1": stage1, "gold_in_facts": facts, "sentence_recall": sentences, "final_facts": n}

    rows = {"baleen": [funnel(2, 1.0, 0.5, 0.5, 0.25, 10), funnel(2, 0.5, 0.5, 0.0, 0.0, 6), funnel(3, 1.0, 1.0, 2 / 3, 0.5, 9)]}
    table = funnel_table(rows)
    assert "| baleen | 2 | 2 | 0.750 | 0.500 | 0.250 | 0.125 | 8.0 |" in table
    assert "| baleen | 3 | 1 | 1.000 | 1.000 | 0.667 | 0.500 | 9.0 |" in table
    assert "| baleen | all | 3 | 0.833 | 0.667 | 0.389 | 0.250 | 8.3 |" in table


def test_the_plot_leaves_out_metrics_that_are_zero_for_every_system():
    from baleen_tasks.evaluation import METRICS, metrics_by_hops_plot, plotted_metrics

    summary = []
    for system in ("baleen", "bm25-multihop"):
        for hops in ("2", "all"):
            row = {m: 0.0 for m in METRICS} | {f"{m}_ci": (0.0, 0.0) for m in METRICS}
            row |= {"system": system, "hops": hops, "passage_f1": 0.5 if system == "baleen" else 0.0, "passage_f1_ci": (0.3, 1.0), "label_accuracy": 1.0, "label_accuracy_ci": (1.0, 1.0)}
            summary.append(row)
    assert plotted_metrics(summary) == ["passage_f1", "label_accuracy"]
    assert metrics_by_hops_plot(summary).startswith(b"\x89PNG")
