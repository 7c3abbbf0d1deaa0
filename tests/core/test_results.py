"""Benchmark results files: the shape every benchmarks/results/*.json shares, hand-worked values,
and the README table generated from one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from baleen_core.results import RESULT_METRICS, carried_claim_rows, claim_rows_from_results, majority_class, paired_results, pooled_claim_rows, results_document, results_json, results_table, write_results


def _row(uid, hops, passage_f1, facts=3, label="SUPPORTED", passages=2, depth=100):
    base = dict.fromkeys(RESULT_METRICS, 1.0)
    return {**base, "uid": uid, "num_hops": hops, "passage_f1": passage_f1, "final_facts": facts, "final_passages": passages, "gold_label": label, "depth": depth}


def test_results_document_has_the_shared_shape_and_hand_worked_values():
    rows = {
        "baleen": [_row("a", 2, 1.0, 5), _row("b", 2, 0.5), _row("c", 3, 0.0, 2, "NOT_SUPPORTED")],
        "bm25-multihop": [_row("a", 2, 0.5), _row("b", 2, 0.5), _row("c", 3, 0.5, 4, "NOT_SUPPORTED")],
    }
    rows["baleen"][0]["final_passages"] = 4
    doc = results_document(rows, {"baleen": 0.25, "bm25-multihop": None}, "dev", 12.34, {"rounds": 1}, samples=200, unresolved_claims=7)
    assert set(doc) == {"commit", "date", "machine", "split", "claims", "unresolved_claims", "depth", "wall_seconds", "majority_class", "budgets", "systems", "paired"}
    assert doc["claims"] == 3 and doc["wall_seconds"] == 12.3 and doc["majority_class"] == pytest.approx(2 / 3)
    assert doc["unresolved_claims"] == 7 and doc["depth"] == 100
    baleen = doc["systems"]["baleen"]
    assert set(baleen) == {"2", "3", "all"}
    assert baleen["2"]["passage_f1"]["mean"] == pytest.approx(0.75) and baleen["2"]["max_final_facts"] == 5 and baleen["3"]["max_final_facts"] == 2
    assert (baleen["2"]["min_final_facts"], baleen["all"]["min_final_facts"], baleen["2"]["max_final_passages"], baleen["3"]["max_final_passages"]) == (3, 2, 4, 2)
    assert baleen["all"]["passage_f1"]["lo"] <= 0.5 <= baleen["all"]["passage_f1"]["hi"] and baleen["all"]["claims_per_s"] == 0.25
    paired = doc["paired"]["baleen-bm25-multihop"]
    assert paired["2"]["passage_f1"]["mean"] == pytest.approx(0.25) and paired["3"]["passage_f1"] == {"mean": -0.5, "lo": -0.5, "hi": -0.5}
    assert set(paired["all"]) == set(RESULT_METRICS)
    json.dumps(doc)  # a results file is plain JSON

    table = results_table(doc)
    assert "| baleen | 2 | 2 | 1.000 [1.000, 1.000] | 0.750 [" in table
    assert "| baleen-bm25-multihop | 3 | +1.000" not in table and "| baleen-bm25-multihop | 3 | +0.000 [+0.000, +0.000] | -0.500 [-0.500, -0.500] |" in table
    assert "majority class 0.667" in table and "3 dev claims (7 left out: a gold fact did not resolve)" in table
    assert "| retrieval@100 |" in table and "| final facts | max passages | claims/s |" in table and "| 2–5 | 4 | 0.250 |" in table
    demo = results_document({"baleen": [_row("a", 2, 1.0, depth=30)]}, {}, "dev", None, samples=20)
    assert demo["depth"] == 30 and "| retrieval@30 |" in results_table(demo)  # named by the depth it measures


def test_an_older_results_file_keeps_its_retrieval_at_100_column():
    rows = {"baleen": [_row("a", 2, 1.0), _row("b", 3, 0.5)]}
    doc = results_document(rows, {}, "dev", None, samples=20)
    for block in doc["systems"]["baleen"].values():  # a file written before the metric was named by its depth
        block["retrieval_at_100"] = block.pop("retrieval_at_depth")
        del block["min_final_facts"], block["max_final_passages"]
    for key in ("depth", "unresolved_claims"):
        del doc[key]
    doc["paired"] = {}
    table = results_table(doc)
    assert table.splitlines()[0] == "| system | hops | claims | passage_em | passage_f1 | sentence_f1 | retrieval_at_100 | label_accuracy | hover_score | max facts | claims/s |"


def test_two_packs_pooled_pair_and_resample_over_every_claim_of_both():
    """Pack 1: the lever gains 0.5 on one claim of two; pack 2: it loses 0.25 on its one claim.
    Pooled over the three claims the paired mean is (0.5 + 0 - 0.25) / 3, not the mean of the two
    packs' means ((0.25 - 0.25) / 2 = 0)."""
    lever = pooled_claim_rows([[_row("p1-a", 2, 1.0), _row("p1-b", 3, 0.5)], [_row("p2-a", 2, 0.25)]])
    base = pooled_claim_rows([[_row("p1-a", 2, 0.5), _row("p1-b", 3, 0.5)], [_row("p2-a", 2, 0.5)]])
    assert [r["uid"] for r in lever] == ["p1-a", "p1-b", "p2-a"]
    paired = paired_results(lever, base, samples=200)
    assert paired["all"]["passage_f1"]["mean"] == pytest.approx(0.25 / 3) and paired["2"]["passage_f1"]["mean"] == pytest.approx(0.125)



