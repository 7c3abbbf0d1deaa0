"""What a command's terminal shows of the run log: one line a record, no tracebacks, no reprs, no
failure repeated (the `error:` line says it once)."""

from __future__ import annotations

import logging
import os

import pytest


def test_the_temporary_servers_library_noise_stays_out_of_the_console(monkeypatch):
    """The CLI (without --debug) asks the Prefect server subprocess, through the environment it
    inherits, for a root logger at CRITICAL: SQLAlchemy's pool logs the cancellation of the
    server's session at shutdown as an ERROR with a traceback. Checked against Prefect's own
    logging setup, as the subprocess loads it, and only for the root logger."""
    from prefect.logging.configuration import DEFAULT_LOGGING_SETTINGS_PATH, load_logging_config

    from baleen_flows.console import quiet_console_logs

    monkeypatch.setenv("PREFECT_LOGGING_ROOT_LEVEL", "unset")  # recorded, so the CLI's setting is undone after the test
    monkeypatch.delenv("PREFECT_LOGGING_ROOT_LEVEL")
    quiet_console_logs()
    assert os.environ["PREFECT_LOGGING_ROOT_LEVEL"] == "CRITICAL"
    server_logging = load_logging_config(DEFAULT_LOGGING_SETTINGS_PATH)
    assert server_logging["root"]["level"] == "CRITICAL"
    assert server_logging["loggers"]["prefect.server"]["level"] != "CRITICAL" and server_logging["loggers"]["uvicorn"]["level"] != "CRITICAL"


@pytest.fixture
def console_format():
    """How the CLI's console handler renders a record of the given logger."""
    from prefect.logging.handlers import PrefectConsoleHandler

    from baleen_flows.console import _ConsoleFormatter, _WithoutRepeatedFailures

    handler = PrefectConsoleHandler()
    handler.setFormatter(_ConsoleFormatter(logging.Formatter("%(levelname)s %(message)s")))
    handler.addFilter(_WithoutRepeatedFailures())

    def render(level: int, message: str, *args, exc_info=None) -> str | None:
        record = logging.LogRecord("prefect.flow_runs", level, __file__, 1, message, args, exc_info)
        return handler.format(record) if handler.filter(record) else None

    return render


def test_failure_records_that_repeat_the_error_line_are_left_out(console_format):
    try:
        raise ValueError("no 'claims' artifact")
    except ValueError as err:
        failure = (type(err), err, err.__traceback__)
    assert console_format(logging.ERROR, "Encountered exception during execution: %r", ValueError("x"), exc_info=failure) is None
    assert console_format(logging.ERROR, "Task run failed with exception: ValueError('x') - Retries are exhausted", exc_info=failure) is None
    assert console_format(logging.ERROR, "Task run failed with exception: ValueError('x')", exc_info=failure) is None
    # what is not a repeat of the error line stays, without its traceback
    assert console_format(logging.INFO, "Task run failed with exception: OSError('x') - Retry 1/3 will start 2 second(s) from now") is not None
    assert console_format(logging.ERROR, "Crash detected! Execution was aborted by an interrupt signal.", exc_info=failure) == (
        "ERROR Crash detected! Execution was aborted by an interrupt signal."
    )


def test_a_final_state_is_shown_by_its_name_without_its_repr(console_format):
    message = "Finished in state Failed('Flow run encountered an exception: StoreError: no \\'claims\\' artifact\\n…')"
    assert console_format(logging.INFO, message) == "INFO Finished in state Failed"
    assert console_format(logging.INFO, "Finished in state Completed()") == "INFO Finished in state Completed"
    assert console_format(logging.INFO, "Beginning flow run %r for flow %r", "labels · round 0", "labels") == "INFO Beginning flow run 'labels · round 0' for flow 'labels'"
