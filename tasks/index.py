"""The index stage as Prefect tasks: train the codec, encode shards (one task each), merge.

Every task fingerprints its inputs; a rerun reuses what is already published, so after a crash
the flow resumes at the first shard that was not finished (a half-written shard is only ``tmp/``
debris, never a published artifact).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from prefect import task

from baleen_core.config import IndexConfig, RetrieverConfig
from baleen_core.retrieval import Flipr, ShardPlan, passage_text, plan_shards
from baleen_core.retrieval.building import encode_shard, merge_shards, train_codec
from baleen_core.retrieval.codec import ResidualCodec, codec_sample_size, faiss_gpu_available
from baleen_core.retrieval.index import DEAD_POSITIONS_FILE, FP16_FILE, IVF_DOCS_FILE, IVF_OFFSETS_FILE, write_shard
from baleen_schemas import FLIPR_CODEC, FLIPR_INDEX, FLIPR_SHARD, INDEX_PASSAGES
from baleen_storage import ArtifactRef, ArtifactStore, file_fingerprint, fingerprint
from baleen_storage.store import published_manifest
from baleen_storage.indexes import PRODUCER
from baleen_tasks.policies import GPU_TAG
from baleen_tasks.reporting import Progress, flow_run_info, publish_table, readable, run_logger


#: The pids of the passages a codec was trained on, kept with it: a shard's reconstruction error
#: is measured on the others, so that it is not a training error.
CODEC_SAMPLE_FILE = "sample_pids.npy"


def index_producer(tag: str | None) -> str:
    """Producer of an index's codec/index artifacts: ``index``, or ``index-<tag>`` for a second
    index in the same run (e.g. ``index-flipr-r0`` built with a trained checkpoint)."""
    return PRODUCER if tag is None else f"{PRODUCER}-{tag}"


def shard_producer(tag: str | None, shard: ShardPlan) -> str:
    name = f"delta-shard-{shard.number:05d}" if shard.is_delta else f"shard-{shard.number:05d}"
    return name if tag is None else f"{tag}-{name}"


def encoder_fingerprint(config: RetrieverConfig) -> str:
    """Changes when the weights or any encoding setting changes (device excluded). A checkpoint
    published in a store (a trained FLIPR) is named by its artifact's fingerprint, not by where
    it lies, so that a store copied or moved elsewhere reuses what it made with it; any other
    checkpoint or backbone by its path, files, sizes and modification times."""
    return _published_encoder_fingerprint(config) or _located_encoder_fingerprint(config)


def encoder_fingerprints(config: RetrieverConfig) -> list[str]:
    """:func:`encoder_fingerprint`, then the fingerprint that stores made before it recorded for
    the same encoder (a published checkpoint named by its path): steps looked up by either are
    reused, so an existing store does not rebuild its trained indexes once."""
    located = _located_encoder_fingerprint(config)
    return list(dict.fromkeys([_published_encoder_fingerprint(config) or located, located]))


def _published_encoder_fingerprint(config: RetrieverConfig) -> str | None:
    published = published_manifest(Path(config.checkpoint)) if config.checkpoint else None
    if published is None:
        return None
    weights = f"{published.name} {published.producer} {published.fingerprint}"
    return fingerprint(weights=weights, config=config.model_dump(mode="json", exclude={"device", "checkpoint"}))


def _located_encoder_fingerprint(config: RetrieverConfig) -> str:
    source = Path(config.checkpoint) if config.checkpoint else Path(config.resolved_backbone())
    weights = file_fingerprint(source) if source.exists() else str(source)
    return fingerprint(weights=weights, config=config.model_dump(mode="json", exclude={"device"}))


def texts_of(table) -> list[str]:
    """``title | text`` of every row of a passage_texts table, in its order."""
    return [passage_text(t, x) for t, x in zip(table.column("title").to_pylist(), table.column("text").to_pylist(), strict=True)]


def _codec_placement(flipr: Flipr) -> dict:
    """Where k-means and nearest-centroid search run: faiss-gpu when the encoder is on a GPU and
    faiss-gpu works there, torch on that GPU when it does not, faiss on the CPU otherwise."""
    if flipr.device.type != "cuda":
        return {"use_gpu": False, "device": None}
    return {"use_gpu": True, "device": None} if faiss_gpu_available() else {"use_gpu": False, "device": flipr.device}


def waiting_for(what: str):
    return lambda: run_logger().info("another run is making %s with the same inputs: waiting to reuse it", what)


@task(name="plan-shards")
def plan_index_shards(store_root: str, passages: ArtifactRef, config: IndexConfig) -> list[ShardPlan]:
    """Split the corpus into shards of ``index.shard_passages`` passages by pid order."""
    return plan_shards(ArtifactStore(store_root).passage_ids(passages), config.shard_passages)


@task(name="train-codec", tags=[GPU_TAG])
def train_index_codec(
    store_root: str,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    retriever: RetrieverConfig,
    config: IndexConfig,
    run_id: str,
    force: bool = False,
    tag: str | None = None,
) -> ArtifactRef:
    """Encode a seeded sample of passages; k-means centroids (faiss) and the residual PQ."""
    logger, store = run_logger(), ArtifactStore(store_root)
    params = codec_params(config)
    fps = [fingerprint(step="flipr_codec", passages=passages.fingerprint, encoder=e, params=params, version=FLIPR_CODEC.version) for e in encoder_fingerprints(retriever)]
    fp = fps[0]
    with store.making("flipr_codec", index_producer(tag), fp, waiting_for("the codec")):
        if not force and (reused := store.find_any("flipr_codec", index_producer(tag), fps)):
            logger.info("codec unchanged: reusing run %s", reused.manifest.run_id)
            return reused
        pids = store.passage_ids(passages)
        n_sample = min(len(pids), config.sample_passages or codec_sample_size(len(pids)))
        sample = np.sort(np.random.default_rng(config.seed).choice(pids, n_sample, replace=False))
        texts = texts_of(store.passage_texts(passages, sentences, pids=sample))
        flipr = Flipr.load(retriever)
        started = time.perf_counter()
        with Progress(len(texts), "codec: encode sample", unit="passage") as progress:
            codec = train_codec(flipr, texts, len(pids), config, on_batch=progress.update, **_codec_placement(flipr))
        meta = dict(run_id=run_id, producer=index_producer(tag), fingerprint=fp, inputs={"passages": passages.fingerprint}, params=params, flow_run=flow_run_info())
        with store.file_writer("flipr_codec", **meta) as writer:
            codec.save(writer.dir)
            np.save(writer.dir / CODEC_SAMPLE_FILE, sample)
            writer.rows = codec.n_centroids
            writer.stats = {
                "sample_passages": n_sample,
                "n_centroids": codec.n_centroids,
                "kind": codec.kind,
                "bytes_per_token": codec.bytes_per_token,
                "seconds": round(time.perf_counter() - started, 2),
            }
        logger.info("codec: %s", readable(writer.stats))
        return writer.ref


@task(name="encode-shard", task_run_name="encode-shard · {shard.number}", tags=[GPU_TAG])
def encode_index_shard(
    store_root: str,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    codec_ref: ArtifactRef,
    shard: ShardPlan,
    retriever: RetrieverConfig,
    config: IndexConfig,
    run_id: str,
    force: bool = False,
    tag: str | None = None,
) -> ArtifactRef:
    """Encode one shard's passages (length-sorted batches) and compress their tokens."""
    logger, store = run_logger(), ArtifactStore(store_root)
    producer = shard_producer(tag, shard)
    params = {"shard": shard.number, "lo": shard.lo, "hi": shard.hi, "keep_fp16": config.keep_fp16}
    if shard.is_delta:  # the same pids may hold other texts in another corpus version
        params |= {"pids": fingerprint(pids=list(shard.pids)), "passages": passages.fingerprint}
    fp = fingerprint(step="flipr_shard", codec=codec_ref.fingerprint, params=params, version=FLIPR_SHARD.version)
    with store.making("flipr_shard", producer, fp, waiting_for(f"shard {shard.number}")):
        if not force and (reused := store.find("flipr_shard", producer, fp)):
            logger.info("shard %d already encoded in run %s: skipping", shard.number, reused.manifest.run_id)
            return reused
        if shard.is_delta:
            table = store.passage_texts(passages, sentences, pids=np.array(shard.pids, dtype=np.int64))
        else:
            table = store.passage_texts(passages, sentences, pid_range=(shard.lo, shard.hi))
        if table.num_rows != shard.n_passages:
            raise RuntimeError(f"shard {shard.number}: expected {shard.n_passages} passages, the corpus has {table.num_rows}")
        flipr = Flipr.load(retriever)
        codec = ResidualCodec.load(codec_ref.path, **_codec_placement(flipr))
        started = time.perf_counter()
        with Progress(table.num_rows, f"encode shard {shard.number}", unit="passage") as progress:
            sample = codec_ref.path / CODEC_SAMPLE_FILE
            codec_sample = np.load(sample) if sample.exists() and not shard.is_delta else None  # a delta's texts are all new
            encoded = encode_shard(flipr, codec, table.column("pid").to_numpy(), texts_of(table), config, progress.update, codec_sample)
        seconds = time.perf_counter() - started
        meta = dict(run_id=run_id, producer=producer, fingerprint=fp, inputs={"codec": codec_ref.fingerprint}, params=params, flow_run=flow_run_info())
        with store.file_writer("flipr_shard", **meta) as writer:
            write_shard(writer.dir, encoded.pids, encoded.doclens, encoded.codes, encoded.payload, encoded.fp16)
            writer.rows = len(encoded.pids)
            writer.stats = {
                "n_tokens": encoded.n_tokens,
                "seconds": round(seconds, 2),
                "passages_per_second": round(len(encoded.pids) / max(seconds, 1e-9), 1),
                "device": str(flipr.device),
                "reconstruction_error": None if encoded.reconstruction_error is None else round(encoded.reconstruction_error, 6),
            }
        logger.info("shard %d: %d passages, %d tokens, %.1f passages/s", shard.number, writer.rows, encoded.n_tokens, writer.stats["passages_per_second"])
        return writer.ref


