"""FLIPR distilled from a cross-encoder teacher, as ColBERTv2 trains (Santhanam et al., 2022),
on hop labels.

The teacher is condenser stage 1: it reads claim + context + one passage jointly, which FLIPR's
late interaction cannot. A passage's teacher score is its best sentence's stage-1 score (what
decides whether stage 1 takes anything from it). For every labelled hop the teacher scores the
positive and the label round's hard negatives. FLIPR then keeps its in-batch cross-entropy and
also learns the teacher's distribution over the hop's own group (positive + hard negatives) by KL
divergence, and the hard negatives it trains against are those the teacher scores highest (the
label round's ranker picked eight; the teacher says which of them are the hardest).

Passages with no sentence to score (a title alone) get no teacher mass: probability 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from baleen_core.condensing.condense import Stage1Query, condense_stage1
from baleen_core.condensing.layouts import PassageSentences, passage_or_nothing
from baleen_core.condensing.models import SequenceModel
from baleen_core.config import CondenserConfig

if TYPE_CHECKING:  # flipr_trainer imports group_kl from here
    from baleen_core.training.flipr_trainer import FliprExample


@dataclass(frozen=True)
class TeacherHop:
    """One labelled hop as the teacher reads it: the positive first, then the hard negatives."""

    claim: str
    context: tuple[str, ...]
    pids: tuple[int, ...]


def passage_scores(ranked_sentences, pids: Sequence[int]) -> list[float]:
    """Each pid's best sentence score among ``ranked_sentences`` (stage 1's output for one
    query); ``-inf`` for a pid none of whose sentences was scored."""
    best: dict[int, float] = {}
    for scored in ranked_sentences:
        pid = scored.sentence.pid
        best[pid] = max(best.get(pid, -math.inf), scored.score)
    return [best.get(pid, -math.inf) for pid in pids]


def teacher_scores(
    stage1: SequenceModel,
    hops: Sequence[TeacherHop],
    passages: Mapping[int, PassageSentences],
    config: CondenserConfig,
    hops_per_batch: int = 32,
    on_batch: Callable[[int], None] | None = None,
) -> list[list[float]]:
    """The teacher's score of each hop's passages, in the hop's order (:func:`passage_scores`).
    ``passages``: the condensers' view of at least every pid the hops name. ``on_batch`` hears
    how many hops are done after each batch (progress on long work)."""
    scores: list[list[float]] = []
    for start in range(0, len(hops), hops_per_batch):
        batch = hops[start : start + hops_per_batch]
        queries = [Stage1Query(h.claim, h.context, tuple(passage_or_nothing(passages, pid) for pid in h.pids)) for h in batch]
        with torch.no_grad():
            ranked = condense_stage1(stage1, queries, config)
        scores.extend(passage_scores(r, h.pids) for r, h in zip(ranked, batch, strict=True))
        if on_batch is not None:
            on_batch(len(scores))
    return scores


def with_teacher(example: FliprExample, scores: Sequence[float]) -> FliprExample:
    """``example`` with its negatives ordered by the teacher, hardest first (ties keep the label
    round's order), and the teacher's scores aligned with (positive, *negatives).
    ``scores``: the teacher's for (positive, *the example's negatives), in that order."""
    if len(scores) != 1 + len(example.negatives):
        raise ValueError(f"{len(scores)} teacher scores for a positive and {len(example.negatives)} negatives")
    order = sorted(range(len(example.negatives)), key=lambda i: -scores[1 + i])
    return replace(example, negatives=tuple(example.negatives[i] for i in order), teacher=(scores[0], *(scores[1 + i] for i in order)))


def group_kl(student_scores: torch.Tensor, teacher_scores: torch.Tensor) -> torch.Tensor:
    """Mean over queries of KL(teacher ‖ student) over each query's own group of passages
    (``[queries, group]`` scores, the positive first). A teacher score of ``-inf`` is a
    probability of 0 and costs nothing; a query whose teacher scored nothing is left out, and
    so is every query of a batch without any (0)."""
    scored = torch.isfinite(teacher_scores).any(dim=-1)
    if not bool(scored.any()):
        return student_scores.sum() * 0.0
    target = torch.softmax(teacher_scores[scored].float(), dim=-1)
    return F.kl_div(torch.log_softmax(student_scores[scored].float(), dim=-1), target, reduction="batchmean")
