"""The calibration's engine runs with one hop memo across them and without any: time and choices.

The calibration runs the engine over the held-out training claims once per context threshold: the
grid in one pass, each threshold past its edge alone, then the evidence ranker's grid and its
steps past the edge. ``HopMemo`` (``baleen_core/engine.py``) lets each run take the (claim,
context) hops an earlier one computed. This benchmark replays, on a ``benchmarks/training.py``
work directory, the calls its training made (the thresholds of each pass from the store's
``reader-facts-t*`` and ``reader-facts-ranked-t*`` runs of the newest calibration: the grid, then
each other threshold alone, in the order they were made), once with one memo across all of them
and once without, on the same models, and checks that every claim's final facts at every
threshold are the same both ways and the same as the training's own runs.

    python benchmarks/calibration_memo.py --work DIR [--claims N] --out benchmarks/results/NAME.json

``--claims N`` replays the first N calibration claims (by uid) only: the run without the memo
costs what the calibration cost before it (about 38 minutes for 180 claims on a 2-core CPU). The
memo's run goes first, so that any warm-up favours the run without it. Fewer claims are batched
otherwise than in training, so ``memo_vs_training`` may then count claims whose final facts differ
by float noise (1 of 4 claims at some thresholds, 2026-12-07); all 180 matched exactly.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="a benchmarks/training.py --work directory")
    parser.add_argument("--claims", type=int, default=None, help="replay the first N calibration claims only (default: all)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not (args.work / "store").is_dir() or not (args.work / "training.yaml").is_file():
        sys.exit(f"{args.work} holds no trained store: run benchmarks/training.py --work {args.work} first")
    os.environ.setdefault("BALEEN_HOME", str(args.work / "home"))
    from datetime import datetime, timezone

    from baleen_core.config import BaleenConfig
    from baleen_core.engine import HopMemo
    from baleen_core.results import git_commit, machine_description, write_results
    from baleen_storage import ArtifactStore
    from baleen_tasks.condensing import final_facts_of
    from baleen_tasks.evaluation import evaluation_claims, run_engine

    config = BaleenConfig.load(args.work / "training.yaml")
    store = ArtifactStore(args.work / "store")
    reader = store.latest("reader_checkpoint")
    ranker = reader.manifest.params.get("evidence_ranker")
    runs = [ref for ref in store.refs("hop_traces") if ref.manifest.producer.startswith("reader-facts-")]
    newest = max(runs, key=lambda ref: ref.manifest.created_at).manifest.run_id
    runs = sorted((ref for ref in runs if ref.manifest.run_id == newest), key=lambda ref: ref.manifest.created_at)
    first = runs[0]
    inputs = first.manifest.inputs
    claims, passages = (store.find(name, None, inputs[name]) for name in ("claims", "passages"))
    models = {name: store.find(kind, None, inputs[name]) for name, kind in (("index", "flipr_index"), ("stage1", "stage1_checkpoint"), ("stage2", "stage2_checkpoint"))}
    if claims is None or passages is None or None in models.values():
        sys.exit(f"{args.work}: the calibration's claims, passages or models are no longer in the store")
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")
    uids = sorted(first.manifest.params["uids"])[: args.claims]
    rows = evaluation_claims(store, claims, "train", None, uids)

    grids = config.training.calibration.context_grids(config.condenser.stage2_threshold)
    calls = []  # (pass, thresholds of one engine call, the training's own runs of them)
    for name, prefix, grid in (("stage 2's scores", "reader-facts-t", grids[0]), ("the evidence ranker's", "reader-facts-ranked-t", grids[1])):
        made = {ref.manifest.params["condenser"]["stage2_threshold"]: ref for ref in runs if ref.manifest.producer.startswith(prefix)}
        if not made:
            continue
        if not set(grid) <= set(made):
            sys.exit(f"{args.work}: the calibration ran {sorted(made)} on {name} but the config's grid is {grid}: run with the training's settings")
        calls.append((name, list(grid), [made[t] for t in grid]))
        calls += [(name, [t], [ref]) for t, ref in made.items() if t not in grid]  # each step past the edge, in the order made
    engine_config = {"stage 2's scores": config, "the evidence ranker's": config.with_evidence_ranker(ranker, context=True)}

    def replay(memo: HopMemo | None) -> tuple[list[dict], dict]:
        timings, finals = [], {}
        for name, thresholds, _ in calls:
            started = time.perf_counter()
            verdicts, stats = run_engine(store, "baleen", rows, thresholds, passages, sentences, models, engine_config[name], f"{name} {thresholds}", memo)
            seconds = time.perf_counter() - started
            timings.append({"scores": name, "thresholds": thresholds, "seconds": round(seconds, 1), **{k: stats[k] for k in ("hops_computed", "hops_reused") if k in stats}})
            for t, run in zip(thresholds, verdicts, strict=True):
                finals[(name, t)] = {v.uid: sorted(s.key for s, _ in v.facts) for v in run}
            print(f"{'memo' if memo else 'no memo'}: {name} {thresholds}: {seconds:.1f} s", flush=True)
        return timings, finals

    with_memo, memo_finals = replay(HopMemo().bound("replay"))
    without, plain_finals = replay(None)
    trained = {}  # the training's own final facts, each run read once
    for name, ts, refs in calls:
        for t, ref in zip(ts, refs, strict=True):
            facts = final_facts_of(store, ref)
            trained[(name, t)] = {uid: sorted(facts[uid]) for uid in uids}
    differing = {f"{name} {t:g}": sum(memo_finals[(name, t)][u] != plain_finals[(name, t)][u] for u in uids) for name, t in memo_finals}
    differing_trained = {f"{name} {t:g}": sum(memo_finals[(name, t)][u] != trained[(name, t)][u] for u in uids) for name, t in memo_finals}
    total = {mode: round(sum(t["seconds"] for t in timings), 1) for mode, timings in (("memo", with_memo), ("no_memo", without))}
    document = {
        "commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "work": str(args.work),
        "claims": len(rows),
        "calibration_run": newest,
        "seconds": total,
        "speedup": round(total["no_memo"] / max(total["memo"], 1e-9), 2),
        "calls": {"memo": with_memo, "no_memo": without},
        "claims_with_other_final_facts": {"memo_vs_no_memo": differing, "memo_vs_training": differing_trained},
    }
    write_results(document, args.out)
    print(json.dumps({k: document[k] for k in ("claims", "seconds", "speedup", "claims_with_other_final_facts")}, indent=1))
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
