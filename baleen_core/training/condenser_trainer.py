"""Training the condenser stages and the reader from hop labels.

A :class:`LabelledHop` is one hop of one training claim from a label round: the context facts
(the gold sentences of earlier hops' positives), the hop's positive passage and its hard-negative
passages, and the claim's whole gold fact set.

- **Stage 1** reads claim + context and one passage at a time. Its positives are the sentences of
  the positive passage (Baleen), or only that passage's gold sentences (``positives:
  gold_facts``); the negatives are the sentences of the hard-negative passages (and, with
  ``gold_facts``, the positive passage's other sentences). Loss: for each positive, the
  cross-entropy of that positive against all the hop's negatives.
- **Stage 2** reads the facts the trained stage 1 puts forward for the hop (the context facts
  plus its best new sentences, shuffled so that position says nothing) and labels each fact by
  membership of the gold set; the context is the gold one and/or the claim's own earlier picks,
  wrong ones included (:func:`stage2_examples`). Loss: ``w · BCE per fact + (1 − w) · CE of each gold fact against
  all non-gold facts``.
- **Reader**: claim + facts → SUPPORTED / NOT_SUPPORTED, cross-entropy. Its facts are the gold
  facts and/or the final facts of an engine run over training claims that no retriever or
  condenser trained on (:class:`ReaderClaim`), so it trains on the facts the engine hands it for
  a new claim: 2 to 5 facts from up to 4 passages, missed facts and wrong ones included.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from baleen_core.condensing.condense import Stage1Query, condense_stage1, stage1_inputs, stage2_candidates
from baleen_core.condensing.layouts import PassageSentences, Sentence, passage_or_nothing, reader_window, stage2_window
from baleen_core.condensing.lexical import LexicalCoverage
from baleen_core.condensing.models import READER_LABELS, SequenceModel
from baleen_core.config import CondenserConfig, ReaderConfig, ReaderTrainingConfig, Stage1TrainingConfig, Stage2TrainingConfig
from baleen_core.training.loop import train_epochs

#: The reader's logit (and label) index of each class.
SUPPORTED, NOT_SUPPORTED = READER_LABELS.index("SUPPORTED"), READER_LABELS.index("NOT_SUPPORTED")


@dataclass(frozen=True)
class LabelledHop:
    uid: str
    claim: str
    label: str | None
    hop: int
    context: tuple[Sentence, ...]
    positive: PassageSentences
    negatives: tuple[PassageSentences, ...]
    gold: frozenset[tuple[int, int]]

    def stage1_query(self, negative_passages: int, context: Sequence[Sentence] | None = None) -> Stage1Query:
        facts = self.context if context is None else context
        return Stage1Query(self.claim, tuple(s.fact for s in facts), (self.positive, *self.negatives[:negative_passages]))


@dataclass(frozen=True)
class Stage1Example:
    uid: str
    query: Stage1Query
    positives: frozenset[tuple[int, int]]


@dataclass(frozen=True)
class Stage2Example:
    uid: str
    claim: str
    facts: tuple[str, ...]
    gold: tuple[bool, ...]


@dataclass(frozen=True)
class ReaderExample:
    uid: str
    claim: str
    facts: tuple[str, ...]
    label: int  # index into READER_LABELS



def select_hops(rows: Sequence[Mapping], max_hops: int | None = None, max_claims: int | None = None) -> list[Mapping]:
    """The first ``max_hops`` label rows, or the rows of the first ``max_claims`` claims by uid."""
    rows = list(rows[:max_hops])
    if max_claims is not None:
        keep = set(sorted({r["uid"] for r in rows})[:max_claims])
        rows = [r for r in rows if r["uid"] in keep]
    return rows


def labelled_hop_pids(rows: Sequence[Mapping], negatives: int) -> set[int]:
    """The passages :func:`labelled_hops` reads: positives, the first ``negatives`` hard
    negatives and the passages of the context."""
    return {r["positive_pid"] for r in rows} | {p for r in rows for p in r["negative_pids"][:negatives]} | {p for r in rows for p in r["context_pids"]}


def labelled_hops(
    rows: Sequence[Mapping], claims: Mapping[str, Mapping], gold: Mapping[str, set[tuple[int, int]]], passages: Mapping[int, PassageSentences], negatives: int
) -> list[LabelledHop]:
    """The label round's hops (``hop_labels`` rows) with the texts the condensers read: the
    positive passage, the first ``negatives`` hard negatives, the context as the gold sentences
    of earlier positives. ``claims``: ``claim`` and ``label`` by uid; ``passages``: at least
    :func:`labelled_hop_pids` (one missing has no text: nothing to score)."""
    hops = []
    for r in rows:
        claim_gold = frozenset(gold.get(r["uid"], ()))
        context = tuple(s for pid in r["context_pids"] for s in passage_or_nothing(passages, pid).sentences if s.key in claim_gold)
        hops.append(
            LabelledHop(
                uid=r["uid"],
                claim=claims[r["uid"]]["claim"],
                label=claims[r["uid"]]["label"],
                hop=r["hop"],
                context=context,
                positive=passage_or_nothing(passages, r["positive_pid"]),
                negatives=tuple(passage_or_nothing(passages, p) for p in r["negative_pids"][:negatives]),
                gold=claim_gold,
            )
        )
    return hops

def contrastive_ce(scores: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """Mean over positives p of ``-log softmax([s_p, s_negatives])[0]``; 0 when there are no
    positives. With no negatives each term is 0 (nothing to rank against)."""
    pos, neg = scores[positive], scores[~positive]
    if pos.numel() == 0:
        return scores.sum() * 0.0
    stacked = torch.cat([pos.unsqueeze(1), neg.unsqueeze(0).expand(pos.numel(), -1)], dim=1)
    return (torch.logsumexp(stacked, dim=1) - pos).mean()


# ---- stage 1 ----------------------------------------------------------------------------------
def stage1_examples(hops: Sequence[LabelledHop], config: Stage1TrainingConfig) -> list[Stage1Example]:
    examples = []
    for hop in hops:
        if config.positives == "passage":
            positives = frozenset(s.key for s in hop.positive.sentences)
        else:
            positives = frozenset(s.key for s in hop.positive.sentences if s.key in hop.gold)
        if positives:
            examples.append(Stage1Example(hop.uid, hop.stage1_query(config.negative_passages), positives))
    return examples


def stage1_loss(model: SequenceModel, batch: Sequence[Stage1Example], condenser: CondenserConfig) -> torch.Tensor:
    per_query = stage1_inputs(model, [e.query for e in batch], condenser)
    windows = [w for _, pairs in per_query for w, _ in pairs]
    logits = model.training_logits(windows)
    losses, offset = [], 0
    for example, (_, pairs) in zip(batch, per_query, strict=True):
        n = sum(len(w.positions) for w, _ in pairs)
        keys = [p.sentences[item].key for w, p in pairs for item in w.items]
        positive = torch.tensor([k in example.positives for k in keys], device=logits.device)
        losses.append(contrastive_ce(logits[offset : offset + n], positive))
        offset += n
    return torch.stack(losses).mean()


# ---- stage 2 ----------------------------------------------------------------------------------
def stage2_examples(
    stage1: SequenceModel,
    hops: Sequence[LabelledHop],
    condenser: CondenserConfig,
    config: Stage2TrainingConfig,
    on_ranked: Callable[[int], None] | None = None,
) -> list[Stage2Example]:
    """Run the trained stage 1 over each hop's passages and label what stage 2 would read, as the
    engine builds it: the context first, then the best new facts, ``top_facts`` together.

    The context is the gold facts of earlier positives (``config.context: gold``), or the claim's
    *own* earlier picks (``own``): at hop h, the first ``max_kept`` of what stage 2 read at hop
    h − 1, gold or not, as an untrained stage 2 would pass them on. Stage 2 must then learn to drop
    a wrong context fact, as it must in the engine. ``both`` (default) gives each hop after the
    first one example of each.

    Ranking is the slow part on a CPU (stage 1 reads every sentence of 1 + ``negative_passages``
    passages per hop), so it goes in chunks and ``on_ranked(n)`` hears of each chunk's hops: they
    add up to :func:`stage2_ranked_hops`."""
    examples: list[Stage2Example] = []
    ranked_with_gold: dict[tuple[str, int], list] = {}
    if config.context in ("gold", "both"):
        ranked = _rank_in_chunks(stage1, [h.stage1_query(config.negative_passages) for h in hops], condenser, on_ranked)
        for i, (hop, r) in enumerate(zip(hops, ranked, strict=True)):
            ranked_with_gold[(hop.uid, hop.hop)] = r
            examples.append(_stage2_example(hop, stage2_candidates(hop.context, r, condenser.top_facts), config.seed * 1_000_003 + i))
    if config.context in ("own", "both"):
        by_claim = _hops_by_claim(hops)
        own: dict[str, tuple[Sentence, ...]] = dict.fromkeys(by_claim, ())
        for h in range(1, max((len(v) for v in by_claim.values()), default=0) + 1):
            now = [v[h - 1] for v in by_claim.values() if len(v) >= h]
            if _gold_ranking_serves(h, now, config):
                ranked = [ranked_with_gold[(hop.uid, hop.hop)] for hop in now]
            else:
                ranked = _rank_in_chunks(stage1, [hop.stage1_query(config.negative_passages, own[hop.uid]) for hop in now], condenser, on_ranked)
            for i, (hop, r) in enumerate(zip(now, ranked, strict=True)):
                candidates = stage2_candidates(own[hop.uid], r, condenser.top_facts)
                if h > 1 or config.context == "own":  # hop 1 has no context: the gold-context example already covers it
                    examples.append(_stage2_example(hop, list(candidates), config.seed * 1_000_003 + 500_009 * h + i))
                own[hop.uid] = tuple(candidates[: condenser.max_kept])
    return examples


def stage2_ranked_hops(hops: Sequence[LabelledHop], config: Stage2TrainingConfig) -> int:
    """How many hop queries :func:`stage2_examples` ranks with stage 1 (for its progress total)."""
    total = len(hops) if config.context in ("gold", "both") else 0
    if config.context in ("own", "both"):
        by_claim = _hops_by_claim(hops)
        for h in range(1, max((len(v) for v in by_claim.values()), default=0) + 1):
            now = [v[h - 1] for v in by_claim.values() if len(v) >= h]
            total += 0 if _gold_ranking_serves(h, now, config) else len(now)
    return total


def _gold_ranking_serves(h: int, now: Sequence[LabelledHop], config: Stage2TrainingConfig) -> bool:
    """At hop 1 with ``both``, the own-context queries equal the gold-context ones (no context
    yet), which stage 1 has already ranked."""
    return h == 1 and config.context == "both" and not any(hop.context for hop in now)


#: Hop queries stage 1 ranks at a time while stage 2's examples are built (a progress tick each).
_RANKING_CHUNK = 64


def _rank_in_chunks(stage1: SequenceModel, queries: Sequence[Stage1Query], condenser: CondenserConfig, on_ranked: Callable[[int], None] | None) -> list:
    ranked: list = []
    for start in range(0, len(queries), _RANKING_CHUNK):
        chunk = queries[start : start + _RANKING_CHUNK]
        ranked.extend(condense_stage1(stage1, chunk, condenser))
        if on_ranked is not None:
            on_ranked(len(chunk))
    return ranked


def _stage2_example(hop: LabelledHop, candidates: list[Sentence], seed: int) -> Stage2Example:
    """``hop``'s stage-2 input (``candidates``, shuffled in place so that position says nothing)
    with each fact labelled gold or not."""
    random.Random(seed).shuffle(candidates)
    return Stage2Example(hop.uid, hop.claim, tuple(s.fact for s in candidates), tuple(s.key in hop.gold for s in candidates))


def _hops_by_claim(hops: Sequence[LabelledHop]) -> dict[str, list[LabelledHop]]:
    """Each claim's labelled hops in hop order."""
    by_claim: dict[str, list[LabelledHop]] = {}
    for hop in hops:
        by_claim.setdefault(hop.uid, []).append(hop)
    for claim_hops in by_claim.values():
        claim_hops.sort(key=lambda x: x.hop)
    return by_claim


