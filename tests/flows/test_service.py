"""Run as a service, for real: a Prefect server on 127.0.0.1, the process work pool, every
deployment of prefect.yaml, a worker, and the demo pipeline triggered through the API; the run,
its subflows, task runs and artifacts are checked through the API.

Marked ``integration`` (a few minutes on 2 cores): ``pytest -m integration``. Everything the test
starts runs in its own process group and is stopped by PID with bounded timeouts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from baleen_tasks.policies import ZOMBIE_AUTOMATION
from helpers import TINY, free_port, stop_process_group

pytestmark = pytest.mark.integration

PROJECT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
POOL = "baleen-process"
FLOWS = {"corpus", "claims", "ingest", "index", "refresh", "labels", "training", "condensers", "evaluation", "pipeline", "demo"}


def _every(read) -> list:
    """Every row of a paginated API read."""
    rows: list = []
    while page := read(limit=200, offset=len(rows)):
        rows += page
    return rows


@pytest.fixture
def service(tmp_path):
    """A Prefect server, the work pool, every deployment and a worker; yields (api_url, store)."""
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "BALEEN_STORE": str(tmp_path / "store"),
        "BALEEN_HOME": str(tmp_path / "home"),
        "BALEEN_PROJECT_DIR": str(PROJECT),
        # the CLI's temporary servers run without triggers (baleen_core.runtime); a real server,
        # as `prefect server start` runs by default, has them: the zombie automation needs them
        "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "true",
    }
    started: list[subprocess.Popen] = []

    def start(*args: str, log: str) -> subprocess.Popen:
        process = subprocess.Popen([str(BIN / "prefect"), *args], cwd=PROJECT, env=env, stdout=(tmp_path / log).open("w"), stderr=subprocess.STDOUT, start_new_session=True)
        started.append(process)
        return process

    def run(*args: str) -> str:
        done = subprocess.run([str(BIN / "prefect"), *args], cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        assert "nanobind" not in done.stderr, done.stderr[-3000:]  # e.g. `prefect deploy` imports every flow
        return done.stdout

    try:
        server = start("server", "start", "--host", "127.0.0.1", "--port", str(port), log="server.log")
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Prefect server did not come up:\n{(tmp_path / 'server.log').read_text()[-3000:]}")
            time.sleep(1)
        run("work-pool", "create", POOL, "--type", "process")
        run("--no-prompt", "deploy", "--all")  # its build steps create the gpu tag limit and the zombie automation
        start("worker", "start", "--pool", POOL, "--limit", "1", log="worker.log")
        yield api, tmp_path
    finally:
        for process in reversed(started):
            stop_process_group(process)


def test_demo_deployment_runs_on_a_worker_and_reports_through_the_api(service):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    api, tmp_path = service
    config = tmp_path / "demo-config.yaml"
    config.write_text(yaml.safe_dump({
        "demo": TINY.model_dump(mode="json"),
        "retriever": {"device": "cpu"},
        "index": {"batch_size": 16},
        "labels": {"rounds": 1},
        "training": {"flipr": {"batch_size": 8}, "stage1": {"max_examples": 40}, "stage2": {"max_examples": 40}, "reader": {"max_examples": 20}},
        "evaluation": {"systems": ["baleen", "bm25-multihop"], "worst_claims": 1, "bootstrap": 100},
    }))

    with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        limit = client.read_concurrency_limit_by_tag("gpu")
        assert limit.concurrency_limit == 1  # made by prefect.yaml's build step, not by hand
        (zombies,) = client.read_automations_by_name(ZOMBIE_AUTOMATION)
        assert zombies.enabled and zombies.trigger.within.total_seconds() == 120
        deployments = {d.name: d for d in client.read_deployments()}
        assert FLOWS <= set(deployments), f"prefect.yaml is missing deployments: {FLOWS - set(deployments)}"
        assert all(d.work_pool_name == POOL for d in deployments.values())
        schedules = {name: [(s.schedule.cron, s.active) for s in d.schedules] for name, d in deployments.items() if d.schedules}
        assert schedules["evaluation"] == [("0 4 * * *", False)] and schedules["pipeline"] == [("0 3 * * 0", False)]

        run = client.create_flow_run_from_deployment(
            deployments["demo"].id, parameters={"config_path": str(config), "data_dir": str(tmp_path / "demo-data")}
        )
        deadline = time.monotonic() + 1500
        while not (run := client.read_flow_run(run.id)).state.is_final():
            if time.monotonic() > deadline:
                pytest.fail(f"the demo run did not finish in time:\n{(tmp_path / 'worker.log').read_text()[-4000:]}")
            time.sleep(3)
        assert run.state.is_completed(), f"{run.state}:\n{(tmp_path / 'worker.log').read_text()[-4000:]}"

        # the pipeline's stages ran as subflows, each completed
        children = client.read_flow_runs(flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])))
        pipeline = [c for c in children if c.name.startswith("pipeline")]
        assert len(pipeline) == 1 and pipeline[0].state.is_completed()
        stages = client.read_flow_runs(flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[pipeline[0].id])))
        stage_flows = {client.read_flow(s.flow_id).name for s in stages}
        assert {"ingest", "index", "training", "evaluation"} <= stage_flows
        assert all(s.state.is_completed() for s in stages)

        task_runs = _every(client.read_task_runs)
        assert all(t.state.is_completed() for t in task_runs), [t.name for t in task_runs if not t.state.is_completed()]
        # "encode-shard · 3" and "train-codec-4cd" are runs of the tasks encode-shard and train-codec
        task_names = {re.sub(r"-[0-9a-f]{3}$", "", t.name.split(" · ")[0]) for t in task_runs}
        assert {"ingest-corpus", "ingest-claims", "train-codec", "encode-shard", "build-index", "validate"} <= task_names

        artifacts = _every(client.read_artifacts)
        assert {"table", "markdown", "progress"} <= {a.type for a in artifacts}
        keyed = {a.key: a for a in artifacts if a.key}
        assert {"corpus-ingest", "claims-ingest", "flipr-index", "hop-labels-r0", "evaluation-dev", "evaluation-dev-report", "evaluation-dev-worst-trace"} <= set(keyed)
        # Prefect stores a link artifact as markdown: [link](http://127.0.0.1:8765/<run>/evaluation/traces/baleen-<uid>.html),
        # a page of the store's reports/ that `baleen reports serve` serves
        trace = re.search(r"\(http://127\.0\.0\.1:8765/(\S+?\.html)\)", str(keyed["evaluation-dev-worst-trace"].data))
        assert trace and (tmp_path / "store" / "reports" / trace.group(1)).is_file()

        # every gpu-tagged task took the single slot and gave it back
        gpu = client.read_concurrency_limit_by_tag("gpu")
        assert gpu.concurrency_limit == 1 and not gpu.active_slots

    # no flow run process (nor the worker) reported DuckDB objects leaked at exit
    assert "nanobind" not in (tmp_path / "worker.log").read_text()
    # the run wrote its artifacts where the worker's environment said
    assert list((tmp_path / "store" / "artifacts" / "predictions").glob("run=*/producer=eval-baleen/_manifest.json"))


def _wait_until(client, run_id, done, timeout: float, log: Path):
    deadline = time.monotonic() + timeout
    while not done(run := client.read_flow_run(run_id)):
        if time.monotonic() > deadline:
            pytest.fail(f"flow run {run.name} still {run.state.name} after {timeout:.0f} s:\n{log.read_text()[-4000:]}")
        time.sleep(2)
    return run


def _flow_run_processes(run_id) -> list[int]:
    """PIDs of the processes executing flow run ``run_id`` (the worker starts one per run)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if f"PREFECT__FLOW_RUN_ID={run_id}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                pids.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return pids


