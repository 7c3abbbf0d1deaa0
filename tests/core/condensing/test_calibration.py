"""Choosing the context threshold from engine runs on held-out training claims, and the evidence
floor per hop count from their last stage-2 reads (hand-worked)."""

from __future__ import annotations

import math

import pytest

from baleen_core.condensing.calibration import (
    LastRead,
    ThresholdTrial,
    calibrate_evidence_floors,
    calibrate_threshold,
    choose_threshold,
    evidence_at_floor,
    evidence_at_floors,
    floor_trial_row,
    reader_facts_at_floors,
    search_threshold_grid,
    threshold_past_edge,
    threshold_trial,
    threshold_trial_row,
)
from baleen_core.condensing.layouts import Sentence
from baleen_core.config import CondenserConfig


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


def test_calibrate_threshold_scores_each_run_on_the_claims_with_gold_facts():
    # threshold 0: claim a ends with its gold (1,0) (2,0), F1 1; claim b with (4,0) only, F1 = 2·1·½/(1+½) = ⅔
    # threshold -1: a ends with (1,0) (2,0) (3,0), F1 = 2·⅔·1/(⅔+1) = 0.8; b with (4,0) (4,1), F1 1
    # claim c has no gold facts: left out of both; mean F1 (1 + ⅔)/2 = 0.833 against (0.8 + 1)/2 = 0.9
    gold = {"a": {(1, 0), (2, 0)}, "b": {(4, 0), (4, 1)}}
    finals = {0.0: {"b": [(4, 0)], "a": [(1, 0), (2, 0)], "c": [(9, 0)]}, -1.0: {"a": [(1, 0), (2, 0), (3, 0)], "b": [(4, 0), (4, 1)], "c": []}}
    best, trials = calibrate_threshold(finals, gold)
    assert [t.threshold for t in trials] == [0.0, -1.0] and all(t.claims == 2 for t in trials)
    assert trials[0].final_fact_f1 == pytest.approx((1 + 2 / 3) / 2) and trials[1].final_fact_f1 == pytest.approx(0.9)
    assert best is trials[1]


def test_threshold_past_edge_steps_out_of_whichever_edge_won_by_that_edges_spacing():
    assert threshold_past_edge([0.0, -1.0, -2.0], 0.0) == 1.0
    assert threshold_past_edge([0.0, -1.0, -2.0], -2.0) == -3.0
    assert threshold_past_edge([4.0, 3.0, 1.0, 0.0, -2.0], -2.0) == -4.0  # the spacing at the low edge is 2
    assert threshold_past_edge([0.0, -1.0, -2.0], -1.0) is None  # inside: the grid brackets the best
    assert threshold_past_edge([0.0], 0.0) is None  # one threshold has no spacing, nor anything to choose from


def test_search_threshold_grid_follows_a_rising_curve_past_the_edge_and_runs_each_threshold_once():
    # final-fact F1 by threshold: rising to +1, falling after it
    f1 = {-3.0: 0.70, -2.0: 0.80, -1.0: 0.82, 0.0: 0.83, 1.0: 0.84, 2.0: 0.835, 3.0: 0.9}
    calls: list[list[float]] = []
    seen: list[float] = []

    def run_and_choose(thresholds: list[float]) -> float:
        calls.append(thresholds)
        seen.extend(thresholds)
        return max(seen, key=f1.__getitem__)

    # 0 wins the grid, so +1 runs; +1 wins, so +2 runs; +2 loses to +1 and the search stops (3 is never reached)
    assert search_threshold_grid([0.0, -1.0, -2.0], 3, run_and_choose) == 1.0
    assert calls == [[0.0, -1.0, -2.0], [1.0], [2.0]]
    # the steps are capped: with one step, +1 is run and chosen, +2 is not tried
    calls.clear(), seen.clear()
    assert search_threshold_grid([0.0, -1.0, -2.0], 1, run_and_choose) == 1.0 and calls == [[0.0, -1.0, -2.0], [1.0]]
    # 0 steps: the grid as given; a best inside the grid: nothing more
    calls.clear(), seen.clear()
    assert search_threshold_grid([0.0, -1.0, -2.0], 0, run_and_choose) == 0.0 and calls == [[0.0, -1.0, -2.0]]
    calls.clear(), seen.clear()
    assert search_threshold_grid([2.0, 1.0, 0.0, -3.0], 2, run_and_choose) == 1.0 and calls == [[2.0, 1.0, 0.0, -3.0]]


def _read(hops: int, pids: list[int], scores: list[float]) -> LastRead:
    return LastRead(hops, tuple(Sentence(pid, 0, f"T{pid}", f"s{pid}") for pid in pids), tuple(scores))


