"""The end-to-end pipeline. Today: corpus → claims → index → label rounds and FLIPR training;
the condensers, the reader and evaluation join here as they are built."""

from __future__ import annotations

from prefect import flow

from baleen_core.config import BaleenConfig
from baleen_core.runtime import baleen_home
from baleen_flows.index import index_flow
from baleen_flows.ingest import ingest_flow
from baleen_flows.training import training_flow
from baleen_storage import ArtifactRef, new_run_id
from baleen_tasks.demo import generate_demo_world


@flow(name="pipeline", flow_run_name="pipeline · {dataset_dir}", log_prints=True)
def pipeline_flow(dataset_dir: str, config_path: str | None = None, force: bool = False) -> dict[str, ArtifactRef]:
    """Run every stage on one dataset directory (hover-mini layout)."""
    run_id = new_run_id()
    ingested = ingest_flow(dataset_dir, config_path, force, run_id)
    passages_run = ingested["corpus/passages"].manifest.run_id
    indexed = index_flow(config_path, passages_run, run_id, force)
    trained = training_flow(
        config_path, run_id, force, ingested["claims/claims"].manifest.run_id, passages_run, indexed["flipr_index"].manifest.run_id
    )
    return {**ingested, **{f"index/{k}": v for k, v in indexed.items()}, **{f"training/{k}": v for k, v in trained.items()}}


@flow(name="demo", flow_run_name="demo", log_prints=True)
def demo_flow(config_path: str | None = None, data_dir: str | None = None, force: bool = False) -> dict[str, ArtifactRef]:
    """Generate the embedded demo world, then run the pipeline on it."""
    config = BaleenConfig.load(config_path)
    dataset_dir = generate_demo_world(data_dir or str(baleen_home() / "demo-data"), config.demo)
    return pipeline_flow(dataset_dir, config_path, force)
