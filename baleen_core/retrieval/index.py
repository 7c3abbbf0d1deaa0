"""The searchable corpus: token codes back to back, and inverted lists for candidate generation.

Files of one shard (written by the index flow, one shard per task)::

    pids.npy      [N]      int64   passage ids, in shard order
    doclens.npy   [N]      int32   tokens per passage
    codes.npy     [T]      uint16  nearest centroid of every token
    payload.npy   [T, m]   uint8   PQ codes of the residuals   (or [T, dim] float16 with codec fp16)
    fp16.npy      [T, dim] float16 optional uncompressed copy  (index.keep_fp16)

and of the merged index: the codec (``centroids.npy``, ``residual_pq.faiss``) and the inverted
lists ``ivf_offsets.npy`` [K+1] / ``ivf_docs.npy`` (for every centroid, the passages — positions
in shard order — that have at least one token there).

An index updated in place (:mod:`baleen_core.retrieval.delta`) lists the shards of the index it
updated, then its delta shards, and holds ``dead_positions.npy``: the positions of passages
deleted or replaced since, which search never returns. Positions only ever grow, so a position
names one stored passage for the life of the index.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from baleen_core.retrieval.codec import ResidualCodec, nearest_centroids

SHARD_FILES = ("pids.npy", "doclens.npy", "codes.npy", "payload.npy")
FP16_FILE = "fp16.npy"
IVF_OFFSETS_FILE = "ivf_offsets.npy"
IVF_DOCS_FILE = "ivf_docs.npy"
DEAD_POSITIONS_FILE = "dead_positions.npy"


@dataclass(frozen=True)
class ShardPlan:
    """Shard ``number`` holds the passages with ``lo <= pid <= hi`` (pids sorted, so shards are
    a uniform random split of the corpus: pids are title hashes). A delta shard of an index
    update holds exactly ``pids``, the added and updated passages in that range."""

    number: int
    lo: int
    hi: int
    n_passages: int
    pids: tuple[int, ...] | None = None

    @property
    def is_delta(self) -> bool:
        return self.pids is not None


def plan_shards(sorted_pids: np.ndarray, shard_passages: int) -> list[ShardPlan]:
    plans = []
    for number, start in enumerate(range(0, len(sorted_pids), shard_passages)):
        chunk = sorted_pids[start : start + shard_passages]
        plans.append(ShardPlan(number, int(chunk[0]), int(chunk[-1]), len(chunk)))
    return plans


def plan_delta_shards(sorted_pids: np.ndarray, shard_passages: int) -> list[ShardPlan]:
    """Delta shards of an index update: the given passages, ``shard_passages`` at a time."""
    plans = []
    for number, start in enumerate(range(0, len(sorted_pids), shard_passages)):
        chunk = [int(p) for p in sorted_pids[start : start + shard_passages]]
        plans.append(ShardPlan(number, chunk[0], chunk[-1], len(chunk), tuple(chunk)))
    return plans


def write_shard(directory: Path, pids: np.ndarray, doclens: np.ndarray, codes: np.ndarray, payload: np.ndarray, fp16: np.ndarray | None) -> list[str]:
    arrays = dict(zip(SHARD_FILES, (pids.astype(np.int64), doclens.astype(np.int32), codes, payload), strict=True))
    if fp16 is not None:
        arrays[FP16_FILE] = fp16.astype(np.float16)
    for name, array in arrays.items():
        np.save(directory / name, array)
    return list(arrays)


def ragged_gather(starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flatten the ranges ``[starts[i], starts[i]+lens[i])``: (indices, which range each came from)."""
    lens = lens.astype(np.int64)
    owner = np.repeat(np.arange(len(lens)), lens)
    within = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return np.repeat(starts.astype(np.int64), lens) + within, owner


