"""The artifact store: atomic publish, manifests, reuse by fingerprint, safe paths, streaming."""

from __future__ import annotations

import pyarrow as pa
import pytest

from baleen_storage import ArtifactStore, StoreError, fingerprint, new_run_id


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
    (ref,) = store.refs("passages")
    assert ref.rows == 5 and ref.fingerprint == "fp"


def test_another_artifact_in_a_published_slot_is_refused_not_swapped_in(store):
    from baleen_storage import StoreError

    with store.writer("passages", run_id="r", producer="corpus", fingerprint="fp1") as w:
        w.write(_passages(2))
    with pytest.raises(StoreError, match="already holds a different 'passages' of run 'r'.*its own producer"):
        with store.writer("passages", run_id="r", producer="corpus", fingerprint="fp2") as w:
            w.write(_passages(5))
    (ref,) = store.refs("passages")
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


def test_fingerprint_is_order_independent_and_sensitive():
    assert fingerprint(a=1, b=[1, 2]) == fingerprint(b=[1, 2], a=1) != fingerprint(a=1, b=[2, 1])


def test_run_ids_sort_by_time_and_are_unique():
    ids = {new_run_id() for _ in range(100)}
    assert len(ids) == 100 and all(len(i.split("-")) == 2 for i in ids)
