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
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from baleen_core.metrics import set_prf
from baleen_core.held_out import held_out_uids

Fact = tuple[int, int]  # (pid, sid)


def calibration_claims(hops: Sequence[tuple[str, int]], read: int | None, validation_share: float, seed: int, most: int) -> list[str]:
    """At most ``most`` training claims stage 2 did not train on, those least like the ones it did,
    in the training claims' mix of hop counts.

    ``hops`` are the label round's (claim uid, positive passage) in label order, of which stage 2
    read the first ``read`` (all of them when None). The candidates are the claims it held out of
    those (its validation claims) and the claims it never read; they are taken in order of the
    share of their gold passages that were positives of the hops it trained on, ties by a seeded
    draw. A dev claim shares no chain with a training claim, but a held-out training claim of a
    small world shares most of its passages with trained ones, and a choice made on those rewards
    memory (on the tuning world a stage-2 change scored +0.05 final-fact F1 on such claims, −0.06
    on the least alike and −0.03 on dev; docs/demo.md). The least alike lean to short claims,
    which want a stricter threshold than 4-hop ones, so each hop count gets its share of the
    ``most`` (:func:`in_hop_mix`). Sorted."""
    read_hops = hops[:read]
    read_uids = {uid for uid, _ in read_hops}
    validation = held_out_uids(read_uids, validation_share, seed)
    trained = {pid for uid, pid in read_hops if uid not in validation}
    passages: dict[str, set[int]] = {}
    for uid, pid in hops:
        passages.setdefault(uid, set()).add(pid)
    candidates = sorted(validation | (passages.keys() - read_uids))
    draw = random.Random(seed)
    tiebreak = {uid: draw.random() for uid in candidates}
    ranked = sorted(candidates, key=lambda uid: (len(passages[uid] & trained) / len(passages[uid]), tiebreak[uid]))
    return sorted(in_hop_mix(ranked, {uid: len(pids) for uid, pids in passages.items()}, most))


def in_hop_mix(ranked: Sequence[str], hop_counts: Mapping[str, int], most: int) -> list[str]:
    """The first ``most`` of ``ranked`` with each hop count's share set by its share of all of
    ``hop_counts`` (largest remainders, ties to the longer claims); a hop count short of
    candidates leaves its places to the next ranked claims of any count. In rank order."""
    mix = Counter(hop_counts.values())
    total = sum(mix.values())
    places = {count: most * n // total for count, n in mix.items()}
    by_remainder = sorted(mix, key=lambda count: (-(most * mix[count] % total), -count))
    for count in by_remainder[: most - sum(places.values())]:
        places[count] += 1
    chosen: set[str] = set()
    for uid in ranked:
        if places[hop_counts[uid]] > 0:
            places[hop_counts[uid]] -= 1
            chosen.add(uid)
    for uid in ranked:
        if len(chosen) >= most:
            break
        chosen.add(uid)
    return [uid for uid in ranked if uid in chosen]


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
