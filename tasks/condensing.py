"""Condenser and reader tasks: train stage 1, stage 2 and the reader on a label round, and
measure them on the dev claims' gold passages.

Each task is fingerprinted on its inputs and settings (a rerun reuses the published checkpoint)
and trains through :func:`baleen_core.training.loop.train_epochs`, whose epoch checkpoints in
``<store>/work/`` let a killed run resume.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from prefect import task

from baleen_core.condensing import PassageSentences, Sentence, SequenceModel
from baleen_core.condensing.calibration import LastRead, calibrate_evidence_floors, calibrate_threshold, floor_trial_row, ranked_last_read, reader_facts_at_floors, threshold_trial_row
from baleen_core.condensing.evaluation import GoldClaim, evaluate_on_gold_passages
from baleen_core.condensing.evidence_ranker import HopRead, fit_evidence_ranker, ranker_summary
from baleen_core.condensing.lexical import training_stats as lexical_training_stats
from baleen_core.config import CPU_PRECISION_FIELDS, OPTIMIZER_FIELDS_ADDED_LATER, READER_FIELDS_ADDED_LATER, CondenserConfig, EvidenceRankerWeights, ReaderConfig, ReaderTrainingConfig, Stage1TrainingConfig, Stage2TrainingConfig, json_floors, parse_floors
from baleen_core.held_out import split_held_out
from baleen_core.metrics import summarize_metrics
from baleen_core.training.condenser_trainer import (
    LabelledHop,
    ReaderClaim,
    contrast_pairs,
    labelled_hop_pids,
    labelled_hops,
    reader_claims,
    reader_examples,
    select_hops,
    stage1_examples,
    stage2_examples,
    stage2_ranked_hops,
    train_reader,
    train_stage1,
    train_stage2,
)
from baleen_core.training.reader_augmentation import reader_training_sets
from baleen_schemas import READER_CHECKPOINT, STAGE1_CHECKPOINT, STAGE2_CHECKPOINT
from baleen_storage import ArtifactRef, ArtifactStore, fingerprint, fingerprint_params
from baleen_storage.indexes import open_bm25
from baleen_tasks.policies import GPU_TAG
from baleen_tasks.reporting import Progress, publish_table, readable, run_logger
from baleen_tasks.training import publish_trained_model

SENTENCE_METRICS = ("stage1_recall", "final_facts", "sentence_precision", "sentence_recall", "sentence_f1", "sentence_em", "all_sentences_f1")
READER_METRICS = ("reader_correct_gold", "reader_correct_final")


def passages_by_pid(store: ArtifactStore, passages: ArtifactRef, sentences: ArtifactRef, pids) -> dict[int, PassageSentences]:
    """Every given pid the corpus holds, with its non-empty sentences (a passage whose sentences
    are all empty comes with none); a pid the corpus does not hold is left out, and the engine
    names it (:class:`~baleen_core.engine.MissingPassageText`)."""
    table = store.passage_sentences(passages, sentences, pids).to_pylist()
    grouped: dict[int, list[Sentence]] = {}
    titles: dict[int, str] = {}
    for row in table:
        titles[row["pid"]] = row["title"]
        grouped.setdefault(row["pid"], []).append(Sentence(row["pid"], row["sid"], row["title"], row["text"]))
    found = {pid: PassageSentences(pid, titles[pid], tuple(s)) for pid, s in grouped.items()}
    if untold := sorted(set(pids) - found.keys()):  # a passage whose every sentence is empty: a title, nothing to score
        for row in store.passage_texts(passages, sentences, pids=untold).to_pylist():
            found[row["pid"]] = PassageSentences(row["pid"], row["title"], ())
    return found


def read_labelled_hops(
    store: ArtifactStore,
    labels: ArtifactRef,
    claims: ArtifactRef,
    gold_facts: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    negatives: int,
    max_hops: int | None = None,
    max_claims: int | None = None,
) -> list[LabelledHop]:
    """:func:`baleen_core.training.condenser_trainer.labelled_hops` over the stored label round:
    only the rows :func:`~baleen_core.training.condenser_trainer.select_hops` keeps are read in full."""
    rows = select_hops(store.read_table(labels, ["uid", "hop", "context_pids", "positive_pid", "negative_pids"]).to_pylist(), max_hops, max_claims)
    claim_rows = {c["uid"]: c for c in store.read_table(claims, ["uid", "claim", "label"]).to_pylist()}
    texts = passages_by_pid(store, passages, sentences, labelled_hop_pids(rows, negatives))
    return labelled_hops(rows, claim_rows, gold_fact_sets(store, gold_facts), texts, negatives)


def gold_claims(store: ArtifactStore, claims: ArtifactRef, gold_facts: ArtifactRef, passages: ArtifactRef, sentences: ArtifactRef, split: str) -> list[GoldClaim]:
    """Resolved claims of ``split`` with every sentence of their gold passages."""
    rows = store.claim_gold(claims, gold_facts, sentences, split).to_pylist()
    texts = passages_by_pid(store, passages, sentences, {r["pid"] for r in rows})
    by_uid: dict[str, dict] = {}
    for r in rows:
        entry = by_uid.setdefault(r["uid"], {"row": r, "pids": [], "gold": set()})
        if r["pid"] not in entry["pids"]:
            entry["pids"].append(r["pid"])
        entry["gold"].add((r["pid"], r["sid"]))
    return [
        GoldClaim(uid, e["row"]["claim"], e["row"]["label"], int(e["row"]["num_hops"]), tuple(texts[p] for p in e["pids"] if p in texts), frozenset(e["gold"]))
        for uid, e in by_uid.items()
    ]


def _train_and_publish(
    store: ArtifactStore,
    artifact: str,
    round_number: int,
    model: SequenceModel,
    fit,
    sets: tuple[list, list],
    config,
    meta: dict,
    title: str,
    force: bool,
    extra: dict | None = None,
    fitted_stats: Callable[[], dict] | None = None,
) -> dict[str, ArtifactRef]:
    """Train on ``sets`` (train, held out) with a progress display, publish, drop the epoch
    checkpoints. The manifest's stats are ``extra`` plus, when given, ``fitted_stats()`` taken
    once training has finished (what only the trained model knows). The work directory is held
    while training: a second run of the same fingerprint waits, then reuses what the first
    published."""
    train, validation = sets
    waiting = lambda: run_logger().info("another run is training this same %s in work/: waiting for it", meta["producer"])  # noqa: E731
    with store.work_dir(f"{model.kind}-{meta['fingerprint']}", on_wait=waiting) as work_dir:
        if reused := _reuse(store, artifact, meta["producer"], meta["fingerprint"], force):
            return reused
        steps = config.epochs * -(-len(train) // config.batch_size)
        with Progress(steps, f"{title} ({len(train)} examples, {len(validation)} held out)", unit="step") as progress:
            last, history = fit(train, validation, work_dir, lambda record: progress.update(1))
        stats = {"held_out_examples": len(validation), **(extra or {}), **(fitted_stats() if fitted_stats else {})}
        outputs = publish_trained_model(store, artifact, model.kind, round_number, last, history, len(train), str(model.device), meta, title, stats)
        shutil.rmtree(work_dir, ignore_errors=True)  # published: the epoch checkpoints are no longer needed
    return outputs


def _reuse(store: ArtifactStore, artifact: str, producer: str, fp: str, force: bool) -> dict[str, ArtifactRef] | None:
    reused = None if force else store.find_outputs([artifact, "training_steps"], producer, fp)
    if reused:
        run_logger().info("%s already trained: reusing run %s", producer, reused[artifact].manifest.run_id)
    return reused


def _meta(run_id: str, producer: str, fp: str, inputs: dict, params: dict) -> dict:
    return dict(run_id=run_id, producer=producer, fingerprint=fp, inputs=inputs, params=params)


#: Settings that only decide which of stage 2's facts the engine keeps: no condenser's training
#: examples depend on them; the reader's do, through the fingerprint of the engine run it reads
#: (which holds the threshold it really ran with, calibrated or not)
KEEPING_FIELDS = ("min_kept", "stage2_threshold", "evidence_min_facts", "evidence_max_passages", "evidence_floors", "evidence_rule", "evidence_ranker", "evidence_ranker_context")


def training_layout(condenser: CondenserConfig) -> dict:
    """The condenser settings that shape the models' training examples (their input layouts):
    part of each one's fingerprint, so changing one retrains them and changing any other does not."""
    return condenser.model_dump(mode="json", exclude={"device", "batch_size", "stage1_checkpoint", "stage2_checkpoint", *CPU_PRECISION_FIELDS, *KEEPING_FIELDS})


