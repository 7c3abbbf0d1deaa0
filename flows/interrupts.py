"""Ctrl-C ends a ``baleen`` command within seconds, with one line and exit status 130.

Python turns SIGINT into a KeyboardInterrupt in the main thread, and the flow engines then mark
their runs Crashed and the store's writers discard what they had not published. But a flow that
waits on mapped tasks (the index shards) only gets there once the running tasks finish, which
for an encoding shard takes minutes. So the first Ctrl-C also starts a deadline: if the command
has not ended by then, it exits anyway. Nothing is half-published either way: artifacts appear by
an atomic rename, and what a killed writer leaves in ``tmp/`` is swept by the next run; the
temporary Prefect server stops with the command (``baleen_flows.temporary_server``). A second
Ctrl-C exits at once.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

#: Exit status of a command ended by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED_STATUS = 128 + signal.SIGINT
MESSAGE = "interrupted: stopped; nothing was half-published, and running the command again resumes from what finished\n"


class InterruptDeadline:
    """The SIGINT handler of one command (see the module's docstring)."""

    def __init__(self, grace_seconds: float) -> None:
        self.grace_seconds = grace_seconds
        self.interrupted = False

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum, frame) -> None:
        if self.interrupted:
            exit_now()
        self.interrupted = True
        os.write(sys.stderr.fileno(), MESSAGE.encode())
        timer = threading.Timer(self.grace_seconds, exit_now)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt


def exit_now() -> None:
    """Exit with :data:`INTERRUPTED_STATUS` without waiting for the threads still running tasks."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(INTERRUPTED_STATUS)
