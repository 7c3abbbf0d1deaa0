"""The evidence rule's floor chosen per hop count, judged on held-out training claims (issue 50).

The reference's evidence (L3x) keeps, of stage 2's best 5 facts at the last hop, those above
min(0, the second best). On the held-out training claims most 3- and 4-hop claims end with fewer
passages than they need. This benchmark moves the rule's 0 to a floor chosen per hop count
(``baleen_core.condensing.calibration.calibrate_evidence_floors``) on the calibration claims of a
training run (the held-out share of its label rounds, which the engine already ran at the
chosen context threshold: ``reader-facts-tT``), then applies the chosen floors to the newest
evaluation of the full system on the pack's claims. The floor steers no hop, so re-cutting each
claim's last stage-2 read (``hop_traces``) is exact; the script checks that floor 0 gives back
the engine's own evidence and metrics for every claim before it trusts a re-cut.

    python benchmarks/evidence_floors.py --work DIR --out benchmarks/results/NAME.json

``DIR`` is a ``benchmarks/training.py`` work directory evaluated by ``benchmarks/evaluation.py``
(``DIR@RUN_ID`` takes that evaluation run instead of the newest). The file holds three rule
"systems" on the same claims: ``l3x`` (the reference's, floor 0), ``floor-per-hops`` (the floors
chosen here, which are the training's own when it chose them on the same claims) and
``first-h-passages`` (the facts of the first H distinct passages of stage 2's whole ranking, H
the claim's hop count: a diagnostic until its own rule judged it), each paired against
``--main`` (default ``floor-per-hops``). ``--exclude CLAIMS_JSON`` leaves those claims out of the
comparison (claims another pack's numbers were seen on). Every run's recorded evidence must come
back from its reads at the floors it ran with before any re-cut is trusted. Label accuracy and
the HoVer score are left out of the re-cut rules: the reader read the engine's evidence, not
theirs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hover_mini import add_split_option, work_split  # sibling module

if TYPE_CHECKING:
    from baleen_core.condensing.calibration import LastRead
    from baleen_storage import ArtifactRef, ArtifactStore

RULES = ("floor-per-hops", "l3x", "first-h-passages")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="a training benchmark's --work directory, WORK[@EVAL_RUN_ID]")
    add_split_option(parser)
    parser.add_argument("--main", choices=RULES, default="floor-per-hops", help="the rule the others are paired against")
    parser.add_argument("--exclude", type=Path, action="append", default=[], help="a claims JSON whose claims are left out of the comparison")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    work_given, _, run_id = args.work.partition("@")
    work = Path(work_given)
    split = work_split(work, args.split)  # before any work: a missing --split loses nothing
    if not (work / "store").is_dir():
        sys.exit(f"{work} holds no store: run benchmarks/training.py and benchmarks/evaluation.py --work {work} first")
    os.environ.setdefault("BALEEN_HOME", str(work / "home"))
    from baleen_core.condensing.calibration import calibrate_evidence_floors, evidence_at_floor, floor_trial_row
    from baleen_core.config import CondenserConfig, json_floors
    from baleen_core.results import results_document, results_table, write_results
    from baleen_storage import ArtifactStore, StoreError
    from baleen_tasks.condensing import gold_fact_sets

    store = ArtifactStore(work / "store")
    try:
        evaluated = store.get("hop_traces", run_id, "eval-baleen") if run_id else store.latest("hop_traces", "eval-baleen")
        metrics = store.get("claim_metrics", evaluated.manifest.run_id, "eval-baleen")
    except StoreError as err:
        sys.exit(f"{work}: {err}")
    condenser = CondenserConfig(**evaluated.manifest.params["condenser"])
    calibration = calibration_traces(store, evaluated, condenser.stage2_threshold)
    l3x = condenser.model_copy(update={"evidence_rule": "l3x"})  # the floors' rule, whichever the evaluation ran with
    claims = store.find("claims", None, evaluated.manifest.inputs["claims"])
    gold_ref = store.find("gold_facts", None, evaluated.manifest.inputs["claims"])
    if claims is None or gold_ref is None:
        sys.exit(f"{work}: no claims or gold_facts with the evaluation's claims fingerprint")
    gold = gold_fact_sets(store, gold_ref)

    calibration_reads = checked_last_reads(store, calibration, claims)
    chosen = calibrate_evidence_floors(calibration_reads, gold, l3x)
    floors = {hops: best.threshold for hops, (best, _) in chosen.items()}
    print(f"{len(calibration_reads)} calibration claims ({calibration.manifest.producer}, run {calibration.manifest.run_id}): floors {floors}")
    if condenser.evidence_floors and condenser.evidence_floors != floors:
        print(f"note: the evaluation ran with floors {condenser.evidence_floors}, not the ones chosen here")

    rows = store.read_table(metrics).to_pylist()
    reads = checked_last_reads(store, evaluated, claims)
    mismatched = [r["uid"] for r in rows if not same_metrics(recut(r, evidence_at_floor(reads[r["uid"]], condenser.evidence_floor(int(r["num_hops"])), condenser), gold[r["uid"]]), r)]
    if mismatched:
        sys.exit(f"the re-cut at the evaluation's own floors does not give back its metrics for {len(mismatched)} claims (e.g. {mismatched[0]}): the re-cut is not the engine's rule")
    excluded = {c["uid"] for path in args.exclude for c in json.loads(path.read_text())} & {r["uid"] for r in rows}
    rows = [r for r in rows if r["uid"] not in excluded]
    print(f"{len(rows)} evaluated claims compared ({len(excluded)} claims excluded by --exclude)")
    systems = {
        "floor-per-hops": [recut(r, evidence_at_floor(reads[r["uid"]], floors.get(int(r["num_hops"]), 0.0), l3x), gold[r["uid"]]) for r in rows],
        "l3x": [recut(r, evidence_at_floor(reads[r["uid"]], 0.0, l3x), gold[r["uid"]]) for r in rows],
        "first-h-passages": [recut(r, first_passages(reads[r["uid"]], int(r["num_hops"])), gold[r["uid"]]) for r in rows],
    }
    document = results_document(systems, {}, split, None, main=args.main)
    document["evidence_floors"] = {
        "excluded_claims": sorted(excluded),
        "chosen": json_floors(floors),
        "calibration": {"claims": len(calibration_reads), "hop_traces_run": calibration.manifest.run_id, "producer": calibration.manifest.producer},
        "evaluation_run": evaluated.manifest.run_id,
        "trials": {str(h): [floor_trial_row(t) for t in trials] for h, (_, trials) in chosen.items()},
    }
    write_results(document, args.out)
    print(results_table(document, ["passage_em", "passage_f1", "sentence_em", "sentence_f1"]))
    print(f"\nwritten: {args.out}")


def calibration_traces(store: ArtifactStore, evaluated: ArtifactRef, threshold: float) -> ArtifactRef:
    """The engine run over the training run's calibration claims at the context threshold the
    evaluation ran with, by the same stage 2 (the newest if several)."""
    found = [
        ref
        for ref in store.refs("hop_traces")
        if ref.manifest.producer.startswith("reader-facts-t")
        and ref.manifest.inputs.get("stage2") == evaluated.manifest.inputs.get("stage2")
        and ref.manifest.params["condenser"]["stage2_threshold"] == threshold
    ]
    if not found:
        sys.exit(f"no calibration run (reader-facts-t*) at threshold {threshold} with the evaluated stage 2")
    return max(found, key=lambda ref: ref.manifest.created_at)


def checked_last_reads(store: ArtifactStore, traces: ArtifactRef, claims: ArtifactRef) -> dict[str, LastRead]:
    """Each claim's last stage-2 read (the training flow's ``last_reads_of``); its recorded
    evidence must be what the rule gives at the floors the run had, or another rule made it."""
    from baleen_core.condensing.calibration import evidence_at_floor
    from baleen_core.config import CondenserConfig
    from baleen_tasks.condensing import final_facts_of, last_reads_of

    condenser = CondenserConfig(**traces.manifest.params["condenser"])
    reads, recorded = last_reads_of(store, traces, claims), final_facts_of(store, traces)
    for uid, read in reads.items():
        if evidence_at_floor(read, condenser.evidence_floor(read.hops), condenser) != recorded[uid]:
            sys.exit(f"{traces.manifest.producer} {uid}: the recorded evidence is not the rule's at the run's floors {condenser.evidence_floors}")
    return reads


def first_passages(read: LastRead, hops: int) -> list[tuple[int, int]]:
    """The facts of the first ``hops`` distinct passages of stage 2's whole ranking (the
    engine's ``first-h-passages`` rule, ``condenser.evidence_rule``)."""
    from baleen_core.condensing.condense import first_passage_facts

    return [fact.key for fact, _ in first_passage_facts(read.candidates, read.scores, hops)]


def recut(row: dict, facts: list[tuple[int, int]], gold: set[tuple[int, int]]) -> dict:
    """``row`` (a claim_metrics row) with its evidence metrics for ``facts`` (HoVer's, as the
    evaluation scores them); label accuracy and the HoVer score dropped (the reader read other facts)."""
    from baleen_core.metrics import score_claim

    scored = score_claim(facts, [], [], gold, int(row["num_hops"]), "", None, 1)
    evidence = {k: v for k, v in scored.items() if k.startswith(("passage_", "sentence_"))}
    return {**row, **evidence, "final_facts": len(facts), "final_passages": len({pid for pid, _ in facts}), "label_accuracy": None, "hover_score": None}


def same_metrics(recut_row: dict, engine_row: dict) -> bool:
    keys = ("passage_f1", "passage_em", "sentence_f1", "sentence_em", "final_facts", "final_passages")
    return all(abs(float(recut_row[k]) - float(engine_row[k])) < 1e-9 for k in keys)


if __name__ == "__main__":
    main()