@task(name="train-stage1", task_run_name="train-condenser-stage1 · round {round_number}", tags=[GPU_TAG])
def train_condenser_stage1(
    store_root: str,
    labels: ArtifactRef,
    claims: ArtifactRef,
    gold_facts: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    condenser: CondenserConfig,
    config: Stage1TrainingConfig,
    round_number: int,
    run_id: str,
    force: bool = False,
) -> dict[str, ArtifactRef]:
    """Condenser stage 1 on one round's hop labels."""
    store, producer = ArtifactStore(store_root), f"stage1-r{round_number}"
    params = {"round": round_number, "training": fingerprint_params(config, added_later=OPTIMIZER_FIELDS_ADDED_LATER), "layout": training_layout(condenser)}
    fp = fingerprint(step="train_stage1", labels=labels.fingerprint, start=condenser.start("stage1"), params=params, version=STAGE1_CHECKPOINT.version)
    if reused := _reuse(store, "stage1_checkpoint", producer, fp, force):
        return reused
    hops = read_labelled_hops(store, labels, claims, gold_facts, passages, sentences, config.negative_passages, max_hops=config.max_examples)
    model = SequenceModel.condenser_to_train("stage1", condenser, config.seed)
    fit = lambda train, validation, work_dir, on_step: train_stage1(model, train, validation, condenser, config, work_dir, on_step)  # noqa: E731
    meta = _meta(run_id, producer, fp, {"labels": labels.fingerprint}, params)
    return _train_and_publish(store, "stage1_checkpoint", round_number, model, fit, split_held_out(stage1_examples(hops, config), config.validation_share, config.seed), config, meta, f"Condenser stage 1, round-{round_number} labels", force)


