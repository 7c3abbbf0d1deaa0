"""Reciprocal rank fusion against hand-worked and brute-force scores; the fused retriever over real
BM25s; the first-hop split routing each query by its context."""

from __future__ import annotations

import random

import pytest

from baleen_core.retrieval.bm25 import Bm25Retriever
from baleen_core.retrieval.fusion import FUSIONS, RRF_K, FirstHopRetriever, FusedRetriever, HopCountRetriever, hop_retriever, reciprocal_rank_fusion


def test_fusion_of_two_rankings_worked_by_hand():
    flipr = [(1, 9.0), (2, 8.0), (3, 7.0)]
    bm25 = [(3, 20.0), (4, 10.0)]
    # 3: 1/63 + 1/61; 1: 1/61; 2 and 4: 1/62 each, both ranked 2nd at best, so the lower pid first
    expected = [(3, 1 / 63 + 1 / 61), (1, 1 / 61), (2, 1 / 62), (4, 1 / 62)]
    fused = reciprocal_rank_fusion([flipr, bm25], depth=10)
    assert [pid for pid, _ in fused] == [pid for pid, _ in expected]
    assert [score for _, score in fused] == pytest.approx([score for _, score in expected])
    assert reciprocal_rank_fusion([flipr, bm25], depth=2) == fused[:2]


def test_fusion_ignores_the_retrievers_scores_and_breaks_ties_by_best_rank():
    # pid 5 is 1st and 3rd, pid 6 is 2nd and 2nd: 1/61 + 1/63 > 2/62, then the scales play no part
    a, b = [(5, 0.1), (6, 0.05), (7, 0.0)], [(8, 1e6), (6, 1e5), (5, 1e4)]
    assert [pid for pid, _ in reciprocal_rank_fusion([a, b], depth=4)] == [5, 6, 8, 7]
    # k = 0, equal sums of 1: 20 and 30 are 1st once, 10 is 2nd twice; best rank first, then pid
    assert [pid for pid, _ in reciprocal_rank_fusion([[(20, 0), (10, 0)], [(30, 0), (10, 0)]], depth=3, k=0)] == [20, 30, 10]


def test_fusion_matches_the_formula_on_random_rankings():
    rng = random.Random(0)
    for _ in range(50):
        rankings = [[(pid, rng.random()) for pid in rng.sample(range(40), rng.randint(0, 25))] for _ in range(rng.randint(1, 3))]
        k, depth = rng.choice([0, 1, RRF_K]), rng.randint(1, 45)
        brute = {}
        for ranking in rankings:
            for position, (pid, _) in enumerate(ranking):
                brute[pid] = brute.get(pid, 0.0) + 1.0 / (k + position + 1)
        fused = reciprocal_rank_fusion(rankings, depth, k)
        assert len(fused) == min(depth, len(brute))
        assert {pid: score for pid, score in fused} == pytest.approx({pid: brute[pid] for pid, _ in fused})
        best_left_out = max((brute[pid] for pid in brute.keys() - {pid for pid, _ in fused}), default=float("-inf"))
        assert all(score >= best_left_out - 1e-12 for _, score in fused)
        assert [score for _, score in fused] == sorted((score for _, score in fused), reverse=True)


def test_fusion_rejects_a_negative_constant():
    with pytest.raises(ValueError, match="k >= 0"):
        reciprocal_rank_fusion([[(1, 0.0)]], depth=1, k=-1)


TEXTS = [
    "Harbour | The harbour of Marlow town is deep.",
    "Marlow | Marlow is a town on the river Thames.",
    "River | The river Thames flows through Marlow and London.",
    "London | London is the capital of England.",
    "Mountain | The mountain has snow.",
    "Thames Barrier | The Thames Barrier protects London from the sea.",
]


