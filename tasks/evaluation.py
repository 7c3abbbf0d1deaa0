"""Evaluation tasks: run the engine for one system, score it from the artifacts, write the report.

    verify-claims (one system) → predictions + hop_traces → gate → score-predictions → claim_metrics
    … every system …                                                  → evaluation-report

Each system is fingerprinted on its claims, corpus, index, checkpoints and settings, so a rerun
reuses what it already verified. Metrics are computed from the published Parquet artifacts, never
from memory, so ``baleen sql`` over ``claim_metrics`` (or over ``predictions`` and
``gold_facts`` directly) reproduces every number of the report.
"""

from __future__ import annotations

import base64
import io
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from urllib.parse import quote
from uuid import UUID

import pyarrow as pa
from prefect import task

from baleen_core.condensing import SequenceModel
from baleen_core.config import CPU_PRECISION_FIELDS, SYSTEMS, BaleenConfig, SearchConfig
from baleen_core.engine import ClaimInput, HopMemo, Verdict, verify_claims_at_thresholds
from baleen_core.metrics import CLAIM_METRICS as METRICS
from baleen_core.metrics import FUNNEL, metric_label, paired_by_hop_count, summarize_metrics
from baleen_core.retrieval import FliprSearcher, fact_text, passage_text
from baleen_core.retrieval.fusion import hop_retriever
from baleen_core.trace_html import ClaimTrace, TracedFact, TracedHop, TracedPassage, render_claim_html
from baleen_core.trace_markdown import literal, render_claim_markdown
from baleen_core.verdicts import claim_metric_rows, prediction_rows, trace_rows
from baleen_schemas import CLAIM_METRICS, HOP_TRACES, PREDICTIONS
from baleen_storage import ArtifactRef, ArtifactStore, StoreError, fingerprint, fingerprint_params
from baleen_storage.indexes import open_bm25, open_searcher
from baleen_storage.report_server import report_url
from baleen_tasks.condensing import gold_fact_sets, passages_by_pid, reader_settings
from baleen_tasks.labels import held_out_training_uids
from baleen_tasks.policies import GPU_TAG
from baleen_tasks.reporting import Progress, artifact_url, flow_run_info, publish_link, publish_markdown, publish_table, run_logger

#: The report's line on how the FLIPR systems retrieve, per ``search.fusion`` other than none.
FUSION_NOTES = {
    "bm25": "Every FLIPR system retrieves with FLIPR's ranking fused with BM25's (reciprocal rank fusion, `search.fusion: bm25`).",
    "bm25-first-hop": "Every FLIPR system retrieves with BM25 alone from the claim alone (a claim's first hop) and with FLIPR once there is context (`search.fusion: bm25-first-hop`).",
    "bm25-fused-first-hop": "Every FLIPR system retrieves with FLIPR's ranking fused with BM25's from the claim alone (a claim's first hop) and with FLIPR alone once there is context (`search.fusion: bm25-fused-first-hop`).",
}

#: The checkpoints and indexes a system reads (``index`` trained, ``untrained_index`` the backbone's).
ModelRefs = Mapping[str, ArtifactRef]


def eval_producer(system: str) -> str:
    """``eval-SYSTEM``: the producer of a system's evaluation artifacts."""
    return f"eval-{system}"


def trained_config(config: BaleenConfig, models: ModelRefs) -> BaleenConfig:
    """``config`` with the context threshold, the evidence floors and ranker (chosen in training
    when ``training.calibration`` was on), the evidence rule and the facts read
    (``reader.last_read_facts``) the reader was trained with: the engine hands the reader facts
    made as its own were."""
    reader = models.get("reader")
    params = {} if reader is None else reader.manifest.params
    if params.get("context_threshold") is not None:
        config = config.with_stage2_threshold(float(params["context_threshold"]))
    if params.get("evidence_floors") is not None:
        config = config.with_evidence_floors(params["evidence_floors"])
    if params.get("evidence_ranker") is not None:
        config = config.with_evidence_ranker(params["evidence_ranker"], params.get("evidence_ranker_context", False))
    if reader is not None:  # a reader without the keys was trained on the reference's rule, reading the evidence
        config = config.with_evidence_rule(params.get("evidence_rule", "l3x")).with_reader_last_read_facts(params.get("reader", {}).get("last_read_facts"))
    return config


def unresolved_claims(store: ArtifactStore, claims: ArtifactRef, split: str) -> int:
    """Claims of ``split`` left out of the evaluation because a gold fact did not resolve to a
    corpus sentence (their metrics would be wrong: the gold set is incomplete)."""
    table = store.read_table(claims, ["split", "resolved"]).to_pylist()
    return sum(1 for r in table if r["split"] == split and not r["resolved"])


def evaluation_claims(store: ArtifactStore, claims: ArtifactRef, split: str, max_claims: int | None, uids: Sequence[str] | None = None) -> list[dict]:
    """Resolved claims of ``split``, by uid, the first ``max_claims`` of them; or, with ``uids``,
    exactly those claims (whatever their split: the held-out training claims)."""
    rows = [r for r in store.read_table(claims, ["uid", "claim", "label", "num_hops", "split", "resolved"]).to_pylist() if r["resolved"]]
    if uids is not None:
        wanted = set(uids)
        return sorted((r for r in rows if r["uid"] in wanted), key=lambda r: r["uid"])
    rows = [r for r in rows if r["split"] == split]
    if not rows:
        raise ValueError(f"no resolved {split!r} claims in {claims.path}; evaluate a split the claims flow ingested")
    return sorted(rows, key=lambda r: r["uid"])[:max_claims]


