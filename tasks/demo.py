"""Write the embedded demo world (a seeded generator) in the upstream formats."""

from __future__ import annotations

from pathlib import Path

from prefect import task

from baleen_core.config import DemoConfig
from baleen_core.demo_world import write_demo_world


@task(name="generate-demo-world", retries=0)
def generate_demo_world(out_dir: str, config: DemoConfig) -> str:
    """Deterministic for a config; skipped when the same world is already on disk."""
    return str(write_demo_world(Path(out_dir), config))
