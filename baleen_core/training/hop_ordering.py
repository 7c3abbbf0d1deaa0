"""Latent hop ordering: which gold passage is learnable at which hop.

HoVer gives each claim an unordered set of gold passages. Baleen's training needs, for every hop,
a positive passage that is findable given the claim and the facts found so far. A round of weak
supervision decides it with a retriever:

    context ← ∅
    for hop = 1 … num_hops:   (all the round's claims together: one ranker call per hop)
        rank the corpus for claim + context (passages already in the context excluded)
        positive ← the remaining gold passage ranked best (ties and unreached ones: best exact score)
        negatives ← the best-ranked passages that are not gold
        context ← context + the positive's gold sentences

With a second retriever for negatives (``labels.bm25_negatives``: BM25 beside FLIPR), the
negatives alternate between the two rankings' non-gold passages for the same query (the round's
first, the other's first, the round's second, …, repeats skipped), so the condensers also train against the
lexical distractors a fused ranking hands them. The positives stay the round's own.

Round 0 uses a heuristic retriever (BM25 or the untrained FLIPR); round r+1 relabels with the
FLIPR trained on round r. A gold passage ranked beyond ``depth`` is recorded as *not reached*
(rank None): it is still assigned, by exact score.

A round labels the hops the engine runs, ``num_hops``: a claim with more gold passages than hops
leaves the rest unassigned (its last hop's ``remaining_gold`` still lists them; the round's
statistics count such claims), and one with fewer has no label for its last hops. In HoVer the
two agree for every hover-mini claim.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from baleen_core.retrieval.tokenization import fact_text


@dataclass(frozen=True)
class GoldPassage:
    pid: int
    title: str
    facts: tuple[str, ...]  # the passage's gold sentences, in sentence order


@dataclass(frozen=True)
class ClaimGold:
    uid: str
    claim: str
    num_hops: int
    passages: tuple[GoldPassage, ...]


class HopRanker(Protocol):
    """What a round needs from a retriever."""

    name: str

    def rank_and_score(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[set[int]], pids: Sequence[Sequence[int]]
    ) -> tuple[list[list[tuple[int, float]]], list[list[float]]]:
        """Per query: its top ``depths[i]`` passages as (pid, score), best first, skipping
        ``excludes[i]``; and the exact scores of the passages ``pids[i]``."""


@dataclass
class HopLabel:
    uid: str
    hop: int
    context_pids: list[int]
    context_facts: list[str]
    positive_pid: int
    positive_rank: int | None  # 1-based rank among the corpus minus the context; None = beyond depth
    positive_score: float
    negative_pids: list[int]
    remaining_gold: dict[int, int | None] = field(default_factory=dict)  # every unassigned gold pid → its rank

    @property
    def reached(self) -> bool:
        return self.positive_rank is not None



def label_row(label: HopLabel, round_number: int, labeller: str) -> dict:
    """A hop label as a ``hop_labels`` row (what the condensers' and FLIPR's examples read)."""
    return {
        "round": round_number,
        "labeller": labeller,
        "uid": label.uid,
        "hop": label.hop,
        "context_pids": label.context_pids,
        "context_facts": label.context_facts,
        "positive_pid": label.positive_pid,
        "positive_rank": label.positive_rank,
        "positive_score": label.positive_score,
        "negative_pids": label.negative_pids,
        "remaining_gold_pids": list(label.remaining_gold),
        "remaining_gold_ranks": list(label.remaining_gold.values()),
        "reached": label.reached,
    }

def round_labeller(ranker_name: str, bm25_negatives: bool) -> str:
    """A round's ``labeller``: the ranker's name, marked when BM25 supplied every other hard
    negative (``labels.bm25_negatives``)."""
    return f"{ranker_name} · bm25 negatives" if bm25_negatives else ranker_name


class NegativesRanker(Protocol):
    """What a second source of hard negatives needs: rankings of a batch of queries."""

    def rank_batch(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[set[int]]
    ) -> list[list[tuple[int, float]]]: ...


def interleaved_negatives(first: Sequence[int], second: Sequence[int], gold: set[int], n: int) -> list[int]:
    """Up to ``n`` hard negatives taken alternately from two rankings' non-gold passages,
    ``first``'s first, each passage once; when one ranking runs out, the other's go on."""
    chosen: dict[int, None] = {}  # insertion-ordered set
    for pair in itertools.zip_longest((p for p in first if p not in gold), (p for p in second if p not in gold)):
        for pid in pair:
            if pid is not None and len(chosen) < n:
                chosen.setdefault(pid)
    return list(chosen)


def order_hops(gold: ClaimGold, ranker: HopRanker, depth: int = 100, n_negatives: int = 8) -> list[HopLabel]:
    """Assign one claim's gold passages to hops with ``ranker`` (see the module docstring)."""
    return label_claims([gold], ranker, depth, n_negatives)


