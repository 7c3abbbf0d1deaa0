"""HoVer's set metrics against hand-worked examples."""

from __future__ import annotations

import pytest

from baleen_core.metrics import hover_score, retrieval_at_k, set_prf


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
