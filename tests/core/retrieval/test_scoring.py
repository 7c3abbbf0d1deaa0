"""FLIPR scoring against a brute force written from the reference's ``colbert_score_reduce``.

The reference (stanford-futuredata/ColBERT, ``colbert/modeling/colbert.py``, interaction
``flipr``): D_padding positions get −9999, each query position takes its max over the document,
then ``A = top-32 of the first 64 query positions`` and ``B = top-8 of the rest, only if
8 <= (number of positions after the first 64)``; the score is ``A + B``.
"""

from __future__ import annotations

import pytest
import torch

from baleen_core.retrieval.scoring import counted_positions, flipr_aggregate, flipr_score, maxsim, maxsim_grouped


def reference_flipr(q, q_mask, d, d_mask, n_claim, k_claim, k_context) -> float:
    """One query against one document, the slow and obvious way: the query is only its valid
    positions (one query searched alone, as the reference's searcher does), ``None`` = every one."""
    maxsims = []
    for i in range(q.shape[0]):
        if q_mask[i]:
            maxsims.append(max(float(q[i] @ d[j]) if d_mask[j] else -9999.0 for j in range(d.shape[0])))
    claim, context = maxsims[:n_claim], maxsims[n_claim:]
    a = sum(sorted(claim, reverse=True)[: len(claim) if k_claim is None else k_claim])
    if k_context is None:
        return a + sum(context)
    b = sum(sorted(context, reverse=True)[:k_context]) if k_context <= len(context) else 0.0
    return a + b


def random_batch(seed, batch=3, n_docs=5, n_claim=16, n_context=12, doc_len=9, dim=8):
    gen = torch.Generator().manual_seed(seed)
    q = torch.nn.functional.normalize(torch.randn(batch, n_claim + n_context, dim, generator=gen), dim=-1)
    d = torch.nn.functional.normalize(torch.randn(n_docs, doc_len, dim, generator=gen), dim=-1)
    q_mask = torch.ones(batch, n_claim + n_context, dtype=torch.bool)
    context_lengths = [0, 3, n_context][:batch]  # none, fewer than k_context (no context term at all), more than k_context
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


def test_grouped_maxsim_scores_each_document_with_its_own_query():
    """Documents stored back to back, each read by one query (the middle query reads none, the
    others different numbers of documents): every document's MaxSims are the padded brute force's
    for its own query, so no query's tokens leak into another's."""
    q, q_mask, d, d_mask = random_batch(6)
    reads = [[4, 0, 2], [], [1, 3, 0, 4]]  # query -> the documents it scores, in storage order
    pairs = [(b, j) for b, docs in enumerate(reads) for j in docs]
    lengths = d_mask.sum(1)
    packed = torch.cat([d[j, : lengths[j]] for _, j in pairs])
    token_doc = torch.repeat_interleave(torch.arange(len(pairs)), torch.stack([lengths[j] for _, j in pairs]))
    token_query = torch.tensor([pairs[p][0] for p in token_doc.tolist()])
    got = maxsim_grouped(q, packed, token_query, token_doc, len(pairs))
    expected = torch.stack([maxsim(q[b : b + 1], d[j : j + 1], d_mask[j : j + 1])[0, 0] for b, j in pairs])
    torch.testing.assert_close(got, expected)
    last = token_query == 2  # one query alone takes the unpadded path
    alone = maxsim_grouped(q[2:], packed[last], token_query[last] - 2, token_doc[last] - 3, 4)
    torch.testing.assert_close(alone, expected[3:])


def test_counted_positions_are_the_ones_summed():
    q, q_mask, d, d_mask = random_batch(7)
    sims = maxsim(q, d, d_mask)
    for b, n_context in enumerate([0, 3, 12]):
        counted = counted_positions(sims[b, 0], q_mask[b], 16, 8, 4)
        assert int(counted[:16].sum()) == 8 and int(counted[16:].sum()) == (4 if n_context >= 4 else 0)
        score = flipr_aggregate(sims[b, 0], q_mask[b], 16, 8, 4)
        assert float(sims[b, 0][counted].sum()) == pytest.approx(float(score), abs=1e-5)


def test_a_context_shorter_than_k_context_adds_nothing_hand_worked():
    # 2 claim positions (k_claim 1) and context positions with MaxSims 0.9, 0.8, 0.7
    maxsims = torch.tensor([0.2, 0.6, 0.9, 0.8, 0.7])
    mask = torch.ones(5, dtype=torch.bool)
    assert float(flipr_aggregate(maxsims, mask, 2, 1, 3)) == pytest.approx(0.6 + 0.9 + 0.8 + 0.7)  # 3 positions, k = 3: counted
    assert float(flipr_aggregate(maxsims, mask, 2, 1, 4)) == pytest.approx(0.6)  # 3 < 4: the reference adds no context term
    assert float(flipr_aggregate(maxsims, mask, 2, 1, 2)) == pytest.approx(0.6 + 0.9 + 0.8)
    short = mask.clone()
    short[4] = False  # padding: two valid context positions, fewer than 3
    assert float(flipr_aggregate(maxsims, short, 2, 1, 3)) == pytest.approx(0.6)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_first_hop_k_counts_only_for_queries_without_context(seed):
    # random_batch's queries: no context, a context of 3 positions, a context of 12
    q, q_mask, d, d_mask = random_batch(seed)
    fast = flipr_score(q, q_mask, d, d_mask, n_claim=16, k_claim=8, k_context=4, k_claim_first_hop=3)
    for b, has_context in enumerate([False, True, True]):
        for n in range(d.shape[0]):
            expected = reference_flipr(q[b], q_mask[b], d[n], d_mask[n], 16, 8 if has_context else 3, 4)
            assert fast[b, n].item() == pytest.approx(expected, abs=1e-5)
    # unset, or equal to k_claim: the reference's score at every hop
    torch.testing.assert_close(flipr_score(q, q_mask, d, d_mask, 16, 8, 4, k_claim_first_hop=8), flipr_score(q, q_mask, d, d_mask, 16, 8, 4))


def test_the_first_hop_k_decides_the_counted_positions_hand_worked():
    maxsims = torch.tensor([0.9, 0.1, 0.5, 0.3])  # claim positions only: a first hop
    mask = torch.ones(4, dtype=torch.bool)
    assert counted_positions(maxsims, mask, 4, 3, 2, k_claim_first_hop=1).tolist() == [True, False, False, False]
    assert float(flipr_aggregate(maxsims, mask, 4, 3, 2, k_claim_first_hop=1)) == pytest.approx(0.9)
    assert float(flipr_aggregate(maxsims, mask, 4, 3, 2)) == pytest.approx(0.9 + 0.5 + 0.3)
    with_context = torch.tensor([0.9, 0.1, 0.5, 0.3, 0.4, 0.2])  # 2 context positions: k_claim counts
    mask = torch.ones(6, dtype=torch.bool)
    assert counted_positions(with_context, mask, 4, 3, 2, k_claim_first_hop=1).tolist() == [True, False, True, True, True, True]
    assert float(flipr_aggregate(with_context, mask, 4, 3, 2, k_claim_first_hop=1)) == pytest.approx(0.9 + 0.5 + 0.3 + 0.4 + 0.2)
