"""Safe process defaults, applied before Prefect, GX or Hugging Face are imported.

A plain run must never reach for the network: telemetry is off, Hugging Face is offline, and
Prefect keeps its home (SQLite database, settings) inside the project unless the user set one.
Values the user already exported win; we only fill in what is unset.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Environment defaults and why each one is needed.
SAFE_DEFAULTS: dict[str, str] = {
    "DO_NOT_TRACK": "1",  # Prefect and others honour this telemetry opt-out
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "GX_ANALYTICS_ENABLED": "false",  # great-expectations posts usage events otherwise
    "HF_HUB_OFFLINE": "1",  # weights come from local paths or installed packages, never a hub
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    # transformers' "Loading weights" bar (a local load takes milliseconds) would be the only line
    # on stderr of a command that went well; our own progress is logged every 10%.
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",  # avoids fork warnings/deadlocks under Prefect's threads
    # The ephemeral Prefect server needs more than the default 20 s to start on 2 slow cores.
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    # The temporary server's automation services (reactive triggers, actions, and a trigger
    # evaluation every 5 s) are SQLite writers that contend with the task-run recorder
    # ("database is locked", PrefectHQ/prefect#15170); the pipeline defines no automations.
    "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "false",
    "PREFECT_LOGGING_LEVEL": "INFO",
}

#: Set only for runs that report to a server the user named (PREFECT_API_URL): a heartbeat every
#: 30 s (Prefect's default is 180), for the deployments' automation that marks a run of ours
#: Crashed after 4 missed ones (baleen_tasks.policies.ensure_zombie_detection). A temporary
#: server dies with its command and has no automation: there heartbeats are off
#: (baleen_flows.temporary_server), because every flow run that beats waits up to a second for
#: its heartbeat thread when it ends, seconds on a command of small steps.
SERVER_DEFAULTS: dict[str, str] = {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY": "30"}


def baleen_home() -> Path:
    """Project-local working directory (store, Prefect home): $BALEEN_HOME or ./.baleen."""
    return Path(os.environ.get("BALEEN_HOME", ".baleen")).expanduser().resolve()


def apply_runtime_defaults() -> None:
    """Fill in the safe defaults; idempotent, and never overrides what the user exported."""
    for key, value in SAFE_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if "PREFECT_API_URL" in os.environ:
        for key, value in SERVER_DEFAULTS.items():
            os.environ.setdefault(key, value)
    _progress_bars_off_if_already_imported()
    if "PREFECT_HOME" not in os.environ and "PREFECT_API_URL" not in os.environ:
        home = baleen_home() / "prefect"
        home.mkdir(parents=True, exist_ok=True)
        os.environ["PREFECT_HOME"] = str(home)


def _progress_bars_off_if_already_imported() -> None:
    """Hugging Face reads HF_HUB_DISABLE_PROGRESS_BARS once, when imported. A deployment's flow
    run process imports Prefect (and through the flow's module, transformers) before any of our
    code runs, so there the variable came too late and every model load drew its "Loading
    weights" bar into the worker's log: switch the bars off in the libraries themselves."""
    if os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") != "1":
        return  # the user asked for the bars
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
