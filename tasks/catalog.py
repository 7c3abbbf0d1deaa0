"""Refresh the DuckDB catalog after a flow has published artifacts, and sweep what dead runs left
in ``tmp/`` (every flow ends here, so debris never outlives the next run)."""

from __future__ import annotations

from prefect import task

from baleen_storage import ArtifactStore
from baleen_storage.catalog import build_catalog
from baleen_storage.integrity import Damage
from baleen_tasks.policies import retry_on_transient_io
from baleen_tasks.reporting import run_logger


@task(name="refresh-catalog", retries=2, retry_delay_seconds=2, retry_condition_fn=retry_on_transient_io)
def refresh_catalog(store_root: str) -> str:
    """Rebuild the catalog; a damaged file is left out of the SQL views with a warning that
    names it and its repair, and fails no flow that did not read it."""
    store, logger = ArtifactStore(store_root), run_logger()
    if swept := store.sweep_tmp():
        logger.info("removed %d tmp/ entries left by runs that died: %s", len(swept), ", ".join(swept[:5]) + (" …" if len(swept) > 5 else ""))
    left_out: list[Damage] = []
    path = build_catalog(store, left_out)
    for damage in left_out:
        logger.warning("left out of the SQL views: %s", damage.explain())
    return str(path)
