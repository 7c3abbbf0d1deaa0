"""FLIPR search over an index: candidate generation, approximate pruning, exact re-ranking.

1. **Probe.** Every valid query position finds its ``nprobe`` nearest centroids; the passages
   listed under them are the candidates.
2. **Prune.** Each candidate gets an approximate FLIPR score in which a query position's MaxSim is
   the best centroid score among the probed centroids that hold one of the passage's tokens, and,
   where none does, the position's lowest probed centroid score (an upper-bound style estimate, as
   XTR imputes missing similarities). Only the ``ncandidates`` best go on.
3. **Re-rank.** Their token embeddings are decompressed and scored with exact FLIPR.

:meth:`FliprSearcher.exhaustive` scores every passage with exact FLIPR: the reference that the
index is measured against.

Every step runs in torch on the searcher's device (the encoder's, by default): on a GPU the index
is copied there once (:class:`IndexTensors`) and nothing but the final hits comes back.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import torch

from baleen_core.retrieval.index import FliprIndex, IndexTensors
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


def top_k_stable(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` best scores and their indices, ties in index order. ``torch.topk`` orders ties as
    its kernel happens to, differently on the CPU and the GPU: near-duplicate passages tie, and
    the candidates (and hits) a search returns would then depend on the device."""
    order = torch.sort(scores, descending=True, stable=True).indices[:k]
    return scores[order], order


class FliprSearcher:
    def __init__(
        self, flipr: Flipr, index: FliprIndex, nprobe: int = 4, ncandidates: int = 512, full_interaction: bool = False, device: torch.device | str | None = None
    ) -> None:
        """``full_interaction`` sums every query position's MaxSim (ColBERT) instead of FLIPR's
        top ``k_claim`` + ``k_context``: the baseline that isolates focused scoring. ``device``:
        where search runs (default: the encoder's device)."""
        if index.codec.dim != flipr.dim:
            raise ValueError(f"the index holds {index.codec.dim}-d embeddings but the encoder makes {flipr.dim}-d ones")
        self.flipr = flipr
        self.index = index
        self.nprobe = nprobe
        self.ncandidates = ncandidates
        self.device = torch.device(device) if device is not None else flipr.device
        self._tensors: IndexTensors | None = None
        cfg = flipr.config
        self.k_claim, self.k_context = (None, None) if full_interaction else (cfg.k_claim, cfg.k_context)
        self._last_query: tuple[tuple, torch.Tensor, int] | None = None

    @property
    def nprobe_note(self) -> str | None:
        """Why fewer centroids than ``nprobe`` are probed, when they are (the index has fewer)."""
        if self.nprobe <= self.index.codec.n_centroids:
            return None
        return (
            f"search.nprobe is {self.nprobe} but the index has {self.index.codec.n_centroids} centroids: every centroid is probed "
            f"(nprobe {self.index.codec.n_centroids} behaves the same)"
        )

    @property
    def tensors(self) -> IndexTensors:
        """The index on the search device, made on first use (after any ``index.materialize()``)."""
        if self._tensors is None:
            self._tensors = IndexTensors(self.index, self.device)
        return self._tensors

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
        positions = torch.tensor([self.index.position_of_pid[int(p)] for p in pids], dtype=torch.long, device=self.device)
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
        """Query embeddings (float32, on the search device), the number of valid positions of
        each, and ``n_claim``. Valid positions are always a prefix (claim positions, then the real
        context tokens)."""
        embs, batch = self.flipr.encode_queries(claims, contexts)
        return embs.float().to(self.device), batch.score_mask.sum(dim=1).tolist(), batch.n_claim

    # ---- indexed search ------------------------------------------------------------------------
    def candidates(self, query: torch.Tensor, n_claim: int, exclude: Collection[int] = ()) -> torch.Tensor:
        """Passage positions worth an exact score, best approximate score first."""
        index = self.tensors
        probe_scores, probe_ids = index.probe(query, self.nprobe)  # [L, nprobe]
        docs, owner = index.postings(probe_ids.reshape(-1))
        if docs.numel() == 0:
            return torch.zeros(0, dtype=torch.long, device=self.device)
        unique_docs, doc_row = torch.unique(docs, return_inverse=True)
        n_positions = query.shape[0]
        position = owner // probe_ids.shape[1]  # postings come in (position, probe) order
        approx = probe_scores[:, -1][None, :].expand(len(unique_docs), n_positions).reshape(-1)
        approx = approx.scatter_reduce(0, doc_row * n_positions + position, probe_scores.reshape(-1)[owner], "amax").view(len(unique_docs), n_positions)
        scores = flipr_aggregate(approx, torch.ones(n_positions, dtype=torch.bool, device=self.device), n_claim, self.k_claim, self.k_context)
        if exclude:
            scores[self._excluded(index.pids[unique_docs], exclude)] = float("-inf")
        if index.dead is not None:
            scores[index.dead[unique_docs]] = float("-inf")
        values, top = top_k_stable(scores, self.ncandidates)
        return unique_docs[top][torch.isfinite(values)]

    def score_positions(self, query: torch.Tensor, n_claim: int, positions: torch.Tensor) -> torch.Tensor:
        """Exact FLIPR of the query against the passages at ``positions``."""
        tokens, owner = self.tensors.token_range(positions)
        sims = maxsim_packed(query, self.tensors.embeddings(tokens), owner, len(positions))
        return flipr_aggregate(sims, torch.ones(query.shape[0], dtype=torch.bool, device=self.device), n_claim, self.k_claim, self.k_context)

    def search_encoded(self, query: torch.Tensor, n_claim: int, k: int, exclude: Collection[int] = ()) -> list[Hit]:
        positions = self.candidates(query, n_claim, exclude)
        if len(positions) == 0:
            return []
        return self._top(positions, self.score_positions(query, n_claim, positions), k)

    def exhaustive_encoded(self, query: torch.Tensor, n_claim: int, k: int, exclude: Collection[int] = (), chunk: int = 4_096) -> list[Hit]:
        n_passages = self.index.n_passages
        scores = torch.empty(n_passages, device=self.device)
        for start in range(0, n_passages, chunk):
            positions = torch.arange(start, min(start + chunk, n_passages), device=self.device)
            scores[start : start + len(positions)] = self.score_positions(query, n_claim, positions)
        if exclude:
            scores[self._excluded(self.tensors.pids, exclude)] = float("-inf")
        if self.tensors.dead is not None:
            scores[self.tensors.dead] = float("-inf")
        return self._top(torch.arange(n_passages, device=self.device), scores, k)

    def _excluded(self, pids: torch.Tensor, exclude: Collection[int]) -> torch.Tensor:
        return torch.isin(pids, torch.tensor(sorted(exclude), dtype=pids.dtype, device=self.device))

    def _top(self, positions: torch.Tensor, scores: torch.Tensor, k: int) -> list[Hit]:
        values, order = top_k_stable(scores, k)
        pids = self.tensors.pids[positions[order]].tolist()
        return [Hit(int(pid), float(v)) for pid, v in zip(pids, values.tolist(), strict=True) if v != float("-inf")]

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
        sims = (query @ doc.T).masked_fill(~doc_batch.score_mask[0], float("-inf"))  # [Lq, Ld]; punctuation is never matched
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
