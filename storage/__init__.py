"""The artifact store: the one place that reads and writes artifacts (see ``store.py``)."""

from baleen_storage.store import (
    ArtifactRef,
    ArtifactStore,
    ArtifactWriter,
    FileArtifactWriter,
    Manifest,
    StoreError,
    file_fingerprint,
    fingerprint,
    fingerprint_params,
    new_run_id,
)

__all__ = [
    "ArtifactRef",
    "ArtifactStore",
    "ArtifactWriter",
    "FileArtifactWriter",
    "Manifest",
    "StoreError",
    "file_fingerprint",
    "fingerprint",
    "fingerprint_params",
    "new_run_id",
]
