"""HoVer's set metrics against hand-worked examples."""

from __future__ import annotations

import pytest

from baleen_core.metrics import bootstrap_ci, by_hop_count, evidence_ranking, gold_funnel, hover_score, paired_difference, retrieval_at_k, score_claim, set_prf, summarize_metrics


def test_partial_overlap_hand_worked():
    # predicted {a, b, c}, gold {b, c, d, e}: 2 hits → P = 2/3, R = 2/4, F1 = 2·(2/3)(1/2)/(2/3 + 1/2) = 4/7
    s = set_prf(["a", "b", "c"], ["b", "c", "d", "e"])
    assert s.precision == pytest.approx(2 / 3)
    assert s.recall == pytest.approx(0.5)
    assert s.f1 == pytest.approx(4 / 7)
    assert s.em == 0.0


def test_exact_match_and_duplicates_count_once():
    s = set_prf([("T", 1), ("T", 1), ("U", 0)], [("U", 0), ("T", 1)])
    assert (s.precision, s.recall, s.f1, s.em) == (1.0, 1.0, 1.0, 1.0)


def test_nothing_predicted_and_no_overlap_score_zero():
    assert set_prf([], ["a"]) == set_prf(["b"], ["a"]) == set_prf(["b"], ["a"]).__class__(0.0, 0.0, 0.0, 0.0)


def test_empty_gold_is_refused():
    with pytest.raises(ValueError, match="gold set is empty"):
        set_prf(["a"], [])


def test_retrieval_at_k_needs_every_gold_passage_within_k():
    retrieved = [5, 1, 9, 2, 7]
    assert retrieval_at_k(retrieved, {1, 2}, 4) == 1.0
    assert retrieval_at_k(retrieved, {1, 2}, 3) == 0.0  # 2 is fourth
    assert retrieval_at_k(retrieved, {1, 3}, 100) == 0.0


def test_hover_score_hand_worked():
    gold = {(10, 0), (10, 2), (20, 1)}  # a 2-hop claim: passages 10 and 20
    sentences = {10: [2, 4, 0], 30: [0, 1], 20: [3, 1]}
    # first k+1 = 3 passages 10, 30, 20; top-2 sentences: 10→{2, 4}, 20→{3, 1}: both passages covered
    assert hover_score(True, [10, 30, 20, 40], sentences, gold, 2) == 1.0
    assert hover_score(False, [10, 30, 20, 40], sentences, gold, 2) == 0.0  # wrong label
    # passage 20 fourth: beyond k + 1 = 3, so its evidence does not count
    assert hover_score(True, [10, 30, 40, 20], sentences, gold, 2) == 0.0
    # 20's gold sentence 1 is third in its ranking: beyond the top 2
    assert hover_score(True, [10, 20, 30], {10: [2], 20: [3, 0, 1]}, gold, 2) == 0.0


def test_evidence_ranking_orders_passages_by_their_best_fact():
    passages, sentences = evidence_ranking([(20, 1), (10, 0), (20, 0), (30, 4)])
    assert passages == [20, 10, 30]
    assert sentences == {20: [1, 0], 10: [0], 30: [4]}


def test_score_claim_hand_worked():
    # a 2-hop claim with gold passages 10 (sentences 0, 1) and 20 (sentence 3)
    gold = {(10, 0), (10, 1), (20, 3)}
    facts = [(10, 0), (20, 3), (30, 2)]  # final facts, best first: one distractor fact from passage 30
    read = [10, 30, 40, 10, 20]  # hop 1 read 10, 30, 40; hop 2 read 10 again and 20
    pool = [10, 30, *range(100, 198), 20]  # 20 entered the pool 101st
    scores = score_claim(facts, read, pool, gold, num_hops=2, predicted_label="SUPPORTED", gold_label="SUPPORTED", depth=100)
    # passages {10, 20, 30} vs gold {10, 20}: P = 2/3, R = 1, F1 = 0.8, not exact
    assert scores["passage_precision"] == pytest.approx(2 / 3) and scores["passage_recall"] == 1.0
    assert scores["passage_f1"] == pytest.approx(0.8) and scores["passage_em"] == 0.0
    # sentences: 2 of 3 predicted are gold, 2 of 3 gold found: P = R = F1 = 2/3
    assert scores["sentence_f1"] == pytest.approx(2 / 3) and scores["sentence_em"] == 0.0
    # both gold passages were read; but 20 is the pool's 101st passage, so Retrieval@100 misses
    assert scores["retrieval_at_hops"] == 1.0 and scores["retrieval_at_depth"] == 0.0
    assert score_claim(facts, read, pool[:99] + [20], gold, 2, "SUPPORTED", "SUPPORTED", 100)["retrieval_at_depth"] == 1.0
    # at depth 30 (the demo's) Retrieval@30 looks at the first 30: 20 is not there either, 10 alone would be
    assert score_claim(facts, read, pool, gold, 2, "SUPPORTED", "SUPPORTED", 30)["retrieval_at_depth"] == 0.0
    assert score_claim(facts, read, [10, 20, *range(100, 128)], gold, 2, "SUPPORTED", "SUPPORTED", 30)["retrieval_at_depth"] == 1.0
    assert score_claim(facts, read[:3], pool, gold, 2, "SUPPORTED", "SUPPORTED", 100)["retrieval_at_hops"] == 0.0
    # HoVer score: the first 3 passages of the facts are 10, 20, 30; 10's top-2 sentences hold 0, 20's hold 3
    assert scores["label_accuracy"] == scores["hover_score"] == 1.0
    wrong = score_claim(facts, read, pool, gold, 2, "NOT_SUPPORTED", "SUPPORTED", 100)
    assert wrong["label_accuracy"] == wrong["hover_score"] == 0.0
    unlabelled = score_claim(facts, read, pool, gold, 2, "SUPPORTED", None, 100)
    assert unlabelled["label_accuracy"] is None and unlabelled["hover_score"] is None


