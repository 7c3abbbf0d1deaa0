"""Index updates: merged inverted lists against a build over everything, change detection by
hand, and an updated index against a rebuild with the same encoder and codec."""

from __future__ import annotations

import numpy as np
import pytest

from baleen_core.config import IndexConfig
from baleen_core.retrieval import passage_text
from baleen_core.retrieval.building import encode_shard, train_codec
from baleen_core.retrieval.codec import ResidualCodec
from baleen_core.retrieval.delta import RebuildLimits, passage_changes, rebuild_reason, retired_positions, text_digests, update_lists
from baleen_core.retrieval.index import FliprIndex, build_ivf, merge_ivf
from baleen_core.retrieval.search import FliprSearcher


def test_merged_inverted_lists_equal_a_build_over_both():
    rng = np.random.default_rng(3)
    doclens_a, doclens_b = rng.integers(1, 9, 40), rng.integers(1, 9, 7)
    codes_a, codes_b = rng.integers(0, 16, doclens_a.sum()), rng.integers(0, 16, doclens_b.sum())
    merged = merge_ivf(*build_ivf(codes_a, doclens_a, 16), *build_ivf(codes_b, doclens_b, 16), len(doclens_a))
    whole = build_ivf(np.concatenate([codes_a, codes_b]), np.concatenate([doclens_a, doclens_b]), 16)
    np.testing.assert_array_equal(merged[0], whole[0])
    np.testing.assert_array_equal(merged[1], whole[1])


def test_passage_changes_are_added_updated_and_removed():
    old = text_digests([1, 2, 3], ["a", "b", "c"])
    new = text_digests([2, 3, 4], ["b", "c, edited", "d"])
    changes = passage_changes(old, new)
    assert changes.counts() == {"added": 1, "updated": 1, "removed": 1}
    assert changes.added.tolist() == [4] and changes.updated.tolist() == [3] and changes.removed.tolist() == [1]
    assert changes.to_encode.tolist() == [3, 4] and changes.retired.tolist() == [1, 3]
    assert passage_changes(old, old).empty
    assert retired_positions({1: 7, 3: 2, 5: 0}, changes.retired).tolist() == [2, 7]


def test_rebuild_reasons():
    limits = RebuildLimits(max_added_share=0.2, max_error_ratio=1.5)
    assert rebuild_reason(limits, 1000, 200, 0.010, 0.014) is None  # 20% is not above 20%; 1.4× is not above 1.5×
    assert "201 passages added" in rebuild_reason(limits, 1000, 201, 0.010, 0.010)
    assert "1.60× the codec's" in rebuild_reason(limits, 1000, 10, 0.010, 0.016)
    assert rebuild_reason(limits, 1000, 10, None, 0.5) is None  # nothing to compare with


def test_reconstruction_error_is_larger_for_tokens_unlike_the_codecs():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(8, 32))
    near = centers[rng.integers(0, 8, 3000)] + 0.2 * rng.normal(size=(3000, 32))
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    far = rng.normal(size=(3000, 32))
    far /= np.linalg.norm(far, axis=1, keepdims=True)
    codec = ResidualCodec.train(near.astype(np.float32), 16, pq_subvectors=8, iterations=6)
    errors = [codec.reconstruction_error(x, *codec.compress(x)) for x in (near, far)]
    assert 0 < errors[0] < errors[1] / 2, errors


# --- an updated index against a rebuild -----------------------------------------------------------

CONFIG = IndexConfig(codec="fp16", n_centroids=16, kmeans_iterations=4, batch_size=4)  # four passages cannot train PQ
QUERIES = ["Oren Vask directed a thriller.", "An indie band from Leeds.", "A city in Denmark.", "Kelda Marrow starred in a film."]


def _encoded(flipr, codec, corpus: dict[int, str]):
    pids = np.array(sorted(corpus), dtype=np.int64)
    return encode_shard(flipr, codec, pids, [corpus[int(p)] for p in pids], CONFIG)


