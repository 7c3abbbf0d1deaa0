"""Retries happen for transient I/O only."""

from __future__ import annotations

from prefect.states import Completed, Failed

from baleen_core.rejects import InputError
from baleen_tasks.policies import retry_on_transient_io


def _failed(exc: BaseException):
    return Failed(data=exc)


def test_transient_io_is_retried_deterministic_failures_are_not():
    assert retry_on_transient_io(None, None, _failed(OSError("connection reset")))
    assert retry_on_transient_io(None, None, _failed(TimeoutError("nfs timeout")))
    assert not retry_on_transient_io(None, None, _failed(InputError("wiki_00.bz2", 3, "truncated")))
    assert not retry_on_transient_io(None, None, _failed(FileNotFoundError("gone")))
    assert not retry_on_transient_io(None, None, _failed(ValueError("bug")))
    assert not retry_on_transient_io(None, None, Completed())
