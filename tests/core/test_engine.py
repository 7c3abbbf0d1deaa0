"""The hop loop on a tiny made-up world with BM25 retrieval and MiniLM condensers and reader."""

from __future__ import annotations

import math

import pytest

from baleen_core.condensing import SequenceModel, evidence_facts, kept_facts, read_verdicts
from baleen_core.condensing.condense import first_passage_facts
from baleen_core.condensing.calibration import evidence_at_floor
from baleen_core.condensing.condense import hop_evidence
from baleen_core.condensing.evidence_ranker import FEATURES, HopRead, evidence_scores
from baleen_core.config import CondenserConfig, EvidenceRankerWeights, ReaderConfig, default_backbone
from baleen_core.engine import ClaimInput, HopMemo, grow_pool, passages_per_hop, read_at_hop, verify_claims, verify_claims_at_thresholds
from baleen_core.retrieval.bm25 import Bm25Retriever
from baleen_core.retrieval.fusion import HopCountRetriever
from helpers import passage

WORLD = [
    passage(1, "Kelda Marrow", "Kelda Marrow is an Australian actress.", "She starred in Glass Harbour."),
    passage(2, "Glass Harbour", "Glass Harbour is a 2014 thriller film.", "It was directed by Oren Vask."),
    passage(3, "Oren Vask", "Oren Vask is a Danish director.", "He was born in Aarhus."),
    passage(4, "Aarhus", "Aarhus is the second-largest city in Denmark."),
    passage(5, "Tin Lanterns", "Tin Lanterns are an indie rock band from Leeds."),
    passage(6, "Leeds", "Leeds is a city in West Yorkshire, England."),
    passage(7, "Harbour Lights", "Harbour Lights is a novel.", "It is set in Leeds."),
]
CLAIMS = [ClaimInput("a", "Glass Harbour was directed by a man born in Denmark.", 3), ClaimInput("b", "Tin Lanterns come from a city in England.", 2)]
#: Small budgets so the rules bind on 7 passages; a threshold no untrained score reaches from
#: above keeps every candidate up to ``max_kept`` in the context, so the cap is what decides.
CONDENSER = CondenserConfig(device="cpu", top_facts=4, max_kept=3, stage2_threshold=-100.0)


@pytest.fixture(scope="module")
def models():
    return tuple(SequenceModel.load(kind, default_backbone(), "cpu") for kind in ("stage1", "stage2", "reader"))


def run(models, claims, condenser=CONDENSER, reader=ReaderConfig(device="cpu"), **kwargs):
    by_pid = {p.pid: p for p in WORLD}
    retriever = Bm25Retriever([p.pid for p in WORLD], [f"{p.title} | " + " ".join(s.text for s in p.sentences) for p in WORLD])
    seen: list[tuple[int, int]] = []
    verdicts = verify_claims(
        claims, retriever, lambda pids: {pid: by_pid[pid] for pid in pids}, *models, condenser, reader,
        on_hop=lambda hop, n: seen.append((hop, n)), **kwargs,
    )
    return verdicts, seen


def test_passages_per_hop_share_the_claims_depth():
    assert [passages_per_hop(100, h) for h in (2, 3, 4)] == [50, 33, 25]
    assert passages_per_hop(100, 3, k=25) == 25  # a fixed k wins
    with pytest.raises(ValueError, match="depth of 2 cannot be shared by 3 hops"):
        passages_per_hop(2, 3)


def test_a_hop_reads_the_best_passages_without_a_fact_in_the_context():
    ranking = [(7, 9.0), (3, 8.0), (5, 7.0), (1, 6.0), (2, 5.0)]
    context = [passage(3, "T", "x").sentences[0], passage(1, "U", "y").sentences[0]]
    assert read_at_hop(ranking, context, 2) == [(7, 9.0), (5, 7.0)]
    assert read_at_hop(ranking, context, 10) == [(7, 9.0), (5, 7.0), (2, 5.0)]


def test_the_pool_grows_in_rank_order_without_repeats_up_to_its_limit():
    pool: dict[int, None] = {}
    assert grow_pool(pool, [(4, 1.0), (2, 0.9), (8, 0.5)], 2) == [4, 2]  # hop 1 of a 2-hop claim at depth 4
    assert grow_pool(pool, [(2, 1.0), (9, 0.8), (4, 0.7), (8, 0.6), (5, 0.1)], 4) == [9, 8]  # hop 2 fills it to the depth
    assert list(pool) == [4, 2, 9, 8]


