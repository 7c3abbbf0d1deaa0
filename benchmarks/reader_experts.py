"""The reader and its lexical coverage expert, each alone and combined, on one evaluation (issue 50).

A reader trained with ``reader.lexical_coverage`` gives the engine one P(SUPPORTED), the two
experts' odds combined (``baleen_core.condensing.lexical.combine``). This script splits them
again for the newest evaluation of the full system in a training benchmark's work folder: the
lexical expert's odds are computed from each claim and the facts its reader read (the predictions'
final facts), and the reader's own odds are the combined ones less the expert's plus the prior,
exactly. Label accuracy of each, paired against the combination, by hop count (the HoVer score
only for the combination, whose rows the evaluation scored).

With ``--reader-alone DIR``, the same claims' predictions of another work folder (the same
training without the expert) must equal the reader's own P(SUPPORTED) recovered here: the check
that the two runs' readers are one and the same model.

    python benchmarks/reader_experts.py --work DIR [--reader-alone DIR] --out benchmarks/results/NAME.json
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from hover_mini import add_split_option, work_split  # sibling module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="a benchmarks/training.py work folder, evaluated, whose reader has the expert")
    parser.add_argument("--reader-alone", type=Path, default=None, help="a work folder of the same training without the expert, evaluated on the same claims")
    add_split_option(parser)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    os.environ.setdefault("BALEEN_HOME", str(args.work / "home"))
    from baleen_core.condensing import SequenceModel
    from baleen_core.condensing.lexical import logit
    from baleen_core.results import results_document, results_table, write_results
    from baleen_storage import ArtifactStore
    from baleen_tasks.condensing import passages_by_pid

    split = work_split(args.work, args.split)
    store = ArtifactStore(args.work / "store")
    metrics_ref = store.latest("claim_metrics", "eval-baleen")
    predictions_ref = store.get("predictions", metrics_ref.manifest.run_id, "eval-baleen")
    reader_ref = store.find("reader_checkpoint", None, predictions_ref.manifest.inputs["reader"])
    if reader_ref is None:
        sys.exit(f"{args.work}: the reader these predictions name is not in the store")
    expert = SequenceModel.load("reader", reader_ref.path, "cpu").lexical
    if expert is None:
        sys.exit(f"{args.work}: its reader was trained without reader.lexical_coverage")
    predictions = {r["uid"]: r for r in store.read_table(predictions_ref).to_pylist() if r["system"] == "baleen"}
    metrics = [r for r in store.read_table(metrics_ref).to_pylist() if r["system"] == "baleen"]
    passages = passages_by_pid(store, store.latest("passages", "corpus"), store.latest("sentences", "corpus"), {pid for r in predictions.values() for pid in r["fact_pids"]})
    fact_text = {(s.pid, s.sid): s.fact for p in passages.values() for s in p.sentences}
    claim_text = {r["uid"]: r["claim"] for r in store.read_table(store.latest("claims", "claims")).to_pylist()}

    rows: dict[str, list[dict]] = {"combined": [], "reader": [], "lexical": []}
    reader_prob = {}
    for m in metrics:
        p = predictions[m["uid"]]
        facts = [fact_text[(pid, sid)] for pid, sid in zip(p["fact_pids"], p["fact_sids"], strict=True)]
        lexical = expert.log_odds(claim_text[m["uid"]], facts)
        reader = 1 / (1 + math.exp(-(logit(p["prob_supported"]) - lexical + expert.prior_log_odds)))
        reader_prob[m["uid"]] = reader
        for name, supported in (("combined", p["prob_supported"] > 0.5), ("reader", reader > 0.5), ("lexical", lexical > 0)):
            label = "SUPPORTED" if supported else "NOT_SUPPORTED"
            # the HoVer score also reads the evidence's ranking, which the claim rows do not carry: label accuracy only
            rows[name].append({**m, "label": label, "label_accuracy": float(label == m["gold_label"]), "hover_score": m["hover_score"] if name == "combined" else None})
    document = results_document(rows, {}, split, None, main="combined")
    document["expert"] = expert.summary()
    if args.reader_alone is not None:
        other = ArtifactStore(args.reader_alone / "store")
        theirs = {r["uid"]: r["prob_supported"] for r in other.read_table(other.latest("predictions", "eval-baleen")).to_pylist() if r["system"] == "baleen"}
        gaps = [abs(reader_prob[uid] - theirs[uid]) for uid in reader_prob if uid in theirs]
        document["reader_alone_check"] = {"work": str(args.reader_alone), "claims": len(gaps), "max_abs_difference": max(gaps, default=None), "same_label": sum((reader_prob[u] > 0.5) == (theirs[u] > 0.5) for u in reader_prob if u in theirs)}
        print(f"the reader's own P(SUPPORTED) against {args.reader_alone}'s: {len(gaps)} claims, largest difference {max(gaps, default=0):.2e}")
    write_results(document, args.out)
    print(results_table(document, ["label_accuracy"]))
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
