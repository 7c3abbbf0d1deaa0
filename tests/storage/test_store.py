"""The artifact store: atomic publish, manifests, reuse by fingerprint, release by gates, safe paths, streaming."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import BaseModel, Field

from baleen_storage import ArtifactStore, StoreError, fingerprint, fingerprint_params, new_run_id
from baleen_storage.store import UnreleasedArtifact, published_manifest


def _passages(n, start=0):
    return {
        "pid": list(range(start, start + n)),
        "title": [f"T{i}" for i in range(start, start + n)],
        "source": ["s"] * n,
        "source_id": [None] * n,
        "source_file": ["f"] * n,
        "source_line": list(range(n)),
        "n_sentences": [1] * n,
        "n_chars": [3] * n,
    }


def test_publish_writes_parquet_and_manifest(store):
    run = new_run_id()
    with store.writer("passages", run_id=run, producer="corpus", fingerprint="fp1", inputs={"x": "1"}, params={"k": 2}) as w:
        w.write(_passages(3))
        w.write(pa.Table.from_pydict(_passages(2, start=3)))
    ref = w.ref
    assert ref.rows == 5 and ref.manifest.schema_version == 1 and ref.manifest.inputs == {"x": "1"}
    assert ref.path == store.root / "artifacts" / "passages" / f"run={run}" / "producer=corpus"
    assert store.read_table(ref).column("pid").to_pylist() == [0, 1, 2, 3, 4]
    picked = store.read_rows(ref, "pid", [4, 1, 99], ["pid", "title"])  # across both written parts
    assert sorted(picked.to_pylist(), key=lambda r: r["pid"]) == [{"pid": 1, "title": "T1"}, {"pid": 4, "title": "T4"}]
    assert store.read_rows(ref, "title", []).num_rows == 0
    assert store.find("passages", "corpus", "fp1").path == ref.path
    assert store.find("passages", "corpus", "other") is None
    assert store.find_outputs(["passages", "sentences"], "corpus", "fp1") is None


def test_failed_write_publishes_nothing(store):
    with pytest.raises(RuntimeError):
        with store.writer("passages", run_id="r1", producer="corpus", fingerprint="fp") as w:
            w.write(_passages(2))
            raise RuntimeError("killed mid-write")
    assert store.refs("passages") == []
    assert not any((store.root / "artifacts").rglob("*.parquet"))
    assert list((store.root / "tmp").iterdir()) == []


def test_rows_that_do_not_match_the_schema_fail_at_write_time(store):
    with pytest.raises(StoreError, match="do not match its schema"):
        with store.writer("passages", run_id="r1", producer="corpus", fingerprint="fp") as w:
            w.write(pa.table({"pid": ["not an int"]}))


def test_nulls_in_required_columns_are_refused(store):
    with pytest.raises(Exception, match="non-nullable"):
        with store.writer("sentences", run_id="r1", producer="corpus", fingerprint="fp") as w:
            w.write({"pid": [1], "sid": [0], "text": [None]})
    assert store.refs("sentences") == []


def test_files_rotate_and_stream_in_batches(tmp_path):
    small = ArtifactStore(tmp_path, max_rows_per_file=4, row_group_size=2)
    with small.writer("passages", run_id="r", producer="corpus", fingerprint="fp") as w:
        for start in range(0, 10, 3):
            w.write(_passages(min(3, 10 - start), start=start))
    assert len(w.ref.files) == 3  # 4 + 4 + 2 rows
    batches = list(small.iter_batches(w.ref, columns=["pid"], batch_size=3))
    assert sum(b.num_rows for b in batches) == 10


def test_rewrite_in_the_same_run_replaces_atomically(store):
    for n in (2, 5):  # a retried task: the same inputs, so the same fingerprint
        with store.writer("passages", run_id="r", producer="corpus", fingerprint="fp") as w:
            w.write(_passages(n))
    (ref,) = store.refs("passages", unreleased=True)
    assert ref.rows == 5 and ref.fingerprint == "fp"


def test_another_artifact_in_a_published_slot_is_refused_not_swapped_in(store):
    from baleen_storage import StoreError

    with store.writer("passages", run_id="r", producer="corpus", fingerprint="fp1") as w:
        w.write(_passages(2))
    with pytest.raises(StoreError, match="already holds a different 'passages' of run 'r'.*its own producer"):
        with store.writer("passages", run_id="r", producer="corpus", fingerprint="fp2") as w:
            w.write(_passages(5))
    (ref,) = store.refs("passages", unreleased=True)
    assert ref.rows == 2 and ref.fingerprint == "fp1"  # the first is untouched
    assert not list((store.root / "tmp").iterdir())  # and the refused one left nothing behind


def test_paths_cannot_escape_the_store(store):
    with pytest.raises(StoreError, match="leaves the store root"):
        store.safe_path("../../etc/passwd")
    with pytest.raises(StoreError, match="not a safe name"):
        store.writer("passages", run_id="../evil", producer="corpus", fingerprint="fp")
    with pytest.raises(StoreError, match="not a safe name"):
        store.report_path("run/../..", "x")
    with pytest.raises(KeyError, match="known artifacts"):
        store.writer("nope", run_id="r", producer="p", fingerprint="fp")


def test_latest_explains_what_to_run(store):
    with pytest.raises(StoreError, match="run the step that produces it first"):
        store.latest("passages")


def _verdict(store, ref, success: bool, expectation: str = "passages holds at least one row") -> None:
    """What a gate records (``baleen_tasks.gates.run_gate``), without running GX."""
    run, producer = ref.manifest.run_id, ref.manifest.producer
    failures = [] if success else [{"expectation": expectation, "unexpected": 3, "examples": []}]
    store.write_gate_result(run, producer, ref.name, "{}", {"artifact": ref.name, "run_id": run, "producer": producer, "success": success, "failures": failures})


def _corpus_step(store, run, n=2):
    """The corpus step's three gated outputs of one run, none validated yet."""
    refs = {}
    for name, rows in (("passages", _passages(n)), ("sentences", {"pid": list(range(n)), "sid": [0] * n, "text": ["x"] * n})):
        with store.writer(name, run_id=run, producer="corpus", fingerprint=f"fp-{n}") as w:
            w.write(rows)
        refs[name] = w.ref
    return refs


