"""The context threshold, chosen on training claims no model trained on.

The threshold decides which of stage 2's facts become the next hop's context, so it steers FLIPR's
query and stage 1's at every later hop; the claim's final facts follow the evidence rule (the
reference's L3x) whatever it is. A threshold is therefore judged by running the whole engine with
it, not by re-cutting the last hop's scores: the engine runs over the held-out training claims
(``labels.held_out_share``: neither FLIPR nor the condensers trained on them) once per candidate
threshold, in one pass, and the threshold whose final facts best match the claims' gold facts
(mean F1) wins. Never the evaluated split.

The **evidence floor** is the 0 of the evidence rule (the reference's L3x: of stage 2's best 5,
those above min(0, the second best)). It does not steer any hop, so it is judged by re-cutting
each held-out claim's last stage-2 read (:class:`LastRead`) at every floor of a grid, per hop
count: :func:`calibrate_evidence_floors` (issue 50's trial, ``benchmarks/evidence_floors.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from baleen_core.condensing.condense import hop_evidence, reader_facts
from baleen_core.condensing.evidence_ranker import HopRead, evidence_scores
from baleen_core.condensing.layouts import Sentence
from baleen_core.config import EVIDENCE_FLOOR_GRID, CondenserConfig, EvidenceRankerWeights, json_floor
from baleen_core.metrics import set_prf

Fact = tuple[int, int]  # (pid, sid)


@dataclass(frozen=True)
class ThresholdTrial:
    """How the engine ended on the held-out claims when run with one threshold."""

    threshold: float
    claims: int
    final_fact_f1: float  # mean over claims, against each claim's whole gold set
    final_passage_em: float
    mean_final_facts: float

    @property
    def keeps_above_probability(self) -> float:
        """The threshold as a probability: stage 2 keeps facts it thinks gold above this."""
        return 1 / (1 + math.exp(-self.threshold))


def threshold_trial(threshold: float, final_facts: Sequence[Sequence[Fact]], gold: Sequence[Collection[Fact]]) -> ThresholdTrial:
    """Score one engine run: each claim's final facts against its gold facts."""
    if not final_facts:
        raise ValueError("no held-out claim was verified; nothing to calibrate on")
    facts = [set_prf(f, g) for f, g in zip(final_facts, gold, strict=True)]
    passages = [set_prf({pid for pid, _ in f}, {pid for pid, _ in g}) for f, g in zip(final_facts, gold, strict=True)]
    n = len(final_facts)
    return ThresholdTrial(threshold, n, sum(s.f1 for s in facts) / n, sum(s.em for s in passages) / n, sum(len(f) for f in final_facts) / n)


def choose_threshold(trials: Sequence[ThresholdTrial]) -> ThresholdTrial:
    """The trial with the highest mean final-fact F1; ties go to the threshold nearest 0 (the
    reference's P > 0.5), then to the higher one."""
    if not trials:
        raise ValueError("no threshold was tried")
    return max(trials, key=lambda t: (round(t.final_fact_f1, 12), -abs(t.threshold), t.threshold))


def calibrate_threshold(finals: Mapping[float, Mapping[str, Sequence[Fact]]], gold: Mapping[str, Collection[Fact]]) -> tuple[ThresholdTrial, list[ThresholdTrial]]:
    """The chosen trial and every trial: ``finals`` holds each threshold's engine run (uid →
    final facts), scored on the claims that have gold facts (:func:`threshold_trial`,
    :func:`choose_threshold`)."""
    trials = []
    for threshold, facts in finals.items():
        uids = sorted(uid for uid in facts if uid in gold)
        trials.append(threshold_trial(threshold, [facts[uid] for uid in uids], [gold[uid] for uid in uids]))
    return choose_threshold(trials), trials


def threshold_past_edge(tried: Collection[float], best: float) -> float | None:
    """The next threshold to try when the best of those ``tried`` is the highest or the lowest of
    them, one step of the grid's spacing at that edge further out: a best value at an edge says
    the grid ends too early. None when it is inside, or fewer than two were tried."""
    ordered = sorted(set(tried))
    if len(ordered) < 2 or ordered[0] < best < ordered[-1]:
        return None
    if best == ordered[-1]:
        return best + (ordered[-1] - ordered[-2])
    return best - (ordered[1] - ordered[0])


def search_threshold_grid(grid: Sequence[float], steps_past_edge: int, run_and_choose: Callable[[list[float]], float]) -> float:
    """The best threshold of ``grid``, which grows past whichever edge wins, one threshold at a time,
    at most ``steps_past_edge`` times. ``run_and_choose`` runs the thresholds it is given (first the
    grid, then each new one alone) and returns the best of every threshold run so far, so the
    caller keeps the runs; the engine is the costly part, so nothing is run twice."""
    tried = list(grid)
    best = run_and_choose(list(grid))
    for _ in range(steps_past_edge):
        further = threshold_past_edge(tried, best)
        if further is None:
            break
        tried.append(further)
        best = run_and_choose([further])
    return best


