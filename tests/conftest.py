"""Shared fixtures: a temporary store, hover-mini when present, and one
Prefect test server per session for flow tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

if workers := os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # the workers share the cores: each computes on its share, in process and in the CLI runs it
    # starts (set before torch is imported; 2 workers × 2 threads on 2 cores spin-wait each other)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(workers))))
# each pytest-xdist worker its own home (Prefect's among it), as two users' would be
os.environ.setdefault("BALEEN_HOME", str(Path(__file__).resolve().parent.parent / ".baleen" / "test-home" / os.environ.get("PYTEST_XDIST_WORKER", "main")))
from baleen_core.runtime import apply_runtime_defaults  # noqa: E402

apply_runtime_defaults()

HOVER_MINI = Path(__file__).resolve().parent.parent.parent / "shared" / "benchmarks" / "hover-mini"


#: The session's whole-pipeline run (tests/flows/conftest.py) takes minutes: the modules whose
#: tests use it run as one unit on one pytest-xdist worker, so that it runs once.
PIPELINE_FIXTURE = "pipeline_world"
PIPELINE_MODULES = ("tests/flows/test_training_flow.py", "tests/flows/test_evaluation_flow.py")


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config, items):
    """The pipeline's modules first (the longest unit of work, so the other worker works through
    the rest meanwhile), each keeping its order; and no pipeline test outside them."""
    strays = [item.nodeid for item in items if PIPELINE_FIXTURE in getattr(item, "fixturenames", ()) and _module(item.nodeid) not in PIPELINE_MODULES]
    if strays:
        raise pytest.UsageError(f"{', '.join(strays)} use(s) {PIPELINE_FIXTURE}: move them to {' or '.join(PIPELINE_MODULES)} (tests/conftest.py)")
    items.sort(key=lambda item: _module(item.nodeid) not in PIPELINE_MODULES)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: the GPU machine has no xdist
def pytest_xdist_make_scheduler(config, log):
    """How ``-n 2`` (pyproject.toml) shares the tests out: by module, as ``--dist loadscope`` does
    (a module's fixtures are made once), except that the pipeline's modules are one unit; units go
    out in collection order, the pipeline's first."""
    from xdist.scheduler import LoadScopeScheduling  # only under pytest-xdist

    class PipelineFirstScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = _module(nodeid)
            return PIPELINE_FIXTURE if module in PIPELINE_MODULES else module

    config.option.loadscopereorder = False  # keep collection order: the pipeline's unit first
    return PipelineFirstScheduling(config, log)


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