def test_each_claim_reads_depth_over_hops_passages_per_hop_and_keeps_at_most_max_kept(models):
    verdicts, seen = run(models, CLAIMS, depth=6)
    assert seen == [(1, 2), (2, 2), (3, 1)]  # claim b stops after 2 hops
    assert [len(v.hops) for v in verdicts] == [3, 2]
    assert [[len(h.retrieved) for h in v.hops] for v in verdicts] == [[2, 2, 2], [3, 3]]  # 6 // 3 and 6 // 2
    for v in verdicts:
        assert len(v.hops[-1].kept) == CONDENSER.max_kept  # the context: every candidate above -100, up to the cap
        # the final facts are the last hop's evidence (L3x): at least 2, at most max_kept, of at most 4 passages
        assert v.facts == v.hops[-1].evidence and 2 <= len(v.facts) <= CONDENSER.max_kept and len({s.pid for s, _ in v.facts}) <= 4
        assert [score for _, score in v.facts] == sorted((score for _, score in v.facts), reverse=True)
        context: list = []
        for trace in v.hops:
            assert len(context) + len(trace.stage1_top) <= CONDENSER.top_facts  # what stage 2 read
            assert len(trace.kept) <= CONDENSER.max_kept
            assert not {s.pid for s, _ in context} & {pid for pid, _ in trace.retrieved}  # no passage of a context fact is read again
            assert all(s.pid in {pid for pid, _ in trace.retrieved} for s, _ in trace.stage1_top)
            context = trace.kept
        # the pool: distinct, at most the depth, and hop 1's part is what hop 1 read
        assert len(v.pool) == len(set(v.pool)) <= 6
        assert v.hops[0].pool == [pid for pid, _ in v.hops[0].retrieved]


def test_a_passage_read_but_not_kept_can_come_back_at_a_later_hop(models):
    # 4 hops × 3 passages on a 7-passage corpus: with only the context's passages skipped, some
    # passage must be read twice (the old rule, skipping every passage seen, ran out instead)
    verdicts, _ = run(models, [ClaimInput("a", "Kelda Marrow starred in a thriller.", 2)], k=3, hops=4)
    hops = verdicts[0].hops
    assert [h.hop for h in hops] == [1, 2, 3, 4] and [len(h.retrieved) for h in hops] == [3, 3, 3, 3]
    read = verdicts[0].retrieved_pids
    assert len(read) == 12 > len(set(read))
    assert len(verdicts[0].pool) == len(set(verdicts[0].pool)) == 7  # the pool filled with every passage once


def test_no_fact_above_the_threshold_hands_on_an_empty_context_but_the_evidence_keeps_two(models):
    high = CONDENSER.model_copy(update={"stage2_threshold": 100.0})
    verdicts, _ = run(models, CLAIMS[:1], condenser=high, depth=6)
    # the reference's rule: no fact scores above the threshold, so no context; every hop searches from the claim alone
    assert all(h.kept == [] for h in verdicts[0].hops)
    assert len({tuple(h.retrieved) for h in verdicts[0].hops}) == 1
    # the evidence does not read the threshold: the best 2 (the second best is below 0 or not, min(0, it) lets both through)
    assert len(verdicts[0].facts) >= 2 and verdicts[0].facts == verdicts[0].hops[-1].evidence
    # min_kept asks for the best facts anyway
    verdicts, _ = run(models, CLAIMS[:1], condenser=high.model_copy(update={"min_kept": 1}), depth=6)
    assert all(len(h.kept) == 1 for h in verdicts[0].hops)
    # the reader reads the claim and its final facts
    expected = read_verdicts(models[2], [CLAIMS[0].claim], [[s.fact for s, _ in verdicts[0].facts]], ReaderConfig(device="cpu"))[0]
    assert verdicts[0].prob_supported == pytest.approx(expected, abs=1e-5)


