"""Run policies shared by the tasks: which tasks hold the GPU, and which failures are retried
(transient I/O, never deterministic failures such as bad input or a failed gate)."""

from __future__ import annotations

from baleen_core.rejects import InputError

#: Tag of every task that runs a model (encoding, training, labelling, verifying). A Prefect tag
#: concurrency limit on it lets one such task run at a time across all flow runs, so two runs
#: never share one GPU's memory; `prefect deploy` creates it (:func:`ensure_gpu_limit`).
GPU_TAG = "gpu"


def ensure_gpu_limit(limit: int = 1) -> dict:
    """A ``prefect.yaml`` build step: create (or update) the :data:`GPU_TAG` concurrency limit on
    the server being deployed to, so that deploying is enough, with no step left to the README."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        client.create_concurrency_limit(tag=GPU_TAG, concurrency_limit=limit)
    return {"tag": GPU_TAG, "limit": limit}


def retry_on_transient_io(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: True only for OS-level I/O errors other than a missing file.

    A truncated or malformed input (``InputError``), a schema mismatch or a code error fails the
    same way every time, so retrying would only delay the readable error.
    """
    try:
        state.result()
    except InputError:
        return False
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return False
    except OSError:
        return True
    except Exception:
        return False
    return False
