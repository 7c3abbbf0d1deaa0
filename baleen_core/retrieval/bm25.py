"""BM25 over ``title | text`` with bm25s: the round-0 labeller and the sparse baseline."""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np


class Bm25Retriever:
    """Ranks passages by BM25 (Lucene variant, English stop words). Context facts are appended
    to the claim as extra query text."""

    name = "bm25"

    def __init__(self, pids: Sequence[int], texts: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.pids = np.asarray(pids, dtype=np.int64)
        self.position_of_pid = {int(p): i for i, p in enumerate(self.pids)}
        self.model = bm25s.BM25(k1=k1, b=b)
        self.model.index(bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False)

    def _scores(self, claim: str, context: Sequence[str]) -> np.ndarray:
        query = " ".join([claim, *context])
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        return self.model.get_scores(tokens)

    def rank(self, claim: str, context: Sequence[str], depth: int, exclude: set[int]) -> list[tuple[int, float]]:
        return self._top(self._scores(claim, context), depth, exclude)

    def _top(self, scores: np.ndarray, depth: int, exclude: set[int]) -> list[tuple[int, float]]:
        scores = scores.astype(np.float64)
        for pid in exclude:
            if (pos := self.position_of_pid.get(int(pid))) is not None:
                scores[pos] = -np.inf
        depth = min(depth, len(scores))
        top = np.argpartition(-scores, depth - 1)[:depth]
        top = top[np.lexsort((self.pids[top], -scores[top]))]
        return [(int(self.pids[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]

    def rank_batch(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[set[int]]
    ) -> list[list[tuple[int, float]]]:
        """:meth:`rank` for each query (the engine's hop)."""
        return self.rank_and_score(claims, contexts, depths, excludes, [()] * len(claims))[0]

    def rank_and_score(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[set[int]], pids: Sequence[Sequence[int]]
    ) -> tuple[list[list[tuple[int, float]]], list[list[float]]]:
        """Per query, :meth:`rank` and :meth:`score` from one scoring of the corpus (a label round's hop)."""
        ranked, scored = [], []
        for claim, context, depth, exclude, these in zip(claims, contexts, depths, excludes, pids, strict=True):
            scores = self._scores(claim, context)
            ranked.append(self._top(scores, depth, exclude))
            scored.append(self._at(scores, these))
        return ranked, scored

    def score(self, claim: str, context: Sequence[str], pids: Sequence[int]) -> list[float]:
        return self._at(self._scores(claim, context), pids)

    def _at(self, scores: np.ndarray, pids: Sequence[int]) -> list[float]:
        return [float(scores[self.position_of_pid[int(p)]]) for p in pids]