def test_the_reader_reads_the_best_of_the_last_read_when_asked_and_the_evidence_stays(models):
    plain, _ = run(models, CLAIMS, depth=6)
    wide_reader = ReaderConfig(device="cpu", last_read_facts=4)
    wide, _ = run(models, CLAIMS, reader=wide_reader, depth=6)
    for v, w in zip(wide, plain, strict=True):
        # the hops and the graded evidence do not read the reader's setting
        assert [(h.retrieved, h.kept, h.stage2) for h in v.hops] == [(h.retrieved, h.kept, h.stage2) for h in w.hops] and v.facts == w.facts
        # the reader read all 4 facts stage 2 read at the last hop (top_facts 4), best first, not the 2-3 of the evidence
        last = sorted(v.hops[-1].stage2, key=lambda pair: (pair[1], pair[0].pid, pair[0].sid), reverse=True)
        assert len(last) == 4 and len(v.facts) < 4
        claim = next(c.claim for c in CLAIMS if c.uid == v.uid)
        assert v.prob_supported == pytest.approx(read_verdicts(models[2], [claim], [[s.fact for s, _ in last]], wide_reader)[0], abs=1e-5)
        assert v.prob_supported != pytest.approx(w.prob_supported, abs=1e-6)


def test_the_evidence_floor_follows_each_claims_hop_count(models):
    plain, _ = run(models, CLAIMS, depth=6)
    # claim a has 3 hops: -inf keeps all of stage 2's best max_kept (3); claim b has 2: inf keeps exactly the best 2
    floors = CONDENSER.model_copy(update={"evidence_floors": {3: -math.inf, 2: math.inf}})
    floored, _ = run(models, CLAIMS, condenser=floors, depth=6)
    for v, w, floor in zip(floored, plain, (-math.inf, math.inf), strict=True):
        # the floor decides the evidence only: every hop retrieved, read and kept the same
        assert [(h.retrieved, [s.key for s, _ in h.kept], [s.key for s, _ in h.stage2]) for h in v.hops] == [
            (h.retrieved, [s.key for s, _ in h.kept], [s.key for s, _ in h.stage2]) for h in w.hops
        ]
        last = v.hops[-1].stage2
        assert v.facts == v.hops[-1].evidence == evidence_facts([s for s, _ in last], [x for _, x in last], CONDENSER.max_kept, 2, 4, floor)
        # the last read re-cuts to either run's evidence
        assert evidence_at_floor(v.last_read(len(v.hops)), 0.0, CONDENSER) == [s.key for s, _ in w.facts]
        assert evidence_at_floor(w.last_read(len(w.hops)), floor, CONDENSER) == [s.key for s, _ in v.facts]
    assert [len(v.facts) for v in floored] == [3, 2]


def test_the_first_h_passages_rule_cuts_the_evidence_by_each_claims_hop_count(models):
    plain, _ = run(models, CLAIMS, depth=6)
    rule = CONDENSER.model_copy(update={"evidence_rule": "first-h-passages", "evidence_floors": {2: math.inf}})
    by_hops, _ = run(models, CLAIMS, condenser=rule, depth=6)
    for v, w, claim in zip(by_hops, plain, CLAIMS, strict=True):
        # the rule decides the evidence only: every hop retrieved, read and kept the same
        assert [(h.retrieved, [s.key for s, _ in h.kept], [s.key for s, _ in h.stage2]) for h in v.hops] == [
            (h.retrieved, [s.key for s, _ in h.kept], [s.key for s, _ in h.stage2]) for h in w.hops
        ]
        last = v.hops[-1].stage2
        assert v.facts == v.hops[-1].evidence == first_passage_facts([s for s, _ in last], [x for _, x in last], claim.num_hops)
        assert len({s.pid for s, _ in v.facts}) == min(claim.num_hops, len({s.pid for s, _ in last}))
        # the last read re-cuts to the rule's evidence whatever floor is asked for
        assert evidence_at_floor(w.last_read(len(w.hops)), 3.0, rule) == [s.key for s, _ in v.facts]


#: A ranker that prefers the facts whose passage the hop retrieved last, against stage 2's order.
LAST_RETRIEVED_FIRST = EvidenceRankerWeights(
    features=list(FEATURES), weights=[1.0 if name == "retrieval_rank" else 0.0 for name in FEATURES], bias=0.0, mean=[0.0] * len(FEATURES),
    scale=[1.0] * len(FEATURES), examples=1, claims=1,
)


