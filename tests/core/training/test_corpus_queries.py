"""Inverse-cloze queries from the corpus: which sentence, which negatives, which passages."""

from __future__ import annotations

import random

import pytest

from baleen_core.condensing.layouts import PassageSentences, Sentence
from baleen_core.retrieval.bm25 import Bm25Retriever
from baleen_core.training.corpus_queries import corpus_query, corpus_query_examples, subject_name

PASSAGES = {
    1: ("Princess (Princess 1986 album)", ["Princess is the debut studio album by singer Princess.", "It was released by Supreme Records in 1986."]),
    2: ("Princess (singer)", ["Princess is an English singer.", "She recorded for Supreme Records."]),
    3: ("Supreme Records", ["Supreme Records was a British record label.", "It released albums in the 1980s."]),
    4: ("Gornja Suvaja, Croatia", ["Gornja Suvaja is a village in Croatia."]),
    5: ("Empty page", []),
}


def corpus() -> tuple[dict[int, PassageSentences], dict[int, str]]:
    passages = {pid: PassageSentences(pid, title, tuple(Sentence(pid, sid, title, text) for sid, text in enumerate(texts))) for pid, (title, texts) in PASSAGES.items()}
    return passages, {pid: f"{title} | {' '.join(texts)}" for pid, (title, texts) in PASSAGES.items()}


def test_the_subject_name_drops_only_a_trailing_disambiguation():
    assert subject_name("Princess (Princess 1986 album)") == "Princess"
    assert subject_name("Gornja Suvaja, Croatia") == "Gornja Suvaja, Croatia"
    assert subject_name("The Fall (band) (disambiguation)") == "The Fall (band)"
    assert subject_name("(Untitled)") == "(Untitled)"  # nothing would be left


def test_a_query_is_a_sentence_of_its_passage_that_names_the_subject():
    passages, _ = corpus()
    drawn = {corpus_query(passages[1], random.Random(seed)) for seed in range(20)}
    # the first sentence names "Princess"; the second does not, so it is prefixed with the name
    assert drawn == {"Princess is the debut studio album by singer Princess.", "Princess: It was released by Supreme Records in 1986."}


def test_each_example_is_a_claim_only_query_with_bm25s_top_other_passages_as_negatives():
    passages, texts = corpus()
    pids = sorted(texts)
    bm25 = Bm25Retriever(pids, [texts[p] for p in pids])
    examples = corpus_query_examples(passages, texts, bm25, count=10, hard_negatives=2, seed=0)
    assert len(examples) == 4  # every passage with a sentence; the empty page has none to ask about
    assert [e.positive for e in examples] == [texts[1], texts[2], texts[3], texts[4]]  # pid order
    for example in examples:
        pid = next(p for p in pids if texts[p] == example.positive)
        expected = [texts[p] for p, _ in bm25.rank(example.claim, (), 2, {pid})]
        assert example.context == () and example.gold == frozenset({example.positive})
        assert list(example.negatives) == expected and example.positive not in example.negatives
        assert any(s.text in example.claim for s in passages[pid].sentences)


def test_the_seed_draws_the_passages_and_the_same_seed_draws_the_same():
    passages, texts = corpus()
    pids = sorted(texts)
    bm25 = Bm25Retriever(pids, [texts[p] for p in pids])
    drawn = {seed: [(e.claim, e.positive) for e in corpus_query_examples(passages, texts, bm25, 2, 1, seed)] for seed in range(8)}
    assert drawn[3] == [(e.claim, e.positive) for e in corpus_query_examples(passages, texts, bm25, 2, 1, 3)]
    assert len({tuple(d) for d in drawn.values()}) > 1
    with pytest.raises(ValueError, match="count ≥ 0"):
        corpus_query_examples(passages, texts, bm25, -1, 1, 0)
