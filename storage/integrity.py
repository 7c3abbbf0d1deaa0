"""Whether an artifact's files are still what its manifest says was published.

A manifest records every file's size and SHA-256 (manifests written before that record the
total size only). Three depths of checking:

* :func:`sizes_match`: a ``stat`` per file; run whenever the store hands an artifact to a stage,
  so a truncated or missing file fails at once, naming itself, not at a report after an hour.
* :func:`verify`: sizes, then Parquet footers and row counts, then (``checksums``) the SHA-256 of
  every byte; run when reading an artifact failed, to tell damage from a bug, and by
  ``baleen store check``.
* :func:`remake_command`: what makes a damaged artifact again, for the messages.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from baleen_storage.store import ArtifactRef

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Damage:
    """One file of one artifact that is not what its manifest says."""

    ref: ArtifactRef
    path: Path
    problem: str

    def explain(self) -> str:
        """The file, what is wrong, and how to repair it, in one line."""
        manifest = self.ref.manifest
        return (
            f"{self.path} is damaged ({self.problem}): it is part of {manifest.name!r} of run {manifest.run_id} "
            f"(producer {manifest.producer}); `baleen store repair` sets that run's step aside, then "
            f"`{remake_command(manifest.name, manifest.producer)}` makes it again"
        )


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sizes_match(ref: ArtifactRef) -> Damage | None:
    """The first file whose size is not the manifest's (or that is missing), if any: one
    ``stat`` per file. Manifests without per-file sizes are checked by their total."""
    manifest, total = ref.manifest, 0
    for name in manifest.files:
        path = ref.path / name
        try:
            size = path.stat().st_size
        except OSError:
            return Damage(ref, path, "the file is missing")
        expected = manifest.file_bytes.get(name)
        if expected is not None and size != expected:
            return Damage(ref, path, f"{size:,} bytes where {expected:,} were published")
        total += size
    if not manifest.file_bytes and total != manifest.bytes:
        return Damage(ref, ref.path, f"its files hold {total:,} bytes where {manifest.bytes:,} were published")
    return None


def verify(ref: ArtifactRef, checksums: bool = True) -> list[Damage]:
    """Every damaged file of ``ref``, each once: missing or resized files, unreadable Parquet
    footers, a row count other than the manifest's, and (``checksums``) bytes other than the
    published ones."""
    manifest = ref.manifest
    found: dict[Path, Damage] = {}
    for name in manifest.files:
        path, expected = ref.path / name, manifest.file_bytes.get(name)
        if not path.is_file():
            found[path] = Damage(ref, path, "the file is missing")
        elif expected is not None and (size := path.stat().st_size) != expected:
            found[path] = Damage(ref, path, f"{size:,} bytes where {expected:,} were published")
    rows, parquet = 0, [ref.path / name for name in manifest.files if name.endswith(".parquet")]
    for path in parquet:
        if path not in found:
            try:
                rows += pq.ParquetFile(path).metadata.num_rows
            except (OSError, pa.ArrowException) as err:
                found[path] = Damage(ref, path, f"not readable as Parquet: {_first_line(err)}")
    if parquet and not found and rows != manifest.rows:
        found[ref.path] = Damage(ref, ref.path, f"its files hold {rows:,} rows where {manifest.rows:,} were published")
    if checksums:
        for name, expected in manifest.sha256.items():
            path = ref.path / name
            if path not in found and file_digest(path) != expected:
                found[path] = Damage(ref, path, "its bytes are not the published ones (SHA-256 differs)")
    if not found and (total := sizes_match(ref)) is not None:
        found[total.path] = total  # a manifest without per-file sizes: only the total can tell
    return list(found.values())


#: What makes each producer's artifacts again (first match wins).
_REMAKE = (
    (re.compile(r"^corpus$"), "baleen corpus DATASET"),
    (re.compile(r"^claims$"), "baleen claims DATASET"),
    (re.compile(r"^labels-r(\d+)$"), r"baleen labels --round \1"),
    (re.compile(r"^eval-"), "baleen evaluate"),
    (re.compile(r"^(index|shard-\d+)$"), "baleen index"),
)


def remake_command(name: str, producer: str) -> str:
    """The command that makes ``name`` of ``producer`` again: trained models, their indexes and
    the reader's facts come from ``baleen train``."""
    for pattern, command in _REMAKE:
        if match := pattern.match(producer):
            return match.expand(command)
    return "baleen train"


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