def test_an_evidence_ranker_cuts_the_last_hops_evidence_from_its_scores_and_changes_nothing_else(models):
    plain, _ = run(models, CLAIMS, depth=6)
    ranker = LAST_RETRIEVED_FIRST
    ranked, _ = run(models, CLAIMS, condenser=CONDENSER.model_copy(update={"evidence_ranker": ranker}), depth=6)
    changed = 0
    for v, w, claim in zip(ranked, plain, CLAIMS, strict=True):
        # every hop retrieved, read, scored and kept the same; only the last hop's evidence differs
        assert [(h.retrieved, h.stage1_top, h.stage2, h.kept) for h in v.hops] == [(h.retrieved, h.stage1_top, h.stage2, h.kept) for h in w.hops]
        assert [h.evidence for h in v.hops[:-1]] == [h.evidence for h in w.hops[:-1]]
        last = v.hops[-1]
        read = HopRead(last.hop, True, tuple(s for s, _ in last.stage2), tuple(x for _, x in last.stage2), {s.key: x for s, x in last.stage1_top}, tuple(pid for pid, _ in last.retrieved))
        expected = hop_evidence(read.candidates, evidence_scores(ranker, claim.claim, read), CONDENSER, claim.num_hops)
        assert v.facts == last.evidence == expected
        assert [x for _, x in v.facts] == sorted((x for _, x in v.facts), reverse=True)
        changed += [s.key for s, _ in v.facts] != [s.key for s, _ in w.facts]
    assert changed  # the ranker's order is not stage 2's on this world


def test_an_evidence_ranker_reading_the_context_keeps_its_best_facts_at_every_hop(models):
    plain, _ = run(models, CLAIMS, depth=6)
    ranker = LAST_RETRIEVED_FIRST
    condenser = CONDENSER.model_copy(update={"evidence_ranker": ranker, "evidence_ranker_context": True})
    ranked, _ = run(models, CLAIMS, condenser=condenser, depth=6)
    contexts_differ = 0
    for v, w, claim in zip(ranked, plain, CLAIMS, strict=True):
        assert v.hops[0].retrieved == w.hops[0].retrieved and v.hops[0].stage2 == w.hops[0].stage2  # hop 1 reads the claim alone
        for i, hop in enumerate(v.hops):
            last = i == len(v.hops) - 1
            scores = evidence_scores(ranker, claim.claim, hop.hop_read(last))
            candidates = [s for s, _ in hop.stage2]
            # the context: of the ranker's best max_kept, those above the threshold (-100 here: all 3)
            assert hop.kept == kept_facts(candidates, scores, CONDENSER.max_kept, CONDENSER.min_kept, CONDENSER.stage2_threshold)
            if last:
                assert v.facts == hop.evidence == hop_evidence(candidates, scores, CONDENSER, claim.num_hops)
        contexts_differ += [[s.key for s, _ in h.kept] for h in v.hops] != [[s.key for s, _ in h.kept] for h in w.hops]
    assert contexts_differ  # the ranker's context is not stage 2's on this world
    with pytest.raises(ValueError, match="needs an evidence ranker"):
        CondenserConfig(evidence_ranker_context=True)


def test_without_a_reader_the_hops_and_final_facts_are_the_same_and_no_verdict_is_read(models):
    with_reader, _ = run(models, CLAIMS, depth=6)
    without, _ = run(models[:2] + (None,), CLAIMS, depth=6)
    assert all(v.prob_supported is None for v in without) and all(v.prob_supported is not None for v in with_reader)
    assert [[s.key for s, _ in v.facts] for v in without] == [[s.key for s, _ in v.facts] for v in with_reader]


def test_a_passage_with_a_title_alone_is_read_and_offers_nothing(models):
    world = [*WORLD, passage(8, "Glass Harbour directed Denmark")]  # BM25 ranks the title high; it has no sentence
    by_pid = {p.pid: p for p in world}
    retriever = Bm25Retriever([p.pid for p in world], [f"{p.title} | " + " ".join(s.text for s in p.sentences) for p in world])
    verdicts = verify_claims(CLAIMS[:1], retriever, lambda pids: {pid: by_pid[pid] for pid in pids}, *models, CONDENSER, ReaderConfig(device="cpu"), depth=6)
    assert 8 in verdicts[0].retrieved_pids
    assert all(s.pid != 8 for h in verdicts[0].hops for s, _ in h.stage2)


def test_a_retrieved_passage_without_text_is_an_error_naming_it(models):
    from baleen_core.engine import MissingPassageText

    by_pid = {p.pid: p for p in WORLD if p.pid != 2}  # the corpus lost "Glass Harbour", the index did not
    retriever = Bm25Retriever([p.pid for p in WORLD], [f"{p.title} | " + " ".join(s.text for s in p.sentences) for p in WORLD])
    with pytest.raises(MissingPassageText, match=r"pid 2\b.*baleen index --force"):
        verify_claims(CLAIMS[:1], retriever, lambda pids: {pid: by_pid[pid] for pid in pids if pid in by_pid}, *models, CONDENSER, ReaderConfig(device="cpu"), depth=6)


