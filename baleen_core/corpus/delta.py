"""An explicit corpus delta: passages to upsert (BEIR JSON lines) and titles to delete, applied
to a corpus version to make the next one without reading any source file again.

An upserted title that the corpus holds replaces that passage (same pid: pids are title hashes);
a new title adds one. A deleted title that the corpus does not hold is quarantined as
``unknown_title``, so that a typo never passes silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from baleen_core.corpus.merge import CorpusBatch, CorpusMerger
from baleen_core.corpus.readers import SourceRecord
from baleen_core.corpus.titles import normalize_title
from baleen_core.rejects import Reject
from baleen_schemas import REJECTS, RejectReason


@dataclass(frozen=True)
class DeltaCounts:
    kept: int
    added: int
    updated: int  # upserted titles whose text changed
    unchanged: int  # upserted titles whose text was already the corpus's
    deleted: int
    rejected: int

    @property
    def changes_nothing(self) -> bool:
        return not (self.added or self.updated or self.deleted)

    def as_dict(self) -> dict[str, int]:
        return {
            "kept": self.kept, "added": self.added, "updated": self.updated, "unchanged": self.unchanged,
            "deleted": self.deleted, "rejected": self.rejected,
        }


def read_deletes(lines: Iterable[str]) -> list[tuple[int, str]]:
    """(1-based line, normalised title) of every non-blank line of a deletes file."""
    return [(number, normalize_title(line)) for number, line in enumerate(lines, start=1) if line.strip()]


def apply_corpus_delta(
    base_passages: pa.Table,
    base_sentences: pa.Table,
    upserts: Iterable[SourceRecord | Reject],
    deletes: Sequence[tuple[int, str]],
    deletes_file: str = "deletes",
) -> tuple[CorpusBatch, DeltaCounts]:
    """The next corpus version: the base without the deleted and the upserted titles, then the
    upserts (duplicates among them quarantined as a source's would be), and the rejects."""
    merger = CorpusMerger(batch_passages=2**62)
    batches = list(merger.batches([("delta", upserts)]))
    new = CorpusBatch(
        pa.concat_tables([b.passages for b in batches]) if batches else base_passages.schema.empty_table(),
        pa.concat_tables([b.sentences for b in batches]) if batches else base_sentences.schema.empty_table(),
        pa.concat_tables([b.rejects for b in batches]) if batches else REJECTS.schema.empty_table(),
    )
    base_titles = set(base_passages.column("title").to_pylist())
    unknown = [
        Reject("passages", RejectReason.UNKNOWN_TITLE, deletes_file, line, title, "no passage of the corpus has this title: nothing to delete", title)
        for line, title in deletes
        if title not in base_titles
    ]
    deleted = {title for _, title in deletes} & base_titles
    upserted = set(new.passages.column("title").to_pylist())
    leaving = pa.array(sorted(deleted | upserted), type=pa.string())
    kept = base_passages.filter(pc.invert(pc.is_in(base_passages.column("title"), leaving)))
    kept_sentences = base_sentences.filter(pc.is_in(base_sentences.column("pid"), kept.column("pid")))
    rejects = pa.concat_tables([new.rejects, pa.Table.from_pylist([r.as_row() for r in unknown], schema=REJECTS.schema)])
    batch = CorpusBatch(
        pa.concat_tables([kept, new.passages.cast(kept.schema)]).sort_by("pid"),
        pa.concat_tables([kept_sentences, new.sentences.cast(kept_sentences.schema)]).sort_by([("pid", "ascending"), ("sid", "ascending")]),
        rejects,
    )
    replaced = upserted & base_titles
    same = _same_text(base_passages, base_sentences, new.passages, new.sentences, replaced)
    counts = DeltaCounts(
        kept=kept.num_rows,
        added=len(upserted - base_titles),
        updated=len(replaced) - same,
        unchanged=same,
        deleted=len(deleted - upserted),
        rejected=rejects.num_rows,
    )
    return batch, counts


def _same_text(base_passages: pa.Table, base_sentences: pa.Table, passages: pa.Table, sentences: pa.Table, titles: set[str]) -> int:
    """How many of ``titles`` have the same sentences in both versions."""
    def texts(p: pa.Table, s: pa.Table) -> dict[str, list[str]]:
        pids = {pid: title for pid, title in zip(p.column("pid").to_pylist(), p.column("title").to_pylist(), strict=True) if title in titles}
        out: dict[str, list[str]] = {}
        for row in s.filter(pc.is_in(s.column("pid"), pa.array(list(pids), type=s.schema.field("pid").type))).sort_by([("pid", "ascending"), ("sid", "ascending")]).to_pylist():
            out.setdefault(pids[row["pid"]], []).append(row["text"])
        return out

    old, new = texts(base_passages, base_sentences), texts(passages, sentences)
    return sum(old.get(title) == new.get(title) for title in titles)
