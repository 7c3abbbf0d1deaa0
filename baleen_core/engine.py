"""The multi-hop engine: retrieve → condense (stage 1, stage 2) → next hop … → read.

For each claim and hop 1..H (H = the claim's ``num_hops`` unless ``hops`` fixes it):

1. retrieve the top ``k`` passages for claim + context facts, skipping passages retrieved at an
   earlier hop (a passage reappearing is therefore impossible: each hop brings ``k`` new ones);
2. stage 1 ranks every sentence of those passages given claim + context;
3. stage 2 reads the context facts plus the best new stage-1 facts (9 in all, at least
   ``min_new_facts`` new) and keeps those scoring above 0, and at least the best one;
4. the kept facts, best first, are the next hop's context (stage 2 may drop an earlier fact).

After the last hop the reader gives P(SUPPORTED) from claim + the final facts. All claims at the
same hop are condensed in one batched call.

Edge cases, decided:

- *No fact scores above 0 at stage 2*: the best one is kept anyway (:func:`kept_facts`), because
  every HoVer claim has evidence and the next hop needs a context to move on.
- *A passage reappears*: it cannot; retrieval excludes every passage an earlier hop retrieved.
  When the corpus runs out, a hop simply gets fewer (or no) passages.
- *A claim longer than the query budget*: the tokenizers cut it (FLIPR keeps the first
  ``query_maxlen`` claim tokens, the condensers ``claim_maxlen``); it is never dropped.
- *Single-hop* (``single_hop=True``, a baseline): one retrieval of ``k × H`` passages from the
  claim alone, one condensing pass, then the reader.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from baleen_core.condensing import PassageSentences, Sentence, SequenceModel, condense_hop, read_verdicts
from baleen_core.config import CondenserConfig, ReaderConfig


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
    retrieved: list[tuple[int, float]]
    stage1_top: list[tuple[Sentence, float]]  # what stage 2 read that was new at this hop
    kept: list[tuple[Sentence, float]]


@dataclass
class Verdict:
    uid: str
    prob_supported: float
    facts: list[tuple[Sentence, float]]
    hops: list[HopTrace] = field(default_factory=list)

    @property
    def retrieved_pids(self) -> list[int]:
        """Every passage retrieved, in hop then rank order."""
        return [pid for hop in self.hops for pid, _ in hop.retrieved]


def verify_claims(
    claims: Sequence[ClaimInput],
    retriever: Retriever,
    passages_of: Callable[[set[int]], dict[int, PassageSentences]],
    stage1: SequenceModel,
    stage2: SequenceModel,
    reader: SequenceModel,
    condenser: CondenserConfig,
    reader_config: ReaderConfig,
    k: int = 25,
    hops: int | None = None,
    on_hop: Callable[[int, int], None] | None = None,
    single_hop: bool = False,
) -> list[Verdict]:
    """Run the hop loop over ``claims`` and read a verdict for each (see the module docstring).
    ``on_hop(hop, claims)`` is called after each hop with the number of claims it advanced."""
    budget = {c.uid: hops or c.num_hops for c in claims}
    depth = {c.uid: k * budget[c.uid] if single_hop else k for c in claims}
    if single_hop:
        budget = dict.fromkeys(budget, 1)
    context: dict[str, list[tuple[Sentence, float]]] = {c.uid: [] for c in claims}
    used: dict[str, set[int]] = {c.uid: set() for c in claims}
    traces: dict[str, list[HopTrace]] = {c.uid: [] for c in claims}
    for hop in range(1, max(budget.values(), default=0) + 1):
        active = [c for c in claims if budget[c.uid] >= hop]
        facts = {c.uid: [s for s, _ in context[c.uid]] for c in active}
        retrieved = retriever.rank_batch([c.claim for c in active], [[s.fact for s in facts[c.uid]] for c in active], [depth[c.uid] for c in active], [used[c.uid] for c in active])
        texts = passages_of({pid for ranked in retrieved for pid, _ in ranked})
        passages = [[texts[pid] for pid, _ in r if pid in texts] for r in retrieved]
        condensed = condense_hop(stage1, stage2, [c.claim for c in active], [facts[c.uid] for c in active], passages, condenser)
        for c, r, result in zip(active, retrieved, condensed, strict=True):
            stage1_score = {s.sentence.key: s.score for s in result.ranked}
            known = {s.key for s in facts[c.uid]}
            new = [(s, stage1_score[s.key]) for s in result.candidates if s.key not in known]
            traces[c.uid].append(HopTrace(hop, list(r), new, result.kept))
            context[c.uid] = result.kept
            used[c.uid].update(pid for pid, _ in r)
        if on_hop is not None:
            on_hop(hop, len(active))
    probs = read_verdicts(reader, [c.claim for c in claims], [[s.fact for s, _ in context[c.uid]] for c in claims], reader_config)
    return [Verdict(c.uid, p, context[c.uid], traces[c.uid]) for c, p in zip(claims, probs, strict=True)]