def test_bootstrap_interval_brackets_the_mean_and_is_reproducible():
    values = [1.0] * 30 + [0.0] * 70
    low, high = bootstrap_ci(values, samples=2000, seed=1)
    assert low < 0.3 < high and high - low < 0.25
    assert bootstrap_ci(values, samples=2000, seed=1) == (low, high)
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5)  # no variance, no width
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_gold_funnel_hand_worked():
    gold = [(1, 0), (1, 2), (2, 0), (3, 1)]  # gold passages 1, 2, 3
    retrieved = [9, 1, 2, 8, 2]  # 1 and 2 retrieved (2 twice counts once), 3 never
    stage1 = [1, 1, 2]
    facts = [(1, 0), (7, 0), (1, 3)]  # only passage 1 survives to the final facts
    funnel = gold_funnel(retrieved, stage1, facts, gold)
    assert funnel == {
        "gold_retrieved": pytest.approx(2 / 3), "gold_in_stage1": pytest.approx(2 / 3), "gold_in_facts": pytest.approx(1 / 3), "final_facts": 3, "final_passages": 2,
    }
    assert funnel["gold_in_facts"] == pytest.approx(set_prf({pid for pid, _ in facts}, {1, 2, 3}).recall)  # = passage recall
    assert gold_funnel([], [], [], gold) == {"gold_retrieved": 0.0, "gold_in_stage1": 0.0, "gold_in_facts": 0.0, "final_facts": 0, "final_passages": 0}
    with pytest.raises(ValueError):
        gold_funnel([1], [1], [(1, 0)], [])


def test_by_hop_count_groups_in_hop_order_then_all():
    items = [("c", 4), ("a", 2), ("b", 3), ("d", 2)]
    groups = by_hop_count(items, lambda item: item[1])
    assert [(hops, [name for name, _ in chosen]) for hops, chosen in groups] == [
        ("2", ["a", "d"]),
        ("3", ["b"]),
        ("4", ["c"]),
        ("all", ["c", "a", "b", "d"]),
    ]
    assert by_hop_count([], lambda item: item) == [("all", [])]


def test_summarize_metrics_by_hop_count_and_overall():
    rows = [{"num_hops": 2, "m": 1.0}, {"num_hops": 2, "m": 0.0}, {"num_hops": 3, "m": 1.0}, {"num_hops": 3, "m": None}]
    summary = {r["hops"]: r for r in summarize_metrics(rows, ["m"], samples=100)}
    assert set(summary) == {"2", "3", "all"}
    assert summary["2"]["m"] == 0.5 and summary["3"]["m"] == 1.0 and summary["all"]["m"] == pytest.approx(2 / 3)
    assert summary["all"]["claims"] == 4  # a None value is skipped in the mean, not the claim count
    assert summary["3"]["m_ci"] == (1.0, 1.0)
    assert summary["2"]["m_ci"][0] <= 0.5 <= summary["2"]["m_ci"][1]

    plain = summarize_metrics(rows + [{"num_hops": 4, "m": None}], ["m"], samples=0)
    assert [(r["hops"], r["claims"], r["m"]) for r in plain] == [("2", 2, 0.5), ("3", 2, 1.0), ("4", 1, None), ("all", 5, pytest.approx(2 / 3))]
    assert not any("m_ci" in r for r in plain)  # samples=0: means only


def test_paired_difference_resamples_claims_together():
    better = paired_difference([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])
    assert better.mean == 1.0 and better.ci == (1.0, 1.0) and better.p_not_greater == 0.0
    # b is a one a claim ahead of a: every pair differs by exactly +0.1, so the paired interval
    # has no width, while each system's own interval is wide (easy and hard claims)
    a, b = [0.9, 0.1, 0.6, 0.3, 1.0, 0.0], [0.8, 0.0, 0.5, 0.2, 0.9, -0.1]
    paired = paired_difference(a, b, samples=500)
    assert paired.mean == pytest.approx(0.1) and paired.ci == pytest.approx((0.1, 0.1)) and paired.p_not_greater == 0.0
    low, high = bootstrap_ci(a, samples=500)
    assert high - low > 0.3
    # no difference on average: the interval straddles 0 and about half the resamples are <= 0
    even = paired_difference([1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], samples=2000, seed=3)
    assert even.mean == 0.0 and even.ci[0] < 0 < even.ci[1] and 0.3 < even.p_not_greater < 0.8
    with pytest.raises(ValueError):
        paired_difference([1.0], [1.0, 0.0])
