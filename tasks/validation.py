"""The validation gate as a Prefect task (deterministic: never retried)."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact

from baleen_core.config import GateConfig
from baleen_storage import ArtifactRef, ArtifactStore
from baleen_tasks.gates import GateFailed, run_gate
from baleen_tasks.reporting import run_logger


@task(name="validate", task_run_name="validate · {artifact}", retries=0)
def validate_artifact(store_root: str, artifact: str, refs: dict[str, ArtifactRef], gates: GateConfig | None = None) -> dict:
    """Run ``artifact``'s suite and the limits of ``gates`` (default: the defaults); a failure
    fails the flow with the summary (and stores the result)."""
    logger = run_logger()
    try:
        gate = run_gate(ArtifactStore(store_root), artifact, refs, gates)
    except GateFailed as failed:
        create_markdown_artifact(markdown=f"### Gate failed\n```\n{failed}\n```", description=f"{artifact} gate")
        raise
    logger.info(gate.summary_text())
    return {"artifact": artifact, "success": gate.success, "evaluated": gate.evaluated}