def test_a_gated_step_is_held_back_until_every_gate_passed(store):
    refs = _corpus_step(store, "r1")
    assert store.release_state("r1", "corpus").state == "pending"
    assert store.refs("passages") == [] and store.refs("sentences") == []
    with pytest.raises(UnreleasedArtifact, match=r"run r1 \(producer corpus\) stopped before its gate 'passages', 'sentences' ran: run that step again"):
        store.latest("passages")
    with pytest.raises(UnreleasedArtifact, match="stopped before its gate"):
        store.get("sentences", "r1", "corpus")
    assert store.find("passages", "corpus", "fp-2").path == refs["passages"].path  # for reuse: the rerun gates it
    _verdict(store, refs["passages"], True)
    assert store.refs("passages") == [], "one gate of two passed: its sibling is not validated yet"
    _verdict(store, refs["sentences"], True)
    assert store.latest("passages").path == refs["passages"].path
    assert store.get("sentences", "r1", "corpus").path == refs["sentences"].path


def test_a_failed_gate_holds_back_the_whole_step_and_is_named_downstream(store):
    good = _corpus_step(store, "r1")
    for ref in good.values():
        _verdict(store, ref, True)
    bad = _corpus_step(store, "r2", n=3)
    _verdict(store, bad["passages"], True)
    _verdict(store, bad["sentences"], False, "sentence ids run 0..n-1 without gaps in every passage")
    state = store.release_state("r2", "corpus")
    assert state.state == "failed" and state.failed_gate == "sentences"
    # the passages passed their own gate, but are the failed step's: never the newest
    assert [r.manifest.run_id for r in store.refs("passages")] == ["r1"]
    assert store.latest("passages").manifest.run_id == "r1"
    assert [r.manifest.run_id for r in store.refs("passages", unreleased=True)] == ["r1", "r2"]  # still in the store
    with pytest.raises(UnreleasedArtifact, match=r"'passages' of run r2 \(producer corpus\) failed its gate 'sentences': sentence ids run"):
        store.get("passages", "r2", "corpus")
    assert store.get("passages", "r2", "corpus", unreleased=True).rows == 3
    # with no released run left, the error names the failed one, its gate and what to do
    store.write_gate_result("r1", "corpus", "passages", "{}", {"success": False, "failures": [{"expectation": "titles are unique"}]})
    with pytest.raises(UnreleasedArtifact, match=r"no 'passages' artifact .* passed its gates: run r2 \(producer corpus\) failed its gate 'sentences'.*fix its input and run that step again"):
        store.latest("passages")