def stage2_params(condenser: CondenserConfig, config: Stage2TrainingConfig, round_number: int) -> dict:
    """Stage 2's recorded settings; ``config.start`` only when set, so that stores made before it
    existed keep their stage 2."""
    return {"round": round_number, "training": fingerprint_params(config, added_later=["start", *OPTIMIZER_FIELDS_ADDED_LATER]), "layout": training_layout(condenser)}


def stage2_fingerprint(labels: str, stage1: str, condenser: CondenserConfig, config: Stage2TrainingConfig, round_number: int) -> str:
    """What a trained stage 2 depends on: its labels, the stage 1 that ranks its candidates, where
    it starts (the backbone, or that stage 1) and its settings (:func:`stage2_params`)."""
    params = stage2_params(condenser, config, round_number)
    start = condenser.start("stage2") if config.start == "backbone" else f"stage1 {stage1}"
    return fingerprint(step="train_stage2", labels=labels, stage1=stage1, start=start, params=params, version=STAGE2_CHECKPOINT.version)


@task(name="train-stage2", task_run_name="train-condenser-stage2 · round {round_number}", tags=[GPU_TAG])
def train_condenser_stage2(
    store_root: str,
    labels: ArtifactRef,
    stage1: ArtifactRef,
    claims: ArtifactRef,
    gold_facts: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    condenser: CondenserConfig,
    config: Stage2TrainingConfig,
    round_number: int,
    run_id: str,
    force: bool = False,
) -> dict[str, ArtifactRef]:
    """Condenser stage 2 on the trained stage 1's candidates for each labelled hop, starting from
    the backbone or from that stage 1 (``config.start``)."""
    store, producer = ArtifactStore(store_root), f"stage2-r{round_number}"
    params = stage2_params(condenser, config, round_number)
    fp = stage2_fingerprint(labels.fingerprint, stage1.fingerprint, condenser, config, round_number)
    if reused := _reuse(store, "stage2_checkpoint", producer, fp, force):
        return reused
    hops = read_labelled_hops(store, labels, claims, gold_facts, passages, sentences, config.negative_passages, max_hops=config.max_examples)
    first = SequenceModel.load("stage1", stage1.path, condenser.device)
    with Progress(stage2_ranked_hops(hops, config), f"Condenser stage 2, round-{round_number} labels: stage-1 candidates", unit="hop") as progress:
        examples = stage2_examples(first, hops, condenser, config, on_ranked=progress.update)
    golds = sum(sum(e.gold) for e in examples)
    model = SequenceModel.copy_of(first, "stage2") if config.start == "stage1" else SequenceModel.condenser_to_train("stage2", condenser, config.seed)
    del first
    fit = lambda train, validation, work_dir, on_step: train_stage2(model, train, validation, condenser, config, work_dir, on_step)  # noqa: E731
    meta = _meta(run_id, producer, fp, {"labels": labels.fingerprint, "stage1": stage1.fingerprint}, params)
    extra = {"candidate_facts": sum(len(e.facts) for e in examples), "gold_candidates": golds, "hops_without_gold": sum(not any(e.gold) for e in examples)}
    return _train_and_publish(store, "stage2_checkpoint", round_number, model, fit, split_held_out(examples, config.validation_share, config.seed), config, meta, f"Condenser stage 2, round-{round_number} labels", force, extra)