def test_single_hop_reads_the_whole_budget_once(models):
    verdicts, seen = run(models, CLAIMS, depth=6, single_hop=True)
    assert seen == [(1, 2)]  # one hop for every claim
    assert [len(v.hops) for v in verdicts] == [1, 1]
    assert [len(v.hops[0].retrieved) for v in verdicts] == [6, 6]  # (6 // H) × H
    assert all(2 <= len(v.facts) <= CONDENSER.max_kept for v in verdicts)


class CountingRetriever(Bm25Retriever):
    """BM25 that records the (claim, context) queries of every batch (hop) it ranks."""

    def __init__(self, *args):
        super().__init__(*args)
        self.batches: list[list[tuple[str, tuple[str, ...]]]] = []

    def rank_batch(self, claims, contexts, depths, excludes):
        self.batches.append([(c, tuple(ctx)) for c, ctx in zip(claims, contexts, strict=True)])
        return super().rank_batch(claims, contexts, depths, excludes)


def test_several_thresholds_in_one_pass_equal_separate_runs_and_share_their_common_hops(models):
    by_pid = {p.pid: p for p in WORLD}
    texts = [f"{p.title} | " + " ".join(s.text for s in p.sentences) for p in WORLD]
    thresholds = [100.0, -100.0, 0.0]  # keep min_kept, keep max_kept, whatever the untrained scores give
    retriever = CountingRetriever([p.pid for p in WORLD], texts)
    seen: list[tuple[int, int]] = []
    together = verify_claims_at_thresholds(
        CLAIMS, thresholds, retriever, lambda pids: {pid: by_pid[pid] for pid in pids}, *models, CONDENSER, ReaderConfig(device="cpu"),
        depth=6, on_hop=lambda hop, n: seen.append((hop, n)),
    )
    assert seen == [(1, 6), (2, 6), (3, 3)]  # claim × threshold runs
    for threshold, verdicts in zip(thresholds, together, strict=True):
        alone, _ = run(models, CLAIMS, condenser=CONDENSER.model_copy(update={"stage2_threshold": threshold}), depth=6)
        for v, w in zip(verdicts, alone, strict=True):
            assert v.uid == w.uid and [s.key for s, _ in v.facts] == [s.key for s, _ in w.facts]
            assert v.prob_supported == pytest.approx(w.prob_supported, abs=1e-5)
            assert v.pool == w.pool
            assert [(h.retrieved, [s.key for s, _ in h.kept], [s.key for s, _ in h.evidence], [s.key for s, _ in h.stage2]) for h in v.hops] == [
                (h.retrieved, [s.key for s, _ in h.kept], [s.key for s, _ in h.evidence], [s.key for s, _ in h.stage2]) for h in w.hops
            ]
    # the thresholds did differ: no context at all at 100, the capped context at -100
    assert all(h.kept == [] for v in together[0] for h in v.hops) and all(len(v.hops[0].kept) == CONDENSER.max_kept for v in together[1])
    # hop 1 (no context) was ranked once per claim, not once per threshold; no hop asked twice
    assert len(retriever.batches[0]) == len(CLAIMS)
    assert all(len(batch) == len(set(batch)) for batch in retriever.batches)


def assert_same_run(run, other) -> None:
    """Two runs' verdicts read and chose the same, hop by hop, exactly; their scores agree but for
    the last float bits, which a batch of other queries moves."""
    def keys(scored):
        return [s.key for s, _ in scored]

    def chosen(verdicts):
        return [(v.uid, v.pool, keys(v.facts), [(h.retrieved, keys(h.stage1_top), keys(h.kept), keys(h.evidence), keys(h.stage2), h.pool) for h in v.hops]) for v in verdicts]

    def scores(verdicts):
        return [x for v in verdicts for h in v.hops for scored in (h.stage1_top, h.kept, h.evidence, h.stage2) for _, x in scored]

    assert chosen(run) == chosen(other)
    assert scores(run) == pytest.approx(scores(other), abs=1e-5)


