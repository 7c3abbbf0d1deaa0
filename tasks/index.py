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
from baleen_core.retrieval.index import IVF_DOCS_FILE, IVF_OFFSETS_FILE, write_shard
from baleen_schemas import FLIPR_CODEC, FLIPR_INDEX, FLIPR_SHARD, INDEX_PASSAGES
from baleen_storage import ArtifactRef, ArtifactStore, file_fingerprint, fingerprint
from baleen_storage.indexes import PRODUCER
from baleen_tasks.policies import GPU_TAG
from baleen_tasks.reporting import Progress, flow_run_info, publish_table, readable, run_logger


def index_producer(tag: str | None) -> str:
    """Producer of an index's codec/index artifacts: ``index``, or ``index-<tag>`` for a second
    index in the same run (e.g. ``index-flipr-r0`` built with a trained checkpoint)."""
    return PRODUCER if tag is None else f"{PRODUCER}-{tag}"


def shard_producer(tag: str | None, number: int) -> str:
    return f"shard-{number:05d}" if tag is None else f"{tag}-shard-{number:05d}"


def encoder_fingerprint(config: RetrieverConfig) -> str:
    """Changes when the weights or any encoding setting changes (device excluded)."""
    source = Path(config.checkpoint) if config.checkpoint else Path(config.resolved_backbone())
    weights = file_fingerprint(source) if source.exists() else str(source)
    return fingerprint(weights=weights, config=config.model_dump(mode="json", exclude={"device"}))


def _texts(table) -> list[str]:
    return [passage_text(t, x) for t, x in zip(table.column("title").to_pylist(), table.column("text").to_pylist(), strict=True)]


def _codec_placement(flipr: Flipr) -> dict:
    """Where k-means and nearest-centroid search run: faiss-gpu when the encoder is on a GPU and
    faiss-gpu works there, torch on that GPU when it does not, faiss on the CPU otherwise."""
    if flipr.device.type != "cuda":
        return {"use_gpu": False, "device": None}
    return {"use_gpu": True, "device": None} if faiss_gpu_available() else {"use_gpu": False, "device": flipr.device}


