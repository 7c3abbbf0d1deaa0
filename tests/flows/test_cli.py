"""The baleen CLI's sql command: formats, read-only, readable errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from typer.testing import CliRunner

from baleen_core.config import ConfigError
from baleen_flows.cli import app, format_table
from baleen_storage import ArtifactStore


def _store_with_passages(path):
    store = ArtifactStore(path)
    with store.writer("passages", run_id="r1", producer="corpus", fingerprint="fp") as w:
        w.write({"pid": [1, 2], "title": ["A", "B, with comma"], "source": ["s", "s"], "source_id": [None, "x"],
                 "source_file": ["f", "f"], "source_line": [1, 2], "n_sentences": [1, 2], "n_chars": [3, 4]})
    return store


def test_sql_formats(tmp_path):
    _store_with_passages(tmp_path)
    runner = CliRunner()
    query = "SELECT pid, title FROM passages ORDER BY pid"
    as_json = runner.invoke(app, ["sql", query, "--store", str(tmp_path), "-f", "json"])
    assert as_json.exit_code == 0, as_json.output
    assert [json.loads(line) for line in as_json.stdout.splitlines()] == [{"pid": 1, "title": "A"}, {"pid": 2, "title": "B, with comma"}]
    as_csv = runner.invoke(app, ["sql", query, "--store", str(tmp_path), "-f", "csv"])
    assert as_csv.stdout == 'pid,title\n1,A\n2,"B, with comma"\n'  # LF line ends, for shells
    as_table = runner.invoke(app, ["sql", query, "--store", str(tmp_path)])
    assert "(2 rows)" in as_table.stdout


def test_sql_cannot_modify_and_errors_are_readable(tmp_path):
    _store_with_passages(tmp_path)
    result = CliRunner().invoke(app, ["sql", "DROP VIEW passages", "--store", str(tmp_path)])
    assert result.exit_code == 2 and "read-only" in result.output.lower()
    result = CliRunner().invoke(app, ["sql", "SELECT nope FROM passages", "--store", str(tmp_path)])
    assert result.exit_code == 2 and "SQL error" in result.output
    result = CliRunner().invoke(app, ["sql", f"COPY (SELECT 1) TO '{tmp_path / 'x.csv'}'", "--store", str(tmp_path)])
    assert result.exit_code == 2 and "COPY statements are not allowed" in result.output and not (tmp_path / "x.csv").exists()


def test_sql_shows_the_first_rows_of_a_huge_result_without_computing_the_rest(tmp_path):
    """`SELECT * FROM range(10000000)` printed 50 rows after 28 s at 3.6 GB (f597893): the table
    now fetches only the rows it shows (a row past them would raise), csv streams every row."""
    sql = "SELECT i, CASE WHEN i = 5000000 THEN error('row 5,000,000 was computed') ELSE i END AS v FROM range(10000000) t(i)"
    result = CliRunner().invoke(app, ["sql", sql, "--store", str(tmp_path), "--max-rows", "3"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split() for line in lines[2:5]] == [["0", "0"], ["1", "1"], ["2", "2"]]
    assert lines[5] == "(the first 3 rows; the query has more, not fetched: raise --max-rows, or stream them all with -f csv or -f json)"
    as_csv = CliRunner().invoke(app, ["sql", "SELECT i FROM range(50000) t(i)", "--store", str(tmp_path), "-f", "csv"])
    assert as_csv.output.splitlines() == ["i", *map(str, range(50000))]
    every_row = "SELECT CASE WHEN i = 40000 THEN error('row 40,000 was computed') ELSE i END AS v FROM range(50000) t(i)"
    reached = CliRunner().invoke(app, ["sql", every_row, "--store", str(tmp_path), "-f", "csv"])  # csv reads them all
    assert reached.exit_code == 2 and "row 40,000 was computed" in reached.output


def test_sql_help_lists_every_view():
    from baleen_flows.cli import SQL_VIEWS
    from baleen_schemas import ARTIFACTS

    help_text = " ".join(CliRunner().invoke(app, ["sql", "--help"]).output.split())
    assert len(SQL_VIEWS) == len(ARTIFACTS) + 2
    assert all(view in help_text for view in SQL_VIEWS)


def test_format_table_truncates_long_cells_and_rows():
    text = format_table(["a"], [["x" * 100], ["y"], ["z"]], max_rows=2, max_width=10)
    assert "xxxxxxxxx…" in text and "(3 rows, 1 not shown)" in text


def test_a_bad_config_fails_in_one_line_before_any_flow_starts(tmp_path, capsys):
    from baleen_flows.cli import main

    config = tmp_path / "run.yaml"
    config.write_text("corpus:\n  batch_passage: 3\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["corpus", str(tmp_path / "no-such-dataset"), "--config", str(config), "--store", str(tmp_path / "store")])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == f"error: {config}: corpus.batch_passage: unknown key (did you mean 'batch_passages'?)"
    assert len(err) == 2 and "--debug" in err[1]
    assert not (tmp_path / "store").exists()  # nothing ran
    with pytest.raises(ConfigError):  # --debug: the exception itself, with its traceback
        main(["corpus", str(tmp_path / "no-such-dataset"), "--config", str(config), "--debug"])


class _RefWithRows:
    rows, path = 3, "somewhere"


def test_a_store_root_in_the_config_is_the_store_the_command_reports(tmp_path, monkeypatch, capsys):
    """The flows write where the config's store_root says; the artifact list, the store line and
    the SQL hint must point there too, not at the default store."""
    from baleen_flows.cli import _config_arg, _report

    monkeypatch.setenv("BALEEN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BALEEN_STORE", raising=False)
    elsewhere = tmp_path / "elsewhere"
    config = tmp_path / "run.yaml"
    config.write_text(f"store_root: {elsewhere}\n")
    _config_arg(config)
    _report({"training/flipr_index": _RefWithRows()})
    out = capsys.readouterr().out
    assert f"baleen sql --store {elsewhere} " in out and f'baleen search --store {elsewhere} "' in out
    assert f"(store: {elsewhere}; DuckDB catalog: {elsewhere / 'catalog.duckdb'})" in out

    monkeypatch.delenv("BALEEN_STORE")
    config.write_text("labels:\n  rounds: 1\n")  # no store_root: the default store, no --store in the hint
    _config_arg(config)
    _report({})
    out = capsys.readouterr().out
    assert 'baleen sql "' in out and f"(store: {tmp_path / 'home' / 'store'};" in out


def test_search_and_verify_read_their_config_once_and_report_on_its_store(tmp_path, monkeypatch):
    """The commands that open the store themselves validate the file once and use its store_root;
    without a config they take the defaults and leave the store as it was."""
    from baleen_core.config import BaleenConfig
    from baleen_flows.cli import _loaded_config

    loads = []
    real_load = BaleenConfig.load.__func__
    monkeypatch.setattr(BaleenConfig, "load", classmethod(lambda cls, path: loads.append(path) or real_load(cls, path)))
    monkeypatch.delenv("BALEEN_STORE", raising=False)
    elsewhere = tmp_path / "elsewhere"
    config = tmp_path / "run.yaml"
    config.write_text(f"store_root: {elsewhere}\nevaluation:\n  depth: 40\n")
    cfg = _loaded_config(config)
    assert loads == [config.resolve()] and cfg.evaluation.depth == 40
    assert cfg.store_root == elsewhere and os.environ["BALEEN_STORE"] == str(elsewhere)

    monkeypatch.delenv("BALEEN_STORE")
    assert _loaded_config(None).evaluation.depth == BaleenConfig().evaluation.depth
    assert "BALEEN_STORE" not in os.environ


def test_the_temporary_server_runs_no_automation_services_but_still_records_task_runs():
    """Prefect's trigger services are SQLite writers that contend with the task-run recorder;
    the runtime defaults turn them off. Checked in a fresh process, as the CLI starts, through
    Prefect's own service registry (so a misspelt setting fails here); a value the user exported
    wins."""
    probe = (
        "from baleen_core.runtime import apply_runtime_defaults; apply_runtime_defaults(); "
        "from prefect.server.events.services.actions import Actions; "
        "from prefect.server.events.services.triggers import ReactiveTriggers; "
        "from prefect.server.services.task_run_recorder import TaskRunRecorder; "
        "print(ReactiveTriggers.enabled(), Actions.enabled(), TaskRunRecorder.enabled())"
    )

    def services(**exported: str) -> list[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | exported
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout.split()

    assert services() == ["False", "False", "True"]
    assert services(PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED="true") == ["True", "True", "True"]


def test_flow_runs_on_the_temporary_server_send_no_heartbeats(tmp_path):
    """Nothing watches heartbeats on a command's temporary server, and each flow run that beats
    waits up to a second for its heartbeat thread as it ends: a flow run there has heartbeats
    off (Prefect's own default would send one every 180 s). Checked in a fresh process, from
    inside a flow run, as the CLI runs it."""
    probe = (
        "from pathlib import Path; from baleen_core.runtime import apply_runtime_defaults; apply_runtime_defaults(); "
        "from prefect import flow; from prefect.settings import get_current_settings; "
        "from baleen_flows.temporary_server import prefect_api; "
        "beats = flow(lambda: get_current_settings().flows.heartbeat_frequency, name='beats'); "
        f"api = prefect_api(Path({str(tmp_path / 'prefect')!r})); api.__enter__(); print(beats()); api.__exit__(None, None, None)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | {"BALEEN_HOME": str(tmp_path)}
    assert subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True).stdout.split()[-1] == "None"
