"""Residual codec fidelity, inverted lists against a brute-force build, ragged gathers."""

from __future__ import annotations

import numpy as np
import pytest

from baleen_core.retrieval.codec import ResidualCodec, choose_n_centroids, codec_sample_size
from baleen_core.retrieval.index import build_ivf, plan_shards, ragged_gather


def clustered_unit_vectors(n=6000, dim=32, clusters=40, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(clusters, dim))
    x = centers[rng.integers(0, clusters, n)] + 0.35 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def vectors():
    return clustered_unit_vectors()


def test_pq_codec_is_compact_and_faithful(vectors):
    codec = ResidualCodec.train(vectors, 64, kind="pq", pq_subvectors=8, iterations=8)
    codes, payload = codec.compress(vectors)
    assert codes.dtype == np.uint16 and payload.shape == (len(vectors), 8) and payload.dtype == np.uint8
    assert codec.bytes_per_token == 8 + 2
    decoded = codec.decompress(codes, payload)
    np.testing.assert_allclose(np.linalg.norm(decoded, axis=1), 1.0, atol=1e-5)
    cosine = (decoded * vectors).sum(1)
    assert cosine.mean() > 0.95  # far better than the centroid alone:
    assert cosine.mean() > (codec.centroids[codes] * vectors).sum(1).mean() + 0.02


def test_fp16_codec_is_lossless_up_to_half_precision(vectors):
    codec = ResidualCodec.train(vectors, 32, kind="fp16", iterations=4)
    codes, payload = codec.compress(vectors)
    assert codec.bytes_per_token == 2 * 32 + 2 and payload.dtype == np.float16
    np.testing.assert_allclose(codec.decompress(codes, payload), vectors, atol=1e-3)


def test_codes_are_the_nearest_centroid(vectors):
    codec = ResidualCodec.train(vectors, 16, kind="fp16", iterations=4)
    brute = np.argmax(vectors @ codec.centroids.T, axis=1)
    np.testing.assert_array_equal(codec.assign(vectors, chunk=1000), brute)


def test_codec_round_trips_through_files(vectors, tmp_path):
    codec = ResidualCodec.train(vectors, 32, kind="pq", pq_subvectors=4, iterations=4)
    codec.save(tmp_path)
    loaded = ResidualCodec.load(tmp_path)
    codes, payload = codec.compress(vectors[:100])
    np.testing.assert_array_equal(loaded.compress(vectors[:100])[1], payload)
    np.testing.assert_allclose(loaded.decompress(codes, payload), codec.decompress(codes, payload))


def test_bad_codec_settings_are_explained(vectors):
    with pytest.raises(ValueError, match="divide"):
        ResidualCodec.train(vectors, 16, kind="pq", pq_subvectors=5)
    with pytest.raises(ValueError, match="lower index.n_centroids"):
        ResidualCodec.train(vectors[:10], 16)


def test_inverted_lists_match_a_brute_force_build():
    rng = np.random.default_rng(1)
    doclens = rng.integers(1, 9, size=50).astype(np.int32)
    codes = rng.integers(0, 12, size=int(doclens.sum()))
    offsets, docs = build_ivf(codes, doclens, 12)
    owner = np.repeat(np.arange(50), doclens)
    for c in range(12):
        assert docs[offsets[c] : offsets[c + 1]].tolist() == sorted(set(owner[codes == c].tolist()))


def test_ragged_gather():
    flat, owner = ragged_gather(np.array([5, 0, 9]), np.array([2, 0, 3]))
    assert flat.tolist() == [5, 6, 9, 10, 11] and owner.tolist() == [0, 0, 2, 2, 2]


def test_shard_plan_covers_every_pid_once():
    pids = np.sort(np.random.default_rng(2).integers(0, 2**62, size=1001))
    plans = plan_shards(pids, 300)
    assert [p.n_passages for p in plans] == [300, 300, 300, 101]
    assert sum(((pids >= p.lo) & (pids <= p.hi)).sum() for p in plans) == 1001


