"""A corpus and its claims in memory, read from Parquet files in the store's schemas.

For a machine without the store (the GPU benchmark) and for notebooks: ``passages.parquet``,
``sentences.parquet``, ``claims.parquet`` and ``gold_facts.parquet`` as the corpus and claims
flows write them (``benchmarks/gpu_carry.sh`` exports them), held in the shapes the science reads:
the texts FLIPR and BM25 read, the sentences the condensers read, the gold the label rounds and
the metrics read. What the store's readers skip, this skips too (empty sentences, unresolved
claims).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from baleen_core.condensing import PassageSentences, Sentence
from baleen_core.config import LabelConfig
from baleen_core.held_out import held_out_training_claims
from baleen_core.retrieval.tokenization import fact_text, passage_text
from baleen_core.training.hop_ordering import ClaimGold, claims_from_rows


@dataclass
class Corpus:
    """The corpus in memory, in the three shapes the science reads it in."""

    pids: list[int]  # sorted: the index's passage order
    titles: dict[int, str]
    texts: dict[int, str]  # "title | text" of the non-empty sentences: what FLIPR and BM25 read
    passages: dict[int, PassageSentences]  # non-empty sentences: what the condensers read
    sentence_text: dict[tuple[int, int], str]  # every sentence, '' included: gold facts point into these

    def passages_of(self, pids) -> dict[int, PassageSentences]:
        """The engine's ``passages_of`` (tasks/condensing.py's ``passages_by_pid``)."""
        return {pid: self.passages[pid] for pid in pids if pid in self.passages}

    def fact(self, pid: int, sid: int) -> str:
        """A sentence as a fact: ``title | sentence``."""
        return fact_text(self.titles[pid], self.sentence_text[(pid, sid)])


@dataclass
class Claims:
    """Resolved claims (``claims.resolved``) and their gold facts."""

    rows: dict[str, dict]  # uid → {uid, claim, label, num_hops, split, hpqa_id}
    gold: dict[str, set[tuple[int, int]]]  # uid → gold (pid, sid)

    def uids(self, split: str, limit: int | None) -> list[str]:
        """The first ``limit`` resolved claims of ``split`` by uid (the order every flow uses)."""
        return sorted(uid for uid, row in self.rows.items() if row["split"] == split)[:limit]

    def held_out(self, config: LabelConfig) -> set[str]:
        """tasks/labels.py's ``held_out_training_uids``: the training claims no label round labels
        (gold passages stand in for their titles: one per title)."""
        train = self.uids("train", config.max_claims)
        claims = [{"uid": uid, "hpqa_id": self.rows[uid].get("hpqa_id"), "supporting_facts": sorted(self.gold.get(uid, ()))} for uid in train]
        return held_out_training_claims(claims, config.held_out_share, config.held_out_seed)

    def gold_pids(self, uids: Sequence[str]) -> set[int]:
        return {pid for uid in uids for pid, _ in self.gold.get(uid, ())}


def load_claims(data: Path) -> Claims:
    """``claims.parquet`` and ``gold_facts.parquet`` of ``data``: the resolved claims only."""
    rows = pq.read_table(data / "claims.parquet", columns=["uid", "claim", "label", "num_hops", "split", "hpqa_id", "resolved"]).to_pylist()
    resolved = {r["uid"]: r for r in rows if r["resolved"]}
    gold: dict[str, set[tuple[int, int]]] = {}
    for fact in pq.read_table(data / "gold_facts.parquet", columns=["uid", "pid", "sid"]).to_pylist():
        if fact["uid"] in resolved:
            gold.setdefault(fact["uid"], set()).add((fact["pid"], fact["sid"]))
    return Claims(resolved, gold)


def load_corpus(data: Path, keep: set[int], others: int | None) -> Corpus:
    """Every passage of ``data``, or (``others`` given, for smoke tests) the ``keep`` passages plus
    the first ``others`` of the rest by pid (pids are title hashes: a uniform random sample)."""
    passages = pq.read_table(data / "passages.parquet", columns=["pid", "title"])
    titles = dict(zip(passages.column("pid").to_pylist(), passages.column("title").to_pylist(), strict=True))
    pids = sorted(titles)
    if others is not None:
        missing = keep - titles.keys()
        if missing:
            raise ValueError(f"{len(missing)} gold passages are not in the corpus")
        pids = sorted(keep | set([pid for pid in pids if pid not in keep][:others]))
        titles = {pid: titles[pid] for pid in pids}
    sentences = pq.read_table(data / "sentences.parquet", columns=["pid", "sid", "text"]).sort_by([("pid", "ascending"), ("sid", "ascending")])
    sentence_text: dict[tuple[int, int], str] = {}
    by_pid: dict[int, list[Sentence]] = {}
    for pid, sid, text in zip(*(sentences.column(c).to_pylist() for c in ("pid", "sid", "text")), strict=True):
        if pid not in titles:
            continue
        sentence_text[(pid, sid)] = text
        if text:  # the store's passage_sentences / passage_texts skip empty sentences too
            by_pid.setdefault(pid, []).append(Sentence(pid, sid, titles[pid], text))
    return Corpus(
        pids=pids,
        titles=titles,
        texts={pid: passage_text(titles[pid], " ".join(s.text for s in by_pid.get(pid, ()))) for pid in pids},
        passages={pid: PassageSentences(pid, titles[pid], tuple(s)) for pid, s in by_pid.items()},
        sentence_text=sentence_text,
    )


def claim_gold(claims: Claims, corpus: Corpus, uids: Sequence[str]) -> list[ClaimGold]:
    """The claims with their gold sentences (what ``ArtifactStore.claim_gold`` gives the label
    rounds): rows sorted by uid, pid, sid, grouped by ``claims_from_rows``."""
    rows = [
        {**claims.rows[uid], "pid": pid, "sid": sid, "title": corpus.titles[pid], "text": corpus.sentence_text[(pid, sid)]}
        for uid in sorted(uids)
        for pid, sid in sorted(claims.gold[uid])
    ]
    return claims_from_rows(rows)
