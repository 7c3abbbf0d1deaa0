"""Set metrics of HoVer's evaluation, per claim (averaged over claims by the caller).

``set_prf`` is HotpotQA/HoVer's supporting-fact metric: precision, recall and F1 of the predicted
set against the gold set, and exact match. Conventions for empty sets (HotpotQA's): nothing
predicted gives precision 0; an empty gold set is not a HoVer case and is refused.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class SetScores:
    precision: float
    recall: float
    f1: float
    em: float


def set_prf(predicted: Iterable[Hashable], gold: Iterable[Hashable]) -> SetScores:
    """Precision, recall, F1 and exact match of ``predicted`` against ``gold`` (as sets)."""
    p, g = set(predicted), set(gold)
    if not g:
        raise ValueError("the gold set is empty; every HoVer claim has supporting facts")
    hits = len(p & g)
    precision = hits / len(p) if p else 0.0
    recall = hits / len(g)
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    return SetScores(precision, recall, f1, float(p == g))
