"""Processes that used DuckDB and the GX gates exit quietly: nothing keeps DuckDB's nanobind
objects alive until the ``_duckdb`` extension is torn down, so nanobind has no leak to report
("nanobind: leaked 76 instances!" and ~50 more lines on stderr at every exit, issue 16)."""

from __future__ import annotations

import os
import subprocess
import sys
import types

from baleen_core.demo_world import write_demo_world
from helpers import BALEEN_CLI, TINY

_DUCKDB_PACKAGES = {"duckdb", "_duckdb", "duckdb_engine"}


def _reaches_duckdb(function) -> bool:
    """Whether ``function``'s globals hold a DuckDB or duckdb_engine module or object."""
    for value in getattr(function, "__globals__", {}).values():
        name = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
        if isinstance(name, str) and name.split(".")[0] in _DUCKDB_PACKAGES:
            return True
    return False


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_no_sqlalchemy_class_compiles_with_a_function_that_reaches_duckdb():
    """SQLAlchemy's own classes outlive the interpreter's teardown once GX is imported: a compiler
    that duckdb_engine registers on one of them (TryCast) kept the duckdb module alive."""
    import baleen_tasks.gx_duckdb  # noqa: F401  (imports duckdb_engine, which registers its compilers)
    from sqlalchemy.sql.elements import ClauseElement
    from sqlalchemy.sql.type_api import TypeEngine

    offenders = []
    for base in (ClauseElement, TypeEngine):
        for cls in {base, *_subclasses(base)}:
            dispatcher = cls.__dict__.get("_compiler_dispatcher")
            if dispatcher is None or not cls.__module__.startswith("sqlalchemy."):
                continue
            offenders += [f"{cls.__qualname__}[{dialect!r}] = {fn.__module__}.{fn.__qualname__}" for dialect, fn in dispatcher.specs.items() if _reaches_duckdb(fn)]
    assert not offenders, offenders


def test_importing_the_gates_exits_without_nanobind_leak_reports():
    """The smallest process that had the leak: duckdb_engine and GX imported, nothing run."""
    result = subprocess.run([sys.executable, "-c", "import baleen_tasks.gates"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "nanobind" not in result.stderr, result.stderr[:2000]


_GATE_BESIDE_TORCH = """
import sys
import torch  # noqa: F401  (as in the index, labels, train and evaluate flows)
from baleen_storage import ArtifactStore
from baleen_tasks.gates import run_gate

store = ArtifactStore(sys.argv[1])
with store.writer("sentences", run_id="r1", producer="corpus", fingerprint="fp") as w:
    w.write({"pid": [1, 1, 2], "sid": [0, 1, 0], "text": ["a", "b", "c"]})
assert run_gate(store, "sentences", {"sentences": w.ref}).success
"""


def test_a_gate_run_beside_torch_exits_without_nanobind_leak_reports(tmp_path):
    """GX's current context (the last gate's, with its DuckDB datasource) must not outlive the gate."""
    result = subprocess.run([sys.executable, "-c", _GATE_BESIDE_TORCH, str(tmp_path / "store")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "nanobind" not in result.stderr, result.stderr[:2000]


def test_a_cli_run_through_the_gates_and_the_catalog_exits_without_nanobind_leak_reports(prefect_server, tmp_path):
    """`baleen corpus`: ingest, three GX gates on DuckDB views, then the DuckDB catalog."""
    from prefect.settings import PREFECT_API_URL

    world = write_demo_world(tmp_path / "world", TINY)
    store = tmp_path / "store"
    env = {**os.environ, "BALEEN_STORE": str(store), "PREFECT_API_URL": PREFECT_API_URL.value()}
    result = subprocess.run([BALEEN_CLI, "corpus", str(world)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert sorted(p.name for p in store.glob("reports/*/validation/corpus/*.summary.json")) == ["passages.summary.json", "rejects.summary.json", "sentences.summary.json"]
    assert (store / "catalog.duckdb").exists()
    assert "nanobind" not in result.stderr, result.stderr[:2000]