def test_a_passing_verdict_after_a_failed_one_releases_the_step(store):
    refs = _corpus_step(store, "r1")
    _verdict(store, refs["passages"], True)
    _verdict(store, refs["sentences"], False)
    assert store.find("sentences", "corpus", "fp-2").path == refs["sentences"].path  # reused by the rerun, and gated again
    _verdict(store, refs["sentences"], True)  # e.g. under a raised gates.max_reject_share
    assert store.latest("sentences").path == refs["sentences"].path


def test_ungated_artifacts_and_manifests_from_before_gates_held_data_back_are_visible(store):
    import json

    with store.writer("training_steps", run_id="r1", producer="flipr-r0", fingerprint="fp") as w:
        w.write({"model": ["flipr"], "round": [0], "epoch": [0], "step": [1], "loss": [0.5], "val_loss": [None], "lr": [1e-4], "examples": [8], "seconds": [0.1]})
    assert not w.ref.manifest.gated and store.latest("training_steps").path == w.ref.path
    old = _corpus_step(store, "r0")["passages"]
    manifest = json.loads((old.path / "_manifest.json").read_text())
    for name in ("passages", "sentences"):  # written before the field existed: no "gated"
        path = old.path.parent.parent.parent / name / "run=r0" / "producer=corpus" / "_manifest.json"
        path.write_text(json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "gated"}))
    assert manifest["gated"] is True
    assert store.latest("passages").manifest.run_id == "r0"


def test_the_catalog_shows_each_artifacts_release_state(store):
    from baleen_storage.catalog import query

    for run, verdicts in (("r1", (True, True)), ("r2", (True, False)), ("r3", None)):
        refs = _corpus_step(store, run)
        for ref, success in zip(refs.values(), verdicts or (), strict=False):
            _verdict(store, ref, success)
    rows = query(store, "SELECT run_id, name, status FROM artifacts ORDER BY run_id, name").to_pylist()
    assert [(r["run_id"], r["name"], r["status"]) for r in rows] == [
        ("r1", "passages", "released"), ("r1", "sentences", "released"),
        ("r2", "passages", "failed"), ("r2", "sentences", "failed"),
        ("r3", "passages", "pending"), ("r3", "sentences", "pending"),
    ]


def test_fingerprint_is_order_independent_and_sensitive():
    assert fingerprint(a=1, b=[1, 2]) == fingerprint(b=[1, 2], a=1) != fingerprint(a=1, b=[2, 1])


def test_a_setting_added_later_changes_fingerprints_only_when_it_is_set():
    class Settings(BaseModel):
        depth: int = 100
        fusion: str = "none"  # added after stores recorded fingerprints without it

    assert fingerprint_params(Settings(), added_later=["fusion"]) == {"depth": 100}  # as before the setting existed
    assert fingerprint_params(Settings(fusion="bm25"), added_later=["fusion"]) == {"depth": 100, "fusion": "bm25"}
    assert fingerprint_params(Settings(depth=5), include={"fusion"}) == {"fusion": "none"}  # not added later: always there
    assert fingerprint_params(Settings(depth=5), include={"depth"}, added_later=["fusion"]) == {"depth": 5}

    class WithFloors(Settings):
        floors: dict[int, float] = Field(default_factory=dict)  # a default made by a factory, added later too

    assert fingerprint_params(WithFloors(), added_later=["fusion", "floors"]) == {"depth": 100}
    assert fingerprint_params(WithFloors(floors={3: -1.0}), added_later=["fusion", "floors"]) == {"depth": 100, "floors": {"3": -1.0}}
    assert fingerprint_params(WithFloors(fusion="bm25"), added_later=["floors"], exclude={"depth"}) == {"fusion": "bm25"}


