"""Shared fixtures: a temporary store, hover-mini when present, and one
Prefect test server per session for flow tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("BALEEN_HOME", str(Path(__file__).resolve().parent.parent / ".baleen" / "test-home"))
from baleen_core.runtime import apply_runtime_defaults  # noqa: E402

apply_runtime_defaults()

HOVER_MINI = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks" / "hover-mini"


@pytest.fixture(autouse=True)
def _restore_store_env(monkeypatch):
    """`baleen --store` exports BALEEN_STORE for the rest of its process, which in tests is the
    rest of the session: put the variable back as it was after every test."""
    if "BALEEN_STORE" in os.environ:
        monkeypatch.setenv("BALEEN_STORE", os.environ["BALEEN_STORE"])
    else:
        monkeypatch.delenv("BALEEN_STORE", raising=False)


@pytest.fixture
def store(tmp_path):
    from baleen_storage import ArtifactStore

    return ArtifactStore(tmp_path / "store")


@pytest.fixture(scope="session")
def hover_mini() -> Path:
    if not (HOVER_MINI / "claims_dev.json").exists():
        pytest.skip(f"hover-mini not found at {HOVER_MINI}")
    return HOVER_MINI


@pytest.fixture(scope="session")
def prefect_server():
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    # the same startup budget as the CLI's (baleen_core.runtime), raised by exporting it on a busy
    # machine; and no heartbeats, as on the CLI's temporary server (each cost a flow run up to 1 s)
    with prefect_test_harness(server_startup_timeout=int(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120"))):
        with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield
