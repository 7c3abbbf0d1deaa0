"""The refresh flow: a dataset directory whose files changed → ingest what changed → every index
updated in place (or rebuilt when due) → the systems re-evaluated on the new corpus version.

Scheduled in prefect.yaml. Idempotent: each stage reuses what its inputs already made, so a run
with nothing changed publishes nothing new.
"""

from __future__ import annotations

from prefect import flow, task

from baleen_core.config import BaleenConfig
from baleen_flows.config_check import config_checked
from baleen_flows.evaluation import evaluation_flow
from baleen_flows.index import index_flow
from baleen_flows.ingest import ingest_flow
from baleen_flows.run_names import on_dataset
from baleen_storage import ArtifactRef, ArtifactStore, StoreError
from baleen_storage.indexes import refreshable_indexes


@flow(name="refresh", flow_run_name=on_dataset("refresh"), log_prints=True)
@config_checked
def refresh_flow(dataset_dir: str, config_path: str | None = None) -> dict[str, ArtifactRef]:
    """Bring the store up to date with ``dataset_dir``; evaluates only when trained models exist."""
    config = BaleenConfig.load(config_path)
    ingested = ingest_flow(dataset_dir, config_path)
    passages_run, claims_run = ingested["corpus/passages"].manifest.run_id, ingested["claims/claims"].manifest.run_id
    refs = dict(ingested)
    for tag, checkpoint in indexes_to_refresh(str(config.store_root)):
        indexed = index_flow(config_path, passages_run, checkpoint=checkpoint, tag=tag)
        refs |= {f"index/{tag or 'untrained'}/{name}": ref for name, ref in indexed.items()}
    if has_trained_models(str(config.store_root)):
        refs |= {f"evaluation/{k}": v for k, v in evaluation_flow(config_path, claims_run=claims_run, passages_run=passages_run).items()}
    return refs


@task(name="indexes-to-refresh")
def indexes_to_refresh(store_root: str) -> list[tuple[str | None, str | None]]:
    return refreshable_indexes(ArtifactStore(store_root))


@task(name="has-trained-models")
def has_trained_models(store_root: str) -> bool:
    store = ArtifactStore(store_root)
    try:
        return all(store.latest(f"{kind}_checkpoint") for kind in ("flipr", "stage1", "stage2", "reader"))
    except StoreError:
        return False