def reader_settings(reader: ReaderConfig) -> dict:
    """The reader settings a trained reader and an engine run depend on; ``last_read_facts`` only
    when set, so that stores made before it existed keep their readers and runs."""
    return fingerprint_params(reader, exclude={"device", "batch_size", "checkpoint"}, added_later=READER_FIELDS_ADDED_LATER)


def reader_training_params(config: ReaderTrainingConfig) -> dict:
    """The reader's recorded training settings; ``start``, ``cpu_precision`` and
    ``contrast_margin`` only when set, so that stores made before they existed keep their reader."""
    return fingerprint_params(config, added_later=[*OPTIMIZER_FIELDS_ADDED_LATER, "start", "contrast_margin"])


def reader_start(reader: ReaderConfig, config: ReaderTrainingConfig, stage2: ArtifactRef | None) -> tuple[str, dict[str, str]]:
    """Where the reader's training starts, as its fingerprint records it, and the inputs that
    adds: the saved reader or the backbone, or (``config.start == "stage2"``) the trained stage 2,
    whose fingerprint then is one of the reader's inputs."""
    if config.start == "backbone":
        return str(reader.checkpoint or reader.resolved_backbone()), {}
    if stage2 is None:
        raise ValueError("training.reader.start: stage2 needs the trained stage 2 to start from; pass its checkpoint")
    return f"stage2 encoder {stage2.fingerprint}", {"stage2": stage2.fingerprint}


@task(name="train-reader", task_run_name="train-reader · round {round_number}", tags=[GPU_TAG])
def train_claim_reader(
    store_root: str,
    engine_facts: ArtifactRef,
    claims: ArtifactRef,
    gold_facts: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    condenser: CondenserConfig,
    reader: ReaderConfig,
    config: ReaderTrainingConfig,
    round_number: int,
    run_id: str,
    force: bool = False,
    evidence_floors: Mapping[str, float | str] | None = None,
    stage2: ArtifactRef | None = None,
    evidence_ranker: Mapping | None = None,
) -> dict[str, ArtifactRef]:
    """The reader on the final facts of ``engine_facts`` (the ``hop_traces`` of the engine's run
    over the held-out training claims at the chosen context threshold,
    :func:`~baleen_tasks.evaluation.verify_held_out`; re-cut at ``evidence_floors`` when they were
    chosen, :func:`choose_evidence_floors`) and on gold facts: of those claims and of up to
    ``max_examples`` other training claims. Its manifest records that threshold
    (``context_threshold``), those floors (``evidence_floors``) and the run's evidence rule
    (``evidence_rule``): the engine runs with them whenever this reader reads its facts. With an
    ``evidence_ranker`` (fitted on the same run, :func:`fit_ranker`) the evidence is cut from its
    scores, and the manifest records it too. With ``config.start == "stage2"`` its encoder starts
    from ``stage2``'s (the trained stage 2)."""
    store, producer = ArtifactStore(store_root), f"reader-r{round_number}"
    params = {
        "round": round_number,
        "training": reader_training_params(config),
        "layout": training_layout(condenser),
        "reader": reader_settings(reader),
        "context_threshold": engine_facts.manifest.params["condenser"]["stage2_threshold"],
    }
    if evidence_floors:  # absent when none were chosen: readers trained before the floors stay reusable
        params["evidence_floors"] = dict(evidence_floors)
    if (rule := engine_facts.manifest.params["condenser"].get("evidence_rule", "l3x")) != "l3x":  # likewise
        params["evidence_rule"] = rule
    if evidence_ranker is not None:  # likewise
        params["evidence_ranker"] = dict(evidence_ranker)
    if engine_facts.manifest.params["condenser"].get("evidence_ranker_context"):  # the run's context was the ranker's
        params["evidence_ranker_context"] = True
    start, start_inputs = reader_start(reader, config, stage2)
    inputs = {"engine_facts": engine_facts.fingerprint, "claims": claims.fingerprint, "gold_facts": gold_facts.fingerprint, **start_inputs}
    fp = fingerprint(step="train_reader", inputs=inputs, start=start, params=params, version=READER_CHECKPOINT.version)
    if reused := _reuse(store, "reader_checkpoint", producer, fp, force):
        return reused
    read = read_reader_claims(store, engine_facts, claims, gold_facts, passages, sentences, config.max_examples, condenser, evidence_floors, reader.last_read_facts, evidence_ranker)
    examples = reader_examples(read, config.inputs)
    model = SequenceModel.reader_to_train(reader, config.seed, SequenceModel.load("stage2", stage2.path, reader.device) if config.start == "stage2" else None)
    fit = lambda train, validation, work_dir, on_step: train_reader(model, train, validation, reader, config, work_dir, on_step)  # noqa: E731
    meta = _meta(run_id, producer, fp, inputs, params)
    engine = [c.engine_facts for c in read if c.engine_facts is not None]
    extra = {
        "supported_share": round(sum(e.label for e in examples) / max(1, len(examples)), 4),
        "engine_claims": len(engine),
        "mean_engine_facts": round(sum(len(facts) for facts in engine) / max(1, len(engine)), 2),
    }
    train, held_out = reader_training_sets(examples, config)
    extra["rewritten_examples"] = len(train) + len(held_out) - len(examples)
    extra["contrast_pairs"] = len(contrast_pairs(train))  # what training.reader.contrast_margin would pair, set or not
    expert_stats = lambda: lexical_training_stats(model.lexical)  # noqa: E731 (the second expert is fitted once the reader has trained)
    return _train_and_publish(store, "reader_checkpoint", round_number, model, fit, (train, held_out), config, meta, f"Reader, round-{round_number} models", force, extra, expert_stats)


