"""FLIPR retrieval benchmark on hover-mini: encode throughput, index size, latency, recall.

Runs the real pipeline (ingest → index flow, with ``index.keep_fp16`` so the fp16 and compressed
indexes come from one encoding), then, on the dev claims (claim-only queries):

* exhaustive FLIPR over every passage (fp16 embeddings, exact) — the reference;
* indexed FLIPR (candidate generation + exact re-rank) from fp16 and from the compressed codes;
* BM25 (bm25s) over ``title | text``.

and prints one table of Recall@25/100 (mean fraction of a claim's gold passages retrieved),
latency p50/p95 per query (retrieval only; query encoding is reported separately, it is the same
for every FLIPR variant) and ratios against the exhaustive reference.

    python benchmarks/retrieval.py [--hover-mini PATH] [--work DIR] [--max-claims N] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from hover_mini import add_hover_mini_option, require_hover_mini  # sibling module



def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def recall(ranked: list[int], gold: set[int], k: int) -> float:
    return len(set(ranked[:k]) & gold) / len(gold)


def matmul_gflops(seconds: float = 2.0) -> float:
    """Measured fp32 GEMM throughput of this machine (the encoder's practical FLOP ceiling)."""
    import torch

    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        n += 1
    return 2 * 2048**3 * n / (time.perf_counter() - start) / 1e9


def encoder_flops_per_token(flipr, mean_len: float) -> float:
    """Forward FLOPs per document token: 2 × (non-embedding weights) + attention (4 · L · hidden per layer)."""
    backbone = flipr.encoder.backbone
    weights = sum(p.numel() for n, p in backbone.named_parameters() if "embeddings" not in n and p.dim() > 1)
    cfg = backbone.config
    return 2 * weights + 4 * mean_len * cfg.hidden_size * cfg.num_hidden_layers + 2 * cfg.hidden_size * flipr.dim


def build(hover: Path, work: Path) -> Path:
    config = work / "config.yaml"
    config.write_text(f"store_root: {work / 'store'}\nindex:\n  keep_fp16: true\n")
    from baleen_flows.index import index_flow
    from baleen_flows.ingest import ingest_flow

    ingested = ingest_flow(str(hover), str(config))
    index_flow(str(config), ingested["corpus/passages"].manifest.run_id)
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_hover_mini_option(parser)
    parser.add_argument("--work", type=Path, default=None, help="working directory (kept; default: a temp dir)")
    parser.add_argument("--max-claims", type=int, default=None, help="evaluate on the first N dev claims only")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()
    require_hover_mini(args.hover_mini)
    work = args.work or Path(tempfile.mkdtemp(prefix="baleen-bench-retrieval-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("BALEEN_HOME", str(work / "home"))

    from baleen_core.runtime import apply_runtime_defaults

    apply_runtime_defaults()
    import bm25s
    import torch

    from baleen_core.config import BaleenConfig
    from baleen_core.results import write_results
    from baleen_core.retrieval import Flipr, FliprSearcher, passage_text
    from baleen_storage import ArtifactStore
    from baleen_storage.indexes import index_retriever_config, open_index

    started = time.perf_counter()
    config_path = build(args.hover_mini, work)
    build_seconds = time.perf_counter() - started
    config = BaleenConfig.load(config_path)
    store = ArtifactStore(config.store_root)
    index_ref = store.latest("flipr_index", "index")
    stats = index_ref.manifest.stats
    shards = [store.get("flipr_shard", s["run_id"], s["producer"]) for s in stats["shards"]]
    codec_ref = store.latest("flipr_codec", "index")
    encode_seconds = sum(s.manifest.stats["seconds"] for s in shards)
    encode_pps = stats["n_passages"] / encode_seconds

    # ---- queries and gold ----
    run = store.latest("claims", "claims").manifest.run_id
    claims = store.read_table(store.get("claims", run, "claims")).to_pylist()
    gold_rows = store.read_table(store.get("gold_facts", run, "claims")).to_pylist()
    dev = [c for c in claims if c["split"] == "dev" and c["resolved"]][: args.max_claims]
    gold: dict[str, set[int]] = {}
    for row in gold_rows:
        gold.setdefault(row["uid"], set()).add(row["pid"])

    flipr = Flipr.load(index_retriever_config(store, index_ref))
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    pq_index, _ = open_index(store, index_ref, storage="codec")
    fp16_index, _ = open_index(store, index_ref, storage="fp16")
    fp16_index.materialize()  # exhaustive search reads every token: keep them as float32 in memory
    search_cfg = config.search
    pq = FliprSearcher(flipr, pq_index, search_cfg.nprobe, search_cfg.ncandidates)
    fp16 = FliprSearcher(flipr, fp16_index, search_cfg.nprobe, search_cfg.ncandidates)

    systems = {name: {"recall25": [], "recall100": [], "latency": [], "hops": [], "overlap25": []} for name in ("exhaustive", "fp16", "pq", "bm25")}
    encode_latency = []
    k = 100
    exact_top25: list[set[int]] = []
    for claim in dev:
        t = time.perf_counter()
        queries, lengths, n_claim = pq.encode([claim["claim"]])
        encode_latency.append(time.perf_counter() - t)
        query = queries[0, : lengths[0]]
        for name, fn in (
            ("exhaustive", lambda: fp16.exhaustive_encoded(query, n_claim, k)),
            ("fp16", lambda: fp16.search_encoded(query, n_claim, k)),
            ("pq", lambda: pq.search_encoded(query, n_claim, k)),
        ):
            t = time.perf_counter()
            hits = fn()
            systems[name]["latency"].append(time.perf_counter() - t)
            ranked = [h.pid for h in hits]
            if name == "exhaustive":
                exact_top25.append(set(ranked[:25]))
            systems[name]["overlap25"].append(len(set(ranked[:25]) & exact_top25[-1]) / 25)
            systems[name]["recall25"].append(recall(ranked, gold[claim["uid"]], 25))
            systems[name]["recall100"].append(recall(ranked, gold[claim["uid"]], 100))
            systems[name]["hops"].append(claim["num_hops"])

    # ---- BM25 ----
    passages = store.latest("passages", "corpus")
    table = store.passage_texts(passages, store.get("sentences", passages.manifest.run_id, "corpus"))
    bm25_pids = table.column("pid").to_numpy()
    texts = [passage_text(t, x) for t, x in zip(table.column("title").to_pylist(), table.column("text").to_pylist(), strict=True)]
    t = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    bm25_index_seconds = time.perf_counter() - t
    for claim in dev:
        t = time.perf_counter()
        docs, _ = retriever.retrieve(bm25s.tokenize([claim["claim"]], stopwords="en", show_progress=False), k=k, show_progress=False)
        systems["bm25"]["latency"].append(time.perf_counter() - t)
        ranked = bm25_pids[docs[0]].tolist()
        systems["bm25"]["overlap25"].append(len(set(ranked[:25]) & exact_top25[len(systems["bm25"]["recall25"])]) / 25)
        systems["bm25"]["recall25"].append(recall(ranked, gold[claim["uid"]], 25))
        systems["bm25"]["recall100"].append(recall(ranked, gold[claim["uid"]], 100))
        systems["bm25"]["hops"].append(claim["num_hops"])

    # ---- report ----
    mean_len = stats["n_tokens"] / stats["n_passages"]
    flops = encoder_flops_per_token(flipr, mean_len) * mean_len
    peak = matmul_gflops()
    ref = systems["exhaustive"]
    ref_r25, ref_p50 = np.mean(ref["recall25"]), percentile(ref["latency"], 50)
    bytes_per_token = {"exhaustive": 2 * stats["dim"], "fp16": 2 * stats["dim"] + 2, "pq": stats["bytes_per_token"], "bm25": None}
    rows = []
    for name, label in (("exhaustive", "FLIPR exhaustive (fp16, exact)"), ("fp16", "FLIPR indexed, fp16 re-rank"), ("pq", "FLIPR indexed, compressed (PQ) re-rank"), ("bm25", "BM25 (bm25s)")):
        s = systems[name]
        r25, r100 = float(np.mean(s["recall25"])), float(np.mean(s["recall100"]))
        by_hops = {h: float(np.mean([r for r, hh in zip(s["recall25"], s["hops"], strict=True) if hh == h])) for h in (2, 3, 4)}
        p50, p95 = percentile(s["latency"], 50) * 1e3, percentile(s["latency"], 95) * 1e3
        rows.append(
            {
                "system": label,
                "R@25": r25,
                "R@100": r100,
                "R@25 2/3/4-hop": by_hops,
                "p50 ms": p50,
                "p95 ms": p95,
                "R@25 / exhaustive": r25 / ref_r25 if ref_r25 else float("nan"),
                "exhaustive top-25 kept": float(np.mean(s["overlap25"])),
                "speed-up vs exhaustive (p50)": ref_p50 * 1e3 / p50,
                "bytes/token": bytes_per_token[name],
            }
        )
    pq_row, fp16_row = rows[2], rows[1]
    results = {
        "corpus": {"passages": stats["n_passages"], "tokens": stats["n_tokens"], "mean tokens/passage": round(mean_len, 1), "dev claims": len(dev)},
        "build": {
            "pipeline wall s (ingest + codec + encode + merge, incl. Prefect)": round(build_seconds, 1),
            "codec sample passages": codec_ref.manifest.stats["sample_passages"],
            "codec seconds (sample encode + k-means + PQ)": codec_ref.manifest.stats["seconds"],
            "centroids": stats["n_centroids"],
            "encode passages/s (this CPU, %d threads)" % torch.get_num_threads(): round(encode_pps, 1),
            "encoder GFLOP/s achieved": round(encode_pps * flops / 1e9, 1),
            "fp32 GEMM GFLOP/s measured (ceiling)": round(peak, 1),
            "fraction of FLOP ceiling": round(encode_pps * flops / 1e9 / peak, 3),
            "BM25 index s": round(bm25_index_seconds, 2),
        },
        "size": {
            "fp16 bytes/token": 2 * stats["dim"] + 2,
            "compressed bytes/token": stats["bytes_per_token"],
            "fp16 bytes/passage": round((2 * stats["dim"] + 2) * mean_len, 1),
            "compressed bytes/passage": stats["bytes_per_passage"],
            "compression ratio": round((2 * stats["dim"] + 2) / stats["bytes_per_token"], 2),
        },
        "query encode ms p50/p95": [round(percentile(encode_latency, 50) * 1e3, 1), round(percentile(encode_latency, 95) * 1e3, 1)],
        "systems": rows,
        "targets": {
            "indexed (PQ) R@25 / exhaustive ≥ 0.99": round(pq_row["R@25 / exhaustive"], 4),
            "indexed (PQ) speed-up ≥ 5×": round(pq_row["speed-up vs exhaustive (p50)"], 1),
            "compressed bytes/token ≤ 48": stats["bytes_per_token"],
            "compressed R@25 / fp16 indexed R@25 ≥ 0.98": round(pq_row["R@25"] / fp16_row["R@25"], 4) if fp16_row["R@25"] else None,
        },
    }
    print_report(results)
    if args.json:
        write_results(results, args.json)


def print_report(results: dict) -> None:
    for section in ("corpus", "build", "size", "targets"):
        print(f"\n| {section} | |\n|---|---|")
        for key, value in results[section].items():
            print(f"| {key} | {value} |")
    print(f"\nquery encoding (shared by all FLIPR rows): p50/p95 {results['query encode ms p50/p95']} ms\n")
    print("| system | R@25 | R@100 | R@25 by 2/3/4 hops | p50 ms | p95 ms | R@25 ÷ exhaustive | exhaustive top-25 kept | speed-up ÷ exhaustive | bytes/token |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results["systems"]:
        hops = " / ".join(f"{v:.3f}" for v in r["R@25 2/3/4-hop"].values())
        print(
            f"| {r['system']} | {r['R@25']:.3f} | {r['R@100']:.3f} | {hops} | {r['p50 ms']:.1f} | {r['p95 ms']:.1f} | "
            f"{r['R@25 / exhaustive']:.3f} | {r['exhaustive top-25 kept']:.3f} | {r['speed-up vs exhaustive (p50)']:.1f}× | {r['bytes/token'] or '—'} |"
        )


if __name__ == "__main__":
    main()
