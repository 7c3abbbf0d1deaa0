"""The host profile: the call's result, its time attributed to the right functions and packages."""

import json
import sysconfig
import time
from pathlib import Path

import torch

from baleen_core.profiling import busy_seconds, device_profile_call, package_of, profile_call, region


def spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def spin_for(seconds: float) -> None:
    """Busy host work for at least ``seconds``, however fast the CPU (a fixed loop ran under 5 ms on a fast one)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        spin(1_000)


def encode_many(n: int) -> int:
    return sum(len(json.dumps({"i": i, "xs": list(range(20))})) for i in range(n))


def test_profile_call_returns_the_result_and_finds_the_heaviest_function():
    result, profile = profile_call(lambda: (spin(400_000), encode_many(20), torch.ones(3).tolist()), top=5)
    assert result[0] == sum(range(400_000)) and result[2] == [1.0, 1.0, 1.0]
    assert profile.top[0].function.startswith("spin (test_profiling.py:") and profile.top[0].calls == 1
    assert len(profile.top) == 5 and [f.own_seconds for f in profile.top] == sorted((f.own_seconds for f in profile.top), reverse=True)
    # own times add up to (at most) the wall time, and the test module's spin leads its package
    assert 0 < sum(profile.by_package.values()) <= profile.wall_seconds * 1.05
    assert "torch" in profile.by_package and "python" in profile.by_package
    shares = profile.as_dict()["by_package"]
    assert all(0 <= v["share"] <= 1.05 for v in shares.values())


def test_package_of_files_and_builtins():
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    assert package_of(str(stdlib / "json" / "encoder.py"), "encode") == "python"
    assert package_of("/x/.venv/lib/python3.11/site-packages/transformers/modeling_utils.py", "forward") == "transformers"
    assert package_of("/work/main/baleen_core/engine.py", "verify_claims") == "baleen_core"
    assert package_of("~", "<method 'tolist' of 'torch._C.TensorBase' objects>") == "torch"
    assert package_of("~", "<built-in method torch._C._nn.linear>") == "torch"
    assert package_of("~", "<built-in method builtins.sorted>") == "python"
    assert package_of("~", "<built-in method encode_batch>") == "python"
    assert package_of("~", "<built-in method time.perf_counter>") == "python"
    assert package_of("~", "<method 'disable' of '_lsprof.Profiler' objects>") == "python"
    assert package_of("/somewhere/else/script.py", "main") == "other"


def test_device_profile_call_times_each_region_and_the_union_of_device_intervals():
    a = torch.randn(256, 256)

    def work():
        with region("multiply"):
            for _ in range(20):
                a @ a
        with region("spin"):
            spin_for(0.02)
        with region("multiply"):
            a @ a
        return "done"

    result, profile = device_profile_call(work, torch.device("cpu"))
    assert result == "done" and list(profile.regions) == ["multiply", "spin"]
    assert profile.regions["multiply"].calls == 2 and profile.regions["spin"].calls == 1
    # spans sit inside the call; a CPU has no device time and no kernels
    assert 0 < sum(r.host_seconds for r in profile.regions.values()) <= profile.wall_seconds
    assert profile.regions["spin"].host_seconds > 0.005 and profile.device_busy_seconds == 0 and profile.top_kernels == []
    shown = profile.as_dict()
    assert shown["regions"]["spin"]["calls"] == 1 and shown["host_outside_regions_seconds"] >= 0


def test_the_wall_time_is_the_calls_not_the_profilers_start_and_stop():
    def work():
        with region("all"):
            spin(100_000)

    _, profile = device_profile_call(work, torch.device("cpu"))
    # the profiler's own start and stop take far longer than this call (a second against ms here)
    assert profile.regions["all"].host_seconds >= 0.9 * profile.wall_seconds


def test_busy_seconds_is_the_length_of_the_union_hand_worked():
    # [0, 4] ∪ [2, 5] ∪ [7, 8] ∪ [7.5, 7.6]: 5 + 1
    assert busy_seconds([(7, 8), (0, 4), (2, 5), (7.5, 7.6)]) == 6
    assert busy_seconds([]) == 0
