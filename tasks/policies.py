"""Retry policy: retry transient I/O, never deterministic failures (bad input, failed gates)."""

from __future__ import annotations

from baleen_core.rejects import InputError


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
