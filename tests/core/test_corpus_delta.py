"""An explicit corpus delta, worked by hand: replace, add, delete, and what is quarantined."""

from __future__ import annotations

import pyarrow as pa

from baleen_core.corpus.delta import apply_corpus_delta, read_deletes
from baleen_core.corpus.readers import SourceRecord
from baleen_core.corpus.titles import passage_id
from baleen_schemas import PASSAGES, SENTENCES


def _corpus(passages: dict[str, list[str]]) -> tuple[pa.Table, pa.Table]:
    rows, sentences = [], []
    for title, texts in passages.items():
        pid = passage_id(title)
        rows.append({"pid": pid, "title": title, "source": "wiki", "source_id": title, "source_file": "wiki_00", "source_line": 1, "n_sentences": len(texts), "n_chars": sum(map(len, texts))})
        sentences += [{"pid": pid, "sid": i, "text": t} for i, t in enumerate(texts)]
    return pa.Table.from_pylist(rows, schema=PASSAGES.schema), pa.Table.from_pylist(sentences, schema=SENTENCES.schema)


def _record(title: str, *sentences: str, line: int = 1) -> SourceRecord:
    return SourceRecord("delta", "upserts.jsonl", line, title, title, list(sentences))


def test_a_delta_replaces_adds_deletes_and_quarantines_what_it_cannot_apply():
    passages, sentences = _corpus({"Aarhus": ["Aarhus is a city."], "Leeds": ["Leeds is a city.", "It is in England."], "Oren Vask": ["Oren Vask directs films."]})
    upserts = [
        _record("Leeds", "Leeds is a city in West Yorkshire."),  # replaces Leeds
        _record("Velmora Quay", "Velmora Quay is a harbour wall.", "It was built in 1802.", line=2),  # new
        _record("Velmora Quay", "A second Velmora Quay.", line=3),  # a duplicate within the delta
    ]
    deletes = read_deletes(["Aarhus", "", "  No Such  Title ", "Leeds"])
    batch, counts = apply_corpus_delta(passages, sentences, upserts, deletes, "deletes.txt")

    assert counts.as_dict() == {"kept": 1, "added": 1, "updated": 1, "unchanged": 0, "deleted": 1, "rejected": 2}
    by_title = {r["title"]: r for r in batch.passages.to_pylist()}
    assert sorted(by_title) == ["Leeds", "Oren Vask", "Velmora Quay"]  # Aarhus deleted; Leeds both deleted and upserted: upserted
    assert by_title["Leeds"]["pid"] == passage_id("Leeds") and by_title["Leeds"]["n_sentences"] == 1
    text = {(r["pid"], r["sid"]): r["text"] for r in batch.sentences.to_pylist()}
    assert text == {
        (passage_id("Leeds"), 0): "Leeds is a city in West Yorkshire.",
        (passage_id("Oren Vask"), 0): "Oren Vask directs films.",
        (passage_id("Velmora Quay"), 0): "Velmora Quay is a harbour wall.",
        (passage_id("Velmora Quay"), 1): "It was built in 1802.",
    }
    rejects = {(r["reason"], r["key"], r["line"]) for r in batch.rejects.to_pylist()}
    assert rejects == {("duplicate_title", "Velmora Quay", 3), ("unknown_title", "No Such Title", 3)}
    assert batch.passages.column("pid").to_pylist() == sorted(batch.passages.column("pid").to_pylist())


def test_an_empty_delta_changes_nothing():
    passages, sentences = _corpus({"Aarhus": ["Aarhus is a city."]})
    batch, counts = apply_corpus_delta(passages, sentences, [], [])
    assert batch.passages.equals(passages) and batch.sentences.equals(sentences) and batch.rejects.num_rows == 0
    assert counts.as_dict() == {"kept": 1, "added": 0, "updated": 0, "unchanged": 0, "deleted": 0, "rejected": 0} and counts.changes_nothing


def test_upserting_a_passage_as_it_is_changes_nothing():
    passages, sentences = _corpus({"Aarhus": ["Aarhus is a city.", "It is in Denmark."], "Leeds": ["Leeds is a city."]})
    _, counts = apply_corpus_delta(passages, sentences, [_record("Aarhus", "Aarhus is a city.", "It is in Denmark.")], [])
    assert counts.as_dict()["unchanged"] == 1 and counts.changes_nothing
    _, counts = apply_corpus_delta(passages, sentences, [_record("Aarhus", "Aarhus is a city.", "It is in Jutland.")], [])
    assert counts.as_dict()["updated"] == 1 and not counts.changes_nothing
