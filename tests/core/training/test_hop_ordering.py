"""Latent hop ordering with a real BM25 retriever on a hand-made corpus."""

from __future__ import annotations

from baleen_core.retrieval.bm25 import Bm25Retriever
from baleen_core.training.hop_ordering import ClaimGold, GoldPassage, interleaved_negatives, label_claims, order_hops

CORPUS = {
    1: ("Glass Harbour", "Glass Harbour is a 2014 thriller film. It was directed by Oren Vask."),
    2: ("Oren Vask", "Oren Vask is a film maker. He was born in Aarhus."),
    3: ("Aarhus", "Aarhus is the second-largest city in Denmark."),
    4: ("Harbour Lights", "Harbour Lights is a thriller novel about a glass factory."),
    5: ("Tin Lanterns", "Tin Lanterns are a band from Leeds."),
    6: ("Glass", "Glass is an amorphous solid used in windows."),
}


def retriever() -> Bm25Retriever:
    return Bm25Retriever(list(CORPUS), [f"{t} | {x}" for t, x in CORPUS.values()])


def gold(num_hops=3) -> ClaimGold:
    passages = (
        GoldPassage(3, "Aarhus", ("Aarhus is the second-largest city in Denmark.",)),
        GoldPassage(2, "Oren Vask", ("He was born in Aarhus.",)),
        GoldPassage(1, "Glass Harbour", ("It was directed by Oren Vask.",)),
    )
    return ClaimGold("c1", "The 2014 thriller film Glass Harbour was directed by a man born in Denmark.", num_hops, passages)


def test_hops_follow_the_chain_from_the_named_entity():
    labels = order_hops(gold(), retriever(), depth=6, n_negatives=2)
    assert [label.positive_pid for label in labels] == [1, 2, 3]
    assert [label.hop for label in labels] == [1, 2, 3]
    assert labels[0].positive_rank == 1 and labels[0].context_facts == []
    assert labels[1].context_pids == [1] and labels[1].context_facts == ["Glass Harbour | It was directed by Oren Vask."]
    assert labels[2].context_pids == [1, 2]


def test_negatives_are_top_ranked_non_gold_passages_and_context_is_excluded():
    labels = order_hops(gold(), retriever(), depth=6, n_negatives=2)
    for label in labels:
        assert len(label.negative_pids) == 2 and not set(label.negative_pids) & {1, 2, 3}
    assert labels[0].negative_pids[0] in (4, 6)  # 'Harbour Lights' or 'Glass' share the claim's words
    assert 1 not in labels[1].remaining_gold and set(labels[0].remaining_gold) == {1, 2, 3}


def test_unreached_gold_passages_are_still_assigned_and_flagged():
    unrelated = GoldPassage(5, "Tin Lanterns", ("Tin Lanterns are a band from Leeds.",))
    claim = ClaimGold("c2", "The 2014 thriller film Glass Harbour was directed by Oren Vask.", 2, (unrelated, gold().passages[2]))
    labels = order_hops(claim, retriever(), depth=2, n_negatives=1)
    assert [(label.positive_pid, label.reached) for label in labels] == [(1, True), (5, False)]
    assert labels[1].positive_rank is None and labels[1].remaining_gold == {5: None}


class OneQueryAtATime:
    """BM25 through ``rank`` and ``score`` alone, one query per call: the claim-by-claim round
    that batched labelling must reproduce."""

    name = "bm25"

    def __init__(self) -> None:
        self.bm25, self.calls = retriever(), 0

    def rank_and_score(self, claims, contexts, depths, excludes, pids):
        self.calls += 1
        assert len(claims) == 1
        return [self.bm25.rank(claims[0], contexts[0], depths[0], excludes[0])], [self.bm25.score(claims[0], contexts[0], pids[0])]