#: The index a FLIPR system searches other than the trained FLIPR's, and how to get it when missing.
SYSTEM_INDEXES = {
    "untrained-flipr": ("untrained_index", "run `baleen index` first (the untrained FLIPR)"),
    "colbert-full": ("colbert_index", "run `baleen train` with colbert-full among evaluation.systems (FLIPR trained with full interaction)"),
}
#: What every other FLIPR system (baleen, single-hop) searches.
TRAINED_INDEX = ("index", "run `baleen train` first")


def system_searcher(store: ArtifactStore, system: str, config: BaleenConfig, models: ModelRefs) -> FliprSearcher:
    """The FLIPR searcher of a FLIPR system (every system but ``bm25-multihop``)."""
    kind, remedy = SYSTEM_INDEXES.get(system, TRAINED_INDEX)
    if kind not in models:
        raise StoreError(f"{system} needs the {kind.replace('_', ' ')} of these passages: {remedy}")
    searcher, _ = open_searcher(store, config.search, config.retriever.device, models[kind], full_interaction=system == "colbert-full", warn=run_logger().warning)
    return searcher


def system_retriever(store: ArtifactStore, system: str, config: BaleenConfig, models: ModelRefs, passages: ArtifactRef, sentences: ArtifactRef):
    """The first-stage retriever of ``system`` (see ``baleen_core.config.SYSTEMS``): BM25, or the
    system's FLIPR, fused with BM25 when ``search.fusion`` says so (every FLIPR system alike, so
    that the ablations still isolate what they name, except ``flipr-alone``, which never fuses)."""
    if system == "bm25-multihop":
        return open_bm25(store, passages, sentences)
    if system == "flipr-alone":
        return system_searcher(store, system, config, models)
    search = config.search
    return hop_retriever(system_searcher(store, system, config, models), search.fusion, lambda: open_bm25(store, passages, sentences), search.fusion_hop_counts)


def engine_models(models: ModelRefs, config: BaleenConfig) -> tuple[SequenceModel, SequenceModel, SequenceModel | None]:
    """Stage 1, stage 2 and the reader as the engine runs them (the condensers at their configured
    CPU precision); no reader when ``models`` has none (the run that makes the reader's facts)."""
    condenser = config.condenser
    stage1 = SequenceModel.load("stage1", models["stage1"].path, condenser.device).use_cpu_precision(condenser.stage1_cpu_precision)
    stage2 = SequenceModel.load("stage2", models["stage2"].path, condenser.device).use_cpu_precision(condenser.stage2_cpu_precision)
    reader = SequenceModel.load("reader", models["reader"].path, config.reader.device) if "reader" in models else None
    return stage1, stage2, reader


def _system_inputs(system: str, models: ModelRefs) -> dict[str, str]:
    """Fingerprints of what a system reads."""
    retriever = set() if system == "bm25-multihop" else {SYSTEM_INDEXES.get(system, TRAINED_INDEX)[0]}
    used = {"stage1", "stage2", "reader"} | retriever
    return {name: ref.fingerprint for name, ref in models.items() if name in used}


def trace_table(system: str, verdicts: Sequence[Verdict]) -> pa.Table:
    """``hop_traces`` rows of one system's verdicts."""
    return pa.Table.from_pylist(trace_rows(system, verdicts), schema=HOP_TRACES.schema)


def verdict_tables(system: str, verdicts: Sequence[Verdict]) -> tuple[pa.Table, pa.Table]:
    """``predictions`` and ``hop_traces`` rows of one system's verdicts (read by the reader)."""
    return pa.Table.from_pylist(prediction_rows(system, verdicts), schema=PREDICTIONS.schema), trace_table(system, verdicts)


#: Condenser settings added after engine runs recorded their fingerprints: at their defaults
#: (float32, no evidence floor, the L3x rule, as every earlier run ran) those runs stay reusable.
ENGINE_FIELDS_ADDED_LATER = (*CPU_PRECISION_FIELDS, "evidence_floors", "evidence_rule", "evidence_ranker", "evidence_ranker_context")
SEARCH_FIELDS_ADDED_LATER = ("k_claim_first_hop", "fusion_hop_counts")  # in a run's fingerprint only when set: earlier runs stay reusable
LABEL_ROUND_SEARCH_FIELDS = {"fusion_in_label_rounds"}  # what only the label rounds read: never in an engine run's fingerprint


def engine_search_params(search: SearchConfig, exclude: set[str] | None = None) -> dict:
    """The search settings an engine run depends on, as its fingerprint records them."""
    return fingerprint_params(search, added_later=SEARCH_FIELDS_ADDED_LATER, exclude=LABEL_ROUND_SEARCH_FIELDS | (exclude or set()))


def engine_settings(config: BaleenConfig) -> dict:
    """The condenser settings an engine run depends on."""
    return fingerprint_params(config.condenser, exclude={"device", "batch_size", "stage1_checkpoint", "stage2_checkpoint"}, added_later=ENGINE_FIELDS_ADDED_LATER)


def verify_identity(system: str, claims: ArtifactRef, passages: ArtifactRef, models: ModelRefs, config: BaleenConfig) -> tuple[str, dict, dict, str]:
    """(producer, params, inputs, fingerprint) of one system's verification of the evaluation claims."""
    ev = config.evaluation
    params = {
        "system": system,
        "evaluation": ev.model_dump(mode="json", include={"split", "hops", "depth", "k", "max_claims"}),
        "condenser": engine_settings(config),
        "reader": reader_settings(config.reader),
    }
    if system != "bm25-multihop":  # BM25 reads no search setting: its runs stay reusable when they change
        params["search"] = engine_search_params(config.search, exclude={"fusion", "fusion_hop_counts"} if system == "flipr-alone" else None)
    inputs = {"claims": claims.fingerprint, "passages": passages.fingerprint, **_system_inputs(system, models)}
    return eval_producer(system), params, inputs, fingerprint(step="verify", inputs=inputs, params=params, version=[PREDICTIONS.version, HOP_TRACES.version])


