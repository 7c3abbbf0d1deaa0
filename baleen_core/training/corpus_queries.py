"""Inverse-cloze queries from the corpus itself: FLIPR examples that need no label round.

Hop labels teach FLIPR one passage per labelled hop, so the passages it is taught are the training
claims' gold and their hard negatives: a few thousand of the corpus. A held-out claim's gold
passages are, for the most part, passages FLIPR never trained on, and from the claim alone it
finds fewer of them than BM25 does (docs/benchmarks.md, issue 50). A corpus query reaches every
passage without a label: one sentence of a passage, stated of the passage's subject as a claim
names its entities, whose positive is the passage and whose hard negatives are BM25's top other
passages for the same sentence (the inverse cloze task of Lee et al., 2019, "Latent Retrieval for
Weakly Supervised Open Domain Question Answering"). The sentence stays in its passage, because
the index encodes whole passages; BM25's negatives share the sentence's words, so matching them
alone does not rank the positive first.

The queries are claim-only (no context facts), like a claim's first hop, the hop where FLIPR
trails BM25.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping

from baleen_core.condensing.layouts import PassageSentences
from baleen_core.retrieval.recall import Ranker
from baleen_core.training.flipr_trainer import FliprExample

_DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")


def subject_name(title: str) -> str:
    """A Wikipedia title without its trailing disambiguation: ``Princess (Princess 1986 album)`` →
    ``Princess``."""
    return _DISAMBIGUATION.sub("", title).strip() or title


def corpus_query(passage: PassageSentences, rng: random.Random) -> str:
    """One of the passage's sentences, drawn by ``rng``; prefixed with the subject's name when the
    sentence does not name it (a later sentence's "It is ..."), since a claim names what it is about."""
    sentence = rng.choice(passage.sentences).text
    name = subject_name(passage.title)
    return sentence if name.lower() in sentence.lower() else f"{name}: {sentence}"


def corpus_query_examples(
    passages: Mapping[int, PassageSentences], passage_text: Mapping[int, str], ranker: Ranker, count: int, hard_negatives: int, seed: int
) -> list[FliprExample]:
    """``count`` corpus queries (all passages with a sentence, when fewer), from passages drawn by
    ``seed`` uniformly over the corpus, in pid order. ``passage_text``: ``title | text`` by pid, as
    FLIPR and BM25 read them; ``ranker`` (BM25) gives each query's hard negatives, the positive
    excluded."""
    if count < 0 or hard_negatives < 0:
        raise ValueError(f"corpus queries need count ≥ 0 and hard_negatives ≥ 0, got {count} and {hard_negatives}")
    rng = random.Random(seed)
    candidates = sorted(pid for pid, passage in passages.items() if passage.sentences)
    examples = []
    for pid in sorted(rng.sample(candidates, min(count, len(candidates)))):
        query = corpus_query(passages[pid], rng)
        negatives = tuple(passage_text[p] for p, _ in ranker.rank(query, (), hard_negatives, {pid}))
        positive = passage_text[pid]
        examples.append(FliprExample(query, (), positive, negatives, frozenset({positive})))
    return examples