def test_evidence_at_floor_recuts_the_last_read():
    read = _read(3, [4, 5, 6, 7], [2.0, 0.5, -0.5, -1.5])
    condenser = CondenserConfig()
    assert evidence_at_floor(read, 0.0, condenser) == [(4, 0), (5, 0)]
    assert evidence_at_floor(read, -1.0, condenser) == [(4, 0), (5, 0), (6, 0)]
    assert evidence_at_floor(read, -math.inf, condenser) == [(4, 0), (5, 0), (6, 0), (7, 0)]
    assert evidence_at_floor(read, math.inf, condenser) == [(4, 0), (5, 0)]


def test_calibrate_evidence_floors_chooses_per_hop_count_hand_worked():
    # 2 hops, claim a, gold (1,0) (2,0): floors inf … 0 keep the best 2, F1 1; -1 and lower add
    # (3,0) at -0.8, F1 0.8: a tie among inf … 0 goes to 0.
    # 3 hops, claim b, gold (4,0) (5,0) (6,0): floor 0 keeps 2 facts, F1 = 2·1·⅔/(1+⅔) = 0.8;
    # -1 keeps 3, F1 1; -2 and lower keep 4, F1 = 2·¾·1/(¾+1) = 6/7: -1 wins.
    reads = {"a": _read(2, [1, 2, 3], [1.0, -0.5, -0.8]), "b": _read(3, [4, 5, 6, 7], [2.0, 0.5, -0.5, -1.5])}
    gold = {"a": {(1, 0), (2, 0)}, "b": {(4, 0), (5, 0), (6, 0)}}
    chosen = calibrate_evidence_floors(reads, gold, CondenserConfig())
    assert {hops: best.threshold for hops, (best, _) in chosen.items()} == {2: 0.0, 3: -1.0}
    trials = {t.threshold: t.final_fact_f1 for t in chosen[3][1]}
    assert trials[0.0] == pytest.approx(0.8) and trials[-1.0] == 1.0 and trials[-2.0] == pytest.approx(6 / 7) and trials[math.inf] == pytest.approx(0.8)
    assert all(t.claims == 1 for _, trials_of in chosen.values() for t in trials_of)


def test_evidence_at_floors_uses_each_claims_hop_count_and_0_where_none_is_given():
    reads = {"a": _read(2, [1, 2, 3], [1.0, -0.5, -0.8]), "b": _read(3, [4, 5, 6, 7], [2.0, 0.5, -0.5, -1.5]), "c": _read(4, [8, 9, 10], [1.0, 0.5, 0.2])}
    recut = evidence_at_floors(reads, {3: -1.0, 4: math.inf}, CondenserConfig())
    assert {uid: [s.key for s, _ in facts] for uid, facts in recut.items()} == {
        "a": [(1, 0), (2, 0)],  # 2 hops: no floor given, the reference's 0 (the second best and above)
        "b": [(4, 0), (5, 0), (6, 0)],  # 3 hops at -1: -0.5 joins
        "c": [(8, 0), (9, 0)],  # 4 hops at inf: exactly the best 2, though 0.2 is above 0
    }


def test_the_reader_reads_the_evidence_at_the_floors_or_the_best_of_each_last_read():
    reads = {"a": _read(2, [1, 2, 3], [-0.8, 1.0, -0.5]), "b": _read(3, [4, 5, 6, 7], [0.5, -1.5, 2.0, -0.5])}
    condenser = CondenserConfig()
    assert reader_facts_at_floors(reads, {3: -1.0}, condenser, None) == evidence_at_floors(reads, {3: -1.0}, condenser)
    best = reader_facts_at_floors(reads, {3: -1.0}, condenser, 3)  # the floors play no part: the best 3 read, best first
    assert {uid: [(s.key, score) for s, score in facts] for uid, facts in best.items()} == {
        "a": [((2, 0), 1.0), ((3, 0), -0.5), ((1, 0), -0.8)],
        "b": [((6, 0), 2.0), ((4, 0), 0.5), ((7, 0), -0.5)],
    }


def test_trial_rows_round_the_means_and_write_the_threshold_as_the_tables_show_it():
    trial = ThresholdTrial(threshold=0.0, claims=3, final_fact_f1=2 / 3, final_passage_em=1 / 3, mean_final_facts=7 / 3)
    assert threshold_trial_row(trial) == {"threshold": 0.0, "claims": 3, "final_fact_f1": 0.6667, "final_passage_em": 0.3333, "mean_final_facts": 2.333, "keeps_p_above": 0.5}
    assert threshold_trial_row(ThresholdTrial(2.0, 3, 0.5, 0.5, 2.0))["keeps_p_above"] == 0.881  # 1 / (1 + e^-2)
    assert floor_trial_row(ThresholdTrial(-math.inf, 3, 0.5, 0.5, 2.0))["floor"] == "-inf"  # JSON has no infinity
    assert floor_trial_row(trial)["floor"] == 0.0 and "keeps_p_above" not in floor_trial_row(trial)
