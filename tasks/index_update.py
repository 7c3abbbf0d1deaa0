"""Index updates as Prefect tasks: decide between reusing, updating and rebuilding an index when
the corpus changed, then merge the delta shards into a new version of the index.

The update encodes only the added and updated passages (the index flow's mapped encode tasks, as
delta shards) with the codec of the index it updates, and retires the positions of updated and
removed passages (see :mod:`baleen_core.retrieval.delta`). The new version lists the old shards
and the delta shards, so nothing already encoded is copied or encoded again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from prefect import task

from baleen_core.config import IndexConfig, RetrieverConfig
from baleen_core.retrieval import ShardPlan
from baleen_core.retrieval.delta import RebuildLimits, passage_changes, rebuild_reason, retired_positions, text_digests, update_lists
from baleen_core.retrieval.index import DEAD_POSITIONS_FILE, IVF_DOCS_FILE, IVF_OFFSETS_FILE, plan_delta_shards
from baleen_schemas import FLIPR_INDEX, INDEX_PASSAGES
from baleen_storage import ArtifactRef, ArtifactStore, StoreError, fingerprint, lineage
from baleen_storage.indexes import shard_refs
from baleen_tasks.index import codec_params, encoder_fingerprints, index_meta, index_producer, publish_index, shards_error, texts_of, waiting_for
from baleen_tasks.reporting import run_logger


@dataclass(frozen=True)
class IndexPlan:
    """What the index flow does with a corpus version: ``current`` (an index of it exists: reuse
    ``base``), ``update`` (encode ``shards``, retire ``retired``, on top of ``base``) or
    ``build`` (encode everything with a new codec); ``reason`` says why, for the run's log."""

    action: str
    reason: str
    base: ArtifactRef | None = None
    codec: ArtifactRef | None = None
    shards: list[ShardPlan] = field(default_factory=list)
    retired: list[int] = field(default_factory=list)
    changes: dict[str, int] = field(default_factory=dict)


def current_index(store_root: str, plan: IndexPlan) -> dict[str, ArtifactRef]:
    """The outputs of the index a ``current`` plan reuses."""
    base = plan.base
    return {"flipr_index": base, "index_passages": ArtifactStore(store_root).get("index_passages", base.manifest.run_id, base.manifest.producer)}


def _digests(store: ArtifactStore, passages: ArtifactRef) -> dict[int, bytes]:
    table = store.passage_texts(passages, store.get("sentences", passages.manifest.run_id, lineage.PASSAGES_PRODUCER))
    return text_digests(table.column("pid").to_pylist(), texts_of(table))


def _updatable(store: ArtifactStore, retriever: RetrieverConfig, config: IndexConfig, tag: str | None) -> list[ArtifactRef]:
    """Indexes of this producer made with the same encoder and codec settings, newest first."""
    encoders, codec = encoder_fingerprints(retriever), codec_params(config)
    refs = store.refs("flipr_index", index_producer(tag))
    same = [r for r in refs if r.manifest.params.get("encoder_fingerprint") in encoders and r.manifest.params.get("codec") == codec]
    return sorted(same, key=lambda r: r.manifest.created_at, reverse=True)


@task(name="plan-index")
def plan_index(
    store_root: str, passages: ArtifactRef, retriever: RetrieverConfig, config: IndexConfig, force: bool = False, tag: str | None = None
) -> IndexPlan:
    """Reuse, update or rebuild: see :class:`IndexPlan`. Logged with its reason."""
    store, logger = ArtifactStore(store_root), run_logger()
    plan = _plan(store, passages, retriever, config, force, tag)
    logger.info("index: %s (%s)", plan.action, plan.reason)
    return plan


def _plan(store: ArtifactStore, passages: ArtifactRef, retriever: RetrieverConfig, config: IndexConfig, force: bool, tag: str | None) -> IndexPlan:
    if force:
        return IndexPlan("build", "--force")
    candidates = _updatable(store, retriever, config, tag)
    if not candidates:
        return IndexPlan("build", "no index of this encoder and codec settings to update")
    for ref in candidates:
        if lineage.indexes(store, ref, passages):
            return IndexPlan("current", f"index run {ref.manifest.run_id} already indexes passages run {passages.manifest.run_id}", ref)
    base = candidates[0]
    if not config.incremental:
        return IndexPlan("build", "index.incremental is off")
    if due := base.manifest.stats.get("rebuild_due"):
        return IndexPlan("build", f"a rebuild is due: {due}")
    try:
        old = lineage.index_passages(store, base)
        codec = store.find("flipr_codec", index_producer(tag), base.manifest.inputs["codec"])
    except StoreError as err:
        return IndexPlan("build", f"index run {base.manifest.run_id} cannot be updated: {err}")
    if codec is None:
        return IndexPlan("build", f"the codec of index run {base.manifest.run_id} is no longer in the store")
    changes = passage_changes(_digests(store, old), _digests(store, passages))
    stats = base.manifest.stats
    added_since = stats.get("added_since_codec", 0) + len(changes.to_encode)
    if reason := _rebuild_due(config, stats.get("codec_passages", stats["n_passages"]), added_since, None, None):
        return IndexPlan("build", f"a rebuild is due: {reason}")
    counts = changes.counts()
    return IndexPlan(
        "update",
        f"updating index run {base.manifest.run_id}: " + ", ".join(f"{n:,} {what}" for what, n in counts.items()),
        base,
        codec,
        plan_delta_shards(changes.to_encode, config.shard_passages),
        changes.retired.tolist(),
        counts,
    )


