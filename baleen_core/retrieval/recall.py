"""Claim-only retrieval recall: how many of a claim's gold passages one retrieval finds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Ranker(Protocol):
    def rank(self, claim: str, context: Sequence[str], depth: int, exclude: set[int]) -> list[tuple[int, float]]: ...


def gold_recall(ranker: Ranker, claims: Sequence[tuple[str, int, set[int]]], ks: Sequence[int] = (25,)) -> dict[int, dict[str, float]]:
    """Mean fraction of gold passages in the top k for the claim alone, for each k, by hop count
    and 'all': ``{k: {"2": …, "3": …, "4": …, "all": …}}``. One retrieval per claim, at max(ks).

    ``claims`` holds (claim text, num_hops, gold pids).
    """
    values: dict[int, dict[str, list[float]]] = {k: {} for k in ks}
    for text, num_hops, gold in claims:
        ranked = [pid for pid, _ in ranker.rank(text, [], max(ks), set())]
        for k in ks:
            value = len(set(ranked[:k]) & gold) / len(gold)
            values[k].setdefault(str(num_hops), []).append(value)
            values[k].setdefault("all", []).append(value)
    return {k: {hops: sum(v) / len(v) for hops, v in sorted(by_hops.items())} for k, by_hops in values.items()}
