"""Bad inputs, as a user meets them: the real `baleen` command in a subprocess, reporting to the
session's Prefect server. Each fails with exit code 1 and at most 3 lines on stderr, the first
naming the file and line (or the runs) and what is wrong; the run's log goes to stdout, without
tracebacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from baleen_core.demo_world import write_demo_world
from baleen_storage import ArtifactStore
from baleen_storage.catalog import query
from helpers import BALEEN_CLI, TINY


def _baleen(args: list[str], store, cwd) -> subprocess.CompletedProcess:
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "BALEEN_STORE": str(store), "PREFECT_API_URL": PREFECT_API_URL.value()}
    return subprocess.run([BALEEN_CLI, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def _assert_fails_in_a_few_lines(result: subprocess.CompletedProcess, first_line_start: str) -> list[str]:
    lines = result.stderr.splitlines()
    assert result.returncode == 1, result.stderr
    assert 1 <= len(lines) <= 3, result.stderr
    assert lines[0].startswith(first_line_start), lines[0]
    assert "Traceback" not in result.stdout + result.stderr  # tracebacks only with --debug (and in the UI's log)
    return lines


@pytest.fixture(scope="module")
def world(prefect_server, tmp_path_factory):
    """A tiny world and a store that holds its corpus."""
    root = tmp_path_factory.mktemp("cli-errors")
    world = write_demo_world(root / "world", TINY)
    store = root / "store"
    result = _baleen(["corpus", str(world)], store, root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""  # a run that went well leaves stderr empty: no bars, warnings or leak reports
    return root, world, store


def _copy(world, root, name):
    copy = root / name
    shutil.copytree(world, copy)
    return copy


def test_a_truncated_bz2_names_the_file(world):
    root, world, _ = world
    bad = _copy(world, root, "truncated")
    source = sorted((bad / "wiki").rglob("*.bz2"))[0]
    source.write_bytes(source.read_bytes()[:200])
    result = _baleen(["corpus", str(bad)], root / "store-truncated", root)
    _assert_fails_in_a_few_lines(result, f"error: {source.relative_to(bad / 'wiki')}:1: compressed stream ends early")
    assert "Finished in state Failed" in result.stdout  # the run's own log is still there, on stdout


def test_an_empty_claims_file_says_it_is_empty(world):
    root, world, store = world
    bad = _copy(world, root, "empty-claims")
    (bad / "claims_train.json").write_text("")
    result = _baleen(["claims", str(bad)], store, root)
    _assert_fails_in_a_few_lines(result, "error: claims_train.json: the file is empty")


def test_a_control_character_names_line_and_column(world):
    root, world, store = world
    bad = _copy(world, root, "control-character")
    claims = json.loads((bad / "claims_dev.json").read_text())
    text = json.dumps(claims, indent=1).replace('"claim": "', '"claim": "\t', 1)  # a raw tab inside a string
    (bad / "claims_dev.json").write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "\t" in row)
    result = _baleen(["claims", str(bad)], store, root)
    _assert_fails_in_a_few_lines(result, f"error: claims_dev.json:{line}: invalid JSON at column ")
    assert result.stderr.splitlines()[0].endswith(": Invalid control character")


def test_claims_of_another_corpus_fail_the_reject_limit(world):
    """The issue's silent bad outcome: a corpus file removed, most gold facts unknown: the claims
    run must not pass its gates."""
    root, world, _ = world
    partial = _copy(world, root, "partial-corpus")
    shutil.rmtree(partial / "wiki")  # only the BEIR part of the corpus is left
    store = root / "store-partial"
    assert _baleen(["corpus", str(partial)], store, root).returncode == 0
    result = _baleen(["claims", str(partial)], store, root)
    lines = _assert_fails_in_a_few_lines(result, "error: gate 'rejects' failed: at most 20% of an artifact's rows are quarantined")
    assert "artifact=gold_facts" in lines[0] and "main_reason=unknown_title" in lines[0]

    # the failed run stays in the store, marked failed, but never feeds a later stage: the next
    # stage names the failed run and its gate instead of failing on an empty input of its own
    failed = query(ArtifactStore(store), "SELECT DISTINCT run_id, status FROM artifacts WHERE producer = 'claims'").to_pylist()
    assert len(failed) == 1 and failed[0]["status"] == "failed"
    labels = _baleen(["labels", "--round", "0"], store, root)
    lines = _assert_fails_in_a_few_lines(labels, "error: no 'claims' artifact in the store at ")
    assert f"passed its gates: run {failed[0]['run_id']} (producer claims) failed its gate 'rejects': at most 20%" in lines[0]
    assert "hop_labels" not in labels.stdout + labels.stderr, "the labels stage ran on the failed claims"


def test_an_error_inside_a_flow_is_said_once_without_reprs(world):
    """A stage's input missing from the store: one `error:` line with the cause; the run's log on
    stdout ends in state Failed without repeating it (it did 3 times, twice as a repr, at f597893)."""
    root, _, _ = world
    result = _baleen(["labels", "--round", "0"], root / "store-empty", root)
    lines = _assert_fails_in_a_few_lines(result, "error: no 'claims' artifact in the store at ")
    output = result.stdout + result.stderr
    assert output.count("no 'claims' artifact") == 1, output
    assert "StoreError" not in output and "Finished in state Failed\n" in result.stdout
    assert "the flow run's log in the Prefect UI has it too" in lines[1]  # a flow run did start


def test_a_missing_dataset_directory_fails_before_any_flow_run_starts(world):
    root, _, store = world
    result = _baleen(["corpus", str(root / "no-such-dataset")], store, root)
    lines = _assert_fails_in_a_few_lines(result, f"error: dataset directory {root / 'no-such-dataset'} does not exist")
    assert result.stdout == "", "a flow run started"
    assert "Prefect UI" not in lines[1]  # no flow run, so no flow run's log to point at


def test_a_damaged_file_fails_only_what_reads_it_names_itself_and_is_repaired(world):
    """One claims part truncated. At f597893 a flow that never read it (its catalog refresh) failed,
    retried 3 times, and `baleen evaluate` failed at its report after the whole run, with no hint.
    Now the stage that reads it fails at once naming the file and the repair, the others pass, and
    `baleen store check` / `repair` find it and set it aside so that the claims flow makes it again."""
    root, world, store = world
    store = Path(shutil.copytree(store, root / "store-damaged"))
    assert _baleen(["claims", str(world)], store, root).returncode == 0
    (part,) = (store / "artifacts" / "claims").glob("run=*/producer=claims/part-*.parquet")
    part.write_bytes(part.read_bytes()[:-100])

    labels = _baleen(["labels", "--round", "0"], store, root)
    lines = _assert_fails_in_a_few_lines(labels, f"error: {part} is damaged (")
    assert "`baleen store repair` sets that run's step aside, then `baleen claims DATASET` makes it again" in lines[0]

    corpus = _baleen(["corpus", str(world)], store, root)  # reads no claims: unaffected, warned
    assert corpus.returncode == 0, corpus.stdout + corpus.stderr
    assert f"left out of the SQL views: {part} is damaged" in corpus.stdout and "Retry" not in corpus.stdout

    check = _baleen(["store", "check"], store, root)
    assert check.returncode == 1 and check.stdout.startswith(f"{part} is damaged")
    repair = _baleen(["store", "repair"], store, root)
    assert repair.returncode == 0 and "set aside claims of run" in repair.stdout and "`baleen claims DATASET` makes it again" in repair.stdout
    assert ArtifactStore(store).damaged() == []
    assert _baleen(["claims", str(world)], store, root).returncode == 0  # made again, not reused
    assert query(ArtifactStore(store), "SELECT count(*) AS n FROM claims").to_pylist() == [{"n": 42}]