def test_a_sigkilled_flow_run_is_marked_crashed_not_left_running(service):
    """At f597893 a flow run killed with its worker (SIGKILL: the OOM killer, a lost machine)
    stayed Running (30 minutes later too): nothing was left to report its end. Its heartbeats
    stop, and the automation prefect.yaml's build step made marks it, and its subflow, Crashed."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from baleen_core.demo_world import write_demo_world

    api, tmp_path = service
    world = write_demo_world(tmp_path / "world", TINY)
    env = {**os.environ, "PREFECT_API_URL": api, "BALEEN_STORE": str(tmp_path / "store")}
    done = subprocess.run([str(BIN / "baleen"), "corpus", str(world)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    config = tmp_path / "slow-index.yaml"  # one passage per batch: minutes of encoding to be killed in
    config.write_text("index: {shard_passages: 10, batch_size: 1}\nretriever: {device: cpu}\n")

    with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("index/index")
        run = client.create_flow_run_from_deployment(deployment.id, parameters={"config_path": str(config)})
        log = tmp_path / "worker.log"
        _wait_until(client, run.id, lambda r: r.state.is_running() and _flow_run_processes(r.id), 300, log)
        subflows = FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id]))
        deadline = time.monotonic() + 300
        while not any(c.state.is_running() for c in client.read_flow_runs(flow_run_filter=subflows)):  # encode-shards, encoding
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            time.sleep(1)
        time.sleep(5)  # the subflow's first heartbeats are out
        (pid,) = _flow_run_processes(run.id)
        worker = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])  # its parent
        for process in (worker, pid):  # the worker first: it would report a child's death itself
            os.kill(process, signal.SIGKILL)
        killed_at = time.monotonic()
        time.sleep(60)
        assert client.read_flow_run(run.id).state.is_running(), "nothing should have noticed yet"
        crashed = _wait_until(client, run.id, lambda r: r.state.is_final(), 400, log)
        assert crashed.state.is_crashed(), crashed.state
        assert crashed.state.message.startswith("no heartbeat for 120 s: its process died")
        assert time.monotonic() - killed_at >= 90, "marked before its heartbeats could have been missed"
        children = client.read_flow_runs(flow_run_filter=subflows)
        assert children and all(_wait_until(client, c.id, lambda r: r.state.is_final(), 120, log).state.is_crashed() for c in children)


def test_a_deployment_run_with_a_bad_config_fails_under_its_own_name_with_the_one_line_error(service):
    """At f597893: a crash under a random run name, state message "Process exited with status
    code: 1", the config's message at the bottom of a traceback."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    api, tmp_path = service
    config = tmp_path / "nightly.yaml"
    config.write_text("evaluation:\n  splitt: dev\n")
    with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("evaluation/evaluation")
        run = client.create_flow_run_from_deployment(deployment.id, parameters={"config_path": str(config)})
        run = _wait_until(client, run.id, lambda r: r.state.is_final(), 300, tmp_path / "worker.log")
    assert run.state.is_failed() and not run.state.is_crashed(), run.state
    assert run.state.message == f"{config}: evaluation.splitt: unknown key (did you mean 'split'?)"
    assert run.name == "evaluation · newest claims · nightly"


