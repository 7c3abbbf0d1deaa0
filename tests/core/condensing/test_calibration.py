"""Choosing stage 2's threshold from engine runs on held-out training claims (hand-worked)."""

from __future__ import annotations

import math

import pytest

from baleen_core.condensing.calibration import ThresholdTrial, calibration_claims, choose_threshold, threshold_trial
from baleen_core.held_out import held_out_uids


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


def test_calibration_claims_are_stage2_validation_claims_then_claims_it_never_read():
    everything = [f"c{i:02d}" for i in range(40) for _ in range(3)]  # 40 claims, 3 hops each, in label order
    read = everything[:60]  # stage 2 read the first 60 hops: claims c00..c19
    validation = held_out_uids(read, 0.1, 7)
    chosen = calibration_claims(read, everything, 0.1, 7, most=12)
    assert len(validation) == 2 and validation <= set(chosen)
    assert len(chosen) == 12 and chosen == sorted(chosen)
    never_read = set(chosen) - validation
    assert never_read and all(int(uid[1:]) >= 20 for uid in never_read)  # none stage 2 trained on
    assert calibration_claims(read, everything, 0.1, 7, most=12) == chosen  # seeded
    # a budget smaller than the validation claims takes a sample of them; without unread claims only they remain
    one = calibration_claims(read, everything, 0.1, 7, most=1)
    assert len(one) == 1 and set(one) <= validation
    assert set(calibration_claims(everything, everything, 0.1, 7, most=12)) == held_out_uids(everything, 0.1, 7)
    assert len(held_out_uids(everything, 0.5, 7)) > 12 and len(calibration_claims(everything, everything, 0.5, 7, most=12)) == 12