def build_ivf(codes: np.ndarray, doclens: np.ndarray, n_centroids: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverted lists as CSR: passages of centroid c are ``docs[offsets[c]:offsets[c+1]]``, each once."""
    token_doc = np.repeat(np.arange(len(doclens), dtype=np.int64), doclens)
    pairs = np.unique(codes.astype(np.int64) * len(doclens) + token_doc)  # sorted by centroid, then passage
    centroid, docs = np.divmod(pairs, max(len(doclens), 1))
    offsets = np.zeros(n_centroids + 1, dtype=np.int64)
    np.cumsum(np.bincount(centroid, minlength=n_centroids), out=offsets[1:])
    return offsets, docs.astype(np.int32)


def merge_ivf(base_offsets: np.ndarray, base_docs: np.ndarray, delta_offsets: np.ndarray, delta_docs: np.ndarray, delta_first_position: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverted lists of an index and of passages appended after it (their positions counted
    from 0 in the delta, from ``delta_first_position`` in the merged index): the lists
    :func:`build_ivf` makes over both, without reading a single token code of the base."""
    n_centroids = len(base_offsets) - 1
    centroid = np.concatenate([np.repeat(np.arange(n_centroids), np.diff(base_offsets)), np.repeat(np.arange(n_centroids), np.diff(delta_offsets))])
    docs = np.concatenate([base_docs.astype(np.int64), delta_docs.astype(np.int64) + delta_first_position])
    order = np.argsort(centroid, kind="stable")  # within a centroid: the base's passages, then the delta's, each ascending
    offsets = np.zeros(n_centroids + 1, dtype=np.int64)
    offsets[1:] = base_offsets[1:] + delta_offsets[1:]
    return offsets, docs[order].astype(np.int32)


class FliprIndex:
    """All shards of one index, loaded, plus the codec and inverted lists."""

    def __init__(
        self,
        codec: ResidualCodec,
        pids: np.ndarray,
        doclens: np.ndarray,
        codes: np.ndarray,
        payload: np.ndarray,
        ivf_offsets: np.ndarray,
        ivf_docs: np.ndarray,
        fp16: np.ndarray | None = None,
        dead_positions: np.ndarray | None = None,
    ) -> None:
        self.codec = codec
        self.pids = pids
        self.doclens = doclens
        self.codes = codes
        self.payload = payload
        self.ivf_offsets = ivf_offsets
        self.ivf_docs = ivf_docs
        self.fp16 = fp16
        self.token_offsets = np.zeros(len(doclens) + 1, dtype=np.int64)
        np.cumsum(doclens, out=self.token_offsets[1:])
        self.dead = np.zeros(len(pids), dtype=bool)  # passages deleted or replaced since they were indexed
        if dead_positions is not None:
            self.dead[dead_positions] = True
        self.position_of_pid = {int(pids[i]): int(i) for i in np.flatnonzero(~self.dead)}
        if len(self.position_of_pid) != len(pids) - int(self.dead.sum()):
            raise ValueError("a passage id is live at two positions of the index")
        self._dense: np.ndarray | None = None

    @classmethod
    def open(cls, index_dir: Path, shard_dirs: Sequence[Path], storage: str = "codec", use_gpu: bool = False, device=None) -> FliprIndex:
        """Load an index. ``storage='codec'`` re-ranks from the codec's payload; ``'fp16'`` from the
        shards' uncompressed copies (they must have been written with ``index.keep_fp16``)."""
        if storage not in ("codec", "fp16"):
            raise ValueError(f"storage must be 'codec' or 'fp16', not {storage!r}")
        codec = ResidualCodec.load(index_dir, use_gpu=use_gpu, device=device)
        parts: dict[str, list[np.ndarray]] = {name: [] for name in (*SHARD_FILES, FP16_FILE)}
        for shard in shard_dirs:
            for name in SHARD_FILES:
                parts[name].append(np.load(shard / name))
            if storage == "fp16":
                if not (shard / FP16_FILE).exists():
                    raise FileNotFoundError(f"shard {shard} has no fp16 copy; rebuild the index with index.keep_fp16: true")
                parts[FP16_FILE].append(np.load(shard / FP16_FILE))
        pids, doclens, codes, payload = (np.concatenate(parts[name]) for name in SHARD_FILES)
        fp16 = np.concatenate(parts[FP16_FILE]) if storage == "fp16" else None
        dead = np.load(index_dir / DEAD_POSITIONS_FILE) if (index_dir / DEAD_POSITIONS_FILE).exists() else None
        return cls(codec, pids, doclens, codes, payload, np.load(index_dir / IVF_OFFSETS_FILE), np.load(index_dir / IVF_DOCS_FILE), fp16, dead)

    @property
    def n_passages(self) -> int:
        """Stored passages, live or dead: positions run ``0 .. n_passages - 1``."""
        return len(self.pids)

    @property
    def n_live(self) -> int:
        """Passages search can return (stored minus deleted or replaced)."""
        return len(self.position_of_pid)

    @property
    def n_tokens(self) -> int:
        return int(self.token_offsets[-1])

    @property
    def storage(self) -> str:
        return "fp16" if self.fp16 is not None else self.codec.kind

    @property
    def bytes_per_token(self) -> float:
        """Stored bytes per token for re-ranking: centroid id + payload (or the fp16 copy)."""
        if self.fp16 is not None:
            return float(self.fp16.shape[1] * 2)
        return float(self.codec.bytes_per_token)

    def token_range(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token indices of the given passages and, for each token, its passage's row in ``positions``."""
        return ragged_gather(self.token_offsets[positions], self.doclens[positions])

    def embeddings(self, token_idx: np.ndarray) -> np.ndarray:
        """Float32 unit vectors of the given tokens (decompressed, or from the fp16 copy)."""
        if self._dense is not None:
            return self._dense[token_idx]
        if self.fp16 is not None:
            return self.fp16[token_idx].astype(np.float32)
        return self.codec.decompress(self.codes[token_idx], self.payload[token_idx])

    def materialize(self) -> None:
        """Keep every token decompressed in memory (4·dim bytes/token) for exhaustive search."""
        if self._dense is None:
            self._dense = np.concatenate(list(self._dense_chunks()))

    def _dense_chunks(self, chunk: int = 500_000) -> Iterator[np.ndarray]:
        for start in range(0, self.n_tokens, chunk):
            yield self.embeddings(np.arange(start, min(start + chunk, self.n_tokens)))

    def postings(self, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Passages listed under each centroid of a flat array: (passage positions, owner index)."""
        starts = self.ivf_offsets[centroids]
        flat, owner = ragged_gather(starts, self.ivf_offsets[centroids + 1] - starts)
        return self.ivf_docs[flat], owner


def ragged_gather_tensor(starts: torch.Tensor, lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`ragged_gather` in torch, on the tensors' device."""
    lens = lens.long()
    owner = torch.repeat_interleave(torch.arange(len(lens), device=lens.device), lens)
    first = torch.cumsum(lens, 0) - lens
    within = torch.arange(owner.numel(), device=lens.device) - first[owner]
    return starts.long()[owner] + within, owner


class IndexTensors:
    """What search reads of a :class:`FliprIndex`, as torch tensors on one device: centroids,
    inverted lists, token offsets, token storage and the PQ decoding table. On the CPU they share
    the index's memory; on a GPU they are copied there once, so probing, candidate generation,
    decompression and MaxSim all run on the GPU (faiss-gpu is not needed)."""

    def __init__(self, index: FliprIndex, device: torch.device | str) -> None:
        self.device = torch.device(device)
        on_gpu = self.device.type != "cpu"

        def put(array: np.ndarray, gpu_dtype: torch.dtype | None = None) -> torch.Tensor:
            tensor = torch.from_numpy(np.ascontiguousarray(array))
            if on_gpu and gpu_dtype is not None:  # CUDA kernels index with int32/int64 only
                tensor = tensor.to(gpu_dtype)
            return tensor.to(self.device)

        codec = index.codec
        self.centroids = put(codec.centroids.astype(np.float32, copy=False))
        self.ivf_offsets = put(index.ivf_offsets.astype(np.int64, copy=False))
        self.ivf_docs = put(index.ivf_docs)
        self.token_offsets = put(index.token_offsets)
        self.doclens = put(index.doclens.astype(np.int64, copy=False))
        self.pids = put(index.pids)
        self.dead = put(index.dead) if index.dead.any() else None  # None: nothing to mask
        self.dense: torch.Tensor | None = None
        self.codes: torch.Tensor | None = None
        self.payload: torch.Tensor | None = None
        self.pq_table: torch.Tensor | None = None
        if index._dense is not None:
            self.dense = put(index._dense)
        elif index.fp16 is not None:
            self.dense = put(index.fp16)
        elif codec.pq is None:  # the fp16 codec stores the embeddings themselves
            self.dense = put(index.payload)
        else:
            self.codes = put(index.codes, torch.int32)
            self.payload = put(index.payload)
            self.pq_table = put(codec.pq_table())

    @property
    def n_centroids(self) -> int:
        return self.centroids.shape[0]

    def probe(self, vectors: torch.Tensor, nprobe: int) -> tuple[torch.Tensor, torch.Tensor]:
        """As :meth:`ResidualCodec.probe`: the ``nprobe`` nearest centroids of each vector, best first."""
        return nearest_centroids(vectors, self.centroids, min(nprobe, self.n_centroids))

    def postings(self, centroids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """As :meth:`FliprIndex.postings`."""
        starts = self.ivf_offsets[centroids]
        flat, owner = ragged_gather_tensor(starts, self.ivf_offsets[centroids + 1] - starts)
        return self.ivf_docs[flat].long(), owner

    def token_range(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """As :meth:`FliprIndex.token_range`."""
        return ragged_gather_tensor(self.token_offsets[positions], self.doclens[positions])

    def embeddings(self, token_idx: torch.Tensor) -> torch.Tensor:
        """As :meth:`FliprIndex.embeddings`: float32 unit vectors, decompressed on this device."""
        if self.dense is not None:
            return self.dense[token_idx].float()
        codes, payload = self.codes[token_idx].long(), self.payload[token_idx].long()  # [T], [T, M]
        subvectors = torch.arange(payload.shape[1], device=self.device)
        residuals = self.pq_table[subvectors[None, :], payload].reshape(len(token_idx), -1)  # [T, M, dsub] -> [T, dim]
        return F.normalize(self.centroids[codes] + residuals, dim=1)
