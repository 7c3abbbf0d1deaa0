"""FLIPR scoring: focused late interaction.

ColBERT scores a document by summing, over every query position, the similarity of that query
token's best-matching document token (MaxSim). Baleen's FLIPR keeps the MaxSim but sums only the
query positions that matched best: the top ``k_claim`` (32) among the ``n_claim`` (64) claim
positions plus the top ``k_context`` (8) among the context-fact positions that follow them. A
multi-hop query can then be about *part* of the claim and *part* of the context, instead of being
diluted by everything it has accumulated.

Conventions used throughout (and by the brute-force reference in the tests):

* embeddings are L2-normalised, so a similarity is a cosine in [-1, 1];
* ``q_mask`` marks the query positions that may count: all ``n_claim`` claim positions (the
  [MASK] padding included — ColBERT's query augmentation) and the non-padding context positions;
* a query with fewer valid context positions than ``k_context`` adds no context term at all, as
  the reference's ``colbert_score_reduce`` (``if K2 <= scores.size(1) - query_maxlen``): a
  claim-only query, or a context of a few tokens, scores by its claim positions alone;
* document positions that may be matched are given by ``doc_mask`` (no padding, no punctuation);
* ``k = None`` means "every valid position": full ColBERT interaction, used as the baseline;
* ``k_claim_first_hop`` (not in the reference; ``search.k_claim_first_hop``), when given, is the
  claim positions counted for a query with no valid context position (a claim's first hop): a
  claim-only query then scores a passage by its best-matched claim tokens, such as one entity's
  name, rather than by many loosely matched ones (docs/benchmarks.md, "How many claim positions
  count").
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


def maxsim(queries: torch.Tensor, docs: torch.Tensor, doc_mask: torch.Tensor) -> torch.Tensor:
    """MaxSim of every query position over every document's valid tokens.

    queries ``[B, Lq, dim]``, docs ``[N, Ld, dim]``, doc_mask ``[N, Ld]`` (True = real token)
    → ``[B, N, Lq]``.
    """
    sim = torch.einsum("bqd,ntd->bnqt", queries, docs)
    sim = sim.masked_fill(~doc_mask[None, :, None, :], NEG_INF)
    return sim.amax(dim=-1)


def maxsim_grouped(queries: torch.Tensor, token_embs: torch.Tensor, token_query: torch.Tensor, token_doc: torch.Tensor, n_docs: int) -> torch.Tensor:
    """MaxSim for documents stored back to back (the index layout), each scored by its own query.

    queries ``[B, Lq, dim]``; token_embs ``[T, dim]``; token_query ``[T]`` gives each token's query
    (ascending: the tokens come grouped by query); token_doc ``[T]`` its document
    (0..n_docs-1, each document read by one query) → ``[n_docs, Lq]``. Each query's tokens are
    padded to the largest group and multiplied in one batched matmul: memory is
    ``B × max tokens per query × (dim + Lq)``, never ``T × B × Lq``.
    """
    n_queries, width = queries.shape[:2]
    if n_queries == 1:  # one query: its tokens are already back to back, nothing to pad
        sim, doc_of_row = token_embs @ queries[0].T.to(token_embs.dtype), token_doc
    else:
        per_query = torch.bincount(token_query, minlength=n_queries)
        slot = torch.arange(token_query.shape[0], device=token_query.device) - (torch.cumsum(per_query, 0) - per_query)[token_query]
        longest = int(per_query.max()) if token_query.numel() else 0
        padded = token_embs.new_zeros(n_queries, longest, token_embs.shape[1])
        padded[token_query, slot] = token_embs
        doc_of_row = torch.full((n_queries, longest), n_docs, dtype=torch.long, device=token_doc.device)  # padding: a spare row
        doc_of_row[token_query, slot] = token_doc
        sim, doc_of_row = torch.bmm(padded, queries.transpose(1, 2).to(token_embs.dtype)).view(-1, width), doc_of_row.view(-1)
    out = torch.full((n_docs + 1, width), NEG_INF, dtype=sim.dtype, device=sim.device)
    return out.scatter_reduce(0, doc_of_row[:, None].expand_as(sim), sim, reduce="amax", include_self=True)[:n_docs]


def _topk_sum(values: torch.Tensor, valid: torch.Tensor, k: int | None) -> torch.Tensor:
    """Sum of the ``k`` largest valid entries of the last axis (all valid ones if fewer, or k=None)."""
    if k is None or k >= values.shape[-1]:
        return values.masked_fill(~valid, 0.0).sum(dim=-1)
    if k <= 0:
        return values.new_zeros(values.shape[:-1])
    top = values.masked_fill(~valid, NEG_INF).topk(k, dim=-1).values
    return top.masked_fill(torch.isinf(top) & (top < 0), 0.0).sum(dim=-1)


def flipr_aggregate(
    maxsims: torch.Tensor,
    q_mask: torch.Tensor,
    n_claim: int,
    k_claim: int | None = 32,
    k_context: int | None = 8,
    k_claim_first_hop: int | None = None,
) -> torch.Tensor:
    """Turn per-position MaxSims ``[..., Lq]`` into FLIPR scores ``[...]``.

    ``q_mask`` broadcasts against ``maxsims``. Positions ``< n_claim`` are claim positions, the
    rest context positions. ``k_claim_first_hop``: ``k_claim`` for the queries without a valid
    context position (None: ``k_claim`` for every query).
    """
    q_mask = q_mask.expand_as(maxsims)
    claim = _topk_sum(maxsims[..., :n_claim], q_mask[..., :n_claim], k_claim)
    if k_claim_first_hop is not None and k_claim_first_hop != k_claim:
        first_hop = _topk_sum(maxsims[..., :n_claim], q_mask[..., :n_claim], k_claim_first_hop)
        claim = torch.where(_without_context(q_mask, n_claim), first_hop, claim)
    if maxsims.shape[-1] <= n_claim:
        return claim
    context_mask = q_mask[..., n_claim:]
    context = _topk_sum(maxsims[..., n_claim:], context_mask, k_context)
    if k_context is not None:
        context = context.masked_fill(context_mask.sum(dim=-1) < k_context, 0.0)
    return claim + context


def _without_context(q_mask: torch.Tensor, n_claim: int) -> torch.Tensor:
    """``q_mask[..., 0]``-shaped bool: which queries have no valid context position."""
    return ~q_mask[..., n_claim:].any(dim=-1)


def flipr_score(
    queries: torch.Tensor,
    q_mask: torch.Tensor,
    docs: torch.Tensor,
    doc_mask: torch.Tensor,
    n_claim: int,
    k_claim: int | None = 32,
    k_context: int | None = 8,
    k_claim_first_hop: int | None = None,
) -> torch.Tensor:
    """FLIPR scores of B queries against N padded documents → ``[B, N]``.

    queries ``[B, Lq, dim]`` with q_mask ``[B, Lq]``; docs ``[N, Ld, dim]`` with doc_mask ``[N, Ld]``.
    """
    return flipr_aggregate(maxsim(queries, docs, doc_mask), q_mask[:, None, :], n_claim, k_claim, k_context, k_claim_first_hop)


def counted_positions(
    maxsims: torch.Tensor, q_mask: torch.Tensor, n_claim: int, k_claim: int | None, k_context: int | None, k_claim_first_hop: int | None = None
) -> torch.Tensor:
    """Which query positions contributed to the score of one document (``[Lq]`` bool), for explanations."""
    counted = torch.zeros_like(q_mask, dtype=torch.bool)
    if k_claim_first_hop is not None and bool(_without_context(q_mask, n_claim)):
        k_claim = k_claim_first_hop
    for lo, hi, k in ((0, n_claim, k_claim), (n_claim, maxsims.shape[-1], k_context)):
        valid = q_mask[lo:hi]
        if hi <= lo or not bool(valid.any()):
            continue
        n_valid = int(valid.sum())
        if lo == n_claim and k is not None and n_valid < k:  # too short a context adds nothing (flipr_aggregate)
            continue
        take = n_valid if k is None else min(k, n_valid)
        idx = maxsims[lo:hi].masked_fill(~valid, NEG_INF).topk(take).indices
        counted[lo + idx] = True
    return counted
