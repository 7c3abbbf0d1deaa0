"""HoVer's evaluation metrics, per claim (averaged over claims by the caller).

- ``set_prf``: HotpotQA/HoVer's supporting-fact metric, precision, recall and F1 of the predicted
  set against the gold set, and exact match; on (pid, sid) pairs it is the sentence metric, on
  pids the passage metric. Nothing predicted gives precision 0; an empty gold set is refused.
- ``retrieval_at_k``: all gold passages among the first k retrieved.
- ``hover_score``: label right and evidence from every gold passage, as HoVer counts it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
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


def retrieval_at_k(retrieved: Sequence[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """1.0 when every gold passage is among the first ``k`` retrieved (over all hops, in hop then
    rank order), else 0.0: Baleen's Retrieval@k."""
    return float(set(gold) <= set(list(retrieved)[:k]))


def hover_score(
    label_correct: bool,
    ranked_passages: Sequence[int],
    ranked_sentences: Mapping[int, Sequence[int]],
    gold: Iterable[tuple[int, int]],
    num_hops: int,
) -> float:
    """HoVer's score for one claim: 1.0 when the label is right *and* every gold passage has at
    least one of its gold sentences among the evidence that counts, which for a k-hop claim is
    the top 2 sentences (``ranked_sentences[pid]``, best first) of each of the first k + 1
    retrieved passages (``ranked_passages``)."""
    if not label_correct:
        return 0.0
    counted = {(pid, sid) for pid in ranked_passages[: num_hops + 1] for sid in ranked_sentences.get(pid, ())[:2]}
    needed: dict[int, set[int]] = {}
    for pid, sid in gold:
        needed.setdefault(pid, set()).add(sid)
    return float(all(any((pid, sid) in counted for sid in sids) for pid, sids in needed.items()))
