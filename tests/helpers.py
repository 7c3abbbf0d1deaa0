"""Helpers shared by tests (importable as ``helpers``: pytest puts ``tests/`` on sys.path)."""

from __future__ import annotations

import bz2
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from baleen_core.config import DemoConfig


def write_abstracts(root: Path, rows: list, name: str = "AA/wiki_00.bz2", raw_lines: list[bytes] | None = None) -> Path:
    """An abstracts tree with one bz2 file of ``rows`` (dicts) and then ``raw_lines`` verbatim."""
    path = root / "wiki" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows) + b"".join(raw_lines or [])
    path.write_bytes(bz2.compress(data))
    return root / "wiki"


def passage(pid: int, title: str, *sentences: str):
    """A :class:`PassageSentences` with sentence ids 0, 1, …"""
    from baleen_core.condensing import PassageSentences, Sentence

    return PassageSentences(pid, title, tuple(Sentence(pid, sid, title, text) for sid, text in enumerate(sentences)))


#: The tiny demo world of the flow tests: 118 passages, 30 train and 12 dev claims.
TINY = DemoConfig(n_people=40, n_films=20, n_bands=10, n_companies=10, n_cities=12, n_countries=5, n_universities=6, n_distractors=15, n_train_claims=30, n_dev_claims=12)


def released(store, ref):
    """``ref`` with a passing gate verdict recorded, as a flow's gate would leave it, for tests
    that write gated artifacts by hand and read them back with ``latest``/``get``."""
    run, producer = ref.manifest.run_id, ref.manifest.producer
    summary = {"artifact": ref.name, "run_id": run, "producer": producer, "success": True, "evaluated": 0, "failed": 0, "failures": []}
    store.write_gate_result(run, producer, ref.name, "{}", summary)
    return ref


# --- real processes: servers, workers and runs of the `baleen` CLI ---


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process_group(process: subprocess.Popen) -> None:
    """SIGTERM the process group (started with ``start_new_session``), SIGKILL it after 20 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)



BALEEN_CLI = str(Path(sys.executable).parent / "baleen")


def start_cli(args: list[str], store_root: Path, log: Path, prefect_home: Path | None = None, stderr: Path | None = None) -> subprocess.Popen:
    """Start ``baleen <args>`` in a session of its own (so a kill reaches every process it
    started, as a terminal's Ctrl-C does), on ``store_root``, reporting to the current Prefect
    API, or with ``prefect_home`` to a temporary server of its own (as a user's command does
    without PREFECT_API_URL); stderr goes to the log too unless ``stderr`` names its own file."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "BALEEN_STORE": str(store_root), "PREFECT_API_URL": PREFECT_API_URL.value()}
    if prefect_home is not None:
        del env["PREFECT_API_URL"]
        env["PREFECT_HOME"] = str(prefect_home)
    err = subprocess.STDOUT if stderr is None else stderr.open("w")
    return subprocess.Popen([BALEEN_CLI, *args], env=env, stdout=log.open("w"), stderr=err, start_new_session=True)


def temporary_servers_of(prefect_home: Path) -> list[int]:
    """PIDs of the Prefect servers (uvicorn) running with ``prefect_home`` as their home."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if b"uvicorn" in (proc / "cmdline").read_bytes() and f"PREFECT_HOME={prefect_home}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return pids


def kill_when(process: subprocess.Popen, ready, log: Path, timeout: float = 300) -> None:
    """SIGKILL the process group as soon as ``ready()`` is true; fail if the run ends first."""
    import pytest

    deadline = time.monotonic() + timeout
    while not ready():
        if process.poll() is not None:
            pytest.fail(f"the run ended (rc {process.returncode}) before it could be killed:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"nothing to kill at after {timeout} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL


def published(store_root: Path, name: str) -> dict[str, str]:
    """producer → run id of every published ``name`` artifact (read from the directories)."""
    manifests = (store_root / "artifacts" / name).glob("run=*/producer=*/_manifest.json")
    return {m.parent.name.removeprefix("producer="): m.parent.parent.name.removeprefix("run=") for m in manifests}


def assert_no_partial_artifacts(store_root: Path) -> None:
    """Every artifact directory holds its manifest and every file the manifest lists."""
    for directory in (store_root / "artifacts").glob("*/run=*/producer=*"):
        manifest = json.loads((directory / "_manifest.json").read_text())
        assert all((directory / name).exists() for name in manifest["files"]), directory


def change_beir_records(path: Path, remove: int, rewrite: int, add: int) -> dict[str, list[dict]]:
    """Edit a BEIR corpus file in place: drop its first ``remove`` records, give the next
    ``rewrite`` a new text, append ``add`` new ones. Returns the records by role, as written."""
    import gzip

    records = [json.loads(line) for line in gzip.open(path, "rt")]
    removed = records[:remove]
    updated = [dict(r, text=f"A rewritten passage, number {i}, about a lighthouse keeper and her {i + 3} cats.") for i, r in enumerate(records[remove : remove + rewrite])]
    added = [
        {"_id": f"new-{i}", "title": f"Velmora Quay {i}", "text": f"Velmora Quay {i} is a stone harbour wall built in {1802 + i} for herring boats.", "metadata": {}}
        for i in range(add)
    ]
    with gzip.open(path, "wt") as out:
        for record in [*updated, *records[remove + rewrite :], *added]:
            out.write(json.dumps(record) + "\n")
    return {"removed": removed, "updated": updated, "added": added}


def linked_store_copy(store_root: Path, config: str | Path, tmp_path: Path, config_name: str = "config.yaml") -> tuple[Path, Path]:
    """A hard-linked copy of a store (publishing only adds directories, so the original is
    untouched) and a copy of ``config`` that names it: (store dir, config path)."""
    import shutil

    import yaml

    copy = tmp_path / "store"
    shutil.copytree(store_root, copy, copy_function=os.link)
    path = tmp_path / config_name
    path.write_text(yaml.safe_dump({**yaml.safe_load(Path(config).read_text()), "store_root": str(copy)}))
    return copy, path


def prefect_artifacts(flow_run_id: str) -> dict:
    """key → the newest version of each keyed artifact a flow run published, read back from the
    session's Prefect server."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[UUID(flow_run_id)])))
    return {a.key: a for a in sorted(artifacts, key=lambda a: a.created) if a.key}
