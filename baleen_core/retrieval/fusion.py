"""Hybrid retrieval: FLIPR's ranking fused with BM25's by reciprocal rank fusion, or the two split
by hop (BM25 from the claim alone, FLIPR once there is context).

Not in the reference: Baleen retrieves with FLIPR alone. On this project's CPU budget (MiniLM-L6,
about a thousand training claims) FLIPR finds the whole chain as often as BM25 once the context
holds the bridge, but from the claim alone it retrieves much less: the first hop of a long chain
is where BM25's exact rare-word matches win (``docs/benchmarks.md``, "Label rounds and FLIPR
epochs"). Fusing the two rankings of the same hop query lets each cover the other's misses.

Reciprocal rank fusion (Cormack, Clarke and Büttcher, SIGIR 2009): a passage's fused score is
``sum over rankings of 1 / (k + rank)``, rank counted from 1, a ranking that does not list the
passage adding nothing. ``k = 60`` is the paper's constant, not tuned here. Ranks, not scores,
are fused, so FLIPR's MaxSim sums and BM25's scores need no common scale.

Split by hop (:class:`FirstHopRetriever`): a query without context, a claim's first hop, ranks with
BM25 alone and every query with context with FLIPR alone. The split follows where each is
stronger on the held-out training claims: BM25 from the claim alone (claim-only Retrieval@100
0.686 against FLIPR's 0.54-0.59), FLIPR once the context holds the bridge. Fused at the first hop
('bm25-fused-first-hop'): the first hop's query ranks with the two fused, every later one with
FLIPR alone, so BM25's exact matches help only where FLIPR misses the most gold, from the claim
alone, and the later hops' lists are the ones the condensers trained on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, get_args

from baleen_core.config import Fusion

if TYPE_CHECKING:  # the engine's protocol; retrieval does not depend on the engine at run time
    from baleen_core.engine import Retriever

#: Reciprocal rank fusion's constant, as Cormack et al. (2009) set it.
RRF_K = 60


def reciprocal_rank_fusion(rankings: Sequence[Sequence[tuple[int, float]]], depth: int, k: int = RRF_K) -> list[tuple[int, float]]:
    """The best ``depth`` passages of the fused rankings as (pid, fused score), best first; ties
    go to the passage ranked best in any one ranking, then to the lower pid (deterministic)."""
    if k < 0:
        raise ValueError(f"reciprocal rank fusion needs k >= 0, got {k}")
    fused: dict[int, float] = {}
    best_rank: dict[int, int] = {}
    for ranking in rankings:
        for rank, (pid, _) in enumerate(ranking, start=1):
            fused[pid] = fused.get(pid, 0.0) + 1.0 / (k + rank)
            best_rank[pid] = min(best_rank.get(pid, rank), rank)
    order = sorted(fused, key=lambda pid: (-fused[pid], best_rank[pid], pid))
    return [(pid, fused[pid]) for pid in order[:depth]]


class FusedRetriever:
    """Ranks each hop query with every retriever, to the same depth, and fuses the rankings.

    It is also a label round's ranker (:class:`~baleen_core.training.hop_ordering.HopRanker`), so
    that a hybrid system's condensers train on the passages its own retriever hands them."""

    def __init__(self, retrievers: Sequence[Retriever], k: int = RRF_K) -> None:
        if len(retrievers) < 2:
            raise ValueError("fusion needs at least two retrievers")
        self.retrievers = list(retrievers)
        self.k = k
        self.name = "+".join(_name(r) for r in self.retrievers)

    @property
    def flipr(self):
        """The first retriever's encoder, when it has one (where the engine runs, for reports)."""
        return getattr(self.retrievers[0], "flipr", None)

    def rank_batch(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[Collection[int]]
    ) -> list[list[tuple[int, float]]]:
        return self._fused(self.retrievers[0].rank_batch(claims, contexts, depths, excludes), claims, contexts, depths, excludes)

    def rank(self, claim: str, context: Sequence[str], depth: int, exclude: set[int]) -> list[tuple[int, float]]:
        return self.rank_batch([claim], [context], [depth], [exclude])[0]

    def rank_and_score(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[Collection[int]], pids: Sequence[Sequence[int]]
    ) -> tuple[list[list[tuple[int, float]]], list[list[float]]]:
        """The fused rankings, and the first retriever's exact scores of ``pids`` (see :meth:`score`)."""
        first, scored = self.retrievers[0].rank_and_score(claims, contexts, depths, excludes, pids)
        return self._fused(first, claims, contexts, depths, excludes), scored

    def _fused(self, first: list[list[tuple[int, float]]], claims, contexts, depths, excludes) -> list[list[tuple[int, float]]]:
        """The first retriever's rankings (given) fused with every other's."""
        each = [first, *(retriever.rank_batch(claims, contexts, depths, excludes) for retriever in self.retrievers[1:])]
        return [reciprocal_rank_fusion([ranked[q] for ranked in each], depths[q], self.k) for q in range(len(claims))]

    def score(self, claim: str, context: Sequence[str], pids: Sequence[int]) -> list[float]:
        """The first retriever's exact scores of ``pids`` (what :meth:`rank_and_score` gives a
        label round). A fused score exists only for passages some ranking lists, so a label round
        orders the gold passages that no ranking reached, whose fused score would be 0 for all, by
        the first retriever (FLIPR) instead."""
        return self.retrievers[0].score(claim, context, pids)


