"""FLIPR search over an index: candidate generation, approximate pruning, exact re-ranking.

1. **Probe.** Every valid query position finds its ``nprobe`` nearest centroids (faiss); the
   passages listed under them are the candidates.
2. **Prune.** Each candidate gets an approximate FLIPR score in which a query position's MaxSim is
   the best centroid score among the probed centroids that hold one of the passage's tokens, and,
   where none does, the position's lowest probed centroid score (an upper-bound style estimate, as
   XTR imputes missing similarities). Only the ``ncandidates`` best go on.
3. **Re-rank.** Their token embeddings are decompressed and scored with exact FLIPR.

:meth:`FliprSearcher.exhaustive` scores every passage with exact FLIPR: the reference that the
index is measured against.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from baleen_core.retrieval.index import FliprIndex
from baleen_core.retrieval.modeling import Flipr
from baleen_core.retrieval.scoring import counted_positions, flipr_aggregate, maxsim_packed


@dataclass(frozen=True)
class Hit:
    pid: int
    score: float


@dataclass(frozen=True)
class TokenMatch:
    """One query position of an explanation: its best document token and whether it counted."""

    part: str  # "claim" or "context"
    position: int
    query_token: str
    doc_token: str
    doc_position: int
    similarity: float
    counted: bool


class FliprSearcher:
    def __init__(self, flipr: Flipr, index: FliprIndex, nprobe: int = 4, ncandidates: int = 512, full_interaction: bool = False) -> None:
        """``full_interaction`` sums every query position's MaxSim (ColBERT) instead of FLIPR's
        top ``k_claim`` + ``k_context``: the baseline that isolates focused scoring."""
        if index.codec.dim != flipr.dim:
            raise ValueError(f"the index holds {index.codec.dim}-d embeddings but the encoder makes {flipr.dim}-d ones")
        self.flipr = flipr
        self.index = index
        self.nprobe = nprobe
        self.ncandidates = ncandidates
        cfg = flipr.config
        self.k_claim, self.k_context = (None, None) if full_interaction else (cfg.k_claim, cfg.k_context)
        self._last_query: tuple[tuple, torch.Tensor, int] | None = None

    # ---- public API ----------------------------------------------------------------------------
    def search(
        self,
        claims: Sequence[str],
        contexts: Sequence[Sequence[str]] | None = None,
        k: int = 25,
        exclude: Sequence[Collection[int]] | None = None,
    ) -> list[list[Hit]]:
        """Top-``k`` passages per claim (with its context facts), skipping ``exclude[i]`` pids."""
        return self._each_query(self.search_encoded, claims, contexts, k, exclude)

    def exhaustive(
        self,
        claims: Sequence[str],
        contexts: Sequence[Sequence[str]] | None = None,
        k: int = 25,
        exclude: Sequence[Collection[int]] | None = None,
    ) -> list[list[Hit]]:
        """Exact FLIPR over every passage (slow; the index's reference)."""
        return self._each_query(self.exhaustive_encoded, claims, contexts, k, exclude)

    # ---- the HopRanker protocol (latent hop ordering) -------------------------------------------
    name = "flipr"

    def rank(self, claim: str, context: Sequence[str], depth: int, exclude: set[int]) -> list[tuple[int, float]]:
        query, n_claim = self._encode_one(claim, context)
        return [(h.pid, h.score) for h in self.search_encoded(query, n_claim, depth, exclude)]

    def rank_batch(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[Collection[int]], batch_size: int = 32
    ) -> list[list[tuple[int, float]]]:
        """:meth:`rank` for many queries, encoded ``batch_size`` at a time (the engine's hop)."""
        ranked = []
        for start in range(0, len(claims), batch_size):
            chunk = slice(start, start + batch_size)
            queries, lengths, n_claim = self.encode(claims[chunk], contexts[chunk])
            for i, n in enumerate(lengths):
                hits = self.search_encoded(queries[i, :n], n_claim, depths[start + i], excludes[start + i])
                ranked.append([(h.pid, h.score) for h in hits])
        return ranked

    def score(self, claim: str, context: Sequence[str], pids: Sequence[int]) -> list[float]:
        """Exact FLIPR scores of the given passages (from the index's stored tokens)."""
        query, n_claim = self._encode_one(claim, context)
        positions = np.array([self.index.position_of_pid[int(p)] for p in pids], dtype=np.int64)
        return self.score_positions(query, n_claim, positions).tolist()

    def _encode_one(self, claim: str, context: Sequence[str]) -> tuple[torch.Tensor, int]:
        """One query's valid positions; a hop ranks and then scores the same query, so the last
        encoding is kept and reused."""
        key = (claim, tuple(context))
        if self._last_query is None or self._last_query[0] != key:
            queries, lengths, n_claim = self.encode([claim], [list(context)])
            self._last_query = (key, queries[0, : lengths[0]], n_claim)
        return self._last_query[1], self._last_query[2]

    def _each_query(self, method, claims, contexts, k, exclude) -> list[list[Hit]]:
        queries, lengths, n_claim = self.encode(claims, contexts)
        return [method(queries[i, :n], n_claim, k, exclude[i] if exclude else ()) for i, n in enumerate(lengths)]

    def encode(self, claims: Sequence[str], contexts: Sequence[Sequence[str]] | None = None) -> tuple[torch.Tensor, list[int], int]:
        """Query embeddings on the CPU, the number of valid positions of each, and ``n_claim``.
        Valid positions are always a prefix (claim positions, then the real context tokens)."""
        embs, batch = self.flipr.encode_queries(claims, contexts)
        return embs.cpu(), batch.score_mask.sum(dim=1).tolist(), batch.n_claim

    # ---- indexed search ------------------------------------------------------------------------
    def candidates(self, query: torch.Tensor, n_claim: int, exclude: Collection[int] = ()) -> np.ndarray:
        """Passage positions worth an exact score, best approximate score first."""
        index = self.index
        probe_scores, probe_ids = index.codec.probe(query.numpy(), self.nprobe)  # [L, nprobe]
        docs, owner = index.postings(probe_ids.ravel())
        if len(docs) == 0:
            return np.zeros(0, dtype=np.int64)
        unique_docs, doc_row = np.unique(docs, return_inverse=True)
        n_positions = query.shape[0]
        position = owner // probe_ids.shape[1]  # postings come in (position, probe) order
        approx = torch.from_numpy(np.repeat(probe_scores[:, -1][None, :], len(unique_docs), axis=0))
        flat = torch.from_numpy(doc_row * n_positions + position)
        approx = approx.view(-1).scatter_reduce(0, flat, torch.from_numpy(probe_scores.ravel()[owner]), "amax").view(len(unique_docs), n_positions)
        scores = flipr_aggregate(approx, torch.ones(n_positions, dtype=torch.bool), n_claim, self.k_claim, self.k_context)
        if exclude:
            excluded = np.isin(index.pids[unique_docs], np.fromiter(exclude, dtype=np.int64))
            scores[torch.from_numpy(excluded)] = float("-inf")
        take = min(self.ncandidates, len(unique_docs))
        top = torch.topk(scores, take).indices.numpy()
        return unique_docs[top][np.isfinite(scores.numpy()[top])]

    def score_positions(self, query: torch.Tensor, n_claim: int, positions: np.ndarray) -> torch.Tensor:
        """Exact FLIPR of the query against the passages at ``positions``."""
        tokens, owner = self.index.token_range(positions)
        embs = torch.from_numpy(self.index.embeddings(tokens))
        sims = maxsim_packed(query, embs, torch.from_numpy(owner), len(positions))
        return flipr_aggregate(sims, torch.ones(query.shape[0], dtype=torch.bool), n_claim, self.k_claim, self.k_context)

    def search_encoded(self, query: torch.Tensor, n_claim: int, k: int, exclude: Collection[int] = ()) -> list[Hit]:
        positions = self.candidates(query, n_claim, exclude)
        if len(positions) == 0:
            return []
        return self._top(positions, self.score_positions(query, n_claim, positions), k)

    def exhaustive_encoded(self, query: torch.Tensor, n_claim: int, k: int, exclude: Collection[int] = (), chunk: int = 4_096) -> list[Hit]:
        index = self.index
        scores = torch.empty(index.n_passages)
        for start in range(0, index.n_passages, chunk):
            positions = np.arange(start, min(start + chunk, index.n_passages))
            scores[start : start + len(positions)] = self.score_positions(query, n_claim, positions)
        if exclude:
            scores[torch.from_numpy(np.isin(index.pids, np.fromiter(exclude, dtype=np.int64)))] = float("-inf")
        return self._top(np.arange(index.n_passages), scores, k)

    def _top(self, positions: np.ndarray, scores: torch.Tensor, k: int) -> list[Hit]:
        values, order = torch.topk(scores, min(k, len(positions)))
        return [Hit(int(self.index.pids[positions[i]]), float(v)) for v, i in zip(values.tolist(), order.tolist(), strict=True) if v != float("-inf")]

    # ---- explanations --------------------------------------------------------------------------
    def explain(self, claim: str, context: Sequence[str], passage: str) -> tuple[float, list[TokenMatch]]:
        """Which query positions matched which tokens of one passage (``title | text``), and which
        of them counted in its FLIPR score. The passage is re-encoded, so the score is the exact,
        uncompressed one."""
        tok = self.flipr.tokenizer
        embs, batch = self.flipr.encode_queries([claim], [list(context)])
        n_valid = int(batch.score_mask[0].sum())
        query, query_ids = embs[0, :n_valid].cpu(), batch.input_ids[0, :n_valid].tolist()
        doc_batch = tok.docs([passage])
        doc = self.flipr.encode_doc_batch(doc_batch)[0].cpu()
        sims = query @ doc.T  # [Lq, Ld]; every doc token is real (a batch of one has no padding)
        best, where = sims.max(dim=1)
        mask = torch.ones(n_valid, dtype=torch.bool)
        counted = counted_positions(best, mask, batch.n_claim, self.k_claim, self.k_context)
        score = float(flipr_aggregate(best, mask, batch.n_claim, self.k_claim, self.k_context))
        q_tokens, d_tokens = tok.id_to_token(query_ids), tok.id_to_token(doc_batch.input_ids[0].tolist())
        matches = [
            TokenMatch(
                "claim" if i < batch.n_claim else "context", i, q_tokens[i], d_tokens[int(where[i])], int(where[i]), float(best[i]), bool(counted[i])
            )
            for i in range(n_valid)
        ]
        return score, matches
