"""Runtime defaults reach libraries imported before them: a deployment's flow run process imports
Prefect and transformers before any code of ours runs."""

from __future__ import annotations

import os
import subprocess
import sys

LOAD_AFTER_LATE_DEFAULTS = """
import transformers  # first, as in a worker's flow run process
from baleen_core.runtime import apply_runtime_defaults
apply_runtime_defaults()
from baleen_core.config import RetrieverConfig
from baleen_core.retrieval import Flipr
Flipr.load(RetrieverConfig(device="cpu"))
"""


def _load_model_stderr() -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))} | {"HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", LOAD_AFTER_LATE_DEFAULTS], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def test_no_weight_loading_bar_even_when_transformers_was_imported_first():
    assert "Loading weights" not in _load_model_stderr()


def test_flow_runs_beat_only_when_they_report_to_a_named_server(monkeypatch):
    """A heartbeat costs every flow run up to a second as it ends: only runs that report to a
    server the user named (where the zombie automation can exist) send them."""
    from baleen_core.runtime import apply_runtime_defaults

    monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    apply_runtime_defaults()
    assert "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" not in os.environ
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    apply_runtime_defaults()
    assert os.environ["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] == "30"
    monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "60")  # the user's own value wins
    apply_runtime_defaults()
    assert os.environ["PREFECT_FLOWS_HEARTBEAT_FREQUENCY"] == "60"
