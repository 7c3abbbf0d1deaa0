"""Every FLIPR a training benchmark's store holds, as retrievers on its dev claims, compared paired.

Run ``benchmarks/training.py`` on a pack from ``benchmarks/held_out_pack.py`` once per setting
to compare (e.g. ``--rounds 2`` then ``--rounds 1 --epochs 2``, same ``--work``: the steps they
share are reused), then this: each trained FLIPR (named ``flipr-r<round>-e<epochs>`` from its
checkpoint, ``-n<hard negatives>`` where not 1) and BM25 get the training benchmark's step-6 metrics on the pack's dev claims, i.e.
held-out *training* claims, and each ``--pair`` is compared on the same claims. That is where the
number of label rounds and FLIPR epochs are chosen; dev is never read.

``--search NPROBE NCANDIDATES`` (repeatable) adds each trained FLIPR again with wider candidate
generation (``NAME@p<nprobe>-c<ncandidates>``), and ``--exhaustive`` with exact FLIPR over every
passage (``NAME@exhaustive``, about 1.5 s a search on hover-mini): how much gold the index's
candidate generation costs the trained retriever, against how much its model does.

``--k-claim K`` (repeatable) adds each trained FLIPR again with the top ``K`` claim positions'
MaxSims counted instead of its ``retriever.k_claim`` (``NAME@k<K>``; the reference's 32 of 64,
``K`` 64: every claim position, as ColBERT): the same model, index and candidates, scored
otherwise. ``--first-hop-k-claim K`` does so for the queries without context only, the later
hops keeping ``retriever.k_claim`` (``NAME@first-k<K>``).

    python benchmarks/flipr_rounds.py --work DIR --out benchmarks/results/NAME.json
        [--pair flipr-r0-e2 flipr-r1-e1 ...]   (default: every FLIPR against BM25)
        [--search 8 2048 ...] [--exhaustive] [--k-claim 16 ...] [--first-hop-k-claim 8 ...]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hover_mini import add_split_option, work_split  # noqa: E402  (sibling module)
from training import finished_run_config, ranked_claims, write_retriever_results  # noqa: E402  (the sibling benchmark's metrics)


class ExhaustiveRanker:
    """A FLIPR searcher that ranks by exact FLIPR over every passage instead of its index's
    candidates (the hop ranker :func:`retriever_row` reads)."""

    def __init__(self, searcher) -> None:
        self.searcher = searcher

    def rank(self, claim: str, context, depth: int, exclude: set[int]) -> list[tuple[int, float]]:
        (hits,) = self.searcher.exhaustive([claim], [list(context)], k=depth, exclude=[exclude])
        return [(hit.pid, hit.score) for hit in hits]

    def rank_and_score(self, claims, contexts, depths, excludes, pids) -> tuple[list[list[tuple[int, float]]], list[list[float]]]:
        ranked = [self.rank(*query) for query in zip(claims, contexts, depths, excludes, strict=True)]
        return ranked, [self.searcher.score(claim, context, these) for claim, context, these in zip(claims, contexts, pids, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="the training benchmark's --work directory")
    parser.add_argument("--out", type=Path, required=True)
    add_split_option(parser)
    parser.add_argument("--pair", nargs=2, action="append", metavar=("SYSTEM", "BASELINE"), help="compare SYSTEM − BASELINE (repeatable)")
    parser.add_argument("--search", nargs=2, type=int, action="append", default=[], metavar=("NPROBE", "NCANDIDATES"), help="each trained FLIPR also with these search settings (repeatable)")
    parser.add_argument("--exhaustive", action="store_true", help="each trained FLIPR also by exact FLIPR over every passage (slow)")
    parser.add_argument("--k-claim", type=int, action="append", default=[], metavar="K", help="each trained FLIPR also scored with its top K claim positions (repeatable)")
    parser.add_argument("--first-hop-k-claim", type=int, action="append", default=[], metavar="K", help="likewise for the queries without context only (repeatable)")
    args = parser.parse_args()
    if any(k < 1 for k in args.k_claim + args.first_hop_k_claim):
        sys.exit("--k-claim takes a count of claim positions ≥ 1")
    split = work_split(args.work, args.split)  # before any work: a missing --split loses nothing
    started = time.perf_counter()
    config = finished_run_config(args.work)
    from baleen_core.training.hop_ordering import claims_from_rows
    from baleen_storage import ArtifactStore
    from baleen_storage.indexes import index_retriever_config, open_bm25, open_searcher

    store = ArtifactStore(config.store_root)
    claims = store.latest("claims", "claims")
    sentences = store.latest("sentences", "corpus")
    dev = claims_from_rows(store.claim_gold(claims, store.get("gold_facts", claims.manifest.run_id, "claims"), sentences, "dev").to_pylist())
    checkpoints = {str(ref.path): ref.manifest.params for ref in store.refs("flipr_checkpoint")}
    retrievers = {"bm25": open_bm25(store, store.latest("passages", "corpus"), sentences)}
    for index in store.refs("flipr_index"):
        retriever = index_retriever_config(store, index)
        trained = checkpoints.get(str(retriever.checkpoint))
        if trained is not None and retriever.k_claim is not None:  # trained, focused scoring: not the untrained FLIPR, not colbert-full
            name = f"flipr-r{trained['round']}-e{trained['epochs']}" + (f"-n{trained['hard_negatives']}" if trained.get("hard_negatives", 1) != 1 else "")
            name = f"{name}-{index.manifest.run_id}" if name in retrievers else name
            retrievers[name] = searcher = open_searcher(store, config.search, config.retriever.device, index)[0]
            for nprobe, ncandidates in args.search:
                wider = config.search.model_copy(update={"nprobe": nprobe, "ncandidates": ncandidates})
                retrievers[f"{name}@p{nprobe}-c{ncandidates}"] = open_searcher(store, wider, config.retriever.device, index)[0]
            if args.exhaustive:
                retrievers[f"{name}@exhaustive"] = ExhaustiveRanker(searcher)
            if args.k_claim or args.first_hop_k_claim:
                searcher.tensors  # loaded once, then shared by the copies below
            # the same model, index and candidates (copies share them); only the aggregation differs
            for k in args.k_claim:
                retrievers[f"{name}@k{k}"] = scored = copy.copy(searcher)
                scored.k_claim = k
            for k in args.first_hop_k_claim:  # search.k_claim_first_hop: the queries without context only
                retrievers[f"{name}@first-k{k}"] = scored = copy.copy(searcher)
                scored.k_claim_first_hop = k
    rows = ranked_claims(retrievers, dev, config.evaluation)
    pairs = [tuple(pair) for pair in args.pair] if args.pair else [(name, "bm25") for name in rows if name != "bm25"]
    unknown = {name for pair in pairs for name in pair} - set(rows)
    if unknown:
        sys.exit(f"no retriever named {', '.join(sorted(unknown))} in {args.work}; there are: {', '.join(rows)}")
    write_retriever_results(args.out, rows, time.perf_counter() - started, {"depth": config.evaluation.depth, "store": "training benchmark runs of one --work"}, pairs, split)


if __name__ == "__main__":
    main()
