"""Condensing retrieved passages into facts, and reading a verdict from them (inference).

Every function takes many queries at once, so the encoder sees full, length-sorted batches:

- :func:`condense_stage1` scores every sentence of each query's passages; a query's sentences
  come back ranked best first.
- :func:`stage2_candidates` picks what stage 2 reads: the context facts first, then the best new
  stage-1 facts, ``top_facts`` in all (Baleen: 9). The context holds at most ``max_kept`` (5)
  facts, so at least 4 new ones always fit.
- :func:`condense_stage2` scores each query's candidate facts jointly. Two rules read its scores,
  as in the reference (``condense.py``, ``_stage2``), both over its best ``max_kept`` (5):
  :func:`kept_facts`, the next hop's context, keeps those scoring above the threshold (0: P > 0.5);
  :func:`evidence_facts`, the claim's evidence (the reference's ``L3x``), keeps those above
  min(0, the second best) — so at least 2 — from the first 4 distinct passages; the 0 may be a
  floor chosen per hop count in training (``condenser.evidence_floors``, docs/engine.md). With
  ``condenser.evidence_rule: first-h-passages`` the evidence is instead every fact stage 2 read
  from the first H distinct passages of its ranking (:func:`first_passage_facts`), H the
  claim's hop count.
- :func:`condense_hop` chains them for one hop of many claims (what the engine, stage 2's
  training examples and the condenser evaluation all run).
- :func:`read_verdicts` gives P(SUPPORTED) from claim + facts (with the reader's lexical
  coverage expert when it was trained with one: :mod:`baleen_core.condensing.lexical`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from baleen_core.condensing.layouts import PassageSentences, Sentence, reader_window, stage1_passage_windows, stage1_query, stage2_window
from baleen_core.condensing.models import SequenceModel
from baleen_core.config import CondenserConfig, ReaderConfig
from baleen_core.profiling import region


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
    ids = model.token_cache(texts)
    special = model.special
    per_query = []
    for qi, q in enumerate(queries):
        query = stage1_query(special, q.claim, q.context, config.query_maxlen, ids)  # once for all the hop's passages
        per_query.append((qi, [(w, p) for p in q.passages for w in stage1_passage_windows(special, query, p, config.window_maxlen, ids)]))
    return per_query


def condense_stage1(model: SequenceModel, queries: Sequence[Stage1Query], config: CondenserConfig) -> list[list[ScoredSentence]]:
    """Per query, all sentences of its passages with their stage-1 scores, best first."""
    per_query = stage1_inputs(model, queries, config)
    flat = [(qi, window, passage) for qi, pairs in per_query for window, passage in pairs]
    logits = model.predict([window for _, window, _ in flat], config.batch_size, config.gpu_batch_tokens)
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
    ids = model.token_cache([t for claim, fs in zip(claims, facts, strict=True) for t in (claim, *fs)])
    windows = [stage2_window(model.tokenizer, c, fs, config.claim_maxlen, config.fact_maxlen, config.stage2_maxlen, ids) for c, fs in zip(claims, facts, strict=True)]
    return [scores.tolist() for scores in model.predict(windows, config.batch_size, config.gpu_batch_tokens)]


def ranked_by_score(candidates: Sequence[Sentence], scores: Sequence[float]) -> list[tuple[Sentence, float]]:
    """(fact, score) pairs best first, as the reference sorts ``(score, (pid, sid))`` tuples in
    reverse: equal scores go to the larger (pid, sid) first."""
    return sorted(zip(candidates, scores, strict=True), key=lambda pair: (pair[1], pair[0].pid, pair[0].sid), reverse=True)


def kept_facts(candidates: Sequence[Sentence], scores: Sequence[float], max_kept: int = 5, min_kept: int = 0, threshold: float = 0.0) -> list[tuple[Sentence, float]]:
    """The next hop's context, best first: of the best ``max_kept`` (Baleen: 5), those scoring above
    ``threshold`` (0, i.e. P > 0.5, as Baleen), and at least the best ``min_kept`` (the reference:
    0, so a hop whose facts all score below the threshold hands on an empty context)."""
    ranked = ranked_by_score(candidates, scores)[:max_kept]
    return [pair for i, pair in enumerate(ranked) if pair[1] > threshold or i < min_kept]


def evidence_facts(
    candidates: Sequence[Sentence], scores: Sequence[float], top: int = 5, at_least: int = 2, max_passages: int = 4, floor: float = 0.0
) -> list[tuple[Sentence, float]]:
    """The reference's ``L3x`` facts, best first: of the best ``top`` (5), those scoring above
    min(``floor`` (0), the ``at_least``-th best − 1e-10), so never fewer than ``at_least`` (2) and
    every fact tied with the ``at_least``-th one; of those, only the facts of the first
    ``max_passages`` (4) distinct passages in that order. With ``at_least`` candidates or fewer all
    of them are kept (the reference indexes the second best and would fail on fewer than 2).
    ``floor`` = inf keeps exactly the best ``at_least`` (and ties), −inf all of the best ``top``."""
    ranked = ranked_by_score(candidates, scores)[:top]
    if len(ranked) > at_least:
        floor = min(floor, ranked[at_least - 1][1] - 1e-10)
        ranked = [pair for pair in ranked if pair[1] > floor]
    passages = set(list(dict.fromkeys(fact.pid for fact, _ in ranked))[:max_passages])
    return [pair for pair in ranked if pair[0].pid in passages]


@dataclass
class CondensedHop:
    ranked: list[ScoredSentence]  # stage 1, every sentence of the hop's passages, best first
    candidates: list[Sentence]  # what stage 2 read: the context, then the best new facts
    scores: list[float]  # stage 2's score of each candidate, aligned
    kept: list[tuple[Sentence, float]]  # the next hop's context (kept_facts), best first
    evidence: list[tuple[Sentence, float]]  # the claim's evidence if this is its last hop (hop_evidence), best first

    @property
    def scored(self) -> list[tuple[Sentence, float]]:
        """Each fact stage 2 read with its score, in reading order."""
        return list(zip(self.candidates, self.scores, strict=True))


def condense_hop(
    stage1: SequenceModel,
    stage2: SequenceModel,
    claims: Sequence[str],
    contexts: Sequence[Sequence[Sentence]],
    passages: Sequence[Sequence[PassageSentences]],
    config: CondenserConfig,
    hops: Sequence[int] | None = None,
) -> list[CondensedHop]:
    """One hop for many claims: stage 1 over each claim's passages given its context, stage 2
    over the context plus the best new facts, and both rules over its scores: the next hop's
    context (``config.max_kept``, ``min_kept``, ``stage2_threshold``) and the evidence
    (:func:`hop_evidence` for each claim's hop count in ``hops``; none given: the reference's
    rule at 0)."""
    queries = [Stage1Query(c, tuple(s.fact for s in ctx), tuple(ps)) for c, ctx, ps in zip(claims, contexts, passages, strict=True)]
    with region("stage1"):
        ranked = condense_stage1(stage1, queries, config)
    candidates = [stage2_candidates(ctx, r, config.top_facts) for ctx, r in zip(contexts, ranked, strict=True)]
    with region("stage2"):
        scores = condense_stage2(stage2, claims, [[s.fact for s in cands] for cands in candidates], config)
    return [
        CondensedHop(r, cands, sc, kept_facts(cands, sc, config.max_kept, config.min_kept, config.stage2_threshold), hop_evidence(cands, sc, config, h))
        for r, cands, sc, h in zip(ranked, candidates, scores, [None] * len(claims) if hops is None else hops, strict=True)
    ]


def hop_evidence(
    candidates: Sequence[Sentence], scores: Sequence[float], config: CondenserConfig, hops: int | None = None, floor: float | None = None
) -> list[tuple[Sentence, float]]:
    """The evidence of a claim of ``hops`` hops by ``config.evidence_rule``: ``first-h-passages``,
    :func:`first_passage_facts` of min(``hops``, ``evidence_max_passages``) passages; ``l3x`` (or
    no hop count known), :func:`evidence_facts` with the configured sizes at ``floor`` (none
    given: the hop count's configured floor, 0 without one)."""
    if config.evidence_rule == "first-h-passages" and hops is not None:
        return first_passage_facts(candidates, scores, config.first_h_passages(hops))
    if floor is None:
        floor = 0.0 if hops is None else config.evidence_floor(hops)
    return evidence_facts(candidates, scores, config.max_kept, config.evidence_min_facts, config.evidence_max_passages, floor)


def first_passage_facts(candidates: Sequence[Sentence], scores: Sequence[float], passages: int) -> list[tuple[Sentence, float]]:
    """Every candidate fact of the first ``passages`` distinct passages of stage 2's ranking
    (:func:`ranked_by_score`), best first: the count comes from the claim, not from the scores."""
    ranked = ranked_by_score(candidates, scores)
    first = set(list(dict.fromkeys(fact.pid for fact, _ in ranked))[:passages])
    return [pair for pair in ranked if pair[0].pid in first]


def reader_facts(evidence: Sequence[tuple[Sentence, float]], last_read: Sequence[tuple[Sentence, float]], best: int | None) -> list[tuple[Sentence, float]]:
    """What the reader reads of a claim (``reader.last_read_facts``): its ``evidence``, or (``best``
    given) the best ``best`` facts of its last stage-2 read, best first (:func:`ranked_by_score`)."""
    if best is None:
        return list(evidence)
    return ranked_by_score([fact for fact, _ in last_read], [score for _, score in last_read])[:best]


def read_verdicts(model: SequenceModel, claims: Sequence[str], facts: Sequence[Sequence[str]], config: ReaderConfig) -> list[float]:
    """P(SUPPORTED) per claim: the reader's, combined with its lexical coverage expert's when it
    has one (``model.lexical``)."""
    ids = model.token_cache([t for claim, fs in zip(claims, facts, strict=True) for t in (claim, *fs)])
    windows = [reader_window(model.tokenizer, c, fs, config.claim_maxlen, config.fact_maxlen, config.maxlen, ids) for c, fs in zip(claims, facts, strict=True)]
    probs = [float(logits.softmax(-1)[0, 1]) for logits in model.predict(windows, config.batch_size, config.gpu_batch_tokens)]
    if model.lexical is None:
        return probs
    return [model.lexical.prob_supported(c, fs, p) for c, fs, p in zip(claims, facts, probs, strict=True)]
