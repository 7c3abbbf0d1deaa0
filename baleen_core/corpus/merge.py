"""Merge corpus sources into ``passages`` and ``sentences`` batches, streaming.

Precedence: sources are consumed in the order given and the first record with a title wins; a
later record with the same (normalised) title is quarantined as ``duplicate_title``. Memory is
bounded by one batch plus the set of titles seen (about 100 bytes a title: ~0.5 GB at HoVer's
5.2M passages), never the corpus text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from baleen_core.config import CorpusSource
from baleen_core.corpus.readers import ProgressCallback, SourceRecord, read_abstracts, read_beir
from baleen_core.corpus.splitting import SentenceSplitter
from baleen_core.corpus.titles import passage_id
from baleen_core.rejects import Reject
from baleen_schemas import PASSAGES, REJECTS, SENTENCES, RejectReason


@dataclass
class CorpusStats:
    """Counts that must reconcile: every input row is a passage or a reject."""

    rows_in: Counter = field(default_factory=Counter)  # by source
    passages: int = 0
    sentences: int = 0
    rejects: Counter = field(default_factory=Counter)  # by reason

    @property
    def total_in(self) -> int:
        return sum(self.rows_in.values())

    @property
    def total_rejects(self) -> int:
        return sum(self.rejects.values())

    def reconciles(self) -> bool:
        return self.total_in == self.passages + self.total_rejects

    def as_dict(self) -> dict:
        return {
            "rows_in": dict(self.rows_in),
            "passages": self.passages,
            "sentences": self.sentences,
            "rejects": dict(self.rejects),
            "reconciles": self.reconciles(),
        }


@dataclass
class CorpusBatch:
    passages: pa.Table
    sentences: pa.Table
    rejects: pa.Table


def read_source(
    source: CorpusSource, split_sentences: SentenceSplitter, on_file_done: ProgressCallback | None = None
) -> Iterator[SourceRecord | Reject]:
    """The records of one configured source."""
    if source.kind == "abstracts":
        return read_abstracts(source.path, source=source.label, on_file_done=on_file_done)
    return read_beir(source.path, split_sentences, source=source.label, on_file_done=on_file_done)


def source_bytes(source: CorpusSource) -> int:
    """Input bytes of a source (for progress: bytes done / bytes total)."""
    path = Path(source.path)
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


class CorpusMerger:
    """Streams merged batches from several sources; ``stats`` is complete once exhausted."""

    def __init__(self, batch_passages: int = 5_000) -> None:
        self.batch_passages = batch_passages
        self.stats = CorpusStats()
        self._titles: set[str] = set()
        self._pids: set[int] = set()

    def batches(self, sources: Sequence[tuple[str, Iterable[SourceRecord | Reject]]]) -> Iterator[CorpusBatch]:
        """``sources``: (source label, records) in precedence order."""
        passages = _columns(PASSAGES.columns)
        sentences = _columns(SENTENCES.columns)
        rejects: list[dict] = []
        for label, records in sources:
            for record in records:
                self.stats.rows_in[label] += 1
                admitted = self._admit(record) if isinstance(record, SourceRecord) else record
                if isinstance(admitted, Reject):
                    self.stats.rejects[admitted.reason.value] += 1
                    rejects.append(admitted.as_row())
                else:
                    _append_passage(passages, sentences, record, pid=admitted)
                    self.stats.passages += 1
                    self.stats.sentences += len(record.sentences)
                if len(passages["pid"]) >= self.batch_passages or len(rejects) >= self.batch_passages:
                    yield _batch(passages, sentences, rejects)
                    passages, sentences, rejects = _columns(PASSAGES.columns), _columns(SENTENCES.columns), []
        if passages["pid"] or rejects:
            yield _batch(passages, sentences, rejects)

    def _admit(self, record: SourceRecord) -> int | Reject:
        """The record's pid if its title is new, else a duplicate-title reject."""
        if record.title in self._titles:
            return Reject(
                "passages",
                RejectReason.DUPLICATE_TITLE,
                record.source_file,
                record.line,
                record.title,
                f"title already taken by an earlier record (sources take precedence in the order "
                f"listed; this one is from {record.source!r})",
                None,
            )
        pid = passage_id(record.title)
        if pid in self._pids:  # ~1e-6 chance at 5M titles, but never silently merge two passages
            raise RuntimeError(f"passage id collision for title {record.title!r} (pid {pid}); please report it")
        self._titles.add(record.title)
        self._pids.add(pid)
        return pid


def _columns(names: list[str]) -> dict[str, list]:
    return {n: [] for n in names}


def _append_passage(passages: dict[str, list], sentences: dict[str, list], record: SourceRecord, pid: int) -> None:
    passages["pid"].append(pid)
    passages["title"].append(record.title)
    passages["source"].append(record.source)
    passages["source_id"].append(record.source_id)
    passages["source_file"].append(record.source_file)
    passages["source_line"].append(record.line)
    passages["n_sentences"].append(len(record.sentences))
    passages["n_chars"].append(sum(len(s) for s in record.sentences))
    sentences["pid"].extend([pid] * len(record.sentences))
    sentences["sid"].extend(range(len(record.sentences)))
    sentences["text"].extend(record.sentences)


def _batch(passages: dict[str, list], sentences: dict[str, list], rejects: list[dict]) -> CorpusBatch:
    return CorpusBatch(
        passages=pa.Table.from_pydict(passages, schema=PASSAGES.schema),
        sentences=pa.Table.from_pydict(sentences, schema=SENTENCES.schema),
        rejects=pa.Table.from_pylist(rejects, schema=REJECTS.schema),
    )
