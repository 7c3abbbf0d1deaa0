"""The corpus and claims in memory, from Parquet files shaped as the store's, checked by hand."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from baleen_core.config import LabelConfig
from baleen_core.dataset import claim_gold, load_claims, load_corpus


@pytest.fixture
def data(tmp_path):
    pq.write_table(pa.table({"pid": [30, 10, 20, 40], "title": ["Aarhus", "Glass Harbour", "Oren Vask", "Leeds"]}), tmp_path / "passages.parquet")
    pq.write_table(
        pa.table({
            "pid": [10, 10, 20, 20, 20, 30, 40],
            "sid": [1, 0, 0, 1, 2, 0, 0],
            "text": ["It was directed by Oren Vask.", "Glass Harbour is a film.", "Oren Vask is a director.", "", "He was born in Aarhus.", "Aarhus is in Denmark.", "Leeds is a city."],
        }),
        tmp_path / "sentences.parquet",
    )
    pq.write_table(
        pa.table({
            "uid": ["c2", "c1", "c3", "d1"],
            "claim": ["claim two", "claim one", "claim three", "dev claim"],
            "label": ["SUPPORTED", "NOT_SUPPORTED", "SUPPORTED", "SUPPORTED"],
            "num_hops": [2, 2, 2, 2],
            "split": ["train", "train", "train", "dev"],
            "hpqa_id": ["q2", "q1", "q3", "q4"],
            "resolved": [True, True, False, True],
        }),
        tmp_path / "claims.parquet",
    )
    pq.write_table(
        pa.table({"uid": ["c1", "c1", "c2", "c2", "c3", "d1"], "pid": [20, 10, 20, 30, 40, 30], "sid": [2, 1, 2, 0, 0, 0]}),
        tmp_path / "gold_facts.parquet",
    )
    return tmp_path


def test_the_corpus_in_memory_reads_as_the_store_does(data):
    corpus = load_corpus(data, keep=set(), others=None)
    assert corpus.pids == [10, 20, 30, 40]
    assert corpus.texts[10] == "Glass Harbour | Glass Harbour is a film. It was directed by Oren Vask."  # sentence order, not file order
    assert corpus.texts[20] == "Oren Vask | Oren Vask is a director. He was born in Aarhus."  # the empty sentence skipped
    assert [s.sid for s in corpus.passages[20].sentences] == [0, 2] and corpus.sentence_text[(20, 1)] == ""
    assert corpus.fact(20, 2) == "Oren Vask | He was born in Aarhus."
    assert set(corpus.passages_of([40, 99, 10])) == {10, 40}


def test_a_smoke_corpus_keeps_the_gold_passages_and_the_first_others_by_pid(data):
    assert load_corpus(data, keep={30}, others=1).pids == [10, 30]
    assert load_corpus(data, keep={30, 40}, others=0).pids == [30, 40]
    with pytest.raises(ValueError, match="1 gold passages are not in the corpus"):
        load_corpus(data, keep={30, 77}, others=1)


def test_claims_in_memory_are_the_resolved_ones_with_their_gold(data):
    claims, corpus = load_claims(data), load_corpus(data, keep=set(), others=None)
    assert claims.uids("train", None) == ["c1", "c2"] and claims.uids("train", 1) == ["c1"] and claims.uids("dev", None) == ["d1"]
    assert claims.gold["c1"] == {(10, 1), (20, 2)} and "c3" not in claims.gold  # unresolved: left out
    assert claims.gold_pids(["c1", "d1"]) == {10, 20, 30}
    gold = claim_gold(claims, corpus, ["c2", "c1"])
    assert [g.uid for g in gold] == ["c1", "c2"]
    assert [(p.pid, p.title, p.facts) for p in gold[0].passages] == [(10, "Glass Harbour", ("It was directed by Oren Vask.",)), (20, "Oren Vask", ("He was born in Aarhus.",))]
    assert claims.held_out(LabelConfig(held_out_share=0.0)) == set()
    held = claims.held_out(LabelConfig(held_out_share=0.5, held_out_seed=0))
    assert held <= {"c1", "c2"} and len(held) == 1  # whole questions: one of the two
