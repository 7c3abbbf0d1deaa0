"""FLIPR search over an index: candidate generation, approximate pruning, exact re-ranking.

1. **Probe.** Every valid query position finds its ``nprobe`` nearest centroids; the passages
   listed under them are the candidates.
2. **Prune.** Each candidate gets an approximate FLIPR score in which a query position's MaxSim is
   the best centroid score among the probed centroids that hold one of the passage's tokens, and,
   where none does, the position's lowest probed centroid score (an upper-bound style estimate, as
   XTR imputes missing similarities). Only the ``ncandidates`` best go on.
3. **Re-rank.** Their token embeddings are decompressed and scored with exact FLIPR.

A batch of queries goes through the three steps together (:meth:`FliprSearcher.search_batch`):
every step is a handful of kernels over all the batch's (query, passage) pairs, and only the final
hits come back, so a GPU is not left waiting on one small query at a time.

:meth:`FliprSearcher.exhaustive` scores every passage with exact FLIPR: the reference that the
index is measured against.

Every step runs in torch on the searcher's device (the encoder's, by default): on a GPU the index
is copied there once (:class:`IndexTensors`) and nothing but the final hits comes back.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import torch

from baleen_core.retrieval.index import FliprIndex, IndexTensors
from baleen_core.retrieval.modeling import Flipr
from baleen_core.retrieval.scoring import counted_positions, flipr_aggregate, maxsim_grouped


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


def top_k_per_group(groups: torch.Tensor, scores: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Indices of the best ``k[g]`` finite scores of every group ``g``: groups in ascending order,
    best first within each, ties in index order (as :func:`top_k_stable`, for many queries at
    once). ``groups`` and ``scores`` are ``[N]``; ``k`` is ``[n_groups]``."""
    order = torch.sort(scores, descending=True, stable=True).indices
    if k.shape[0] > 1:  # one group is in order already
        order = order[torch.sort(groups[order], stable=True).indices]
    group = groups[order]
    size = torch.bincount(group, minlength=k.shape[0])
    rank = torch.arange(order.shape[0], device=order.device) - (torch.cumsum(size, 0) - size)[group]
    return order[(rank < k[group]) & torch.isfinite(scores[order])]


def _chunks_within(counts: Sequence[int], per_item: int, max_elements: int):
    """Consecutive ``(lo, hi)`` ranges of ``counts`` whose padded size, ``(hi - lo) ×
    max(counts[lo:hi]) × per_item``, stays within ``max_elements`` (one entry at least)."""
    lo, widest = 0, 0
    for i, n in enumerate(counts):
        if i > lo and (i + 1 - lo) * max(widest, n) * per_item > max_elements:
            yield lo, i
            lo, widest = i, 0
        widest = max(widest, n)
    if lo < len(counts):
        yield lo, len(counts)


