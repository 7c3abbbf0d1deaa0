"""The context threshold, chosen on training claims no model trained on.

The threshold decides which of stage 2's facts become the next hop's context, so it steers FLIPR's
query and stage 1's at every later hop; the claim's final facts follow the evidence rule (the
reference's L3x) whatever it is. A threshold is therefore judged by running the whole engine with
it, not by re-cutting the last hop's scores: the engine runs over the held-out training claims
(``labels.held_out_share``: neither FLIPR nor the condensers trained on them) once per candidate
threshold, in one pass, and the threshold whose final facts best match the claims' gold facts
(mean F1) wins. Never the evaluated split.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

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
