"""Corpus readers and merging, including every kind of bad input the issue lists."""

from __future__ import annotations

import gzip
import json
import unicodedata

import pytest

from baleen_core.config import CorpusSource
from baleen_core.corpus import CorpusMerger, SourceRecord, get_splitter, normalize_title, passage_id, read_abstracts, read_beir, read_source
from baleen_core.rejects import InputError, Reject
from helpers import write_abstracts


def _only(records, cls):
    return [r for r in records if isinstance(r, cls)]


def test_abstracts_keep_the_given_split_and_empty_sentences(tmp_path):
    root = write_abstracts(tmp_path, [{"id": "1", "title": "Ed Wood (film)", "text": ["Ed Wood is a film.", " It stars Depp.", " "]}])
    (record,) = list(read_abstracts(root))
    assert record.sentences == ["Ed Wood is a film.", "It stars Depp.", ""]  # sid 2 kept (HoVer ids index this list)
    assert (record.source_file, record.line, record.source_id) == ("AA/wiki_00.bz2", 1, "1")


def test_truncated_bz2_names_file_and_line(tmp_path):
    rows = [{"id": str(i), "title": f"T{i}", "text": [f"Sentence {i} " * 20]} for i in range(200)]
    root = write_abstracts(tmp_path, rows)
    path = root / "AA" / "wiki_00.bz2"
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(InputError, match=r"AA/wiki_00.bz2:\d+: compressed stream ends early .*truncated"):
        list(read_abstracts(root))


def test_invalid_json_line_is_quarantined_with_its_line(tmp_path):
    root = write_abstracts(tmp_path, [{"id": "1", "title": "A", "text": ["a."]}], raw_lines=[b'{"id": "2", "title": "B", "text": [\n'])
    records = list(read_abstracts(root))
    (reject,) = _only(records, Reject)
    assert reject.reason.value == "invalid_json" and reject.line == 2
    assert reject.detail == "invalid JSON at column 37: Expecting value"
    assert len(_only(records, SourceRecord)) == 1


def test_non_utf8_byte_is_quarantined(tmp_path):
    bad = b'{"id": "2", "title": "Caf\xe9", "text": ["x."]}\n'
    root = write_abstracts(tmp_path, [{"id": "1", "title": "A", "text": ["a."]}], raw_lines=[bad])
    (reject,) = _only(list(read_abstracts(root)), Reject)
    assert reject.reason.value == "invalid_utf8" and reject.line == 2 and "0xe9" in reject.detail


@pytest.mark.parametrize(
    "row, reason",
    [
        ({"id": "1", "title": "A", "text": ["", "  "]}, "empty_text"),
        ({"id": "1", "text": ["a."]}, "missing_field"),
        ({"id": "1", "title": "A"}, "missing_field"),
        ({"id": "1", "title": "  ", "text": ["a."]}, "empty_title"),
        ({"id": "1", "title": "A", "text": "not a list"}, "wrong_type"),
    ],
)
def test_unusable_abstract_rows_are_quarantined(tmp_path, row, reason):
    root = write_abstracts(tmp_path, [row])
    (reject,) = list(read_abstracts(root))
    assert isinstance(reject, Reject) and reject.reason.value == reason and reject.source_file == "AA/wiki_00.bz2"
    # the key names the record: its title where it has one, else its id
    assert reject.key == (normalize_title(row["title"]) if isinstance(row.get("title"), str) and row["title"].strip() else "1")


def _beir(tmp_path, rows):
    path = tmp_path / "corpus.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for row in rows:
            fh.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def test_beir_text_is_split_into_sentences(tmp_path):
    path = _beir(tmp_path, [{"_id": "9", "title": "Gornja", "text": "Gornja is a village. It lies in Croatia. About 300 people lived there in 2011.", "metadata": {}}])
    (record,) = list(read_beir(path, get_splitter("blingfire")))
    assert record.sentences == ["Gornja is a village.", "It lies in Croatia.", "About 300 people lived there in 2011."]
    assert record.source_id == "9"


def test_beir_empty_text_and_missing_id(tmp_path):
    path = _beir(tmp_path, [{"_id": "1", "title": "A", "text": "   "}, {"title": "B", "text": "b."}, ""])
    rejects = list(read_beir(path, get_splitter("blingfire")))
    assert [r.reason.value for r in rejects] == ["empty_text", "missing_field"]  # blank line: not a record


def test_duplicate_title_first_source_wins_and_counts_reconcile(tmp_path):
    root = write_abstracts(tmp_path, [{"id": "1", "title": "Heat", "text": ["Heat (abstracts)."]}])
    beir = _beir(tmp_path, [{"_id": "7", "title": "Heat", "text": "Heat (beir)."}, {"_id": "8", "title": "Cold", "text": "Cold."}])
    split = get_splitter("blingfire")
    merger = CorpusMerger(batch_passages=1)
    batches = list(merger.batches([
        ("abstracts", read_source(CorpusSource(kind="abstracts", path=root), split)),
        ("beir", read_source(CorpusSource(kind="beir", path=beir), split)),
    ]))
    titles = [t for b in batches for t in b.passages.column("title").to_pylist()]
    rejects = [r for b in batches for r in b.rejects.to_pylist()]
    assert titles == ["Heat", "Cold"]
    assert [(r["reason"], r["key"], r["source_file"], r["line"]) for r in rejects] == [("duplicate_title", "Heat", "corpus.jsonl.gz", 1)]
    assert merger.stats.total_in == 3 and merger.stats.passages == 2 and merger.stats.reconciles()


def test_nfd_title_is_normalised_to_nfc():
    nfd = unicodedata.normalize("NFD", "Pokémon  Red")
    assert normalize_title(nfd) == "Pokémon Red" and normalize_title(nfd) == unicodedata.normalize("NFC", "Pokémon Red")
    assert passage_id(normalize_title(nfd)) == passage_id("Pokémon Red")


def test_passage_ids_are_stable_and_63_bit():
    assert passage_id("Ed Wood") == passage_id("Ed Wood") != passage_id("Ed Wood (film)")
    assert 0 <= passage_id("Ed Wood") < 2**63


def test_missing_source_paths_raise_clear_errors(tmp_path):
    with pytest.raises(InputError, match="must be a directory"):
        list(read_abstracts(tmp_path / "nope"))
    with pytest.raises(InputError, match="must be a .jsonl"):
        list(read_beir(tmp_path / "nope.jsonl", get_splitter("blingfire")))


@pytest.mark.parametrize("name", ["blingfire", "pysbd"])
def test_both_splitter_candidates_agree_with_hotpotqa_on_real_intros(hover_mini, name):
    """The README's splitter comparison, as a check: each candidate reproduces HotpotQA's split."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from sentence_splitters import load_paragraphs, score

    result = score(name, load_paragraphs(hover_mini, 200))
    assert result["f1"] > 0.9 and result["exact_passages"] > 0.85
