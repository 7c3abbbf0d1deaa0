"""The artifact store: the one place that reads and writes pipeline artifacts.

Layout under the store root::

    artifacts/<name>/run=<run_id>/producer=<step>/part-00000.parquet
                                                 /_manifest.json
    reports/<run_id>/...          validation results, reports, plots
    tmp/                          in-progress writes (same file system, so publish is a rename)
    work/                         training runs' epoch checkpoints, until they publish
    catalog.duckdb                DuckDB views over all artifacts (see ``baleen_storage.catalog``)

Writes are atomic: files go to ``tmp/`` and the finished directory is renamed into place, so a
reader (or DuckDB glob) never sees half an artifact, and a killed run leaves only ``tmp/`` debris.
Every ``tmp/`` entry is locked (``baleen_storage.locks``) by the process writing it, so
:meth:`ArtifactStore.sweep_tmp` removes exactly the debris of dead runs, even while others write.
Every artifact carries a manifest whose ``fingerprint`` hashes the step, its parameters, its input
fingerprints and the schema version; a step whose fingerprint matches a published artifact reuses
it instead of recomputing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from pydantic import BaseModel, Field

from baleen_schemas import ARTIFACTS, FILE_ARTIFACTS, ArtifactSchema, FileArtifactSpec, artifact_schema, file_artifact_spec
from baleen_storage.integrity import Damage, file_digest, sizes_match, verify
from baleen_storage.locks import held_lock

MANIFEST_FILE = "_manifest.json"
#: The artifacts a gate validates before later stages may read them (``ArtifactSchema.gated``).
GATED_ARTIFACTS = tuple(name for name, schema in ARTIFACTS.items() if schema.gated)
GATE_SUMMARY_SUFFIX = ".summary.json"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class StoreError(RuntimeError):
    """A store operation that the user can fix (missing artifact, bad path, ...)."""


class Manifest(BaseModel):
    """What was written, from what, by whom."""

    name: str
    producer: str
    run_id: str
    schema_version: int
    rows: int
    files: list[str]
    bytes: int
    fingerprint: str
    inputs: dict[str, str] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)
    #: Results a step wants on record (token counts, bytes per token, shard list, ...).
    stats: dict[str, Any] = Field(default_factory=dict)
    flow_run_id: str | None = None
    flow_run_name: str | None = None
    created_at: datetime
    code_version: str
    #: Whether a gate must pass before later stages may read this artifact's step (see
    #: :meth:`ArtifactStore.release_state`); False in manifests written before gates held data back.
    gated: bool = False
    #: Each file's size and SHA-256 as published (``baleen_storage.integrity``); empty in
    #: manifests written before they were recorded, which are checked by their total size.
    file_bytes: dict[str, int] = Field(default_factory=dict)
    sha256: dict[str, str] = Field(default_factory=dict)


class ReleaseState(BaseModel):
    """Whether the outputs of one step (a run id and a producer) may feed later stages.

    ``released``: every gated artifact of the step passed its gate (or it has none). ``pending``:
    a gated artifact has no verdict yet (its run stopped between writing and validating it).
    ``failed``: a gate failed; the outputs stay in the store for inspection, never as input."""

    run_id: str
    producer: str
    state: str
    #: The failed gate's artifact and its first failed expectation (state ``failed``).
    failed_gate: str | None = None
    failure: str | None = None
    #: Gated artifacts without a verdict (state ``pending``).
    waiting_for: list[str] = Field(default_factory=list)

    @property
    def released(self) -> bool:
        return self.state == "released"

    def explain(self) -> str:
        """What is wrong with the step and what to do, in one line."""
        step = f"run {self.run_id} (producer {self.producer})"
        if self.state == "failed":
            return (
                f"{step} failed its gate {self.failed_gate!r}: {self.failure}; it stays in the store for inspection "
                f"(`baleen sql \"SELECT * FROM validations WHERE NOT success\"`): fix its input and run that step again"
            )
        if self.state == "pending":
            return f"{step} stopped before its gate {', '.join(repr(a) for a in self.waiting_for)} ran: run that step again to validate it"
        return f"{step} passed its gates"


class UnreleasedArtifact(StoreError):
    """The artifact a stage asked for failed its gate, or was never validated."""


class CorruptArtifact(StoreError):
    """A file of an artifact is not what was published (truncated, missing, garbled); the message
    names the file and how to repair it."""


class ArtifactRef(BaseModel):
    """A published artifact: where it is and its manifest."""

    path: Path
    manifest: Manifest

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def rows(self) -> int:
        return self.manifest.rows

    @property
    def fingerprint(self) -> str:
        return self.manifest.fingerprint

    @property
    def files(self) -> list[Path]:
        return [self.path / f for f in self.manifest.files]


def new_run_id(now: datetime | None = None) -> str:
    """Sortable, unique run id, e.g. ``20261122T031500Z-3f9a1c``."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def fingerprint(**parts: Any) -> str:
    """Deterministic hash of JSON-serialisable parts (keys sorted)."""
    blob = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def fingerprint_params(
    settings: BaseModel, include: set[str] | None = None, added_later: Sequence[str] = (), exclude: set[str] | None = None
) -> dict[str, Any]:
    """``settings`` (only ``include``, if given, without ``exclude``) as a step's fingerprint
    parameters, leaving out each field named in ``added_later`` while it holds its default (a
    default factory's value too): a setting added after stores recorded their fingerprints changes
    them only when it is set, so what they made is reused."""
    fields = type(settings).model_fields
    return {
        name: value
        for name, value in settings.model_dump(mode="json", include=include, exclude=exclude).items()
        if name not in added_later or getattr(settings, name) != fields[name].get_default(call_default_factory=True)
    }


