"""HoVer's evaluation metrics, per claim (averaged over claims by the caller).

- ``set_prf``: HotpotQA/HoVer's supporting-fact metric, precision, recall and F1 of the predicted
  set against the gold set, and exact match; on (pid, sid) pairs it is the sentence metric, on
  pids the passage metric. Nothing predicted gives precision 0; an empty gold set is refused.
- ``retrieval_at_k``: all gold passages among the first k retrieved (Retrieval@depth: the claim's
  whole pool, the first ``depth`` distinct passages retrieved over its hops; Retrieval@100 at the
  reference's depth).
- ``hover_score``: label right and evidence from every gold passage, as HoVer counts it.
- ``score_claim``: all of them for one claim the engine verified; ``summarize_metrics`` averages
  them by hop count (``by_hop_count``) with percentile-bootstrap confidence intervals (``bootstrap_ci``);
  ``paired_difference`` compares two systems on the same claims (paired bootstrap).
- ``gold_funnel``: where a claim's gold passages are lost (retrieved, stage 1, final facts).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class SetScores:
    precision: float
    recall: float
    f1: float
    em: float


def set_prf(predicted: Iterable[Hashable], gold: Iterable[Hashable]) -> SetScores:
    """Precision, recall, F1 and exact match of ``predicted`` against ``gold`` (as sets)."""
    p, g = set(predicted), set(gold)
    if not g:
        raise ValueError("the gold set is empty; every HoVer claim has supporting facts")
    hits = len(p & g)
    precision = hits / len(p) if p else 0.0
    recall = hits / len(g)
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    return SetScores(precision, recall, f1, float(p == g))


def retrieval_at_k(retrieved: Sequence[Hashable], gold: Iterable[Hashable], k: int) -> float:
    """1.0 when every gold passage is among the first ``k`` retrieved (over all hops, in hop then
    rank order), else 0.0: Baleen's Retrieval@k."""
    return float(set(gold) <= set(list(retrieved)[:k]))


def hover_score(
    label_correct: bool,
    ranked_passages: Sequence[int],
    ranked_sentences: Mapping[int, Sequence[int]],
    gold: Iterable[tuple[int, int]],
    num_hops: int,
) -> float:
    """HoVer's score for one claim: 1.0 when the label is right *and* every gold passage has at
    least one of its gold sentences among the evidence that counts, which for a k-hop claim is
    the top 2 sentences (``ranked_sentences[pid]``, best first) of each of the first k + 1
    retrieved passages (``ranked_passages``)."""
    if not label_correct:
        return 0.0
    counted = {(pid, sid) for pid in ranked_passages[: num_hops + 1] for sid in ranked_sentences.get(pid, ())[:2]}
    needed: dict[int, set[int]] = {}
    for pid, sid in gold:
        needed.setdefault(pid, set()).add(sid)
    return float(all(any((pid, sid) in counted for sid in sids) for pid, sids in needed.items()))


def evidence_ranking(facts: Sequence[tuple[int, int]]) -> tuple[list[int], dict[int, list[int]]]:
    """The passages and sentences of a ranked fact list (best first), as :func:`hover_score` reads
    them: passages in the order of their best fact, and each passage's sentences in fact order."""
    passages: list[int] = []
    sentences: dict[int, list[int]] = {}
    for pid, sid in facts:
        if pid not in sentences:
            passages.append(pid)
            sentences[pid] = []
        sentences[pid].append(sid)
    return passages, sentences


#: Every per-claim metric :func:`score_claim` returns, in report order.
CLAIM_METRICS = (
    "passage_em",
    "passage_f1",
    "sentence_em",
    "sentence_f1",
    "retrieval_at_hops",
    "retrieval_at_depth",
    "label_accuracy",
    "hover_score",
)


def metric_label(metric: str, depth: int | None = None) -> str:
    """A metric's name in tables and plots: ``retrieval_at_depth`` by the depth it measures
    (``retrieval@100`` at the reference's depth, ``retrieval@30`` in the demo)."""
    return f"retrieval@{depth}" if metric == "retrieval_at_depth" and depth else metric


def score_claim(
    facts: Sequence[tuple[int, int]],
    read: Iterable[int],
    pool: Sequence[int],
    gold: Iterable[tuple[int, int]],
    num_hops: int,
    predicted_label: str,
    gold_label: str | None,
    depth: int,
) -> dict[str, float | None]:
    """HoVer's metrics for one claim from what the engine produced.

    ``facts`` are the final (pid, sid) facts, best first; ``read`` the passages the condensers
    read over all hops; ``pool`` the claim's Retrieval@depth pool (distinct passages in the order
    they were retrieved, see ``baleen_core.engine``); ``gold`` the claim's (pid, sid) supporting
    facts; ``num_hops`` the hops HoVer's score counts evidence for. The passage metrics compare the
    passages of the final facts with the gold passages, the sentence metrics the facts with the
    gold facts. ``retrieval_at_hops``: every gold passage was read by the condensers;
    ``retrieval_at_depth``: every gold passage is among the pool's first ``depth`` (the engine's
    retrieval depth, so the whole pool). With no gold label (a test split) the label metrics are
    None."""
    gold = set(gold)
    gold_pids = {pid for pid, _ in gold}
    passage = set_prf({pid for pid, _ in facts}, gold_pids)
    sentence = set_prf(facts, gold)
    correct = None if gold_label is None else predicted_label == gold_label
    ranked_passages, ranked_sentences = evidence_ranking(facts)
    return {
        "passage_precision": passage.precision,
        "passage_recall": passage.recall,
        "passage_f1": passage.f1,
        "passage_em": passage.em,
        "sentence_precision": sentence.precision,
        "sentence_recall": sentence.recall,
        "sentence_f1": sentence.f1,
        "sentence_em": sentence.em,
        "retrieval_at_hops": float(gold_pids <= set(read)),
        "retrieval_at_depth": retrieval_at_k(pool, gold_pids, depth),
        "label_accuracy": None if correct is None else float(correct),
        "hover_score": None if correct is None else hover_score(correct, ranked_passages, ranked_sentences, gold, num_hops),
    }