def test_fused_retriever_fuses_each_querys_rankings_to_its_depth_and_honours_exclusions():
    pids = [10, 11, 12, 13, 14, 15]
    lucene, no_length_norm = Bm25Retriever(pids, TEXTS), Bm25Retriever(pids, TEXTS, k1=0.5, b=0.0)
    fused = FusedRetriever([lucene, no_length_norm])
    claims, contexts, depths, excludes = ["Marlow river", "capital of England"], [["The harbour is deep."], []], [4, 2], [{11}, set()]
    got = fused.rank_batch(claims, contexts, depths, excludes)
    for q in range(len(claims)):
        each = [r.rank(claims[q], contexts[q], depths[q], excludes[q]) for r in (lucene, no_length_norm)]
        assert got[q] == reciprocal_rank_fusion(each, depths[q])
        assert len(got[q]) <= depths[q] and 11 not in {pid for pid, _ in got[q]}
    assert got[1][0][0] == 13  # both rank London first
    assert fused.rank(claims[0], contexts[0], depths[0], excludes[0]) == got[0]


def test_fusing_a_retriever_with_itself_keeps_its_order():
    bm25 = Bm25Retriever(list(range(len(TEXTS))), TEXTS)
    alone = bm25.rank("river Thames London", [], 5, set())
    assert [pid for pid, _ in FusedRetriever([bm25, bm25]).rank("river Thames London", [], 5, set())] == [pid for pid, _ in alone]


def test_fusion_needs_two_retrievers():
    with pytest.raises(ValueError, match="two retrievers"):
        FusedRetriever([Bm25Retriever([1], [TEXTS[0]])])


def test_hop_retriever_fuses_only_when_asked_and_opens_bm25_only_then():
    flipr, opened = Bm25Retriever(list(range(len(TEXTS))), TEXTS), []
    bm25 = lambda: opened.append(1) or Bm25Retriever(list(range(len(TEXTS))), TEXTS, b=0.0)  # noqa: E731
    assert hop_retriever(flipr, "none", bm25) is flipr and not opened
    fused = hop_retriever(flipr, "bm25", bm25)
    assert isinstance(fused, FusedRetriever) and fused.retrievers[0] is flipr and opened == [1]
    split = hop_retriever(flipr, "bm25-first-hop", bm25)
    assert isinstance(split, FirstHopRetriever) and split.later is flipr and split.first is not flipr and opened == [1, 1]
    fused_first = hop_retriever(flipr, "bm25-fused-first-hop", bm25)
    assert isinstance(fused_first, FirstHopRetriever) and fused_first.later is flipr and opened == [1, 1, 1]
    assert isinstance(fused_first.first, FusedRetriever) and fused_first.first.retrievers[0] is flipr and fused_first.first.retrievers[1] is not flipr
    with pytest.raises(ValueError, match="none, bm25, bm25-first-hop or bm25-fused-first-hop"):
        hop_retriever(flipr, "splade", bm25)


def test_hop_counts_route_only_their_claims_to_the_fusion_and_the_rest_to_flipr_alone():
    flipr, bm25 = FixedRanking("flipr", [1, 2, 3]), lambda: FixedRanking("bm25", [3, 2, 1])
    routed = hop_retriever(flipr, "bm25", bm25, hop_counts=[4, 3])
    assert isinstance(routed, HopCountRetriever) and routed.name == "flipr+bm25@3,4-hop|flipr" and routed.flipr is None
    assert routed.for_hops(2) is flipr and routed.for_hops(5) is flipr
    assert routed.for_hops(3) is routed.for_hops(4) and isinstance(routed.for_hops(4), FusedRetriever)
    first_hop = hop_retriever(flipr, "bm25-fused-first-hop", bm25, hop_counts=[4])
    assert isinstance(first_hop.for_hops(4), FirstHopRetriever) and first_hop.for_hops(3) is flipr
    assert hop_retriever(flipr, "none", bm25, hop_counts=[4]) is flipr  # nothing to route to
    with pytest.raises(ValueError, match="at least one hop count"):
        HopCountRetriever(flipr, routed.for_hops(4), [])


