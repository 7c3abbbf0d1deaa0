"""Stages pick inputs by lineage: the claims' own passages, an index of those passages."""

from __future__ import annotations

import shutil

import pytest

from baleen_storage import ArtifactStore
from baleen_storage.indexes import newest_trained_index
from baleen_storage.lineage import LineageError, check_index_of, claims_passages, newest_index_of, passages_for_claims
from helpers import released


def _passages(store: ArtifactStore, run: str, titles: list[str]):
    with store.writer("passages", run_id=run, producer="corpus", fingerprint=f"passages-{'-'.join(titles)}") as w:
        n = len(titles)
        w.write({"pid": list(range(n)), "title": titles, "source": ["s"] * n, "source_id": [None] * n,
                 "source_file": ["f"] * n, "source_line": list(range(1, n + 1)), "n_sentences": [1] * n, "n_chars": [3] * n})
    return released(store, w.ref)


def _claims(store: ArtifactStore, run: str, passages):
    with store.writer("claims", run_id=run, producer="claims", fingerprint=f"claims-{run}", inputs={"passages": passages.fingerprint}) as w:
        w.write({"uid": ["u"], "claim": ["c"], "label": ["SUPPORTED"], "num_hops": [2], "split": ["train"], "hpqa_id": [None],
                 "n_facts": [2], "n_resolved_facts": [2], "n_gold_passages": [2], "resolved": [True]})
    return released(store, w.ref)


def _index(store: ArtifactStore, run: str, passages, producer: str = "index"):
    with store.file_writer("flipr_index", run_id=run, producer=producer, fingerprint=f"index-{run}-{producer}") as w:
        (w.dir / "centroids.npy").write_bytes(b"x")
        w.stats = {"passages_run": passages.manifest.run_id}
    return w.ref


@pytest.fixture
def two_datasets(tmp_path):
    """Dataset A (ingested first) and dataset B (ingested later): B's runs are the newest."""
    store = ArtifactStore(tmp_path)
    a = _passages(store, "20260101T000000Z-aaaaaa", ["Ed Wood", "Tim Burton"])
    claims_a = _claims(store, "20260101T000001Z-aaaaaa", a)
    index_a = _index(store, "20260101T000002Z-aaaaaa", a)
    b = _passages(store, "20260102T000000Z-bbbbbb", ["Paris", "France"])
    index_b = _index(store, "20260102T000002Z-bbbbbb", b)
    return store, a, claims_a, index_a, b, index_b


def test_the_claims_passages_are_theirs_not_the_newest(two_datasets):
    store, a, claims_a, index_a, b, index_b = two_datasets
    assert store.latest("passages", "corpus").manifest.run_id == b.manifest.run_id  # newest is B …
    assert claims_passages(store, claims_a).manifest.run_id == a.manifest.run_id  # … the claims read A
    assert newest_index_of(store, a, "index").manifest.run_id == index_a.manifest.run_id


def test_a_mismatch_names_the_runs(two_datasets):
    store, a, claims_a, index_a, b, index_b = two_datasets
    with pytest.raises(LineageError) as err:
        check_index_of(store, index_b, a, claims_a)
    message = str(err.value)
    for run in (index_b.manifest.run_id, b.manifest.run_id, claims_a.manifest.run_id, a.manifest.run_id):
        assert run in message
    assert f"baleen index --passages-run {a.manifest.run_id}" in message
    with pytest.raises(LineageError, match=f"not passages run {b.manifest.run_id}"):
        passages_for_claims(store, claims_a, b.manifest.run_id)
    assert passages_for_claims(store, claims_a, a.manifest.run_id).manifest.run_id == a.manifest.run_id


def test_no_index_of_these_passages_is_an_error_not_another_corpus(tmp_path):
    store = ArtifactStore(tmp_path)
    a = _passages(store, "20260101T000000Z-aaaaaa", ["Ed Wood"])
    claims_a = _claims(store, "20260101T000001Z-aaaaaa", a)
    b = _passages(store, "20260102T000000Z-bbbbbb", ["Paris"])
    index_b = _index(store, "20260102T000002Z-bbbbbb", b)
    with pytest.raises(LineageError, match=index_b.manifest.run_id):
        newest_index_of(store, a, "index", claims_a)
    trained_b = _index(store, "20260102T000003Z-bbbbbb", b, producer="index-flipr-r0")
    assert newest_trained_index(store).manifest.run_id == trained_b.manifest.run_id  # no passages given: the newest
    with pytest.raises(LineageError):
        newest_trained_index(store, a)


def test_claims_whose_passages_are_gone(tmp_path):
    store = ArtifactStore(tmp_path)
    a = _passages(store, "20260101T000000Z-aaaaaa", ["Ed Wood"])
    claims = _claims(store, "20260101T000001Z-aaaaaa", a)
    shutil.rmtree(a.path)
    with pytest.raises(LineageError, match="no longer in the store"):
        claims_passages(store, claims)