class FliprSearcher:
    def __init__(
        self,
        flipr: Flipr,
        index: FliprIndex,
        nprobe: int = 4,
        ncandidates: int = 512,
        full_interaction: bool = False,
        device: torch.device | str | None = None,
        query_batch: int | None = None,
        queries_per_search: int | None = None,
        max_elements: int | None = None,
        k_claim_first_hop: int | None = None,
    ) -> None:
        """``full_interaction`` sums every query position's MaxSim (ColBERT) instead of FLIPR's
        top ``k_claim`` + ``k_context``: the baseline that isolates focused scoring.
        ``k_claim_first_hop``: the claim positions counted for a query without context, in
        candidate generation and exact scoring alike (None: the encoder's ``k_claim``). ``device``:
        where search runs (default: the encoder's device). ``query_batch``: queries encoded
        together (default 32 on the CPU, 512 on a GPU, whose kernels need the width);
        ``queries_per_search``: of those, how many go through search's kernels together (default:
        64 on a GPU, whose (query, passage) arrays then hold about 2 GB, not 13 GB as 512 did on
        hover-mini; one on the CPU, where a wide batch's arrays fall out of the cache and search
        runs slower than one query at a time); ``max_elements``: the most floats one
        exact-scoring matmul pads out (default 2^22 on the CPU, 2^30 on a GPU)."""
        if index.codec.dim != flipr.dim:
            raise ValueError(f"the index holds {index.codec.dim}-d embeddings but the encoder makes {flipr.dim}-d ones")
        self.flipr = flipr
        self.index = index
        self.nprobe = nprobe
        self.ncandidates = ncandidates
        self.device = torch.device(device) if device is not None else flipr.device
        on_gpu = self.device.type != "cpu"
        self.query_batch = query_batch or (512 if on_gpu else 32)
        self.queries_per_search = queries_per_search or (64 if on_gpu else 1)
        self.max_elements = max_elements or (2**30 if on_gpu else 2**22)
        self._tensors: IndexTensors | None = None
        cfg = flipr.config
        self.k_claim, self.k_context = (None, None) if full_interaction else (cfg.k_claim, cfg.k_context)
        self.k_claim_first_hop = None if full_interaction else k_claim_first_hop

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
        return self.rank_batch([claim], [context], [depth], [exclude])[0]

    def rank_batch(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[Collection[int]], batch_size: int | None = None
    ) -> list[list[tuple[int, float]]]:
        """:meth:`rank` for many queries (the engine's hop), encoded and searched ``batch_size``
        at a time (default: the searcher's ``query_batch``), in the given order."""
        return self.rank_and_score(claims, contexts, depths, excludes, [()] * len(claims), batch_size)[0]

    def rank_and_score(
        self,
        claims: Sequence[str],
        contexts: Sequence[Sequence[str]],
        depths: Sequence[int],
        excludes: Sequence[Collection[int]],
        pids: Sequence[Sequence[int]],
        batch_size: int | None = None,
    ) -> tuple[list[list[tuple[int, float]]], list[list[float]]]:
        """:meth:`rank_batch`, and each query's exact scores of ``pids[i]`` (a label round's
        hop), with each query encoded once."""
        ranked: list[list[tuple[int, float]]] = [[] for _ in claims]
        scored: list[list[float]] = [[] for _ in claims]
        for chunk, queries, lengths, n_claim in self._encoded_chunks(claims, contexts, batch_size or self.query_batch):
            for i, hits in zip(chunk, self.search_batch(queries, lengths, n_claim, [depths[i] for i in chunk], [excludes[i] for i in chunk]), strict=True):
                ranked[i] = [(h.pid, h.score) for h in hits]
            wanted = [(q, self.index.position_of_pid[int(pid)]) for q, i in enumerate(chunk) for pid in pids[i]]
            if wanted:
                pair_query, positions = torch.tensor(wanted, dtype=torch.long, device=self.device).T
                flat = iter(self.score_pairs(queries, lengths, n_claim, pair_query, positions).tolist())
                for i in chunk:
                    scored[i] = [next(flat) for _ in pids[i]]
        return ranked, scored

    def _encoded_chunks(self, claims: Sequence[str], contexts: Sequence[Sequence[str]], size: int):
        """``(indices, queries, lengths, n_claim)`` for the queries, encoded ``size`` at a time
        and searched ``queries_per_search`` at a time, shortest query text first: a batch's
        queries are padded to its longest, so similar lengths go together."""
        order = sorted(range(len(claims)), key=lambda i: len(claims[i]) + sum(len(fact) for fact in contexts[i]))
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            queries, lengths, n_claim = self.encode([claims[i] for i in chunk], [list(contexts[i]) for i in chunk])
            for sub in range(0, len(chunk), self.queries_per_search):
                part = slice(sub, sub + self.queries_per_search)
                yield chunk[part], queries[part], lengths[part], n_claim

    def score(self, claim: str, context: Sequence[str], pids: Sequence[int]) -> list[float]:
        """Exact FLIPR scores of the given passages (from the index's stored tokens)."""
        queries, lengths, n_claim = self.encode([claim], [list(context)])
        positions = torch.tensor([self.index.position_of_pid[int(p)] for p in pids], dtype=torch.long, device=self.device)
        return self.score_positions(queries[0, : lengths[0]], n_claim, positions).tolist()

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
        """One query's passage positions worth an exact score, best approximate score first."""
        return self.candidates_batch(query[None], [query.shape[0]], n_claim, [exclude])[1]

    def candidates_batch(
        self, queries: torch.Tensor, lengths: Sequence[int], n_claim: int, excludes: Sequence[Collection[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Every query's candidates at once, as (query, passage position) pairs grouped by query,
        each query's best approximate score first (ties in position order). ``queries`` is
        ``[B, L, dim]``, query ``b`` valid in its first ``lengths[b]`` positions."""
        index, (n_queries, width) = self.tensors, queries.shape[:2]
        valid = self._valid_positions(lengths, width)
        query_of, position = valid.nonzero(as_tuple=True)  # every valid query position, query by query
        probe_scores, probe_ids = index.probe(queries[query_of, position], self.nprobe)  # [V, nprobe]
        docs, owner = index.postings(probe_ids.reshape(-1))
        if docs.numel() == 0:
            empty = torch.zeros(0, dtype=torch.long, device=self.device)
            return empty, empty
        row = owner // probe_ids.shape[1]  # postings come in (query position, probe) order
        n_stored = index.pids.shape[0]
        pair_keys, pair_of_posting = torch.unique(query_of[row] * n_stored + docs, return_inverse=True)  # sorted by query, then position
        pair_query, pair_doc = pair_keys // n_stored, pair_keys % n_stored
        # a position's approximate MaxSim is its best probed centroid holding one of the passage's
        # tokens, else its lowest probed centroid score
        lowest = torch.full((n_queries, width), float("-inf"), device=self.device)
        lowest[query_of, position] = probe_scores[:, -1]
        approx = lowest[pair_query].reshape(-1)
        approx = approx.scatter_reduce(0, pair_of_posting * width + position[row], probe_scores.reshape(-1)[owner], "amax")
        scores = flipr_aggregate(approx.view(-1, width), valid[pair_query], n_claim, self.k_claim, self.k_context, self.k_claim_first_hop)
        position_of = self.index.position_of_pid
        excluded = [q * n_stored + position_of[int(pid)] for q, pids in enumerate(excludes) for pid in pids if int(pid) in position_of]
        if excluded:
            scores[torch.isin(pair_keys, torch.tensor(excluded, dtype=pair_keys.dtype, device=self.device))] = float("-inf")
        if index.dead is not None:
            scores[index.dead[pair_doc]] = float("-inf")
        keep = top_k_per_group(pair_query, scores, torch.full((n_queries,), self.ncandidates, device=self.device))
        return pair_query[keep], pair_doc[keep]

    def score_pairs(self, queries: torch.Tensor, lengths: Sequence[int], n_claim: int, pair_query: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Exact FLIPR of query ``pair_query[i]`` against the passage at ``positions[i]``, for
        pairs grouped by query: consecutive queries whose padded tokens fit ``max_elements``
        are decompressed and scored together (:func:`maxsim_grouped`)."""
        index, (n_queries, width, dim) = self.tensors, queries.shape
        tokens, owner = index.token_range(positions)  # in pair order, so grouped by query
        tokens_per_query = torch.bincount(pair_query[owner], minlength=n_queries).tolist()
        pairs_per_query = torch.bincount(pair_query, minlength=n_queries).tolist()
        token_start, pair_start = [0, *itertools.accumulate(tokens_per_query)], [0, *itertools.accumulate(pairs_per_query)]
        maxsims = torch.full((len(positions), width), float("-inf"), device=self.device)
        for lo, hi in _chunks_within(tokens_per_query, width + dim, self.max_elements):
            t0, t1, p0, p1 = token_start[lo], token_start[hi], pair_start[lo], pair_start[hi]
            if t1 > t0:  # positions past the chunk's longest query stay -inf: they are not valid
                pair, used = owner[t0:t1] - p0, max(lengths[lo:hi])
                chunk = maxsim_grouped(queries[lo:hi, :used], index.embeddings(tokens[t0:t1]), pair_query[p0:p1][pair] - lo, pair, p1 - p0)
                maxsims[p0:p1, :used] = chunk
        return flipr_aggregate(maxsims, self._valid_positions(lengths, width)[pair_query], n_claim, self.k_claim, self.k_context, self.k_claim_first_hop)

    def score_positions(self, query: torch.Tensor, n_claim: int, positions: torch.Tensor) -> torch.Tensor:
        """Exact FLIPR of one query against the passages at ``positions``."""
        return self.score_pairs(query[None], [query.shape[0]], n_claim, torch.zeros_like(positions), positions)

    def search_batch(
        self, queries: torch.Tensor, lengths: Sequence[int], n_claim: int, ks: Sequence[int], excludes: Sequence[Collection[int]]
    ) -> list[list[Hit]]:
        """Top ``ks[b]`` passages of each query, skipping ``excludes[b]``: candidates, exact scores
        and the top-k of every query in one pass of batched kernels, and one copy back."""
        queries = queries[:, : max(lengths, default=0)]  # padding no query uses costs every step
        pair_query, positions = self.candidates_batch(queries, lengths, n_claim, excludes)
        scores = self.score_pairs(queries, lengths, n_claim, pair_query, positions)
        keep = top_k_per_group(pair_query, scores, torch.tensor(list(ks), device=self.device))
        hits: list[list[Hit]] = [[] for _ in lengths]
        for q, pid, score in zip(pair_query[keep].tolist(), self.tensors.pids[positions[keep]].tolist(), scores[keep].tolist(), strict=True):
            hits[q].append(Hit(int(pid), float(score)))
        return hits

    def search_encoded(self, query: torch.Tensor, n_claim: int, k: int, exclude: Collection[int] = ()) -> list[Hit]:
        return self.search_batch(query[None], [query.shape[0]], n_claim, [k], [exclude])[0]

    def _valid_positions(self, lengths: Sequence[int], width: int) -> torch.Tensor:
        """``[B, width]``: True where query ``b`` has a valid position (its first ``lengths[b]``)."""
        return torch.arange(width, device=self.device)[None, :] < torch.tensor(list(lengths), device=self.device)[:, None]

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
        counted = counted_positions(best, mask, batch.n_claim, self.k_claim, self.k_context, self.k_claim_first_hop)
        score = float(flipr_aggregate(best, mask, batch.n_claim, self.k_claim, self.k_context, self.k_claim_first_hop))
        q_tokens, d_tokens = tok.id_to_token(query_ids), tok.id_to_token(doc_batch.input_ids[0].tolist())
        matches = [
            TokenMatch(
                "claim" if i < batch.n_claim else "context", i, q_tokens[i], d_tokens[int(where[i])], int(where[i]), float(best[i]), bool(counted[i])
            )
            for i in range(n_valid)
        ]
        return score, matches