def test_claims_labelled_hop_by_hop_together_get_the_labels_each_gets_alone():
    """Claims of 3, 2 and 1 hops (one with an unreachable gold passage), labelled together in
    chunks of two: hop 1 of a chunk's claims in one call, then hop 2, …; every label equals the
    claim's labels from one query at a time, in claim order, and progress counts each claim."""
    unrelated = GoldPassage(5, "Tin Lanterns", ("Tin Lanterns are a band from Leeds.",))
    claims = [
        gold(),
        ClaimGold("c2", "The 2014 thriller film Glass Harbour was directed by Oren Vask.", 2, (unrelated, gold().passages[2])),
        ClaimGold("c3", "Aarhus is in Denmark.", 1, (gold().passages[0],)),
        ClaimGold("c4", "Oren Vask was born in the second-largest city in Denmark.", 2, gold().passages[:2]),
    ]
    done = []
    together = label_claims(claims, retriever(), depth=2, n_negatives=2, on_claim=lambda: done.append(1), batch_size=2)
    reference = OneQueryAtATime()
    alone = [label for claim in claims for label in label_claims([claim], reference, 2, 2, batch_size=1)]
    assert together == alone and len(done) == 4
    assert [(label.uid, label.hop) for label in together] == [("c1", 1), ("c1", 2), ("c1", 3), ("c2", 1), ("c2", 2), ("c3", 1), ("c4", 1), ("c4", 2)]
    assert reference.calls == len(together)


def test_gold_recall_by_hops_and_k():
    from baleen_core.retrieval.recall import gold_recall

    claims = [
        ("Glass Harbour thriller film directed", 2, {1, 3}),  # pid 1 ranks first; Aarhus (3) shares no word
        ("band from Leeds", 3, {5, 2, 6}),  # pid 5 first; 2 and 6 share no word
    ]
    recall = gold_recall(retriever(), claims, [1, 6])
    assert recall[1] == {"2": 0.5, "3": 1 / 3, "all": (0.5 + 1 / 3) / 2}
    assert recall[6]["all"] == 1.0  # depth 6 = the whole corpus


def test_interleaved_negatives_alternate_between_the_two_rankings_non_gold_passages():
    # non-gold: first 10, 11, 12 and second 11, 13, 14; taken 10, 11, (11 again), 13, 12, 14
    assert interleaved_negatives([10, 1, 11, 12], [2, 11, 13, 14], {1, 2}, 4) == [10, 11, 13, 12]
    assert interleaved_negatives([10, 1, 11, 12], [2, 11, 13, 14], {1, 2}, 9) == [10, 11, 13, 12, 14]
    # one ranking runs out: the other's go on; with no second ranking, the first's non-gold top n
    assert interleaved_negatives([10], [20, 21, 22], set(), 3) == [10, 20, 21]
    assert interleaved_negatives([10, 1, 11, 12], [], {1}, 2) == [10, 11]


class FixedOrder:
    """Ranks every query by one fixed order of passages (the other retriever of a mixed round),
    recording what it was asked."""

    def __init__(self, order: list[int]) -> None:
        self.order, self.asked = order, []

    def rank_batch(self, claims, contexts, depths, excludes):
        self.asked.extend(zip(claims, map(list, contexts), depths, map(set, excludes), strict=True))
        return [[(pid, -float(r)) for r, pid in enumerate(p for p in self.order if p not in exclude)][:depth] for depth, exclude in zip(depths, excludes, strict=True)]


def test_a_second_retriever_supplies_every_other_negative_and_leaves_the_positives_alone():
    """Passages 5 and 4 ranked first by the other retriever: each hop's negatives alternate BM25's
    own (the labels without it) with the other's, the positives and contexts are unchanged, and the
    other retriever saw each hop's query, context and excluded context passages."""
    alone = order_hops(gold(), retriever(), depth=6, n_negatives=2)
    other = FixedOrder([5, 3, 4, 2, 6, 1])
    mixed = label_claims([gold()], retriever(), depth=6, n_negatives=2, negatives_from=other)
    assert [(m.positive_pid, m.positive_rank, m.context_pids, m.context_facts) for m in mixed] == [
        (a.positive_pid, a.positive_rank, a.context_pids, a.context_facts) for a in alone
    ]
    for m, a in zip(mixed, alone, strict=True):
        theirs = [pid for pid in other.order if pid not in {1, 2, 3} and pid not in m.context_pids]
        assert m.negative_pids == interleaved_negatives(a.negative_pids, theirs, {1, 2, 3}, 2)
        assert m.negative_pids[0] == a.negative_pids[0] and m.negative_pids[1] != a.negative_pids[1]
    assert [(context, exclude) for _, context, _, exclude in other.asked] == [(m.context_facts, set(m.context_pids)) for m in mixed]
    assert {depth for *_, depth, _ in other.asked} == {2 + 3}  # enough past the claim's gold for its share