def stage2_loss(model: SequenceModel, batch: Sequence[Stage2Example], condenser: CondenserConfig, bce_weight: float) -> torch.Tensor:
    ids = model.token_cache([t for e in batch for t in (e.claim, *e.facts)])
    windows = [stage2_window(model.tokenizer, e.claim, e.facts, condenser.claim_maxlen, condenser.fact_maxlen, condenser.stage2_maxlen, ids) for e in batch]
    logits = model.training_logits(windows)
    losses, offset = [], 0
    for example in batch:
        scores = logits[offset : offset + len(example.facts)]
        gold = torch.tensor(example.gold, device=logits.device)
        bce = F.binary_cross_entropy_with_logits(scores, gold.float())
        losses.append(bce_weight * bce + (1 - bce_weight) * contrastive_ce(scores, gold))
        offset += len(example.facts)
    return torch.stack(losses).mean()


# ---- reader -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReaderClaim:
    """One training claim as the reader may read it."""

    uid: str
    claim: str
    label: str | None
    gold_facts: tuple[str, ...]  # its gold facts, "title | sentence"
    engine_facts: tuple[str, ...] | None = None  # the engine's final facts, for a claim no retriever or condenser trained on


def reader_claims(final: Mapping[str, tuple[str, ...]], gold: Mapping[str, ReaderClaim], most_others: int | None) -> list[ReaderClaim]:
    """What the reader trains on: every claim of the engine run (``final``: uid → its final
    facts) as ``gold`` reads it (uid → the claim with its gold facts), with its final facts; then
    up to ``most_others`` other claims of ``gold``, by uid, with their gold facts alone."""
    ran = [replace(gold[uid], engine_facts=facts) for uid, facts in sorted(final.items()) if uid in gold]
    return ran + [gold[uid] for uid in sorted(gold) if uid not in final][:most_others]


