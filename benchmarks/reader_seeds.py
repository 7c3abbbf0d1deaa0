"""Readers of one training that differ only by seed, each alone and averaged (issue 50).

Each ``--work`` is a ``benchmarks/training.py`` work folder of the same training with another
``--reader-seed`` (hard-linked copies of one store, everything before the reader reused), each
evaluated once (``benchmarks/evaluation.py --systems baleen``) on the same claims. The engine's
final facts must then be the same in every folder, which this checks (passage and sentence metrics
identical claim for claim), so the readers read the same facts and differ only by their own
training. Label accuracy of each reader (``seed-N``, in ``--work`` order), of the mean of their
P(SUPPORTED) (``ensemble``: SUPPORTED above 0.5), paired against each reader and against the mean
of the single readers' accuracy per claim (``mean-single``), by hop count.

    python benchmarks/reader_seeds.py --work DIR_SEED0 --work DIR_SEED1 --work DIR_SEED2 --out benchmarks/results/NAME.json
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hover_mini import add_split_option, work_split  # sibling module

#: What the engine decides before the reader reads: equal in every folder when only the reader's seed differs.
ENGINE_METRICS = ("passage_f1", "passage_em", "sentence_f1", "sentence_em", "retrieval_at_depth")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, action="append", required=True, help="an evaluated work folder, one per reader seed (two or more)")
    add_split_option(parser)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if len(args.work) < 2:
        parser.error("give two or more --work folders, one per reader seed")
    os.environ.setdefault("BALEEN_HOME", str(args.work[0] / "home"))
    from baleen_core.config import BaleenConfig
    from baleen_core.results import paired_results, results_document, results_table, write_results
    from baleen_storage import ArtifactStore

    runs = []
    for work in args.work:
        store = ArtifactStore(work / "store")
        if not store.refs("claim_metrics", "eval-baleen"):
            sys.exit(f"{work} holds no evaluation of baleen: run benchmarks/evaluation.py --work {work} --systems baleen first")
        metrics_ref = store.latest("claim_metrics", "eval-baleen")
        predictions = store.read_table(store.get("predictions", metrics_ref.manifest.run_id, "eval-baleen"), ["uid", "prob_supported"]).to_pylist()
        seed = BaleenConfig.load(work / "training.yaml").training.reader.seed  # the seed the folder's training recorded
        runs.append((f"seed-{seed}", {r["uid"]: r for r in store.read_table(metrics_ref).to_pylist()}, {r["uid"]: r["prob_supported"] for r in predictions}))
    first = runs[0][1]
    for name, metrics, _ in runs[1:]:
        if set(metrics) != set(first):
            sys.exit(f"{name}'s evaluation verified other claims than {runs[0][0]}'s: evaluate every folder on the same pack")
        differing = [(uid, key) for uid in first for key in ENGINE_METRICS if metrics[uid].get(key) != first[uid].get(key)]
        if differing:
            sys.exit(f"{name}'s engine kept other facts than {runs[0][0]}'s ({len(differing)} claim metrics differ, e.g. {differing[0]}): only the reader's seed may differ")

    uids = sorted(first)
    rows: dict[str, list[dict]] = {"ensemble": []}
    for uid in uids:
        mean_p = sum(probs[uid] for _, _, probs in runs) / len(runs)
        label = "SUPPORTED" if mean_p > 0.5 else "NOT_SUPPORTED"
        # the HoVer score also reads the evidence's ranking, which the claim rows do not carry: label accuracy only
        rows["ensemble"].append({**first[uid], "label": label, "label_accuracy": float(label == first[uid]["gold_label"]), "hover_score": None})
    for name, metrics, _ in runs:
        rows[name] = [metrics[uid] for uid in uids]
    mean_single = [{**first[uid], "label_accuracy": sum(metrics[uid]["label_accuracy"] for _, metrics, _ in runs) / len(runs)} for uid in uids]
    document = results_document(rows, {}, work_split(args.work[0], args.split), None, main="ensemble")
    document["paired"]["ensemble-mean-single"] = paired_results(rows["ensemble"], mean_single, metrics=["label_accuracy"])
    document["works"] = [str(work) for work in args.work]
    write_results(document, args.out)
    print(results_table(document, ["label_accuracy"]))
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