def _waiting_for(what: str):
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
    params = config.model_dump(mode="json", include={"codec", "pq_subvectors", "n_centroids", "kmeans_iterations", "sample_passages", "seed"})
    fp = fingerprint(step="flipr_codec", passages=passages.fingerprint, encoder=encoder_fingerprint(retriever), params=params, version=FLIPR_CODEC.version)
    with store.making("flipr_codec", index_producer(tag), fp, _waiting_for("the codec")):
        if not force and (reused := store.find("flipr_codec", index_producer(tag), fp)):
            logger.info("codec unchanged: reusing run %s", reused.manifest.run_id)
            return reused
        pids = store.passage_ids(passages)
        n_sample = min(len(pids), config.sample_passages or codec_sample_size(len(pids)))
        sample = np.sort(np.random.default_rng(config.seed).choice(pids, n_sample, replace=False))
        texts = _texts(store.passage_texts(passages, sentences, pids=sample))
        flipr = Flipr.load(retriever)
        started = time.perf_counter()
        with Progress(len(texts), "codec: encode sample", unit="passage") as progress:
            codec = train_codec(flipr, texts, len(pids), config, on_batch=progress.update, **_codec_placement(flipr))
        meta = dict(run_id=run_id, producer=index_producer(tag), fingerprint=fp, inputs={"passages": passages.fingerprint}, params=params, flow_run=flow_run_info())
        with store.file_writer("flipr_codec", **meta) as writer:
            codec.save(writer.dir)
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
    producer = shard_producer(tag, shard.number)
    params = {"shard": shard.number, "lo": shard.lo, "hi": shard.hi, "keep_fp16": config.keep_fp16}
    fp = fingerprint(step="flipr_shard", codec=codec_ref.fingerprint, params=params, version=FLIPR_SHARD.version)
    with store.making("flipr_shard", producer, fp, _waiting_for(f"shard {shard.number}")):
        if not force and (reused := store.find("flipr_shard", producer, fp)):
            logger.info("shard %d already encoded in run %s: skipping", shard.number, reused.manifest.run_id)
            return reused
        table = store.passage_texts(passages, sentences, pid_range=(shard.lo, shard.hi))
        if table.num_rows != shard.n_passages:
            raise RuntimeError(f"shard {shard.number}: expected {shard.n_passages} passages, the corpus has {table.num_rows}")
        flipr = Flipr.load(retriever)
        codec = ResidualCodec.load(codec_ref.path, **_codec_placement(flipr))
        started = time.perf_counter()
        with Progress(table.num_rows, f"encode shard {shard.number}", unit="passage") as progress:
            encoded = encode_shard(flipr, codec, table.column("pid").to_numpy(), _texts(table), config, on_batch=progress.update)
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
    run_id: str,
    force: bool = False,
    tag: str | None = None,
) -> dict[str, ArtifactRef]:
    """Merge shards: inverted lists over all tokens, the index manifest, and ``index_passages``."""
    logger, store = run_logger(), ArtifactStore(store_root)
    fp = fingerprint(step="flipr_index", shards=[s.fingerprint for s in shards], version=(FLIPR_INDEX.version, INDEX_PASSAGES.version))
    with store.making("flipr_index", index_producer(tag), fp, _waiting_for("the index")):
        if not force and (reused := store.find_outputs(["flipr_index", "index_passages"], index_producer(tag), fp)):
            logger.info("index unchanged: reusing run %s", reused["flipr_index"].manifest.run_id)
            return reused
        codec = ResidualCodec.load(codec_ref.path)
        doclens = [np.load(s.path / "doclens.npy") for s in shards]
        codes = [np.load(s.path / "codes.npy") for s in shards]
        pids = [np.load(s.path / "pids.npy") for s in shards]
        ivf_offsets, ivf_docs = merge_shards(codes, doclens, codec.n_centroids)
        n_passages, n_tokens = sum(len(d) for d in doclens), int(sum(int(d.sum()) for d in doclens))
        fp16_stored = all((s.path / "fp16.npy").exists() for s in shards)
        meta = dict(
            run_id=run_id,
            producer=index_producer(tag),
            fingerprint=fp,
            inputs={"codec": codec_ref.fingerprint, **{s.manifest.producer: s.fingerprint for s in shards}},
            params={"retriever": retriever.model_dump(mode="json"), "encoder_fingerprint": encoder_fingerprint(retriever)},
            flow_run=flow_run_info(),
        )
        with store.file_writer("flipr_index", **meta) as writer:
            for name in codec_ref.manifest.files:
                shutil.copy2(codec_ref.path / name, writer.dir / name)
            np.save(writer.dir / IVF_OFFSETS_FILE, ivf_offsets)
            np.save(writer.dir / IVF_DOCS_FILE, ivf_docs)
            writer.rows = n_passages
            writer.stats = {
                "passages_run": passages.manifest.run_id,
                "model": str(retriever.checkpoint) if retriever.checkpoint else retriever.resolved_backbone(),
                "dim": retriever.dim,
                "codec": codec.kind,
                "n_centroids": codec.n_centroids,
                "n_passages": n_passages,
                "n_tokens": n_tokens,
                "bytes_per_token": codec.bytes_per_token,
                "bytes_per_passage": round(codec.bytes_per_token * n_tokens / max(n_passages, 1), 1),
                "fp16_bytes_per_token": 2 * retriever.dim if fp16_stored else None,
                "ivf_postings": int(len(ivf_docs)),
                "shards": [
                    {"run_id": s.manifest.run_id, "producer": s.manifest.producer, "passages": s.rows, "tokens": s.manifest.stats["n_tokens"]}
                    for s in shards
                ],
            }
        with store.writer("index_passages", **meta) as table_writer:
            table_writer.write(
                pa.table(
                    {
                        "pid": np.concatenate(pids),
                        "position": np.arange(n_passages, dtype=np.int64),
                        "shard": np.repeat(np.arange(len(shards), dtype=np.int32), [len(d) for d in doclens]),
                        "n_tokens": np.concatenate(doclens),
                    }
                )
            )
        stats = writer.stats
        publish_table(
            key="flipr-index",
            table=[{"metric": k, "value": readable(v)} for k, v in stats.items() if k != "shards"],
            description=f"FLIPR index of run {run_id}: {n_passages:,} passages, {n_tokens:,} tokens in {len(shards)} shard(s).",
        )
        logger.info("index: %d passages, %d tokens, %s bytes/token", n_passages, n_tokens, stats["bytes_per_token"])
        return {"flipr_index": writer.ref, "index_passages": table_writer.ref}