def run_engine(
    store: ArtifactStore, system: str, rows: Sequence[dict], thresholds: Sequence[float], passages: ArtifactRef, sentences: ArtifactRef,
    models: ModelRefs, config: BaleenConfig, label: str, memo: HopMemo | None = None,
) -> tuple[list[list[Verdict]], dict]:
    """Verdicts of ``rows`` at each stage-2 threshold (one engine pass shares what they have in
    common, :func:`verify_claims_at_thresholds`, and with earlier passes through ``memo``) and the
    pass's throughput."""
    ev = config.evaluation
    retriever = system_retriever(store, system, config, models, passages, sentences)
    stage1, stage2, reader = engine_models(models, config)
    claim_inputs = [ClaimInput(r["uid"], r["claim"], int(r["num_hops"])) for r in rows]
    hop_work = sum(ev.hops or c.num_hops for c in claim_inputs) if system != "single-hop" else len(claim_inputs)
    started, before = time.perf_counter(), (0, 0) if memo is None else (memo.computed, memo.reused)
    with Progress(hop_work * len(thresholds), label, unit="claim-hop") as progress:
        verdicts = verify_claims_at_thresholds(
            claim_inputs, thresholds, retriever, lambda pids: passages_by_pid(store, passages, sentences, pids), stage1, stage2, reader,
            config.condenser, config.reader, depth=ev.depth, k=ev.k, hops=ev.hops, on_hop=lambda hop, n: progress.update(n), single_hop=system == "single-hop",
            memo=memo,
        )
    seconds = time.perf_counter() - started
    flipr = getattr(retriever, "flipr", None)  # FLIPR alone or fused; BM25 has none
    device = str(flipr.device) if flipr is not None else str(stage1.device)
    stats = {"claims": len(rows), "seconds": round(seconds, 1), "claims_per_second": round(len(rows) * len(thresholds) / max(seconds, 1e-9), 3), "device": device}
    if len(thresholds) > 1:
        stats["thresholds"] = len(thresholds)
    reuse = ""
    if memo is not None:  # (claim, context) hops this pass computed, and took from earlier passes
        stats["hops_computed"], stats["hops_reused"] = memo.computed - before[0], memo.reused - before[1]
        reuse = f"; {stats['hops_computed']:,} hops computed, {stats['hops_reused']:,} taken from earlier passes"
    run_logger().info("%s: %d claims × %d threshold(s) in %.1f s (%.2f claims/s on %s)%s", system, len(rows), len(thresholds), seconds, stats["claims_per_second"], device, reuse)
    return verdicts, stats


def publish_verdicts(store: ArtifactStore, system: str, verdicts: Sequence[Verdict], stats: dict, **meta) -> dict[str, ArtifactRef]:
    """``predictions`` and ``hop_traces`` of one system's verdicts (throughput in their manifests)."""
    predictions, traces = verdict_tables(system, verdicts)
    with store.writer("predictions", **meta, flow_run=flow_run_info()) as writer:
        writer.write(predictions)
        writer.stats = stats
    with store.writer("hop_traces", **meta, flow_run=flow_run_info()) as traces_writer:
        traces_writer.write(traces)
        traces_writer.stats = stats
    return {"predictions": writer.ref, "hop_traces": traces_writer.ref}


@task(name="verify-claims", task_run_name="verify · {system}", tags=[GPU_TAG])
def verify_split(
    store_root: str,
    system: str,
    claims: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    models: dict[str, ArtifactRef],
    config: BaleenConfig,
    run_id: str,
    force: bool = False,
) -> dict[str, ArtifactRef]:
    """Run the engine for ``system`` on the evaluation claims; publish ``predictions`` and
    ``hop_traces`` (throughput in their manifests)."""
    store, ev = ArtifactStore(store_root), config.evaluation
    producer, params, inputs, fp = verify_identity(system, claims, passages, models, config)
    if not force and (reused := store.find_outputs(["predictions", "hop_traces"], producer, fp)):
        run_logger().info("%s already verified these claims: reusing run %s", system, reused["predictions"].manifest.run_id)
        return reused
    rows = evaluation_claims(store, claims, ev.split, ev.max_claims)
    verdicts, stats = run_engine(store, system, rows, [config.condenser.stage2_threshold], passages, sentences, models, config, f"verify {len(rows)} {ev.split} claims · {system}")
    return publish_verdicts(store, system, verdicts[0], stats, run_id=run_id, producer=producer, fingerprint=fp, inputs=inputs, params=params)


def reader_facts_producer(threshold: float, ranked_context: bool = False) -> str:
    """``reader-facts-tTHRESHOLD`` (e.g. ``reader-facts-t-1``): the engine's run over the held-out
    training claims at one context threshold, whose final facts the reader may train on;
    ``reader-facts-ranked-tTHRESHOLD`` when the evidence ranker's scores set the context."""
    return f"reader-facts-{'ranked-' if ranked_context else ''}t{threshold:g}"