def reader_examples(claims: Sequence[ReaderClaim], inputs: str) -> list[ReaderExample]:
    """One or two examples per labelled claim: its engine facts (``engine``; only claims that
    have them) and/or its gold facts (``gold``); ``both`` gives each."""
    examples = []
    for c in claims:
        if c.label not in READER_LABELS:
            continue
        label = READER_LABELS.index(c.label)
        if inputs in ("both", "engine") and c.engine_facts is not None:
            examples.append(ReaderExample(c.uid, c.claim, c.engine_facts, label))
        if inputs in ("both", "gold"):
            examples.append(ReaderExample(c.uid, c.claim, c.gold_facts, label))
    return examples


def reader_loss(
    model: SequenceModel, batch: Sequence[ReaderExample], reader: ReaderConfig, margin: float | None = None, twin_of: Mapping[ReaderExample, ReaderExample] | None = None
) -> torch.Tensor:
    """Cross-entropy over ``batch``; with ``margin``, plus the mean hinge
    ``max(0, margin - (m(S) - m(NS)))`` over the contrast pairs (``twin_of``: each SUPPORTED
    example's NOT_SUPPORTED twin, :func:`contrast_pairs`) whose two examples are both in the batch,
    where ``m`` is an example's SUPPORTED logit minus its NOT_SUPPORTED logit."""
    ids = model.token_cache([t for e in batch for t in (e.claim, *e.facts)])
    windows = [reader_window(model.tokenizer, e.claim, e.facts, reader.claim_maxlen, reader.fact_maxlen, reader.maxlen, ids) for e in batch]
    logits = model.training_logits(windows)
    loss = F.cross_entropy(logits, torch.tensor([e.label for e in batch], device=model.device))
    if margin is None or not twin_of:
        return loss
    position = {e: i for i, e in reversed(list(enumerate(batch)))}  # an example's first place in the batch
    pairs = [(i, position[twin_of[e]]) for i, e in enumerate(batch) if e in twin_of and twin_of[e] in position]
    if not pairs:
        return loss
    margins = logits[:, SUPPORTED] - logits[:, NOT_SUPPORTED]
    first, second = (torch.tensor(side, device=model.device) for side in zip(*pairs, strict=True))
    return loss + F.relu(margin - (margins[first] - margins[second])).mean()


