"""Refresh the DuckDB catalog after a flow has published artifacts, and sweep what dead runs left
in ``tmp/`` (every flow ends here, so debris never outlives the next run)."""

from __future__ import annotations

from prefect import task

from baleen_storage import ArtifactStore
from baleen_storage.catalog import build_catalog
from baleen_tasks.reporting import run_logger


@task(name="refresh-catalog", retries=2, retry_delay_seconds=2)
def refresh_catalog(store_root: str) -> str:
    store = ArtifactStore(store_root)
    if swept := store.sweep_tmp():
        run_logger().info("removed %d tmp/ entries left by runs that died: %s", len(swept), ", ".join(swept[:5]) + (" …" if len(swept) > 5 else ""))
    return str(build_catalog(store))
