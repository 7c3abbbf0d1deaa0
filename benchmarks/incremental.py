"""Index updates against full builds, on hover-mini and on the demo world (issue 52).

For each dataset, through the real flows (corpus → index, the claims flow for the dev claims):

1. a base corpus without 10% of the BEIR records (seeded), indexed from scratch;
2. those records added back in ten deltas of 1% of the corpus each, every delta ingested and the
   index updated in place (``baleen index`` as a user runs it);
3. a full rebuild of the final corpus with the same encoder (``--force``: new codec, every passage
   encoded), timed as the reference cost, and another full build with another codec seed: how
   far two rebuilds' searches differ is the floor the update's overlap is read against;
4. the dev claims searched (claim only, FLIPR, k=100) on the updated index and on the rebuild:
   top-25 overlap, Retrieval@100 with bootstrap intervals;
5. 1% of the passages deleted (none of them a dev claim's gold passage) and the index updated:
   its cost, and how often a deleted passage comes back in the dev searches (must be 0).

Cost ratios are index-flow wall times (the flow as the CLI runs it, on a temporary Prefect
server: plan, encode, merge, gate, catalog) over the full rebuild's, in the same run on the same
machine.

With ``--full-system demo`` (the default) the same is done with trained models, as a user
refreshes a trained store: the pipeline (the demo's preset) trains on the base corpus, the ten
deltas update every index a refresh updates (the untrained and the trained FLIPR's), and the
full system is evaluated on the dev claims twice, on the updated trained index and on a full
rebuild of it: its Retrieval@100 (evaluation depth 100) with intervals and paired, and the
top-25 overlap of the trained FLIPR's claim searches. ``--full-system hover-mini`` does this on
hover-mini with the models of a store ``benchmarks/training.py`` trained (``--trained-store``,
copied): training them here would take hours of this CPU.

    python benchmarks/incremental.py [--datasets hover-mini demo] [--work DIR] [--out FILE]

writes ``benchmarks/results/incremental.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hover_mini import add_hover_mini_option  # noqa: E402  (sibling module)

ROOT = Path(__file__).resolve().parents[1]
WITHHELD_SHARE, N_DELTAS, DELETE_SHARE = 0.10, 10, 0.01


def _records(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as lines:
        return [json.loads(line) for line in lines]


def _write_records(path: Path, records: list[dict]) -> None:
    with gzip.open(path, "wt") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")


def _withheld(records: list[dict], n_corpus: int, rng: np.random.Generator) -> tuple[int, list[dict], list[dict]]:
    """(passages per 1% delta, the base corpus's records, the records its deltas add back)."""
    per_delta = max(1, round(0.01 * n_corpus))
    order = rng.permutation(len(records))
    return per_delta, [records[i] for i in sorted(order[per_delta * N_DELTAS :])], [records[i] for i in order[: per_delta * N_DELTAS]]


def _claim_rankings(store, index_ref, claims: list[str], storage: str = "codec") -> list[list[int]]:
    """Each claim's first 100 pids by a claim-only FLIPR search of ``index_ref`` (default search settings)."""
    from baleen_core.config import SearchConfig
    from baleen_storage.indexes import open_searcher

    searcher, _ = open_searcher(store, SearchConfig(), device="cpu", ref=index_ref, storage=storage)
    return [[h.pid for h in hits] for hits in searcher.search(claims, k=100)]


def _top25_overlaps(rankings: list[list[int]], reference: list[list[int]]) -> list[float]:
    """Per claim, the share of the reference's top 25 that ``rankings`` also puts in its top 25."""
    return [len(set(x[:25]) & set(y[:25])) / 25 for x, y in zip(rankings, reference, strict=True)]


def _timed(fn, *args, **kwargs):
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, round(time.perf_counter() - started, 2)


def run_dataset(name: str, source: Path, work: Path, seed: int = 0, keep_fp16: bool = False) -> dict:
    from baleen_core.config import BaleenConfig
    from baleen_core.metrics import bootstrap_ci
    from baleen_flows.index import index_flow
    from baleen_flows.ingest import claims_flow, corpus_flow
    from baleen_storage import ArtifactStore

    dataset, config = work / "dataset", work / "config.yaml"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, dataset)
    # keep_fp16: every shard also keeps its tokens uncompressed, so that the searches can re-rank
    # exactly as well as from the codec, which separates the codec's noise from the update's
    config.write_text(f"store_root: {work / 'store'}\nretriever: {{device: cpu}}\n" + ("index: {keep_fp16: true}\n" if keep_fp16 else ""))
    beir = next(dataset.glob("*.jsonl.gz"))
    records = _records(beir)
    n_corpus = corpus_flow(str(dataset), str(config))["passages"].rows  # the whole corpus, to size the deltas
    rng = np.random.default_rng(seed)
    per_delta, kept, withheld = _withheld(records, n_corpus, rng)

    _write_records(beir, kept)
    corpus_flow(str(dataset), str(config))
    base, base_seconds = _timed(index_flow, str(config))
    print(f"{name}: base index of {base['flipr_index'].rows:,} passages in {base_seconds} s", flush=True)

    deltas = []
    for d in range(N_DELTAS):
        kept += withheld[d * per_delta : (d + 1) * per_delta]
        _write_records(beir, kept)
        _, corpus_seconds = _timed(corpus_flow, str(dataset), str(config))
        refs, seconds = _timed(index_flow, str(config))
        stats = refs["flipr_index"].manifest.stats
        deltas.append({"seconds": seconds, "corpus_seconds": corpus_seconds, "changes": stats.get("changes"), "rebuilt": "base_index" not in stats,
                       "delta_error": stats.get("delta_error"), "codec_error": stats.get("codec_error"), "rebuild_due": stats.get("rebuild_due")})
        print(f"{name}: delta {d + 1}: {seconds} s index, {corpus_seconds} s corpus, {stats.get('changes')}", flush=True)
    updated = refs

    rebuilt, rebuild_seconds = _timed(index_flow, str(config), force=True)
    print(f"{name}: full rebuild of {rebuilt['flipr_index'].rows:,} passages in {rebuild_seconds} s", flush=True)
    # the noise floor: another full build that differs only in the codec's seed
    other_seed = work / "config-seed1.yaml"
    other_seed.write_text(config.read_text().replace("index: {keep_fp16: true}\n", "") + f"index: {{seed: 1, keep_fp16: {str(keep_fp16).lower()}}}\n")
    reseeded = index_flow(str(other_seed))

    store = ArtifactStore(BaleenConfig.load(config).store_root)
    claims = claims_flow(str(dataset), str(config))
    dev = [c for c in store.read_table(claims["claims"]).to_pylist() if c["split"] == "dev" and c["resolved"]]
    gold: dict[str, set[int]] = {}
    for row in store.read_table(claims["gold_facts"], ["uid", "pid"]).to_pylist():
        gold.setdefault(row["uid"], set()).add(row["pid"])

    dev_claims = [c["claim"] for c in dev]
    indexes = {"incremental": updated["flipr_index"], "rebuild": rebuilt["flipr_index"], "rebuild_seed1": reseeded["flipr_index"]}
    by_index = {name: _claim_rankings(store, ref, dev_claims) for name, ref in indexes.items()}
    overlap, floor = (_top25_overlaps(by_index[name], by_index["rebuild"]) for name in ("incremental", "rebuild_seed1"))
    exact = {}
    if keep_fp16:  # the same candidates re-ranked from the uncompressed tokens
        by_index_fp16 = {name: _claim_rankings(store, ref, dev_claims, "fp16") for name, ref in indexes.items()}
        for label, (a, b) in {"updated_vs_rebuild": ("incremental", "rebuild"), "rebuild_vs_rebuild_other_codec_seed": ("rebuild_seed1", "rebuild")}.items():
            values = _top25_overlaps(by_index_fp16[a], by_index_fp16[b])
            exact[label] = {"value": round(float(np.mean(values)), 4), "interval": [round(v, 4) for v in bootstrap_ci(values, seed=seed)]}
    retrieval = {}
    for system, rankings in list(by_index.items())[:2]:
        found = [float(gold[c["uid"]] <= set(r[:100])) for c, r in zip(dev, rankings, strict=True)]
        low, high = bootstrap_ci(found, seed=seed)
        retrieval[system] = {"value": round(float(np.mean(found)), 4), "interval": [round(low, 4), round(high, 4)]}

    # deleting 1%: none of them a dev claim's gold passage, so the searches stay comparable
    passages = store.latest("passages", "corpus")
    title_of = dict(zip(*(store.read_table(passages, ["pid", "title"]).column(c).to_pylist() for c in ("pid", "title")), strict=True))
    dev_gold_titles = {title_of[pid] for c in dev for pid in gold[c["uid"]]}
    deletable = [r for r in kept if r["title"].strip() not in dev_gold_titles]
    doomed = {deletable[i]["_id"] for i in rng.choice(len(deletable), per_delta, replace=False)}
    _write_records(beir, [r for r in kept if r["_id"] not in doomed])
    corpus_flow(str(dataset), str(config))
    after_delete, delete_seconds = _timed(index_flow, str(config))
    deleted_pids = set(title_of) - set(store.passage_ids(store.latest("passages", "corpus")).tolist())
    returned = sum(len(deleted_pids & set(r)) for r in _claim_rankings(store, after_delete["flipr_index"], dev_claims))

    add = [d["seconds"] for d in deltas if not d["rebuilt"]]
    return {
        "passages": n_corpus,
        "dev_claims": len(dev),
        "per_delta_passages": per_delta,
        "base_build_seconds": base_seconds,
        "full_rebuild_seconds": rebuild_seconds,
        "add_1pct_seconds": {"median": statistics.median(add) if add else None, "each": [d["seconds"] for d in deltas]},
        "add_1pct_cost_ratio": round(statistics.median(add) / rebuild_seconds, 4) if add else None,
        "delete_1pct_seconds": delete_seconds,
        "delete_1pct_cost_ratio": round(delete_seconds / rebuild_seconds, 4),
        "deleted_passages": len(deleted_pids),
        "deleted_passages_returned": returned,
        "top25_overlap_after_10pct": round(float(np.mean(overlap)), 4),
        "top25_overlap_interval": [round(v, 4) for v in bootstrap_ci(overlap, seed=seed)],
        "top25_overlap_rebuild_vs_rebuild_other_codec_seed": round(float(np.mean(floor)), 4),
        "top25_overlap_rebuild_vs_rebuild_interval": [round(v, 4) for v in bootstrap_ci(floor, seed=seed)],
        **({"top25_overlap_fp16_reranking": exact} if exact else {}),
        "retrieval_at_100": retrieval,
        "retrieval_at_100_note": "claim-only FLIPR search (hop 1) of the untrained encoder; with trained models, see the demo's full_system",
        "deltas": deltas,
        "after_delete": {"changes": after_delete["flipr_index"].manifest.stats.get("changes"), "dead_positions": after_delete["flipr_index"].manifest.stats.get("dead_positions")},
    }


