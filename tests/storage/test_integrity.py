"""Damaged artifact files: found where they are read, named with their repair, left out of the
SQL views, and set aside by `baleen store repair`."""

from __future__ import annotations

import pytest

from baleen_storage.catalog import build_catalog, query
from baleen_storage.integrity import remake_command, verify
from baleen_storage.store import CorruptArtifact
from helpers import released
from test_store import _passages


def _corpus(store, run, n=3):
    with store.writer("passages", run_id=run, producer="corpus", fingerprint=f"fp-{run}") as w:
        w.write(_passages(n))
    with store.writer("sentences", run_id=run, producer="corpus", fingerprint=f"fp-{run}") as s:
        s.write({"pid": list(range(n)), "sid": [0] * n, "text": ["x"] * n})
    released(store, s.ref)
    return released(store, w.ref)


def test_manifests_record_each_files_size_and_digest_and_verify_finds_no_damage_in_intact_files(store):
    ref = _corpus(store, "r1")
    (name,) = ref.manifest.files
    assert ref.manifest.file_bytes == {name: (ref.path / name).stat().st_size} and len(ref.manifest.sha256[name]) == 64
    assert verify(ref) == [] and store.damaged() == []


def test_a_truncated_file_fails_where_the_artifact_is_handed_out_and_is_never_reused(store):
    ref = _corpus(store, "r1")
    part = ref.files[0]
    part.write_bytes(part.read_bytes()[:-40])
    expected = rf"{part} is damaged \(\d[\d,]* bytes where [\d,]+ were published\).*run r1 \(producer corpus\); `baleen store repair` sets that run's step aside, then `baleen corpus DATASET` makes it again"
    with pytest.raises(CorruptArtifact, match=expected):
        store.latest("passages")
    with pytest.raises(CorruptArtifact, match=expected):
        store.get("passages", "r1", "corpus")
    assert store.find("passages", "corpus", "fp-r1") is None, "a damaged artifact was offered for reuse"


def test_garbled_bytes_of_the_right_size_fail_as_damage_when_read(store):
    ref = _corpus(store, "r1")
    part = ref.files[0]
    data = bytearray(part.read_bytes())
    data[-12:-8] = b"\xff\xff\xff\xff"  # the footer's length: the file no longer parses
    part.write_bytes(bytes(data))
    assert store.latest("passages").path == ref.path  # the size alone does not give it away
    with pytest.raises(CorruptArtifact, match="not readable as Parquet"):
        store.read_table(ref)
    with pytest.raises(CorruptArtifact, match="is damaged"):
        store.passage_texts(ref, store.get("sentences", "r1", "corpus"))


def test_a_flipped_byte_inside_a_page_is_found_by_its_digest(store):
    ref = _corpus(store, "r1")
    part = ref.files[0]
    data = bytearray(part.read_bytes())
    data[len(data) // 3] ^= 0x01
    part.write_bytes(bytes(data))
    (damage,) = verify(ref)
    assert damage.path == part and "SHA-256 differs" in damage.problem


def test_the_catalog_leaves_a_damaged_run_out_and_repair_sets_its_step_aside(store):
    _corpus(store, "r1", n=2)
    bad = _corpus(store, "r2", n=3)
    bad.files[0].write_bytes(b"not parquet at all")
    left_out = []
    build_catalog(store, left_out)
    assert [(d.ref.manifest.run_id, d.ref.name) for d in left_out] == [("r2", "passages")]
    assert query(store, "SELECT run, count(*) AS n FROM passages GROUP BY run").to_pylist() == [{"run": "r1", "n": 2}]
    assert query(store, "SELECT count(*) AS n FROM sentences").to_pylist() == [{"n": 5}]  # the other artifacts keep every run

    same_size = _corpus(store, "r3", n=4)  # a garbled footer that keeps the file's size: found when its view fails to build
    data = bytearray(same_size.files[0].read_bytes())
    data[-12:-8] = b"\xff\xff\xff\xff"
    same_size.files[0].write_bytes(bytes(data))
    left_out = []
    build_catalog(store, left_out)
    assert sorted(d.ref.manifest.run_id for d in left_out) == ["r2", "r3"]
    assert query(store, "SELECT DISTINCT run FROM passages").to_pylist() == [{"run": "r1"}]

    moved = store.set_aside(store.damaged())
    assert sorted(moved) == [("passages", "r2", "corpus"), ("passages", "r3", "corpus"), ("sentences", "r2", "corpus"), ("sentences", "r3", "corpus")]
    assert store.damaged() == [] and (store.root / "quarantine" / "passages" / "run=r2" / "producer=corpus" / "_manifest.json").exists()
    assert store.latest("passages").manifest.run_id == "r1"


def test_every_producer_has_the_command_that_makes_it_again():
    assert remake_command("passages", "corpus") == "baleen corpus DATASET"
    assert remake_command("rejects", "claims") == "baleen claims DATASET"
    assert remake_command("hop_labels", "labels-r2") == "baleen labels --round 2"
    assert remake_command("flipr_shard", "shard-00003") == remake_command("flipr_index", "index") == "baleen index"
    assert remake_command("claim_metrics", "eval-bm25-multihop") == "baleen evaluate"
    for name, producer in (("flipr_index", "index-flipr-r0"), ("flipr_shard", "flipr-r1-shard-00000"), ("stage1_checkpoint", "stage1-r1"), ("hop_traces", "reader-facts-t0")):
        assert remake_command(name, producer) == "baleen train"
