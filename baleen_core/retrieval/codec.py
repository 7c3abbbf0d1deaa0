"""Compressed token storage: k-means centroids plus the residual, product-quantised.

Every document token is stored as the id of its nearest centroid (which also places it in the
inverted lists used for candidate generation) and a payload:

* ``pq``: the residual ``embedding − centroid`` encoded by a faiss ``ProductQuantizer`` with
  ``m`` sub-vectors of 8 bits → ``m`` bytes (ColBERTv2 stores residuals the same way, with
  per-dimension scalar buckets instead of PQ). Decoded vectors are re-normalised.
* ``fp16``: the embedding itself in half precision (``2 × dim`` bytes), the uncompressed option.

Centroid ids are uint16 when there are at most 65,536 centroids, else int32.

k-means and nearest-centroid search run in faiss (on the GPU with faiss-gpu), or in torch on a
given ``device``: that is how a GPU without a working faiss-gpu builds an index, and the fp16
codec then needs no faiss at all (faiss is imported only where it is used).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

CENTROIDS_FILE = "centroids.npy"
PQ_FILE = "residual_pq.faiss"


def _faiss():
    try:
        import faiss
    except ImportError as err:
        raise ImportError("this needs faiss (pip install faiss-cpu): the pq codec and CPU k-means do; the fp16 codec on a torch device does not") from err
    return faiss


def faiss_gpu_available() -> bool:
    try:
        faiss = _faiss()
    except ImportError:
        return False
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def spherical_kmeans(sample: np.ndarray, n_centroids: int, iterations: int, seed: int, device: torch.device | str) -> np.ndarray:
    """k-means of unit vectors by cosine (Lloyd's iterations, seeded from a sample of the
    points), in torch on ``device``; a centroid that loses every point keeps its place."""
    generator = torch.Generator().manual_seed(seed)
    points = torch.from_numpy(np.ascontiguousarray(sample, dtype=np.float32)).to(device)
    centroids = points[torch.randperm(len(points), generator=generator)[:n_centroids].to(device)].clone()
    for _ in range(iterations):
        nearest = nearest_centroids(points, centroids, 1)[1][:, 0]
        sums = torch.zeros_like(centroids).index_add_(0, nearest, points)
        counts = torch.bincount(nearest, minlength=n_centroids)
        centroids = torch.where((counts > 0)[:, None], F.normalize(sums, dim=1), centroids)
    return centroids.cpu().numpy()


def nearest_centroids(vectors: torch.Tensor, centroids: torch.Tensor, k: int, chunk: int = 65_536) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-``k`` centroids by inner product for each vector, best first, in chunks that bound the
    score matrix (torch, on the tensors' device): k-means, the torch codec and search all probe with it."""
    scores, ids = zip(*(torch.topk(vectors[i : i + chunk] @ centroids.T, k, dim=1) for i in range(0, len(vectors), chunk)), strict=True)
    return torch.cat(scores), torch.cat(ids)