def test_every_fusion_the_config_accepts_builds_a_retriever_and_no_other():
    from baleen_core.config import SearchConfig

    assert FUSIONS == ("none", "bm25", "bm25-first-hop", "bm25-fused-first-hop")
    built = {fusion: hop_retriever(FixedRanking("flipr", []), SearchConfig(fusion=fusion).fusion, lambda: FixedRanking("bm25", [])) for fusion in FUSIONS}
    assert [type(r).__name__ for r in built.values()] == ["FixedRanking", "FusedRetriever", "FirstHopRetriever", "FirstHopRetriever"]
    with pytest.raises(ValueError, match="fusion"):
        SearchConfig(fusion="splade")


class FixedRanking:
    """A retriever whose ranking is a fixed list (context ignored): fusion worked by hand."""

    def __init__(self, name: str, pids: list[int]) -> None:
        self.name, self.pids = name, pids

    def rank_batch(self, claims, contexts, depths, excludes):
        return [[(pid, float(-i)) for i, pid in enumerate(p for p in self.pids if p not in exclude)][:depth] for depth, exclude in zip(depths, excludes, strict=True)]

    def rank(self, claim, context, depth, exclude):
        return self.rank_batch([claim], [context], [depth], [exclude])[0]

    def score(self, claim, context, pids):
        return [float(-self.pids.index(pid)) for pid in pids]

    def rank_and_score(self, claims, contexts, depths, excludes, pids):
        return self.rank_batch(claims, contexts, depths, excludes), [self.score(c, ctx, p) for c, ctx, p in zip(claims, contexts, pids, strict=True)]


def test_a_fused_retriever_labels_hops_by_the_fused_ranking():
    from baleen_core.training.hop_ordering import ClaimGold, GoldPassage, order_hops

    # A: 4 2 6 1 5 3, B: 1 5 4 3 6 2 → fused (k = 60): 4 (1/61 + 1/63), 1 (1/64 + 1/61),
    # 5 (1/65 + 1/62), 2 (1/62 + 1/66), 6 (1/63 + 1/65), 3 (1/66 + 1/64)
    a, b = FixedRanking("a", [4, 2, 6, 1, 5, 3]), FixedRanking("b", [1, 5, 4, 3, 6, 2])
    fused = FusedRetriever([a, b])
    assert fused.name == "a+b" and fused.score("claim", [], [3, 4]) == a.score("claim", [], [3, 4])
    claim = ClaimGold("c", "claim", 2, (GoldPassage(1, "One", ("x",)), GoldPassage(2, "Two", ("y",))))
    labels = order_hops(claim, fused, depth=6, n_negatives=2)
    # hop 1: gold 1 is fused 2nd, gold 2 fused 4th; hop 2 (1 excluded): 4 5 2 6 3
    assert [(h.positive_pid, h.positive_rank, h.negative_pids) for h in labels] == [(1, 2, [4, 5]), (2, 3, [4, 5])]
    # A alone would have put gold 2 first, with other negatives: the fusion decides the labels
    assert [(h.positive_pid, h.negative_pids) for h in order_hops(claim, a, depth=6, n_negatives=2)][0] == (2, [4, 6])


def test_the_first_hop_split_ranks_each_query_by_whether_it_has_context_and_keeps_the_batch_order():
    pids = [10, 11, 12, 13, 14, 15]
    first, later = Bm25Retriever(pids, TEXTS), Bm25Retriever(pids, TEXTS, k1=0.5, b=0.0)
    split = FirstHopRetriever(first, later)
    claims = ["Marlow river", "capital of England", "Thames London", "river Thames sea"]
    contexts, depths, excludes = [[], ["London is big."], [], ["The harbour is deep."]], [4, 2, 3, 5], [{11}, set(), set(), {15}]
    got = split.rank_batch(claims, contexts, depths, excludes)
    for q, retriever in enumerate([first, later, first, later]):
        assert got[q] == retriever.rank(claims[q], contexts[q], depths[q], excludes[q])
    assert got[0] != later.rank(claims[0], contexts[0], depths[0], excludes[0])  # the two differ where it matters
    assert split.rank(claims[3], contexts[3], depths[3], excludes[3]) == got[3]
    assert split.rank_batch(claims[1:2], contexts[1:2], depths[1:2], excludes[1:2]) == [got[1]]  # one route only


