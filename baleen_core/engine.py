"""The multi-hop engine: retrieve → condense (stage 1, stage 2) → next hop … → read.

For each claim and hop 1..H (H = the claim's ``num_hops`` unless ``hops`` fixes it), as the
reference implementation (stanford-futuredata/ColBERT, ``baleen/engine.py`` and
``baleen/condenser/condense.py``) does:

1. **Retrieve** the top ``depth`` passages (100) for claim + context facts. The condensers read
   the best ``k`` of them (``depth // H`` unless ``k`` is given: 50 / 33 / 25 for 2 / 3 / 4 hops)
   whose passage has no fact in the context. A passage retrieved at an earlier hop but not kept
   may come back: gold passages missed at hop 1 can still be found later.
2. **Stage 1** ranks every sentence of those passages given claim + context.
3. **Stage 2** reads the context facts first, then the best new stage-1 facts, ``top_facts`` (9)
   in all, and scores them jointly. Two rules read its best ``max_kept`` (5) scores:
4. the **context** of the next hop: those scoring above the threshold (0, P > 0.5;
   :func:`~baleen_core.condensing.kept_facts`), so stage 2 may drop an earlier fact, and a hop
   whose facts all score below 0 hands on an empty context, as the reference does;
5. the **evidence**: those above min(0, the second best) — at least 2 — from the first 4
   distinct passages (the reference's ``L3x``; :func:`~baleen_core.condensing.evidence_facts`).
   The 0 is ``condenser.evidence_floor(num_hops)``: the reference's 0 unless a floor per hop
   count was chosen in training (``condenser.evidence_floors``). The last hop's evidence is the
   claim's final facts: 2 to 5 facts from at most 4 passages. With an evidence ranker
   (``condenser.evidence_ranker``, fitted in training) the last hop's evidence is cut from its
   scores of what stage 2 read instead of stage 2's own
   (:mod:`~baleen_core.condensing.evidence_ranker`); the context rule reads stage 2's, or the
   ranker's too with ``condenser.evidence_ranker_context``.

After the last hop the reader gives P(SUPPORTED) from claim + the final facts (or, with
``reader.last_read_facts`` N, from the best N facts of the last stage-2 read:
:func:`~baleen_core.condensing.reader_facts`). All claims at the same hop are condensed in one
batched call.

**Retrieval@depth pool.** Each hop adds its ranking's passages, in rank order and without repeats,
to the claim's pool until the pool holds ``k × hop`` (``depth`` at the last hop): Retrieval@depth
(Retrieval@100 at the reference's depth) is "every gold passage among the first ``depth``
distinct passages retrieved over the hops", as the reference counts it. ``HopTrace.pool`` is what
each hop added; a gold passage is *first retrieved* at the hop that added it to the pool.

Edge cases, decided:

- *Stage 2 reads fewer than 2 facts* (a hop whose passages hold one sentence and no context):
  the evidence is what it read (the reference would fail on it).
- *The corpus runs out*: a hop simply reads fewer (or no) passages.
- *A retrieved passage the corpus does not hold*: an error naming it (the index was built from
  other passages), never a passage silently left out of the hop. One whose sentences are all
  empty (a title alone) is read like any other and offers stage 1 nothing.
- *A claim longer than the query budget*: the tokenizers cut it (FLIPR keeps the first
  ``query_maxlen`` claim tokens, the condensers ``claim_maxlen``); it is never dropped. FLIPR's
  context loses its tail past 448 positions, as the reference's; stage 1's context always keeps
  at least half its query (``stage1_claim_budget``).
- *Depth not divisible by H* (100 for 3 hops): the reference refuses it; here each hop reads
  ``depth // H`` and the last hop fills the pool to ``depth``.
- *Single-hop* (``single_hop=True``, a baseline): one retrieval from the claim alone, whose best
  ``k × H`` passages (the same passage budget as the hop loop) go through one condensing pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from baleen_core.condensing import PassageSentences, Sentence, SequenceModel, condense_hop, kept_facts, read_verdicts, reader_facts
from baleen_core.condensing.calibration import LastRead
from baleen_core.condensing.condense import CondensedHop, hop_evidence
from baleen_core.condensing.evidence_ranker import HopRead, evidence_scores
from baleen_core.config import CondenserConfig, ReaderConfig
from baleen_core.profiling import region
from baleen_core.retrieval.fusion import HopCountRetriever

#: Passages retrieved per claim over all its hops (Baleen's and HoVer's Retrieval@100).
DEFAULT_DEPTH = 100


class Retriever(Protocol):
    def rank_batch(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[set[int]]
    ) -> list[list[tuple[int, float]]]:
        """Per query, the top ``depths[i]`` passages as (pid, score), best first, skipping ``excludes[i]``."""


@dataclass(frozen=True)
class ClaimInput:
    uid: str
    claim: str
    num_hops: int


@dataclass
class HopTrace:
    hop: int
    retrieved: list[tuple[int, float]]  # the passages the condensers read at this hop, best first
    stage1_top: list[tuple[Sentence, float]]  # what stage 2 read that was new at this hop, with stage-1 scores
    kept: list[tuple[Sentence, float]]  # the next hop's context, best first (scored by the evidence ranker when it reads the context)
    evidence: list[tuple[Sentence, float]] = field(default_factory=list)  # the L3x facts, best first: the claim's final facts at its last hop (scored by the evidence ranker when there is one)
    pool: list[int] = field(default_factory=list)  # passages this hop added to the Retrieval@depth pool
    stage2: list[tuple[Sentence, float]] = field(default_factory=list)  # everything stage 2 read (context first), with stage-2 scores

    def hop_read(self, last: bool) -> HopRead:
        """This hop as the evidence ranker reads it (``last``: the claim's last hop)."""
        return HopRead(self.hop, last, tuple(s for s, _ in self.stage2), tuple(x for _, x in self.stage2), {s.key: x for s, x in self.stage1_top}, tuple(pid for pid, _ in self.retrieved))


@dataclass
class Verdict:
    uid: str
    prob_supported: float | None  # None when no reader read it (the reader's own training facts)
    facts: list[tuple[Sentence, float]]  # the last hop's evidence
    hops: list[HopTrace] = field(default_factory=list)

    @property
    def retrieved_pids(self) -> list[int]:
        """Every passage the condensers read, in hop then rank order (a passage may recur)."""
        return [pid for hop in self.hops for pid, _ in hop.retrieved]

    def last_read(self, num_hops: int) -> LastRead:
        """What stage 2 read at the last hop and its scores, for the claim's hop count: the
        evidence at any floor follows from it (nothing read when no hop ran)."""
        read = self.hops[-1].stage2 if self.hops else []
        return LastRead(num_hops, tuple(s for s, _ in read), tuple(x for _, x in read))

    def hop_reads(self) -> list[HopRead]:
        """Every hop as the evidence ranker reads it, in order."""
        return [hop.hop_read(last=i == len(self.hops) - 1) for i, hop in enumerate(self.hops)]

    @property
    def pool(self) -> list[int]:
        """The Retrieval@depth pool: distinct passages in the order they entered it."""
        return [pid for hop in self.hops for pid in hop.pool]


def passages_per_hop(depth: int, hops: int, k: int | None = None) -> int:
    """How many passages the condensers read per hop: ``k`` when given, else ``depth // hops``."""
    if k is not None:
        return k
    if depth < hops:
        raise ValueError(f"a retrieval depth of {depth} cannot be shared by {hops} hops; raise evaluation.depth")
    return depth // hops


def read_at_hop(ranking: Sequence[tuple[int, float]], context: Sequence[Sentence], k: int) -> list[tuple[int, float]]:
    """The best ``k`` ranked passages that have no fact in the context (the reference skips
    exactly those: the rest of what earlier hops retrieved may be read again)."""
    known = {s.pid for s in context}
    return [pair for pair in ranking if pair[0] not in known][:k]


def grow_pool(pool: dict[int, None], ranking: Sequence[tuple[int, float]], limit: int) -> list[int]:
    """Add the ranking's passages, in order and without repeats, until ``pool`` holds ``limit``;
    returns the ones added."""
    added = []
    for pid, _ in ranking:
        if len(pool) >= limit:
            break
        if pid not in pool:
            pool[pid] = None
            added.append(pid)
    return added


@dataclass(frozen=True)
class ComputedHop:
    """What one hop computed for one (claim, context), whatever the threshold: the ranking, the
    passages the condensers read and both stages' condensing of them."""

    ranking: list[tuple[int, float]]
    read: list[tuple[int, float]]
    condensed: CondensedHop


#: Condenser settings a hop's computing does not read: those that cut it afterwards (the context
#: rule, the evidence ranker) and those that only place or batch it, so runs that differ in them
#: alone share their hops.
_SETTINGS_A_HOP_IGNORES = frozenset({"stage2_threshold", "evidence_ranker", "evidence_ranker_context", "device", "batch_size", "gpu_batch_tokens"})


class HopMemo:
    """Hops computed by earlier engine passes over the same claims, reused by later ones: the
    calibration runs the engine at one grid of context thresholds, then one threshold at a time
    past the grid's edge, then again with the evidence ranker setting the context; at hop 1 all
    of them read the same (empty) context, and later a claim whose context a threshold leaves as
    an earlier pass left it is retrieved and condensed again for nothing.

    One memo serves one retriever and one pair of condensers: :meth:`bound` takes what identifies
    them (their artifacts' fingerprints, say), and a memo bound to other ones starts empty, so a
    stale hop is never reused. The engine keys each hop by the claim, the context and every
    setting the hop reads (not by its number: a claim whose context stayed empty reads at hop 2
    what it read at hop 1)."""

    def __init__(self) -> None:
        self._identity: str | None = None
        self._hops: dict[tuple, ComputedHop] = {}
        self.reused = 0  # (claim, context) hops taken from the memo
        self.computed = 0  # and computed (then kept)

    def bound(self, identity: str) -> HopMemo:
        """This memo for the models ``identity`` names, emptied if it held another's hops."""
        if identity != self._identity:
            self._identity, self._hops = identity, {}
        return self

    def get(self, key: tuple) -> ComputedHop | None:
        """The hop kept under ``key`` (counted as reused), or None."""
        hop = self._hops.get(key)
        self.reused += hop is not None
        return hop

    def keep(self, key: tuple, hop: ComputedHop) -> None:
        """Keep a hop computed now (counted as computed)."""
        self._hops[key] = hop
        self.computed += 1

    def __len__(self) -> int:
        return len(self._hops)


def verify_claims(
    claims: Sequence[ClaimInput],
    retriever: Retriever | HopCountRetriever,
    passages_of: Callable[[set[int]], dict[int, PassageSentences]],
    stage1: SequenceModel,
    stage2: SequenceModel,
    reader: SequenceModel | None,
    condenser: CondenserConfig,
    reader_config: ReaderConfig,
    depth: int = DEFAULT_DEPTH,
    k: int | None = None,
    hops: int | None = None,
    on_hop: Callable[[int, int], None] | None = None,
    single_hop: bool = False,
) -> list[Verdict]:
    """Run the hop loop over ``claims`` and read a verdict for each (see the module docstring);
    without a ``reader`` the verdicts carry the hops and final facts only (``prob_supported``
    None). ``on_hop(hop, claims)`` is called after each hop with the number of claims it advanced."""
    return verify_claims_at_thresholds(
        claims, [condenser.stage2_threshold], retriever, passages_of, stage1, stage2, reader, condenser, reader_config,
        depth=depth, k=k, hops=hops, on_hop=on_hop, single_hop=single_hop,
    )[0]


def verify_claims_at_thresholds(
    claims: Sequence[ClaimInput],
    thresholds: Sequence[float],
    retriever: Retriever | HopCountRetriever,
    passages_of: Callable[[set[int]], dict[int, PassageSentences]],
    stage1: SequenceModel,
    stage2: SequenceModel,
    reader: SequenceModel | None,
    condenser: CondenserConfig,
    reader_config: ReaderConfig,
    depth: int = DEFAULT_DEPTH,
    k: int | None = None,
    hops: int | None = None,
    on_hop: Callable[[int, int], None] | None = None,
    single_hop: bool = False,
    memo: HopMemo | None = None,
) -> list[list[Verdict]]:
    """:func:`verify_claims` once per stage-2 threshold of the context rule
    (``condenser.stage2_threshold`` is not read), as one list of verdicts per threshold, in order.
    What the runs have in common is done once: a claim whose context is the same under several
    thresholds (at hop 1 it is always empty) is retrieved, condensed and scored once, and only the
    context rule differs; the reader reads the same claim and final facts once. ``on_hop(hop, n)``
    counts claim × threshold runs. With a ``memo`` (bound to this retriever and these condensers),
    a hop an earlier pass computed is taken from it, and each hop computed now is kept in it."""
    budget = {c.uid: hops or c.num_hops for c in claims}
    per_hop = {c.uid: passages_per_hop(depth, budget[c.uid], k) for c in claims}
    if single_hop:
        per_hop = {uid: n * budget[uid] for uid, n in per_hop.items()}
        budget = dict.fromkeys(budget, 1)
    runs = [(c, t) for t in range(len(thresholds)) for c in claims]  # (claim, threshold index)
    settings = None if memo is None else (condenser.model_dump_json(exclude=set(_SETTINGS_A_HOP_IGNORES)), depth, k, hops, single_hop)  # what a hop also reads
    context: list[list[tuple[Sentence, float]]] = [[] for _ in runs]
    pool: list[dict[int, None]] = [{} for _ in runs]
    traces: list[list[HopTrace]] = [[] for _ in runs]
    for hop in range(1, max(budget.values(), default=0) + 1):
        active = [r for r, (c, _) in enumerate(runs) if budget[c.uid] >= hop]
        shared = _distinct_queries(runs, context, active)
        queries = list(shared.values())
        claims_of = [runs[r][0] for r in queries]
        facts = [[s for s, _ in context[r]] for r in queries]
        memo_keys = [] if memo is None else [(settings, *key) for key in shared]  # a hop's number changes nothing it computes
        computed = [None] * len(queries) if memo is None else [memo.get(key) for key in memo_keys]
        todo = [q for q, known in enumerate(computed) if known is None]
        new_hops = compute_hops(retriever, passages_of, stage1, stage2, condenser, [claims_of[q] for q in todo], [facts[q] for q in todo], depth, per_hop)
        for q, hop_computed in zip(todo, new_hops, strict=True):
            computed[q] = hop_computed
            if memo is not None:
                memo.keep(memo_keys[q], hop_computed)
        rankings = [h.ranking for h in computed]
        read = [h.read for h in computed]
        query_of = {key: q for q, key in enumerate(shared)}
        for r in active:
            (c, t), q = runs[r], query_of[_query_key(runs, context, r)]
            result = computed[q].condensed
            limit = depth if hop == budget[c.uid] else per_hop[c.uid] * hop
            added = grow_pool(pool[r], rankings[q], limit)
            stage1_score = {s.sentence.key: s.score for s in result.ranked}
            known = {s.key for s in facts[q]}
            new = [(s, stage1_score[s.key]) for s in result.candidates if s.key not in known]
            trace = HopTrace(hop, list(read[q]), new, [], list(result.evidence), added, result.scored)
            last = hop == budget[c.uid]
            context_scores = result.scores
            if condenser.evidence_ranker is not None and (last or condenser.evidence_ranker_context):
                ranked = evidence_scores(condenser.evidence_ranker, c.claim, trace.hop_read(last))
                if last:
                    trace.evidence = hop_evidence(result.candidates, ranked, condenser, c.num_hops)
                if condenser.evidence_ranker_context:
                    context_scores = ranked
            trace.kept = kept_facts(result.candidates, context_scores, condenser.max_kept, condenser.min_kept, thresholds[t])
            traces[r].append(trace)
        for r in active:
            context[r] = traces[r][-1].kept
        if on_hop is not None:
            on_hop(hop, len(active))
    final = [trace[-1].evidence if trace else [] for trace in traces]
    prob_supported: list[float | None] = [None] * len(runs)  # without a reader, no verdicts (and no reader facts to build)
    if reader is not None:
        for_reader = [reader_facts(trace[-1].evidence, trace[-1].stage2, reader_config.last_read_facts) if trace else [] for trace in traces]
        distinct = _distinct_queries(runs, for_reader, range(len(runs)))
        with region("reader"):
            probs = read_verdicts(reader, [runs[r][0].claim for r in distinct.values()], [[s.fact for s, _ in for_reader[r]] for r in distinct.values()], reader_config)
        prob_of = dict(zip(distinct, probs, strict=True))
        prob_supported = [prob_of[_query_key(runs, for_reader, r)] for r in range(len(runs))]
    verdicts = [Verdict(c.uid, prob_supported[r], final[r], traces[r]) for r, (c, _) in enumerate(runs)]
    return [verdicts[t * len(claims) : (t + 1) * len(claims)] for t in range(len(thresholds))]


def compute_hops(
    retriever: Retriever | HopCountRetriever,
    passages_of: Callable[[set[int]], dict[int, PassageSentences]],
    stage1: SequenceModel,
    stage2: SequenceModel,
    condenser: CondenserConfig,
    claims: Sequence[ClaimInput],
    contexts: Sequence[Sequence[Sentence]],
    depth: int,
    per_hop: dict[str, int],
) -> list[ComputedHop]:
    """One hop of each (claim, context), in one batch: the ranking, the passages read and their
    condensing (the rules that cut it are the caller's)."""
    if not claims:
        return []
    with region("retrieve"):
        rankings = rank_queries(retriever, claims, [[s.fact for s in f] for f in contexts], [max(depth, per_hop[c.uid]) for c in claims])
    read = [read_at_hop(ranking, f, per_hop[c.uid]) for c, f, ranking in zip(claims, contexts, rankings, strict=True)]
    texts = passages_of({pid for r in read for pid, _ in r})
    if missing := sorted({pid for r in read for pid, _ in r} - texts.keys()):
        raise MissingPassageText(missing)
    passages = [[texts[pid] for pid, _ in r] for r in read]
    condensed = condense_hop(stage1, stage2, [c.claim for c in claims], contexts, passages, condenser, [c.num_hops for c in claims])
    return [ComputedHop(ranking, r, result) for ranking, r, result in zip(rankings, read, condensed, strict=True)]


def rank_queries(
    retriever: Retriever | HopCountRetriever, claims: Sequence[ClaimInput], contexts: Sequence[Sequence[str]], depths: Sequence[int]
) -> list[list[tuple[int, float]]]:
    """One hop's rankings, one per query (claim + context facts), in order. A retriever that routes
    by hop count (``search.fusion_hop_counts``) ranks each claim's query with the retriever for its
    ``num_hops``, each such group of the hop's queries in one batch."""
    if not isinstance(retriever, HopCountRetriever):
        return retriever.rank_batch([c.claim for c in claims], contexts, depths, [set() for _ in claims])
    groups: dict[int, tuple[Retriever, list[int]]] = {}
    for q, c in enumerate(claims):
        routed = retriever.for_hops(c.num_hops)
        groups.setdefault(id(routed), (routed, []))[1].append(q)
    rankings: list[list[tuple[int, float]]] = [[] for _ in claims]
    for routed, queries in groups.values():
        answers = routed.rank_batch([claims[q].claim for q in queries], [contexts[q] for q in queries], [depths[q] for q in queries], [set() for _ in queries])
        for q, ranking in zip(queries, answers, strict=True):
            rankings[q] = ranking
    return rankings


class MissingPassageText(LookupError):
    """Retrieved passages the corpus holds no sentences for: the index and the passages disagree."""

    def __init__(self, pids: Sequence[int]) -> None:
        shown = ", ".join(map(str, pids[:5])) + (f" and {len(pids) - 5} more" if len(pids) > 5 else "")
        super().__init__(
            f"the retriever returned {len(pids)} passage(s) the corpus has no text for (pid {shown}): the index was built from "
            "other passages than the ones given; rebuild it for these passages with `baleen index --force`"
        )
        self.pids = list(pids)


def _query_key(runs: Sequence[tuple[ClaimInput, int]], facts: Sequence[Sequence[tuple[Sentence, float]]], r: int) -> tuple:
    """What a run's next step depends on: its claim and its facts (the context, or at the end
    the final facts), in order."""
    return (runs[r][0].uid, tuple(s.key for s, _ in facts[r]))


def _distinct_queries(runs, context, indices) -> dict[tuple, int]:
    """The first run of each distinct (claim, context), by key, in run order."""
    first: dict[tuple, int] = {}
    for r in indices:
        first.setdefault(_query_key(runs, context, r), r)
    return first
