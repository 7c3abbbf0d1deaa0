"""What a ``baleen`` command's terminal shows of Prefect's run log.

The run log (progress, stages, results) goes to stdout, one line a record, without tracebacks or
Python reprs; stderr is left to what went wrong: the one ``error:`` line and its hint (see
``baleen_flows.cli.main``). The flow run's log in the UI keeps every record whole, tracebacks
included, since only the console's copy of a record is changed. ``--debug`` keeps Prefect's own
console (stderr, full tracebacks).
"""

from __future__ import annotations

import logging
import os
import re
import sys

#: The engines' records of a failure that then ends the command, each with its exception's repr:
#: the ``error:`` line says it once, so the console leaves them out (the UI's log keeps them).
_FAILURE_RECORDS = re.compile(r"^(Encountered exception during execution: |Task run failed with (exception|state): .*(Retries are exhausted)?$)")
#: "Finished in state Failed('Flow run encountered an exception: StoreError: …')" and the like.
_FINAL_STATE = re.compile(r"^(Finished in state [A-Za-z]+)\(.*\)$", re.DOTALL)


class _ConsoleFormatter(logging.Formatter):
    """Formats a copy of a record as ``inner`` would, minus its traceback and with a final state's
    repr cut to the state's name."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        message = _FINAL_STATE.sub(r"\1", record.getMessage())
        bare = logging.makeLogRecord({**record.__dict__, "msg": message, "args": None, "exc_info": None, "exc_text": None, "stack_info": None})
        return self.inner.format(bare)


class _WithoutRepeatedFailures(logging.Filter):
    """Leaves out the engines' failure records that repeat the ``error:`` line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and record.exc_info and _FAILURE_RECORDS.match(record.getMessage()))


def quiet_console_logs() -> None:
    """Point Prefect's console handlers at stdout, with :class:`_ConsoleFormatter` and
    :class:`_WithoutRepeatedFailures` (see the module's docstring)."""
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()  # Prefect's handlers exist from here on; later setups are incremental
    # Stopping the temporary Prefect server cancels its SQLite session, and SQLAlchemy's pool then
    # logs that harmless cancellation as an ERROR with a traceback, after the run's results. So
    # libraries that log only through the root logger stay quiet on the console (Prefect's own
    # loggers, prefect.server and uvicorn keep their levels; the runs' logs reach the UI).
    os.environ.setdefault("PREFECT_LOGGING_ROOT_LEVEL", "CRITICAL")

    loggers = [logging.getLogger()] + [l for l in logging.Logger.manager.loggerDict.values() if isinstance(l, logging.Logger)]
    for handler in {h for logger in loggers for h in logger.handlers if isinstance(h, PrefectConsoleHandler)}:
        if isinstance(handler.formatter, _ConsoleFormatter):
            continue  # adjusted by an earlier command in this process (tests run several)
        handler.setStream(_CURRENT_STDOUT)
        handler.console.file = _CURRENT_STDOUT  # the Rich console keeps its own reference to the stream
        handler.setFormatter(_ConsoleFormatter(handler.formatter or logging.Formatter()))
        handler.addFilter(_WithoutRepeatedFailures())


class _CurrentStdout:
    """Whatever ``sys.stdout`` is when a record is written, not when the handler was set up: a
    command run in-process (typer's CliRunner) swaps stdout for a buffer it closes afterwards."""

    def __getattr__(self, name: str):
        return getattr(sys.stdout, name)


_CURRENT_STDOUT = _CurrentStdout()
