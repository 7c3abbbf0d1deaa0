"""prefect-dask's task runner, letting go of its Dask client once its flow is done (the `dask` extra)."""

from __future__ import annotations

from typing import Any

from prefect_dask import DaskTaskRunner


class ReleasingDaskTaskRunner(DaskTaskRunner):
    """A :class:`~prefect_dask.DaskTaskRunner` that drops its closed client on exit.

    Prefect keeps the finished flow run's context, and with it this runner, until the process
    ends. The closed client still holds its last ``update-graph`` messages, whose pickled task
    specs reach the task functions and through their modules DuckDB; DuckDB's objects then outlive
    the interpreter's teardown and nanobind printed its leak report at every exit of a Dask run
    (as in issue 16; docs/known-issues.md)."""

    def __exit__(self, *args: Any) -> None:
        super().__exit__(*args)
        self._client = None
