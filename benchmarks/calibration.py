"""The stage-2 threshold calibration in one engine pass against one pass per threshold.

On a training benchmark's store (``benchmarks/training.py --work DIR``, whose models are used as
they are), the full system verifies the calibration's held-out training claims at every
threshold of ``evaluation.stage2_thresholds``:

- **one pass** (``verify_claims_at_thresholds``, what the evaluation flow runs): what the
  thresholds share (hop 1, equal contexts, equal final facts) is done once;
- **separate passes**: one engine run per threshold, as the evaluation flow ran them before.
  ``--separate run`` runs them here; ``--separate store`` (the default) reads the store's own
  calibration runs when they were verified one threshold at a time (no ``thresholds`` in their
  manifest's stats), so a store trained before the change is compared without running them again.

It writes engine seconds for both, the speed-up, and whether every threshold's final facts and
labels agree between the two, to ``--out``. Nothing is published to the store.

    python benchmarks/calibration.py --work DIR --out benchmarks/results/calibration-one-pass.json [--separate run|store]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="the training benchmark's --work directory")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--separate", choices=("store", "run"), default="store", help="where the one-threshold-at-a-time runs come from")
    args = parser.parse_args()
    config_path = args.work / "training.yaml"
    if not config_path.is_file():
        sys.exit(f"{args.work} holds no training benchmark run (no training.yaml)")
    os.environ.setdefault("BALEEN_HOME", str(args.work / "home"))
    from baleen_core.runtime import apply_runtime_defaults

    apply_runtime_defaults()
    from baleen_core.config import BaleenConfig
    from baleen_core.results import git_commit, machine_description
    from baleen_flows.evaluation import trained_models
    from baleen_storage import ArtifactStore
    from baleen_storage.lineage import passages_for_claims
    from baleen_tasks.condensing import held_out_claims
    from baleen_tasks.evaluation import eval_producer, evaluation_claims, run_engine

    config = BaleenConfig.load(config_path)
    store = ArtifactStore(config.store_root)
    claims = store.latest("claims", "claims")
    passages = passages_for_claims(store, claims, None)
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")
    models = trained_models(store, None, passages, claims)
    held = held_out_claims.fn(str(store.root), models["stage2"], config.evaluation.calibration_claims)
    rows = evaluation_claims(store, claims, config.evaluation.split, None, held)
    thresholds = list(config.evaluation.stage2_thresholds)

    def outcome(verdicts) -> dict[str, tuple]:
        return {v.uid: ([(s.pid, s.sid) for s, _ in v.facts], v.prob_supported > 0.5, v.prob_supported) for v in verdicts}

    started = time.perf_counter()
    together, stats = run_engine(store, "baleen", rows, thresholds, passages, sentences, models, config, f"one pass · {len(thresholds)} thresholds")
    one_pass = {"engine_seconds": stats["seconds"], "wall_seconds": round(time.perf_counter() - started, 1)}
    one = [outcome(verdicts) for verdicts in together]

    separate: list[dict[str, tuple]] = []
    seconds = []
    for threshold in thresholds:
        if args.separate == "run":
            verdicts, run_stats = run_engine(store, "baleen", rows, [threshold], passages, sentences, models, config, f"threshold {threshold:g}")
            separate.append(outcome(verdicts[0]))
            seconds.append(run_stats["seconds"])
            continue
        earlier = [ref for ref in store.refs("predictions", eval_producer("baleen", threshold)) if "thresholds" not in ref.manifest.stats]
        if not earlier:
            sys.exit(f"the store has no one-threshold calibration run at {threshold:g}: use --separate run")
        ref = earlier[-1]
        table = store.read_table(ref).to_pylist()
        separate.append({r["uid"]: (list(zip(r["fact_pids"], r["fact_sids"], strict=True)), r["label"] == "SUPPORTED", r["prob_supported"]) for r in table})
        seconds.append(ref.manifest.stats["seconds"])

    agreement = []
    for threshold, a, b in zip(thresholds, one, separate, strict=True):
        if a.keys() != b.keys():
            sys.exit(f"threshold {threshold:g}: the separate runs verified other claims than the held-out ones chosen now")
        agreement.append({
            "threshold": threshold,
            "same_final_facts": sum(a[u][0] == b[u][0] for u in a),
            "same_label": sum(a[u][1] == b[u][1] for u in a),
            "max_abs_prob_difference": max(abs(a[u][2] - b[u][2]) for u in a),
        })
    document = {
        "commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "split": "held-out train",
        "claims": len(rows),
        "thresholds": thresholds,
        "one_pass": one_pass,
        "separate": {"source": args.separate, "engine_seconds": round(sum(seconds), 1), "per_threshold": seconds},
        "speedup": round(sum(seconds) / max(one_pass["engine_seconds"], 1e-9), 2),
        "agreement": agreement,
        "note": "one measurement of each (no interval); engine seconds exclude loading the models",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(json.dumps({k: document[k] for k in ("claims", "one_pass", "separate", "speedup")}))
    for row in agreement:
        print(f"  threshold {row['threshold']:g}: {row['same_final_facts']}/{len(rows)} same final facts, {row['same_label']}/{len(rows)} same label, max |ΔP| {row['max_abs_prob_difference']:.1e}")
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
