"""Task runners from the typed configuration: where mapped tasks (one per index shard) run."""

from __future__ import annotations

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from baleen_core.config import OrchestrationConfig


def task_runner(config: OrchestrationConfig) -> TaskRunner:
    """``sequential``: one task at a time in the flow's process (the encoder already uses every
    core, and two models in one process would double the memory). ``dask``: a DaskTaskRunner on
    the cluster at ``dask_address``, or on a LocalCluster of ``dask_workers`` processes."""
    if config.task_runner == "sequential":
        return ThreadPoolTaskRunner(max_workers=1)
    try:
        from baleen_tasks.dask_runner import ReleasingDaskTaskRunner as DaskTaskRunner
    except ImportError:
        raise RuntimeError("orchestration.task_runner is 'dask' but prefect-dask is not installed: pip install -e '.[dask]'") from None
    if config.dask_address:
        return DaskTaskRunner(address=config.dask_address)
    # one thread per worker: each worker runs its own encoder; no dashboard (it needs bokeh and a port)
    return DaskTaskRunner(cluster_kwargs={"n_workers": config.dask_workers, "threads_per_worker": 1, "processes": True, "dashboard_address": None})
