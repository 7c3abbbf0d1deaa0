"""The temporary server's retry of requests SQLite refused as locked (RetryBusyDatabase).

The app under the wrapper is built as Prefect's is: an outer FastAPI app mounting an API app whose
generic exception handler is Prefect's own (503 for a locked database, 500 otherwise), and its
route writes to a real SQLite file through SQLAlchemy while another connection holds the lock."""

from __future__ import annotations

import sqlite3

import anyio
import httpx
import sqlalchemy
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from prefect.server.api.server import custom_internal_exception_handler

from baleen_flows.temporary_server import RetryBusyDatabase, create_app


class LockedDatabase:
    """A SQLite file locked by another connection until the route has been called ``free_on_call`` times."""

    def __init__(self, path, free_on_call: int | None) -> None:
        self.engine = sqlalchemy.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0})  # refuse at once, as a busy snapshot does
        with self.engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE notes (body TEXT)")
        self.holder = sqlite3.connect(path, isolation_level=None)
        self.holder.execute("BEGIN EXCLUSIVE")
        self.free_on_call, self.calls = free_on_call, 0

    def write(self, body: str) -> None:
        self.calls += 1
        if self.calls == self.free_on_call:
            self.holder.execute("ROLLBACK")
        with self.engine.begin() as connection:
            connection.execute(sqlalchemy.text("INSERT INTO notes VALUES (:body)"), {"body": body})

    def rows(self) -> list[str]:
        with self.engine.begin() as connection:
            return [row[0] for row in connection.exec_driver_sql("SELECT body FROM notes")]


def prefect_like_app(database: LockedDatabase) -> FastAPI:
    api = FastAPI(exception_handlers={Exception: custom_internal_exception_handler})

    @api.post("/notes")
    async def add_note(request: Request) -> dict:
        body = (await request.body()).decode()
        database.write(body)
        return {"stored": body}

    @api.post("/broken")
    async def broken() -> dict:
        database.calls += 1
        raise ValueError("a bug, not a busy database")

    @api.get("/stream")
    async def stream() -> StreamingResponse:
        return StreamingResponse(iter([b"first,", b"second"]), media_type="text/plain")

    app = FastAPI()
    app.mount("/api", api)
    return app


def request(app, method: str, path: str, body: bytes = b"") -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://server") as client:
            return await client.request(method, path, content=body)

    return anyio.run(send)


def test_a_write_refused_as_locked_is_retried_until_the_lock_is_released(tmp_path):
    database = LockedDatabase(tmp_path / "prefect.db", free_on_call=3)
    body = "x" * 100_000  # more than one body chunk
    response = request(RetryBusyDatabase(prefect_like_app(database), delays=(0.0,) * 5), "POST", "/api/notes", body.encode())
    assert response.status_code == 200 and response.json() == {"stored": body}
    assert database.calls == 3  # two refusals, then the write: the body was sent again each time
    assert database.rows() == [body]  # written once


def test_without_the_wrapper_the_client_gets_prefects_503(tmp_path):
    """The premise: Prefect's handler answers a locked database with 503, which its client retries after 2 s."""
    database = LockedDatabase(tmp_path / "prefect.db", free_on_call=None)
    response = request(prefect_like_app(database), "POST", "/api/notes", b"note")
    assert response.status_code == 503 and database.calls == 1


def test_a_lock_that_outlasts_the_retries_reaches_the_client_as_503(tmp_path):
    database = LockedDatabase(tmp_path / "prefect.db", free_on_call=None)
    response = request(RetryBusyDatabase(prefect_like_app(database), delays=(0.0, 0.01, 0.02)), "POST", "/api/notes", b"note")
    assert response.status_code == 503 and response.json() == {"exception_message": "Service Unavailable"}
    assert database.calls == 4  # three retries after the first try, then the client's own retry takes over
    database.holder.execute("ROLLBACK")
    assert database.rows() == []


def test_other_errors_and_answers_pass_through_once(tmp_path):
    database = LockedDatabase(tmp_path / "prefect.db", free_on_call=None)
    app = RetryBusyDatabase(prefect_like_app(database), delays=(0.0,) * 3)
    broken = request(app, "POST", "/api/broken")
    assert broken.status_code == 500 and database.calls == 1
    streamed = request(app, "GET", "/api/stream")
    assert streamed.status_code == 200 and streamed.text == "first,second"
    assert request(app, "GET", "/api/missing").status_code == 404


def test_the_temporary_servers_app_is_prefects_api_under_the_retry():
    app = create_app()
    assert isinstance(app, RetryBusyDatabase)
    health = request(app, "GET", "/api/health")
    assert health.status_code == 200 and health.json() is True

