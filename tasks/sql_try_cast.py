"""DuckDB's ``TRY_CAST`` for SQLAlchemy, compiled by a function that holds no DuckDB object.

duckdb_engine registers its own at import, ``@compiles(TryCast, "duckdb")``: that stores a function
whose globals are duckdb_engine's namespace (and through it the ``duckdb`` module, its nanobind
types and functions) in the dict of SQLAlchemy's ``TryCast`` class. In a process that has imported
Great Expectations, SQLAlchemy's class graph is still alive when the interpreter tears down the
``_duckdb`` extension, so nanobind reported every DuckDB type, function and ``DuckDBPyType``
constant as leaked, ~50 lines on stderr at every exit (issue 16). :mod:`baleen_tasks.gx_duckdb`
registers :func:`visit_try_cast` in its place right after importing duckdb_engine; this module
must therefore import nothing that reaches DuckDB.
"""

from __future__ import annotations

from typing import Any


def visit_try_cast(element: Any, compiler: Any, **kw: Any) -> str:
    """``TRY_CAST(<expr> AS <type>)``, as duckdb_engine compiles it."""
    return f"TRY_CAST({compiler.process(element.clause, **kw)} AS {compiler.process(element.typeclause, **kw)})"
