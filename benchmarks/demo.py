"""The demo as a new user runs it, timed, and its results file.

Runs ``baleen demo`` (the README's first command, after install) in a fresh ``BALEEN_HOME`` as a
subprocess, ``--runs`` times in a row, and writes ``benchmarks/results/demo.json`` in the shape of
every results file (:mod:`baleen_core.results`): the demo's own evaluation (every system × hop
count × metric with bootstrap intervals, the paired differences), ``wall_seconds`` (the first
run's wall time), each run's wall time, and whether the runs' evaluation artifacts are identical.

    python benchmarks/demo.py                 # one run
    python benchmarks/demo.py --runs 2        # twice in a row, artifacts compared
    python benchmarks/demo.py --config benchmarks/configs/demo-tuning-full-budget.yaml \
        --split "tuning world dev" --out benchmarks/results/demo-tuning-full-budget.json

With ``--config`` the demo runs on that config instead of its preset (another world seed, other
budgets), and the results file records that config's budgets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
COMPARED = ("predictions", "claim_metrics", "hop_traces")  # what the demo decides, run after run


def evaluation_refs(store) -> dict[str, dict[str, object]]:
    """The newest evaluation artifacts of each system: {system: {artifact name: ref}}."""
    out: dict[str, dict[str, object]] = {}
    for name in COMPARED:
        for ref in store.refs(name):
            producer = ref.manifest.producer
            if producer.startswith("eval-"):
                system = producer.removeprefix("eval-")
                current = out.setdefault(system, {}).get(name)
                if current is None or ref.manifest.created_at > current.manifest.created_at:
                    out[system][name] = ref
    return out


def content_digest(store, refs: dict[str, dict[str, object]]) -> str:
    """A digest of the evaluation artifacts' rows (not their files: run ids and timestamps differ)."""
    digest = hashlib.sha256()
    for system in sorted(refs):
        for name in COMPARED:
            table = store.read_table(refs[system][name])
            columns = sorted(c for c in table.column_names if c not in ("seconds", "run_id"))
            rows = sorted(json.dumps({c: row[c] for c in columns}, sort_keys=True, default=str) for row in table.to_pylist())
            digest.update(f"{system}/{name}\n".encode() + "\n".join(rows).encode())
    return digest.hexdigest()


def run_demo(home: Path, log: Path, config: Path | None) -> float:
    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    env = {**os.environ, "BALEEN_HOME": str(home)}
    started = time.perf_counter()
    with open(log, "w") as out:
        command = [str(Path(sys.executable).parent / "baleen"), "demo"] + (["--config", str(config)] if config else [])
        done = subprocess.run(command, cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"baleen demo failed (exit {done.returncode}); see {log}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="demo runs in a row (2: check that the artifacts are identical)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/baleen-demo-benchmark"), help="scratch folder (one BALEEN_HOME per run)")
    parser.add_argument("--out", type=Path, default=RESULTS / "demo.json")
    parser.add_argument("--config", type=Path, default=None, help="a config file instead of the demo's preset")
    parser.add_argument("--split", default="dev", help="what the evaluated claims are, for the results file")
    args = parser.parse_args()
    config_path = args.config.resolve() if args.config else None
    sys.path.insert(0, str(ROOT))
    from baleen_core.config import BaleenConfig, default_store_root, demo_preset
    from baleen_core.results import results_document, results_table, write_results
    from baleen_storage import ArtifactStore
    from baleen_tasks.evaluation import unresolved_claims

    walls, digests, store, refs = [], [], None, {}
    for run in range(args.runs):
        home = args.work / f"run{run + 1}"
        walls.append(run_demo(home, args.work / f"run{run + 1}.log", config_path))
        os.environ["BALEEN_HOME"] = str(home)
        store = ArtifactStore(default_store_root())
        refs = evaluation_refs(store)
        digests.append(content_digest(store, refs))
        print(f"run {run + 1}: {walls[-1]:.0f} s, evaluation artifacts {digests[-1][:12]}", flush=True)
    metric_rows = {system: store.read_table(r["claim_metrics"]).to_pylist() for system, r in refs.items()}
    speed = {system: r["predictions"].manifest.stats.get("claims_per_second") for system, r in refs.items()}
    config = BaleenConfig.load(config_path) if config_path else demo_preset()
    budgets = {"training": config.training.model_dump(mode="json"), "labels": config.labels.model_dump(mode="json"),
               "evaluation": config.evaluation.model_dump(mode="json", include={"depth", "k", "hops", "max_claims", "bootstrap"}),
               "condenser": config.condenser.model_dump(mode="json", include={"top_facts", "max_kept", "min_kept", "stage2_threshold", "evidence_min_facts", "evidence_max_passages"}),
               "demo": config.demo.model_dump(mode="json")}
    claims = store.latest("claims", "claims")
    document = results_document(
        metric_rows, speed, args.split, walls[0], budgets, samples=config.evaluation.bootstrap, seed=config.evaluation.seed, repo=ROOT,
        unresolved_claims=unresolved_claims(store, claims, config.evaluation.split),
    )
    document["runs"] = [{"wall_seconds": round(w, 1), "evaluation_digest": d} for w, d in zip(walls, digests, strict=True)]
    document["identical_runs"] = len(set(digests)) == 1 if len(digests) > 1 else None
    write_results(document, args.out)
    print(f"\nresults file: {args.out}\n\n{results_table(document)}")
    if document["identical_runs"] is False:
        sys.exit("the demo runs produced different evaluation artifacts")


if __name__ == "__main__":
    main()
