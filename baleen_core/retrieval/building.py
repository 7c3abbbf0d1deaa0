"""Building an index, one step per function; the index flow calls them from Prefect tasks.

``train_codec`` (a sample of passages → centroids + residual codec), ``encode_shard`` (passages →
compressed token codes), ``merge_shards`` (shard doclens/codes → inverted lists); and
``build_in_memory``, the three in one shard and in memory (where there is no store: the GPU
benchmark), timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from baleen_core.config import IndexConfig
from baleen_core.retrieval.codec import ResidualCodec, choose_n_centroids, codec_sample_size
from baleen_core.retrieval.index import FliprIndex, build_ivf
from baleen_core.retrieval.modeling import Flipr, batch_limits
from baleen_core.retrieval.tokenization import DocTokens
from baleen_core.retrieval.throughput import sync


@dataclass
class EncodedShard:
    pids: np.ndarray
    doclens: np.ndarray
    codes: np.ndarray
    payload: np.ndarray
    fp16: np.ndarray | None
    reconstruction_error: float | None = None  # mean 1 - cos after compression, of tokens the codec never trained on

    @property
    def n_tokens(self) -> int:
        return int(self.doclens.sum())


def encode_texts(flipr: Flipr, texts: Sequence[str] | DocTokens, config: IndexConfig, on_batch: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Flipr.encode_passages` in the configured batches (by token budget on a GPU), of
    texts or of passages tokenized earlier."""
    batch_size, max_tokens = batch_limits(flipr.device, config.batch_size, config.gpu_batch_tokens)
    return flipr.encode_passages(texts, batch_size, on_batch, max_tokens)


def train_codec(
    flipr: Flipr,
    sample_texts: Sequence[str] | DocTokens,
    n_passages_total: int,
    config: IndexConfig,
    use_gpu: bool,
    on_batch: Callable[[int], None] | None = None,
    device=None,
) -> ResidualCodec:
    """Encode a sample of passages and train the codec on their tokens (``use_gpu``/``device``:
    where k-means runs, see :meth:`ResidualCodec.train`)."""
    embeddings, doclens = encode_texts(flipr, sample_texts, config, on_batch)
    mean_len = float(doclens.mean()) if len(doclens) else 1.0
    n_centroids = config.n_centroids or choose_n_centroids(len(embeddings), int(mean_len * n_passages_total))
    return ResidualCodec.train(
        embeddings.astype(np.float32),
        n_centroids,
        kind=config.codec,
        pq_subvectors=config.pq_subvectors,
        iterations=config.kmeans_iterations,
        seed=config.seed,
        use_gpu=use_gpu,
        device=device,
    )


def encode_shard(
    flipr: Flipr,
    codec: ResidualCodec,
    pids: np.ndarray,
    texts: Sequence[str] | DocTokens,
    config: IndexConfig,
    on_batch: Callable[[int], None] | None = None,
    codec_sample: np.ndarray | None = None,
) -> EncodedShard:
    """Encode passages (``title | text``) and compress their tokens. The reconstruction error is
    measured on the tokens of passages outside ``codec_sample`` (the pids the codec was trained
    on: its error there is a training error); None when every passage was in it."""
    embeddings, doclens = encode_texts(flipr, texts, config, on_batch)
    codes, payload = codec.compress(embeddings)
    unseen = np.repeat(~np.isin(pids, codec_sample if codec_sample is not None else []), doclens)
    error = codec.reconstruction_error(embeddings[unseen], codes[unseen], payload[unseen], seed=config.seed) if unseen.any() else None
    return EncodedShard(pids, doclens, codes, payload, embeddings if config.keep_fp16 else None, error)


def merge_shards(codes: Sequence[np.ndarray], doclens: Sequence[np.ndarray], n_centroids: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverted lists over all shards, in shard order."""
    return build_ivf(np.concatenate(codes), np.concatenate(doclens), n_centroids)


def build_in_memory(flipr: Flipr, pids: Sequence[int], texts: Mapping[int, str], config: IndexConfig, tokens: DocTokens | None = None) -> tuple[FliprIndex, dict]:
    """What the index flow does (tasks/index.py: train-codec, encode-shard, build-index) over the
    passages ``pids`` (sorted; ``texts``: their ``title | text``), in one shard and in memory, with
    k-means and nearest centroids in torch on the encoder's device; and the seconds of each step.

    The passages are tokenized once (``tokenize_seconds``) and the codec's sample taken from those
    ids; ``tokens``, the passages ``pids`` tokenized earlier by the same tokenizer
    (:meth:`FliprTokenizer.doc_tokens`), skips even that: a run that re-indexes after every FLIPR
    round tokenizes its corpus once."""
    device = flipr.device
    pids = np.asarray(pids, dtype=np.int64)
    n_sample = min(len(pids), config.sample_passages or codec_sample_size(len(pids)))
    sample = np.sort(np.random.default_rng(config.seed).choice(pids, n_sample, replace=False))
    started = time.perf_counter()
    if tokens is None:
        tokens = flipr.tokenizer.doc_tokens([texts[int(p)] for p in pids])
    elif len(tokens) != len(pids):
        raise ValueError(f"{len(tokens)} tokenized passages given for {len(pids)} passages to index")
    tokenized = time.perf_counter()
    by_pid = np.argsort(pids, kind="stable")
    codec = train_codec(flipr, tokens.select(by_pid[np.searchsorted(pids[by_pid], sample)]), len(pids), config, use_gpu=False, device=device)
    sync(device)
    codec_done = time.perf_counter()
    shard = encode_shard(flipr, codec, pids, tokens, config)
    sync(device)
    encoded = time.perf_counter()
    offsets, docs = merge_shards([shard.codes], [shard.doclens], codec.n_centroids)
    index = FliprIndex(codec, shard.pids, shard.doclens, shard.codes, shard.payload, offsets, docs)
    done = time.perf_counter()
    return index, {
        "seconds": round(done - started, 2),
        "tokenize_seconds": round(tokenized - started, 2),
        "codec_seconds": round(codec_done - tokenized, 2),
        "encode_seconds": round(encoded - codec_done, 2),
        "ivf_seconds": round(done - encoded, 2),
        "passages": len(pids),
        "sample_passages": n_sample,
        "tokens": index.n_tokens,
        "n_centroids": codec.n_centroids,
        "codec": codec.kind,
        "batch_size": config.batch_size,
        "gpu_batch_tokens": config.gpu_batch_tokens,
        "passages_per_s": round(len(pids) / max(encoded - codec_done, 1e-9), 1),
    }
