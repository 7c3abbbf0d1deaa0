"""What names an index's encoder in the fingerprints of the steps that use it (tasks/index.py)."""

from __future__ import annotations

import shutil

from baleen_core.config import RetrieverConfig
from baleen_storage import ArtifactStore, file_fingerprint, fingerprint
from baleen_tasks.index import encoder_fingerprint, encoder_fingerprints


def _checkpoint(store: ArtifactStore, run: str, fp: str):
    with store.file_writer("flipr_checkpoint", run_id=run, producer="flipr-r0", fingerprint=fp) as w:
        (w.dir / "flipr_head.pt").write_bytes(b"weights")
    return w.ref.path


def test_a_published_checkpoint_is_named_by_its_artifact_not_its_path(tmp_path):
    """The same trained FLIPR in a store and in a copy of it elsewhere (other path, other mtimes)
    has one fingerprint; another checkpoint or another encoding setting changes it; the device does not."""
    original = _checkpoint(ArtifactStore(tmp_path / "a"), "20260101T000000Z-aaaaaa", "trained-on-round-0")
    shutil.copytree(tmp_path / "a", tmp_path / "b", copy_function=shutil.copy)  # new modification times
    copy = tmp_path / "b" / original.relative_to(tmp_path / "a")
    in_original, in_copy = RetrieverConfig(checkpoint=original), RetrieverConfig(checkpoint=copy)
    assert encoder_fingerprint(in_original) == encoder_fingerprint(in_copy) == encoder_fingerprint(in_copy.model_copy(update={"device": "cuda"}))
    other = _checkpoint(ArtifactStore(tmp_path / "a"), "20260102T000000Z-bbbbbb", "trained-on-round-1")
    assert encoder_fingerprint(RetrieverConfig(checkpoint=other)) != encoder_fingerprint(in_original)
    assert encoder_fingerprint(in_original.model_copy(update={"k_claim": 16})) != encoder_fingerprint(in_original)


def test_steps_made_before_are_still_found_by_the_name_they_were_given(tmp_path):
    """Stores made before name a published checkpoint by its path, files and mtimes: that name
    comes second, so their indexes and trained models are reused rather than made again. A
    checkpoint from outside any store, and the shipped backbone, keep that name alone."""
    checkpoint = _checkpoint(ArtifactStore(tmp_path / "a"), "20260101T000000Z-aaaaaa", "trained-on-round-0")
    config = RetrieverConfig(checkpoint=checkpoint)
    before = fingerprint(weights=file_fingerprint(checkpoint), config=config.model_dump(mode="json", exclude={"device"}))
    assert encoder_fingerprints(config) == [encoder_fingerprint(config), before] and before != encoder_fingerprint(config)
    outside = tmp_path / "my-flipr"
    shutil.copytree(checkpoint, outside, ignore=shutil.ignore_patterns("_manifest.json"))
    assert encoder_fingerprints(RetrieverConfig(checkpoint=outside)) == [encoder_fingerprint(RetrieverConfig(checkpoint=outside))]
    assert len(encoder_fingerprints(RetrieverConfig())) == 1
    shutil.copytree(outside, tmp_path / "moved-flipr")
    assert encoder_fingerprint(RetrieverConfig(checkpoint=tmp_path / "moved-flipr")) != encoder_fingerprint(RetrieverConfig(checkpoint=outside))