def test_the_first_hop_split_scores_each_querys_passages_with_the_retriever_that_ranks_it():
    a, b = FixedRanking("a", [4, 2, 6, 1, 5, 3]), FixedRanking("b", [1, 5, 4, 3, 6, 2])
    split = FirstHopRetriever(a, b)
    assert split.name == "a>b" and split.score("claim", [], [3, 4]) == a.score("claim", [], [3, 4])
    assert split.score("claim", ["fact"], [3, 4]) == b.score("claim", [], [3, 4])
    rankings, scores = split.rank_and_score(["c", "c"], [["fact"], []], [2, 3], [set(), {4}], [[1, 2], [2, 6]])
    assert rankings == [b.rank("c", [], 2, set()), a.rank("c", [], 3, {4})]
    assert scores == [b.score("c", [], [1, 2]), a.score("c", [], [2, 6])]


def test_the_first_hop_split_labels_the_first_hop_by_the_first_ranking_and_later_hops_by_the_other():
    from baleen_core.training.hop_ordering import ClaimGold, GoldPassage, order_hops

    # A ranks gold 2 above gold 1 from the claim alone, B the other way round; with context only B ranks
    a, b = FixedRanking("a", [4, 2, 6, 1, 5, 3]), FixedRanking("b", [1, 5, 4, 3, 6, 2])
    claim = ClaimGold("c", "claim", 2, (GoldPassage(1, "One", ("x",)), GoldPassage(2, "Two", ("y",))))
    labels = order_hops(claim, FirstHopRetriever(a, b), depth=6, n_negatives=2)
    # hop 1 (A): gold 2 is 2nd, negatives 4 and 6; hop 2 (B, gold 2 excluded): 1 5 4 3 6 → gold 1 first
    assert [(h.positive_pid, h.positive_rank, h.negative_pids) for h in labels] == [(2, 2, [4, 6]), (1, 1, [5, 4])]
    assert [h.positive_pid for h in order_hops(claim, b, depth=6, n_negatives=2)][0] == 1  # B alone would start elsewhere


def test_fused_at_the_first_hop_labels_hop_one_by_the_fused_ranking_and_later_hops_by_flipr_alone():
    from baleen_core.training.hop_ordering import ClaimGold, GoldPassage, order_hops

    # FLIPR: 4 2 6 1 5 3, BM25: 1 5 4 3 6 2; from the claim alone the fused ranking is 4 1 5 2 6 3
    flipr, bm25 = FixedRanking("flipr", [4, 2, 6, 1, 5, 3]), FixedRanking("bm25", [1, 5, 4, 3, 6, 2])
    retriever = hop_retriever(flipr, "bm25-fused-first-hop", lambda: bm25)
    assert retriever.name == "flipr+bm25>flipr"
    claim = ClaimGold("c", "claim", 2, (GoldPassage(1, "One", ("x",)), GoldPassage(2, "Two", ("y",))))
    labels = order_hops(claim, retriever, depth=6, n_negatives=2)
    # hop 1 (fused): gold 1 is 2nd (FLIPR alone: gold 2 first); hop 2 (FLIPR alone, gold 1 excluded): 4 2 6 5 3
    assert [(h.positive_pid, h.positive_rank, h.negative_pids) for h in labels] == [(1, 2, [4, 5]), (2, 2, [4, 6])]
    # with context the ranking is FLIPR's own, scores included
    assert retriever.rank_batch(["claim"], [["fact"]], [3], [set()]) == flipr.rank_batch(["claim"], [["fact"]], [3], [set()])
    assert retriever.score("claim", ["fact"], [3, 4]) == flipr.score("claim", [], [3, 4])