def contrast_pairs(examples: Sequence[ReaderExample]) -> list[tuple[int, int]]:
    """(SUPPORTED, NOT_SUPPORTED) index pairs of ``examples`` that read the same facts: HoVer's
    edited claims beside the claims they were edited from, where only the claim decides the label.
    Within one set of facts the SUPPORTED and the NOT_SUPPORTED examples are paired in uid order,
    each example in at most one pair."""
    by_facts: dict[tuple[str, ...], dict[int, list[int]]] = {}
    for i, e in enumerate(examples):
        if e.facts and e.label in (SUPPORTED, NOT_SUPPORTED):
            by_facts.setdefault(e.facts, {SUPPORTED: [], NOT_SUPPORTED: []})[e.label].append(i)
    pairs = []
    for groups in by_facts.values():
        ordered = [sorted(groups[label], key=lambda i: (examples[i].uid, i)) for label in (SUPPORTED, NOT_SUPPORTED)]
        pairs.extend(zip(*ordered))  # the shorter side decides how many
    return sorted(pairs)


# ---- training ---------------------------------------------------------------------------------
def train_stage1(model: SequenceModel, train: Sequence[Stage1Example], validation: Sequence[Stage1Example], condenser: CondenserConfig, config: Stage1TrainingConfig, work_dir: Path, on_step: Callable[[dict], None] | None = None):
    return train_epochs(model, train, lambda batch: stage1_loss(model, batch, condenser), config, work_dir, on_step, validation)


