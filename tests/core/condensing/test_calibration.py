"""Choosing the context threshold from engine runs on held-out training claims (hand-worked)."""

from __future__ import annotations

import math

import pytest

from baleen_core.condensing.calibration import ThresholdTrial, choose_threshold, threshold_trial


def test_threshold_trial_scores_final_facts_against_the_whole_gold_set_hand_worked():
    # claim a: gold facts (1,0) (2,0); ended with (1,0) (3,1): fact F1 = 2·½·½/(½+½) = ½, passages {1,3} ≠ {1,2}
    # claim b: gold facts (4,0) (4,1) (5,2); ended with (4,0) (5,2): fact F1 = 2·1·⅔/(1+⅔) = 0.8, passages {4,5} = {4,5}
    trial = threshold_trial(-1.0, [[(1, 0), (3, 1)], [(4, 0), (5, 2)]], [{(1, 0), (2, 0)}, {(4, 0), (4, 1), (5, 2)}])
    assert trial.claims == 2
    assert trial.final_fact_f1 == pytest.approx((0.5 + 0.8) / 2)
    assert trial.final_passage_em == 0.5  # passage EM forgives the missing sentence (4,1)
    assert trial.mean_final_facts == 2.0
    assert trial.keeps_above_probability == pytest.approx(1 / (1 + math.e))
    with pytest.raises(ValueError, match="no held-out claim"):
        threshold_trial(0.0, [], [])


def test_choose_threshold_takes_the_best_f1_and_breaks_ties_towards_zero():
    def trial(threshold: float, f1: float) -> ThresholdTrial:
        return ThresholdTrial(threshold, 10, f1, 0.0, 2.0)

    assert choose_threshold([trial(0.0, 0.5), trial(-1.0, 0.7), trial(-2.0, 0.6)]).threshold == -1.0
    assert choose_threshold([trial(-2.0, 0.6), trial(0.0, 0.6), trial(-1.0, 0.6)]).threshold == 0.0
    assert choose_threshold([trial(-1.0, 0.6), trial(1.0, 0.6)]).threshold == 1.0  # equally far from 0: the higher
    with pytest.raises(ValueError, match="no threshold"):
        choose_threshold([])
