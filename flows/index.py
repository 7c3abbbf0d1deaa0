"""The index flow: corpus Parquet → FLIPR index (codec, encoded shards, inverted lists)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from baleen_core.config import BaleenConfig
from baleen_storage import ArtifactRef, ArtifactStore, new_run_id
from baleen_tasks.catalog import refresh_catalog
from baleen_tasks.index import build_flipr_index, encode_index_shard, plan_index_shards, train_index_codec
from baleen_tasks.validation import validate_artifact


@flow(name="index", flow_run_name="index · {passages_run}", log_prints=True)
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

    Shards already encoded by an earlier, interrupted run with the same settings are reused.
    """
    config = BaleenConfig.load(config_path)
    retriever = config.retriever.model_copy(update={"checkpoint": Path(checkpoint)}) if checkpoint else config.retriever
    store = ArtifactStore(config.store_root)
    root, run_id = str(store.root), run_id or new_run_id()
    passages = store.get("passages", passages_run, "corpus") if passages_run else store.latest("passages", "corpus")
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")

    plan = plan_index_shards(root, passages, config.index)
    codec = train_index_codec(root, passages, sentences, retriever, config.index, run_id, force, tag)
    shards = [
        encode_index_shard(root, passages, sentences, codec, shard, retriever, config.index, run_id, force, tag)
        for shard in plan
    ]
    refs = build_flipr_index(root, passages, codec, shards, retriever, run_id, force, tag)
    validate_artifact(root, "index_passages", {"passages": passages, "index_passages": refs["index_passages"]})
    refresh_catalog(root)
    return refs
