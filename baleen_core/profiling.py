"""Where a call's time goes: on the host (cProfile, by function and by package) and on the device
(torch.profiler, by named region and by kernel).

On a GPU the engine's kernels are queued asynchronously, so host time is what bounds claims/s once
the device is fast: tokenizing, building windows, Python loops, launching kernels and waiting for
them (time spent waiting shows up in the call that synchronises, e.g. ``Tensor.tolist``).
:func:`profile_call` runs a call under cProfile and returns its result with a
:class:`HostProfile`: the functions with the most own time and own time summed by package
(``torch``, ``transformers``, ``tokenizers``, ``baleen_core``, ``python`` for the interpreter's
built-ins and standard library), each also as a share of the wall time.
:func:`device_profile_call` says whether the device or the host bounds the call: the share of the
wall time the device was busy, and host and device time per :func:`region` of the engine.
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

import torch

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


# ---- where a call's time goes on the device ------------------------------------------------------

#: Prefix of the named spans (:func:`region`) that :func:`device_profile_call` reports.
REGION_PREFIX = "baleen."


def region(name: str) -> torch.profiler.record_function:
    """A named span of work (the engine's ``retrieve``, ``stage1``, ``stage2``, ``reader``) that
    :func:`device_profile_call` attributes host and device time to; with no profiler running it
    costs a few microseconds."""
    return torch.profiler.record_function(REGION_PREFIX + name)


@dataclass(frozen=True)
class RegionTime:
    calls: int
    host_seconds: float  # the span's wall time on the host
    device_seconds: float  # kernels and copies launched inside it (0 on a CPU)


@dataclass(frozen=True)
class DeviceProfile:
    wall_seconds: float
    device_busy_seconds: float  # the union of every kernel's, copy's and memset's time on the device
    regions: dict[str, RegionTime]  # by name without the prefix, in order of first use
    top_kernels: list[tuple[str, int, float]]  # (name, calls, seconds), the most device time first

    def as_dict(self) -> dict:
        wall = max(self.wall_seconds, 1e-9)
        return {
            "wall_seconds": round(self.wall_seconds, 3),
            "device_busy_seconds": round(self.device_busy_seconds, 3),
            "device_busy_share": round(self.device_busy_seconds / wall, 3),
            "regions": {
                name: {"calls": r.calls, "host_seconds": round(r.host_seconds, 3), "host_share": round(r.host_seconds / wall, 3), "device_seconds": round(r.device_seconds, 3)}
                for name, r in self.regions.items()
            },
            "host_outside_regions_seconds": round(self.wall_seconds - sum(r.host_seconds for r in self.regions.values()), 3),
            "top_kernels": [{"kernel": name[:160], "calls": calls, "seconds": round(seconds, 4)} for name, calls, seconds in self.top_kernels],
        }


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` intervals (in the intervals' unit)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def device_profile_call(call: Callable[[], T], device: torch.device, top: int = 15) -> tuple[T, DeviceProfile]:
    """Run ``call()`` under torch.profiler (CPU and, on a GPU, CUDA activity), waiting for the
    device at the end: its result, how busy the device was over the wall time, host and device
    time per :func:`region`, and the kernels with the most device time. A GPU busy most of the
    wall time bounds the speed by its kernels; one idle most of it, by the host."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler:
        started = time.perf_counter()  # inside: the profiler's own start and stop (a second or so) are not the call's
        result = call()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        wall = time.perf_counter() - started
    regions: dict[str, list[float]] = {}
    intervals: list[tuple[float, float]] = []
    kernels: dict[str, list[float]] = {}
    for event in profiler.events():
        name = event.name
        if event.device_type == torch.autograd.DeviceType.CPU:
            if name.startswith(REGION_PREFIX):
                spent = regions.setdefault(name.removeprefix(REGION_PREFIX), [0, 0.0, 0.0])
                spent[0] += 1
                spent[1] += event.time_range.elapsed_us() / 1e6
                spent[2] += event.device_time_total / 1e6
        elif not name.startswith(REGION_PREFIX):  # a kernel, copy or memset (not a span's device-side mirror)
            intervals.append((event.time_range.start, event.time_range.end))
            spent = kernels.setdefault(name, [0, 0.0])
            spent[0] += 1
            spent[1] += event.time_range.elapsed_us() / 1e6
    ranked = sorted(((n, int(c), s) for n, (c, s) in kernels.items()), key=lambda k: k[2], reverse=True)
    return result, DeviceProfile(
        wall, busy_seconds(intervals) / 1e6, {n: RegionTime(int(c), h, d) for n, (c, h, d) in regions.items()}, ranked[:top]
    )