def test_sizing_rules():
    assert codec_sample_size(980) == 980 and codec_sample_size(31_235) == 7_744
    assert choose_n_centroids(60_000, 60_000) == 512  # 4·√T = 980 → 512
    assert choose_n_centroids(10_000, 10**9) == 128  # capped by 40 training tokens per centroid


def _index_of(vectors: np.ndarray, kind: str, doclens: np.ndarray):
    from baleen_core.retrieval.index import FliprIndex

    codec = ResidualCodec.train(vectors, 64, kind=kind, pq_subvectors=8, iterations=8)
    codes, payload = codec.compress(vectors)
    offsets, docs = build_ivf(codes, doclens, codec.n_centroids)
    return FliprIndex(codec, np.arange(len(doclens), dtype=np.int64) * 7, doclens, codes, payload, offsets, docs)


@pytest.mark.parametrize("kind", ["pq", "fp16"])
def test_index_tensors_read_what_the_numpy_index_reads(vectors, kind):
    # The torch view that search runs on (on the CPU here, on the GPU there) must decompress,
    # probe, list and gather exactly as the numpy/faiss index does.
    import torch

    from baleen_core.retrieval.index import IndexTensors

    cuts = np.sort(np.random.default_rng(1).choice(np.arange(1, len(vectors)), 299, replace=False))
    doclens = np.diff(np.concatenate([[0], cuts, [len(vectors)]]))  # 300 passages over every token
    index = _index_of(vectors, kind, doclens)
    tensors = IndexTensors(index, "cpu")
    tokens = np.random.default_rng(2).integers(0, len(vectors), size=500)
    np.testing.assert_allclose(tensors.embeddings(torch.from_numpy(tokens)).numpy(), index.embeddings(tokens), atol=1e-5)
    scores, ids = tensors.probe(torch.from_numpy(vectors[:50]), 4)
    faiss_scores, faiss_ids = index.codec.probe(vectors[:50], 4)
    np.testing.assert_allclose(scores.numpy(), faiss_scores, atol=1e-5)
    assert (ids.numpy() == faiss_ids).mean() > 0.99  # ties may order differently
    centroids = np.array([0, 5, 63, 5], dtype=np.int64)
    docs, owner = tensors.postings(torch.from_numpy(centroids))
    want_docs, want_owner = index.postings(centroids)
    assert docs.tolist() == want_docs.tolist() and owner.tolist() == want_owner.tolist()
    positions = np.array([3, 0, 299, 17])
    got, got_owner = tensors.token_range(torch.from_numpy(positions))
    want, want_owner = index.token_range(positions)
    assert got.tolist() == want.tolist() and got_owner.tolist() == want_owner.tolist()


def test_torch_kmeans_is_as_good_as_faiss_and_probes_the_same(vectors):
    # The GPU builds its codec in torch when faiss-gpu cannot run there; on the CPU here, the
    # torch codec must cluster as well as faiss and find the same nearest centroids.
    from baleen_core.retrieval.codec import spherical_kmeans

    faiss_codec = ResidualCodec.train(vectors, 40, kind="fp16", iterations=10)
    torch_codec = ResidualCodec.train(vectors, 40, kind="fp16", iterations=10, device="cpu")
    np.testing.assert_allclose(np.linalg.norm(torch_codec.centroids, axis=1), 1.0, atol=1e-5)

    def mean_cosine(codec):
        return float((codec.centroids[codec.assign(vectors)] * vectors).sum(1).mean())

    assert mean_cosine(torch_codec) > mean_cosine(faiss_codec) - 0.02
    same_centroids = ResidualCodec(torch_codec.centroids, None)  # faiss probing, same centroids
    torch_scores, torch_ids = torch_codec.probe(vectors[:200], 3)
    faiss_scores, faiss_ids = same_centroids.probe(vectors[:200], 3)
    np.testing.assert_allclose(torch_scores, faiss_scores, atol=1e-5)
    assert (torch_ids == faiss_ids).mean() > 0.99
    again = spherical_kmeans(vectors, 40, 10, 0, "cpu")
    np.testing.assert_array_equal(again, torch_codec.centroids)  # seeded