def test_a_claim_held_out_in_two_packs_counts_once_from_the_first():
    """p1-a is in both packs; pack 2's p1-a (F1 0.0) is left out, so the lever's gain on it in
    pack 1 (1.0 against 0.5) counts once: (0.5 + 0.25) / 2 over p1-a and p2-b, not over three rows."""
    lever = pooled_claim_rows([[_row("p1-a", 2, 1.0)], [_row("p1-a", 2, 0.0), _row("p2-b", 3, 0.75)]])
    base = pooled_claim_rows([[_row("p1-a", 2, 0.5)], [_row("p1-a", 2, 0.5), _row("p2-b", 3, 0.5)]])
    assert [(r["uid"], r["passage_f1"]) for r in lever] == [("p1-a", 1.0), ("p2-b", 0.75)]
    assert paired_results(lever, base, samples=200)["all"]["passage_f1"]["mean"] == pytest.approx((0.5 + 0.25) / 2)


def test_claim_rows_carried_in_a_results_file_pool_as_the_store_rows_do():
    """A pack compared in an earlier session travels as its results file's claim rows: pooled with
    a new pack's store rows, the pairs come out as they would from both stores."""
    lever_1, base_1 = [_row("p1-a", 2, 1.0), _row("p1-b", 3, 0.5, label="NOT_SUPPORTED")], [_row("p1-a", 2, 0.5), _row("p1-b", 3, 0.5, label="NOT_SUPPORTED")]
    lever_2, base_2 = [_row("p2-a", 2, 0.25)], [_row("p2-a", 2, 0.5)]
    written = {**results_document({"lever": lever_1, "base": base_1}, {}, "held-out train", None, main="lever"), "claim_rows": carried_claim_rows({"lever": lever_1, "base": base_1})}
    text = results_json(written)
    document = json.loads(text)
    assert document == json.loads(json.dumps(written))  # the compact rendering loses nothing
    row_lines = [json.loads(line.strip().rstrip(",")) for line in text.splitlines() if line.startswith("   [")]
    assert row_lines == document["claim_rows"]["lever"] + document["claim_rows"]["base"]  # one line per claim
    carried = {name: claim_rows_from_results(document, name) for name in ("lever", "base")}
    assert [{k: r.get(k) for k in carried["base"][0]} for r in base_1] == carried["base"]  # every carried column, as it was
    from_file = paired_results(pooled_claim_rows([carried["lever"], lever_2]), pooled_claim_rows([carried["base"], base_2]), samples=200)
    from_stores = paired_results(pooled_claim_rows([lever_1, lever_2]), pooled_claim_rows([base_1, base_2]), samples=200)
    assert from_file == from_stores and from_file["all"]["passage_f1"]["mean"] == pytest.approx(0.25 / 3)
    with pytest.raises(ValueError, match="carries no run named 'other'; it carries lever, base"):
        claim_rows_from_results(document, "other")
    with pytest.raises(ValueError, match="carries no claim rows"):
        claim_rows_from_results({"systems": {}}, "lever")


def test_majority_class_ignores_unlabelled_claims():
    assert majority_class([{"gold_label": "SUPPORTED"}, {"gold_label": None}, {"gold_label": "NOT_SUPPORTED"}, {"gold_label": "SUPPORTED"}]) == pytest.approx(2 / 3)
    assert majority_class([{"gold_label": None}]) is None


