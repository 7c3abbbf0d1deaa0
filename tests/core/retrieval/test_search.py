"""Indexed search against exhaustive FLIPR, exclusions, and explanations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from baleen_core.config import IndexConfig
from baleen_core.retrieval import FliprIndex, FliprSearcher, flipr_score, passage_text
from baleen_core.retrieval.building import encode_shard, merge_shards, train_codec
from baleen_core.retrieval.scoring import flipr_aggregate
from baleen_core.retrieval.search import top_k_per_group, top_k_stable


def make_index(flipr, texts, kind="pq", n_centroids=16, device=None) -> FliprIndex:
    """``device``: where k-means runs (torch); None = faiss on the CPU."""
    config = IndexConfig(codec=kind, n_centroids=n_centroids, pq_subvectors=16, batch_size=8)
    codec = train_codec(flipr, texts, len(texts), config, use_gpu=False, device=device)
    shard = encode_shard(flipr, codec, np.arange(len(texts), dtype=np.int64) * 10 + 3, texts, config)
    offsets, docs = merge_shards([shard.codes], [shard.doclens], codec.n_centroids)
    return FliprIndex(codec, shard.pids, shard.doclens, shard.codes, shard.payload, offsets, docs)


@pytest.fixture(scope="module")
def corpus(passages):
    # the six real passages plus generated filler so that candidate generation has something to prune
    filler = [(f"Filler {i}", f"Filler page {i} is about the {['river', 'mountain', 'harbour'][i % 3]} of town {i}.") for i in range(60)]
    return [passage_text(t, x) for t, x in passages + filler]


@pytest.fixture(scope="module")
def fp16_searcher(flipr, corpus):
    return FliprSearcher(flipr, make_index(flipr, corpus, kind="fp16"), nprobe=2, ncandidates=8)


CLAIM = "An Australian actress starred in a 2014 thriller directed by a Danish director."


def test_exhaustive_equals_brute_force_flipr(flipr, corpus, fp16_searcher):
    hits = fp16_searcher.exhaustive([CLAIM], k=len(corpus))[0]
    q, batch = flipr.encode_queries([CLAIM])
    docs = flipr.tokenizer.docs(corpus)
    d = flipr.encode_doc_batch(docs)
    expected = flipr_score(q, batch.score_mask, d, docs.score_mask, batch.n_claim, 32, 8)[0]
    got = {h.pid: h.score for h in hits}
    for i in range(len(corpus)):
        assert got[i * 10 + 3] == pytest.approx(float(expected[i]), abs=2e-2)  # fp16 storage


def test_a_probe_wider_than_the_codebook_is_the_whole_codebook(flipr, corpus):
    index = make_index(flipr, corpus, kind="pq")
    wide = FliprSearcher(flipr, index, nprobe=index.codec.n_centroids + 50, ncandidates=len(corpus))
    full = FliprSearcher(flipr, index, nprobe=index.codec.n_centroids, ncandidates=len(corpus))
    assert wide.search([CLAIM], k=10)[0] == full.search([CLAIM], k=10)[0]  # faiss pads a wider probe with -1 ids: none may reach postings
    # and says so (it was clamped without a word): open_searcher passes the note to the run's log or the terminal
    n = index.codec.n_centroids
    assert full.nprobe_note is None
    assert wide.nprobe_note == (
        f"search.nprobe is {n + 50} but the index has {n} centroids: every centroid is probed (nprobe {n} behaves the same)"
    )


def test_index_with_every_candidate_is_exhaustive(flipr, corpus):
    index = make_index(flipr, corpus, kind="pq")
    full = FliprSearcher(flipr, index, nprobe=index.codec.n_centroids, ncandidates=len(corpus))
    assert [h.pid for h in full.search([CLAIM], k=10)[0]] == [h.pid for h in full.exhaustive([CLAIM], k=10)[0]]


def test_pruned_search_keeps_the_top_hits(fp16_searcher):
    exact = [h.pid for h in fp16_searcher.exhaustive([CLAIM], k=3)[0]]
    approx = [h.pid for h in fp16_searcher.search([CLAIM], k=3)[0]]
    assert approx[0] == exact[0] and len(set(approx) & set(exact)) >= 2


def test_excluded_passages_are_skipped(fp16_searcher):
    top = fp16_searcher.search([CLAIM], k=3)[0]
    again = fp16_searcher.search([CLAIM], k=3, exclude=[{top[0].pid}])[0]
    assert top[0].pid not in {h.pid for h in again} and again[0].pid == top[1].pid
    exhaustive = fp16_searcher.exhaustive([CLAIM], k=3, exclude=[{top[0].pid}])[0]
    assert top[0].pid not in {h.pid for h in exhaustive}


def test_context_changes_the_ranking(fp16_searcher):
    plain = fp16_searcher.exhaustive([CLAIM], k=66)[0]
    with_context = fp16_searcher.exhaustive([CLAIM], [["Oren Vask | Oren Vask is a Danish director. He was born in Aarhus."]], k=66)[0]
    rank = lambda hits, pid: [h.pid for h in hits].index(pid)  # noqa: E731
    oren_vask = 2 * 10 + 3  # the passage the context fact came from: its 8 context matches are near-perfect
    assert rank(plain, oren_vask) > 0 and rank(with_context, oren_vask) == 0


def test_explanation_counts_k_claim_and_k_context_positions(fp16_searcher, corpus):
    context = ["Glass Harbour | Glass Harbour is a 2014 thriller film directed by Oren Vask."]
    score, matches = fp16_searcher.explain(CLAIM, context, corpus[2])
    claim = [m for m in matches if m.part == "claim"]
    ctx = [m for m in matches if m.part == "context"]
    assert len(claim) == 64 and sum(m.counted for m in claim) == 32  # the best 32 of the 64 claim positions count
    assert sum(m.counted for m in ctx) == 8 and len(ctx) > 8
    assert score == pytest.approx(sum(m.similarity for m in matches if m.counted), abs=1e-4)
    # embeddings are L2-normalised, so every MaxSim is a cosine
    assert all(m.doc_token for m in matches) and all(-1 - 1e-4 <= m.similarity <= 1 + 1e-4 for m in matches)


LONG_CLAIM = (
    "An Australian actress and producer who starred in a 2014 thriller film directed by a Danish director born in the "
    "second-largest city in Denmark also appeared alongside an indie rock band from a city in West Yorkshire, England."
)


def test_a_claim_longer_than_k_claim_tokens_is_scored_by_its_best_32_positions(flipr, corpus, fp16_searcher):
    n_tokens = len(flipr.tokenizer.tokenizer(LONG_CLAIM, add_special_tokens=False)["input_ids"])
    assert 32 < n_tokens < 61  # more real claim tokens than FLIPR counts, none cut by query_maxlen
    q, batch = flipr.encode_queries([LONG_CLAIM])
    docs = flipr.tokenizer.docs(corpus)
    d = flipr.encode_doc_batch(docs)
    focused = flipr_score(q, batch.score_mask, d, docs.score_mask, batch.n_claim, 32, 8)[0]
    every = flipr_score(q, batch.score_mask, d, docs.score_mask, batch.n_claim, None, None)[0]
    hits = {h.pid: h.score for h in fp16_searcher.exhaustive([LONG_CLAIM], k=len(corpus))[0]}
    for i in range(len(corpus)):
        assert hits[i * 10 + 3] == pytest.approx(float(focused[i]), abs=2e-2)  # fp16 storage
    # focusing changes which passages win, not only the scale: the two rankings differ
    assert torch.argsort(focused, descending=True).tolist() != torch.argsort(every, descending=True).tolist()
    _, matches = fp16_searcher.explain(LONG_CLAIM, [], corpus[0])
    real = [m for m in matches if m.part == "claim" and m.query_token != "[MASK]"]
    assert len(real) > 32 and not all(m.counted for m in real)  # some of the claim's own tokens do not count


def test_punctuation_is_never_matched_in_a_passage(flipr, corpus):
    claim = "Leeds | a city in West Yorkshire, England."  # its '|', ',' and '.' match the passages' best when they may
    q, batch = flipr.encode_queries([claim])
    docs = flipr.tokenizer.docs(corpus)
    d = flipr.encode_doc_batch(docs)
    assert bool((docs.score_mask != docs.attention_mask.bool()).any())  # some tokens are punctuation
    without = flipr_score(q, batch.score_mask, d, docs.score_mask, batch.n_claim, 32, 8)[0]
    with_punctuation = flipr_score(q, batch.score_mask, d, docs.attention_mask.bool(), batch.n_claim, 32, 8)[0]
    assert bool((with_punctuation >= without - 1e-6).all()) and bool((with_punctuation > without + 1e-3).any())
    _, matches = FliprSearcher(flipr, make_index(flipr, corpus[:6], kind="fp16"), nprobe=2).explain(claim, [], corpus[5])
    assert not {m.doc_token for m in matches} & {"|", ",", "."}


def test_rank_and_score_agree_with_search(fp16_searcher):
    ranked = fp16_searcher.rank(CLAIM, [], 5, set())
    hits = fp16_searcher.search([CLAIM], k=5)[0]
    assert ranked == [(h.pid, h.score) for h in hits]
    scores = fp16_searcher.score(CLAIM, [], [pid for pid, _ in ranked])
    assert scores == pytest.approx([score for _, score in ranked], abs=1e-5)
    other = fp16_searcher.rank("A band from Leeds.", [], 5, set())  # a new query is encoded, not the cached one
    assert [pid for pid, _ in other] != [pid for pid, _ in ranked]


def test_rank_batch_matches_rank_one_query_at_a_time(fp16_searcher):
    claims = [CLAIM, "A band from Leeds.", CLAIM]
    contexts = [[], [], ["Glass Harbour | It was directed by Oren Vask."]]
    depths, excludes = [5, 3, 4], [set(), set(), {p for p, _ in fp16_searcher.rank(CLAIM, [], 2, set())}]
    batched = fp16_searcher.rank_batch(claims, contexts, depths, excludes, batch_size=2)  # two encoder batches
    one_by_one = [fp16_searcher.rank(c, ctx, d, ex) for c, ctx, d, ex in zip(claims, contexts, depths, excludes)]
    assert [[p for p, _ in r] for r in batched] == [[p for p, _ in r] for r in one_by_one]
    assert all(abs(a[1] - b[1]) < 1e-4 for ra, rb in zip(batched, one_by_one) for a, b in zip(ra, rb))
    assert [len(r) for r in batched] == [5, 3, 4] and not excludes[2] & {p for p, _ in batched[2]}


def brute_force_candidates(searcher, query, n_claim, exclude, limit):
    """Candidate generation the slow and obvious way, one query alone: each position probes its
    nprobe nearest centroids; a passage holding a token of any is a candidate; a position's
    approximate MaxSim is its best probed centroid among the passage's tokens' centroids, else
    its lowest probed score; the ``limit`` best FLIPR aggregates, ties in position order."""
    index = searcher.index
    centroids = torch.from_numpy(index.codec.centroids.astype(np.float32))
    probed = [sorted(((float(query[i] @ centroids[c]), c) for c in range(len(centroids))), reverse=True)[: searcher.nprobe] for i in range(len(query))]
    excluded = {index.position_of_pid[p] for p in exclude}
    scored = []
    for doc in range(index.n_passages):
        held = set(index.codes[index.token_offsets[doc] : index.token_offsets[doc + 1]].tolist())
        if doc in excluded or not any(c in held for probe in probed for _, c in probe):
            continue
        approx = torch.tensor([max([s for s, c in probe if c in held], default=probe[-1][0]) for probe in probed])
        scored.append((float(flipr_aggregate(approx, torch.ones(len(query), dtype=torch.bool), n_claim, 32, 8)), doc))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [doc for _, doc in scored[:limit]]


def test_a_batch_of_queries_gets_each_querys_brute_force_candidates_and_hits(flipr, corpus):
    """Queries of different lengths (claim alone, one fact, two) with their own exclusions,
    searched as one batch: each query's candidates are the brute force's, in its order, and its
    hits are exact FLIPR's best among them, as the query searched alone finds."""
    searcher = FliprSearcher(flipr, make_index(flipr, corpus, kind="pq"), nprobe=3, ncandidates=9, max_elements=4_000)  # several matmul chunks
    claims = [CLAIM, "A band from Leeds.", CLAIM, "Filler page 7 is about a harbour."]
    contexts = [[], ["Leeds | Leeds is a city in West Yorkshire."], ["Glass Harbour | It was directed by Oren Vask.", "Oren Vask | He is Danish."], []]
    excludes = [set(), {23}, {3, 13}, set()]
    queries, lengths, n_claim = searcher.encode(claims, contexts)
    assert len(set(lengths)) == 3
    pair_query, positions = searcher.candidates_batch(queries, lengths, n_claim, excludes)
    hits = searcher.search_batch(queries, lengths, n_claim, [4, 3, 5, 2], excludes)
    for q in range(len(claims)):
        mine = positions[pair_query == q].tolist()
        assert mine == brute_force_candidates(searcher, queries[q, : lengths[q]], n_claim, excludes[q], 9)
        alone = searcher.search_encoded(queries[q, : lengths[q]], n_claim, [4, 3, 5, 2][q], excludes[q])
        assert [h.pid for h in hits[q]] == [h.pid for h in alone] and len(hits[q]) == [4, 3, 5, 2][q]
        assert [h.score for h in hits[q]] == pytest.approx([h.score for h in alone], abs=1e-5)
        exact = searcher.score_positions(queries[q, : lengths[q]], n_claim, torch.tensor(mine))
        best = sorted(zip(exact.tolist(), mine), key=lambda pair: -pair[0])[: len(hits[q])]
        assert [h.pid for h in hits[q]] == [int(index_pid) for index_pid in searcher.index.pids[[p for _, p in best]]]
        assert not excludes[q] & {h.pid for h in hits[q]}