class FirstHopRetriever:
    """Ranks each query without context with ``first`` and each query with context with ``later``.

    Either retriever answers its own queries of a batch in one call, and the answers come back in
    the batch's order. It is also a label round's ranker, scoring each query's passages with the
    retriever that ranks it."""

    def __init__(self, first: Retriever, later: Retriever) -> None:
        self.first = first
        self.later = later
        self.name = f"{_name(first)}>{_name(later)}"  # e.g. 'bm25>flipr'

    @property
    def flipr(self):
        """The later hops' encoder, when they have one (where the engine runs, for reports)."""
        return getattr(self.later, "flipr", None)

    def _routes(self, contexts: Sequence[Sequence[str]]) -> list[tuple[object, list[int]]]:
        """Each retriever with the indices of the queries it ranks, in batch order."""
        without = [q for q, context in enumerate(contexts) if not context]
        with_context = [q for q, context in enumerate(contexts) if context]
        return [(retriever, queries) for retriever, queries in ((self.first, without), (self.later, with_context)) if queries]

    def rank_batch(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[Collection[int]]
    ) -> list[list[tuple[int, float]]]:
        rankings: list[list[tuple[int, float]]] = [[] for _ in claims]
        for retriever, queries in self._routes(contexts):
            answers = retriever.rank_batch(*_select(queries, claims, contexts, depths, excludes))
            for q, ranking in zip(queries, answers, strict=True):
                rankings[q] = ranking
        return rankings

    def rank(self, claim: str, context: Sequence[str], depth: int, exclude: set[int]) -> list[tuple[int, float]]:
        return self.rank_batch([claim], [context], [depth], [exclude])[0]

    def rank_and_score(
        self, claims: Sequence[str], contexts: Sequence[Sequence[str]], depths: Sequence[int], excludes: Sequence[Collection[int]], pids: Sequence[Sequence[int]]
    ) -> tuple[list[list[tuple[int, float]]], list[list[float]]]:
        """Each query's ranking and its exact scores of ``pids``, both from the retriever that ranks it."""
        rankings: list[list[tuple[int, float]]] = [[] for _ in claims]
        scores: list[list[float]] = [[] for _ in claims]
        for retriever, queries in self._routes(contexts):
            ranked, scored = retriever.rank_and_score(*_select(queries, claims, contexts, depths, excludes, pids))
            for q, ranking, score in zip(queries, ranked, scored, strict=True):
                rankings[q], scores[q] = ranking, score
        return rankings, scores

    def score(self, claim: str, context: Sequence[str], pids: Sequence[int]) -> list[float]:
        return (self.later if context else self.first).score(claim, context, pids)


class HopCountRetriever:
    """Routes a claim's queries by the claim's hop count: ``routed`` ranks those of claims whose
    ``num_hops`` is in ``hop_counts``, ``alone`` every other claim's.

    A query alone does not say how many hops its claim has, so this is not a
    :class:`~baleen_core.engine.Retriever` itself: the engine, which knows each claim's hop count,
    asks :meth:`for_hops` and ranks each group of a hop's queries in one batch. Why route by hop
    count at all: on held-out training claims fusion with BM25 found the rest of a 4-hop chain
    that FLIPR alone missed, and cost passage F1 at 2 hops (docs/benchmarks.md)."""

    def __init__(self, alone: Retriever, routed: Retriever, hop_counts: Collection[int]) -> None:
        if not hop_counts:
            raise ValueError("routing by hop count needs at least one hop count to route")
        self.alone = alone
        self.routed = routed
        self.hop_counts = frozenset(hop_counts)
        counts = ",".join(str(n) for n in sorted(self.hop_counts))
        self.name = f"{_name(routed)}@{counts}-hop|{_name(alone)}"  # e.g. 'flipr+bm25@4-hop|flipr'

    @property
    def flipr(self):
        """The encoder of the retriever that ranks most claims alone, when it has one (for reports)."""
        return getattr(self.alone, "flipr", None)

    def for_hops(self, num_hops: int) -> Retriever:
        """The retriever that ranks the queries of a claim with ``num_hops`` hops."""
        return self.routed if num_hops in self.hop_counts else self.alone


def _name(retriever: object) -> str:
    return getattr(retriever, "name", type(retriever).__name__)


def _select(queries: Sequence[int], *per_query: Sequence) -> list[list]:
    """Each per-query argument restricted to ``queries``, in their order."""
    return [[values[q] for q in queries] for values in per_query]


#: ``search.fusion``'s choices, in the order an error message lists them.
FUSIONS: tuple[str, ...] = get_args(Fusion)


def hop_retriever(flipr: Retriever, fusion: str, bm25: Callable[[], Retriever], hop_counts: Collection[int] | None = None) -> Retriever | HopCountRetriever:
    """A FLIPR system's retriever under ``search.fusion``: FLIPR alone ('none'), fused with the
    BM25 that ``bm25()`` opens ('bm25'), BM25 for the queries without context and FLIPR for the
    others ('bm25-first-hop'), or the two fused for the queries without context and FLIPR alone for
    the others ('bm25-fused-first-hop'); BM25 is opened only when it is used. With ``hop_counts``
    (``search.fusion_hop_counts``) only the claims of those hop counts retrieve so, every other
    claim with FLIPR alone (:class:`HopCountRetriever`)."""
    if fusion == "none":
        return flipr
    if hop_counts is not None:
        return HopCountRetriever(flipr, hop_retriever(flipr, fusion, bm25), hop_counts)
    if fusion == "bm25":
        return FusedRetriever([flipr, bm25()])
    if fusion == "bm25-first-hop":
        return FirstHopRetriever(bm25(), flipr)
    if fusion == "bm25-fused-first-hop":
        return FirstHopRetriever(FusedRetriever([flipr, bm25()]), flipr)
    raise ValueError(f"unknown search.fusion {fusion!r}; choose {', '.join(FUSIONS[:-1])} or {FUSIONS[-1]}")
