"""Small flow runs on Prefect's own server and on the temporary server (Prefect's app under
``RetryBusyDatabase``), as the CLI runs them.

SQLite refuses a write that meets another writer ("database is locked"); Prefect's server answers
503 and its client waits 2 s ± 20% before it asks again. The temporary server asks the app again
itself after tens of milliseconds. Each arm starts its server (uvicorn, the given factory, a fresh
SQLite database) and runs ``--runs`` flow runs of four logging tasks, the shape of an index
update's many small steps; the arms alternate ``--rounds`` times. Per arm: seconds per flow run
(median; mean with a bootstrap interval), the runs over 1.5 s, and the 503 retries the Prefect
client made (from its debug log). Writes ``benchmarks/results/server-retries.json``.

    python benchmarks/server_retries.py [--runs 100] [--rounds 2] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from baleen_core.runtime import apply_runtime_defaults

apply_runtime_defaults()  # before Prefect is imported

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings  # noqa: E402

from baleen_core.metrics import bootstrap_ci  # noqa: E402
from baleen_core.results import git_commit, machine_description, write_results  # noqa: E402
from baleen_flows.temporary_server import APP_FACTORY, PREFECT_APP_FACTORY, drain_queued_logs_and_events, serve_prefect_api, sqlite_database_url  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARMS = {"prefect": PREFECT_APP_FACTORY, "temporary server": APP_FACTORY}
SLOW_RUN_SECONDS = 1.5  # a run this slow waited for at least one client retry (0.2-0.6 s without)


class ClientRetries(logging.Handler):
    """Counts the Prefect client's retries of a 503 answer."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "retryable status code 503" in record.getMessage()


@task
def small_step(number: int) -> None:
    get_run_logger().info("step %d", number)


@flow
def small_steps() -> None:
    for number in range(4):
        small_step(number)


def run_arm(factory: str, runs: int) -> tuple[list[float], int]:
    """Seconds of each of ``runs`` flow runs on a fresh server running ``factory``, and the client's 503 retries."""
    with tempfile.TemporaryDirectory(prefix="server-retries-") as home:
        with serve_prefect_api(Path(home), sqlite_database_url(Path(home)), None, Path(home) / "server.log", factory=factory) as url:
            client_log = logging.getLogger("prefect.client")
            retries, level = ClientRetries(), client_log.level
            client_log.addHandler(retries)
            client_log.setLevel(logging.DEBUG)
            try:
                with temporary_settings({PREFECT_API_URL: url, PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
                    seconds = []
                    for _ in range(runs):
                        started = time.perf_counter()
                        small_steps()
                        seconds.append(time.perf_counter() - started)
                    drain_queued_logs_and_events()  # sent to this server before it stops
            finally:
                client_log.removeHandler(retries)
                client_log.setLevel(level)
    return seconds, retries.count


def summary(seconds: list[float], retries: int) -> dict:
    low, high = bootstrap_ci(seconds)
    return {
        "runs": len(seconds),
        "median_seconds": round(statistics.median(seconds), 3),
        "mean_seconds": round(statistics.mean(seconds), 3),
        "mean_interval": [round(low, 3), round(high, 3)],
        "max_seconds": round(max(seconds), 3),
        "runs_over_1_5_s": sum(s > SLOW_RUN_SECONDS for s in seconds),
        "client_503_retries": retries,
    }


def mean_difference(after: list[float], before: list[float], samples: int = 1000, seed: int = 0) -> dict:
    """Mean of ``after`` − mean of ``before``, with a 95% bootstrap interval (each arm resampled on its own)."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(after), np.asarray(before)
    draws = [rng.choice(a, a.size).mean() - rng.choice(b, b.size).mean() for _ in range(samples)]
    return {"value": round(float(a.mean() - b.mean()), 3), "interval": [round(float(q), 3) for q in np.percentile(draws, [2.5, 97.5])]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="flow runs per arm and round")
    parser.add_argument("--rounds", type=int, default=2, help="times the two arms alternate")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "server-retries.json")
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {arm: [] for arm in ARMS}
    retries = dict.fromkeys(ARMS, 0)
    for round_number in range(args.rounds):
        for arm, factory in ARMS.items() if round_number % 2 == 0 else reversed(ARMS.items()):
            took, retried = run_arm(factory, args.runs)
            seconds[arm] += took
            retries[arm] += retried
            print(f"round {round_number + 1}, {arm}: median {statistics.median(took):.3f} s, mean {statistics.mean(took):.3f} s, {retried} client retries", flush=True)
    result = {
        "commit": git_commit(ROOT),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "flow_run": "4 tasks, each logging one line",
        "arms": {arm: summary(seconds[arm], retries[arm]) for arm in ARMS},
        "mean_seconds_temporary_server_minus_prefect": mean_difference(seconds["temporary server"], seconds["prefect"]),
    }
    write_results(result, args.out)
    print(json.dumps(result["arms"], indent=1))


if __name__ == "__main__":
    main()
