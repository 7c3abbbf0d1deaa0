"""One system as trained by two or more training benchmark runs, compared paired on the same claims.

Run ``benchmarks/training.py`` then ``benchmarks/evaluation.py`` once per setting, each with its own
``--work`` on the same pack (from ``benchmarks/held_out_pack.py``, so that its dev claims are
held-out *training* claims), then this: the newest ``claim_metrics`` of ``--system`` in each run's
store, the metrics of each with bootstrap intervals, and the first run minus each other one on the
claims both verified. That is where a training setting is chosen; dev is never read.

    python benchmarks/compare_runs.py --run NEW DIR_NEW --run OLD DIR_OLD [--system baleen]
        --out benchmarks/results/NAME.json

The results file says which claims these are (held-out training claims or dev), as each run's
evaluation recorded it in its work folder; ``--split`` is needed only for runs evaluated before
that was recorded, and may not contradict it.

A name given more than once pools its runs: one ``--run`` per held-out pack for each setting, in
the same pack order for every name, so that the pairs and their intervals cover the claims of every
pack; a claim held out in two packs counts once, from the first (docs/benchmarks.md "Judging the
next levers on two packs").

    python benchmarks/compare_runs.py --run NEW PACK1_NEW --run NEW PACK2_NEW --run OLD PACK1_OLD
        --run OLD PACK2_OLD --out benchmarks/results/NAME.json

The results file carries each name's claim rows (``claim_rows``), so that a pack compared in an
earlier session (whose stores a new machine no longer has) pools with a new one: give that file
in place of a work folder, as ``FILE.json`` (the rows recorded under the same name) or
``FILE.json#RECORDED_NAME``.

    python benchmarks/compare_runs.py --run NEW benchmarks/results/PACK1.json --run NEW PACK2_NEW
        --run OLD benchmarks/results/PACK1.json --run OLD PACK2_OLD --out benchmarks/results/NAME.json

A run given as ``DIR@RUN_ID`` takes that evaluation run's ``claim_metrics`` instead of the newest:
two evaluations of one store (e.g. with and without ``--fusion bm25``, same trained models). A run
given as ``DIR[@RUN_ID]:SYSTEM`` takes that system instead of ``--system`` (e.g. ``flipr-alone``,
the full system with FLIPR alone, of a run whose full system fuses).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from baleen_core.held_out import agreed_split, recorded_split
from hover_mini import add_split_option  # sibling module

if TYPE_CHECKING:
    from baleen_storage import ArtifactRef, ArtifactStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--run", nargs=2, action="append", required=True, metavar=("NAME", "WORK"),
        help="a run's name and its --work directory, WORK[@RUN_ID][:SYSTEM], or an earlier results file of this script, FILE.json[#RECORDED_NAME] (the first is compared with each other one)",
    )
    parser.add_argument("--system", default="baleen", help="the evaluated system to compare")
    add_split_option(parser)  # a dev comparison labelled as held-out training claims (or the reverse) misleads whoever reads the file
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    runs, recorded = [], {}  # recorded: (name, file) → the claim rows and budget an earlier results file carries
    for name, given in args.run:  # WORK[@RUN_ID][:SYSTEM] or FILE.json[#RECORDED_NAME]
        if given.partition("#")[0].endswith(".json"):
            path, _, as_named = given.partition("#")
            recorded[(name, Path(path))] = _recorded_run(Path(path), as_named or name, args.system)
            runs.append((name, Path(path), None, args.system))
            continue
        given, _, system = given.partition(":")
        work, _, run_id = given.partition("@")
        runs.append((name, Path(work), run_id or None, system or args.system))
    names = list(dict.fromkeys(name for name, *_ in runs))  # in order; a name given twice pools its packs
    packs = {name: sum(1 for n, *_ in runs if n == name) for name in names}
    if len(names) < 2 or len(set(packs.values())) > 1:
        sys.exit("give at least two names, each with one --run NAME WORK per pack (the same number of packs for every name)")
    for name, work, *_ in runs:
        if (name, work) not in recorded and not (work / "training.yaml").is_file():
            sys.exit(f"{work} holds no training benchmark run (no training.yaml)")
    try:
        split = agreed_split({f"{name} ({work})": recorded[(name, work)]["split"] if (name, work) in recorded else recorded_split(work) for name, work, *_ in runs}, args.split)
    except ValueError as err:
        sys.exit(str(err))
    os.environ.setdefault("BALEEN_HOME", str(runs[0][1] / "home"))
    from baleen_core.results import carried_claim_rows, pooled_claim_rows, results_document, results_table, write_results
    from baleen_storage import ArtifactStore, StoreError

    pack_rows, pack_budgets = {name: [] for name in names}, {name: [] for name in names}
    for name, work, run_id, system in runs:
        if (name, work) in recorded:
            pack_rows[name].append(recorded[(name, work)]["rows"])
            pack_budgets[name].append(recorded[(name, work)]["budget"])
            continue
        store, producer = ArtifactStore(work / "store"), f"eval-{system}"
        if not store.refs("claim_metrics", producer):
            sys.exit(f"{work} holds no evaluation of {system}: run benchmarks/evaluation.py --work {work} first")
        try:
            ref = store.get("claim_metrics", run_id, producer) if run_id else store.latest("claim_metrics", producer)
        except StoreError as err:
            sys.exit(f"{work}: {err}")
        pack_rows[name].append(store.read_table(ref).to_pylist())
        wall = work / "training-wall.json"
        models, steps = _models_training(store, store.get("predictions", ref.manifest.run_id, producer), newest_flipr=run_id is None)
        pack_budgets[name].append({
            "system": system,
            "models": models,
            "model_steps": steps,
            # the work directory's newest training run, which an earlier evaluation (DIR@RUN_ID) may predate
            "training": None if run_id else (yaml.safe_load((work / "training.yaml").read_text()) or {}).get("training"),
            "training_wall": json.loads(wall.read_text()) if wall.is_file() and not run_id else None,
        })
    for name in names[1:]:  # pack i of every name holds the same claims, so every name pools the same rows
        for i, (mine, first) in enumerate(zip(pack_rows[name], pack_rows[names[0]], strict=True)):
            if {r["uid"] for r in mine} != {r["uid"] for r in first}:
                sys.exit(f"{name}'s run {i + 1} evaluated other claims than {names[0]}'s run {i + 1}: give each name's runs in the same pack order")
    rows = {name: pooled_claim_rows(pack_rows[name]) for name in names}
    shared = sum(len(pack) for pack in pack_rows[names[0]]) - len(rows[names[0]])
    budgets = {name: done[0] if len(done) == 1 else done for name, done in pack_budgets.items()}
    document = results_document(rows, {}, split, None, budgets={"system": args.system, "runs": budgets}, main=names[0])
    document["claim_rows"] = carried_claim_rows(rows)
    if packs[names[0]] > 1:  # a claim held out in two packs counts once, from the first (pooled_claim_rows)
        document["pooled"] = {"packs": packs[names[0]], "claims": len(rows[names[0]]), "shared_claims_counted_once": shared}
        print(f"{packs[names[0]]} packs pooled: {len(rows[names[0]])} claims, {shared} held out in more than one pack counted once (from the first)")
    write_results(document, args.out)
    print(results_table(document, ["passage_em", "passage_f1", "sentence_f1", "label_accuracy", "hover_score"]))
    print(f"\nwritten: {args.out}")


def _recorded_run(path: Path, name: str, system: str) -> dict:
    """The claim rows, split and budget that an earlier results file of this script carries for
    the run it named ``name`` (exits with what is wrong when it cannot)."""
    from baleen_core.results import claim_rows_from_results

    try:
        document = json.loads(path.read_text())
        rows = claim_rows_from_results(document, name)
    except (OSError, ValueError) as err:
        sys.exit(f"{path}: {err}")
    recorded_system = (document.get("budgets") or {}).get("system")
    if recorded_system != system:
        sys.exit(f"{path} compared {recorded_system!r}, not {system!r}")
    budget = ((document.get("budgets") or {}).get("runs") or {}).get(name)
    return {"rows": rows, "split": document.get("split"), "budget": {"from_results_file": str(path), "commit": document.get("commit"), "recorded": budget}}


def _models_training(store: ArtifactStore, predictions: ArtifactRef, newest_flipr: bool) -> tuple[dict, dict]:
    """The training settings each evaluated model was trained with, and how long its steps took
    (:func:`_step_times`), from the store's lineage: the predictions name their models by
    fingerprint, and each model's training steps carry its settings. Two evaluations of one work
    directory, retrained between them, differ here. FLIPR's steps (the index, not the predictions,
    names FLIPR) are the store's newest, so only with ``newest_flipr``."""
    settings, times = {}, {}
    for model in ("stage1", "stage2", "reader"):
        fingerprint = predictions.manifest.inputs.get(model)
        steps = store.find("training_steps", None, fingerprint) if fingerprint else None
        if steps is not None:
            settings[model] = steps.manifest.params["training"]
            times[model] = _step_times(store, steps)
    flipr = [ref for ref in store.refs("training_steps") if ref.manifest.producer.startswith("flipr-")] if newest_flipr else []
    if flipr:
        times["flipr"] = _step_times(store, flipr[-1])
    return settings, times


def _step_times(store: ArtifactStore, steps: ArtifactRef) -> dict:
    """A model's training steps: how many, their seconds in all (forward, backward and optimizer;
    not validation or checkpoints) and the median step's."""
    seconds = store.read_table(steps).column("seconds").to_pylist()
    return {"steps": len(seconds), "seconds": round(sum(seconds), 1), "median_step_seconds": round(statistics.median(seconds), 3) if seconds else None}

if __name__ == "__main__":
    main()