def label_claims(
    claims: Sequence[ClaimGold], ranker: HopRanker, depth: int, n_negatives: int, on_claim: Callable[[], None] | None = None, batch_size: int = 512,
    negatives_from: NegativesRanker | None = None,
) -> list[HopLabel]:
    """One label round: every claim's hops ordered with ``ranker`` (see the module docstring),
    in claim order. ``batch_size`` claims at a time go through their hops together, hop 1 of
    them all in one ranker call, then hop 2, …, as the engine runs its hops (a GPU ranks them as
    one batch); ``on_claim`` is called once per claim labelled (progress). ``negatives_from``, when
    given, ranks every hop's query too and supplies every other hard negative."""
    labels = []
    for start in range(0, len(claims), batch_size):
        chunk = claims[start : start + batch_size]
        for labelled in _label_together(chunk, ranker, depth, n_negatives, negatives_from):
            labels.extend(labelled)
            if on_claim is not None:
                on_claim()
    return labels


def _label_together(claims: Sequence[ClaimGold], ranker: HopRanker, depth: int, n_negatives: int, negatives_from: NegativesRanker | None) -> list[list[HopLabel]]:
    """Each claim's hop labels, hop by hop over all the claims."""
    remaining = [list(gold.passages) for gold in claims]
    context_pids: list[list[int]] = [[] for _ in claims]
    context_facts: list[list[str]] = [[] for _ in claims]
    labels: list[list[HopLabel]] = [[] for _ in claims]
    for hop in range(1, max((gold.num_hops for gold in claims), default=0) + 1):
        active = [i for i, gold in enumerate(claims) if hop <= gold.num_hops and remaining[i]]
        if not active:
            break
        queries = [claims[i].claim for i in active], [list(context_facts[i]) for i in active]
        excludes = [set(context_pids[i]) for i in active]
        rankings, scores = ranker.rank_and_score(*queries, [depth] * len(active), excludes, [[p.pid for p in remaining[i]] for i in active])
        # the other ranking needs only enough depth to yield its share of negatives past the gold
        others = (
            negatives_from.rank_batch(*queries, [n_negatives + len(claims[i].passages) for i in active], excludes)
            if negatives_from is not None else [[] for _ in active]
        )
        for i, ranked, gold_scores, other in zip(active, rankings, scores, others, strict=True):
            rank_of = {pid: r + 1 for r, (pid, _) in enumerate(ranked)}
            score_of = dict(zip((p.pid for p in remaining[i]), gold_scores, strict=True))
            best = min(remaining[i], key=lambda p: (rank_of.get(p.pid, math.inf), -score_of[p.pid], p.pid))
            gold_pids = {p.pid for p in claims[i].passages}
            labels[i].append(
                HopLabel(
                    uid=claims[i].uid,
                    hop=hop,
                    context_pids=list(context_pids[i]),
                    context_facts=list(context_facts[i]),
                    positive_pid=best.pid,
                    positive_rank=rank_of.get(best.pid),
                    positive_score=float(score_of[best.pid]),
                    negative_pids=interleaved_negatives([pid for pid, _ in ranked], [pid for pid, _ in other], gold_pids, n_negatives),
                    remaining_gold={p.pid: rank_of.get(p.pid) for p in remaining[i]},
                )
            )
            remaining[i].remove(best)
            context_pids[i].append(best.pid)
            context_facts[i].extend(fact_text(best.title, fact) for fact in best.facts)
    return labels


def claims_from_rows(rows: Sequence[dict]) -> list[ClaimGold]:
    """Group ``(uid, claim, num_hops, pid, title, sid, text)`` rows, sorted by uid/pid/sid, into claims."""
    claims: dict[str, dict] = {}
    for row in rows:
        claim = claims.setdefault(row["uid"], {"row": row, "passages": {}})
        passage = claim["passages"].setdefault(row["pid"], (row["title"], []))
        passage[1].append(row["text"])
    return [
        ClaimGold(
            uid,
            c["row"]["claim"],
            int(c["row"]["num_hops"]),
            tuple(GoldPassage(int(pid), title, tuple(facts)) for pid, (title, facts) in c["passages"].items()),
        )
        for uid, c in claims.items()
    ]


def round_statistics(labels: Sequence[HopLabel], previous: dict[tuple[str, int], int] | None = None) -> list[dict]:
    """Per hop (and 'all'): assignments, share reached, mean and median rank of reached positives,
    and how many positives changed since the previous round."""
    rows = []
    for hop in [*sorted({label.hop for label in labels}), "all"]:
        chosen = [label for label in labels if hop == "all" or label.hop == hop]
        ranks = sorted(label.positive_rank for label in chosen if label.positive_rank is not None)
        row = {
            "hop": str(hop),
            "assigned": len(chosen),
            "reached": round(len(ranks) / max(len(chosen), 1), 4),
            "mean_rank": round(sum(ranks) / len(ranks), 2) if ranks else None,
            "median_rank": ranks[len(ranks) // 2] if ranks else None,
        }
        if previous is not None:
            row["changed"] = sum(previous.get((label.uid, label.hop)) != label.positive_pid for label in chosen)
        rows.append(row)
    return rows
