"""The Prefect API a ``baleen`` command's flows report to: the server at ``PREFECT_API_URL`` when
one is set, else a temporary server that lives as long as the command.

Prefect would start a temporary server by itself, but as a child in the command's own process
group, so the SIGINT a terminal sends on Ctrl-C killed the server before the flow could report its
end, and the command then retried the dead server for minutes. This one runs in a session of its
own: Ctrl-C reaches the command only, which stops the server once its flow runs have ended. The
server also gets SIGTERM from the kernel when the command dies (``PR_SET_PDEATHSIG``), so a
killed command never leaves it running.

Its runs go to Prefect's database in ``PREFECT_HOME`` (``prefect server start`` shows them
afterwards), one server at a time: the server holds a lock on the database until it exits. A
second command started meanwhile gets a database of its own for its lifetime instead of racing
the first for one SQLite file (two servers migrating one file at once crash at start-up).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

#: Seconds a stopping server gets to finish its writes before it is killed.
STOP_GRACE_SECONDS = 3.0
_PR_SET_PDEATHSIG = 1  # prctl option: the signal a child gets when its parent dies (Linux)


class ServerStartError(RuntimeError):
    """The temporary Prefect server did not come up; the message says why."""


@contextmanager
def prefect_api(home: Path) -> Iterator[str]:
    """The API URL to report to for the ``with`` block: ``PREFECT_API_URL`` as set, or a temporary
    server's, stopped when the block ends, however it ends. Before that, the logs and events the
    block's runs queued are sent (Prefect sends them in the background)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, PREFECT_UI_URL, temporary_settings

    with ExitStack() as stack:
        url = os.environ.get("PREFECT_API_URL")
        if not url:
            database, lock_fd, folder = stack.enter_context(_database(home))
            url = stack.enter_context(_server(home, database, lock_fd, folder / "temporary-server.log"))
            # no UI on a temporary server: no "View at" links to it. No heartbeats either: nothing
            # watches them there (the zombie automation lives on deployed servers), and Prefect's
            # default (every 180 s) made every flow run wait up to a second for its heartbeat
            # thread as it ended, 1.1 s of a 0.2-s run of small steps.
            stack.enter_context(temporary_settings({PREFECT_API_URL: url, PREFECT_UI_URL: "", PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}))
        try:
            yield url
        finally:
            for worker in (APILogWorker, EventsWorker):
                worker.drain_all(timeout=STOP_GRACE_SECONDS)


@contextmanager
def _database(home: Path) -> Iterator[tuple[str | None, int | None, Path]]:
    """(database URL, lock, folder for the server's log): Prefect's own database (None: the one
    the user configured, or ``PREFECT_HOME/prefect.db``) and the lock on it while no other server
    holds it, else a private SQLite file (removed afterwards) and no lock."""
    if os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL"):
        yield None, None, home  # the user's database (e.g. Postgres) takes concurrent servers
        return
    home.mkdir(parents=True, exist_ok=True)
    # never unlinked (unlike the store's locks): the server inherits this descriptor, and the lock
    # must stay on the file at this path until the server, too, has exited
    lock_fd = os.open(home / "prefect.db.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock_fd)
        with tempfile.TemporaryDirectory(prefix="temporary-prefect-", dir=home) as private:
            print(f"another baleen command is using the Prefect database in {home}: this one's runs go to a temporary database", flush=True)
            yield f"sqlite+aiosqlite:///{Path(private) / 'prefect.db'}", None, Path(private)
        return
    try:
        yield None, lock_fd, home
    finally:
        os.close(lock_fd)


@contextmanager
def _server(home: Path, database: str | None, lock_fd: int | None, log_path: Path) -> Iterator[str]:
    import prefect

    port = _free_port()
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT_HOME": str(home)}
    if database:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database
    command = [
        sys.executable, "-m", "uvicorn", "--app-dir", str(Path(prefect.__file__).parent.parent), "--factory",
        "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on",
    ]
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # the terminal's SIGINT (Ctrl-C) goes to the command, not to the server
            pass_fds=() if lock_fd is None else (lock_fd,),  # the database stays locked while the server lives
            preexec_fn=_terminate_with_parent,
        )
    try:
        url = f"http://127.0.0.1:{port}/api"
        _wait_until_healthy(server, url, log_path)
        yield url
    finally:
        _stop(server)


def _terminate_with_parent() -> None:
    """In the server's process, before it starts: SIGTERM when the command that started it dies."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _wait_until_healthy(server: subprocess.Popen, url: str, log_path: Path) -> None:
    timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120"))
    deadline = time.monotonic() + timeout
    with httpx.Client() as client:
        while True:
            try:
                if client.get(f"{url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if server.poll() is not None:
                raise ServerStartError(f"the temporary Prefect server exited with code {server.returncode} at start-up: {_last_line(log_path)}")
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"the temporary Prefect server did not answer within {timeout:.0f} s "
                    f"(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS): {_last_line(log_path)}"
                )
            time.sleep(0.1)


def _last_line(log_path: Path) -> str:
    lines = [line for line in log_path.read_text(errors="replace").splitlines() if line.strip()] if log_path.exists() else []
    return lines[-1] if lines else "it logged nothing"


def _stop(server: subprocess.Popen) -> None:
    """SIGTERM the server's process group, SIGKILL it after :data:`STOP_GRACE_SECONDS`."""
    if server.poll() is not None:
        return
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    except ProcessLookupError:
        pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