def test_top_k_per_group_is_top_k_stable_within_each_group():
    groups = torch.tensor([0, 2, 0, 2, 2, 0, 2, 0, 2])
    scores = torch.tensor([1.0, 3.0, 3.0, float("-inf"), 3.0, 1.0, 0.5, 2.0, 3.0])
    keep = top_k_per_group(groups, scores, torch.tensor([3, 5, 9]))
    expected = [int(i) for g in range(3) for i in torch.nonzero(groups == g).flatten()[top_k_stable(scores[groups == g], [3, 5, 9][g])[1]] if scores[i] > float("-inf")]
    assert keep.tolist() == expected == [2, 7, 0, 1, 4, 8, 6]


def test_rank_and_score_encodes_once_and_answers_as_rank_and_score(fp16_searcher):
    """A label round's hop: rankings as :meth:`rank`, and the given passages' exact scores as
    :meth:`score`, for queries with and without context, across query batches."""
    claims = [CLAIM, "A band from Leeds.", CLAIM]
    contexts = [[], ["Tin Lanterns | They are from Leeds."], ["Glass Harbour | It was directed by Oren Vask."]]
    pids = [[13, 3, 23], [], [53, 3]]
    in_pairs = FliprSearcher(fp16_searcher.flipr, fp16_searcher.index, nprobe=2, ncandidates=8, query_batch=2, queries_per_search=2)
    ranked, scored = in_pairs.rank_and_score(claims, contexts, [5, 3, 4], [set(), {13}, {3}], pids)
    for q in range(3):
        alone = fp16_searcher.rank(claims[q], contexts[q], [5, 3, 4][q], [set(), {13}, {3}][q])
        assert [p for p, _ in ranked[q]] == [p for p, _ in alone]
        assert scored[q] == pytest.approx(fp16_searcher.score(claims[q], contexts[q], pids[q]), abs=1e-5) and len(scored[q]) == len(pids[q])