@task(name="verify-held-out", task_run_name="verify-held-out-claims · the reader's training facts", tags=[GPU_TAG])
def verify_held_out(
    store_root: str,
    claims: ArtifactRef,
    gold_facts: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    models: dict[str, ArtifactRef],
    config: BaleenConfig,
    thresholds: Sequence[float],
    run_id: str,
    force: bool = False,
    memo: HopMemo | None = None,
) -> list[tuple[float, ArtifactRef]]:
    """The full system without its reader (``models``: ``index``, ``stage1``, ``stage2``) over the
    training claims no label round labelled (``labels.held_out_share``), so that neither FLIPR nor
    the condensers trained on them, at the evaluation's settings and at each context threshold of
    ``thresholds`` (one engine pass, :func:`~baleen_core.engine.verify_claims_at_thresholds`):
    their final facts are shaped as the engine's for a new claim; the calibration chooses a
    threshold on them and the reader trains on its facts. Each threshold's run is published as
    ``hop_traces`` of its own producer (``reader-facts-tT``) and reused when nothing it depends on changed.
    A ``memo`` carries the hops computed from one call to the next (the calibration's later passes);
    it is bound to the claims, passages, models and search settings, and starts over when they change."""
    store = ArtifactStore(store_root)
    uids = sorted(held_out_training_uids(store, claims, gold_facts, config.labels))
    if not uids:
        raise ValueError(
            "no training claim is held out of the label rounds (labels.held_out_share), so the reader has no engine facts of unseen "
            "claims to train on: raise labels.held_out_share, or train the reader on gold facts alone (training.reader.inputs: gold)"
        )
    used = {name: models[name] for name in ("index", "stage1", "stage2")}
    inputs = {"claims": claims.fingerprint, "passages": passages.fingerprint, **{name: ref.fingerprint for name, ref in used.items()}}
    # what every threshold's run shares, and so what a memo's hops are bound to
    common = {"uids": uids, "evaluation": config.evaluation.model_dump(mode="json", include={"hops", "depth", "k"}), "search": engine_search_params(config.search)}
    identities = []
    for threshold in thresholds:
        params = {**common, "condenser": engine_settings(config.with_stage2_threshold(threshold))}
        identities.append((threshold, params, fingerprint(step="verify_held_out", inputs=inputs, params=params, version=HOP_TRACES.version)))
    producer = lambda threshold: reader_facts_producer(threshold, config.condenser.evidence_ranker_context)  # noqa: E731
    found = {threshold: None if force else store.find("hop_traces", producer(threshold), fp) for threshold, _, fp in identities}
    missing = [identity for identity in identities if found[identity[0]] is None]
    if missing:
        rows = evaluation_claims(store, claims, "train", None, uids)
        label = f"verify {len(rows)} held-out training claims · baleen without its reader · {len(missing)} context threshold(s)"
        if memo is not None:
            memo = memo.bound(fingerprint(step="verify_held_out", inputs=inputs, params=common))
        verdicts, stats = run_engine(store, "baleen", rows, [threshold for threshold, _, _ in missing], passages, sentences, used, config, label, memo)
        for (threshold, params, fp), threshold_verdicts in zip(missing, verdicts, strict=True):
            with store.writer("hop_traces", run_id=run_id, producer=reader_facts_producer(threshold, config.condenser.evidence_ranker_context), fingerprint=fp, inputs=inputs, params=params, flow_run=flow_run_info()) as writer:
                writer.write(trace_table("baleen", threshold_verdicts))
                writer.stats = stats
            found[threshold] = writer.ref
    run_logger().info("held-out training claims: %d threshold run(s) verified now, %d reused", len(missing), len(identities) - len(missing))
    return [(threshold, found[threshold]) for threshold in thresholds]


def _gold(store: ArtifactStore, claims: ArtifactRef, gold_facts: ArtifactRef, uids: Sequence[str] | None = None) -> tuple[dict[str, dict], dict[str, set[tuple[int, int]]]]:
    """Claim rows and gold (pid, sid) sets by uid: of every claim, or only of ``uids``."""

    columns = ["uid", "claim", "label", "num_hops"]
    rows = store.read_table(claims, columns) if uids is None else store.read_rows(claims, "uid", uids, columns)
    return {r["uid"]: r for r in rows.to_pylist()}, gold_fact_sets(store, gold_facts, uids)


@task(name="score-predictions", task_run_name="score · {system}")
def score_predictions(
    store_root: str, system: str, predictions: ArtifactRef, hop_traces: ArtifactRef, claims: ArtifactRef, gold_facts: ArtifactRef, run_id: str, force: bool = False
) -> ArtifactRef:
    """HoVer's metrics per claim, read back from the published artifacts → ``claim_metrics``.
    Fingerprinted on everything it reads: the claims (labels, ``num_hops``) as well as the
    predictions, traces and gold facts."""
    store, producer = ArtifactStore(store_root), eval_producer(system)
    inputs = {"predictions": predictions.fingerprint, "hop_traces": hop_traces.fingerprint, "claims": claims.fingerprint, "gold_facts": gold_facts.fingerprint}
    fp = fingerprint(step="claim_metrics", inputs=inputs, version=CLAIM_METRICS.version)
    if not force and (reused := store.find("claim_metrics", producer, fp)):
        return reused
    claim_rows, gold = _gold(store, claims, gold_facts)
    depth = int(predictions.manifest.params["evaluation"]["depth"])  # the pool the engine filled
    rows = claim_metric_rows(store.read_table(predictions).to_pylist(), store.read_table(hop_traces).to_pylist(), claim_rows, gold, depth)
    with store.writer("claim_metrics", run_id=run_id, producer=producer, fingerprint=fp, inputs=inputs, params={"system": system}, flow_run=flow_run_info()) as writer:
        writer.write(pa.Table.from_pylist(rows, schema=CLAIM_METRICS.schema))
    return writer.ref


# ---- the report -------------------------------------------------------------------------------


def summary_rows(metric_rows: Mapping[str, Sequence[dict]], samples: int, seed: int) -> list[dict]:
    """One row per system × hop count: each metric's mean and bootstrap 95% interval."""
    return [{"system": system, **row} for system, rows in metric_rows.items() for row in summarize_metrics(rows, METRICS, samples, seed)]


