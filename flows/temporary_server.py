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

SQLite takes one writer at a time, and a request whose transaction meets another writer fails at
once with ``database is locked``, which Prefect's server answers with 503 and no ``Retry-After``;
Prefect's client then waits 2 s before it asks again, most of the cost of a small flow run. The
temporary server runs Prefect's app inside :class:`RetryBusyDatabase`, which asks the app again
itself after tens of milliseconds, so the client sees the 503 only when the lock outlasts those
retries, and then retries as before.
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

#: Seconds a stopping server gets to finish its writes before it is killed.
STOP_GRACE_SECONDS = 3.0
_PR_SET_PDEATHSIG = 1  # prctl option: the signal a child gets when its parent dies (Linux)
#: Seconds the temporary server waits before each of its own retries of a request SQLite refused
#: as locked (3.2 s in all, then the client's retries take over). A lock lasts milliseconds:
#: it is held by one write transaction of the server's recorders or of another request.
BUSY_RETRY_DELAYS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.5, 0.5, 0.5, 0.5)
SERVICE_UNAVAILABLE = 503  # what Prefect's server answers when SQLite says the database is locked

#: uvicorn factories: Prefect's own API app, and the temporary server's (Prefect's under the retry)
PREFECT_APP_FACTORY = "prefect.server.api.server:create_app"
APP_FACTORY = f"{__name__}:create_app"

_log = logging.getLogger(__name__)

Scope = Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ServerStartError(RuntimeError):
    """The temporary Prefect server did not come up; the message says why."""


@contextmanager
def prefect_api(home: Path) -> Iterator[str]:
    """The API URL to report to for the ``with`` block: ``PREFECT_API_URL`` as set, or a temporary
    server's, stopped when the block ends, however it ends. Before that, the logs and events the
    block's runs queued are sent (Prefect sends them in the background)."""
    from prefect.settings import PREFECT_API_URL, PREFECT_FLOWS_HEARTBEAT_FREQUENCY, PREFECT_UI_URL, temporary_settings

    with ExitStack() as stack:
        url = os.environ.get("PREFECT_API_URL")
        if not url:
            database, lock_fd, folder = stack.enter_context(_database(home))
            url = stack.enter_context(serve_prefect_api(home, database, lock_fd, folder / "temporary-server.log"))
            # no UI on a temporary server: no "View at" links to it. No heartbeats either: nothing
            # watches them there (the zombie automation lives on deployed servers), and Prefect's
            # default (every 180 s) made every flow run wait up to a second for its heartbeat
            # thread as it ended, 1.1 s of a 0.2-s run of small steps.
            stack.enter_context(temporary_settings({PREFECT_API_URL: url, PREFECT_UI_URL: "", PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}))
        try:
            yield url
        finally:
            drain_queued_logs_and_events()


def drain_queued_logs_and_events() -> None:
    """Send the logs and events Prefect queued (it sends them in the background), waiting at most
    :data:`STOP_GRACE_SECONDS` for each kind: before their server stops."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=STOP_GRACE_SECONDS)


def sqlite_database_url(folder: Path) -> str:
    """The URL of a Prefect SQLite database in ``folder`` (async driver, as Prefect's server needs)."""
    return f"sqlite+aiosqlite:///{folder / 'prefect.db'}"


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
            yield sqlite_database_url(Path(private)), None, Path(private)
        return
    try:
        yield None, lock_fd, home
    finally:
        os.close(lock_fd)


@contextmanager
def serve_prefect_api(home: Path, database: str | None, lock_fd: int | None, log_path: Path, factory: str = APP_FACTORY) -> Iterator[str]:
    """A Prefect server (uvicorn running ``factory``) for the ``with`` block: its API URL."""
    import prefect

    port = _free_port()
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT_HOME": str(home)}
    if database:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database
    command = [
        sys.executable, "-m", "uvicorn", "--app-dir", str(Path(prefect.__file__).parent.parent), "--factory",
        factory, "--host", "127.0.0.1", "--port", str(port), "--log-level", "error", "--lifespan", "on",
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


def create_app() -> RetryBusyDatabase:
    """The temporary server's ASGI app (uvicorn's factory): Prefect's API, retried when busy."""
    from prefect.server.api.server import create_app as create_prefect_app

    return RetryBusyDatabase(create_prefect_app())


class RetryBusyDatabase:
    """ASGI wrapper that sends an HTTP request to ``app`` again, after each of ``delays``, while
    the app answers it 503 (Prefect's server: SQLite said the database is locked, the transaction
    was rolled back). A client would send the same request again; this saves it the round trip
    and Prefect's 2-s backoff. A 503 is not passed on until the last try, which passes on
    whatever the app answers or raises. Other answers, other errors and other scopes (lifespan,
    websockets) pass through untouched; a response is streamed as the app sends it."""

    def __init__(self, app: ASGIApp, delays: Sequence[float] = BUSY_RETRY_DELAYS) -> None:
        self.app, self.delays = app, tuple(delays)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = await _whole_request(receive)  # kept, to be sent again
        for attempt, delay in enumerate(self.delays, start=1):
            if await self._answered(scope, request, receive, send, pass_on_refusal=False):
                return
            _log.debug("%s %s answered 503 (try %d); asking again in %.2f s", scope.get("method"), scope.get("path"), attempt, delay)
            await anyio.sleep(delay)
        await self._answered(scope, request, receive, send, pass_on_refusal=True)

    async def _answered(self, scope: Scope, request: list[Message], receive: Receive, send: Send, pass_on_refusal: bool) -> bool:
        """One try: False if the app refused with 503 and the refusal was held back."""
        refused = False
        pending = iter(request)

        async def replay() -> Message:
            return next(pending, None) or await receive()  # after the request: the client's disconnect, if any

        async def send_unless_refused(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == SERVICE_UNAVAILABLE and not pass_on_refusal:
                refused = True
            if not refused:
                await send(message)

        try:
            await self.app(dict(scope), replay, send_unless_refused)  # a fresh copy: routing writes into the scope
        except Exception:
            if not refused:  # Starlette raises again after sending its error response
                raise
        return not refused


async def _whole_request(receive: Receive) -> list[Message]:
    """The request's messages up to its last body chunk (or the client's disconnect)."""
    messages = [await receive()]
    while messages[-1]["type"] == "http.request" and messages[-1].get("more_body", False):
        messages.append(await receive())
    return messages


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
