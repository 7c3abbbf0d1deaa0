"""FLIPR trained other ways than the pipeline's, against FLIPR as the pipeline trains it, on
held-out training claims (issue 50).

It reads a finished ``benchmarks/training.py`` run on a pack from ``benchmarks/held_out_pack.py``
(``--work``; its "dev" claims are held-out training claims), trains fresh FLIPRs on the run's
round-0 labels with the run's FLIPR settings, changed as asked, each resumable in
``WORK/distillation/<its name>``:

- ``--teach``: which hops condenser stage 1, the run's trained stage 1, teaches
  (:mod:`baleen_core.training.distillation`: its hardest negatives and its distribution over each
  hop's group, KL at ``--weight``): ``all``, ``first-hop`` (those without context) or ``none``
  (the pipeline's own training through this script's code path, the control). The teacher's
  scores of every round-0 hop are cached in ``WORK/distillation/teacher-r0.json``;
- ``--claim-only-positives reached``: every gold passage BM25 reached from the claim alone is a
  claim-only positive (``training.flipr.claim_only_positives``);
- ``--corpus-queries N``: N inverse-cloze queries from the corpus added to the labelled hops
  (:mod:`baleen_core.training.corpus_queries`: a sentence of a passage drawn at the FLIPR's seed,
  BM25's top other passages its hard negatives);
- ``--seeds``: one FLIPR per seed (batch order, dropout).

Each FLIPR, and the run's own ``flipr-r0``, gets an index built in memory with the same settings
and code path, and ranks the held-out claims, as does BM25 (claim-only Retrieval@25/@100, the share
of gold in the claim-only top 100, and chain reached, as ``benchmarks/flipr_rounds.py``). Each
retriever's per-claim rows go to ``WORK/distillation/rows-<name>.json``; a later run reuses them
instead of ranking again, so FLIPRs trained by several runs are compared in one file. Every new
FLIPR is paired with the store's, BM25 and the seed-0 control; ``--arms NAME=A,B ...`` adds arms
whose per-claim measures are the means over their retrievers, each paired with the first arm.

The teacher has read the training claims (it trained on them), never the held-out ones.

    python benchmarks/flipr_variants.py --work DIR --out benchmarks/results/NAME.json [--teach none all first-hop]
        [--claim-only-positives reached] [--seeds 0 1] [--weight 1.0] [--arms baseline=flipr-r0,flipr-r0-retrained-s1 new=...]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hover_mini import add_split_option, work_split  # noqa: E402  (sibling module)
from training import RETRIEVER_METRICS, finished_run_config, ranked_claims, write_retriever_results  # noqa: E402  (the sibling benchmark's metrics)

CONTROL = "flipr-r0-retrained"  # the run's recipe at its own seed, trained here: what every new FLIPR also pairs with


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


def variant_name(teach: str, claim_only_positives: str, seed: int, run_seed: int, weight: float, corpus_queries: int = 0) -> str:
    """``flipr-r0-retrained`` (the control), ``flipr-r0-distilled-w1[-first-hop]``,
    ``flipr-r0-claim-only``, ``flipr-r0-corpus<N>``, with ``-s<seed>`` when the seed is not the run's."""
    name = {"none": CONTROL, "all": f"flipr-r0-distilled-w{weight:g}", "first-hop": f"flipr-r0-distilled-w{weight:g}-first-hop"}[teach]
    if claim_only_positives == "reached":
        name = "flipr-r0-claim-only" if teach == "none" else f"{name}-claim-only"
    if corpus_queries:
        name = f"flipr-r0-corpus{corpus_queries}" if name == CONTROL else f"{name}-corpus{corpus_queries}"
    return name if seed == run_seed else f"{name}-s{seed}"


def arm_rows(members: list[list[dict]]) -> list[dict]:
    """Per claim, the mean of each measure over an arm's retrievers (rows of the same claims, in order)."""
    return [
        {"uid": rows[0]["uid"], "num_hops": rows[0]["num_hops"], **{m: sum(r[m] for r in rows) / len(rows) for m in RETRIEVER_METRICS}}
        for rows in zip(*members, strict=True)
    ]