@functools.cache
def gpu_resources():
    """One set of faiss GPU resources (scratch memory, streams) per process, shared by every
    codec: each set reserves its own GPU memory."""
    return _faiss().StandardGpuResources()


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

    def __init__(self, centroids: np.ndarray, pq=None, use_gpu: bool = False, device: torch.device | str | None = None) -> None:
        """``pq``: a faiss ProductQuantizer, or None for the fp16 codec. ``use_gpu``: nearest
        centroids in faiss-gpu; ``device``: in torch on that device instead of faiss."""
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)
        self.pq = pq
        self.use_gpu = use_gpu
        self.device = torch.device(device) if device is not None else None
        self._quantizer = None
        self._torch_centroids: torch.Tensor | None = None

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
        device: torch.device | str | None = None,
    ) -> ResidualCodec:
        """k-means on a sample of token embeddings (faiss, on the GPU when ``use_gpu``; or torch
        on ``device``), then PQ on the residuals (faiss)."""
        sample = np.ascontiguousarray(sample, dtype=np.float32)
        n, dim = sample.shape
        if n < n_centroids:
            raise ValueError(f"{n} sample tokens cannot train {n_centroids} centroids; lower index.n_centroids")
        if kind not in ("pq", "fp16"):
            raise ValueError(f"unknown codec {kind!r}; use 'pq' or 'fp16'")
        if device is not None:
            codec = cls(spherical_kmeans(sample, n_centroids, iterations, seed, device), None, device=device)
        else:
            # gpu=1: k-means on GPU 0 only, the device the quantizer and the encoder use (True = every GPU)
            kmeans = _faiss().Kmeans(dim, n_centroids, niter=iterations, seed=seed, spherical=True, gpu=1 if use_gpu else False, verbose=False)
            kmeans.train(sample)
            codec = cls(kmeans.centroids, None, use_gpu)
        if kind == "pq":
            faiss = _faiss()
            if dim % pq_subvectors:
                raise ValueError(f"index.pq_subvectors={pq_subvectors} must divide the embedding dim {dim}")
            residuals = sample - codec.centroids[codec.assign(sample)]
            pq = faiss.ProductQuantizer(dim, pq_subvectors, 8)
            pq.cp.min_points_per_centroid = 1  # small corpora: train on what there is, without a warning per sub-vector
            pq.train(residuals)
            codec.pq = pq
        return codec

    def quantizer(self):
        """A flat inner-product faiss index over the centroids (on the GPU when enabled)."""
        if self._quantizer is None:
            faiss = _faiss()
            index = faiss.IndexFlatIP(self.dim)
            index.add(self.centroids)
            if self.use_gpu and faiss_gpu_available():
                index = faiss.index_cpu_to_gpu(gpu_resources(), 0, index)
            self._quantizer = index
        return self._quantizer

    def probe(self, vectors: np.ndarray, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``nprobe`` nearest centroids of each vector: (scores, ids), each ``[n, min(nprobe,
        n_centroids)]`` (faiss pads a wider probe with id -1, which names no centroid)."""
        if self.device is not None:
            if self._torch_centroids is None:
                self._torch_centroids = torch.from_numpy(self.centroids).to(self.device)
            vectors_t = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32)).to(self.device)
            scores, ids = nearest_centroids(vectors_t, self._torch_centroids, min(nprobe, self.n_centroids))
            return scores.cpu().numpy(), ids.cpu().numpy()
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

    def reconstruction_error(self, embeddings: np.ndarray, codes: np.ndarray, payload: np.ndarray, max_tokens: int = 20_000, seed: int = 0) -> float:
        """Mean ``1 - cos`` between unit embeddings and their compressed form, on a seeded sample
        of at most ``max_tokens`` tokens: how well the codec fits these tokens (an index update
        compares its new tokens' error with the error on the tokens the codec was trained for)."""
        if len(embeddings) == 0:
            return 0.0
        rows = np.sort(np.random.default_rng(seed).choice(len(embeddings), min(max_tokens, len(embeddings)), replace=False))
        original = np.asarray(embeddings[rows], dtype=np.float32)
        original /= np.maximum(np.linalg.norm(original, axis=1, keepdims=True), 1e-12)
        restored = self.decompress(codes[rows], payload[rows])
        return float(np.mean(1.0 - np.sum(original * restored, axis=1)))

    def pq_table(self) -> np.ndarray:
        """The PQ sub-centroids as ``[m, 256, dim / m]``: decoding a token concatenates
        ``table[j, payload[j]]`` over ``j`` (what faiss's ``decode`` does)."""
        return _faiss().vector_to_array(self.pq.centroids).reshape(self.pq.M, self.pq.ksub, self.pq.dsub)

    def save(self, directory: Path) -> list[str]:
        np.save(directory / CENTROIDS_FILE, self.centroids)
        files = [CENTROIDS_FILE]
        if self.pq is not None:
            _faiss().write_ProductQuantizer(self.pq, str(directory / PQ_FILE))
            files.append(PQ_FILE)
        return files

    @classmethod
    def load(cls, directory: Path, use_gpu: bool = False, device: torch.device | str | None = None) -> ResidualCodec:
        pq_path = directory / PQ_FILE
        pq = _faiss().read_ProductQuantizer(str(pq_path)) if pq_path.exists() else None
        return cls(np.load(directory / CENTROIDS_FILE), pq, use_gpu, device)
