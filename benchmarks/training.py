"""Latent hop ordering + FLIPR training on hover-mini: label statistics per round and dev recall.

Trains on ``claims_train.json`` and measures on ``claims_dev.json`` (same corpus, same run):

1. ingest (reused when ``--work`` already holds it); no untrained index: round 0 labels with BM25,
   so that index (about 6 minutes here) would only serve a recall report;
2. the training flow: round-0 labels (BM25) → train FLIPR → re-index → round-1 labels (trained
   FLIPR), and with ``--rounds 2`` → train FLIPR again → re-index → round-2 labels;
3. condenser stage 1 → stage 2 → reader on the final FLIPR's labels;
4. claim-only Recall@25/100 of gold passages on dev, by hop count, for each trained FLIPR (and
   the untrained one when the store holds its index), and the label statistics of each round;
5. the condensers and the reader on the dev claims' gold passages: stage-1 recall of gold facts
   in its top 9, sentence P/R/F1/EM of the facts stage 2 keeps, reader accuracy from gold facts
   and from the kept facts;
6. with ``--out``, a results file of each FLIPR round as a retriever on the dev claims, with
   bootstrap intervals and the paired difference of each from the one before (round 0 from BM25): claim-only
   Retrieval@25/@100 (every gold passage among the claim's top k) and ``chain_reached`` (given
   the gold facts of earlier hops as context, each hop's gold passage within the engine's
   per-hop depth, ``evaluation.depth // hops``: 100 // hops by default). On a pack from ``benchmarks/held_out_pack.py`` "dev" is held-out
   training claims: that is where the number of label rounds is chosen (``benchmarks/flipr_rounds.py``).

    python benchmarks/training.py [--hover-mini PATH] [--work DIR] [--epochs 2] [--batch-size 16] [--hard-negatives 3]
        [--rounds 1] [--condenser-hops 1000] [--stage2-hops N] [--stage2-epochs 3] [--stage2-start stage1|backbone] [--reader-claims 500] [--reader-epochs 2] [--reader-start backbone|stage2] [--reader-scoring cls|alignment] [--reader-last-read-facts N] [--reader-lexical-coverage] [--reader-augment swap,drop,shuffle] [--reader-contrast-margin M] [--no-evidence-ranker] [--no-evidence-ranker-context] [--steps-past-edge N] [--k-claim-first-hop K]
        [--stage1-negative-passages 4] [--stage2-negative-passages 8] [--fusion none|bm25|bm25-first-hop|bm25-fused-first-hop] [--no-fusion-in-label-rounds] [--bm25-negatives] [--seed 0] [--reader-seed N]
        [--cpu-precision native|float32|bfloat16]
        [--out benchmarks/results/NAME.json]

The condenser and reader defaults fit a 2-core CPU in about half an hour; on a GPU pass 0 for all.
The wall time from ingest to the trained reader goes to ``DIR/training-wall.json``, which the
evaluation benchmark copies into its results file (the issue's budget is training + evaluation).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml
from hover_mini import add_hover_mini_option, flow_server, hop_counts, require_hover_mini  # sibling module

from baleen_core.held_out import pack_split, record_split
from baleen_core.retrieval.fusion import FUSIONS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_hover_mini_option(parser)
    parser.add_argument("--work", type=Path, default=None, help="working directory (kept; default: a temp dir)")
    # one round at 2 epochs, not the config's 2 rounds at 1: on 159 held-out training claims it
    # reached the whole chain for 0.786 of them against 0.730, paired +0.057 [−0.000, +0.119], in
    # ~17 minutes less (benchmarks/results/flipr-rounds-held-out.json; a second round alone: −0.013)
    parser.add_argument("--rounds", type=int, default=1, help="FLIPR training rounds (round 0 on BM25's labels, round r on FLIPR r-1's)")
    # 3 hard negatives per query (not 1): the full system's passage F1 +0.032 [+0.006, +0.058] on
    # the 159 held-out training claims (benchmarks/results/flipr-hard-negatives-*.json); then 2
    # epochs (not 1): passage F1 +0.038 [+0.007, +0.073], EM +0.044, Retrieval@100 +0.113 on the
    # seed-1 pack (benchmarks/results/flipr-2-epochs-held-out.json, docs/benchmarks.md)
    parser.add_argument("--epochs", type=int, default=2, help="FLIPR epochs per round")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument(
        "--claim-only-positives", choices=["assigned", "reached"], default="assigned",
        help="training.flipr.claim_only_positives: reached adds every gold passage BM25 reached from the claim alone as a claim-only positive",
    )
    parser.add_argument("--hard-negatives", type=int, default=3, help="hard negatives per FLIPR query (training.flipr.hard_negatives)")
    parser.add_argument("--condenser-hops", type=int, default=1000, help="labelled hops stage 1 and stage 2 train on (CPU budget); 0 = all")
    parser.add_argument("--stage2-hops", type=int, default=None, help="labelled hops stage 2 trains on when not --condenser-hops's; 0 = all")
    # 3 (the config's): 2 epochs lowered stage 2's held-out loss (0.242 against 0.283 after a
    # third), but the engine on the held-out training claims ended further from the gold facts
    # (best final-fact F1 0.570 against 0.581, passage EM 0.104 against 0.146; runs 30b1d29, ba74462)
    parser.add_argument("--stage2-epochs", type=int, default=3)
    # stage1, not the backbone: on the 159 held-out training claims passage F1 +0.024 [+0.002, +0.048],
    # EM +0.031, at no cost (the same steps); a change of seed alone moved F1 by 0.023
    # (benchmarks/results/stage2-from-stage1-held-out.json, training-spread-held-out.json)
    parser.add_argument("--stage2-start", choices=["backbone", "stage1"], default="stage1", help="training.stage2.start: stage 2 from the backbone, or from the trained stage 1")
    parser.add_argument(
        "--reader-claims", type=int, default=500,
        help="training claims besides the held-out ones whose gold facts the reader also reads (CPU budget); 0 = all",
    )
    parser.add_argument("--reader-epochs", type=int, default=2)
    # stage2, not the backbone: on the 159 held-out training claims label accuracy +0.038 [+0.006,
    # +0.075], where a reader seed moved it by 0.000; the same steps
    # (benchmarks/results/reader-from-stage2-held-out.json, reader-spread-2-epochs-held-out.json)
    parser.add_argument("--reader-start", choices=["backbone", "stage2"], default="stage2", help="training.reader.start: the reader's encoder from the backbone, or from the trained stage 2")
    parser.add_argument("--reader-scoring", choices=["cls", "alignment"], default=None, help="reader.scoring, the reader's head (default: the config's, alignment)")
    parser.add_argument(
        "--reader-last-read-facts", type=int, default=None,
        help="reader.last_read_facts: the reader reads the best N facts of each claim's last stage-2 read instead of its evidence (default: the evidence)",
    )
    parser.add_argument(
        "--reader-lexical-coverage", action="store_true",
        help="reader.lexical_coverage: a second expert beside the reader, over which of the claim's words and names its facts never mention",
    )
    parser.add_argument(
        "--evidence-ranker", action=argparse.BooleanOptionalAction, default=True,
        help="training.calibration.evidence_ranker: fit the evidence ranker on the held-out claims' engine run; the last hop's evidence is cut from its scores "
        "(default on: adopted on two held-out packs, docs/benchmarks.md; as in the library; --no-evidence-ranker: stage 2's scores, the defaults before it)",
    )
    parser.add_argument(
        "--evidence-ranker-context", action=argparse.BooleanOptionalAction, default=None,
        help="(default: on with the evidence ranker, adopted on two held-out packs, docs/benchmarks.md) training.calibration.evidence_ranker_context: the ranker sets every hop's context too, the threshold chosen on a second engine run",
    )
    parser.add_argument(
        "--steps-past-edge", type=int, default=None,
        help="training.calibration.steps_past_edge: thresholds run past a calibration grid's edge while that edge wins (default: the library's, 2; 0: the grids as given)",
    )
    parser.add_argument(
        "--reader-augment", default=None, type=lambda text: [kind for kind in text.split(",") if kind],
        help="training.reader.augment: comma-separated reader rewrites of swap, drop, shuffle (default: none)",
    )
    parser.add_argument(
        "--reader-contrast-margin", type=float, default=None,
        help="training.reader.contrast_margin: contrast pairs (same facts, opposite labels) batched together with this margin (default: off)",
    )
    parser.add_argument("--systems", default="baleen,bm25-multihop,single-hop", help="systems the evaluation will run (colbert-full among them trains a second FLIPR)")
    # 4 for stage 1, not 1: on the 159 held-out training claims the full system's
    # passage F1 +0.030 [+0.004, +0.053], EM +0.025 [-0.019, +0.075], for ~13 minutes more stage-1
    # training (benchmarks/results/stage1-negatives-held-out.json, docs/benchmarks.md)
    parser.add_argument(
        "--stage1-negative-passages", type=int, default=4,
        help="hard-negative passages per hop whose sentences stage 1 trains against",
    )
    # 8 for stage 2 (the config's), not 1: stage 2 then reads 9 candidates as in the engine, not the
    # ~5 that one positive and one negative passage hold, a quarter of them gold rather than half.
    # On 159 held-out training claims: passage F1 +0.049 [+0.024, +0.077], EM 0.138 against 0.107
    # (+0.031 [-0.019, +0.082]), for ~11 minutes more training (stage-1 ranking and longer inputs;
    # benchmarks/results/stage2-negatives-held-out.json)
    parser.add_argument(
        "--stage2-negative-passages", type=int, default=8,
        help="hard-negative passages per hop whose sentences compete in stage 1 when stage 2's examples are built "
        "(stage-1 inference, not training steps)",
    )
    # unset (the reference's 32): 8 found more gold from the claim alone (claim-only Retrieval@100
    # +0.063 [+0.019, +0.114], seed-2 pack) but lowered the full system's passage F1 by −0.021
    # [−0.038, −0.003] pooled over both packs (benchmarks/results/flipr-first-hop-k8-*.json)
    parser.add_argument("--k-claim-first-hop", type=int, default=0, help="search.k_claim_first_hop, the claim positions FLIPR counts from the claim alone (0: the reference's retriever.k_claim)")
    parser.add_argument(
        "--fusion", choices=list(FUSIONS), default="none",
        help="search.fusion: 'bm25' fuses FLIPR with BM25 in the FLIPR label rounds (so the condensers train on the fused lists) and in the engine; "
        "'bm25-first-hop' ranks the queries without context with BM25 alone there, 'bm25-fused-first-hop' with the two fused (FLIPR alone with context)",
    )
    parser.add_argument(
        "--fusion-in-label-rounds", action=argparse.BooleanOptionalAction, default=None,
        help="search.fusion_in_label_rounds (default: the library's, on): --no-fusion-in-label-rounds labels with FLIPR alone, so the condensers "
        "train on FLIPR's lists, and fuses only where the trained models run (the calibration, the reader's facts, the evaluation)",
    )
    parser.add_argument(
        "--fusion-hop-counts", type=hop_counts, default=None,
        help="search.fusion_hop_counts, e.g. 4: only claims of these hop counts retrieve under --fusion where the trained models run (needs --no-fusion-in-label-rounds)",
    )
    parser.add_argument(
        "--bm25-negatives", action="store_true",
        help="labels.bm25_negatives: the condensers' label round takes every other hard negative from BM25's ranking of the same query "
        "(the positives and FLIPR stay as they are), so the condensers train against what --fusion bm25 hands them",
    )
    parser.add_argument(
        "--seed", type=int, default=0,
        help="seed of every model's training (training.*.seed): a second run at another seed measures how far training alone moves the results",
    )
    parser.add_argument(
        "--reader-seed", type=int, default=None,
        help="the reader's seed alone (training.reader.seed; default: --seed): how far the reader's own training moves label accuracy",
    )
    parser.add_argument(
        "--cpu-precision", choices=["float32", "bfloat16", "native"], default="native",
        help="training.*.cpu_precision of every model: bfloat16 autocasts the training steps on a CPU; native (the default): bfloat16 "
        "where the CPU computes it natively, else float32 (on 159 held-out training claims: 0.79x float32's training time, the same "
        "quality; docs/benchmarks.md)",
    )
    parser.add_argument("--out", type=Path, default=None, help="results file of the FLIPR rounds as retrievers on the dev claims (step 6)")
    args = parser.parse_args()
    require_hover_mini(args.hover_mini)
    work = args.work or Path(tempfile.mkdtemp(prefix="baleen-bench-training-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("BALEEN_HOME", str(work / "home"))
    from baleen_core.runtime import apply_runtime_defaults

    apply_runtime_defaults()
    from baleen_core.config import BaleenConfig
    from baleen_core.retrieval.recall import gold_recall
    from baleen_core.training.hop_ordering import claims_from_rows
    from baleen_flows.ingest import ingest_flow
    from baleen_flows.training import training_flow
    from baleen_storage import ArtifactStore
    from baleen_storage.catalog import query
    from baleen_storage.indexes import PRODUCER as UNTRAINED_INDEX_PRODUCER, open_bm25, open_searcher

    from baleen_core.condensing import cpu_has_native_bfloat16

    settings = {
        "store_root": str(work / "store"),
        "labels": {"rounds": args.rounds, "round0": "bm25", "depth": 100},
        "training": {
            "flipr": {"epochs": args.epochs, "batch_size": args.batch_size, "hard_negatives": args.hard_negatives, "claim_only_positives": args.claim_only_positives},
            "stage1": {"max_examples": args.condenser_hops or None, "negative_passages": args.stage1_negative_passages, "validation_share": 0.03},
            "stage2": {"max_examples": (args.condenser_hops if args.stage2_hops is None else args.stage2_hops) or None, "epochs": args.stage2_epochs, "negative_passages": args.stage2_negative_passages, "validation_share": 0.1},
            "reader": {"max_examples": args.reader_claims or None, "epochs": args.reader_epochs, "validation_share": 0.03},
        },
        "evaluation": {"systems": args.systems.split(",")},
    }
    native_bfloat16 = cpu_has_native_bfloat16()
    cpu_precision = ("bfloat16" if native_bfloat16 else "float32") if args.cpu_precision == "native" else args.cpu_precision
    # the precision decides the run's length (float32 training took ~2.8x the time of bfloat16 on
    # the measured CPUs, docs/benchmarks.md), so say up front which one this run uses and why
    if args.cpu_precision != "native":
        why = f"--cpu-precision {args.cpu_precision}"
    elif native_bfloat16:
        why = "this CPU computes bfloat16 natively"
    else:
        why = "this CPU has no native bfloat16 (AVX512-BF16 or AMX-BF16)"
    print(f"training precision on the CPU: {cpu_precision} ({why})", flush=True)
    for model in settings["training"].values():
        model["seed"] = args.seed
        if cpu_precision != "float32":
            model["cpu_precision"] = cpu_precision
    if args.reader_seed is not None:
        settings["training"]["reader"]["seed"] = args.reader_seed
    if args.stage2_start != "backbone":
        settings["training"]["stage2"]["start"] = args.stage2_start
    if args.reader_start != "backbone":
        settings["training"]["reader"]["start"] = args.reader_start
    if args.reader_augment:
        settings["training"]["reader"]["augment"] = args.reader_augment
    if args.reader_contrast_margin is not None:
        settings["training"]["reader"]["contrast_margin"] = args.reader_contrast_margin
    if args.evidence_ranker_context and not args.evidence_ranker:
        parser.error("--evidence-ranker-context needs the evidence ranker: drop --no-evidence-ranker")
    # the library turns the ranker's context off with the ranker, and on with it by default
    calibration = {"evidence_ranker": args.evidence_ranker, "evidence_ranker_context": args.evidence_ranker_context, "steps_past_edge": args.steps_past_edge}
    settings["training"]["calibration"] = {key: value for key, value in calibration.items() if value is not None}
    # the engine runs inside training too (over the held-out claims, once per context threshold):
    # stage 1 in bfloat16 where this CPU computes it natively, as benchmarks/evaluation.py runs it
    if native_bfloat16:
        settings["condenser"] = {"stage1_cpu_precision": "bfloat16"}
    if args.bm25_negatives:
        settings["labels"]["bm25_negatives"] = True
    search = {"fusion": args.fusion if args.fusion != "none" else None, "k_claim_first_hop": args.k_claim_first_hop or None, "fusion_in_label_rounds": args.fusion_in_label_rounds,
              "fusion_hop_counts": args.fusion_hop_counts}
    if search := {key: value for key, value in search.items() if value is not None}:
        settings["search"] = search
    reader = {"scoring": args.reader_scoring, "last_read_facts": args.reader_last_read_facts, "lexical_coverage": args.reader_lexical_coverage or None}
    if reader := {key: value for key, value in reader.items() if value is not None}:
        settings["reader"] = reader
    config_path = work / "training.yaml"
    config_path.write_text(yaml.safe_dump(settings, sort_keys=False))
    split = pack_split(args.hover_mini)
    record_split(work, args.hover_mini, split)  # what its dev claims are, for the evaluation and compare_runs.py
    store = ArtifactStore(work / "store")
    started, from_scratch = time.perf_counter(), not store.refs("claims", "claims")
    with flow_server():
        if from_scratch:
            ingest_flow(str(args.hover_mini), str(config_path))
        refs = training_flow(str(config_path))
    wall = time.perf_counter() - started
    # a resumed run's wall time covers only what was left, so the file says which it is
    (work / "training-wall.json").write_text(json.dumps({"seconds": round(wall, 1), "from_scratch": from_scratch}) + "\n")

    config = BaleenConfig.load(config_path)
    claims = store.latest("claims", "claims")
    rows = store.claim_gold(claims, store.get("gold_facts", claims.manifest.run_id, "claims"), store.latest("sentences", "corpus"), "dev")
    dev_gold = claims_from_rows(rows.to_pylist())
    dev = [(c.claim, c.num_hops, {p.pid for p in c.passages}) for c in dev_gold]
    untrained = store.refs("flipr_index", UNTRAINED_INDEX_PRODUCER)  # oldest first; none unless built before
    systems = {"untrained": ("untrained FLIPR", untrained[-1])} if untrained else {}  # results key: (table label, index)
    systems.update({f"flipr-r{r}": (f"FLIPR trained on round-{r} labels", refs[f"flipr-r{r}/index"]) for r in range(config.labels.rounds)})
    print(f"\ndev claims: {len(dev)}; ingest + training flow wall time: {wall:.0f} s (reused steps take ~0 s)\n")
    print("| retriever | R@25 all | R@25 2-hop | R@25 3-hop | R@25 4-hop | R@100 all |")
    print("|---|---|---|---|---|---|")
    retriever_rows: dict[str, list[dict]] = {}
    for key, (name, index) in systems.items():
        searcher, _ = open_searcher(store, config.search, config.retriever.device, index)
        recall = gold_recall(searcher, dev, [25, 100])
        r25, r100 = recall[25], recall[100]
        print(f"| {name} | {r25['all']:.3f} | {r25['2']:.3f} | {r25['3']:.3f} | {r25['4']:.3f} | {r100['all']:.3f} |")
        if args.out and key != "untrained":
            retriever_rows[key] = [retriever_row(searcher, claim, config.evaluation) for claim in dev_gold]
    if args.out:
        bm25 = open_bm25(store, store.latest("passages", "corpus"), store.latest("sentences", "corpus"))  # round 0's labeller, for reference
        retriever_rows = {"bm25": [retriever_row(bm25, claim, config.evaluation) for claim in dev_gold], **retriever_rows}
        budgets = {"label_rounds": config.labels.rounds, "flipr_epochs": config.training.flipr.epochs, "flipr_batch_size": config.training.flipr.batch_size, "depth": config.evaluation.depth}
        names = list(retriever_rows)
        write_retriever_results(args.out, retriever_rows, wall, budgets, list(zip(names[1:], names)), split)

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
    print("\n| model | examples | steps | train s | device | mean loss by epoch | held-out loss first → last |")
    print("|---|---|---|---|---|---|---|")
    trained = [(f"FLIPR round {r}", refs[f"flipr-r{r}/checkpoint"]) for r in range(config.labels.rounds)]
    trained += [(name, refs[name]) for name in ("stage1", "stage2", "reader")]
    for name, ref in trained:
        s = ref.manifest.stats
        val = f"{s.get('first_val_loss'):.3f} → {s.get('last_val_loss'):.3f}" if s.get("first_val_loss") is not None else "—"
        print(f"| {name} | {s['examples']} | {s['steps']} | {s['train_seconds']} | {s['device']} | {s['epoch_mean_loss']} | {val} |")

    newest = max(store.root.glob("reports/*/training/condensers-dev.json"), key=lambda path: path.stat().st_mtime)  # this run's evaluation
    report = json.loads(newest.read_text())
    print("\nOn the dev claims' gold passages, alone and with BM25 distractors (no retrieval; stage 2 reads the best 9 stage-1 facts):\n")
    print("| passages | hops | claims | stage-1 recall@9 | final facts | sentence P | sentence R | sentence F1 | sentence EM | keep-all F1 | reader acc. (gold facts) | reader acc. (final facts) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in report["summary"]:
        print(
            f"| {r['setting']} | {r['hops']} | {r['claims']} | {r['stage1_recall']:.3f} | {r['final_facts']:.2f} | {r['sentence_precision']:.3f} | {r['sentence_recall']:.3f} | "
            f"{r['sentence_f1']:.3f} | {r['sentence_em']:.3f} | {r['all_sentences_f1']:.3f} | {r['reader_correct_gold']:.3f} | {r['reader_correct_final']:.3f} |"
        )
    print(f"\nmajority-label accuracy on dev: {report['summary'][-1]['majority_label_accuracy']:.3f}")


RETRIEVER_METRICS = ("retrieval_at_25", "retrieval_at_100", "gold_recall_at_100", "chain_reached")


def finished_run_config(work: Path):
    """The config of the training benchmark run in ``work`` (exits naming ``work`` when it holds
    none), with that run's Prefect home and the runtime defaults set, as the later benchmarks
    that read its store need them."""
    if not (work / "training.yaml").is_file():
        sys.exit(f"{work} holds no training benchmark run (no training.yaml)")
    os.environ.setdefault("BALEEN_HOME", str(work / "home"))
    from baleen_core.runtime import apply_runtime_defaults

    apply_runtime_defaults()
    from baleen_core.config import BaleenConfig

    return BaleenConfig.load(work / "training.yaml")


def ranked_claims(retrievers: dict, claims, evaluation) -> dict[str, list[dict]]:
    """:func:`retriever_row` of every claim for each named retriever, announcing each."""
    rows = {}
    for name, retriever in retrievers.items():
        print(f"{name}: {len(claims)} claims", flush=True)
        rows[name] = [retriever_row(retriever, claim, evaluation) for claim in claims]
    return rows


def retriever_row(searcher, claim, evaluation) -> dict:
    """One dev claim's retriever metrics (module docstring, step 6); ``evaluation`` is the
    config's evaluation block, whose depth and ``k`` set the engine's per-hop depth."""
    from baleen_core.engine import passages_per_hop
    from baleen_core.metrics import retrieval_at_k
    from baleen_core.training.hop_ordering import order_hops

    gold = [p.pid for p in claim.passages]
    ranked = [pid for pid, _ in searcher.rank(claim.claim, [], 100, set())]
    chain = order_hops(claim, searcher, passages_per_hop(evaluation.depth, claim.num_hops, evaluation.k))  # ranks beyond it count as not reached
    return {
        "uid": claim.uid,
        "num_hops": claim.num_hops,
        "retrieval_at_25": retrieval_at_k(ranked, gold, 25),
        "retrieval_at_100": retrieval_at_k(ranked, gold, 100),
        "gold_recall_at_100": len(set(gold) & set(ranked[:100])) / len(gold),  # the share of its gold passages, not all or none
        "chain_reached": float(all(label.reached for label in chain)),
    }


def write_retriever_results(out: Path, rows: dict[str, list[dict]], wall: float, budgets: dict, pairs: list[tuple[str, str]], split: str) -> None:
    """The results file of step 6, in the shape of every ``benchmarks/results/*.json``: ``rows``
    per retriever (:func:`retriever_row`), and ``pairs`` of (retriever, baseline) compared paired."""
    from datetime import datetime, timezone

    from baleen_core.results import git_commit, machine_description, metric_blocks, paired_results, write_results

    document = {
        "commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "split": split,
        "claims": len(next(iter(rows.values()))),
        "wall_seconds": round(wall, 1),
        "majority_class": None,
        "budgets": budgets,
        "systems": {name: metric_blocks(system_rows, RETRIEVER_METRICS) for name, system_rows in rows.items()},
        "paired": {f"{name} − {baseline}": paired_results(rows[name], rows[baseline], metrics=RETRIEVER_METRICS) for name, baseline in pairs},
    }
    write_results(document, out)
    print(f"\nretriever results: {out}")
    for name in rows:
        block = document["systems"][name]["all"]
        print(f"  {name}: " + ", ".join(f"{m} {block[m]['mean']:.3f} [{block[m]['lo']:.3f}, {block[m]['hi']:.3f}]" for m in RETRIEVER_METRICS))


if __name__ == "__main__":
    main()
