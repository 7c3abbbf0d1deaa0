"""Stage 2's threshold, chosen on held-out training claims.

A threshold decides which facts stage 2 keeps at *every* hop, and the kept facts are the next
hop's context: they steer FLIPR's query and stage 1's. So a threshold is judged by running the
whole engine with it, not by re-cutting the last hop's scores: the engine runs once per candidate
threshold on the same held-out training claims, and the threshold whose final facts best match
the claims' gold facts (mean F1) wins. Never the evaluated split: these are training claims that
stage 2 did not train on.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from baleen_core.metrics import set_prf
from baleen_core.held_out import held_out_uids

Fact = tuple[int, int]  # (pid, sid)


def calibration_claims(read_uids: Sequence[str], all_uids: Collection[str], validation_share: float, seed: int, most: int) -> list[str]:
    """At most ``most`` held-out training claims to calibrate on: the claims stage 2 held out of
    the hops it read (``read_uids``, its validation claims; a seeded sample of them when they are
    more), then a seeded sample of the training claims it never read (beyond its example budget).
    Sorted."""
    validation = sorted(held_out_uids(read_uids, validation_share, seed))
    if len(validation) >= most:
        return sorted(random.Random(seed).sample(validation, most))
    unread = sorted(set(all_uids) - set(read_uids))
    return sorted(validation + random.Random(seed).sample(unread, min(most - len(validation), len(unread))))


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
