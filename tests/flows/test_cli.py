"""The baleen CLI's sql command: formats, read-only, readable errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

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


def test_sql_help_lists_every_view():
    from baleen_flows.cli import SQL_VIEWS
    from baleen_schemas import ARTIFACTS

    help_text = " ".join(CliRunner().invoke(app, ["sql", "--help"]).output.split())
    assert len(SQL_VIEWS) == len(ARTIFACTS) + 2
    assert all(view in help_text for view in SQL_VIEWS)


def test_format_table_truncates_long_cells_and_rows():
    text = format_table(["a"], [["x" * 100], ["y"], ["z"]], max_rows=2, max_width=10)
    assert "xxxxxxxxx…" in text and "(3 rows, 1 not shown)" in text