def teacher_cache(out_dir: Path, store, config, rows: list[dict], claim_text: dict, corpus) -> dict:
    """Stage 1's scores of every round-0 hop's (positive, *negatives), computed once per work directory."""
    from baleen_core.condensing import SequenceModel
    from baleen_core.training.distillation import TeacherHop, teacher_scores

    cache = out_dir / "teacher-r0.json"
    if cache.exists():
        return json.loads(cache.read_text())
    stage1_dir = str(store.latest("stage1_checkpoint").path)
    stage1 = SequenceModel.load("stage1", stage1_dir, config.condenser.device).use_cpu_precision(config.condenser.stage1_cpu_precision)
    hops = [TeacherHop(claim_text[r["uid"]], tuple(r["context_facts"]), (r["positive_pid"], *r["negative_pids"])) for r in rows]
    started = time.perf_counter()
    scores = teacher_scores(stage1, hops, corpus.passages, config.condenser, on_batch=lambda done: print(f"  teacher: {done}/{len(hops)} hops", end="\r", flush=True))
    teacher = {"seconds": round(time.perf_counter() - started, 1), "stage1": stage1_dir, "scores": scores}
    cache.write_text(json.dumps(teacher))
    return teacher


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="a training benchmark's --work directory (a held-out pack's run)")
    parser.add_argument("--out", type=Path, required=True)
    add_split_option(parser)
    parser.add_argument(
        "--teach", nargs="*", choices=("all", "first-hop", "none"), default=["none"],
        help="FLIPRs to train, by the hops stage 1 teaches: all, only those without context, none (the control); none given: train nothing",
    )
    parser.add_argument("--claim-only-positives", choices=("assigned", "reached"), default="assigned", help="training.flipr.claim_only_positives of every FLIPR trained")
    parser.add_argument("--corpus-queries", type=int, default=0, metavar="N", help="inverse-cloze queries from the corpus added to every FLIPR's examples")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="FLIPR training seeds (default: the run's)")
    parser.add_argument("--weight", type=float, default=1.0, help="weight of the KL term beside the in-batch cross-entropy")
    parser.add_argument("--arms", nargs="*", default=[], metavar="NAME=RETRIEVER,RETRIEVER", help="arms averaged over their retrievers, each paired with the first")
    args = parser.parse_args()
    split = work_split(args.work, args.split)  # before any work: a missing --split loses nothing
    arms = {name: members.split(",") for name, _, members in (arm.partition("=") for arm in args.arms)}
    distilled = [mode for mode in args.teach if mode != "none"]
    if distilled and (args.claim_only_positives == "reached" or args.corpus_queries):
        sys.exit("--teach all/first-hop combines with neither --claim-only-positives reached nor --corpus-queries: the teacher scored the labelled hops only")
    if args.corpus_queries < 0:
        sys.exit("--corpus-queries takes a count ≥ 0")
    started = time.perf_counter()
    config = finished_run_config(args.work)
    from baleen_core.dataset import claim_gold, load_claims, load_corpus
    from baleen_core.pipeline import searcher
    from baleen_core.retrieval import Flipr
    from baleen_core.retrieval.bm25 import Bm25Retriever
    from baleen_core.retrieval.building import build_in_memory
    from baleen_core.training.corpus_queries import corpus_query_examples
    from baleen_core.training.distillation import with_teacher
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
    claim_text = {uid: row["claim"] for uid, row in claims.rows.items()}
    run_training = config.training.flipr.model_copy(update={"claim_only_positives": args.claim_only_positives})  # the FLIPRs trained here (seeds aside)
    budgets = {"depth": config.evaluation.depth, "store": str(store.root), "flipr": run_training.model_dump(mode="json"), "corpus_queries": args.corpus_queries}
    bm25 = functools.cache(lambda: Bm25Retriever(corpus.pids, [corpus.texts[p] for p in corpus.pids]))  # built once, if needed

    teacher = None
    if distilled:
        teacher = teacher_cache(out_dir, store, config, rows, claim_text, corpus)
        positive_first = sum(s[0] >= max(s) for s in teacher["scores"]) / len(teacher["scores"])
        print(f"teacher: {len(rows)} hops in {teacher['seconds']} s; it scores the positive highest in {positive_first:.3f} of them")
        budgets |= {"teacher": {"checkpoint": teacher["stage1"], "hops": len(rows), "seconds": teacher["seconds"], "positive_scored_highest": round(positive_first, 3)}, "distillation_weight": args.weight}

    examples = flipr_examples(rows, claim_text, corpus.texts, claim_only_positives=run_training.claim_only_positives)
    trained, histories = {}, {}
    for seed in args.seeds or [run_training.seed]:
        for mode in args.teach:
            name = variant_name(mode, args.claim_only_positives, seed, run_training.seed, args.weight, args.corpus_queries)
            taught = examples
            if args.corpus_queries:  # drawn at the FLIPR's seed, so that each seed reads other passages
                taught = [*examples, *corpus_query_examples(corpus.passages, corpus.texts, bm25(), args.corpus_queries, run_training.hard_negatives, seed)]
            if mode != "none":  # one example per labelled hop, in the teacher's order
                taught = [with_teacher(e, s) if mode == "all" or not e.context else e for e, s in zip(examples, teacher["scores"], strict=True)]
            print(f"{name}: {len(taught)} examples, {sum(bool(e.teacher) for e in taught)} taught", flush=True)
            trained[name] = Flipr.load(config.retriever)
            training = time.perf_counter()
            _, history = train_flipr(trained[name], taught, run_training.model_copy(update={"seed": seed}), out_dir / name, distillation_weight=args.weight)
            histories[name] = {**history_summary(history), "examples": len(taught), "seconds_this_run": round(time.perf_counter() - training, 1)}
            print(f"{name}: {histories[name]}", flush=True)
    histories["flipr-r0 (as the store recorded it)"] = history_summary(store.read_table(store.latest("training_steps", "flipr-r0")).to_pylist())

    # rows an earlier run of this script saved are reused (index builds and searches are
    # deterministic); the store's FLIPR and BM25 are ranked only when none are saved
    rows_by = {path.name.removeprefix("rows-").removesuffix(".json"): json.loads(path.read_text()) for path in sorted(out_dir.glob("rows-*.json"))}
    rows_by = {name: claim_rows for name, claim_rows in rows_by.items() if name not in trained}
    dev = claim_gold(claims, corpus, claims.uids("dev", None))
    if any([r["uid"] for r in claim_rows] != [c.uid for c in dev] or set(RETRIEVER_METRICS) - set(claim_rows[0]) for claim_rows in rows_by.values()):
        sys.exit(f"the rows saved in {out_dir} are of other claims or measures; remove them to rank every retriever again")
    retrievers = {} if "bm25" in rows_by else {"bm25": bm25()}
    if "flipr-r0" not in rows_by:
        trained = {"flipr-r0": Flipr.load(config.retriever.model_copy(update={"checkpoint": store.latest("flipr_checkpoint", "flipr-r0").path})), **trained}
    builds, doc_tokens = {}, None
    for name, flipr in trained.items():
        if doc_tokens is None:  # once: every FLIPR here reads with the run's backbone tokenizer
            doc_tokens = flipr.tokenizer.doc_tokens([corpus.texts[pid] for pid in corpus.pids])
        index, builds[name] = build_in_memory(flipr, corpus.pids, corpus.texts, config.index, doc_tokens)
        retrievers[name] = searcher(flipr, index, config)
        print(f"{name}: index in {builds[name]['seconds']} s", flush=True)
    ranked = ranked_claims(retrievers, dev, config.evaluation)
    for name, claim_rows in ranked.items():  # per claim, for pairing with later runs of this script
        (out_dir / f"rows-{name}.json").write_text(json.dumps(claim_rows))
    rows_by.update(ranked)

    missing = {m for members in arms.values() for m in members} - set(rows_by)
    if missing:
        sys.exit(f"--arms names retrievers with no rows in {out_dir}: {', '.join(sorted(missing))}")
    new = [name for name in trained if name != "flipr-r0"]
    pairs = [(name, base) for name in new for base in ("flipr-r0", "bm25", CONTROL) if name != base and base in rows_by] + [("flipr-r0", "bm25")]
    for name, members in arms.items():
        rows_by[name] = arm_rows([rows_by[m] for m in members])
    if arms:
        first, *others = arms
        pairs += [(name, first) for name in others] + [(name, "bm25") for name in arms]
    budgets |= {"training": histories, "index_builds": builds, "reused_rows": sorted(set(rows_by) - set(ranked) - set(arms)), "arms": arms}
    write_retriever_results(args.out, rows_by, time.perf_counter() - started, budgets, pairs, split)


if __name__ == "__main__":
    main()
