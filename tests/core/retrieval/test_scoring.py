"""FLIPR scoring against a brute-force reference written with plain Python loops."""

from __future__ import annotations

import pytest
import torch

from baleen_core.retrieval.scoring import counted_positions, flipr_aggregate, flipr_score, maxsim, maxsim_packed


def reference_flipr(q, q_mask, d, d_mask, n_claim, k_claim, k_context) -> float:
    """One query against one document, the slow and obvious way."""
    claim, context = [], []
    for i in range(q.shape[0]):
        if not q_mask[i]:
            continue
        best = max(float(q[i] @ d[j]) for j in range(d.shape[0]) if d_mask[j])
        (claim if i < n_claim else context).append(best)

    def top(values, k):
        values = sorted(values, reverse=True)
        return sum(values if k is None else values[:k])

    return top(claim, k_claim) + top(context, k_context)


def random_batch(seed, batch=3, n_docs=5, n_claim=16, n_context=12, doc_len=9, dim=8):
    gen = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(batch, n_claim + n_context, dim, generator=gen), dim=-1)
    d = torch.nn.functional.normalize(torch.randn(n_docs, doc_len, dim, generator=gen), dim=-1)
    q_mask = torch.ones(batch, n_claim + n_context, dtype=torch.bool)
    context_lengths = [0, 3, n_context][:batch]  # none, fewer than k_context, more than k_context
    for b, n in enumerate(context_lengths):
        q_mask[b, n_claim + n :] = False
    d_mask = torch.ones(n_docs, doc_len, dtype=torch.bool)
    for j in range(n_docs):
        d_mask[j, int(torch.randint(1, doc_len + 1, (1,), generator=gen)) :] = False
    d[~d_mask] = 7.0  # padding garbage must never be matched
    return q, q_mask, d, d_mask


@pytest.mark.parametrize("k_claim,k_context", [(8, 4), (4, 8), (None, None), (16, None), (1, 1)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flipr_score_matches_brute_force(seed, k_claim, k_context):
    q, q_mask, d, d_mask = random_batch(seed)
    fast = flipr_score(q, q_mask, d, d_mask, n_claim=16, k_claim=k_claim, k_context=k_context)
    for b in range(q.shape[0]):
        for n in range(d.shape[0]):
            expected = reference_flipr(q[b], q_mask[b], d[n], d_mask[n], 16, k_claim, k_context)
            assert fast[b, n].item() == pytest.approx(expected, abs=1e-5)


def test_k_all_is_full_colbert_interaction():
    q, q_mask, d, d_mask = random_batch(3)
    full = flipr_score(q, q_mask, d, d_mask, n_claim=16, k_claim=None, k_context=None)
    colbert = maxsim(q, d, d_mask).masked_fill(~q_mask[:, None, :], 0).sum(-1)
    torch.testing.assert_close(full, colbert)


def test_focused_score_never_exceeds_full_when_similarities_are_positive():
    q, q_mask, d, d_mask = random_batch(4)
    q, d = q.abs(), d.abs()  # all similarities ≥ 0: dropping positions can only lower the sum
    focused = flipr_score(q, q_mask, d, d_mask, n_claim=16, k_claim=8, k_context=4)
    full = flipr_score(q, q_mask, d, d_mask, n_claim=16, k_claim=None, k_context=None)
    assert bool((focused <= full + 1e-6).all())


def test_claim_only_query_has_no_context_term():
    q, q_mask, d, d_mask = random_batch(5)
    claim_only = flipr_score(q[:, :16], q_mask[:, :16], d, d_mask, n_claim=16, k_claim=8, k_context=4)
    masked_context = flipr_score(q, q_mask & (torch.arange(q.shape[1]) < 16), d, d_mask, n_claim=16, k_claim=8, k_context=4)
    torch.testing.assert_close(claim_only, masked_context)


def test_packed_maxsim_equals_padded_maxsim():
    q, q_mask, d, d_mask = random_batch(6)
    lengths = d_mask.sum(1)
    packed = torch.cat([d[j, : lengths[j]] for j in range(d.shape[0])])
    owner = torch.repeat_interleave(torch.arange(d.shape[0]), lengths)
    for b in range(q.shape[0]):
        torch.testing.assert_close(maxsim_packed(q[b], packed, owner, d.shape[0]), maxsim(q[b : b + 1], d, d_mask)[0])


def test_counted_positions_are_the_ones_summed():
    q, q_mask, d, d_mask = random_batch(7)
    sims = maxsim(q, d, d_mask)
    for b, n_context in enumerate([0, 3, 12]):
        counted = counted_positions(sims[b, 0], q_mask[b], 16, 8, 4)
        assert int(counted[:16].sum()) == 8 and int(counted[16:].sum()) == min(4, n_context)
        score = flipr_aggregate(sims[b, 0], q_mask[b], 16, 8, 4)
        assert float(sims[b, 0][counted].sum()) == pytest.approx(float(score), abs=1e-5)
