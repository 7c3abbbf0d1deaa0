"""Claims ingest as a Prefect task: HoVer JSON → ``claims``, ``gold_facts``, ``rejects``."""

from __future__ import annotations

from prefect import task

from baleen_core.claims import read_hover_claims, resolve_claims
from baleen_core.config import DatasetConfig
from baleen_schemas import CLAIMS, GOLD_FACTS, REJECTS
from baleen_storage import ArtifactRef, ArtifactStore, file_fingerprint, fingerprint
from baleen_tasks.policies import retry_on_transient_io
from baleen_tasks.reporting import flow_run_info, publish_table, readable, run_logger

PRODUCER = "claims"
OUTPUTS = ["claims", "gold_facts", "rejects"]


@task(name="ingest-claims", task_run_name="ingest-claims · {dataset.name}", tags=["io"], retries=2, retry_delay_seconds=[2, 10], retry_condition_fn=retry_on_transient_io)
def ingest_claims(
    store_root: str, dataset: DatasetConfig, passages: ArtifactRef, run_id: str, force: bool = False
) -> dict[str, ArtifactRef]:
    """Validate HoVer claims and resolve their facts against ``passages``."""
    logger = run_logger()
    if not dataset.claims:
        raise FileNotFoundError(f"dataset {dataset.name!r} lists no claims files (expected claims_<split>.json)")
    store = ArtifactStore(store_root)
    inputs = {f"claims:{split}": file_fingerprint(path) for split, path in sorted(dataset.claims.items())}
    inputs["passages"] = passages.fingerprint
    versions = {s.name: s.version for s in (CLAIMS, GOLD_FACTS, REJECTS)}
    fp = fingerprint(step=PRODUCER, inputs=inputs, schemas=versions)
    if not force and (reused := store.find_outputs(OUTPUTS, PRODUCER, fp)):
        logger.info("claims unchanged (fingerprint %s): reusing run %s", fp, reused["claims"].manifest.run_id)
        return reused

    seen: set[str] = set()
    records = [r for split, path in sorted(dataset.claims.items()) for r in read_hover_claims(path, split, seen)]
    with store.reading(passages):
        resolved = resolve_claims(records, passages.files)
    if not resolved.stats.reconciles():
        raise RuntimeError(f"claims counts do not reconcile: {resolved.stats.as_dict()}")
    meta = dict(run_id=run_id, producer=PRODUCER, fingerprint=fp, inputs=inputs, params={}, flow_run=flow_run_info())
    refs = {}
    for name, table in (("claims", resolved.claims), ("gold_facts", resolved.gold_facts), ("rejects", resolved.rejects)):
        with store.writer(name, **meta) as writer:
            writer.write(table)
        refs[name] = writer.ref
    stats = resolved.stats
    logger.info("claims: %s", readable(stats.as_dict()))
    publish_table(
        key="claims-ingest",
        table=[{"what": k, "count": v} for k, v in stats.as_dict().items() if not isinstance(v, dict)]
        + [{"what": f"rejected {readable(k)}", "count": v} for k, v in stats.rejects.items()],
        description=f"Claims of {dataset.name} (run {run_id}); flagged claims keep their row, unresolved facts go to rejects.",
    )
    return refs