def gold_funnel(retrieved: Iterable[int], stage1: Iterable[int], facts: Sequence[tuple[int, int]], gold: Iterable[tuple[int, int]]) -> dict[str, float | int]:
    """Where a claim's gold passages are lost: the share of them retrieved (any hop), put forward
    by stage 1 (any hop), and among the final facts' passages, plus how many final facts there
    are and from how many passages. Each share can only shrink along the way for the engine,
    whose facts come from stage 1's picks and those from the retrieved passages."""
    gold_pids = {pid for pid, _ in gold}
    if not gold_pids:
        raise ValueError("a claim without gold facts has no funnel")

    def share(pids: Iterable[int]) -> float:
        return len(gold_pids & set(pids)) / len(gold_pids)

    return {
        "gold_retrieved": share(retrieved),
        "gold_in_stage1": share(stage1),
        "gold_in_facts": share(pid for pid, _ in facts),
        "final_facts": len(facts),
        "final_passages": len({pid for pid, _ in facts}),
    }


#: The funnel's columns in ``claim_metrics``, in the order the gold passages pass through.
FUNNEL = ("gold_retrieved", "gold_in_stage1", "gold_in_facts", "sentence_recall", "final_facts", "final_passages")


def bootstrap_ci(values: Sequence[float], samples: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean: resample the claims with
    replacement ``samples`` times (seeded, so a report is reproducible)."""
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    if len(data) == 0:
        raise ValueError("no values to bootstrap")
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(samples, len(data)))].mean(axis=1)
    tail = (1 - level) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))


@dataclass(frozen=True)
class PairedDifference:
    mean: float  # mean of a - b over the claims
    ci: tuple[float, float]  # percentile bootstrap interval of that mean
    p_not_greater: float  # share of resamples whose mean difference is <= 0 (one-sided, for a > b)


def paired_difference(a: Sequence[float], b: Sequence[float], samples: int = 1000, seed: int = 0, level: float = 0.95) -> PairedDifference:
    """Two systems' per-claim values on the same claims (aligned), compared by resampling the
    claims together, so that what the claims share (an easy claim is easy for both) cancels: the
    interval of the mean difference is much narrower than the two systems' own intervals suggest."""
    import numpy as np

    if len(a) != len(b):
        raise ValueError(f"paired values must align: {len(a)} against {len(b)}")
    if len(a) == 0:
        raise ValueError("no values to compare")
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(samples, len(diff)))].mean(axis=1)
    tail = (1 - level) / 2
    return PairedDifference(float(diff.mean()), (float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail))), float((means <= 0).mean()))


def by_hop_count(items: Sequence[T], hops_of: Callable[[T], int]) -> list[tuple[str, list[T]]]:
    """Group ``items`` per hop count, in order ("2", "3", "4" — whichever occur), then all of
    them as "all": the grouping of every per-hop table in the evaluation report."""
    counts = sorted({hops_of(item) for item in items})
    return [(str(h), [item for item in items if hops_of(item) == h]) for h in counts] + [("all", list(items))]


def paired_by_hop_count(
    pairs: Sequence[tuple[Mapping, Mapping]], metrics: Sequence[str], samples: int = 1000, seed: int = 0
) -> list[tuple[str, int, dict[str, PairedDifference | None]]]:
    """Two systems' rows of the same claims, ``(a, b)`` pairs in the order given, compared per
    hop count (``a``'s ``num_hops``) and overall: (hops, claims, {metric: a − b, or None where no
    pair has both values})."""
    out = []
    for hops, chosen in by_hop_count(pairs, lambda pair: int(pair[0]["num_hops"])):
        diffs: dict[str, PairedDifference | None] = {}
        for metric in metrics:
            both = [(a[metric], b[metric]) for a, b in chosen if a.get(metric) is not None and b.get(metric) is not None]
            diffs[metric] = paired_difference([x for x, _ in both], [y for _, y in both], samples, seed) if both else None
        out.append((hops, len(chosen), diffs))
    return out


def summarize_metrics(rows: Sequence[Mapping], metrics: Sequence[str], samples: int = 1000, seed: int = 0) -> list[dict]:
    """Mean of each metric per hop count ("2", "3", "4") and over all claims ("all"), with its
    bootstrap 95% interval as ``<metric>_ci`` unless ``samples`` is 0; rows need ``num_hops``
    and the metrics (None values are skipped; a metric with none is None)."""
    out = []
    for hops, chosen in by_hop_count(rows, lambda r: r["num_hops"]):
        summary: dict = {"hops": hops, "claims": len(chosen)}
        for metric in metrics:
            values = [float(r[metric]) for r in chosen if r.get(metric) is not None]
            summary[metric] = sum(values) / len(values) if values else None
            if samples:
                summary[f"{metric}_ci"] = bootstrap_ci(values, samples, seed) if values else None
        out.append(summary)
    return out