def published_manifest(folder: Path) -> Manifest | None:
    """The manifest of the published artifact whose folder is ``folder``; None if it is none."""
    path = Path(folder) / MANIFEST_FILE
    try:
        return Manifest.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None


def file_fingerprint(path: Path) -> str:
    """Fingerprint of an input file or directory tree: names, sizes and modification times.

    Cheap on multi-gigabyte dumps (no content hashing), like make; copying a file changes its
    mtime and so triggers a recompute, which is the safe direction.
    """
    path = Path(path)
    if not path.exists():
        raise StoreError(f"input {path} does not exist")
    entries = []
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        st = f.stat()
        entries.append((str(f.relative_to(path)) if path.is_dir() else f.name, st.st_size, st.st_mtime_ns))
    return fingerprint(path=str(path.resolve()), entries=entries)


def _check_name(kind: str, value: str) -> str:
    if not _SAFE_NAME.match(value):
        raise StoreError(f"{kind} {value!r} is not a safe name (letters, digits, '_', '-', '.'; no '/' or '..')")
    return value


class ArtifactWriter:
    """Streams record batches of one artifact into zstd Parquet files, published atomically.

    Use as a context manager; the artifact is published when the block exits without error and
    discarded otherwise. Batches are cast to the artifact's schema, so a wrong column fails here,
    at write time, not three stages later.
    """

    def __init__(
        self,
        store: ArtifactStore,
        schema: ArtifactSchema,
        run_id: str,
        producer: str,
        fingerprint: str,
        inputs: Mapping[str, str],
        params: Mapping[str, Any],
        flow_run: tuple[str | None, str | None],
        max_rows_per_file: int,
        row_group_size: int,
    ) -> None:
        self.store = store
        self.schema = schema
        self.run_id = run_id
        self.producer = producer
        self.fingerprint = fingerprint
        self.inputs = dict(inputs)
        self.params = dict(params)
        self.flow_run = flow_run
        self.max_rows_per_file = max_rows_per_file
        self.row_group_size = row_group_size
        self.tmp_dir: Path | None = None  # set on entering the ``with`` block
        self._scratch = ExitStack()
        self.rows = 0
        self._files: list[str] = []
        self._writer: pq.ParquetWriter | None = None
        self._rows_in_file = 0
        self.stats: dict[str, Any] = {}  # results to record in the manifest (set before the block ends)
        self.ref: ArtifactRef | None = None

    def __enter__(self) -> ArtifactWriter:
        self.tmp_dir = self._scratch.enter_context(self.store.scratch_dir(self.schema.name))
        return self

    def write(self, data: pa.Table | pa.RecordBatch | Mapping[str, list]) -> None:
        """Append rows (a table, a record batch, or a dict of column lists)."""
        if isinstance(data, Mapping):
            table = pa.Table.from_pydict(dict(data), schema=self.schema.schema)
        else:
            table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
            try:
                table = table.select(self.schema.columns).cast(self.schema.schema)
            except (KeyError, pa.ArrowInvalid, ValueError) as err:
                raise StoreError(f"rows for {self.schema.name!r} do not match its schema: {err}") from err
        if self.schema.sort_by and table.num_rows > 1:
            table = table.sort_by([(c, "ascending") for c in self.schema.sort_by])
        offset = 0
        while offset < table.num_rows:
            if self._writer is None or self._rows_in_file >= self.max_rows_per_file:
                self._open_next_file()
            take = min(table.num_rows - offset, self.max_rows_per_file - self._rows_in_file)
            self._writer.write_table(table.slice(offset, take), row_group_size=self.row_group_size)
            self._rows_in_file += take
            self.rows += take
            offset += take

    def _open_next_file(self) -> None:
        if self._writer is not None:
            self._writer.close()
        name = f"part-{len(self._files):05d}.parquet"
        self._files.append(name)
        self._writer = pq.ParquetWriter(self.tmp_dir / name, self.schema.schema, compression="zstd")
        self._rows_in_file = 0

    def __exit__(self, exc_type, exc, tb) -> None:
        with self._scratch:  # removes what is left of tmp_dir (all of it, on failure)
            if self._writer is not None:
                self._writer.close()
            if exc_type is not None:
                return
            if not self._files:  # an empty artifact still gets one (empty) file so readers see its columns
                self._open_next_file()
                self._writer.close()
            self.ref = self.store._publish_dir(
                self.tmp_dir, self.schema.name, self.schema.version, self.rows, self._files, self.run_id, self.producer,
                self.fingerprint, self.inputs, self.params, self.stats, self.flow_run, gated=self.schema.gated,
            )


