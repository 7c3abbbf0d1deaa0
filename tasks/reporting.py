"""Reporting from tasks: progress (tqdm + Prefect progress artifact), run logger, table artifacts, run metadata."""

from __future__ import annotations

import logging
import time
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_progress_artifact, create_table_artifact, update_progress_artifact
from prefect.context import get_run_context
from prefect.runtime import flow_run
from prefect.settings import PREFECT_CLOUD_UI_URL, PREFECT_UI_URL
from tqdm.auto import tqdm


def flow_run_info() -> tuple[str | None, str | None]:
    """(id, name) of the current flow run, or (None, None) outside one; recorded in manifests."""
    try:
        run_id = flow_run.get_id()
    except Exception:  # not inside a flow run
        return None, None
    return (str(run_id), flow_run.get_name()) if run_id else (None, None)


def _in_run_context() -> bool:
    try:
        get_run_context()
    except Exception:
        return False
    return True


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    """Prefect's run logger inside a flow/task run (shown in the UI), a plain logger outside
    (tasks called with ``.fn`` from benchmarks and tests)."""
    return get_run_logger() if _in_run_context() else logging.getLogger("openbaleen")


def readable(value) -> str:
    """A log line's or table cell's rendering of counts and metrics: ``2 hops 0.525, 3 hops 0.4``
    style text, not Python reprs (``{'2': 0.525, '3': 0.39999999999999997}``, ``('claims', 'x')``)."""
    if isinstance(value, dict):
        return ", ".join(f"{readable(k)} {readable(v)}" if not isinstance(v, dict) else f"{readable(k)} ({readable(v)})" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        joiner = "/" if isinstance(value, tuple) else "; "
        return joiner.join(readable(v) for v in value)
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "-"}[value]
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def publish_table(key: str, table: list[dict], description: str) -> None:
    """A table artifact in the Prefect UI; a no-op outside a run."""
    if _in_run_context():
        create_table_artifact(key=key, table=table, description=description)


def publish_markdown(key: str, markdown: str, description: str) -> UUID | None:
    """A markdown artifact in the Prefect UI, and its id; a no-op (None) outside a run."""
    if _in_run_context():
        return create_markdown_artifact(key=key, markdown=markdown, description=description)
    return None


def artifact_url(artifact_id: UUID) -> str:
    """The artifact's page in the Prefect UI: absolute when the UI's address is known (a server
    at PREFECT_API_URL), else from the UI's root, which is where a link in an artifact is clicked.
    A Prefect server serves two UIs, the new one under ``/v2`` (its default since 3.8) and the old
    one at the root; the link opens the new one, which a server without it redirects to the old
    one. Prefect Cloud has one UI, at the workspace's address."""
    base = (PREFECT_UI_URL.value() or "").rstrip("/")
    cloud = PREFECT_CLOUD_UI_URL.value()
    ui = base if cloud and base.startswith(cloud) else f"{base}/v2"
    return f"{ui}/artifacts/artifact/{artifact_id}"


def publish_link(key: str, link: str, description: str) -> None:
    """A link artifact in the Prefect UI (e.g. to an HTML report on disk); a no-op outside a run."""
    if _in_run_context():
        create_link_artifact(key=key, link=link, description=description)


class Progress:
    """``update(n)`` advances three displays: a tqdm bar when stderr is a terminal, the UI's
    progress artifact (refreshed at most every 2%; its page shows the bar and a line with the
    counts, the rate and the time left) and a log line every 10%, so that the flow run's log and
    a worker's log show progress too."""

    ARTIFACT_STEP = 2.0
    LOG_STEP = 10.0

    def __init__(self, total: float, description: str, unit: str = "it", clock=time.monotonic) -> None:
        self.total = max(float(total), 1.0)
        self.done = 0.0
        self.description = description
        self.unit = unit
        self._clock = clock
        self._started = clock()
        self._last_artifact = 0.0
        self._last_logged = 0.0
        # disable=None: no bar when stderr is not a terminal (worker logs, captured runs), where
        # the log lines carry the progress instead.
        self.bar = tqdm(total=total, desc=description, unit=unit, unit_scale=True, dynamic_ncols=True, disable=None)
        self.artifact_id = None
        if _in_run_context():
            self.artifact_id = create_progress_artifact(progress=0.0, description=self.status())

    def status(self) -> str:
        """``encode shard 3: 790 of 1,000 passage (79%), 45.2 passage/s, about 5 s left``."""
        percent = min(100.0, 100.0 * self.done / self.total)
        text = f"{self.description}: {self.done:,.0f} of {self.total:,.0f} {self.unit} ({percent:.0f}%)"
        seconds = self._clock() - self._started
        if self.done > 0 and seconds > 0:
            rate = self.done / seconds
            left = max(self.total - self.done, 0.0) / rate
            text += f", {rate:,.1f} {self.unit}/s" + (f", about {_duration(left)} left" if left > 0 else f", in {_duration(seconds)}")
        return text

    def update(self, n: float) -> None:
        self.done += n
        self.bar.update(n)
        percent = min(100.0, 100.0 * self.done / self.total)
        if self.artifact_id is not None and percent - self._last_artifact >= self.ARTIFACT_STEP:
            update_progress_artifact(artifact_id=self.artifact_id, progress=percent, description=self.status())
            self._last_artifact = percent
        if percent - self._last_logged >= self.LOG_STEP:
            run_logger().info(self.status())
            self._last_logged = percent

    def close(self) -> None:
        if self.artifact_id is not None:
            update_progress_artifact(artifact_id=self.artifact_id, progress=100.0, description=self.status())
        self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 5 s``, ``1 h 12 min``."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