#: What the full system is compared on against each baseline, claim by claim.
COMPARED = ("passage_f1", "sentence_f1", "retrieval_at_hops", "label_accuracy")


def difference_rows(metric_rows: Mapping[str, Sequence[dict]], main: str, samples: int, seed: int) -> list[dict]:
    """``main`` minus every other system, per hop count and overall, on the claims both verified:
    the mean difference of each metric in :data:`COMPARED`, its paired-bootstrap 95% interval,
    and the share of resamples in which ``main`` is not ahead (``<metric>_p``)."""
    mine = {r["uid"]: r for r in metric_rows[main]}
    out = []
    for other, rows in metric_rows.items():
        if other == main:
            continue
        pairs = [(mine[r["uid"]], r) for r in rows if r["uid"] in mine]
        for hops, claims, diffs in paired_by_hop_count(pairs, COMPARED, samples, seed):
            row: dict = {"system": f"{main} − {other}", "hops": hops, "claims": claims}
            for metric, diff in diffs.items():
                row[metric], row[f"{metric}_ci"], row[f"{metric}_p"] = (diff.mean, diff.ci, diff.p_not_greater) if diff else (None, None, None)
            out.append(row)
    return out


def _per_hop_table(first: str, columns: Sequence[str], rows: Iterable[tuple[str, str, int, list[str]]]) -> str:
    """A Markdown table of (name, hop count, claims, cells) rows: the shape of every per-hop table
    in the report."""
    head = f"| {first} | hops | claims | " + " | ".join(columns) + " |\n|---|---|---|" + "---|" * len(columns) + "\n"
    return head + "\n".join(f"| {name} | {hops} | {claims} | " + " | ".join(cells) + " |" for name, hops, claims, cells in rows)


def differences_table(differences: Sequence[dict]) -> str:
    def cell(row: dict, m: str) -> str:
        return "—" if row[m] is None else f"{row[m]:+.3f} [{row[m + '_ci'][0]:+.3f}, {row[m + '_ci'][1]:+.3f}] p={row[m + '_p']:.3f}"

    rows = ((row["system"], row["hops"], row["claims"], [cell(row, m) for m in COMPARED]) for row in differences)
    return (
        _per_hop_table("comparison", [f"Δ {m}" for m in COMPARED], rows) + "\n\nEach cell: mean difference on the same claims [paired bootstrap 95% interval]; "
        "p = share of resamples in which the first system is not ahead.\n"
    )


def funnel_table(metric_rows: Mapping[str, Sequence[dict]]) -> str:
    """Where each system loses the gold passages, per hop count: the means of :data:`FUNNEL`."""
    columns = ["gold retrieved", "in stage 1's picks", "in the final facts", "gold sentences kept", "final facts", "their passages"]

    def cell(row: dict, m: str) -> str:
        return "—" if row[m] is None else f"{row[m]:.1f}" if m in ("final_facts", "final_passages") else f"{row[m]:.3f}"

    rows = ((system, row["hops"], row["claims"], [cell(row, m) for m in FUNNEL]) for system, per_system in metric_rows.items() for row in summarize_metrics(per_system, FUNNEL, samples=0))
    return (
        _per_hop_table("system", columns, rows) + "\n\nShares of each claim's gold passages, averaged over claims: retrieved at any hop, put "
        "forward by stage 1, among the final facts' passages; then the share of gold sentences among the final facts, and how many "
        "final facts a claim ends with, from how many passages.\n"
    )


#: Metric columns per table in the Prefect UI: its artifact column is about 650 pixels wide, and
#: the new UI draws a wider table under the details beside it.
UI_METRICS_PER_TABLE = 4


def markdown_table(summary: Sequence[dict], throughput: Mapping[str, dict], depth: int, metrics_per_table: int = len(METRICS)) -> str:
    """The metrics by system and hop count, ``metrics_per_table`` columns of them per table, and the
    throughput; Retrieval@depth is named by ``depth``, the engine's retrieval depth."""

    def cell(row: dict, m: str) -> str:
        return "—" if row[m] is None else f"{row[m]:.3f} [{row[m + '_ci'][0]:.3f}, {row[m + '_ci'][1]:.3f}]"

    tables = []
    for start in range(0, len(METRICS), metrics_per_table):
        shown = METRICS[start : start + metrics_per_table]
        rows = ((row["system"], row["hops"], row["claims"], [cell(row, m) for m in shown]) for row in summary)
        tables.append(_per_hop_table("system", [metric_label(m, depth) for m in shown], rows))
    speed = "\n".join(f"| {s} | {t['claims']} | {t['seconds']} | {t['claims_per_second']} | {t['device']} |" for s, t in throughput.items())
    return (
        "\n\n".join(tables) + "\n\nEach cell: mean [bootstrap 95% interval]. retrieval_at_hops: every gold passage read by the condensers "
        f"(k per hop); {metric_label('retrieval_at_depth', depth)}: every gold passage among the first {depth} distinct passages retrieved "
        "over the hops.\n\n| system | claims | seconds | claims/s | device |\n|---|---|---|---|---|\n" + speed + "\n"
    )


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    if fig.get_layout_engine() is None:  # a figure laid out as it was made keeps that layout
        fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plotted_metrics(summary: Sequence[dict]) -> list[str]:
    """The metrics worth a panel: those some system scores above 0 on (an all-zero panel shows nothing)."""
    return [m for m in METRICS if any((r[m] or 0.0) > 0 for r in summary)]