def test_the_refresh_deployment_updates_the_index_once_and_then_does_nothing(service):
    """The refresh deployment on a worker: a first run ingests and indexes the tiny world; after
    its corpus changed, a run updates the index in place; a run with nothing changed publishes
    nothing."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from baleen_core.demo_world import write_demo_world
    from baleen_storage import ArtifactStore
    from helpers import change_beir_records

    api, tmp_path = service
    world = write_demo_world(tmp_path / "world", TINY)
    config = tmp_path / "refresh.yaml"
    config.write_text("index: {batch_size: 16}\nretriever: {device: cpu}\n")
    store = ArtifactStore(tmp_path / "store")
    manifests = lambda: sorted((tmp_path / "store").glob("artifacts/*/run=*/producer=*/_manifest.json"))  # noqa: E731

    with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("refresh/refresh")
        assert [(s.schedule.cron, s.active) for s in deployment.schedules] == [("30 1 * * *", False)]

        def refresh() -> None:
            run = client.create_flow_run_from_deployment(deployment.id, parameters={"dataset_dir": str(world), "config_path": str(config)})
            run = _wait_until(client, run.id, lambda r: r.state.is_final(), 600, tmp_path / "worker.log")
            assert run.state.is_completed(), f"{run.state}:\n{(tmp_path / 'worker.log').read_text()[-4000:]}"

        refresh()
        built = store.latest("flipr_index", "index")
        assert "base_index" not in built.manifest.stats and built.rows == 118
        change_beir_records(world / "beir_corpus.jsonl.gz", remove=1, rewrite=1, add=2)
        refresh()
        updated = store.latest("flipr_index", "index")
        assert updated.manifest.stats["base_index"] == built.manifest.run_id
        assert updated.manifest.stats["changes"] == {"added": 2, "updated": 1, "removed": 1} and updated.rows == 119
        before = manifests()
        refresh()
        assert manifests() == before, "a refresh with nothing changed published something"
        assert store.latest("flipr_index", "index").path == updated.path