class FileArtifactWriter:
    """Collects the binary files of a file artifact in a private directory, published atomically.

    Write files into ``writer.dir`` inside the ``with`` block; set ``rows`` (what the artifact
    counts, e.g. passages) and ``stats`` before it ends.
    """

    def __init__(self, store: ArtifactStore, spec: FileArtifactSpec, run_id: str, producer: str, fingerprint: str,
                 inputs: Mapping[str, str], params: Mapping[str, Any], flow_run: tuple[str | None, str | None]) -> None:
        self.store, self.spec, self.run_id, self.producer = store, spec, run_id, producer
        self.fingerprint, self.inputs, self.params, self.flow_run = fingerprint, dict(inputs), dict(params), flow_run
        self.dir: Path | None = None  # set on entering the ``with`` block
        self._scratch = ExitStack()
        self.rows = 0
        self.stats: dict[str, Any] = {}
        self.ref: ArtifactRef | None = None

    def __enter__(self) -> FileArtifactWriter:
        self.dir = self._scratch.enter_context(self.store.scratch_dir(self.spec.name))
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        with self._scratch:  # removes what is left of the directory (all of it, on failure)
            if exc_type is not None:
                return
            files = sorted(str(p.relative_to(self.dir)) for p in self.dir.rglob("*") if p.is_file())
            for name in files:
                _fsync_file(self.dir / name)
            self.ref = self.store._publish_dir(
                self.dir, self.spec.name, self.spec.version, self.rows, files, self.run_id, self.producer,
                self.fingerprint, self.inputs, self.params, self.stats, self.flow_run,
            )