def metrics_by_hops_plot(summary: Sequence[dict], depth: int | None = None) -> bytes:
    """One panel per metric that is not zero everywhere: grouped bars (systems) per hop count,
    with the 95% intervals. Two panels a row and one legend above them: the figure stays readable
    where it is shown narrow (the Prefect UI's artifact column is about 650 pixels wide)."""
    plt = _pyplot()
    systems = list(dict.fromkeys(r["system"] for r in summary))
    groups = list(dict.fromkeys(r["hops"] for r in summary))
    metrics = plotted_metrics(summary) or list(METRICS[:1])
    columns = min(2, len(metrics))
    rows_of_panels = -(-len(metrics) // columns)
    fig, axes = plt.subplots(rows_of_panels, columns, figsize=(3.6 * columns, 2.6 * rows_of_panels + 0.5), sharey=True, squeeze=False, layout="constrained")
    for ax in axes.ravel()[len(metrics) :]:
        ax.remove()
    width = 0.8 / len(systems)
    for ax, metric in zip(axes.ravel(), metrics, strict=False):
        for i, system in enumerate(systems):
            rows = {r["hops"]: r for r in summary if r["system"] == system}
            xs = [g + (i - (len(systems) - 1) / 2) * width for g in range(len(groups))]
            values = [rows[g][metric] or 0.0 for g in groups]
            intervals = [rows[g][f"{metric}_ci"] or (v, v) for v, g in zip(values, groups, strict=True)]
            errors = [[max(0.0, v - lo) for v, (lo, _) in zip(values, intervals, strict=True)], [max(0.0, hi - v) for v, (_, hi) in zip(values, intervals, strict=True)]]
            ax.bar(xs, values, width, yerr=errors, capsize=2, label=system)
        # a little headroom above 1 keeps the caps of intervals that reach 1 inside the axes
        ax.set(title=metric_label(metric, depth), xticks=range(len(groups)), xticklabels=[f"{g} hops" if g != "all" else "all" for g in groups], ylim=(0, 1.08))
    fig.legend(*axes.ravel()[0].get_legend_handles_labels(), loc="outside upper center", ncols=min(len(systems), 3), fontsize=8, frameon=False)
    left_out = [m for m in METRICS if m not in metrics]
    if left_out:
        fig.supxlabel("0 for every system, not drawn: " + ", ".join(metric_label(m, depth) for m in left_out), fontsize=8, color="#555555")
    return _png(fig)


def retrieval_curve_plot(retrieved: Mapping[str, Mapping[str, list[int]]], gold_pids: Mapping[str, set[int]], max_k: int = 100) -> bytes:
    """Retrieval@k (every gold passage within the first k of the claim's pool) against k, per system."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ks = list(range(1, max_k + 1))
    for system, by_uid in retrieved.items():
        # the rank at which a claim's last gold passage appears; never = beyond every k
        complete = []
        for uid, pids in by_uid.items():
            position = {pid: i + 1 for i, pid in enumerate(pids)}
            ranks = [position.get(pid) for pid in gold_pids[uid]]
            complete.append(max(ranks) if all(ranks) else None)
        ax.plot(ks, [sum(1 for c in complete if c is not None and c <= k) / len(complete) for k in ks], label=system)
    ax.set(xlabel="k (distinct passages retrieved over all hops, in hop then rank order)", ylabel="Retrieval@k", ylim=(0, 1), title="Retrieval@k")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def first_found_plot(metric_rows: Mapping[str, Sequence[dict]]) -> bytes:
    """Where gold passages were first retrieved: share at hop 1, 2, 3, 4 or never, per system."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    systems = list(metric_rows)
    hops = sorted({h for rows in metric_rows.values() for r in rows for h in r["gold_first_hop"] if h is not None})
    bottoms = [0.0] * len(systems)
    for label in [*hops, None]:
        shares = []
        for system in systems:
            found = [h for r in metric_rows[system] for h in r["gold_first_hop"]]
            shares.append(sum(h == label for h in found) / max(1, len(found)))
        ax.barh(systems, shares, left=bottoms, label=f"hop {label}" if label else "never", color=None if label else "#bbbbbb")
        bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
    ax.set(xlabel="share of gold passages", xlim=(0, 1), title="Where gold passages were first retrieved")
    ax.legend(fontsize=8, ncols=len(hops) + 1, loc="lower center", bbox_to_anchor=(0.5, -0.42))
    return _png(fig)


def claim_trace(
    store: ArtifactStore,
    system: str,
    uid: str,
    outputs: Mapping[str, ArtifactRef],
    claims: ArtifactRef,
    gold_facts: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    searcher: FliprSearcher | None = None,
    explained: int = 3,
) -> ClaimTrace:
    """One evaluated claim, from ``outputs`` (its system's predictions, hop_traces and, when
    present, claim_metrics), ready for :func:`render_claim_html`; the top ``explained`` passages
    of each hop, and every gold one, carry ``searcher``'s token matches."""
    prediction = next(iter(store.read_rows(outputs["predictions"], "uid", [uid]).to_pylist()), None)
    if prediction is None:
        raise KeyError(f"claim {uid!r} is not among the {system} predictions in {outputs['predictions'].path}")
    traces = sorted(store.read_rows(outputs["hop_traces"], "uid", [uid]).to_pylist(), key=lambda r: r["hop"])
    claim_rows, gold = _gold(store, claims, gold_facts, [uid])
    claim, claim_gold = claim_rows[uid], gold.get(uid, set())
    gold_pids = {pid for pid, _ in claim_gold}
    pids = set(gold_pids) | {pid for t in traces for pid in t["retrieved_pids"]}
    texts = passages_by_pid(store, passages, sentences, pids)
    sentence = {s.key: s for p in texts.values() for s in p.sentences}

    def facts(pids_, sids, scores) -> tuple[TracedFact, ...]:
        return tuple(TracedFact(p, s, sentence[(p, s)].title, sentence[(p, s)].text, x, (p, s) in claim_gold) for p, s, x in zip(pids_, sids, scores, strict=True) if (p, s) in sentence)

    hops, context = [], []
    for t in traces:
        shown = []
        for rank, (pid, score) in enumerate(zip(t["retrieved_pids"], t["retrieved_scores"], strict=True)):
            p = texts.get(pid)
            title, text = (p.title, " ".join(s.text for s in p.sentences)) if p else (str(pid), "")
            matches = ()
            if searcher is not None and (rank < explained or pid in gold_pids):
                matches = tuple(searcher.explain(claim["claim"], context, passage_text(title, text))[1])
            shown.append(TracedPassage(pid, title, text, score, pid in gold_pids, matches))
        kept = facts(t["kept_pids"], t["kept_sids"], t["kept_scores"])
        evidence = facts(t["evidence_pids"], t["evidence_sids"], t["evidence_scores"])
        hops.append(TracedHop(t["hop"], tuple(shown), facts(t["stage1_pids"], t["stage1_sids"], t["stage1_scores"]), kept, evidence, tuple(t["pool_pids"])))
        context = [fact_text(f.title, f.text) for f in kept]
    metrics = {}
    if "claim_metrics" in outputs:
        row = next(iter(store.read_rows(outputs["claim_metrics"], "uid", [uid]).to_pylist()), {})
        metrics = {m: row.get(m) for m in METRICS}
    return ClaimTrace(
        uid, system, claim["claim"], int(claim["num_hops"]), claim["label"], prediction["label"], prediction["prob_supported"], tuple(hops),
        facts(prediction["fact_pids"], prediction["fact_sids"], prediction["fact_scores"]),
        tuple(TracedFact(p, s, sentence[(p, s)].title, sentence[(p, s)].text, None, True) for p, s in sorted(claim_gold) if (p, s) in sentence),
        metrics,
    )


#: The most the report artifact embeds as data URIs, all plots together (characters of base64).
#: Prefect's server stores an artifact's data as JSON with no cap of its own, but the UI fetches it
#: whole, and its Artifacts page every artifact's latest version at once: a megabyte keeps both
#: quick (the three plots take about 0.15 MB on the demo).
EMBEDDED_PLOTS_LIMIT = 1_000_000


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def embedded_plots(plots: Mapping[str, bytes], folder: Path, limit: int = EMBEDDED_PLOTS_LIMIT) -> str:
    """The plots as Markdown images that carry their PNG (the Prefect UI cannot reach the files
    beside report.md); a plot that would take the total past ``limit`` becomes a line saying where
    its file is."""
    lines, used = [], 0
    for name, png in plots.items():
        uri = png_data_uri(png)
        if used + len(uri) > limit:
            lines.append(f"*{name} ({len(png) // 1024} KiB) is too large to show here; it is beside the report: {folder / name}*")
            continue
        used += len(uri)
        lines.append(f"![{name}]({uri})")
    return "\n\n".join(lines)


def plot_files(paths: Mapping[str, Path]) -> str:
    """The plots as Markdown images of the files beside report.md (relative, so the folder can move)."""
    return "\n\n".join(f"![{name}]({path.name})" for name, path in paths.items())


def _claim_line(trace: ClaimTrace, width: int = 110) -> str:
    claim = trace.claim if len(trace.claim) <= width else trace.claim[: width - 1] + "…"
    return f"{trace.num_hops} hops, predicted {trace.label}, gold {trace.gold_label}: {literal(claim)}"


def trace_files(traces: Sequence[tuple[ClaimTrace, Path]]) -> str:
    """Links from report.md to the HTML traces in ``traces/`` beside it."""
    return "\n".join(f"- [{literal(t.uid)}](traces/{quote(path.name)}): {_claim_line(t)}" for t, path in traces)


def trace_artifact_links(traces: Sequence[tuple[ClaimTrace, Path]], artifact_ids: Sequence[UUID | None], reports_root: Path) -> str:
    """Links from the report artifact: to each trace's markdown artifact in the UI, and to its HTML
    page on the report server (a browser will not follow a file:// link out of an http:// page)."""
    if not traces:
        return ""
    lines = []
    for (t, path), artifact_id in zip(traces, artifact_ids, strict=True):
        name = f"[{literal(t.uid)}]({artifact_url(artifact_id)})" if artifact_id else literal(t.uid)
        lines.append(f"- {name}: {_claim_line(t)} ([HTML]({report_url(reports_root, path)}))")
    return "\n".join(lines) + "\n\nHTML pages (every FLIPR token match) open while `baleen reports serve` runs."


def report_markdown(heading: str, plots: str, traces: str, main: str) -> str:
    """The report around its plots and trace links, which differ between report.md (files beside
    it) and the Prefect artifact (plots embedded, links into the UI and to the report server)."""
    return f"{heading}\n{plots}\n" + (f"\n## Traces of the worst claims ({main})\n\n{traces}\n" if traces else "")


def publish_traces(traces: Sequence[tuple[ClaimTrace, Path]], split: str) -> list[UUID | None]:
    """Each worst claim's trace as a markdown artifact, keyed by rank (``evaluation-<split>-worst-1``
    is always the worst claim of the latest run); their ids (None outside a run)."""
    return [
        publish_markdown(key=f"evaluation-{split}-worst-{rank}", markdown=render_claim_markdown(t), description=f"Trace of claim {t.uid}, the {t.system} system's #{rank} worst on {split} (HTML: {path})")
        for rank, (t, path) in enumerate(traces, 1)
    ]


def worst_claims(rows: Sequence[dict], n: int) -> list[str]:
    """The ``n`` claims the system did worst on: lowest passage F1, then wrong label, then most hops."""
    ranked = sorted(rows, key=lambda r: (r["passage_f1"], r["label_accuracy"] or 0.0, -r["num_hops"], r["uid"]))
    return [r["uid"] for r in ranked[:n]]


@task(name="evaluation-report", task_run_name="evaluation-report · {split}")
def evaluation_report(
    store_root: str,
    outputs: dict[str, dict[str, ArtifactRef]],
    claims: ArtifactRef,
    gold_facts: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    models: dict[str, ArtifactRef],
    config: BaleenConfig,
    split: str,
    run_id: str,
) -> dict:
    """The metric table (systems × hop counts, bootstrap intervals), throughput, three plots and
    traces of the full system's worst claims: files under ``reports/<run>/evaluation/`` (report.md
    beside its plots, HTML traces in ``traces/``), and Prefect artifacts: the metric table, the
    report with its plots embedded, each worst claim's trace as markdown, and a link to the worst
    one's HTML page on the report server."""
    store, ev = ArtifactStore(store_root), config.evaluation
    metric_rows = {system: store.read_table(refs["claim_metrics"]).to_pylist() for system, refs in outputs.items()}
    summary = summary_rows(metric_rows, ev.bootstrap, ev.seed)
    throughput = {system: refs["predictions"].manifest.stats for system, refs in outputs.items()}
    _, gold = _gold(store, claims, gold_facts)
    retrieved: dict[str, dict[str, list[int]]] = {}
    for system, refs in outputs.items():
        by_uid = retrieved.setdefault(system, {})
        for t in sorted(store.read_table(refs["hop_traces"], ["uid", "hop", "pool_pids"]).to_pylist(), key=lambda t: (t["uid"], t["hop"])):
            by_uid.setdefault(t["uid"], []).extend(t["pool_pids"])
    plots = {
        "metrics-by-hops.png": metrics_by_hops_plot(summary, ev.depth),
        "retrieval-at-k.png": retrieval_curve_plot(retrieved, {uid: {pid for pid, _ in g} for uid, g in gold.items()}, ev.depth),
        "gold-first-found.png": first_found_plot(metric_rows),
    }
    paths = {name: store.write_report(run_id, f"evaluation/{name}", data) for name, data in plots.items()}
    traces: list[tuple[ClaimTrace, Path]] = []
    main = "baleen" if "baleen" in outputs else next(iter(outputs))
    if ev.worst_claims:
        searcher = None
        if main != "bm25-multihop":
            searcher = system_searcher(store, main, config, models)
        for uid in worst_claims(metric_rows[main], ev.worst_claims):
            trace = claim_trace(store, main, uid, outputs[main], claims, gold_facts, passages, sentences, searcher)
            traces.append((trace, store.write_report(run_id, f"evaluation/traces/{main}-{uid}.html", render_claim_html(trace))))
    differences = difference_rows(metric_rows, main, ev.bootstrap, ev.seed) if len(outputs) > 1 else []
    comparisons = f"\n## {main} against each other system, claim by claim\n\n" + differences_table(differences) if differences else ""
    comparisons += "\n## Where the gold passages are lost\n\n" + funnel_table(metric_rows)
    table = markdown_table(summary, throughput, ev.depth) + comparisons
    systems = "\n".join(f"- **{s}**: {SYSTEMS[s]}" for s in outputs)
    if config.search.fusion in FUSION_NOTES:
        systems += f"\n\n{FUSION_NOTES[config.search.fusion]}"
        if (counts := config.search.fusion_hop_counts) is not None:
            systems += f" So do only the claims of {' or '.join(map(str, counts))} hops (`search.fusion_hop_counts`); every other claim retrieves with FLIPR alone."
    unresolved = unresolved_claims(store, claims, split)
    left_out = f"; {unresolved} {split} claims left out: a gold fact did not resolve to a corpus sentence (see rejects)" if unresolved else ""
    title = f"# Evaluation on {split} ({len(metric_rows[main])} claims, context threshold {config.condenser.stage2_threshold:g}{left_out})\n\n{systems}\n\n"
    report = store.write_report(run_id, "evaluation/report.md", report_markdown(f"{title}{table}\n", plot_files(paths), trace_files(traces), main))
    publish_table(
        key=f"evaluation-{split}",
        table=[{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items() if not k.endswith("_ci")} for row in summary],
        description=f"HoVer metrics on {split}, every system × hop count (bootstrap intervals in {report})",
    )
    reports_root = store.root / "reports"
    trace_ids = publish_traces(traces, split)
    ui_heading = f"{title}{markdown_table(summary, throughput, ev.depth, UI_METRICS_PER_TABLE)}{comparisons}\n"
    ui_markdown = report_markdown(ui_heading, embedded_plots(plots, report.parent), trace_artifact_links(traces, trace_ids, reports_root), main)
    publish_markdown(key=f"evaluation-{split}-report", markdown=ui_markdown, description=f"Evaluation report ({report})")
    for _, path in traces[:1]:
        publish_link(
            key=f"evaluation-{split}-worst-trace",
            link=report_url(reports_root, path),
            description=f"HTML trace of the worst {main} claim, served by `baleen reports serve` (start it, then open this); the same trace is the markdown artifact evaluation-{split}-worst-1",
        )
    run_logger().info("evaluation report: %s\n%s", report, table)
    return {
        "report": str(report), "summary": summary, "differences": differences, "plots": [str(p) for p in paths.values()], "traces": [str(p) for _, p in traces],
        "unresolved_claims": unresolved,
    }