def read_reader_claims(
    store: ArtifactStore,
    engine_facts: ArtifactRef,
    claims: ArtifactRef,
    gold_facts: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    most_others: int | None,
    condenser: CondenserConfig,
    evidence_floors: Mapping[str, float | str] | None = None,
    last_read_facts: int | None = None,
    evidence_ranker: Mapping | None = None,
) -> list[ReaderClaim]:
    """Every claim of the engine run with the facts the reader reads of it (its last hop's
    evidence, re-cut at ``evidence_floors`` when given, from the ``evidence_ranker``'s scores when
    given; with ``last_read_facts`` N, the best N facts of its last stage-2 read instead:
    :func:`~baleen_core.condensing.reader_facts`) and its gold facts, then up to ``most_others``
    other training claims (by uid) with their gold facts."""
    if evidence_ranker is not None:
        reads = ranked_last_reads(store, engine_facts, claims, passages, sentences, EvidenceRankerWeights.model_validate(evidence_ranker))
        read = reader_facts_at_floors(reads, parse_floors(evidence_floors or {}), condenser, last_read_facts)
        last = {uid: [fact.key for fact, _ in facts] for uid, facts in read.items()}
    elif last_read_facts is not None or evidence_floors:
        read = reader_facts_at_floors(last_reads_of(store, engine_facts, claims), parse_floors(evidence_floors or {}), condenser, last_read_facts)
        last = {uid: [fact.key for fact, _ in facts] for uid, facts in read.items()}
    else:
        last = final_facts_of(store, engine_facts)
    texts = passages_by_pid(store, passages, sentences, {pid for facts in last.values() for pid, _ in facts})
    sentence = {s.key: s for p in texts.values() for s in p.sentences}
    gold = {
        c.uid: ReaderClaim(c.uid, c.claim, c.label, tuple(s.fact for p in c.passages for s in p.sentences if s.key in c.gold))
        for c in gold_claims(store, claims, gold_facts, passages, sentences, "train")
    }
    return reader_claims({uid: tuple(sentence[key].fact for key in facts) for uid, facts in last.items()}, gold, most_others)