class ArtifactStore:
    """Reads and writes every artifact under one root directory."""

    def __init__(self, root: Path | str, max_rows_per_file: int = 2_000_000, row_group_size: int = 100_000) -> None:
        self.root = Path(root).expanduser().resolve()
        self.max_rows_per_file = max_rows_per_file
        self.row_group_size = row_group_size
        (self.root / "artifacts").mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)

    # ---- paths -------------------------------------------------------------------------------
    def artifact_dir(self, name: str, run_id: str, producer: str) -> Path:
        return (
            self.root
            / "artifacts"
            / _check_name("artifact", name)
            / f"run={_check_name('run id', run_id)}"
            / f"producer={_check_name('producer', producer)}"
        )

    def relocated(self, recorded: Path | str) -> Path:
        """A path a manifest recorded, in this store: the same artifact folder (or a file in it)
        under this root when the recorded path names one (``…/artifacts/<name>/run=<id>/producer=<p>…``)
        and this store holds it, so that a store copied or moved elsewhere reads its own files; any
        other path as recorded."""
        parts = Path(recorded).parts
        for i in range(len(parts) - 4, -1, -1):
            if parts[i] == "artifacts" and parts[i + 2].startswith("run=") and parts[i + 3].startswith("producer="):
                here = self.root.joinpath(*parts[i:])
                return here if here.exists() else Path(recorded)
        return Path(recorded)

    def report_path(self, run_id: str, relative: str) -> Path:
        """Where a run's report file lives; refuses paths that would leave the store."""
        return self.safe_path(Path("reports") / _check_name("run id", run_id) / relative)

    def safe_path(self, relative: Path | str) -> Path:
        """Resolve a user-given path inside the store root, refusing '..' escapes and absolute paths."""
        candidate = (self.root / relative).resolve()
        if candidate != self.root and self.root not in candidate.parents:
            raise StoreError(f"path {str(relative)!r} leaves the store root {self.root}")
        return candidate

    # ---- writing -----------------------------------------------------------------------------
    def writer(
        self,
        name: str,
        *,
        run_id: str,
        producer: str,
        fingerprint: str,
        inputs: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        flow_run: tuple[str | None, str | None] = (None, None),
    ) -> ArtifactWriter:
        """A writer for artifact ``name``; publish happens when its ``with`` block ends cleanly."""
        self.artifact_dir(name, run_id, producer)  # validates the names before any work is done
        return ArtifactWriter(
            self,
            artifact_schema(name),
            run_id,
            producer,
            fingerprint,
            inputs or {},
            params or {},
            flow_run,
            self.max_rows_per_file,
            self.row_group_size,
        )

    def file_writer(
        self,
        name: str,
        *,
        run_id: str,
        producer: str,
        fingerprint: str,
        inputs: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        flow_run: tuple[str | None, str | None] = (None, None),
    ) -> FileArtifactWriter:
        """A writer for the binary file artifact ``name`` (index shards, codecs, checkpoints)."""
        self.artifact_dir(name, run_id, producer)
        return FileArtifactWriter(self, file_artifact_spec(name), run_id, producer, fingerprint, inputs or {}, params or {}, flow_run)

    def _publish_dir(
        self, tmp_dir: Path, name: str, version: int, rows: int, files: list[str], run_id: str, producer: str,
        fingerprint: str, inputs: dict, params: dict, stats: dict, flow_run: tuple[str | None, str | None], gated: bool = False,
    ) -> ArtifactRef:
        file_bytes = {f: (tmp_dir / f).stat().st_size for f in files}
        manifest = Manifest(
            name=name,
            producer=producer,
            run_id=run_id,
            schema_version=version,
            rows=rows,
            files=files,
            bytes=sum(file_bytes.values()),
            file_bytes=file_bytes,
            sha256={f: file_digest(tmp_dir / f) for f in files},
            fingerprint=fingerprint,
            inputs=inputs,
            params=params,
            stats=stats,
            flow_run_id=flow_run[0],
            flow_run_name=flow_run[1],
            created_at=datetime.now(timezone.utc),
            code_version=_code_version(),
            gated=gated,
        )
        _write_text_atomic(tmp_dir / MANIFEST_FILE, manifest.model_dump_json(indent=2))
        return self._publish(tmp_dir, manifest)

    def _publish(self, tmp_dir: Path, manifest: Manifest) -> ArtifactRef:
        final = self.artifact_dir(manifest.name, manifest.run_id, manifest.producer)
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            published = Manifest.model_validate_json((final / MANIFEST_FILE).read_text()) if (final / MANIFEST_FILE).exists() else None
            if published is not None and published.fingerprint != manifest.fingerprint:
                # two different artifacts claiming one run's slot: the second would silently replace the first
                raise StoreError(
                    f"{final} already holds a different {manifest.name!r} of run {manifest.run_id!r} (fingerprint {published.fingerprint}, "
                    f"not {manifest.fingerprint}): a step that publishes several versions in one run must give each its own producer"
                )
            # Same run re-wrote this artifact (a retried task): swap atomically, then drop the old one.
            with self.scratch_dir("replaced") as trash:
                os.rename(final, trash / "old")
                os.rename(tmp_dir, final)
        else:
            os.rename(tmp_dir, final)
        _fsync_dir(final.parent)
        return ArtifactRef(path=final, manifest=manifest)

    # ---- scratch space -----------------------------------------------------------------------
    @contextmanager
    def scratch_dir(self, prefix: str) -> Iterator[Path]:
        """A fresh directory ``tmp/<prefix>-<uuid>/``, locked by this process while in use and
        removed (with whatever is still in it) when the block ends."""
        path = self.root / "tmp" / f"{_check_name('scratch prefix', prefix)}-{uuid.uuid4().hex}"
        with held_lock(_lock_of(path)):
            path.mkdir(parents=True)
            try:
                yield path
            finally:
                shutil.rmtree(path, ignore_errors=True)

    def sweep_tmp(self) -> list[str]:
        """Remove what dead runs left in ``tmp/`` (an entry whose lock no live process holds) and
        return the names removed. Safe while other runs write: their entries are locked."""
        removed = []
        for entry in sorted((self.root / "tmp").iterdir()):
            if entry.suffix == LOCK_SUFFIX:
                if not entry.exists() or entry.with_name(entry.name.removesuffix(LOCK_SUFFIX)).exists():
                    continue  # already swept with its entry, or swept with it below
                # a run killed between locking a name and making its entry leaves the lock alone
                try:
                    with held_lock(entry, wait=False):  # removed on release
                        removed.append(entry.name)
                except BlockingIOError:
                    pass  # a live writer about to make its entry
                continue
            try:
                with held_lock(_lock_of(entry), wait=False):
                    (shutil.rmtree if entry.is_dir() else os.unlink)(entry)
                    removed.append(entry.name)
            except BlockingIOError:
                continue  # a live writer's
            except FileNotFoundError:
                continue  # its writer published or removed it meanwhile
        return removed

    @contextmanager
    def work_dir(self, name: str, on_wait: Callable[[], None] | None = None) -> Iterator[Path]:
        """``work/<name>/``, where a training run keeps its epoch checkpoints so that a killed run
        resumes, held exclusively for the block: a second run needing the same directory (the same
        model on the same data and settings) waits for the first (``on_wait`` is called) instead of
        training in it at the same time. The directory itself is kept; its user removes it."""
        path = self.safe_path(Path("work") / _check_name("work directory", name))
        with held_lock(_lock_of(path), on_wait):
            yield path

    @contextmanager
    def making(self, name: str, producer: str, fingerprint: str, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
        """Held while a step looks for a reusable ``name`` artifact and, finding none, makes it:
        a second run needing the same artifact (same producer and fingerprint) waits for the
        first (``on_wait`` is called), then finds and reuses it instead of making a duplicate."""
        lock = self.safe_path(Path("locks") / f"{_check_name('artifact', name)}-{_check_name('producer', producer)}-{_check_name('fingerprint', fingerprint)}{LOCK_SUFFIX}")
        with held_lock(lock, on_wait):
            yield

    def write_report(self, run_id: str, relative: str, content: str | bytes) -> Path:
        """Write a run-scoped report file (JSON, Markdown, PNG ...) atomically."""
        path = self.report_path(run_id, relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_bytes_atomic(path, content.encode() if isinstance(content, str) else content)
        return path

    def write_text(self, relative: str, text: str) -> Path:
        """Write a small text file at the store root (e.g. the catalog's SQL), atomically."""
        path = self.safe_path(relative)
        _write_text_atomic(path, text)
        return path

    # ---- gates ---------------------------------------------------------------------------------
    def gate_dir(self, run_id: str, producer: str) -> Path:
        """Where the gates of the step ``(run_id, producer)`` keep their results: the full GX
        result and a summary per artifact (``<artifact>.summary.json``, the ``validations`` view)."""
        return self.report_path(run_id, f"validation/{_check_name('producer', producer)}")

    def write_gate_result(self, run_id: str, producer: str, artifact: str, result: str, summary: Mapping[str, Any]) -> Path:
        """Keep a gate's full result and its summary (``success``, ``failures``); the summary is
        the verdict that releases the step's outputs, or holds them back, from now on. Returns
        the full result's path."""
        folder = self.gate_dir(run_id, producer)
        folder.mkdir(parents=True, exist_ok=True)
        report = folder / f"{_check_name('artifact', artifact)}.json"
        _write_text_atomic(report, result)
        _write_text_atomic(folder / f"{artifact}{GATE_SUMMARY_SUFFIX}", json.dumps(dict(summary), default=str))
        return report

    def release_state(self, run_id: str, producer: str) -> ReleaseState:
        """Whether the outputs of the step ``(run_id, producer)`` may feed later stages: a failed
        gate on any of them holds all of them back (claims, gold facts and rejects are one
        step's), as does a gated artifact whose gate has not run yet."""
        verdicts = {}
        folder = self.gate_dir(run_id, producer)
        for path in sorted(folder.glob(f"*{GATE_SUMMARY_SUFFIX}")) if folder.is_dir() else []:
            try:
                verdicts[path.name.removesuffix(GATE_SUMMARY_SUFFIX)] = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # written atomically: unreadable means being replaced right now
        for artifact, verdict in verdicts.items():
            if not verdict.get("success", False):
                first = (verdict.get("failures") or [{}])[0]
                return ReleaseState(run_id=run_id, producer=producer, state="failed", failed_gate=artifact, failure=first.get("expectation", "see its report"))
        waiting = [
            name for name in GATED_ARTIFACTS
            if name not in verdicts and _manifest_says_gated(self.artifact_dir(name, run_id, producer) / MANIFEST_FILE)
        ]
        if waiting:
            return ReleaseState(run_id=run_id, producer=producer, state="pending", waiting_for=waiting)
        return ReleaseState(run_id=run_id, producer=producer, state="released")

    # ---- finding -----------------------------------------------------------------------------
    def refs(self, name: str, producer: str | None = None, *, unreleased: bool = False) -> list[ArtifactRef]:
        """Published artifacts called ``name`` (optionally of one producer), oldest first: those
        whose step passed its gates, or with ``unreleased`` every one (failed and pending too)."""
        base = self.root / "artifacts" / _check_name("artifact", name)
        pattern = f"run=*/producer={producer}/{MANIFEST_FILE}" if producer else f"run=*/producer=*/{MANIFEST_FILE}"
        found = []
        states: dict[tuple[str, str], bool] = {}
        for manifest_path in base.glob(pattern):
            try:
                manifest = Manifest.model_validate_json(manifest_path.read_text())
            except (OSError, ValueError):
                continue  # a directory without a readable manifest was never published
            step = (manifest.run_id, manifest.producer)
            if not unreleased:
                if step not in states:
                    states[step] = self.release_state(*step).released
                if not states[step]:
                    continue
            found.append(ArtifactRef(path=manifest_path.parent, manifest=manifest))
        return sorted(found, key=lambda r: (r.manifest.created_at, r.manifest.run_id))

    def find(self, name: str, producer: str | None, fingerprint: str) -> ArtifactRef | None:
        """The newest published artifact with this fingerprint (of any producer if None), if any,
        for reuse: a released one when there is one, else one whose gate failed or never ran
        (the step that reuses it gates it again, and may release it under changed limits); never
        one with a truncated or missing file (the step then makes it anew)."""
        matches = [r for r in self.refs(name, producer, unreleased=True) if r.fingerprint == fingerprint and sizes_match(r) is None]
        released = [r for r in matches if self.release_state(r.manifest.run_id, r.manifest.producer).released]
        return (released or matches)[-1] if matches else None

    def find_any(self, name: str, producer: str | None, fingerprints: Sequence[str]) -> ArtifactRef | None:
        """:meth:`find` with the first of ``fingerprints`` (the step's, then older names of it) that finds one."""
        found = self.find_outputs([name], producer, fingerprints)
        return found[name] if found else None

    def find_outputs(self, names: list[str], producer: str | None, fingerprint: str | Sequence[str]) -> dict[str, ArtifactRef] | None:
        """All outputs of one step with this fingerprint (or the first of several that has them
        all), or None if any is missing (then recompute)."""
        for fp in [fingerprint] if isinstance(fingerprint, str) else fingerprint:
            found = {name: self.find(name, producer, fp) for name in names}
            if all(ref is not None for ref in found.values()):
                return found
        return None

    def latest(self, name: str, producer: str | None = None) -> ArtifactRef:
        """The newest ``name`` artifact that passed its gates; when there is none but there are
        held-back ones, the error names the newest of them and its failed (or missing) gate. A
        truncated or missing file of it is a :class:`CorruptArtifact` at once."""
        refs = self.refs(name, producer)
        if refs:
            return _intact(refs[-1])
        held = self.refs(name, producer, unreleased=True)
        if held:
            newest = held[-1].manifest
            raise UnreleasedArtifact(
                f"no {name!r} artifact in the store at {self.root} passed its gates: {self.release_state(newest.run_id, newest.producer).explain()}"
            )
        raise StoreError(
            f"no {name!r} artifact in the store at {self.root}; run the step that produces it first "
            f"(see `baleen --help`)"
        )

    def get(self, name: str, run_id: str, producer: str, *, unreleased: bool = False) -> ArtifactRef:
        """Run ``run_id``'s ``name`` artifact of ``producer``; one whose step failed its gate (or
        was never validated) only with ``unreleased``; one with a truncated or missing file never
        (a :class:`CorruptArtifact`)."""
        path = self.artifact_dir(name, run_id, producer) / MANIFEST_FILE
        if not path.exists():
            raise StoreError(f"no {name!r} artifact for run {run_id!r} (producer {producer!r}) in {self.root}")
        if not unreleased and not (state := self.release_state(run_id, producer)).released:
            raise UnreleasedArtifact(f"{name!r} of {state.explain()}")
        return _intact(ArtifactRef(path=path.parent, manifest=Manifest.model_validate_json(path.read_text())))

    # ---- reading -----------------------------------------------------------------------------
    @contextmanager
    def reading(self, *refs: ArtifactRef) -> Iterator[None]:
        """Around code that reads ``refs``' files: an error there that comes from a damaged file
        (an unreadable footer, rows or bytes other than the published ones) becomes a
        :class:`CorruptArtifact` naming the file and the repair; any other error stays itself."""
        try:
            yield
        except StoreError:
            raise
        except Exception as err:
            self.raise_if_damaged(*refs, cause=err)
            raise

    def raise_if_damaged(self, *refs: ArtifactRef, cause: BaseException | None = None) -> None:
        """A :class:`CorruptArtifact` naming the first damaged file of ``refs``, if one is."""
        for ref in refs:
            if damage := verify(ref, checksums=True):
                raise CorruptArtifact(damage[0].explain()) from cause

    def damaged(self, checksums: bool = True) -> list[Damage]:
        """Every damaged file of every published artifact (``baleen store check``)."""
        names = [*ARTIFACTS, *FILE_ARTIFACTS]
        return [d for name in names for ref in self.refs(name, unreleased=True) for d in verify(ref, checksums)]

    def set_aside(self, damage: list[Damage]) -> list[tuple[str, str, str]]:
        """Move every step (run and producer) with a damaged file, all its artifacts, from
        ``artifacts/`` to ``quarantine/``, where no stage finds them: the step is then made
        again by the next run that needs it. Returns the (name, run, producer) moved."""
        moved = []
        for run_id, producer in sorted({(d.ref.manifest.run_id, d.ref.manifest.producer) for d in damage}):
            for directory in sorted((self.root / "artifacts").glob(f"*/run={run_id}/producer={producer}")):
                name = directory.parent.parent.name
                target = self.root / "quarantine" / name / f"run={run_id}" / f"producer={producer}"
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(directory, target)
                moved.append((name, run_id, producer))
        return moved

    def dataset(self, ref: ArtifactRef) -> pads.Dataset:
        with self.reading(ref):
            return pads.dataset([str(f) for f in ref.files], schema=artifact_schema(ref.name).schema, format="parquet")

    def iter_batches(self, ref: ArtifactRef, columns: list[str] | None = None, batch_size: int = 65_536) -> Iterator[pa.RecordBatch]:
        """Stream an artifact in record batches (constant memory)."""
        with self.reading(ref):
            yield from self.dataset(ref).to_batches(columns=columns, batch_size=batch_size)

    def read_table(self, ref: ArtifactRef, columns: list[str] | None = None) -> pa.Table:
        """Read a whole artifact; for small ones (claims, labels), never the corpus."""
        with self.reading(ref):
            return self.dataset(ref).to_table(columns=columns)

    def read_rows(self, ref: ArtifactRef, column: str, values, columns: list[str] | None = None) -> pa.Table:
        """The rows of an artifact whose ``column`` is one of ``values`` (pushed down to the
        Parquet scan: one claim's rows without reading the whole table)."""
        with self.reading(ref):
            dataset = self.dataset(ref)
            wanted = pa.array(list(values), type=dataset.schema.field(column).type)
            return dataset.to_table(columns=columns, filter=pads.field(column).isin(wanted))

    def passage_ids(self, passages: ArtifactRef) -> np.ndarray:
        """Every passage id of a passages artifact, sorted (int64)."""
        pids = self.read_table(passages, ["pid"]).column("pid").to_numpy()
        return np.sort(pids)

    def passage_texts(
        self,
        passages: ArtifactRef,
        sentences: ArtifactRef,
        pid_range: tuple[int, int] | None = None,
        pids: np.ndarray | None = None,
    ) -> pa.Table:
        """``(pid, title, text)`` sorted by pid, text = the passage's non-empty sentences joined by
        spaces; for the passages with ``lo <= pid <= hi`` or in ``pids``. Runs in DuckDB over the
        Parquet files, so a shard of a 5M-passage corpus never loads the rest."""
        where, params = "", []
        if pid_range is not None:
            where, params = "WHERE p.pid BETWEEN ? AND ?", [int(pid_range[0]), int(pid_range[1])]
        if pids is not None:
            where = "WHERE p.pid IN (SELECT pid FROM wanted)"
        sql = (
            "SELECT p.pid, p.title, coalesce(string_agg(s.text, ' ' ORDER BY s.sid) FILTER (WHERE s.text <> ''), '') AS text "
            f"FROM read_parquet(?) p LEFT JOIN read_parquet(?) s ON s.pid = p.pid {where} "
            "GROUP BY p.pid, p.title ORDER BY p.pid"
        )
        return self._duckdb_table((passages, sentences), sql, params, pids)

    def passage_sentences(self, passages: ArtifactRef, sentences: ArtifactRef, pids) -> pa.Table:
        """``(pid, title, sid, text)`` of every non-empty sentence of the given passages, sorted by
        pid and sid (what the condensers read)."""
        sql = (
            "SELECT p.pid, p.title, s.sid, s.text FROM read_parquet(?) p JOIN read_parquet(?) s ON s.pid = p.pid "
            "WHERE p.pid IN (SELECT pid FROM wanted) AND s.text <> '' ORDER BY p.pid, s.sid"
        )
        return self._duckdb_table((passages, sentences), sql, [], sorted(set(pids)))

    def claim_gold(self, claims: ArtifactRef, gold_facts: ArtifactRef, sentences: ArtifactRef, split: str) -> pa.Table:
        """Resolved claims of one split with their gold facts and sentence text:
        ``(uid, claim, label, num_hops, pid, title, sid, text)`` sorted by uid, pid, sid."""
        sql = (
            "SELECT c.uid, c.claim, c.label, c.num_hops, f.pid, f.title, f.sid, s.text "
            "FROM read_parquet(?) c JOIN read_parquet(?) f ON f.uid = c.uid "
            "JOIN read_parquet(?) s ON s.pid = f.pid AND s.sid = f.sid "
            "WHERE c.split = ? AND c.resolved ORDER BY c.uid, f.pid, f.sid"
        )
        return self._duckdb_table((claims, gold_facts, sentences), sql, [split])

    def _duckdb_table(self, reads: tuple[ArtifactRef, ...], sql: str, params: list, wanted_pids=None) -> pa.Table:
        """``sql`` run in DuckDB with each ``read_parquet(?)`` bound, in order, to the files of
        ``reads`` and then ``params``; ``wanted_pids`` as the table ``wanted(pid)``."""
        with self.reading(*reads):
            con = duckdb.connect()
            try:
                if wanted_pids is not None:
                    con.register("wanted", pa.table({"pid": pa.array(np.asarray(wanted_pids, dtype=np.int64))}))
                return con.sql(sql, params=[*([str(f) for f in ref.files] for ref in reads), *params]).to_arrow_table()
            finally:
                con.close()

    def parquet_glob(self, name: str) -> str:
        """Glob over every run's files of an artifact, for DuckDB's read_parquet."""
        return str(self.root / "artifacts" / _check_name("artifact", name) / "*" / "*" / "*.parquet")


def _intact(ref: ArtifactRef) -> ArtifactRef:
    """``ref``, unless a file of it is missing or not its published size."""
    if (damage := sizes_match(ref)) is not None:
        raise CorruptArtifact(damage.explain())
    return ref


def _manifest_says_gated(path: Path) -> bool:
    """Whether the manifest at ``path`` exists and awaits a gate (see :attr:`Manifest.gated`)."""
    try:
        return bool(json.loads(path.read_text()).get("gated", False))
    except (OSError, ValueError):
        return False


def _code_version() -> str:
    try:
        from importlib.metadata import version

        return version("openbaleen")
    except Exception:  # running from a source tree that is not installed
        return "unknown"


def _write_bytes_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


LOCK_SUFFIX = ".lock"


def _lock_of(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


def _write_text_atomic(path: Path, text: str) -> None:
    _write_bytes_atomic(path, text.encode())


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
