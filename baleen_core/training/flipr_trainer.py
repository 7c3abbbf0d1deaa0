"""Training FLIPR on hop labels.

Each example is one hop of one claim: the query is the claim plus the context facts of earlier
hops, the positive is the gold passage assigned to this hop, the negatives are the hop's hard
negatives. A step scores every query against every passage of the batch (its own positive and
hard negatives plus the other queries' passages, i.e. in-batch negatives) with FLIPR, and
minimises the cross-entropy of the positive. A passage of the batch that is gold for the query's
claim (another hop's positive of the same claim, or another claim's copy of it) is left out of
that query's softmax rather than counted as a negative. Mixed precision (fp16 autocast + gradient
scaling) on CUDA.

Checkpoints, resume and the optimizer come from :mod:`baleen_core.training.loop`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F

from baleen_core.config import FliprTrainingConfig
from baleen_core.retrieval.modeling import Flipr, encode_in_length_chunks, training_chunk_tokens
from baleen_core.retrieval.scoring import flipr_score
from baleen_core.training.distillation import group_kl
from baleen_core.training.loop import train_epochs


@dataclass(frozen=True)
class FliprExample:
    claim: str
    context: tuple[str, ...]
    positive: str
    negatives: tuple[str, ...]
    gold: frozenset[str] = frozenset()  # texts of every gold passage of the claim (the positive included)
    teacher: tuple[float, ...] = ()  # a teacher's scores of (positive, *negatives) to distil (baleen_core.training.distillation)


def claim_gold_pids(rows: Sequence[Mapping]) -> dict[str, set[int]]:
    """Every claim's gold passages, from its ``hop_labels`` rows: each hop names those found
    before it (``context_pids``), its own (``positive_pid``) and those left (``remaining_gold_pids``)."""
    gold: dict[str, set[int]] = {}
    for r in rows:
        gold.setdefault(r["uid"], set()).update(r["context_pids"], [r["positive_pid"]], r["remaining_gold_pids"])
    return gold


def flipr_example_pids(rows: Sequence[Mapping], limit: int | None = None) -> set[int]:
    """The passages whose texts :func:`flipr_examples` reads for the first ``limit`` rows."""
    gold = claim_gold_pids(rows)
    return {p for r in rows[:limit] for p in (*gold[r["uid"]], *r["negative_pids"])}


def flipr_examples(
    rows: Sequence[Mapping],
    claim_text: Mapping[str, str],
    passage_text: Mapping[int, str],
    limit: int | None = None,
    claim_only_positives: Literal["assigned", "reached"] = "assigned",
) -> list[FliprExample]:
    """One example per labelled hop (``hop_labels`` rows, the first ``limit``): claim + context
    facts, the positive's text, the negatives' texts, and the texts of every gold passage of the
    claim, which are never in-batch negatives of its queries. ``passage_text``: ``title | text``
    by pid, of at least :func:`flipr_example_pids`.

    ``claim_only_positives="reached"`` adds, after each hop-1 example, one claim-only example per
    :func:`claim_only_extras` passage, with hop 1's hard negatives."""
    gold = claim_gold_pids(rows)
    kept = rows[:limit]
    gold_texts = {uid: frozenset(passage_text[p] for p in gold[uid] if p in passage_text) for uid in {r["uid"] for r in kept}}
    examples = []
    for r in kept:
        claim_gold = gold_texts[r["uid"]]
        negatives = tuple(passage_text[p] for p in r["negative_pids"])
        examples.append(FliprExample(claim_text[r["uid"]], tuple(r["context_facts"]), passage_text[r["positive_pid"]], negatives, claim_gold))
        if claim_only_positives == "reached":
            examples.extend(FliprExample(claim_text[r["uid"]], (), passage_text[p], negatives, claim_gold) for p in claim_only_extras(r))
    return examples


def claim_only_extras(row: Mapping) -> list[int]:
    """The gold passages besides its positive that a hop-1 label's retriever ranked within its
    depth from the claim alone (``remaining_gold_ranks`` not null), in ``remaining_gold_pids``
    order; none for a later hop, whose query has context."""
    if row["context_pids"]:
        return []
    ranks = zip(row["remaining_gold_pids"], row["remaining_gold_ranks"], strict=True)
    return [pid for pid, rank in ranks if rank is not None and pid != row["positive_pid"]]