def test_run_ids_sort_by_time_and_are_unique():
    ids = {new_run_id() for _ in range(100)}
    assert len(ids) == 100 and all(len(i.split("-")) == 2 for i in ids)


def _checkpoint(store: ArtifactStore, run: str, weights: bytes = b"w") -> Path:
    with store.file_writer("flipr_checkpoint", run_id=run, producer="flipr-r0", fingerprint=f"checkpoint-{run}") as w:
        (w.dir / "flipr_head.pt").write_bytes(weights)
    return w.ref.path


def test_a_recorded_artifact_path_is_read_from_a_copy_of_the_store(tmp_path):
    """A manifest records absolute paths; a store copied (or moved) elsewhere reads its own copy of
    the artifact they name, and any path that names no artifact of it as recorded."""
    original = ArtifactStore(tmp_path / "artifacts" / "a")  # a folder named "artifacts" above the root must not confuse it
    recorded = _checkpoint(original, "20260101T000000Z-aaaaaa")
    shutil.copytree(original.root, tmp_path / "b")
    copy = ArtifactStore(tmp_path / "b")
    assert copy.relocated(recorded) == copy.root / recorded.relative_to(original.root)
    assert copy.relocated(str(recorded / "flipr_head.pt")) == copy.root / recorded.relative_to(original.root) / "flipr_head.pt"
    assert original.relocated(recorded) == recorded
    elsewhere = tmp_path / "elsewhere" / "model"
    assert copy.relocated(elsewhere) == elsewhere
    only_in_original = _checkpoint(original, "20260102T000000Z-bbbbbb")
    assert copy.relocated(only_in_original) == only_in_original  # the copy does not hold it


def test_published_manifest_names_only_published_artifacts(tmp_path):
    store = ArtifactStore(tmp_path)
    folder = _checkpoint(store, "20260101T000000Z-aaaaaa")
    assert published_manifest(folder).fingerprint == "checkpoint-20260101T000000Z-aaaaaa"
    assert published_manifest(folder / "flipr_head.pt") is None and published_manifest(tmp_path / "missing") is None


def test_a_step_looked_up_by_several_fingerprints_takes_the_first_that_has_all_outputs(store):
    """A step renamed (its fingerprint computed another way) is still found under its old name;
    the new name wins when both exist; a step with an output missing under a name is not found by it."""
    for run, fp in (("20260101T000000Z-aaaaaa", "old"), ("20260102T000000Z-bbbbbb", "new")):
        with store.file_writer("flipr_checkpoint", run_id=run, producer="flipr-r0", fingerprint=fp) as w:
            (w.dir / "flipr_head.pt").write_bytes(b"w")
    with store.writer("training_steps", run_id="20260101T000000Z-aaaaaa", producer="flipr-r0", fingerprint="old") as w:
        w.write({"model": ["flipr"], "round": [0], "epoch": [0], "step": [0], "loss": [1.0], "val_loss": [None], "lr": [0.1], "examples": [2], "seconds": [0.5]})
    assert store.find_any("flipr_checkpoint", "flipr-r0", ["new", "old"]).manifest.run_id == "20260102T000000Z-bbbbbb"
    assert store.find_any("flipr_checkpoint", "flipr-r0", ["missing", "old"]).manifest.run_id == "20260101T000000Z-aaaaaa"
    assert store.find_any("flipr_checkpoint", "flipr-r0", ["missing"]) is None
    found = store.find_outputs(["flipr_checkpoint", "training_steps"], "flipr-r0", ["new", "old"])
    assert {ref.manifest.run_id for ref in found.values()} == {"20260101T000000Z-aaaaaa"}  # "new" lacks its steps
    assert store.find_outputs(["flipr_checkpoint", "training_steps"], "flipr-r0", "new") is None
