"""The multi-hop engine: retrieve → condense (stage 1, stage 2) → next hop … → read.

For each claim and hop 1..H (H = the claim's ``num_hops`` unless ``hops`` fixes it), as the
reference implementation (stanford-futuredata/ColBERT, ``baleen/engine.py``) does:

1. **Retrieve** the top ``depth`` passages (100) for claim + context facts. The condensers read
   the best ``k`` of them (``depth // H`` unless ``k`` is given: 50 / 33 / 25 for 2 / 3 / 4 hops)
   whose passage has no fact in the context. A passage retrieved at an earlier hop but not kept
   may come back: gold passages missed at hop 1 can still be found later.
2. **Stage 1** ranks every sentence of those passages given claim + context.
3. **Stage 2** reads the context facts first, then the best new stage-1 facts, ``top_facts`` (9)
   in all, ranks them jointly and keeps the best ``max_kept`` (5) that score above the threshold.
4. The kept facts, best first, are the next hop's context (stage 2 may drop an earlier fact);
   the last hop's kept facts are the claim's evidence, so a claim ends with at most ``max_kept``.

After the last hop the reader gives P(SUPPORTED) from claim + the final facts. All claims at the
same hop are condensed in one batched call.

**Retrieval@depth pool.** Each hop adds its ranking's passages, in rank order and without repeats,
to the claim's pool until the pool holds ``k × hop`` (``depth`` at the last hop): Retrieval@100 is
"every gold passage among the first 100 distinct passages retrieved over the hops", as the
reference counts it. ``HopTrace.pool`` is what each hop added.

Edge cases, decided:

- *No fact scores above the threshold at stage 2*: the best ``min_kept`` facts are kept anyway
  (default 1; the reference keeps none, ``min_kept = 0``): every HoVer claim has evidence, so an
  empty set is never right, and an empty context would send the next hop back to the claim alone.
- *The corpus runs out*: a hop simply reads fewer (or no) passages.
- *A claim longer than the query budget*: the tokenizers cut it (FLIPR keeps the first
  ``query_maxlen`` claim tokens, the condensers ``claim_maxlen``); it is never dropped. Context
  facts share their budget so that none is cut away (``fit_facts``).
- *Single-hop* (``single_hop=True``, a baseline): one retrieval from the claim alone, whose best
  ``k × H`` passages (the same passage budget as the hop loop) go through one condensing pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from baleen_core.condensing import PassageSentences, Sentence, SequenceModel, condense_hop, read_verdicts
from baleen_core.config import CondenserConfig, ReaderConfig

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
    kept: list[tuple[Sentence, float]]
    pool: list[int] = field(default_factory=list)  # passages this hop added to the Retrieval@depth pool
    stage2: list[tuple[Sentence, float]] = field(default_factory=list)  # everything stage 2 read (context first), with stage-2 scores


@dataclass
class Verdict:
    uid: str
    prob_supported: float
    facts: list[tuple[Sentence, float]]
    hops: list[HopTrace] = field(default_factory=list)

    @property
    def retrieved_pids(self) -> list[int]:
        """Every passage the condensers read, in hop then rank order (a passage may recur)."""
        return [pid for hop in self.hops for pid, _ in hop.retrieved]

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


def verify_claims(
    claims: Sequence[ClaimInput],
    retriever: Retriever,
    passages_of: Callable[[set[int]], dict[int, PassageSentences]],
    stage1: SequenceModel,
    stage2: SequenceModel,
    reader: SequenceModel,
    condenser: CondenserConfig,
    reader_config: ReaderConfig,
    depth: int = DEFAULT_DEPTH,
    k: int | None = None,
    hops: int | None = None,
    on_hop: Callable[[int, int], None] | None = None,
    single_hop: bool = False,
) -> list[Verdict]:
    """Run the hop loop over ``claims`` and read a verdict for each (see the module docstring).
    ``on_hop(hop, claims)`` is called after each hop with the number of claims it advanced."""
    budget = {c.uid: hops or c.num_hops for c in claims}
    per_hop = {c.uid: passages_per_hop(depth, budget[c.uid], k) for c in claims}
    if single_hop:
        per_hop = {uid: n * budget[uid] for uid, n in per_hop.items()}
        budget = dict.fromkeys(budget, 1)
    context: dict[str, list[tuple[Sentence, float]]] = {c.uid: [] for c in claims}
    pool: dict[str, dict[int, None]] = {c.uid: {} for c in claims}
    traces: dict[str, list[HopTrace]] = {c.uid: [] for c in claims}
    for hop in range(1, max(budget.values(), default=0) + 1):
        active = [c for c in claims if budget[c.uid] >= hop]
        facts = {c.uid: [s for s, _ in context[c.uid]] for c in active}
        rankings = retriever.rank_batch(
            [c.claim for c in active], [[s.fact for s in facts[c.uid]] for c in active], [max(depth, per_hop[c.uid]) for c in active], [set() for _ in active]
        )
        read = [read_at_hop(ranking, facts[c.uid], per_hop[c.uid]) for c, ranking in zip(active, rankings, strict=True)]
        texts = passages_of({pid for r in read for pid, _ in r})
        passages = [[texts[pid] for pid, _ in r if pid in texts] for r in read]
        condensed = condense_hop(stage1, stage2, [c.claim for c in active], [facts[c.uid] for c in active], passages, condenser)
        for c, ranking, r, result in zip(active, rankings, read, condensed, strict=True):
            limit = depth if hop == budget[c.uid] else per_hop[c.uid] * hop
            added = grow_pool(pool[c.uid], ranking, limit)
            stage1_score = {s.sentence.key: s.score for s in result.ranked}
            known = {s.key for s in facts[c.uid]}
            new = [(s, stage1_score[s.key]) for s in result.candidates if s.key not in known]
            traces[c.uid].append(HopTrace(hop, list(r), new, result.kept, added, list(zip(result.candidates, result.scores, strict=True))))
            context[c.uid] = result.kept
        if on_hop is not None:
            on_hop(hop, len(active))
    probs = read_verdicts(reader, [c.claim for c in claims], [[s.fact for s, _ in context[c.uid]] for c in claims], reader_config)
    return [Verdict(c.uid, p, context[c.uid], traces[c.uid]) for c, p in zip(claims, probs, strict=True)]