def test_top_k_keeps_tied_scores_in_index_order():
    scores = torch.tensor([1.0, 3.0, 3.0, 0.5, 3.0, 2.0, 3.0])
    values, order = top_k_stable(scores, 4)
    assert order.tolist() == [1, 2, 4, 6] and values.tolist() == [3.0] * 4
    assert top_k_stable(scores, 99)[1].tolist() == [1, 2, 4, 6, 5, 0, 3]


def test_tied_passages_are_returned_first_come_first_served(flipr, passages):
    # twenty copies of one passage tie exactly, in their approximate and exact scores alike; which
    # of them a search returns must not depend on the device's top-k kernel (lowest position first)
    copy = passage_text(*passages[1])
    texts = [passage_text(t, x) for t, x in passages[2:]] + [copy] * 20 + [f"Filler {i} | Filler page {i} is about a river." for i in range(20)]
    searcher = FliprSearcher(flipr, make_index(flipr, texts, kind="fp16"), nprobe=2, ncandidates=6)
    first_copy = len(passages) - 2
    query, lengths, n_claim = searcher.encode([passages[1][1]])
    assert searcher.candidates(query[0, : lengths[0]], n_claim).tolist() == list(range(first_copy, first_copy + 6))
    hits = searcher.search([passages[1][1]], k=3)[0]
    assert [h.pid for h in hits] == [10 * p + 3 for p in range(first_copy, first_copy + 3)]  # make_index's pids