@task(name="update-index")
def update_flipr_index(
    store_root: str,
    passages: ArtifactRef,
    plan: IndexPlan,
    delta_shards: list[ArtifactRef],
    retriever: RetrieverConfig,
    config: IndexConfig,
    run_id: str,
    tag: str | None = None,
) -> dict[str, ArtifactRef]:
    """A new version of ``plan.base``: its shards and the delta shards, merged inverted lists,
    the retired positions dead, and ``index_passages`` of the live passages."""
    logger, store = run_logger(), ArtifactStore(store_root)
    base = plan.base
    fp = fingerprint(
        step="flipr_index_update",
        base=base.fingerprint,
        passages=passages.fingerprint,
        shards=[s.fingerprint for s in delta_shards],
        retired=fingerprint(pids=plan.retired),
        version=(FLIPR_INDEX.version, INDEX_PASSAGES.version),
    )
    producer = index_producer(tag)
    with store.making("flipr_index", producer, fp, waiting_for("the index update")):
        if reused := store.find_outputs(["flipr_index", "index_passages"], producer, fp):
            logger.info("index update already made: reusing run %s", reused["flipr_index"].manifest.run_id)
            return reused
        base_shards = shard_refs(store, base)
        with store.reading(base, *base_shards, *delta_shards):
            live = store.read_table(store.get("index_passages", base.manifest.run_id, producer))
            base_dead = np.load(base.path / DEAD_POSITIONS_FILE) if (base.path / DEAD_POSITIONS_FILE).exists() else np.zeros(0, dtype=np.int64)
            n_base = sum(s.rows for s in base_shards)
            position_of_pid = dict(zip(live.column("pid").to_pylist(), live.column("position").to_pylist(), strict=True))
            retired = np.array(plan.retired, dtype=np.int64)
            lists = update_lists(
                np.load(base.path / IVF_OFFSETS_FILE),
                np.load(base.path / IVF_DOCS_FILE),
                n_base,
                base_dead,
                retired_positions(position_of_pid, retired),
                [np.load(s.path / "codes.npy") for s in delta_shards],
                [np.load(s.path / "doclens.npy") for s in delta_shards],
            )
            delta_rows = [
                pa.table(
                    {
                        "pid": np.load(s.path / "pids.npy"),
                        "position": np.zeros(s.rows, dtype=np.int64),
                        "shard": np.full(s.rows, len(base_shards) + k, dtype=np.int32),
                        "n_tokens": np.load(s.path / "doclens.npy"),
                    }
                )
                for k, s in enumerate(delta_shards)
            ]
        kept = live.filter(pc.invert(pc.is_in(live.column("pid"), pa.array(retired))))
        added = pa.concat_tables(delta_rows) if delta_rows else kept.schema.empty_table()
        added = added.set_column(1, "position", pa.array(np.arange(n_base, n_base + added.num_rows, dtype=np.int64)))
        rows = pa.concat_tables([kept, added.cast(kept.schema)]).sort_by("position")

        stats = base.manifest.stats
        delta_error, codec_error = shards_error(delta_shards), stats.get("codec_error")
        added_since = stats.get("added_since_codec", 0) + added.num_rows
        codec_passages = stats.get("codec_passages", stats["n_passages"])
        due = _rebuild_due(config, codec_passages, added_since, codec_error, delta_error)
        if due:
            logger.warning("index: the next refresh rebuilds it: %s", due)
        history = {
            "base_index": base.manifest.run_id,
            "changes": plan.changes,
            "codec_passages": codec_passages,
            "added_since_codec": added_since,
            "codec_error": codec_error,
            "delta_error": delta_error,
            "rebuild_due": due,
        }
        shards = base_shards + delta_shards
        meta = index_meta(run_id, tag, fp, plan.codec, shards, retriever, config, n_base + added.num_rows, base=base.fingerprint, passages=passages.fingerprint)
        return publish_index(store, meta, passages, plan.codec, shards, (lists.ivf_offsets, lists.ivf_docs, lists.dead_positions), rows, retriever, history)


def _rebuild_due(config: IndexConfig, codec_passages: int, added_since: int, codec_error: float | None, delta_error: float | None) -> str | None:
    return rebuild_reason(RebuildLimits(config.rebuild_added_share, config.rebuild_error_ratio), codec_passages, added_since, codec_error, delta_error)