def flipr_batch_loss(flipr: Flipr, examples: Sequence[FliprExample], hard_negatives: int, distillation_weight: float = 1.0) -> torch.Tensor:
    """Cross-entropy of each query's positive among all passages of the batch; where the examples
    carry teacher scores, plus ``distillation_weight`` × the KL divergence of each query's scores
    over its own group (positive + hard negatives) from the teacher's."""
    tok, device = flipr.tokenizer, flipr.device
    queries = tok.queries([e.claim for e in examples], [list(e.context) for e in examples]).to(device)
    passages: list[str] = []
    targets = []
    for e in examples:
        targets.append(len(passages))
        passages.append(e.positive)
        passages.extend(e.negatives[:hard_negatives])
    docs = tok.docs(passages).to(device)
    chunk = training_chunk_tokens(device)  # on the CPU, no FLOPs on padding: passages are 45 tokens on average, a batch's longest 180
    q = encode_in_length_chunks(flipr.encoder, queries.input_ids, queries.attention_mask, (queries.input_ids != tok.pad_id).sum(1), chunk)
    d = encode_in_length_chunks(flipr.encoder, docs.input_ids, docs.attention_mask, docs.attention_mask.sum(1), chunk)
    scores = flipr_score(q.float(), queries.score_mask, d.float(), docs.score_mask, queries.n_claim, flipr.config.k_claim, flipr.config.k_context)
    loss = F.cross_entropy(scores.masked_fill(gold_in_batch(examples, passages, targets).to(device), float("-inf")), torch.tensor(targets, device=device))
    if distillation_weight and any(e.teacher for e in examples):
        loss = loss + distillation_weight * group_kl(*own_groups(scores, examples, targets, hard_negatives))
    return loss


def own_groups(scores: torch.Tensor, examples: Sequence[FliprExample], targets: Sequence[int], hard_negatives: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The student's scores over each taught query's own positive and hard negatives (the batch's
    columns ``target .. target + n``), and the teacher's for the same passages, as
    ``[taught queries, group]``. Queries without teacher scores are left out (a hop the teacher
    does not teach trains on the cross-entropy alone); the taught ones need as many hard
    negatives as each other."""
    taught = [i for i, e in enumerate(examples) if e.teacher]
    sizes = {min(hard_negatives, len(examples[i].negatives)) for i in taught}
    if len(sizes) > 1:
        raise ValueError("the taught queries of a batch need the same number of hard negatives")
    group = 1 + (sizes.pop() if sizes else 0)
    columns = torch.tensor([[targets[i] + j for j in range(group)] for i in taught], dtype=torch.long, device=scores.device).reshape(len(taught), group)
    teacher = torch.tensor([examples[i].teacher[:group] for i in taught], dtype=torch.float32, device=scores.device).reshape(len(taught), group)
    return scores[taught].gather(1, columns), teacher


def gold_in_batch(examples: Sequence[FliprExample], passages: Sequence[str], targets: Sequence[int]) -> torch.Tensor:
    """``[queries, passages]`` True where a passage other than the query's own target is gold for
    the query's claim: its positive again (another query shares it) or another of the claim's gold
    passages (another hop of the same claim is in the batch). Such a column is no negative and is
    left out of the query's softmax."""
    return torch.tensor(
        [[j != target and (p == e.positive or p in e.gold) for j, p in enumerate(passages)] for e, target in zip(examples, targets, strict=True)]
    )


def train_flipr(
    flipr: Flipr,
    examples: Sequence[FliprExample],
    config: FliprTrainingConfig,
    work_dir: Path,
    on_step: Callable[[dict], None] | None = None,
    distillation_weight: float = 1.0,
) -> tuple[Path, list[dict]]:
    """Train in place; returns the last epoch's checkpoint directory and every step's metrics
    (including those of epochs finished before a resume). A lone query in the last batch is
    skipped: it has no in-batch negatives. Examples with teacher scores are distilled too
    (:func:`flipr_batch_loss`)."""
    return train_epochs(
        flipr, examples, lambda batch: flipr_batch_loss(flipr, batch, config.hard_negatives, distillation_weight), config, work_dir, on_step, min_batch=2
    )