def test_an_index_built_in_memory_scores_each_pid_with_its_own_text(flipr, corpus):
    """The GPU benchmark's build (``build_in_memory``: codec on a sample, one shard, lists) over
    pids in another order than the texts: probing every centroid it finds what exhaustive FLIPR
    finds, and each pid scores as brute-force FLIPR scores its text."""
    from baleen_core.retrieval.building import build_in_memory

    pids = [7 + 5 * i for i in range(len(corpus))]
    texts = dict(zip(pids[::-1], corpus, strict=True))  # pid 7 is the last text
    index, timing = build_in_memory(flipr, sorted(pids), texts, IndexConfig(codec="fp16", n_centroids=16, batch_size=8, sample_passages=30))
    assert timing["passages"] == len(corpus) and timing["sample_passages"] == 30 and timing["tokens"] == index.n_tokens
    assert timing["seconds"] == pytest.approx(timing["tokenize_seconds"] + timing["codec_seconds"] + timing["encode_seconds"] + timing["ivf_seconds"], abs=0.03)
    full = FliprSearcher(flipr, index, nprobe=16, ncandidates=len(corpus))
    assert [h.pid for h in full.search([CLAIM], k=10)[0]] == [h.pid for h in full.exhaustive([CLAIM], k=10)[0]]
    q, batch = flipr.encode_queries([CLAIM])
    ordered = [texts[pid] for pid in sorted(pids)]
    docs = flipr.tokenizer.docs(ordered)
    expected = flipr_score(q, batch.score_mask, flipr.encode_doc_batch(docs), docs.score_mask, batch.n_claim, 32, 8)[0]
    got = {h.pid: h.score for h in full.exhaustive([CLAIM], k=len(corpus))[0]}
    for pid, score in zip(sorted(pids), expected.tolist(), strict=True):
        assert got[pid] == pytest.approx(score, abs=2e-2)  # fp16 storage


