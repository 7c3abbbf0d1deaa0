"""Progress reporting outside a Prefect run: log lines every 10%, no bar when not a terminal."""

import logging

from baleen_tasks.reporting import Progress


def test_progress_logs_every_ten_percent(caplog):
    caplog.set_level(logging.INFO, logger="openbaleen")
    with Progress(200, "encode shard 3", unit="passage") as progress:
        for _ in range(200):
            progress.update(1)
    lines = [r.getMessage() for r in caplog.records if r.name == "openbaleen"]
    assert len(lines) == 10
    assert lines[0] == "encode shard 3: 10% (20 of 200 passage)"
    assert lines[-1] == "encode shard 3: 100% (200 of 200 passage)"


def test_progress_large_steps_log_once_per_step(caplog):
    caplog.set_level(logging.INFO, logger="openbaleen")
    with Progress(1000, "corpus", unit="B") as progress:
        progress.update(450)
        progress.update(550)
    assert [r.getMessage() for r in caplog.records if r.name == "openbaleen"] == ["corpus: 45% (450 of 1,000 B)", "corpus: 100% (1,000 of 1,000 B)"]


def test_no_bar_when_stderr_is_not_a_terminal():
    with Progress(10, "x") as progress:  # pytest captures stderr: not a terminal
        assert progress.bar.disable


def test_readable_renders_numbers_not_reprs():
    from baleen_tasks.reporting import readable

    assert readable({"2 hops": 0.525, "3 hops": 0.39999999999999997}) == "2 hops 0.525, 3 hops 0.4"
    assert readable(("claims", "missing_field")) == "claims/missing_field"
    assert readable({"claims_in": 1234, "rejects": {"gold_facts/unknown_title": 3}, "reconciles": True}) == "claims_in 1,234, rejects (gold_facts/unknown_title 3), reconciles yes"
    assert readable([{"hops": "all", "f1": 0.5}, {"hops": 2, "f1": None}]) == "hops all, f1 0.5; hops 2, f1 -"