@task(name="build-index")
def build_flipr_index(
    store_root: str,
    passages: ArtifactRef,
    codec_ref: ArtifactRef,
    shards: list[ArtifactRef],
    retriever: RetrieverConfig,
    config: IndexConfig,
    run_id: str,
    force: bool = False,
    tag: str | None = None,
) -> dict[str, ArtifactRef]:
    """Merge shards: inverted lists over all tokens, the index manifest, and ``index_passages``."""
    logger, store = run_logger(), ArtifactStore(store_root)
    fp = fingerprint(step="flipr_index", shards=[s.fingerprint for s in shards], version=(FLIPR_INDEX.version, INDEX_PASSAGES.version))
    with store.making("flipr_index", index_producer(tag), fp, waiting_for("the index")):
        if not force and (reused := store.find_outputs(["flipr_index", "index_passages"], index_producer(tag), fp)):
            logger.info("index unchanged: reusing run %s", reused["flipr_index"].manifest.run_id)
            return reused
        codec = ResidualCodec.load(codec_ref.path)
        doclens = [np.load(s.path / "doclens.npy") for s in shards]
        ivf_offsets, ivf_docs = merge_shards([np.load(s.path / "codes.npy") for s in shards], doclens, codec.n_centroids)
        n_passages = sum(len(d) for d in doclens)
        rows = pa.table(
            {
                "pid": np.concatenate([np.load(s.path / "pids.npy") for s in shards]),
                "position": np.arange(n_passages, dtype=np.int64),
                "shard": np.repeat(np.arange(len(shards), dtype=np.int32), [len(d) for d in doclens]),
                "n_tokens": np.concatenate(doclens),
            }
        )
        lineage = {"codec_passages": n_passages, "added_since_codec": 0, "codec_error": shards_error(shards)}
        meta = index_meta(run_id, tag, fp, codec_ref, shards, retriever, config, n_passages)
        return publish_index(store, meta, passages, codec_ref, shards, (ivf_offsets, ivf_docs, np.zeros(0, dtype=np.int64)), rows, retriever, lineage)


