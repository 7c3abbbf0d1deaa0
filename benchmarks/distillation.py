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
   the cross-entropy alone, as before), and with ``--teach none`` none is: the pipeline's own
   training through this script's code path, the control;
3. builds an index in memory for it and for the run's own ``flipr-r0`` (the same settings and
   code path), and ranks the held-out claims with both and with BM25 (claim-only Retrieval@25/@100
   and chain reached, as ``benchmarks/flipr_rounds.py``), compared paired (each distilled one
   also with the control, when ranked); each retriever's per-claim rows go to
   ``WORK/distillation/rows-<name>.json``, and a later run reuses them instead of ranking again.

The teacher has read the training claims (it trained on them), never the held-out ones.

    python benchmarks/distillation.py --work DIR --out benchmarks/results/NAME.json [--weight 1.0] [--teach all first-hop none]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from training import finished_run_config, ranked_claims, write_retriever_results  # noqa: E402  (the sibling benchmark's metrics)


def linked_data(store, directory: Path) -> Path:
    """The store's newest ingested corpus and claims as a data directory :mod:`baleen_core.dataset` reads."""
    claims, passages = store.latest("claims", "claims"), store.latest("passages", "corpus")
    refs = {
        "claims": claims,
        "gold_facts": store.get("gold_facts", claims.manifest.run_id, "claims"),
        "passages": passages,
        "sentences": store.get("sentences", passages.manifest.run_id, "corpus"),
    }
    for artifact, ref in refs.items():
        (single,) = ref.files
        (directory / f"{artifact}.parquet").symlink_to(single)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="a training benchmark's --work directory (a held-out pack's run)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--weight", type=float, default=1.0, help="weight of the KL term beside the in-batch cross-entropy")
    parser.add_argument(
        "--teach", nargs="+", choices=("all", "first-hop", "none"), default=["all"],
        help="FLIPRs to train and rank, by the hops the teacher teaches: all, only those without context, none (the control)",
    )
    parser.add_argument("--seed", type=int, default=None, help="FLIPR's training seed (order, dropout), when not the run's: names get -s<seed>")
    args = parser.parse_args()
    started = time.perf_counter()
    config = finished_run_config(args.work)
    from baleen_core.condensing import SequenceModel
    from baleen_core.dataset import claim_gold, load_claims, load_corpus
    from baleen_core.pipeline import searcher
    from baleen_core.retrieval import Flipr
    from baleen_core.retrieval.bm25 import Bm25Retriever
    from baleen_core.retrieval.building import build_in_memory
    from baleen_core.training.distillation import TeacherHop, teacher_scores, with_teacher
    from baleen_core.training.flipr_trainer import flipr_examples, train_flipr
    from baleen_core.training.loop import history_summary
    from baleen_storage import ArtifactStore

    store = ArtifactStore(config.store_root)
    out_dir = args.work / "distillation"
    out_dir.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = linked_data(store, Path(tmp))
        claims, corpus = load_claims(data), load_corpus(data, set(), None)
    rows = store.read_table(store.latest("hop_labels", "labels-r0")).to_pylist()
    stage1_dir = str(store.latest("stage1_checkpoint").path)
    baseline_dir = store.latest("flipr_checkpoint", "flipr-r0").path
    claim_text = {uid: row["claim"] for uid, row in claims.rows.items()}

    cache = out_dir / "teacher-r0.json"
    if cache.exists():
        scores = json.loads(cache.read_text())
    else:
        stage1 = SequenceModel.load("stage1", stage1_dir, config.condenser.device).use_cpu_precision(config.condenser.stage1_cpu_precision)
        hops = [TeacherHop(claim_text[r["uid"]], tuple(r["context_facts"]), (r["positive_pid"], *r["negative_pids"])) for r in rows]
        teaching = time.perf_counter()
        scores = teacher_scores(stage1, hops, corpus.passages, config.condenser, on_batch=lambda done: print(f"  teacher: {done}/{len(hops)} hops", end="\r", flush=True))
        scores = {"seconds": round(time.perf_counter() - teaching, 1), "stage1": stage1_dir, "scores": scores}
        cache.write_text(json.dumps(scores))
    teacher_seconds = scores["seconds"]
    positive_first = sum(s[0] >= max(s) for s in scores["scores"]) / len(scores["scores"])
    print(f"teacher: {len(rows)} hops in {teacher_seconds} s; it scores the positive highest in {positive_first:.3f} of them")

    names = {"all": f"flipr-r0-distilled-w{args.weight:g}", "first-hop": f"flipr-r0-distilled-w{args.weight:g}-first-hop", "none": "flipr-r0-retrained"}
    flipr_training = config.training.flipr
    if args.seed is not None and args.seed != flipr_training.seed:
        flipr_training = flipr_training.model_copy(update={"seed": args.seed})
        names = {mode: f"{name}-s{args.seed}" for mode, name in names.items()}
    control = "flipr-r0-retrained"  # the first seed's control: what every other FLIPR of the script pairs with
    examples = flipr_examples(rows, claim_text, corpus.texts)
    trained, histories, taught_hops = {}, {}, {}
    for mode in args.teach:
        taught = [mode == "all" or (mode == "first-hop" and not r["context_facts"]) for r in rows]
        name, taught_hops[names[mode]] = names[mode], sum(taught)
        print(f"{name}: the teacher teaches {sum(taught)} of {len(rows)} hops", flush=True)
        trained[name] = Flipr.load(config.retriever)
        training = time.perf_counter()
        taught_examples = [with_teacher(e, s) if t else e for e, s, t in zip(examples, scores["scores"], taught, strict=True)]
        _, history = train_flipr(trained[name], taught_examples, flipr_training, out_dir / name, distillation_weight=args.weight)
        histories[name] = history_summary(history)
        print(f"{name}: {histories[name]} ({time.perf_counter() - training:.0f} s this run)", flush=True)
    histories["flipr-r0 (as the store recorded it)"] = history_summary(store.read_table(store.latest("training_steps", "flipr-r0")).to_pylist())

    # rows an earlier run of this script saved are reused (index builds and searches are
    # deterministic); the store's FLIPR and BM25 are ranked only when none are saved
    rows_by = {path.name.removeprefix("rows-").removesuffix(".json"): json.loads(path.read_text()) for path in sorted(out_dir.glob("rows-*.json"))}
    rows_by = {name: claim_rows for name, claim_rows in rows_by.items() if name not in trained}
    dev = claim_gold(claims, corpus, claims.uids("dev", None))
    if any([r["uid"] for r in claim_rows] != [c.uid for c in dev] for claim_rows in rows_by.values()):
        sys.exit(f"the rows saved in {out_dir} are of other claims; remove them to rank every retriever again")
    retrievers = {} if "bm25" in rows_by else {"bm25": Bm25Retriever(corpus.pids, [corpus.texts[p] for p in corpus.pids])}
    if "flipr-r0" not in rows_by:
        trained = {"flipr-r0": Flipr.load(config.retriever.model_copy(update={"checkpoint": baseline_dir})), **trained}
    builds = {}
    for name, flipr in trained.items():
        index, builds[name] = build_in_memory(flipr, corpus.pids, corpus.texts, config.index)
        retrievers[name] = searcher(flipr, index, config)
        print(f"{name}: index in {builds[name]['seconds']} s", flush=True)
    ranked = ranked_claims(retrievers, dev, config.evaluation)
    for name, claim_rows in ranked.items():  # per claim, for pairing with later runs of this script
        (out_dir / f"rows-{name}.json").write_text(json.dumps(claim_rows))
    rows_by.update(ranked)
    budgets = {
        "depth": config.evaluation.depth,
        "store": str(store.root),
        "teacher": {"checkpoint": stage1_dir, "hops": len(rows), "seconds": teacher_seconds, "positive_scored_highest": round(positive_first, 3)},
        "distillation_weight": args.weight,
        "flipr_seed": flipr_training.seed,
        "taught_hops": taught_hops,
        "training": histories,
        "index_builds": builds,
        "reused_rows": sorted(set(rows_by) - set(ranked)),
    }
    new = [names[mode] for mode in args.teach]
    pairs = [(name, base) for name in new for base in ("flipr-r0", "bm25")] + [(name, control) for name in new if name != control and control in rows_by]
    write_retriever_results(args.out, rows_by, time.perf_counter() - started, budgets, pairs + [("flipr-r0", "bm25")], "held-out train")


if __name__ == "__main__":
    main()