def test_a_memo_carries_hops_to_later_passes_which_then_equal_passes_without_it(models):
    """The calibration's passes (a grid, one threshold past its edge, the evidence ranker setting
    the context): with a memo each (claim, context) hop is retrieved and condensed once over them
    all, and every pass gives exactly what it gives alone."""
    by_pid = {p.pid: p for p in WORLD}
    texts = [f"{p.title} | " + " ".join(s.text for s in p.sentences) for p in WORLD]
    retriever, memo = CountingRetriever([p.pid for p in WORLD], texts), HopMemo().bound("bm25 + untrained MiniLM")

    def engine_pass(thresholds, condenser=CONDENSER, memo=memo, retriever=retriever):
        return verify_claims_at_thresholds(
            CLAIMS, thresholds, retriever, lambda pids: {pid: by_pid[pid] for pid in pids}, models[0], models[1], None, condenser, ReaderConfig(device="cpu"),
            depth=6, memo=memo,
        )

    ranker_context = CONDENSER.model_copy(update={"evidence_ranker": LAST_RETRIEVED_FIRST, "evidence_ranker_context": True})
    passes = [([100.0, -100.0], CONDENSER), ([0.0], CONDENSER), ([-100.0, 0.0], ranker_context)]
    for thresholds, condenser in passes:
        with_memo = engine_pass(thresholds, condenser)
        alone = engine_pass(thresholds, condenser, memo=None, retriever=CountingRetriever([p.pid for p in WORLD], texts))
        for run, run_alone in zip(with_memo, alone, strict=True):
            assert_same_run(run, run_alone)
    asked = [query for batch in retriever.batches for query in batch]
    assert len(asked) == len(set(asked)) == memo.computed  # no (claim, context) ranked twice over the passes
    assert sum(ctx == () for _, ctx in asked) == len(CLAIMS)  # hop 1 once per claim, in the first pass alone
    assert memo.reused >= 2 * len(CLAIMS)  # the later passes' hop 1 at least
    # a hop is reused only where every setting it reads is the same: fewer stage-2 facts recompute all
    fewer_facts, counting = CONDENSER.model_copy(update={"top_facts": 3}), CountingRetriever([p.pid for p in WORLD], texts)
    assert_same_run(engine_pass([0.0], fewer_facts, retriever=counting)[0], engine_pass([0.0], fewer_facts, memo=None)[0])
    assert counting.batches[0] == [(c.claim, ()) for c in CLAIMS]
    # bound to other models, the memo starts empty
    assert len(memo) and not len(memo.bound("another index"))


class ReversedRetriever(CountingRetriever):
    """BM25's ranking of every passage, worst first: a route that differs from BM25 on every query."""

    def rank_batch(self, claims, contexts, depths, excludes):
        full = super().rank_batch(claims, contexts, [len(WORLD)] * len(claims), excludes)
        return [ranking[::-1][:depth] for ranking, depth in zip(full, depths, strict=True)]


def test_a_retriever_routed_by_hop_count_ranks_each_claim_with_its_route_one_batch_a_hop(models):
    """``search.fusion_hop_counts``: claim a (3 hops) is routed, claim b (2 hops) is not; each
    claim's hops are what its route alone gives, and each route ranks only its own claims."""
    by_pid = {p.pid: p for p in WORLD}
    texts = [f"{p.title} | " + " ".join(s.text for s in p.sentences) for p in WORLD]
    pids = [p.pid for p in WORLD]
    alone, routed = CountingRetriever(pids, texts), ReversedRetriever(pids, texts)
    passages_of = lambda wanted: {pid: by_pid[pid] for pid in wanted}  # noqa: E731
    engine = lambda claims, retriever: verify_claims(claims, retriever, passages_of, *models, CONDENSER, ReaderConfig(device="cpu"), depth=6)  # noqa: E731
    verdicts = engine(CLAIMS, HopCountRetriever(alone, routed, {3}))
    assert [{claim for claim, _ in batch} for batch in routed.batches] == [{CLAIMS[0].claim}] * 3  # claim a's three hops, one batch each
    assert [{claim for claim, _ in batch} for batch in alone.batches] == [{CLAIMS[1].claim}] * 2
    for verdict, claim, route in zip(verdicts, CLAIMS, (ReversedRetriever(pids, texts), CountingRetriever(pids, texts)), strict=True):
        (expected,) = engine([claim], route)
        assert [h.retrieved for h in verdict.hops] == [h.retrieved for h in expected.hops]
        assert [s.key for s, _ in verdict.facts] == [s.key for s, _ in expected.facts]
    (unrouted,) = engine([CLAIMS[0]], CountingRetriever(pids, texts))
    assert verdicts[0].hops[0].retrieved != unrouted.hops[0].retrieved  # the routes differ where it matters