def codec_params(config: IndexConfig) -> dict:
    """The settings a codec is trained with: an index can be updated only with the same ones."""
    return config.model_dump(mode="json", include={"codec", "pq_subvectors", "n_centroids", "kmeans_iterations", "sample_passages", "seed"})


def shards_error(shards: list[ArtifactRef]) -> float | None:
    """Token-weighted mean reconstruction error of the shards that measured one (None if none did)."""
    errors = [(s.manifest.stats["reconstruction_error"], s.manifest.stats["n_tokens"]) for s in shards if s.manifest.stats.get("reconstruction_error") is not None]
    if not errors:
        return None
    return round(sum(e * n for e, n in errors) / max(sum(n for _, n in errors), 1), 6)


def index_meta(run_id: str, tag: str | None, fp: str, codec_ref: ArtifactRef, shards: list[ArtifactRef], retriever: RetrieverConfig, config: IndexConfig, n_positions: int, **inputs: str) -> dict:
    """Manifest fields shared by an index and its ``index_passages``."""
    return dict(
        run_id=run_id,
        producer=index_producer(tag),
        fingerprint=fp,
        inputs={"codec": codec_ref.fingerprint, **inputs, **{s.manifest.producer: s.fingerprint for s in shards}},
        params={
            "retriever": retriever.model_dump(mode="json"),
            "encoder_fingerprint": encoder_fingerprint(retriever),
            "codec": codec_params(config),
            "n_positions": n_positions,
        },
        flow_run=flow_run_info(),
    )