def test_an_index_built_from_passages_tokenized_earlier_is_the_same_index(flipr, corpus):
    """build_in_memory with the corpus's ids given (a run re-indexing after each FLIPR round
    tokenizes once) builds what it builds from the texts: same codec sample, codes and lists."""
    from baleen_core.retrieval.building import build_in_memory

    pids = [3 * i + 1 for i in range(len(corpus))]
    texts = dict(zip(pids, corpus, strict=True))
    config = IndexConfig(codec="fp16", n_centroids=16, batch_size=8, sample_passages=30)
    from_texts, _ = build_in_memory(flipr, pids, texts, config)
    from_ids, timing = build_in_memory(flipr, pids, texts, config, flipr.tokenizer.doc_tokens(corpus))
    for name in ("pids", "doclens", "codes", "payload", "ivf_offsets", "ivf_docs"):
        assert np.array_equal(getattr(from_texts, name), getattr(from_ids, name)), name
    assert np.array_equal(from_texts.codec.centroids, from_ids.codec.centroids)
    shuffled = np.random.default_rng(0).permutation(len(pids))  # pids in any order: the codec sample's ids are found by pid
    unsorted = [pids[i] for i in shuffled]
    unsorted_from_texts, _ = build_in_memory(flipr, unsorted, texts, config)
    unsorted_from_ids, _ = build_in_memory(flipr, unsorted, texts, config, flipr.tokenizer.doc_tokens([corpus[i] for i in shuffled]))
    assert np.array_equal(unsorted_from_texts.codec.centroids, unsorted_from_ids.codec.centroids)
    with pytest.raises(ValueError, match=f"29 tokenized passages given for {len(corpus)} passages"):
        build_in_memory(flipr, pids, texts, config, flipr.tokenizer.doc_tokens(corpus[:29]))


def test_the_first_hop_k_scores_claim_only_queries_and_leaves_queries_with_context_alone(flipr, corpus):
    index = make_index(flipr, corpus, kind="fp16")
    reference, first_hop = (FliprSearcher(flipr, index, nprobe=2, ncandidates=8, k_claim_first_hop=k) for k in (None, 4))
    docs = flipr.tokenizer.docs(corpus)
    d = flipr.encode_doc_batch(docs)
    for context, k in (([], 4), (["Glass Harbour | It was directed by Oren Vask."], 32)):
        q, batch = flipr.encode_queries([CLAIM], [context])
        expected = flipr_score(q, batch.score_mask, d, docs.score_mask, batch.n_claim, k, 8)[0]
        got = {h.pid: h.score for h in first_hop.exhaustive([CLAIM], [context], k=len(corpus))[0]}
        assert all(got[i * 10 + 3] == pytest.approx(float(expected[i]), abs=2e-2) for i in range(len(corpus)))
        same = [h.pid for h in first_hop.search([CLAIM], [context], k=5)[0]] == [h.pid for h in reference.search([CLAIM], [context], k=5)[0]]
        assert same == bool(context)  # with context both score alike; from the claim alone the top 5 differ
