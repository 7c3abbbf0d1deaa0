"""FLIPR distilled from condenser stage 1 against FLIPR trained as the pipeline trains it, on
held-out training claims (issue 50; :mod:`baleen_core.training.distillation`).

It reads a finished ``benchmarks/training.py`` run on a pack from ``benchmarks/held_out_pack.py``
(``--work``; its "dev" claims are held-out training claims) and:

1. scores every round-0 hop label (the positive and its eight BM25 hard negatives) with the run's
   trained stage 1, the teacher (cached in ``WORK/distillation/teacher-r0.json``);
2. trains a fresh FLIPR on the same round-0 labels and the same FLIPR settings as the run's
   ``flipr-r0``, its hard negatives the teacher's hardest and the teacher's distribution over
   each hop's group distilled (KL, ``--weight``), resumable in ``WORK/distillation/<its name>``;
   with ``--teach first-hop`` only the hops without context are distilled (the others train on
   the cross-entropy alone, as before);
3. builds an index in memory for it and for the run's own ``flipr-r0`` (the same settings and
   code path), and ranks the held-out claims with both and with BM25 (claim-only Retrieval@25/@100
   and chain reached, as ``benchmarks/flipr_rounds.py``), compared paired.

The teacher has read the training claims (it trained on them), never the held-out ones.

    python benchmarks/distillation.py --work DIR --out benchmarks/results/NAME.json [--weight 1.0] [--teach all|first-hop]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from training import retriever_row, write_retriever_results  # noqa: E402  (the sibling benchmark's metrics)


def linked_data(store_root: Path, directory: Path) -> Path:
    """The store's ingested corpus and claims as a data directory :mod:`baleen_core.dataset` reads."""
    for artifact in ("claims", "gold_facts", "passages", "sentences"):
        (found,) = glob.glob(str(store_root / "artifacts" / artifact / "*" / "*" / "part-00000.parquet"))
        (directory / f"{artifact}.parquet").symlink_to(found)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="a training benchmark's --work directory (a held-out pack's run)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--weight", type=float, default=1.0, help="weight of the KL term beside the in-batch cross-entropy")
    parser.add_argument("--teach", choices=("all", "first-hop"), default="all", help="which hops the teacher teaches: all, or only those without context")
    args = parser.parse_args()
    if not (args.work / "training.yaml").is_file():
        sys.exit(f"{args.work} holds no training benchmark run (no training.yaml)")
    os.environ.setdefault("BALEEN_HOME", str(args.work / "home"))
    from baleen_core.runtime import apply_runtime_defaults

    apply_runtime_defaults()
    import pyarrow.parquet as pq

    from baleen_core.condensing import SequenceModel
    from baleen_core.config import BaleenConfig
    from baleen_core.dataset import claim_gold, load_claims, load_corpus
    from baleen_core.pipeline import searcher
    from baleen_core.retrieval import Flipr
    from baleen_core.retrieval.bm25 import Bm25Retriever
    from baleen_core.retrieval.building import build_in_memory
    from baleen_core.training.distillation import TeacherHop, teacher_scores, with_teacher
    from baleen_core.training.flipr_trainer import flipr_examples, train_flipr
    from baleen_core.training.loop import history_summary

    started = time.perf_counter()
    config = BaleenConfig.load(args.work / "training.yaml")
    store_root = Path(config.store_root)
    out_dir = args.work / "distillation"
    out_dir.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = linked_data(store_root, Path(tmp))
        claims, corpus = load_claims(data), load_corpus(data, set(), None)
    (labels_file,) = glob.glob(str(store_root / "artifacts" / "hop_labels" / "*" / "producer=labels-r0" / "*.parquet"))
    rows = pq.read_table(labels_file).to_pylist()
    (stage1_dir,) = glob.glob(str(store_root / "artifacts" / "stage1_checkpoint" / "*" / "*"))
    (baseline_dir,) = glob.glob(str(store_root / "artifacts" / "flipr_checkpoint" / "*" / "producer=flipr-r0"))
    claim_text = {uid: row["claim"] for uid, row in claims.rows.items()}

    cache = out_dir / "teacher-r0.json"
    if cache.exists():
        scores = json.loads(cache.read_text())
    else:
        stage1 = SequenceModel.load("stage1", stage1_dir, config.condenser.device).use_cpu_precision(config.condenser.stage1_cpu_precision)
        hops = [TeacherHop(claim_text[r["uid"]], tuple(r["context_facts"]), (r["positive_pid"], *r["negative_pids"])) for r in rows]
        teaching = time.perf_counter()
        scores = teacher_scores(stage1, hops, corpus.passages, config.condenser, on_batch=lambda done: print(f"  teacher: {done}/{len(hops)} hops", end="\r", flush=True))
        cache.write_text(json.dumps({"seconds": round(time.perf_counter() - teaching, 1), "stage1": stage1_dir, "scores": scores}))
        scores = json.loads(cache.read_text())
    teacher_seconds = scores["seconds"]
    positive_first = sum(s[0] >= max(s) for s in scores["scores"]) / len(scores["scores"])
    print(f"teacher: {len(rows)} hops in {teacher_seconds} s; it scores the positive highest in {positive_first:.3f} of them")

    taught = [args.teach == "all" or not r["context_facts"] for r in rows]
    examples = [with_teacher(e, s) if t else e for e, s, t in zip(flipr_examples(rows, claim_text, corpus.texts), scores["scores"], taught, strict=True)]
    print(f"teacher: teaches {sum(taught)} of {len(rows)} hops ({args.teach})")
    distilled_name = f"flipr-r0-distilled-w{args.weight:g}" + ("-first-hop" if args.teach == "first-hop" else "")
    distilled = Flipr.load(config.retriever)
    training = time.perf_counter()
    _, history = train_flipr(distilled, examples, config.training.flipr, out_dir / distilled_name, distillation_weight=args.weight)
    print(f"distilled FLIPR: {history_summary(history)} ({time.perf_counter() - training:.0f} s this run)")
    baseline = Flipr.load(config.retriever.model_copy(update={"checkpoint": Path(baseline_dir)}))
    (steps_file,) = glob.glob(str(store_root / "artifacts" / "training_steps" / "*" / "producer=flipr-r0" / "*.parquet"))
    baseline_steps = pq.read_table(steps_file).to_pylist()

    dev = claim_gold(claims, corpus, claims.uids("dev", None))
    retrievers = {"bm25": Bm25Retriever(corpus.pids, [corpus.texts[p] for p in corpus.pids])}
    builds = {}
    for name, flipr in (("flipr-r0", baseline), (distilled_name, distilled)):
        index, builds[name] = build_in_memory(flipr, corpus.pids, corpus.texts, config.index)
        retrievers[name] = searcher(flipr, index, config)
        print(f"{name}: index in {builds[name]['seconds']} s", flush=True)
    rows_by = {}
    for name, retriever in retrievers.items():
        print(f"{name}: {len(dev)} held-out claims", flush=True)
        rows_by[name] = [retriever_row(retriever, claim, config.evaluation) for claim in dev]
    budgets = {
        "depth": config.evaluation.depth,
        "store": str(store_root),
        "teacher": {"checkpoint": stage1_dir, "hops": len(rows), "seconds": teacher_seconds, "positive_scored_highest": round(positive_first, 3)},
        "distillation_weight": args.weight,
        "taught_hops": sum(taught),
        "training": {"distilled": history_summary(history), "baseline (as the store recorded it)": history_summary(baseline_steps)},
        "index_builds": builds,
    }
    pairs = [(distilled_name, "flipr-r0"), (distilled_name, "bm25"), ("flipr-r0", "bm25")]
    write_retriever_results(args.out, rows_by, time.perf_counter() - started, budgets, pairs, "held-out train")


if __name__ == "__main__":
    main()
