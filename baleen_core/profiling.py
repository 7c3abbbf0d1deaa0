"""Where a call's time goes on the host: cProfile, summarised by function and by package.

On a GPU the engine's kernels are queued asynchronously, so host time is what bounds claims/s once
the device is fast: tokenizing, building windows, Python loops, launching kernels and waiting for
them (time spent waiting shows up in the call that synchronises, e.g. ``Tensor.tolist``).
:func:`profile_call` runs a call under cProfile and returns its result with a
:class:`HostProfile`: the functions with the most own time and own time summed by package
(``torch``, ``transformers``, ``tokenizers``, ``baleen_core``, ``python`` for the interpreter's
built-ins and standard library), each also as a share of the wall time.
"""

from __future__ import annotations

import cProfile
import pstats
import re
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()
_SITE_PACKAGE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z0-9_]+)")
# built-ins carry no file; C functions of a package name it in their repr:
# "<method 'tolist' of 'torch._C.TensorBase' objects>", "<built-in method torch._C._nn.linear>"
_PYTHON_MODULES = frozenset(sys.stdlib_module_names) | {"builtins", "object"}
_BUILTIN_OWNER = re.compile(r"(?:of '|method |function )([A-Za-z_][A-Za-z0-9_]*)\.")


@dataclass(frozen=True)
class FunctionTime:
    function: str  # name (file:line)
    package: str
    calls: int
    own_seconds: float
    cumulative_seconds: float


@dataclass(frozen=True)
class HostProfile:
    wall_seconds: float
    by_package: dict[str, float]  # own seconds per package, largest first
    top: list[FunctionTime]  # the functions with the most own time, largest first

    def as_dict(self) -> dict:
        wall = max(self.wall_seconds, 1e-9)
        return {
            "wall_seconds": round(self.wall_seconds, 3),
            "by_package": {name: {"seconds": round(s, 3), "share": round(s / wall, 3)} for name, s in self.by_package.items()},
            "top": [{**asdict(f), "own_seconds": round(f.own_seconds, 4), "cumulative_seconds": round(f.cumulative_seconds, 4)} for f in self.top],
        }


def package_of(file: str, name: str) -> str:
    """The package a profiled function belongs to: the site-packages folder it lives in,
    ``baleen_core``, ``python`` (standard library and interpreter built-ins), else ``other``."""
    if file == "~":  # a C function: its owner is in its repr, when it has one
        owner = _BUILTIN_OWNER.search(name)
        return owner.group(1) if owner and owner.group(1) not in _PYTHON_MODULES else "python"
    if match := _SITE_PACKAGE.search(file):
        return match.group(1)
    parts = Path(file).parts
    if "baleen_core" in parts:
        return "baleen_core"
    try:
        Path(file).resolve().relative_to(_STDLIB)
        return "python"
    except (OSError, ValueError):
        return "other"


def profile_call(call: Callable[[], T], top: int = 25) -> tuple[T, HostProfile]:
    """Run ``call()`` under cProfile: its result, and where its host time went."""
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    try:
        result = call()
    finally:
        profiler.disable()
    wall = time.perf_counter() - started
    functions = []
    for (file, line, name), (_, calls, own, cumulative, _) in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        where = name if file == "~" else f"{name} ({Path(file).name}:{line})"
        functions.append(FunctionTime(where, package_of(file, name), calls, own, cumulative))
    packages: Counter[str] = Counter()
    for f in functions:
        packages[f.package] += f.own_seconds
    functions.sort(key=lambda f: f.own_seconds, reverse=True)
    return result, HostProfile(wall, dict(packages.most_common()), functions[:top])
