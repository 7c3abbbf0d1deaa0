"""Let Great Expectations' SQL engine run on DuckDB.

duckdb_engine hands SQLAlchemy cursors that share one DuckDB connection, so any statement run on
that connection clears a pending result. GX executes a metric query, releases the connection (and
SQLAlchemy issues ROLLBACK on release), *then* fetches the rows: it gets nothing and every
expectation errors. Postgres hides this because psycopg2 buffers rows client-side. This dialect
does the same: each cursor fetches its (small, aggregate) result at execute time.

Registered as ``duckdb+buffered://``; GX still sees the dialect name ``duckdb``.
"""

from __future__ import annotations

from typing import Any

from duckdb_engine import Dialect as DuckDBDialect
from sqlalchemy.dialects import registry
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import TryCast

from baleen_tasks.sql_try_cast import visit_try_cast

SCHEME = "duckdb+buffered"

# Replace duckdb_engine's TRY_CAST compiler (registered on SQLAlchemy's own TryCast class when
# duckdb_engine was imported above) with the same SQL from a module that holds no DuckDB object:
# its function kept the duckdb module alive through SQLAlchemy's classes, which outlive the
# interpreter's teardown once GX is imported, and nanobind then reported DuckDB's types as leaked
# at every exit (issue 16; see baleen_tasks.sql_try_cast).
compiles(TryCast, "duckdb")(visit_try_cast)


class _BufferedCursor:
    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor
        self._rows: list = []
        self.description = None
        self.rowcount = -1

    def execute(self, statement: str, parameters: Any = None, context: Any = None) -> None:
        self._cursor.execute(statement, parameters)
        self.description = self._cursor.description
        self._rows = self._cursor.fetchall() if self.description else []
        self.rowcount = len(self._rows) if self.description else -1

    def executemany(self, statement: str, parameters: Any = None, context: Any = None) -> None:
        self._cursor.executemany(statement, parameters)
        self.description, self._rows = None, []

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def fetchmany(self, size: int = 1) -> list:
        out, self._rows = self._rows[:size], self._rows[size:]
        return out

    def fetchall(self) -> list:
        out, self._rows = self._rows, []
        return out

    def close(self) -> None:
        self._rows = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class BufferedDuckDBDialect(DuckDBDialect):
    # Declared explicitly (as duckdb_engine's own dialect does not) so SQLAlchemy does not warn.
    supports_statement_cache = False

    def connect(self, *args: Any, **kwargs: Any) -> Any:
        connection = super().connect(*args, **kwargs)
        make_cursor = connection.cursor
        connection.cursor = lambda: _BufferedCursor(make_cursor())
        return connection


registry.register("duckdb.buffered", __name__, "BufferedDuckDBDialect")
