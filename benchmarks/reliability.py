"""How the CLI fails, measured as a user meets it: the cases of docs/reliability.md.

Every case runs the real ``baleen`` command in a subprocess on a seeded demo world, with a
temporary Prefect server (no PREFECT_API_URL) unless it says otherwise, and records what the user
sees: exit status, seconds, the lines on stderr, and for ``baleen sql`` the peak memory. Writes
``benchmarks/results/reliability.json`` (commit, date, machine, each case's numbers; repeated
timings as their min, median and max).

    python benchmarks/reliability.py                      # every case, Ctrl-C 3 times each way
    python benchmarks/reliability.py --repeats 1 --work /tmp/reliability

The cases that need a worker and deployments (a SIGKILLed run marked Crashed, a deployment run
with a bad config) are integration tests: ``pytest -m integration tests/flows/test_service.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BALEEN = str(Path(sys.executable).parent / "baleen")
PREFECT = str(Path(sys.executable).parent / "prefect")
#: A small world: ingest in seconds, an index in a minute.
WORLD = dict(n_people=40, n_films=20, n_bands=10, n_companies=10, n_cities=12, n_countries=5, n_universities=6, n_distractors=15, n_train_claims=30, n_dev_claims=12)
SLOW_INDEX = "index: {shard_passages: 20, batch_size: 2}\nretriever: {device: cpu}\n"


def _env(work: Path, store: Path, api: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "BALEEN_STORE")}
    env.update(BALEEN_HOME=str(work / "home"), BALEEN_STORE=str(store), PREFECT_HOME=str(work / "prefect-home"))
    if api:
        env["PREFECT_API_URL"] = api
    return env


def baleen(args: list[str], env: dict[str, str], cwd: Path) -> dict:
    """Run one command to its end: status, seconds, stderr lines, peak RSS (MiB) of its process."""
    started = time.perf_counter()
    process = subprocess.Popen([BALEEN, *args], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    return {"rc": process.returncode, "seconds": round(seconds, 2), "stderr_lines": stderr.splitlines(), "stdout": stdout}


def peak_rss_mib(args: list[str], env: dict[str, str], cwd: Path) -> dict:
    """Run one command with its stdout discarded; its status, seconds and peak RSS (wait4)."""
    started = time.perf_counter()
    process = subprocess.Popen([BALEEN, *args], env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    return {"rc": os.waitstatus_to_exitcode(status), "seconds": round(seconds, 2), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def interrupt(args: list[str], env: dict[str, str], cwd: Path, log: Path, when: str) -> dict:
    """Start a command in its own session, SIGINT its process group (a terminal's Ctrl-C) once
    ``when`` appears in its output, and time its exit."""
    err = log.with_suffix(".err")
    process = subprocess.Popen([BALEEN, *args], env=env, cwd=cwd, stdout=log.open("w"), stderr=err.open("w"), start_new_session=True)
    while when not in log.read_text():
        if process.poll() is not None:
            raise RuntimeError(f"`baleen {' '.join(args)}` ended before it could be interrupted: {err.read_text()[-2000:]}")
        time.sleep(0.05)
    sent = time.perf_counter()
    os.killpg(process.pid, signal.SIGINT)
    try:
        rc = process.wait(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        rc = "still running after 600 s"
    return {"rc": rc, "seconds_to_exit": round(time.perf_counter() - sent, 2), "stderr_lines": err.read_text().splitlines()}


def spread(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/baleen-reliability"))
    parser.add_argument("--repeats", type=int, default=3, help="Ctrl-C runs per server kind")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "reliability.json")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from baleen_core.config import DemoConfig
    from baleen_core.demo_world import write_demo_world
    from baleen_core.results import git_commit, machine_description, write_results

    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    world = write_demo_world(work / "world", DemoConfig(**WORLD))
    (work / "slow-index.yaml").write_text(SLOW_INDEX)
    cases: dict[str, dict] = {}

    # 1. a failed gate: its run stays in the store, marked failed, and the next stage names it
    partial = Path(shutil.copytree(world, work / "partial"))
    shutil.rmtree(partial / "wiki")
    env = _env(work, work / "store-partial")
    baleen(["corpus", str(partial)], env, work)
    claims = baleen(["claims", str(partial)], env, work)
    labels = baleen(["labels", "--round", "0"], env, work)
    status = baleen(["sql", "SELECT DISTINCT status FROM artifacts WHERE producer = 'claims'", "-f", "csv"], env, work)
    cases["failed_gate"] = {"claims": _summary(claims), "next_stage": _summary(labels), "claims_status_in_sql": status["stdout"].split()[1:]}
    print("failed gate:", cases["failed_gate"]["next_stage"]["first_line"], flush=True)

    # 2. Ctrl-C while the index encodes: on the temporary server, and on a server of its own
    env = _env(work, work / "store")
    assert baleen(["corpus", str(world)], env, work)["rc"] == 0
    runs = []
    for i in range(args.repeats):
        shutil.rmtree(work / "store" / "artifacts" / "flipr_shard", ignore_errors=True)
        runs.append(interrupt(["index", "--config", str(work / "slow-index.yaml")], env, work, work / f"ctrl-c-{i}.log", "encode shard"))
    server, api = _start_server(work)
    try:
        separate = []
        for i in range(args.repeats):
            shutil.rmtree(work / "store" / "artifacts" / "flipr_shard", ignore_errors=True)
            separate.append(interrupt(["index", "--config", str(work / "slow-index.yaml")], _env(work, work / "store", api), work, work / f"ctrl-c-server-{i}.log", "encode shard"))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    for kind, measured in (("ctrl_c_temporary_server", runs), ("ctrl_c_separate_server", separate)):
        cases[kind] = {
            "seconds_to_exit": spread([r["seconds_to_exit"] for r in measured]),
            "exit_statuses": sorted({r["rc"] for r in measured}, key=str),
            "stderr_lines": spread([len(r["stderr_lines"]) for r in measured]),
            "stderr": measured[0]["stderr_lines"],
        }
        print(f"{kind}: {cases[kind]['seconds_to_exit']} s", flush=True)

    # 8. two commands at once on temporary servers (one home): neither crashes, nothing is made twice
    shutil.rmtree(work / "store" / "artifacts" / "flipr_shard", ignore_errors=True)
    for name in ("flipr_codec", "flipr_index", "index_passages"):
        shutil.rmtree(work / "store" / "artifacts" / name, ignore_errors=True)
    started = [subprocess.Popen([BALEEN, "index", "--config", str(work / "slow-index.yaml")], env=env, cwd=work, stdout=(work / f"two-{i}.log").open("w"), stderr=subprocess.STDOUT) for i in range(2)]
    statuses = [p.wait() for p in started]
    made = {name: [m.parent.name for m in (work / "store" / "artifacts" / name).glob("run=*/producer=*/_manifest.json")] for name in ("flipr_codec", "flipr_shard", "flipr_index")}
    cases["two_commands_at_once"] = {
        "exit_statuses": statuses,
        "made_twice": {name: len(producers) - len(set(producers)) for name, producers in made.items()},
        "private_database": sum("temporary database" in (work / f"two-{i}.log").read_text() for i in range(2)),
    }
    print("two at once:", cases["two_commands_at_once"], flush=True)

    # 3. one claims file truncated: what reads it fails at once, naming it; the rest runs
    assert baleen(["claims", str(world)], env, work)["rc"] == 0
    (part,) = (work / "store" / "artifacts" / "claims").glob("run=*/producer=claims/part-*.parquet")
    part.write_bytes(part.read_bytes()[:-100])
    unaffected = baleen(["corpus", str(world)], env, work)
    reader = baleen(["labels", "--round", "0"], env, work)
    check = baleen(["store", "check"], env, work)
    repair = baleen(["store", "repair"], env, work)
    remade = baleen(["claims", str(world)], env, work)
    cases["damaged_file"] = {
        "flow_that_does_not_read_it": {"rc": unaffected["rc"], "warnings": [line for line in unaffected["stdout"].splitlines() if "left out of the SQL views" in line]},
        "stage_that_reads_it": _summary(reader),
        "store_check": {"rc": check["rc"], "seconds": check["seconds"]},
        "store_repair": {"rc": repair["rc"], "stdout": repair["stdout"].splitlines()},
        "remade_by_its_step": remade["rc"],
    }
    print("damaged file:", cases["damaged_file"]["stage_that_reads_it"]["first_line"], flush=True)

    # 4. baleen sql over 10M rows: the table's first rows, and every row as CSV
    table = [peak_rss_mib(["sql", "SELECT * FROM range(10000000)"], env, work) for _ in range(args.repeats)]
    csv = peak_rss_mib(["sql", "SELECT * FROM range(10000000)", "-f", "csv"], env, work)
    cases["sql_10m_rows"] = {
        "table": {"seconds": spread([r["seconds"] for r in table]), "peak_rss_mib": spread([r["peak_rss_mib"] for r in table])},
        "csv_every_row": csv,
    }
    print("sql:", cases["sql_10m_rows"], flush=True)

    # 7. errors: inside a flow, and a dataset directory that does not exist
    empty = baleen(["labels", "--round", "0"], _env(work, work / "store-empty"), work)
    missing = baleen(["corpus", str(work / "no-such-dataset")], env, work)
    cases["error_inside_a_flow"] = {**_summary(empty), "times_said": (empty["stdout"] + "\n".join(empty["stderr_lines"])).count("no 'claims' artifact"),
                                    "reprs": sum(r in empty["stdout"] for r in ("StoreError(", "Failed('"))}
    cases["missing_dataset_directory"] = {**_summary(missing), "flow_run_started": bool(missing["stdout"].strip())}

    document = {
        "commit": git_commit(ROOT),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "world": WORLD,
        "cases": cases,
    }
    write_results(document, args.out)
    print(f"results file: {args.out}")


def _summary(result: dict) -> dict:
    lines = result["stderr_lines"]
    return {"rc": result["rc"], "seconds": result["seconds"], "stderr_lines": len(lines), "first_line": lines[0] if lines else ""}


def _start_server(work: Path) -> tuple[subprocess.Popen, str]:
    """A Prefect server of its own on a free port, as docs/service.md starts one."""
    import socket

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PREFECT_HOME": str(work / "server-home")}
    env.pop("PREFECT_API_URL", None)
    server = subprocess.Popen([PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)], env=env, stdout=(work / "server.log").open("w"),
                              stderr=subprocess.STDOUT, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{api}/health", timeout=2).status_code == 200:
                return server, api
        except httpx.HTTPError:
            time.sleep(1)
    raise RuntimeError(f"the Prefect server did not start: {(work / 'server.log').read_text()[-2000:]}")


if __name__ == "__main__":
    main()
