"""Choosing stage 2's threshold from engine runs on held-out training claims (hand-worked)."""

from __future__ import annotations

import math

import pytest

from baleen_core.condensing.calibration import ThresholdTrial, calibration_claims, choose_threshold, in_hop_mix, threshold_trial
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


def test_calibration_claims_are_claims_stage2_never_trained_on_least_like_those_it_did():
    # 40 claims of 3 hops in label order. Claims c00..c29 share passages the way a small world's
    # claims share cities and countries (100 + i % 10, 200 + i % 4); c30..c39 share none.
    def passages(i: int) -> tuple[int, int, int]:
        return (i, 100 + i % 10, 200 + i % 4) if i < 30 else (i, 300 + i, 400 + i)

    hops = [(f"c{i:02d}", pid) for i in range(40) for pid in passages(i)]
    read = 60  # stage 2 read the first 60 hops: claims c00..c19, less its validation claims
    validation = held_out_uids([uid for uid, _ in hops[:read]], 0.1, 7)
    trained = {f"c{i:02d}" for i in range(20)} - validation
    chosen = calibration_claims(hops, read, 0.1, 7, most=12)
    assert len(chosen) == 12 and chosen == sorted(chosen)
    assert not set(chosen) & trained
    assert {f"c{i}" for i in range(30, 40)} < set(chosen)  # the claims sharing nothing come first
    assert calibration_claims(hops, read, 0.1, 7, most=12) == chosen  # seeded
    # stage 2 read everything: only its validation claims remain
    assert set(calibration_claims(hops, len(hops), 0.1, 7, most=12)) == held_out_uids([uid for uid, _ in hops], 0.1, 7)


def test_in_hop_mix_gives_each_hop_count_its_share_of_the_places_hand_worked():
    # 10 claims: six of 2 hops, three of 3, one of 4. 5 places: 5·6/10 = 3, 5·3/10 = 1.5, 5·1/10 = 0.5;
    # floors 3 + 1 + 0 = 4, the last place to the largest remainder, a tie of 0.5 going to 4 hops.
    hop_counts = {"a": 2, "b": 2, "c": 2, "d": 2, "e": 2, "f": 2, "g": 3, "h": 3, "i": 3, "j": 4}
    ranked = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]  # the short claims rank first
    assert in_hop_mix(ranked, hop_counts, 5) == ["a", "b", "c", "g", "j"]
    # no 4-hop candidate left: its place goes to the best-ranked claim not yet taken, of any count
    assert in_hop_mix(ranked[:9], hop_counts, 5) == ["a", "b", "c", "d", "g"]
    assert in_hop_mix(ranked[:3], hop_counts, 5) == ["a", "b", "c"]  # fewer candidates than places


def test_calibration_claims_keep_the_training_claims_hop_mix():
    # 2-hop claims c00..c19 share nothing with training; 4-hop claims c20..c39 share their hubs with
    # the trained claims t00..t09. By likeness alone all 8 places would go to 2-hop claims.
    hops = [(f"t{i:02d}", pid) for i in range(10) for pid in (i, 500, 501, 502)]
    hops += [(f"c{i:02d}", pid) for i in range(20) for pid in (100 + 2 * i, 101 + 2 * i)]
    hops += [(f"c{i:02d}", pid) for i in range(20, 40) for pid in (200 + i, 500, 501, 502)]
    chosen = calibration_claims(hops, 40, 0.0, 7, most=8)  # stage 2 trained on every t-claim's hops
    # the hop mix counts every training claim: 20 of 2 hops and 30 of 4 → 3.2 and 4.8 places → 3 and 5
    assert sum(uid < "c20" for uid in chosen) == 3 and sum("c20" <= uid < "t" for uid in chosen) == 5
