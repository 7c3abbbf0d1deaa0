"""Latent hop ordering + FLIPR training on hover-mini: label statistics per round and dev recall.

Trains on ``claims_train.json`` and measures on ``claims_dev.json`` (same corpus, same run):

1. ingest + index with the untrained FLIPR (reused when ``--work`` already holds them);
2. the training flow: round-0 labels (BM25) → train FLIPR → re-index → round-1 labels (trained
   FLIPR) → train FLIPR → re-index;
3. claim-only Recall@25/100 of gold passages on dev, by hop count, for the untrained FLIPR and
   each trained one (indexed search), and the label statistics of each round.

    python benchmarks/training.py [--hover-mini PATH] [--work DIR] [--epochs 1] [--batch-size 16]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_HOVER = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "hover-mini"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hover-mini", type=Path, default=DEFAULT_HOVER)
    parser.add_argument("--work", type=Path, default=None, help="working directory (kept; default: a temp dir)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    if not args.hover_mini.is_dir():
        sys.exit(f"hover-mini not found at {args.hover_mini}; pass --hover-mini")
    work = args.work or Path(tempfile.mkdtemp(prefix="baleen-bench-training-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("BALEEN_HOME", str(work / "home"))
    from baleen_core.runtime import apply_runtime_defaults

    apply_runtime_defaults()
    from baleen_core.config import BaleenConfig
    from baleen_core.retrieval.recall import gold_recall
    from baleen_core.training.hop_ordering import claims_from_rows
    from baleen_flows.index import index_flow
    from baleen_flows.ingest import ingest_flow
    from baleen_flows.training import training_flow
    from baleen_storage import ArtifactStore
    from baleen_storage.catalog import query
    from baleen_storage.indexes import open_searcher

    config_path = work / "training.yaml"
    config_path.write_text(
        f"store_root: {work / 'store'}\nlabels: {{rounds: 2, round0: bm25, depth: 100}}\n"
        f"training: {{flipr: {{epochs: {args.epochs}, batch_size: {args.batch_size}}}}}\n"
    )
    store = ArtifactStore(work / "store")
    if not store.refs("flipr_index", "index"):
        ingested = ingest_flow(str(args.hover_mini), str(config_path))
        index_flow(str(config_path), ingested["corpus/passages"].manifest.run_id)
    started = time.perf_counter()
    refs = training_flow(str(config_path))
    wall = time.perf_counter() - started

    config = BaleenConfig.load(config_path)
    claims = store.latest("claims", "claims")
    rows = store.claim_gold(claims, store.get("gold_facts", claims.manifest.run_id, "claims"), store.latest("sentences", "corpus"), "dev")
    dev = [(c.claim, c.num_hops, {p.pid for p in c.passages}) for c in claims_from_rows(rows.to_pylist())]
    systems = {"untrained FLIPR": store.latest("flipr_index", "index")}
    systems.update({f"FLIPR trained on round-{r} labels": refs[f"flipr-r{r}/index"] for r in range(config.labels.rounds)})
    print(f"\ndev claims: {len(dev)}; training flow wall time: {wall:.0f} s (reused steps take ~0 s)\n")
    print("| retriever | R@25 all | R@25 2-hop | R@25 3-hop | R@25 4-hop | R@100 all |")
    print("|---|---|---|---|---|---|")
    for name, index in systems.items():
        searcher, _ = open_searcher(store, config.search, config.retriever.device, index)
        recall = gold_recall(searcher, dev, [25, 100])
        r25, r100 = recall[25], recall[100]
        print(f"| {name} | {r25['all']:.3f} | {r25['2']:.3f} | {r25['3']:.3f} | {r25['4']:.3f} | {r100['all']:.3f} |")

    print("\n| round | labeller | hop | labels | reached ≤ 100 | mean rank | median rank |")
    print("|---|---|---|---|---|---|---|")
    stats = query(
        store,
        "SELECT round, labeller, hop, count(*) AS n, avg(reached::INT) AS reached, avg(positive_rank) AS mean_rank, "
        "median(positive_rank) AS median_rank FROM hop_labels GROUP BY ALL ORDER BY ALL",
    ).to_pylist()
    for s in stats:
        print(f"| {s['round']} | {s['labeller']} | {s['hop']} | {s['n']} | {s['reached']:.3f} | {s['mean_rank']:.2f} | {s['median_rank']} |")
    changed = query(
        store,
        "SELECT a.hop, count(*) AS n, count(*) FILTER (WHERE a.positive_pid <> b.positive_pid) AS changed FROM hop_labels a "
        "JOIN hop_labels b USING (uid, hop) WHERE a.round = 0 AND b.round = 1 GROUP BY ALL ORDER BY ALL",
    ).to_pylist()
    print("\npositives changed from round 0 to round 1: " + ", ".join(f"hop {c['hop']}: {c['changed']}/{c['n']}" for c in changed))
    print("\n| model | examples | steps | train s | device | mean loss by epoch |")
    print("|---|---|---|---|---|---|")
    for r in range(config.labels.rounds):
        s = refs[f"flipr-r{r}/checkpoint"].manifest.stats
        print(f"| FLIPR round {r} | {s['examples']} | {s['steps']} | {s['train_seconds']} | {s['device']} | {s['epoch_mean_loss']} |")


if __name__ == "__main__":
    main()
