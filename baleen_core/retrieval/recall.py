"""Claim-only retrieval recall: how many of a claim's gold passages one retrieval finds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Ranker(Protocol):
    def rank(self, claim: str, context: Sequence[str], depth: int, exclude: set[int]) -> list[tuple[int, float]]: ...


def gold_recall(ranker: Ranker, claims: Sequence[tuple[str, int, set[int]]], k: int) -> dict[str, float]:
    """Mean fraction of gold passages in the top ``k`` for the claim alone, by hop count and 'all'.

    ``claims`` holds (claim text, num_hops, gold pids).
    """
    by_hops: dict[str, list[float]] = {}
    for text, num_hops, gold in claims:
        found = {pid for pid, _ in ranker.rank(text, [], k, set())}
        value = len(found & gold) / len(gold)
        by_hops.setdefault(str(num_hops), []).append(value)
        by_hops.setdefault("all", []).append(value)
    return {hops: sum(v) / len(v) for hops, v in sorted(by_hops.items())}
