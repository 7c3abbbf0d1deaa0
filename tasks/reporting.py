"""Reporting from tasks: progress (tqdm + Prefect progress artifact), run logger, table artifacts, run metadata."""

from __future__ import annotations

import logging

from prefect import get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_progress_artifact, create_table_artifact, update_progress_artifact
from prefect.context import get_run_context
from prefect.runtime import flow_run
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


def publish_table(key: str, table: list[dict], description: str) -> None:
    """A table artifact in the Prefect UI; a no-op outside a run."""
    if _in_run_context():
        create_table_artifact(key=key, table=table, description=description)


def publish_markdown(key: str, markdown: str, description: str) -> None:
    """A markdown artifact in the Prefect UI; a no-op outside a run."""
    if _in_run_context():
        create_markdown_artifact(key=key, markdown=markdown, description=description)


def publish_link(key: str, link: str, description: str) -> None:
    """A link artifact in the Prefect UI (e.g. to an HTML report on disk); a no-op outside a run."""
    if _in_run_context():
        create_link_artifact(key=key, link=link, description=description)


class Progress:
    """``update(n)`` advances both displays; the UI artifact is refreshed at most every 2%."""

    def __init__(self, total: float, description: str, unit: str = "it") -> None:
        self.total = max(float(total), 1.0)
        self.done = 0.0
        self._last_reported = 0.0
        self.bar = tqdm(total=total, desc=description, unit=unit, unit_scale=True, dynamic_ncols=True)
        self.artifact_id = None
        if _in_run_context():
            self.artifact_id = create_progress_artifact(progress=0.0, description=description)

    def update(self, n: float) -> None:
        self.done += n
        self.bar.update(n)
        percent = min(100.0, 100.0 * self.done / self.total)
        if self.artifact_id is not None and percent - self._last_reported >= 2.0:
            update_progress_artifact(artifact_id=self.artifact_id, progress=percent)
            self._last_reported = percent

    def close(self) -> None:
        if self.artifact_id is not None:
            update_progress_artifact(artifact_id=self.artifact_id, progress=100.0)
        self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
