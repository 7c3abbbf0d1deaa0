"""Training examples from hop_labels rows, the same for the pipeline and the GPU benchmark."""

from __future__ import annotations

from baleen_core.condensing import PassageSentences, Sentence
from baleen_core.training.condenser_trainer import ReaderClaim, labelled_hop_pids, labelled_hops, reader_claims, select_hops
from baleen_core.training.flipr_trainer import claim_only_extras, flipr_example_pids, flipr_examples

ROWS = [  # claim a: gold passages 1 then 2; claim b: gold passage 5
    {"uid": "a", "hop": 1, "context_pids": [], "context_facts": [], "positive_pid": 1, "negative_pids": [7, 8, 9], "remaining_gold_pids": [2]},
    {"uid": "a", "hop": 2, "context_pids": [1], "context_facts": ["P1 | one."], "positive_pid": 2, "negative_pids": [8], "remaining_gold_pids": []},
    {"uid": "b", "hop": 1, "context_pids": [], "context_facts": [], "positive_pid": 5, "negative_pids": [9], "remaining_gold_pids": []},
]
TEXT = {pid: f"P{pid} | text {pid}" for pid in (1, 2, 5, 7, 8, 9)}


def test_flipr_examples_keep_a_claims_gold_out_of_its_negatives():
    examples = flipr_examples(ROWS, {"a": "claim a", "b": "claim b"}, TEXT, limit=2)
    assert len(examples) == 2 and examples[1].context == ("P1 | one.",) and examples[1].positive == TEXT[2]
    assert examples[0].negatives == (TEXT[7], TEXT[8], TEXT[9])
    assert examples[0].gold == examples[1].gold == frozenset({TEXT[1], TEXT[2]})  # from every row of the claim, not only the first two
    assert flipr_example_pids(ROWS, limit=2) == {1, 2, 7, 8, 9} and flipr_example_pids(ROWS) == {1, 2, 5, 7, 8, 9}


def test_labelled_hops_read_gold_context_sentences_and_cut_negatives():
    passages = {pid: PassageSentences(pid, f"P{pid}", (Sentence(pid, 0, f"P{pid}", "first."), Sentence(pid, 1, f"P{pid}", "second."))) for pid in (1, 2, 5, 7, 8)}
    claims = {"a": {"claim": "claim a", "label": "SUPPORTED"}, "b": {"claim": "claim b", "label": "NOT_SUPPORTED"}}
    gold = {"a": {(1, 1), (2, 0)}, "b": {(5, 0)}}
    rows = select_hops(ROWS, max_claims=1)
    assert [r["uid"] for r in rows] == ["a", "a"] and select_hops(ROWS, max_hops=1) == ROWS[:1]
    assert labelled_hop_pids(rows, negatives=1) == {1, 2, 7, 8}
    first, second = labelled_hops(rows, claims, gold, passages, negatives=1)
    assert [p.pid for p in first.negatives] == [7] and first.context == () and first.label == "SUPPORTED"
    assert [s.key for s in second.context] == [(1, 1)]  # only the gold sentence of the earlier positive
    (b,) = labelled_hops(ROWS[2:], claims, gold, passages, negatives=2)
    assert [p.sentences for p in b.negatives] == [()]  # passage 9 has no text: nothing to score


def test_reader_claims_put_the_engine_run_first_with_its_facts_then_other_claims_by_uid():
    gold = {uid: ReaderClaim(uid, f"claim {uid}", "SUPPORTED", (f"T{uid} | gold",)) for uid in ("d", "a", "c", "b", "e")}
    final = {"c": ("Tx | found",), "a": ("Ta | gold", "Ty | other"), "z": ("not a training claim",)}
    read = reader_claims(final, gold, most_others=2)
    assert [(r.uid, r.engine_facts) for r in read] == [("a", ("Ta | gold", "Ty | other")), ("c", ("Tx | found",)), ("b", None), ("d", None)]
    assert all(r.gold_facts == (f"T{r.uid} | gold",) and r.claim == f"claim {r.uid}" for r in read)
    assert [r.uid for r in reader_claims(final, gold, most_others=None)] == ["a", "c", "b", "d", "e"]


def test_claim_only_positives_reached_add_the_gold_the_labeller_ranked_from_the_claim_alone():
    # claim c: gold 1, 2, 3 and 4; from the claim alone the labeller ranked 1 first, 3 at 40, and 2 and 4 beyond its depth
    hop1 = {"uid": "c", "hop": 1, "context_pids": [], "context_facts": [], "positive_pid": 1, "negative_pids": [7, 8],
            "remaining_gold_pids": [1, 2, 3, 4], "remaining_gold_ranks": [1, None, 40, None]}
    hop2 = {"uid": "c", "hop": 2, "context_pids": [1], "context_facts": ["P1 | one."], "positive_pid": 3, "negative_pids": [9],
            "remaining_gold_pids": [2, 3, 4], "remaining_gold_ranks": [5, 2, 7]}  # ranked with context: no claim-only extras
    text = {pid: f"P{pid} | text {pid}" for pid in range(1, 10)}
    assigned = flipr_examples([hop1, hop2], {"c": "claim c"}, text)
    reached = flipr_examples([hop1, hop2], {"c": "claim c"}, text, claim_only_positives="reached")
    assert [e.positive for e in assigned] == [text[1], text[3]]
    assert [e.positive for e in reached] == [text[1], text[3], text[3]] and reached[0] == assigned[0] and reached[2] == assigned[1]
    extra = reached[1]
    assert extra.context == () and extra.claim == "claim c" and extra.negatives == (text[7], text[8])
    assert extra.gold == frozenset(text[p] for p in (1, 2, 3, 4))  # the claim's other gold passages stay out of its negatives
    assert claim_only_extras(hop2) == [] and flipr_examples([hop1], {"c": "claim c"}, text, limit=0, claim_only_positives="reached") == []
