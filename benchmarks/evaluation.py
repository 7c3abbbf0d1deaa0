"""The HoVer evaluation on hover-mini: every system × 2/3/4 hops, with throughput.

Trains on ``claims_train.json`` and evaluates on ``claims_dev.json`` (same corpus, same store):

1. the training benchmark's store in ``--work`` is reused (``benchmarks/training.py --work DIR``
   writes it, and ``DIR/training-wall.json`` with its wall time, copied into the results file's
   budgets); an interrupted one is finished first;
2. the evaluation flow runs every system on the dev claims: the full system (trained FLIPR +
   condensers + reader), BM25 multi-hop, full ColBERT interaction, single-hop, untrained FLIPR;
3. it prints the metric table (mean and bootstrap 95% interval, by hop count), the engine's
   throughput per system, and where the report, plots and HTML traces are;
4. it writes the results file (``baleen_core.results``: every system × hop count × metric with
   its interval, the paired differences, final-fact counts, claims/s, commit, machine, budgets and
   the condensers' and reader's heads) to
   ``benchmarks/results/hover-mini-dev.json`` (``hover-mini-dev-first<N>.json`` with
   ``--max-claims N``, so a partial run never overwrites the whole one; ``hover-mini-held-out*.json``
   on a pack whose dev claims are held-out training claims). The README's table is
   ``python -m baleen_core.results benchmarks/results/hover-mini-dev.json``.

    python benchmarks/evaluation.py --work DIR [--hover-mini PATH] [--max-claims N] [--systems baleen,bm25-multihop]
        [--fusion none|bm25|bm25-first-hop|bm25-fused-first-hop] [--min-kept N] [--k-claim-first-hop K]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import yaml
from hover_mini import add_hover_mini_option, flow_server, hop_counts, require_hover_mini  # sibling module

from baleen_core.held_out import DEV_SPLIT, HELD_OUT_SPLIT, PACK_RECORD, pack_split, record_split
from baleen_core.retrieval.fusion import FUSIONS

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_hover_mini_option(parser)
    parser.add_argument("--work", type=Path, required=True, help="the training benchmark's working directory (created when missing)")
    parser.add_argument("--max-claims", type=int, default=None, help="evaluate only the first N dev claims")
    parser.add_argument("--systems", default=None, help="comma-separated systems (default: the training benchmark's evaluation.systems)")
    parser.add_argument("--out", type=Path, default=None, help="results file (default: benchmarks/results/hover-mini-dev[-first<N>].json; hover-mini-held-out[...] on a held-out pack)")
    parser.add_argument(
        "--split", choices=[HELD_OUT_SPLIT, DEV_SPLIT], default=None,
        help="what the pack's dev claims are, for the results file (default: what the pack's pack.json says, 'held-out train' for a pack from "
        "held_out_pack.py; dev without one); recorded in the work folder for compare_runs.py",
    )
    # stage 1 in bfloat16 where the CPU has it natively: on 159 held-out training claims the engine
    # ran 1.85x faster for passage F1 -0.010 [-0.027, +0.008], EM -0.006 [-0.044, +0.031], inside
    # the rule fixed before the run (benchmarks/results/bf16-stage1-held-out.json); both stages in
    # bfloat16 fell by -0.016 (bf16-held-out.json), so stage 2 stays float32
    parser.add_argument(
        "--stage1-cpu-precision", choices=["float32", "bfloat16", "native"], default="native",
        help="condenser.stage1_cpu_precision; native: bfloat16 where the CPU computes it natively, else float32",
    )
    parser.add_argument("--stage2-cpu-precision", choices=["float32", "bfloat16"], default=None, help="condenser.stage2_cpu_precision (default: the training benchmark's)")
    parser.add_argument("--fusion", choices=list(FUSIONS), default=None, help="search.fusion for the FLIPR systems (default: the training benchmark's)")
    parser.add_argument(
        "--fusion-hop-counts", type=hop_counts, default=None,
        help="search.fusion_hop_counts, e.g. 4 or 3,4: only claims of these hop counts retrieve under --fusion, the others with FLIPR alone "
        "(sets search.fusion_in_label_rounds false, which the evaluation does not read; default: the training benchmark's)",
    )
    parser.add_argument("--k-claim-first-hop", type=int, default=None, help="search.k_claim_first_hop, the claim positions FLIPR counts at a claim's first hop (default: the training benchmark's)")
    parser.add_argument("--min-kept", type=int, default=None, help="condenser.min_kept, the context facts kept below the threshold (default: the training benchmark's)")
    args = parser.parse_args()
    require_hover_mini(args.hover_mini)
    split = pack_split(args.hover_mini)
    if args.split is not None and args.split != split and (args.hover_mini / PACK_RECORD).is_file():
        sys.exit(f"--split {args.split!r}, but {args.hover_mini / PACK_RECORD} says its dev claims are {split!r}")
    split = args.split or split
    os.environ.setdefault("BALEEN_HOME", str(args.work / "home"))
    from baleen_core.runtime import apply_runtime_defaults

    apply_runtime_defaults()
    from baleen_core.condensing import cpu_has_native_bfloat16
    from baleen_core.config import CPU_PRECISION_FIELDS, BaleenConfig
    from baleen_flows.evaluation import evaluation_flow
    from baleen_flows.ingest import ingest_flow
    from baleen_flows.training import training_flow
    from baleen_storage import ArtifactStore

    training_config = args.work / "training.yaml"
    if not training_config.exists():
        sys.exit(f"{training_config} is missing: run `python benchmarks/training.py --work {args.work}` first (it trains the models evaluated here)")
    store = ArtifactStore(args.work / "store")
    if not store.refs("reader_checkpoint"):  # an interrupted training benchmark: finish it (untrained-flipr would need `baleen index`)
        with flow_server():
            if not store.refs("claims", "claims"):
                ingest_flow(str(args.hover_mini), str(training_config))
            training_flow(str(training_config))
    config_path = args.work / "evaluation.yaml"
    settings = yaml.safe_load(training_config.read_text())  # its evaluation.systems decided what was trained
    # the store this script reads (--work's), not the one training.yaml names: a copy of another
    # run's --work (its store hard-linked) must publish into its own store, never into the original's
    settings["store_root"] = str(store.root)
    evaluation = {**settings.get("evaluation", {}), "split": "dev"}
    if args.systems:
        evaluation["systems"] = args.systems.split(",")
    if args.max_claims:
        evaluation["max_claims"] = args.max_claims
    native = "bfloat16" if cpu_has_native_bfloat16() else None
    stage1 = native if args.stage1_cpu_precision == "native" else args.stage1_cpu_precision
    precisions = {field: value for field, value in zip(CPU_PRECISION_FIELDS, (stage1, args.stage2_cpu_precision), strict=True) if value}
    if precisions:
        settings["condenser"] = {**settings.get("condenser", {}), **precisions}
    if args.fusion:
        settings["search"] = {**settings.get("search", {}), "fusion": args.fusion}
    if args.fusion_hop_counts is not None:
        settings["search"] = {**settings.get("search", {}), "fusion_hop_counts": args.fusion_hop_counts, "fusion_in_label_rounds": False}
    if args.k_claim_first_hop is not None:
        settings["search"] = {**settings.get("search", {}), "k_claim_first_hop": args.k_claim_first_hop}
    if args.min_kept is not None:
        settings["condenser"] = {**settings.get("condenser", {}), "min_kept": args.min_kept}
    config_path.write_text(yaml.safe_dump({**settings, "evaluation": evaluation}, sort_keys=False))

    started = time.perf_counter()
    with flow_server():
        refs = evaluation_flow(str(config_path))
    wall = time.perf_counter() - started
    print(f"\nevaluation flow wall time: {wall:.0f} s (systems already verified are reused)")
    report = max(store.root.glob("reports/*/evaluation/report.md"), key=lambda path: path.stat().st_mtime)
    print(f"\nreport with bootstrap intervals, plots and HTML traces: {report}")

    from baleen_core.results import results_document, results_table, write_results
    from baleen_tasks.evaluation import unresolved_claims

    config = BaleenConfig.load(config_path)
    training_wall = args.work / "training-wall.json"  # written by benchmarks/training.py
    metric_rows = {key.split("/")[0]: store.read_table(ref).to_pylist() for key, ref in refs.items() if key.endswith("/claim_metrics")}
    speed = {key.split("/")[0]: ref.manifest.stats["claims_per_second"] for key, ref in refs.items() if key.endswith("/predictions")}
    budgets = {"training": settings.get("training"), "labels": config.labels.model_dump(mode="json"),
               "evaluation": config.evaluation.model_dump(mode="json", include={"depth", "k", "hops", "max_claims", "bootstrap"}),
               "search": config.search.model_dump(mode="json"),
               "condenser": config.condenser.model_dump(
                   mode="json", include={"scoring", "top_facts", "max_kept", "min_kept", "stage2_threshold", "evidence_min_facts", "evidence_max_passages", *CPU_PRECISION_FIELDS}
               ),
               "reader": config.reader.model_dump(mode="json", include={"scoring", "fact_maxlen", "maxlen"}),
               "training_wall": json.loads(training_wall.read_text()) if training_wall.exists() else None}
    claims = store.latest("claims", "claims")
    made_with = next((ref.manifest.params["condenser"] for key, ref in refs.items() if key == "baleen/predictions"), {})
    # the reader's (calibrated) threshold and evidence floors are the ones the predictions were made with
    budgets["condenser"]["stage2_threshold"] = made_with.get("stage2_threshold", config.condenser.stage2_threshold)
    budgets["condenser"]["evidence_floors"] = made_with.get("evidence_floors", {})
    document = results_document(
        metric_rows, speed, split, wall, budgets, samples=config.evaluation.bootstrap, seed=config.evaluation.seed,
        unresolved_claims=unresolved_claims(store, claims, "dev"),
    )
    record_split(args.work, args.hover_mini, split)  # for compare_runs.py: the store keeps the claims, not what they are
    stem = "hover-mini-dev" if split == DEV_SPLIT else "hover-mini-held-out"  # a held-out pack's numbers never land in the dev file
    out = args.out or RESULTS / (f"{stem}-first{args.max_claims}.json" if args.max_claims else f"{stem}.json")
    write_results(document, out)
    print(f"\nresults file: {out}\n\n{results_table(document)}")


if __name__ == "__main__":
    main()
