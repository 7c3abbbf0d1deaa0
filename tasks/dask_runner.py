"""prefect-dask's task runner, letting go of its Dask client and cluster once its flow is done (the `dask` extra)."""

from __future__ import annotations

from typing import Any

import distributed.core
from prefect_dask import DaskTaskRunner


class ReleasingDaskTaskRunner(DaskTaskRunner):
    """A :class:`~prefect_dask.DaskTaskRunner` that drops its closed client and cluster on exit.

    Prefect keeps the finished flow run's context, and with it this runner, until the process
    ends. The closed client still holds its last ``update-graph`` messages, whose pickled task
    specs reach the task functions and through their modules DuckDB; DuckDB's objects then outlive
    the interpreter's teardown and nanobind printed its leak report at every exit of a Dask run
    (as in issue 16; docs/known-issues.md). The closed LocalCluster holds its scheduler, which
    holds asyncio futures made inside the flow run, and through their contexts the run's
    parameters and results: memory a long-lived process would keep for every Dask flow it ran."""

    def __exit__(self, *args: Any) -> None:
        super().__exit__(*args)
        self._client = None
        self._cluster = self._connect_to = None
        _forget_server_handlers()


def _forget_server_handlers() -> None:
    """distributed caches, per handler, whether it takes a comm, keyed by the bound method itself
    (``functools.cache`` on ``distributed.core._expects_comm``), so every scheduler a LocalCluster
    started stays alive for the life of the process. The cache only saves an ``inspect.signature``
    call; clearing it is safe for servers still running. Guarded: a private name of distributed."""
    expects_comm = getattr(distributed.core, "_expects_comm", None)
    if expects_comm is not None and hasattr(expects_comm, "cache_clear"):
        expects_comm.cache_clear()
