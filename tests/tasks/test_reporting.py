"""Progress reporting outside a Prefect run: log lines every 10% with the rate and the time left,
no bar when not a terminal."""

import logging

from baleen_tasks.reporting import Progress


class _Clock:
    """A clock that the test moves: ``now`` seconds since the start."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_logs_every_ten_percent_with_its_rate_and_the_time_left(caplog):
    caplog.set_level(logging.INFO, logger="openbaleen")
    clock = _Clock()
    with Progress(200, "encode shard 3", unit="passage", clock=clock) as progress:
        for _ in range(200):
            clock.now += 0.25  # 4 passages a second
            progress.update(1)
    lines = [r.getMessage() for r in caplog.records if r.name == "openbaleen"]
    assert len(lines) == 10
    assert lines[0] == "encode shard 3: 20 of 200 passage (10%), 4.0 passage/s, about 45 s left"
    assert lines[4] == "encode shard 3: 100 of 200 passage (50%), 4.0 passage/s, about 25 s left"
    assert lines[-1] == "encode shard 3: 200 of 200 passage (100%), 4.0 passage/s, in 50 s"


def test_progress_large_steps_log_once_per_step(caplog):
    caplog.set_level(logging.INFO, logger="openbaleen")
    clock = _Clock()
    with Progress(1000, "corpus", unit="B", clock=clock) as progress:
        clock.now = 90
        progress.update(450)
        clock.now = 200
        progress.update(550)
    assert [r.getMessage() for r in caplog.records if r.name == "openbaleen"] == [
        "corpus: 450 of 1,000 B (45%), 5.0 B/s, about 1 min 50 s left",
        "corpus: 1,000 of 1,000 B (100%), 5.0 B/s, in 3 min 20 s",
    ]


def test_no_bar_when_stderr_is_not_a_terminal():
    with Progress(10, "x") as progress:  # pytest captures stderr: not a terminal
        assert progress.bar.disable


def test_readable_renders_numbers_not_reprs():
    from baleen_tasks.reporting import readable

    assert readable({"2 hops": 0.525, "3 hops": 0.39999999999999997}) == "2 hops 0.525, 3 hops 0.4"
    assert readable(("claims", "missing_field")) == "claims/missing_field"
    assert readable({"claims_in": 1234, "rejects": {"gold_facts/unknown_title": 3}, "reconciles": True}) == "claims_in 1,234, rejects (gold_facts/unknown_title 3), reconciles yes"
    assert readable([{"hops": "all", "f1": 0.5}, {"hops": 2, "f1": None}]) == "hops all, f1 0.5; hops 2, f1 -"