def with_bm25_distractors(store: ArtifactStore, passages: ArtifactRef, sentences: ArtifactRef, claims: list[GoldClaim], n: int) -> list[GoldClaim]:
    """Each claim's gold passages plus the ``n`` best-ranked non-gold passages for the claim by
    BM25 over the whole corpus (realistic distractors: they share the claim's words)."""
    bm25 = open_bm25(store, passages, sentences)
    chosen = [[pid for pid, _ in bm25.rank(c.claim, [], n, {p.pid for p in c.passages})] for c in claims]
    texts = passages_by_pid(store, passages, sentences, {pid for ids in chosen for pid in ids})
    return [replace(c, passages=c.passages + tuple(texts[pid] for pid in ids if pid in texts)) for c, ids in zip(claims, chosen, strict=True)]


@task(name="evaluate-condensers", task_run_name="evaluate-condensers-and-reader · {split}")
def evaluate_condensers(
    store_root: str,
    stage1: ArtifactRef,
    stage2: ArtifactRef,
    reader_ref: ArtifactRef | None,
    claims: ArtifactRef,
    gold_facts: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    condenser: CondenserConfig,
    reader: ReaderConfig,
    split: str,
    run_id: str,
    distractors: int = 4,
) -> list[dict]:
    """Stage 1, stage 2 and the reader on the gold passages of ``split`` (retrieval taken out),
    alone and mixed with ``distractors`` BM25 distractors per claim: sentence P/R/F1/EM of the
    kept facts and reader accuracy, by hop count. Written as a JSON report and a Prefect table."""
    store = ArtifactStore(store_root)
    settings = {"gold passages": gold_claims(store, claims, gold_facts, passages, sentences, split)}
    if distractors:
        settings[f"gold + {distractors} BM25 distractors"] = with_bm25_distractors(store, passages, sentences, settings["gold passages"], distractors)
    first, second = (SequenceModel.load(kind, ref.path, condenser.device) for kind, ref in (("stage1", stage1), ("stage2", stage2)))
    third = SequenceModel.load("reader", reader_ref.path, reader.device) if reader_ref is not None else None
    metrics = SENTENCE_METRICS + (READER_METRICS if third is not None else ())
    summary, per_claim = [], {}
    for setting, claims_list in settings.items():
        rows = evaluate_on_gold_passages(first, second, third, claims_list, condenser, reader)
        per_claim[setting] = rows
        supported = [r["label"] == "SUPPORTED" for r in rows if r["label"] is not None]
        majority = max(sum(supported), len(supported) - sum(supported)) / max(1, len(supported))
        for row in summarize_metrics(rows, metrics, samples=0):
            row.update({m: round(row[m], 4) for m in metrics if row[m] is not None})
            summary.append({"setting": setting, **row, "majority_label_accuracy": round(majority, 4) if row["hops"] == "all" else None})
    store.write_report(run_id, f"training/condensers-{split}.json", json.dumps({"summary": summary, "claims": per_claim}, indent=1))
    publish_table(key=f"condensers-{split}", table=summary, description=f"Condensers and reader on the gold passages of {split} claims")
    run_logger().info("condensers on %s: %s", split, readable([row for row in summary if row["hops"] == "all"]))
    return summary


def gold_fact_sets(store: ArtifactStore, gold_facts: ArtifactRef, uids: Sequence[str] | None = None) -> dict[str, set[tuple[int, int]]]:
    """Each claim's gold (pid, sid) facts by uid: of every claim, or only of ``uids``."""
    columns = ["uid", "pid", "sid"]
    table = store.read_table(gold_facts, columns) if uids is None else store.read_rows(gold_facts, "uid", uids, columns)
    gold: dict[str, set[tuple[int, int]]] = {}
    for fact in table.to_pylist():
        gold.setdefault(fact["uid"], set()).add((fact["pid"], fact["sid"]))
    return gold


def final_facts_of(store: ArtifactStore, traces: ArtifactRef) -> dict[str, list[tuple[int, int]]]:
    """Each claim's final facts in an engine run's ``hop_traces``: its last hop's evidence."""
    last: dict[str, tuple[int, list[tuple[int, int]]]] = {}
    for t in store.read_table(traces, ["uid", "hop", "evidence_pids", "evidence_sids"]).to_pylist():
        if t["uid"] not in last or t["hop"] > last[t["uid"]][0]:
            last[t["uid"]] = (t["hop"], list(zip(t["evidence_pids"], t["evidence_sids"], strict=True)))
    return {uid: facts for uid, (_, facts) in last.items()}


