"""HoVer's set metrics against hand-worked examples."""

from __future__ import annotations

import pytest

from baleen_core.metrics import set_prf


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
