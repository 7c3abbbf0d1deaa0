"""Condensing retrieved passages into facts, and reading a verdict from them (inference).

Every function takes many queries at once, so the encoder sees full, length-sorted batches:

- :func:`condense_stage1` scores every sentence of each query's passages; a query's sentences
  come back ranked best first.
- :func:`stage2_candidates` picks what stage 2 reads: the context facts first, then the best new
  stage-1 facts, ``top_facts`` in all (Baleen: 9). The context holds at most ``max_kept`` (5)
  facts, so at least 4 new ones always fit.
- :func:`condense_stage2` scores each query's candidate facts jointly; :func:`kept_facts` keeps
  the best ``max_kept`` (Baleen: 5) of those scoring above the threshold (0 unless calibrated,
  :mod:`baleen_core.condensing.calibration`), and never fewer than ``min_kept`` (1; the reference: 0).
- :func:`condense_hop` chains the three for one hop of many claims (what the engine, the reader's
  training facts and the evaluation all run).
- :func:`read_verdicts` gives P(SUPPORTED) from claim + facts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from baleen_core.condensing.layouts import PassageSentences, Sentence, reader_window, stage1_windows, stage2_window, token_ids
from baleen_core.condensing.models import SequenceModel
from baleen_core.config import CondenserConfig, ReaderConfig


@dataclass(frozen=True)
class Stage1Query:
    claim: str
    context: tuple[str, ...]  # facts found so far, "title | sentence"
    passages: tuple[PassageSentences, ...]


@dataclass(frozen=True)
class ScoredSentence:
    sentence: Sentence
    score: float


def stage1_inputs(model: SequenceModel, queries: Sequence[Stage1Query], config: CondenserConfig) -> list[tuple[int, list]]:
    """Every window of every query as (query index, [(window, passage)])."""
    texts = [t for q in queries for t in (q.claim, *q.context, *(p.title for p in q.passages), *(s.text for p in q.passages for s in p.sentences))]
    ids = token_ids(model.tokenizer, texts)
    return [
        (qi, [(w, p) for p in q.passages for w in stage1_windows(model.tokenizer, q.claim, q.context, p, config.query_maxlen, config.window_maxlen, ids)])
        for qi, q in enumerate(queries)
    ]


def condense_stage1(model: SequenceModel, queries: Sequence[Stage1Query], config: CondenserConfig) -> list[list[ScoredSentence]]:
    """Per query, all sentences of its passages with their stage-1 scores, best first."""
    per_query = stage1_inputs(model, queries, config)
    flat = [(qi, window, passage) for qi, pairs in per_query for window, passage in pairs]
    logits = model.predict([window for _, window, _ in flat], config.batch_size)
    ranked: list[list[ScoredSentence]] = [[] for _ in queries]
    for (qi, window, passage), scores in zip(flat, logits, strict=True):
        ranked[qi].extend(ScoredSentence(passage.sentences[item], float(score)) for item, score in zip(window.items, scores.tolist(), strict=True))
    for sentences in ranked:
        sentences.sort(key=lambda s: (-s.score, s.sentence.pid, s.sentence.sid))
    return ranked


def stage2_candidates(context: Sequence[Sentence], ranked: Sequence[ScoredSentence], top_facts: int) -> list[Sentence]:
    """Context facts first, then the best stage-1 sentences not already in the context, cut to
    ``top_facts`` together (the reference's ``(backs + stage-1 top 9)[:9]``)."""
    known = {s.key for s in context}
    new = [s.sentence for s in ranked if s.sentence.key not in known]
    return [*context, *new][:top_facts]


def condense_stage2(model: SequenceModel, claims: Sequence[str], facts: Sequence[Sequence[str]], config: CondenserConfig) -> list[list[float]]:
    """Per query, one stage-2 score per candidate fact (in the order given)."""
    ids = token_ids(model.tokenizer, [t for claim, fs in zip(claims, facts, strict=True) for t in (claim, *fs)])
    windows = [stage2_window(model.tokenizer, c, fs, config.claim_maxlen, config.fact_maxlen, config.stage2_maxlen, ids) for c, fs in zip(claims, facts, strict=True)]
    return [scores.tolist() for scores in model.predict(windows, config.batch_size)]


def kept_facts(candidates: Sequence, scores: Sequence[float], max_kept: int = 5, min_kept: int = 1, threshold: float = 0.0) -> list[tuple]:
    """The facts stage 2 keeps, best first: of the best ``max_kept`` (Baleen: 5), those scoring
    above ``threshold`` (0, i.e. P > 0.5, as Baleen; or one calibrated on held-out claims,
    :mod:`baleen_core.condensing.calibration`), and at least the best ``min_kept`` (default 1, where the
    reference keeps none: a HoVer claim always has supporting facts, so an empty set is never
    right, and the next hop's context is never empty)."""
    ranked = sorted(zip(candidates, scores, strict=True), key=lambda pair: -pair[1])[:max_kept]
    return [pair for i, pair in enumerate(ranked) if pair[1] > threshold or i < min_kept]


@dataclass
class CondensedHop:
    ranked: list[ScoredSentence]  # stage 1, every sentence of the hop's passages, best first
    candidates: list[Sentence]  # what stage 2 read: the context, then the best new facts
    scores: list[float]  # stage 2's score of each candidate, aligned
    kept: list[tuple[Sentence, float]]  # stage 2's kept facts with their scores, best first


def condense_hop(
    stage1: SequenceModel,
    stage2: SequenceModel,
    claims: Sequence[str],
    contexts: Sequence[Sequence[Sentence]],
    passages: Sequence[Sequence[PassageSentences]],
    config: CondenserConfig,
) -> list[CondensedHop]:
    """One hop for many claims: stage 1 over each claim's passages given its context, stage 2
    over the context plus the best new facts, the kept facts (``config.max_kept``,
    ``config.stage2_threshold``)."""
    queries = [Stage1Query(c, tuple(s.fact for s in ctx), tuple(ps)) for c, ctx, ps in zip(claims, contexts, passages, strict=True)]
    ranked = condense_stage1(stage1, queries, config)
    candidates = [stage2_candidates(ctx, r, config.top_facts) for ctx, r in zip(contexts, ranked, strict=True)]
    scores = condense_stage2(stage2, claims, [[s.fact for s in cands] for cands in candidates], config)
    return [
        CondensedHop(r, cands, sc, kept_facts(cands, sc, config.max_kept, config.min_kept, config.stage2_threshold))
        for r, cands, sc in zip(ranked, candidates, scores, strict=True)
    ]


def read_verdicts(model: SequenceModel, claims: Sequence[str], facts: Sequence[Sequence[str]], config: ReaderConfig) -> list[float]:
    """P(SUPPORTED) per claim."""
    ids = token_ids(model.tokenizer, [t for claim, fs in zip(claims, facts, strict=True) for t in (claim, *fs)])
    windows = [reader_window(model.tokenizer, c, fs, config.claim_maxlen, config.fact_maxlen, config.maxlen, ids) for c, fs in zip(claims, facts, strict=True)]
    return [float(logits.softmax(-1)[0, 1]) for logits in model.predict(windows, config.batch_size)]