def last_reads_of(store: ArtifactStore, traces: ArtifactRef, claims: ArtifactRef) -> dict[str, LastRead]:
    """Each claim's last stage-2 read in an engine run's ``hop_traces``, with the claim's hop
    count: the evidence at any floor follows from it. Its sentences carry (pid, sid) only: the
    rule reads scores and keys, never the text."""
    last: dict[str, dict] = {}
    for t in store.read_table(traces, ["uid", "hop", "stage2_pids", "stage2_sids", "stage2_scores"]).to_pylist():
        if t["uid"] not in last or t["hop"] > last[t["uid"]]["hop"]:
            last[t["uid"]] = t
    hops = {r["uid"]: r["num_hops"] for r in store.read_rows(claims, "uid", sorted(last), ["uid", "num_hops"]).to_pylist()}
    return {
        uid: LastRead(hops[uid], tuple(Sentence(pid, sid, "", "") for pid, sid in zip(t["stage2_pids"], t["stage2_sids"], strict=True)), tuple(t["stage2_scores"]))
        for uid, t in last.items()
    }


def hop_reads_of(
    store: ArtifactStore, traces: ArtifactRef, claims: ArtifactRef, passages: ArtifactRef, sentences: ArtifactRef
) -> tuple[dict[str, str], dict[str, list[HopRead]]]:
    """Every hop of every claim in an engine run's ``hop_traces`` as the evidence ranker reads it
    (uid → its hops in order, the facts with their text), and each claim's text by uid."""
    columns = ["uid", "hop", "retrieved_pids", "stage1_pids", "stage1_sids", "stage1_scores", "stage2_pids", "stage2_sids", "stage2_scores"]
    rows = sorted(store.read_table(traces, columns).to_pylist(), key=lambda t: (t["uid"], t["hop"]))
    texts = passages_by_pid(store, passages, sentences, {pid for t in rows for pid in t["stage2_pids"]})
    sentence = {s.key: s for p in texts.values() for s in p.sentences}
    last_hop = {t["uid"]: t["hop"] for t in rows}  # rows are in hop order, so each claim's last one stays
    reads: dict[str, list[HopRead]] = {}
    for t in rows:
        stage1 = {(pid, sid): score for pid, sid, score in zip(t["stage1_pids"], t["stage1_sids"], t["stage1_scores"], strict=True)}
        read = tuple(sentence[key] for key in zip(t["stage2_pids"], t["stage2_sids"], strict=True))
        reads.setdefault(t["uid"], []).append(HopRead(t["hop"], t["hop"] == last_hop[t["uid"]], read, tuple(t["stage2_scores"]), stage1, tuple(t["retrieved_pids"])))
    text = {r["uid"]: r["claim"] for r in store.read_rows(claims, "uid", sorted(reads), ["uid", "claim"]).to_pylist()}
    return text, reads


def ranked_last_reads(
    store: ArtifactStore, traces: ArtifactRef, claims: ArtifactRef, passages: ArtifactRef, sentences: ArtifactRef, ranker: EvidenceRankerWeights
) -> dict[str, LastRead]:
    """Each claim's last stage-2 read in ``traces`` (as :func:`last_reads_of` gives it) scored by the evidence
    ranker instead of stage 2: the evidence the engine cuts with that ranker follows from it."""
    text, reads = hop_reads_of(store, traces, claims, passages, sentences)
    hops = {r["uid"]: r["num_hops"] for r in store.read_rows(claims, "uid", sorted(reads), ["uid", "num_hops"]).to_pylist()}
    return {uid: ranked_last_read(hops[uid], text[uid], hop[-1], ranker) for uid, hop in reads.items()}