def train_stage2(model: SequenceModel, train: Sequence[Stage2Example], validation: Sequence[Stage2Example], condenser: CondenserConfig, config: Stage2TrainingConfig, work_dir: Path, on_step: Callable[[dict], None] | None = None):
    return train_epochs(model, train, lambda batch: stage2_loss(model, batch, condenser, config.bce_weight), config, work_dir, on_step, validation)


def train_reader(model: SequenceModel, train: Sequence[ReaderExample], validation: Sequence[ReaderExample], reader: ReaderConfig, config: ReaderTrainingConfig, work_dir: Path, on_step: Callable[[dict], None] | None = None):
    """The reader on ``train``; with ``config.contrast_margin``, each contrast pair of ``train``
    (:func:`contrast_pairs`) is shuffled as one unit and adds its hinge to the loss. With
    ``reader.lexical_coverage``, its lexical coverage expert is then fitted on ``train`` and saved
    in the returned checkpoint (without it, the model carries none)."""
    model.lexical = None  # an expert of the reader it started from would be saved into every epoch's checkpoint
    if config.contrast_margin is None:
        last, history = train_epochs(model, train, lambda batch: reader_loss(model, batch, reader), config, work_dir, on_step, validation)
    else:
        pairs = contrast_pairs(train)
        paired = {i for pair in pairs for i in pair}
        units = [list(pair) for pair in pairs] + [[i] for i in range(len(train)) if i not in paired]
        twin_of = {train[s]: train[u] for s, u in pairs}
        loss = lambda batch: reader_loss(model, batch, reader, config.contrast_margin, twin_of)  # noqa: E731
        last, history = train_epochs(model, train, loss, config, work_dir, on_step, validation, units=units)
    model.lexical = fit_lexical_coverage(train) if reader.lexical_coverage else None
    if model.lexical is not None:
        model.lexical.save(last)
    return last, history


def fit_lexical_coverage(examples: Sequence[ReaderExample]) -> LexicalCoverage:
    """The reader's lexical coverage expert, fitted on its training ``examples``."""
    return LexicalCoverage.fit([e.claim for e in examples], [e.facts for e in examples], [e.label == SUPPORTED for e in examples])