@dataclass(frozen=True)
class LastRead:
    """What stage 2 read at a claim's last hop and how it scored each fact: the evidence at any
    floor follows from it."""

    hops: int
    candidates: tuple[Sentence, ...]
    scores: tuple[float, ...]

    @property
    def scored(self) -> list[tuple[Sentence, float]]:
        """Each fact read with its stage-2 score, in reading order."""
        return list(zip(self.candidates, self.scores, strict=True))


def ranked_last_read(hops: int, claim: str, last: HopRead, ranker: EvidenceRankerWeights) -> LastRead:
    """A claim of ``hops`` hops's ``last`` read scored by the evidence ranker instead of stage 2:
    the evidence the engine cuts with that ranker, at any floor, follows from it."""
    return LastRead(hops, last.candidates, tuple(evidence_scores(ranker, claim, last)))


def recut_evidence(read: LastRead, floor: float, condenser: CondenserConfig) -> list[tuple[Sentence, float]]:
    """The claim's evidence, best first, with the rule's 0 moved to ``floor`` (the
    ``first-h-passages`` rule has none: there ``floor`` changes nothing)."""
    return hop_evidence(read.candidates, read.scores, condenser, read.hops, floor)


def evidence_at_floor(read: LastRead, floor: float, condenser: CondenserConfig) -> list[Fact]:
    """:func:`recut_evidence` as (pid, sid) facts."""
    return [fact.key for fact, _ in recut_evidence(read, floor, condenser)]


def calibrate_evidence_floors(
    reads: Mapping[str, LastRead], gold: Mapping[str, Collection[Fact]], condenser: CondenserConfig, floors: Sequence[float] = EVIDENCE_FLOOR_GRID
) -> dict[int, tuple[ThresholdTrial, list[ThresholdTrial]]]:
    """Per hop count, the floor whose evidence has the best mean fact F1 against the gold facts
    (ties: nearest 0, then the higher) and every floor's trial, as :func:`calibrate_threshold`
    does for the context threshold."""
    chosen = {}
    for hops in sorted({read.hops for read in reads.values()}):
        mine = {uid: read for uid, read in reads.items() if read.hops == hops}
        chosen[hops] = calibrate_threshold({floor: {uid: evidence_at_floor(read, floor, condenser) for uid, read in mine.items()} for floor in floors}, gold)
    return chosen


def threshold_trial_row(trial: ThresholdTrial) -> dict:
    """One context threshold's trial as the tables and results files show it (with the threshold
    as stage 2's probability)."""
    return {"threshold": trial.threshold, **_trial_means(trial), "keeps_p_above": round(trial.keeps_above_probability, 3)}


def floor_trial_row(trial: ThresholdTrial) -> dict:
    """One evidence floor's trial as the tables and results files show it (±inf as strings)."""
    return {"floor": json_floor(trial.threshold), **_trial_means(trial)}


def _trial_means(trial: ThresholdTrial) -> dict:
    """What both trial rows show of how the engine ended, rounded."""
    return {
        "claims": trial.claims,
        "final_fact_f1": round(trial.final_fact_f1, 4),
        "final_passage_em": round(trial.final_passage_em, 4),
        "mean_final_facts": round(trial.mean_final_facts, 3),
    }


def evidence_at_floors(reads: Mapping[str, LastRead], floors: Mapping[int, float], condenser: CondenserConfig) -> dict[str, list[tuple[Sentence, float]]]:
    """Each claim's evidence at its hop count's floor (0, the reference's, where none is given):
    the final facts the engine would have ended with had it run with ``floors``."""
    return {uid: recut_evidence(read, floors.get(read.hops, 0.0), condenser) for uid, read in reads.items()}


def reader_facts_at_floors(
    reads: Mapping[str, LastRead], floors: Mapping[int, float], condenser: CondenserConfig, last_read_facts: int | None
) -> dict[str, list[tuple[Sentence, float]]]:
    """What the reader reads of each claim, as the engine would hand it had it run with ``floors``:
    its evidence (:func:`evidence_at_floors`), or, with ``last_read_facts`` N (``reader.last_read_facts``),
    the best N facts of its last stage-2 read (:func:`~baleen_core.condensing.reader_facts`)."""
    if last_read_facts is None:
        return evidence_at_floors(reads, floors, condenser)
    return {uid: reader_facts([], read.scored, last_read_facts) for uid, read in reads.items()}
