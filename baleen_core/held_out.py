"""Which training claims are held out: one seeded rule for every stage that needs unseen claims.

The condensers' and the reader's validation curves, the stage-2 threshold calibration and the
reader checks all hold out whole claims (never single hops, so no claim is half seen), chosen the
same way from the same seed, so "held out" means the same claims wherever it is used.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence


def held_out_uids(uids: Iterable[str], share: float, seed: int) -> set[str]:
    """A seeded ``share`` of the distinct claim uids: the claims held out of training."""
    distinct = sorted(set(uids))
    n = round(share * len(distinct))
    return set(random.Random(seed).sample(distinct, n)) if n else set()


def split_held_out(examples: Sequence, share: float, seed: int) -> tuple[list, list]:
    """(train, held out) of examples with a ``uid``: every example of a held-out claim
    (:func:`held_out_uids`) goes to the second list."""
    held = held_out_uids((e.uid for e in examples), share, seed)
    return [e for e in examples if e.uid not in held], [e for e in examples if e.uid in held]
