"""Compressed token storage: faiss k-means centroids plus the residual, product-quantised.

Every document token is stored as the id of its nearest centroid (which also places it in the
inverted lists used for candidate generation) and a payload:

* ``pq``: the residual ``embedding − centroid`` encoded by a faiss ``ProductQuantizer`` with
  ``m`` sub-vectors of 8 bits → ``m`` bytes (ColBERTv2 stores residuals the same way, with
  per-dimension scalar buckets instead of PQ). Decoded vectors are re-normalised.
* ``fp16``: the embedding itself in half precision (``2 × dim`` bytes), the uncompressed option.

Centroid ids are uint16 when there are at most 65,536 centroids, else int32.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import faiss
import numpy as np

CENTROIDS_FILE = "centroids.npy"
PQ_FILE = "residual_pq.faiss"


def faiss_gpu_available() -> bool:
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


@functools.cache
def gpu_resources() -> faiss.StandardGpuResources:
    """One set of faiss GPU resources (scratch memory, streams) per process, shared by every
    codec: each set reserves its own GPU memory."""
    return faiss.StandardGpuResources()


def choose_n_centroids(sample_tokens: int, total_tokens: int) -> int:
    """A power of two near ``4·√(total tokens)``, with ≥ 40 training tokens per centroid.

    ColBERTv2 uses 16·√T; a quarter of that keeps k-means affordable on 2 CPU cores while the
    inverted lists stay short enough (≈ √T/4 tokens each) for cheap candidate generation.
    """
    target = max(16.0, min(4.0 * math.sqrt(max(total_tokens, 1)), sample_tokens / 40.0))
    return int(2 ** math.floor(math.log2(target)))


def codec_sample_size(n_passages: int) -> int:
    """Passages encoded to train the codec: ColBERTv2's 16·√(120·N) over four, ≥ 4,096, ≤ N."""
    return min(n_passages, max(4_096, int(4 * math.sqrt(120 * n_passages))))


class ResidualCodec:
    """Centroids + residual codec; ``compress``/``decompress`` are inverse up to quantisation."""

    def __init__(self, centroids: np.ndarray, pq: faiss.ProductQuantizer | None, use_gpu: bool = False) -> None:
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)
        self.pq = pq
        self.use_gpu = use_gpu
        self._quantizer = None

    @property
    def kind(self) -> str:
        return "pq" if self.pq is not None else "fp16"

    @property
    def dim(self) -> int:
        return self.centroids.shape[1]

    @property
    def n_centroids(self) -> int:
        return self.centroids.shape[0]

    @property
    def code_dtype(self) -> np.dtype:
        return np.dtype(np.uint16) if self.n_centroids <= 65_536 else np.dtype(np.int32)

    @property
    def bytes_per_token(self) -> int:
        payload = self.pq.code_size if self.pq is not None else 2 * self.dim
        return payload + self.code_dtype.itemsize

    @classmethod
    def train(
        cls,
        sample: np.ndarray,
        n_centroids: int,
        kind: str = "pq",
        pq_subvectors: int = 32,
        iterations: int = 10,
        seed: int = 0,
        use_gpu: bool = False,
    ) -> ResidualCodec:
        """k-means on a sample of token embeddings (on the GPU when ``use_gpu``), then PQ on residuals."""
        sample = np.ascontiguousarray(sample, dtype=np.float32)
        n, dim = sample.shape
        if n < n_centroids:
            raise ValueError(f"{n} sample tokens cannot train {n_centroids} centroids; lower index.n_centroids")
        # gpu=1: k-means on GPU 0 only, the device the quantizer and the encoder use (True = every GPU)
        kmeans = faiss.Kmeans(dim, n_centroids, niter=iterations, seed=seed, spherical=True, gpu=1 if use_gpu else False, verbose=False)
        kmeans.train(sample)
        codec = cls(kmeans.centroids, None, use_gpu)
        if kind == "pq":
            if dim % pq_subvectors:
                raise ValueError(f"index.pq_subvectors={pq_subvectors} must divide the embedding dim {dim}")
            residuals = sample - codec.centroids[codec.assign(sample)]
            pq = faiss.ProductQuantizer(dim, pq_subvectors, 8)
            pq.cp.min_points_per_centroid = 1  # small corpora: train on what there is, without a warning per sub-vector
            pq.train(residuals)
            codec.pq = pq
        elif kind != "fp16":
            raise ValueError(f"unknown codec {kind!r}; use 'pq' or 'fp16'")
        return codec

    def quantizer(self) -> faiss.Index:
        """A flat inner-product faiss index over the centroids (on the GPU when enabled)."""
        if self._quantizer is None:
            index = faiss.IndexFlatIP(self.dim)
            index.add(self.centroids)
            if self.use_gpu and faiss_gpu_available():
                index = faiss.index_cpu_to_gpu(gpu_resources(), 0, index)
            self._quantizer = index
        return self._quantizer

    def probe(self, vectors: np.ndarray, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``nprobe`` nearest centroids of each vector: (scores, ids), each ``[n, min(nprobe,
        n_centroids)]`` (faiss pads a wider probe with id -1, which names no centroid)."""
        scores, ids = self.quantizer().search(np.ascontiguousarray(vectors, dtype=np.float32), min(nprobe, self.n_centroids))
        return scores, ids

    def assign(self, vectors: np.ndarray, chunk: int = 262_144) -> np.ndarray:
        """Nearest centroid of every vector."""
        out = np.empty(len(vectors), dtype=np.int64)
        for start in range(0, len(vectors), chunk):
            out[start : start + chunk] = self.probe(vectors[start : start + chunk], 1)[1][:, 0]
        return out

    def compress(self, embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token embeddings ``[T, dim]`` → (centroid ids ``[T]``, payload ``[T, bytes]`` or fp16 ``[T, dim]``)."""
        vectors = np.ascontiguousarray(embeddings, dtype=np.float32)
        codes = self.assign(vectors)
        if self.pq is None:
            return codes.astype(self.code_dtype), vectors.astype(np.float16)
        residuals = vectors - self.centroids[codes]
        return codes.astype(self.code_dtype), self.pq.compute_codes(residuals)

    def decompress(self, codes: np.ndarray, payload: np.ndarray) -> np.ndarray:
        """Back to unit-norm float32 embeddings ``[T, dim]``."""
        if self.pq is None:
            return payload.astype(np.float32)
        vectors = self.centroids[codes.astype(np.int64)] + self.pq.decode(np.ascontiguousarray(payload))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)

    def save(self, directory: Path) -> list[str]:
        np.save(directory / CENTROIDS_FILE, self.centroids)
        files = [CENTROIDS_FILE]
        if self.pq is not None:
            faiss.write_ProductQuantizer(self.pq, str(directory / PQ_FILE))
            files.append(PQ_FILE)
        return files

    @classmethod
    def load(cls, directory: Path, use_gpu: bool = False) -> ResidualCodec:
        pq_path = directory / PQ_FILE
        pq = faiss.read_ProductQuantizer(str(pq_path)) if pq_path.exists() else None
        return cls(np.load(directory / CENTROIDS_FILE), pq, use_gpu)