def _index(codec, shards, lists=None) -> FliprIndex:
    arrays = {name: np.concatenate([getattr(s, name) for s in shards]) for name in ("pids", "doclens", "codes", "payload")}
    if lists is None:
        offsets, docs = build_ivf(arrays["codes"], arrays["doclens"], codec.n_centroids)
        return FliprIndex(codec, arrays["pids"], arrays["doclens"], arrays["codes"], arrays["payload"], offsets, docs)
    return FliprIndex(codec, arrays["pids"], arrays["doclens"], arrays["codes"], arrays["payload"], lists.ivf_offsets, lists.ivf_docs, dead_positions=lists.dead_positions)


@pytest.fixture(scope="module")
def updated_and_rebuilt(flipr, passages):
    """An index of four passages updated to a corpus with one removed, one rewritten and two added,
    and an index built from scratch over that corpus with the same codec."""
    texts = {1000 + i: passage_text(title, text) for i, (title, text) in enumerate(passages)}
    old = {pid: texts[pid] for pid in (1000, 1001, 1002, 1003)}
    new = {1000: texts[1000], 1002: passage_text("Oren Vask", "Oren Vask is a Danish director and painter from Aarhus."), 1003: texts[1003], 1004: texts[1004], 1005: texts[1005]}
    codec = train_codec(flipr, list(old.values()), len(old), CONFIG, use_gpu=False)
    base = _index(codec, [_encoded(flipr, codec, old)])

    changes = passage_changes(text_digests(list(old), list(old.values())), text_digests(list(new), list(new.values())))
    delta = _encoded(flipr, codec, {int(pid): new[int(pid)] for pid in changes.to_encode})
    lists = update_lists(base.ivf_offsets, base.ivf_docs, base.n_passages, np.flatnonzero(base.dead), retired_positions(base.position_of_pid, changes.retired), [delta.codes], [delta.doclens])
    base_shard = _encoded(flipr, codec, old)
    updated = _index(codec, [base_shard, delta], lists)
    rebuilt = _index(codec, [_encoded(flipr, codec, new)])
    return changes, updated, rebuilt


def test_an_updated_index_holds_the_new_corpus_and_nothing_else(updated_and_rebuilt):
    changes, updated, _ = updated_and_rebuilt
    assert changes.counts() == {"added": 2, "updated": 1, "removed": 1}
    assert updated.n_passages == 4 + 3 and updated.n_live == 5
    assert sorted(updated.position_of_pid) == [1000, 1002, 1003, 1004, 1005]
    assert updated.position_of_pid[1002] == 4  # the rewritten passage lives at its new position only
    assert updated.dead.tolist() == [False, True, True, False, False, False, False]


@pytest.mark.parametrize("method", ["search", "exhaustive"])
def test_an_updated_index_searches_exactly_as_a_rebuild_with_the_same_codec(flipr, updated_and_rebuilt, method):
    _, updated, rebuilt = updated_and_rebuilt
    results = []
    for index in (updated, rebuilt):
        searcher = FliprSearcher(flipr, index, nprobe=16, ncandidates=100)
        results.append(getattr(searcher, method)(QUERIES, k=10))
    for got, want in zip(*results, strict=True):
        assert [h.pid for h in got] == [h.pid for h in want]
        np.testing.assert_allclose([h.score for h in got], [h.score for h in want], rtol=1e-5)
        assert 1001 not in {h.pid for h in got}  # removed: never returned, even with room for every passage


def test_an_updated_passage_is_scored_by_its_new_text(flipr, updated_and_rebuilt):
    _, updated, rebuilt = updated_and_rebuilt
    scores = [FliprSearcher(flipr, index).score(QUERIES[0], [], [1002]) for index in (updated, rebuilt)]
    np.testing.assert_allclose(scores[0], scores[1], rtol=1e-5)
