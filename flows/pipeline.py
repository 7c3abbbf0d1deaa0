"""The end-to-end pipeline: corpus → claims → index → label rounds, FLIPR, condensers, reader →
HoVer evaluation of every system, with its report."""

from __future__ import annotations

from pathlib import Path

import yaml
from prefect import flow

from baleen_core.config import BaleenConfig, demo_preset
from baleen_core.runtime import baleen_home
from baleen_flows.config_check import config_checked
from baleen_flows.evaluation import evaluation_flow
from baleen_flows.index import index_flow
from baleen_flows.ingest import ingest_flow
from baleen_flows.run_names import on_dataset
from baleen_flows.training import training_flow
from baleen_storage import ArtifactRef, new_run_id
from baleen_tasks.demo import generate_demo_world


@flow(name="pipeline", flow_run_name=on_dataset("pipeline"), log_prints=True)
@config_checked
def pipeline_flow(dataset_dir: str, config_path: str | None = None, force: bool = False) -> dict[str, ArtifactRef]:
    """Run every stage on one dataset directory (hover-mini layout)."""
    run_id = new_run_id()
    ingested = ingest_flow(dataset_dir, config_path, force, run_id)
    passages_run = ingested["corpus/passages"].manifest.run_id
    indexed = index_flow(config_path, passages_run, run_id, force)
    claims_run = ingested["claims/claims"].manifest.run_id
    trained = training_flow(config_path, run_id, force, claims_run, passages_run, indexed["flipr_index"].manifest.run_id)
    models = {"untrained_index": indexed["flipr_index"], **{k: trained[k] for k in ("index", "colbert_index", "stage1", "stage2", "reader") if k in trained}}
    evaluated = evaluation_flow(config_path, run_id, force, claims_run, passages_run, models)
    return {
        **ingested,
        **{f"index/{k}": v for k, v in indexed.items()},
        **{f"training/{k}": v for k, v in trained.items()},
        **{f"evaluation/{k}": v for k, v in evaluated.items()},
    }


@flow(name="demo", flow_run_name="demo", log_prints=True)
@config_checked
def demo_flow(config_path: str | None = None, data_dir: str | None = None, force: bool = False) -> dict[str, ArtifactRef]:
    """Generate the embedded demo world, then run the pipeline on it."""
    data_dir = data_dir or str(baleen_home() / "demo-data")
    if config_path is None:  # small training budgets (baleen_core.config.demo_preset), written where the user can read them
        config_path = str(write_config(demo_preset(), Path(data_dir) / "demo-config.yaml"))
    config = BaleenConfig.load(config_path)
    dataset_dir = generate_demo_world(data_dir, config.demo)
    return pipeline_flow(dataset_dir, config_path, force)


def write_config(config: BaleenConfig, path: Path) -> Path:
    """The settings that differ from the defaults, as YAML (the store root stays $BALEEN_STORE)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_defaults=True, exclude={"store_root"}), sort_keys=False))
    return path
