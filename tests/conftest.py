"""Shared fixtures: a temporary store, tiny upstream files, hover-mini when present, and one
Prefect test server per session for flow tests."""

from __future__ import annotations

import bz2
import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("BALEEN_HOME", str(Path(__file__).resolve().parent.parent / ".baleen" / "test-home"))
from baleen_core.runtime import apply_runtime_defaults  # noqa: E402

apply_runtime_defaults()

HOVER_MINI = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks" / "hover-mini"


@pytest.fixture
def store(tmp_path):
    from baleen_storage import ArtifactStore

    return ArtifactStore(tmp_path / "store")


@pytest.fixture(scope="session")
def hover_mini() -> Path:
    if not (HOVER_MINI / "claims_dev.json").exists():
        pytest.skip(f"hover-mini not found at {HOVER_MINI}")
    return HOVER_MINI


def write_abstracts(root: Path, rows: list, name: str = "AA/wiki_00.bz2", raw_lines: list[bytes] | None = None) -> Path:
    """An abstracts tree with one bz2 file of ``rows`` (dicts) and then ``raw_lines`` verbatim."""
    path = root / "wiki" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows) + b"".join(raw_lines or [])
    path.write_bytes(bz2.compress(data))
    return root / "wiki"


@pytest.fixture(scope="session")
def prefect_server():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
