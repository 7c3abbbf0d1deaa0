"""Refresh the DuckDB catalog after a flow has published artifacts."""

from __future__ import annotations

from prefect import task

from baleen_storage import ArtifactStore
from baleen_storage.catalog import build_catalog


@task(name="refresh-catalog", retries=2, retry_delay_seconds=2)
def refresh_catalog(store_root: str) -> str:
    return str(build_catalog(ArtifactStore(store_root)))