@task(name="fit-evidence-ranker")
def fit_ranker(store_root: str, traces: ArtifactRef, claims: ArtifactRef, gold_facts: ArtifactRef, passages: ArtifactRef, sentences: ArtifactRef) -> dict:
    """The evidence ranker fitted on every hop of the held-out training claims in ``traces`` (the
    engine run at the chosen context threshold; :func:`~baleen_core.condensing.evidence_ranker.fit_evidence_ranker`),
    as JSON holds it; its weights are published as a table."""
    store = ArtifactStore(store_root)
    text, reads = hop_reads_of(store, traces, claims, passages, sentences)
    ranker = fit_evidence_ranker(text, reads, gold_fact_sets(store, gold_facts, sorted(reads)))
    summary = ranker_summary(ranker)
    publish_table(key="evidence-ranker", table=[{"feature": name, "weight": w} for name, w in summary["weights"].items()], description="The evidence ranker's weights (standardised features)")
    run_logger().info("evidence ranker fitted on %d facts of %d held-out training claims: %s", ranker.examples, ranker.claims, summary)
    return {"ranker": ranker.model_dump(mode="json"), "summary": summary}


@task(name="calibrate-evidence-floors")
def choose_evidence_floors(
    store_root: str, traces: ArtifactRef, claims: ArtifactRef, gold_facts: ArtifactRef, condenser: CondenserConfig, grid: Sequence[float],
    evidence_ranker: Mapping | None = None, passages: ArtifactRef | None = None, sentences: ArtifactRef | None = None,
) -> dict:
    """The evidence rule's floor per hop count whose evidence, re-cut from the last stage-2 read
    of each held-out training claim in ``traces`` (the engine run at the chosen context
    threshold), best matches the gold facts (:func:`~baleen_core.condensing.calibration.calibrate_evidence_floors`);
    every trial is published as a table. The floors come back as JSON holds them (``"inf"``).
    With an ``evidence_ranker`` the reads are scored by it (:func:`ranked_last_reads`; it needs
    the ``passages`` and ``sentences`` for their text)."""
    store = ArtifactStore(store_root)
    if evidence_ranker is None:
        reads = last_reads_of(store, traces, claims)
    elif passages is None or sentences is None:
        raise ValueError("choosing the floors on an evidence ranker's scores needs the passages and sentences the facts come from")
    else:
        reads = ranked_last_reads(store, traces, claims, passages, sentences, EvidenceRankerWeights.model_validate(evidence_ranker))
    chosen = calibrate_evidence_floors(reads, gold_fact_sets(store, gold_facts, sorted(reads)), condenser, grid)
    table = [{"hops": hops, **floor_trial_row(t), "chosen": t is best} for hops, (best, trials) in chosen.items() for t in trials]
    floors = json_floors({hops: best.threshold for hops, (best, _) in chosen.items()})
    publish_table(key="evidence-floors", table=table, description="Evidence floors tried per hop count on the held-out training claims' last stage-2 reads")
    run_logger().info("evidence floors %s chosen on %d held-out training claims: %s", floors, len(reads), readable([row for row in table if row["chosen"]]))
    return {"floors": floors, "held_out_claims": len(reads), "trials": table}


#: The table each calibration pass publishes: thresholds on stage 2's scores, then on the evidence ranker's.
CONTEXT_THRESHOLD_TABLES = {False: "context-threshold", True: "context-threshold-evidence-ranker"}


@task(name="calibrate-context-threshold")
def choose_context_threshold(store_root: str, runs: list[tuple[float, ArtifactRef]], gold_facts: ArtifactRef, on_ranker_scores: bool = False) -> dict:
    """The context threshold whose engine run over the held-out training claims (``runs``: each
    threshold tried with its ``hop_traces``) ended with the final facts closest to the gold ones
    (:func:`~baleen_core.condensing.calibration.choose_threshold`); every trial is published as
    a table, one per pass (``on_ranker_scores``: the thresholds are on the evidence ranker's
    scores), whose newest version holds every threshold the pass has run."""
    store = ArtifactStore(store_root)
    finals = {threshold: final_facts_of(store, traces) for threshold, traces in runs}
    gold = gold_fact_sets(store, gold_facts, sorted({uid for facts in finals.values() for uid in facts}))  # the same claims in every run
    best, trials = calibrate_threshold(finals, gold)
    table = [{**threshold_trial_row(t), "chosen": t is best} for t in trials]
    scores = "the evidence ranker's" if on_ranker_scores else "stage 2's"
    publish_table(
        key=CONTEXT_THRESHOLD_TABLES[on_ranker_scores], table=table, description=f"Context thresholds on {scores} scores tried by running the engine on the held-out training claims"
    )
    run_logger().info("context threshold %g chosen on %d held-out training claims: %s", best.threshold, best.claims, readable(table))
    return {"threshold": best.threshold, "held_out_claims": best.claims, "trials": table}