def run_full_system(source: Path, work: Path, seed: int = 0, trained_store: Path | None = None, trained_config: Path | None = None) -> dict:
    """Trained models on the base corpus; the ten deltas through the indexes a refresh updates;
    the full system evaluated on the updated trained index and on a rebuild of it.

    Without ``trained_store`` the pipeline (the demo's preset) trains on the base corpus and every
    index a refresh updates follows the deltas. With it (a store the training benchmark trained,
    and that run's ``trained_config``), a copy of the store is brought to the base corpus, its
    trained index rebuilt there, and only that index follows the deltas: its models were trained
    on the whole corpus, which the comparison of an updated with a rebuilt index does not need to
    exclude (both are searched with the same models)."""
    import yaml

    from baleen_core.config import BaleenConfig, demo_preset
    from baleen_core.metrics import bootstrap_ci
    from baleen_core.results import paired_results, system_results
    from baleen_flows.evaluation import evaluation_flow
    from baleen_flows.index import index_flow
    from baleen_flows.ingest import corpus_flow, ingest_flow
    from baleen_flows.pipeline import pipeline_flow
    from baleen_storage import ArtifactStore
    from baleen_storage.indexes import PRODUCER, newest_trained_index, refreshable_indexes

    dataset, config = work / "dataset", work / "config.yaml"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, dataset)
    preset = (BaleenConfig.load(trained_config) if trained_store else demo_preset()).model_dump(mode="json")
    preset |= {"store_root": str(work / "store"), "retriever": preset["retriever"] | {"device": "cpu"}}
    preset["evaluation"] |= {"depth": 100, "systems": ["baleen"], "split": "dev"}  # Retrieval@100; the full system only
    config.write_text(yaml.safe_dump(preset))
    if trained_store:  # a copied store reuses everything it made
        shutil.copytree(trained_store, work / "store")
    store = ArtifactStore(BaleenConfig.load(config).store_root)
    beir = next(dataset.glob("*.jsonl.gz"))
    records = _records(beir)
    n_corpus = corpus_flow(str(dataset), str(config))["passages"].rows  # the whole corpus, to size the deltas
    per_delta, kept, withheld = _withheld(records, n_corpus, np.random.default_rng(seed))
    _write_records(beir, kept)
    if trained_store:
        passages_run = ingest_flow(str(dataset), str(config))["corpus/passages"].manifest.run_id
        evaluated_producer = newest_trained_index(store).manifest.producer  # the index the evaluation searches
        refreshed = [(tag, checkpoint) for tag, checkpoint in refreshable_indexes(store) if tag and f"{PRODUCER}-{tag}" == evaluated_producer]
        (tag, checkpoint), = refreshed
        _, train_seconds = _timed(index_flow, str(config), passages_run, force=True, checkpoint=checkpoint, tag=tag)
        print(f"full system: trained index {tag} built on the base corpus in {train_seconds} s", flush=True)
    else:
        _, train_seconds = _timed(pipeline_flow, str(dataset), str(config))
        print(f"full system: trained and evaluated on the base corpus in {train_seconds} s", flush=True)
        refreshed = None

    deltas = []
    for d in range(N_DELTAS):
        kept += withheld[d * per_delta : (d + 1) * per_delta]
        _write_records(beir, kept)
        ingested = ingest_flow(str(dataset), str(config))
        passages_run = ingested["corpus/passages"].manifest.run_id
        for tag, checkpoint in refreshed or refreshable_indexes(store):
            refs, seconds = _timed(index_flow, str(config), passages_run, checkpoint=checkpoint, tag=tag)
            stats = refs["flipr_index"].manifest.stats
            deltas.append({"delta": d + 1, "index": tag or "untrained", "seconds": seconds, "changes": stats.get("changes"), "rebuilt": "base_index" not in stats})
            print(f"delta {d + 1}: index {tag or 'untrained'} in {seconds} s, {stats.get('changes')}", flush=True)
            if tag:
                updated, trained = refs, (tag, checkpoint)
    claims_run = ingested["claims/claims"].manifest.run_id

    def evaluated(label: str) -> list[dict]:
        refs = evaluation_flow(str(config), claims_run=claims_run, passages_run=passages_run)
        print(f"full system on the {label} index: evaluated", flush=True)
        return store.read_table(refs["baleen/claim_metrics"]).to_pylist()

    on_updated = evaluated("updated")
    tag, checkpoint = trained
    rebuilt, rebuild_seconds = _timed(index_flow, str(config), passages_run, force=True, checkpoint=checkpoint, tag=tag)
    on_rebuilt = evaluated("rebuilt")
    # the floor: another rebuild that differs only in the codec's seed
    reseeded_config = work / "config-seed1.yaml"
    reseeded_config.write_text(yaml.safe_dump(preset | {"index": preset["index"] | {"seed": 1}}))
    reseeded = index_flow(str(reseeded_config), passages_run, force=True, checkpoint=checkpoint, tag=tag)

    verified = {r["uid"] for r in on_updated}
    dev = [c["claim"] for c in store.read_table(ingested["claims/claims"], ["uid", "claim"]).to_pylist() if c["uid"] in verified]

    by_index = {name: _claim_rankings(store, refs["flipr_index"], dev) for name, refs in (("updated", updated), ("rebuild", rebuilt), ("rebuild_seed1", reseeded))}
    overlap, floor = (_top25_overlaps(by_index[name], by_index["rebuild"]) for name in ("updated", "rebuild_seed1"))
    samples, eval_seed = preset["evaluation"]["bootstrap"], preset["evaluation"]["seed"]
    blocks = {"incremental": system_results(on_updated, None, samples, eval_seed), "rebuild": system_results(on_rebuilt, None, samples, eval_seed)}
    paired = paired_results(on_updated, on_rebuilt, samples, eval_seed)
    return {
        "passages": n_corpus,
        "dev_claims": len(on_updated),
        "codec": preset["index"]["codec"],
        "trained_index": tag,
        "trained_models": "trained on the base corpus by the pipeline" if trained_store is None else f"the trained store {trained_store} (trained on the whole corpus); its trained index rebuilt on the base corpus",
        ("pipeline_seconds" if trained_store is None else "trained_base_build_seconds"): train_seconds,
        "trained_rebuild_seconds": rebuild_seconds,
        "trained_update_seconds": {"median": statistics.median(d["seconds"] for d in deltas if d["index"] == tag), "each": [d["seconds"] for d in deltas if d["index"] == tag]},
        "retrieval_at_100": {name: block["all"]["retrieval_at_depth"] for name, block in blocks.items()},
        "retrieval_at_100_by_hops": {name: {h: b["retrieval_at_depth"] for h, b in block.items() if h != "all"} for name, block in blocks.items()},
        "passage_f1": {name: block["all"]["passage_f1"] for name, block in blocks.items()},
        "label_accuracy": {name: block["all"]["label_accuracy"] for name, block in blocks.items()},
        "paired_incremental_minus_rebuild": {m: paired["all"][m] for m in ("retrieval_at_depth", "passage_f1", "label_accuracy")},
        "top25_overlap_trained": round(float(np.mean(overlap)), 4),
        "top25_overlap_trained_interval": [round(v, 4) for v in bootstrap_ci(overlap, seed=seed)],
        "top25_overlap_trained_rebuild_vs_rebuild_other_codec_seed": round(float(np.mean(floor)), 4),
        "top25_overlap_trained_rebuild_vs_rebuild_interval": [round(v, 4) for v in bootstrap_ci(floor, seed=seed)],
        "deltas": deltas,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_hover_mini_option(parser)
    parser.add_argument("--datasets", nargs="+", default=["demo", "hover-mini"], choices=["demo", "hover-mini"])
    parser.add_argument("--work", type=Path, default=Path("/tmp/baleen-incremental"))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "incremental.json")
    parser.add_argument(
        "--full-system", choices=["demo", "hover-mini", "none"], default="demo",
        help="where to measure the full system with trained models: the demo world (about 15 min, trained here) or hover-mini (about 45 min, needs --trained-store)",
    )
    parser.add_argument("--trained-store", type=Path, help="hover-mini's full system: a store benchmarks/training.py trained (copied, not changed)")
    parser.add_argument("--trained-config", type=Path, help="the configuration that store was trained with (the training run's evaluation.yaml)")
    parser.add_argument("--skip-cost", action="store_true", help="only the full-system measurement")
    parser.add_argument("--keep-fp16", action="store_true", help="index.keep_fp16 in the cost runs: the overlaps also with re-ranking from uncompressed tokens")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("BALEEN_HOME", str(args.work / "home"))
    from baleen_core.runtime import apply_runtime_defaults

    apply_runtime_defaults()
    from baleen_core.config import DemoConfig
    from baleen_core.demo_world import write_demo_world
    from prefect.settings import PREFECT_HOME

    from baleen_core.results import git_commit, machine_description, write_results
    from baleen_flows.temporary_server import prefect_api

    # a run for some datasets keeps the others' results (each entry names its own commit)
    earlier = json.loads(args.out.read_text()) if args.out.exists() else {"datasets": {}}
    results = {name: {"commit": earlier.get("commit"), "date": earlier.get("date"), **entry} for name, entry in earlier["datasets"].items()}
    commit = git_commit(ROOT)
    with prefect_api(Path(PREFECT_HOME.value())):  # as the CLI runs its flows
        for name in [] if args.skip_cost else args.datasets:
            if name == "hover-mini":
                if not (args.hover_mini / "claims_dev.json").exists():
                    print(f"hover-mini not found at {args.hover_mini}: skipped", flush=True)
                    continue
                source = args.hover_mini
            else:
                source = write_demo_world(args.work / "demo-source", DemoConfig())
            results[name] = {"commit": commit, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), **run_dataset(name, source, args.work / name, keep_fp16=args.keep_fp16)}
            print(json.dumps({name: {k: v for k, v in results[name].items() if k != "deltas"}}, indent=1), flush=True)
        if args.full_system == "demo":
            source = write_demo_world(args.work / "demo-source", DemoConfig())
            full = run_full_system(source, args.work / "demo-full-system")
        elif args.full_system == "hover-mini":
            if not (args.trained_store and args.trained_config):
                parser.error("--full-system hover-mini needs --trained-store and --trained-config")
            full = run_full_system(args.hover_mini, args.work / "hover-mini-full-system", trained_store=args.trained_store, trained_config=args.trained_config)
        if args.full_system != "none":
            full = {"commit": commit, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), **full}
            results.setdefault(args.full_system, {})["full_system"] = full
            print(json.dumps({f"{args.full_system} full system": {k: v for k, v in full.items() if k != "deltas"}}, indent=1), flush=True)
    document = {
        "commit": commit,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "datasets": results,
    }
    write_results(document, args.out)
    print(f"results file: {args.out}")


if __name__ == "__main__":
    main()
