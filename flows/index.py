"""The index flow: corpus Parquet → FLIPR index (codec, encoded shards, inverted lists)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.futures import wait
from prefect.utilities.annotations import unmapped

from baleen_core.config import BaleenConfig, IndexConfig, RetrieverConfig
from baleen_core.retrieval import ShardPlan
from baleen_flows.config_check import config_checked
from baleen_flows.run_names import encode_shards_run_name, index_run_name
from baleen_storage import ArtifactRef, ArtifactStore, new_run_id
from baleen_tasks.catalog import refresh_catalog
from baleen_tasks.index import build_flipr_index, encode_index_shard, plan_index_shards, train_index_codec
from baleen_tasks.index_update import current_index, plan_index, update_flipr_index
from baleen_tasks.runners import task_runner
from baleen_tasks.validation import validate_artifact


@flow(name="index", flow_run_name=index_run_name, log_prints=True)
@config_checked
def index_flow(
    config_path: str | None = None,
    passages_run: str | None = None,
    run_id: str | None = None,
    force: bool = False,
    checkpoint: str | None = None,
    tag: str | None = None,
) -> dict[str, ArtifactRef]:
    """Encode and index a corpus (``passages_run``, default: the newest) with FLIPR: the
    configured encoder, or a trained ``checkpoint`` (then ``tag`` names the index, e.g. flipr-r0).

    When an index of an earlier version of the corpus exists (same encoder and codec settings),
    it is updated in place: only added and updated passages are encoded, removed and replaced
    ones are retired; a rebuild happens when ``index.rebuild_*`` say the codec no longer fits,
    with ``--force``, or with ``index.incremental: false``. Shards already encoded by an
    earlier, interrupted run with the same settings are reused.
    """
    config = BaleenConfig.load(config_path)
    retriever = config.retriever.model_copy(update={"checkpoint": Path(checkpoint)}) if checkpoint else config.retriever
    store = ArtifactStore(config.store_root)
    root, run_id = str(store.root), run_id or new_run_id()
    passages = store.get("passages", passages_run, "corpus") if passages_run else store.latest("passages", "corpus")
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")

    plan = plan_index(root, passages, retriever, config.index, force, tag)
    if plan.action == "current":
        refs = current_index(root, plan)
    elif plan.action == "update":
        # a delta of one shard (or none: deletions only) needs no subflow to spread it
        spread = spread_encoding(config) if len(plan.shards) > 1 else encode_inline
        delta_shards = spread(root, passages, sentences, plan.codec, plan.shards, retriever, config.index, run_id, force, tag)
        refs = update_flipr_index(root, passages, plan, delta_shards, retriever, config.index, run_id, tag)
    else:
        shard_plans = plan_index_shards(root, passages, config.index)
        codec = train_index_codec(root, passages, sentences, retriever, config.index, run_id, force, tag)
        shards = spread_encoding(config)(root, passages, sentences, codec, shard_plans, retriever, config.index, run_id, force, tag)
        refs = build_flipr_index(root, passages, codec, shards, retriever, config.index, run_id, force, tag)
    validate_artifact(root, "index_passages", {"passages": passages, "index_passages": refs["index_passages"]})
    refresh_catalog(root)
    return refs


def spread_encoding(config: BaleenConfig):
    """The encode-shards subflow on the task runner ``orchestration`` picks (made only when
    needed: building it costs about 0.06 s, a tenth of a deletion's index run)."""
    return encode_shards.with_options(task_runner=task_runner(config.orchestration))


def encode_inline(store_root: str, passages: ArtifactRef, sentences: ArtifactRef, codec: ArtifactRef, plan: list[ShardPlan], *args) -> list[ArtifactRef]:
    """The shards of ``plan`` encoded one after the other in the calling flow."""
    return [encode_index_shard(store_root, passages, sentences, codec, shard, *args) for shard in plan]


@flow(name="encode-shards", flow_run_name=encode_shards_run_name, log_prints=True)
def encode_shards(
    store_root: str,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    codec: ArtifactRef,
    plan: list[ShardPlan],
    retriever: RetrieverConfig,
    config: IndexConfig,
    run_id: str,
    force: bool = False,
    tag: str | None = None,
) -> list[ArtifactRef]:
    """One mapped task per shard, on the task runner ``orchestration`` picks (sequential, or a
    Dask cluster); the shards come back in plan order for the merge."""
    futures = encode_index_shard.map(
        unmapped(store_root), unmapped(passages), unmapped(sentences), unmapped(codec), plan,
        unmapped(retriever), unmapped(config), unmapped(run_id), unmapped(force), unmapped(tag),
    )
    wait(futures)
    return [future.result() for future in futures]