def publish_index(
    store: ArtifactStore,
    meta: dict,
    passages: ArtifactRef,
    codec_ref: ArtifactRef,
    shards: list[ArtifactRef],
    lists: tuple[np.ndarray, np.ndarray, np.ndarray],
    rows: pa.Table,
    retriever: RetrieverConfig,
    lineage: dict,
) -> dict[str, ArtifactRef]:
    """Write an index (codec copy, inverted lists, dead positions) over ``shards`` and its
    ``index_passages`` (``rows``: the live passages), with its statistics."""
    ivf_offsets, ivf_docs, dead = lists
    codec = ResidualCodec.load(codec_ref.path)
    n_positions = sum(s.rows for s in shards)
    n_tokens, n_live = sum(int(s.manifest.stats["n_tokens"]) for s in shards), rows.num_rows
    fp16_stored = all((s.path / FP16_FILE).exists() for s in shards)
    with store.file_writer("flipr_index", **meta) as writer:
        for name in codec_ref.manifest.files:
            if name != CODEC_SAMPLE_FILE:
                shutil.copy2(codec_ref.path / name, writer.dir / name)
        np.save(writer.dir / IVF_OFFSETS_FILE, ivf_offsets)
        np.save(writer.dir / IVF_DOCS_FILE, ivf_docs)
        if len(dead):
            np.save(writer.dir / DEAD_POSITIONS_FILE, dead)
        writer.rows = n_live
        writer.stats = {
            "passages_run": passages.manifest.run_id,
            "model": str(retriever.checkpoint) if retriever.checkpoint else retriever.resolved_backbone(),
            "dim": retriever.dim,
            "codec": codec.kind,
            "n_centroids": codec.n_centroids,
            "n_passages": n_live,
            "n_positions": n_positions,
            "dead_positions": int(len(dead)),
            "n_tokens": n_tokens,
            "bytes_per_token": codec.bytes_per_token,
            "bytes_per_passage": round(codec.bytes_per_token * n_tokens / max(n_positions, 1), 1),
            "fp16_bytes_per_token": 2 * retriever.dim if fp16_stored else None,
            "ivf_postings": int(len(ivf_docs)),
            **lineage,
            "shards": [
                {"run_id": s.manifest.run_id, "producer": s.manifest.producer, "passages": s.rows, "tokens": s.manifest.stats["n_tokens"]}
                for s in shards
            ],
        }
    with store.writer("index_passages", **meta) as table_writer:
        table_writer.write(rows)
    stats = writer.stats
    publish_table(
        key="flipr-index",
        table=[{"metric": k, "value": readable(v)} for k, v in stats.items() if k != "shards"],
        description=f"FLIPR index of run {meta['run_id']}: {n_live:,} passages, {n_tokens:,} tokens in {len(shards)} shard(s).",
    )
    run_logger().info("index: %d passages (%d dead), %d tokens, %s bytes/token", n_live, len(dead), n_tokens, stats["bytes_per_token"])
    return {"flipr_index": writer.ref, "index_passages": table_writer.ref}