def test_the_table_of_a_gpu_benchmark_file_comes_from_its_quality_block(tmp_path, capsys):
    from baleen_core.results import main

    rows = {"baleen": [_row("a", 2, 1.0), _row("b", 3, 0.5)]}
    quality = {k: v for k, v in results_document(rows, {"baleen": 17.6}, "dev", 1.0, {}, samples=50).items() if k in ("split", "claims", "majority_class", "systems", "paired")}
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({"commit": "abc123", "device": {"machine": "one H100"}, "encoding": {}, "hover_mini_dev": quality}))
    main([str(path)])
    table = capsys.readouterr().out
    assert "| baleen | all | 2 | " in table and "| 17.600 |" in table and "commit abc123; one H100;" in table


def test_a_retriever_comparison_file_has_the_shared_shape_and_a_table_of_its_own_metrics():
    from baleen_core.results import metric_blocks, paired_results

    metrics = ("retrieval_at_25", "chain_reached")
    rows = {
        "bm25": [{"uid": "a", "num_hops": 2, "retrieval_at_25": 1.0, "chain_reached": 0.0}, {"uid": "b", "num_hops": 3, "retrieval_at_25": 0.0, "chain_reached": 0.0}],
        "flipr": [{"uid": "a", "num_hops": 2, "retrieval_at_25": 1.0, "chain_reached": 1.0}, {"uid": "b", "num_hops": 3, "retrieval_at_25": 0.0, "chain_reached": 1.0}],
    }
    doc = {"claims": 2, "split": "held-out train", "majority_class": None, "commit": "abc", "machine": "cpu",
           "systems": {name: metric_blocks(r, metrics, samples=50) for name, r in rows.items()},
           "paired": {"flipr − bm25": paired_results(rows["flipr"], rows["bm25"], samples=50, metrics=metrics)}}
    assert doc["systems"]["flipr"]["all"]["chain_reached"] == {"mean": 1.0, "lo": 1.0, "hi": 1.0} and doc["systems"]["bm25"]["all"]["claims"] == 2
    assert doc["paired"]["flipr − bm25"]["all"] == {"retrieval_at_25": {"mean": 0.0, "lo": 0.0, "hi": 0.0}, "chain_reached": {"mean": 1.0, "lo": 1.0, "hi": 1.0}}
    table = results_table(doc)
    assert table.splitlines()[0] == "| system | hops | claims | retrieval_at_25 | chain_reached |"
    assert "| flipr | all | 2 | 0.500 [" in table and "| flipr − bm25 | all | +0.000 [+0.000, +0.000] | +1.000 [+1.000, +1.000] |" in table
    assert "max facts" not in table and "2 held-out train claims; majority class —" in table


def test_a_results_file_stopped_while_writing_keeps_the_earlier_one_whole(tmp_path, monkeypatch):
    """write_results makes the folder and writes results_json's text (claim rows one per line);
    interrupted mid-write (Ctrl-C), the earlier file is left as it was and nothing partial beside it."""
    rows = [_row("p1-a", 2, 1.0)]
    earlier = {**results_document({"baleen": rows}, {}, "dev", None), "claim_rows": carried_claim_rows({"baleen": rows})}
    out = write_results(earlier, tmp_path / "results" / "run.json")
    assert out.read_text() == results_json(earlier)
    original_write = Path.write_text

    def write_half_then_interrupt(path, text, *args, **kwargs):
        original_write(path, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", write_half_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_results({**earlier, "split": "held-out train"}, out)
    monkeypatch.undo()
    assert out.read_text() == results_json(earlier) and [p.name for p in out.parent.iterdir()] == ["run.json"]


def test_a_sectioned_results_file_keeps_what_a_run_of_the_same_commit_measured(tmp_path):
    import json

    from baleen_core.results import SectionedResults

    out = tmp_path / "gpu.json"
    first = SectionedResults(out, {"commit": "abc"}, ["encoding", "engine"])
    first.set("encoding", {"passages_per_s": 10})
    assert json.loads(out.read_text()) == {"commit": "abc", "encoding": {"passages_per_s": 10}, "engine": None}  # written at once
    again = SectionedResults(out, {"commit": "abc"}, ["encoding", "engine"])  # a run cut off goes on: keeps encoding
    again.set("engine", {"claims_per_s": 2})
    assert json.loads(out.read_text()) == {"commit": "abc", "encoding": {"passages_per_s": 10}, "engine": {"claims_per_s": 2}}
    other = SectionedResults(out, {"commit": "def"}, ["encoding", "engine"])  # another commit keeps nothing
    assert other.doc == {"commit": "def", "encoding": None, "engine": None} and not list(tmp_path.glob(".*.tmp"))
