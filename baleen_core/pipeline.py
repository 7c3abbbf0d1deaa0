"""The training and evaluation flows in memory: for a machine without Prefect or a store.

The same steps as ``flows/training.py`` and ``flows/evaluation.py``, on a corpus and claims held
in memory (:mod:`baleen_core.dataset`), through the same functions the Prefect tasks call
(``label_claims``, ``flipr_examples``, ``labelled_hops``, the condensers' example builders and
trainers, ``calibrate_threshold``, ``reader_claims``, ``claim_metric_rows``): the GPU benchmark
(``benchmarks/gpu.py``) runs the whole pipeline with them. Each step returns a record of what it
did and how fast (seconds, steps/s, losses); :class:`FinishedSteps` keeps finished label rounds and
models on disk, so that a run cut off (the GPU machine's time limit) goes on where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch

from baleen_core.condensing import SequenceModel
from baleen_core.condensing.calibration import (
    calibrate_evidence_floors, calibrate_threshold, floor_trial_row, ranked_last_read, reader_facts_at_floors, search_threshold_grid, threshold_trial_row,
)
from baleen_core.condensing.evidence_ranker import fit_evidence_ranker
from baleen_core.condensing.lexical import training_stats as lexical_training_stats
from baleen_core.config import BaleenConfig, EvidenceRankerWeights, LabelConfig, json_floors, parse_floors
from baleen_core.dataset import Claims, Corpus, claim_gold
from baleen_core.engine import ClaimInput, HopMemo, Verdict, verify_claims, verify_claims_at_thresholds
from baleen_core.held_out import split_held_out
from baleen_core.profiling import device_profile_call, profile_call
from baleen_core.results import majority_class, paired_results, system_results
from baleen_core.retrieval import Flipr, FliprIndex, FliprSearcher
from baleen_core.retrieval.building import build_in_memory
from baleen_core.retrieval.fusion import hop_retriever
from baleen_core.retrieval.throughput import free_device_memory, sync
from baleen_core.training.condenser_trainer import (
    ReaderClaim,
    labelled_hops,
    reader_claims,
    reader_examples,
    select_hops,
    stage1_examples,
    stage2_examples,
    train_reader,
    train_stage1,
    train_stage2,
)
from baleen_core.training.flipr_trainer import flipr_examples, train_flipr
from baleen_core.training.hop_ordering import ClaimGold, label_claims, label_row, round_labeller, round_statistics
from baleen_core.training.loop import history_summary
from baleen_core.training.reader_augmentation import reader_training_sets
from baleen_core.verdicts import claim_metric_rows, prediction_rows, trace_rows

logger = logging.getLogger(__name__)


# ---- resuming a run cut off -----------------------------------------------------------------


class FinishedSteps:
    """What a run finished, kept under ``root`` so that a run cut off (a device's time limit) goes
    on where it stopped: each label round (pickled) and each trained model (weights and record).
    A later run with the same ``settings`` (its own subfolder) loads them instead of redoing them.
    ``root`` None keeps nothing."""

    def __init__(self, root: Path | None, settings: dict) -> None:
        fingerprint = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]
        self.root = root / fingerprint if root is not None else None
        if self.root is not None:
            self.root.mkdir(parents=True, exist_ok=True)

    def _record(self, name: str) -> dict | None:
        marker = self.root / f"{name}.json" if self.root is not None else None
        return json.loads(marker.read_text()) if marker is not None and marker.exists() else None

    def _mark(self, name: str, record: dict) -> None:
        # the record is written last, atomically: a run cut off while saving redoes the step
        tmp = self.root / f".{name}.json.tmp"
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.root / f"{name}.json")

    def labels(self, name: str, make: Callable[[], tuple[list[dict], dict]]) -> tuple[list[dict], dict]:
        if (record := self._record(name)) is not None:
            logger.info("%s: finished by an earlier run, loaded from %s", name, self.root)
            return pickle.loads((self.root / f"{name}.pkl").read_bytes()), record
        labels, record = make()
        if self.root is not None:
            (self.root / f"{name}.pkl").write_bytes(pickle.dumps(labels))
            self._mark(name, record)
        return labels, record

    def model(self, name: str, model: Flipr | SequenceModel, train: Callable[[], dict]) -> dict:
        """``train()`` trains ``model`` in place and returns its record."""
        if (record := self._record(name)) is not None:
            model.load_weights(self.root / name)
            logger.info("%s: finished by an earlier run, loaded from %s", name, self.root)
            return {**record, "resumed": True}
        record = train()
        if self.root is not None:
            model.save(self.root / name)
            self._mark(name, record)
        return record


# ---- training -------------------------------------------------------------------------------


def label_round(
    ranker, gold: Sequence[ClaimGold], config: LabelConfig, number: int, previous: Sequence[dict] | None, negatives_from=None
) -> tuple[list[dict], dict]:
    """Latent hop ordering over the training claims with ``ranker`` (tasks/labels.py), every
    other hard negative from ``negatives_from`` when given: its ``hop_labels`` rows and the
    round's record."""
    started = time.perf_counter()
    labels = label_claims(gold, ranker, config.depth, config.n_negatives, negatives_from=negatives_from)
    before = None if previous is None else {(p["uid"], p["hop"]): p["positive_pid"] for p in previous}
    seconds = time.perf_counter() - started
    labeller = round_labeller(ranker.name, negatives_from is not None)
    record = {"round": number, "labeller": labeller, "claims": len(gold), "hop_labels": len(labels), "seconds": round(seconds, 2),
              "claims_per_s": round(len(gold) / max(seconds, 1e-9), 2), "by_hop": round_statistics(labels, before)}
    logger.info("label round %d (%s): %d hop labels in %.1f s", number, labeller, len(labels), seconds)
    return [label_row(label, number, labeller) for label in labels], record


def training_record(history: Sequence[dict], examples: int, held_out: int, prepare_seconds: float, train_seconds: float, epochs: int, batch_size: int) -> dict:
    """Throughput and losses of one training run. ``steps_per_s`` counts the loop's own step
    times (forward, backward, optimizer); ``train_seconds`` adds validation and checkpoints."""
    summary, step_seconds = history_summary(history), sum(h["seconds"] for h in history)
    return {
        "examples": examples,
        "held_out": held_out,
        "epochs": epochs,
        "batch_size": batch_size,
        "steps": summary["steps"],
        "steps_per_s": round(len(history) / max(step_seconds, 1e-9), 2),
        "examples_per_s": round(sum(h["examples"] for h in history) / max(step_seconds, 1e-9), 1),
        "prepare_seconds": round(prepare_seconds, 2),
        "train_seconds": round(train_seconds, 2),
        "seconds": round(prepare_seconds + train_seconds, 2),
        "first_loss": None if summary["first_loss"] is None else round(summary["first_loss"], 4),
        "last_epoch_mean_loss": summary["epoch_mean_loss"][str(history[-1]["epoch"])] if history else None,
        "last_val_loss": None if summary["last_val_loss"] is None else round(summary["last_val_loss"], 4),
    }


def fit(name: str, run: Callable[[Path], tuple[Path, list[dict]]], work: Path) -> tuple[list[dict], float]:
    """Run one trainer in its work directory (train_epochs resumes from any epoch checkpoint it
    finds there, left by a run cut off mid-training); returns its step history and wall seconds."""
    started = time.perf_counter()
    _, history = run(work / name)
    seconds = time.perf_counter() - started
    shutil.rmtree(work / name, ignore_errors=True)  # epoch checkpoints: not needed, hundreds of MB
    return history, seconds


def fit_held_out(name: str, examples: Callable[[], list], trainer: Callable[[list, list, Path], tuple[Path, list[dict]]], cfg, work: Path, split: Callable[[list], tuple[list, list]] | None = None) -> dict:
    """Build a model's examples, split off its held-out claims (``split``, by default
    split_held_out), train: the record of it all."""
    started = time.perf_counter()
    train, held = split(examples()) if split else split_held_out(examples(), cfg.validation_share, cfg.seed)
    prepare = time.perf_counter() - started
    history, seconds = fit(name, lambda d: trainer(train, held, d), work)
    return training_record(history, len(train), len(held), prepare, seconds, cfg.epochs, cfg.batch_size)


@dataclass
class Trained:
    flipr: Flipr
    index: FliprIndex
    stage1: SequenceModel
    stage2: SequenceModel
    reader: SequenceModel
    condenser_labels: list[dict]  # hop_labels rows
    context_threshold: float  # chosen on the held-out training claims; the reader trained on its facts
    evidence_floors: dict[int, float]  # the evidence rule's floor per hop count, chosen on the same claims (empty: 0, the reference's)
    evidence_ranker: EvidenceRankerWeights | None = None  # fitted on the same claims' run (training.calibration.evidence_ranker), else None
    evidence_ranker_context: bool = False  # the ranker sets the context too (training.calibration.evidence_ranker_context)


def searcher(flipr: Flipr, index: FliprIndex, config: BaleenConfig, query_batch: int | None = None) -> FliprSearcher:
    return FliprSearcher(
        flipr, index, config.search.nprobe, config.search.ncandidates, device=flipr.device, query_batch=query_batch, k_claim_first_hop=config.search.k_claim_first_hop
    )


def flipr_system_retriever(flipr: Flipr, index: FliprIndex, config: BaleenConfig, bm25, query_batch: int | None = None):
    """A FLIPR system's retriever under ``search.fusion`` (as tasks/evaluation.py); ``query_batch``:
    the queries FLIPR searches together (default: the searcher's)."""
    return hop_retriever(searcher(flipr, index, config, query_batch), config.search.fusion, lambda: bm25, config.search.fusion_hop_counts)


def label_round_retriever(flipr: Flipr, index: FliprIndex, config: BaleenConfig, bm25):
    """What a FLIPR label round ranks with (as tasks/labels.py): the FLIPR systems' retriever under
    :meth:`SearchConfig.for_label_rounds`, so FLIPR alone unless ``search.fusion_in_label_rounds``."""
    return flipr_system_retriever(flipr, index, config.model_copy(update={"search": config.search.for_label_rounds()}), bm25)


def train_flipr_round(config: BaleenConfig, labels: Sequence[dict], claims: Claims, corpus: Corpus, number: int, work: Path, finished: FinishedSteps) -> tuple[Flipr, dict]:
    """tasks/training.py's ``train_flipr_on_labels``: a fresh FLIPR from the backbone, trained in place."""
    flipr = Flipr.load(config.retriever)

    def train() -> dict:
        started = time.perf_counter()
        claim_text = {uid: row["claim"] for uid, row in claims.rows.items()}
        examples = flipr_examples(labels, claim_text, corpus.texts, config.training.flipr.max_examples, config.training.flipr.claim_only_positives)
        prepare = time.perf_counter() - started
        history, seconds = fit(f"flipr-r{number}", lambda d: train_flipr(flipr, examples, config.training.flipr, d), work)
        return training_record(history, len(examples), 0, prepare, seconds, config.training.flipr.epochs, config.training.flipr.batch_size)

    record = finished.model(f"flipr-r{number}", flipr, train)
    logger.info("FLIPR round %d: %s", number, record)
    return flipr, record


def train_condensers_and_reader(
    config: BaleenConfig, labels: Sequence[dict], claims: Claims, corpus: Corpus, retriever, work: Path, finished: FinishedSteps
) -> tuple[tuple[SequenceModel, ...], dict, dict]:
    """tasks/condensing.py's stage 1 → stage 2 (on stage 1's candidates) → the engine with
    ``retriever`` and no reader over the held-out training claims → reader (on their final facts
    and gold facts), each from the backbone with a seeded head, validation claims split off.
    Returns the models (their token caches holding the corpus: :func:`tokenize_corpus_once`),
    each model's record, and the record of that tokenizing."""
    condenser, training = config.condenser, config.training
    cfg1, cfg2, cfg3, reader_config = training.stage1, training.stage2, training.reader, config.reader
    stage1 = SequenceModel.condenser_to_train("stage1", condenser, cfg1.seed)
    stage2 = SequenceModel.condenser_to_train("stage2", condenser, cfg2.seed)
    reader = SequenceModel.reader_to_train(reader_config, cfg3.seed)
    tokenized = tokenize_corpus_once(stage1, stage2, reader, corpus)

    def stage1_set() -> list:
        return stage1_examples(labelled_hops(select_hops(labels, cfg1.max_examples), claims.rows, claims.gold, corpus.passages, cfg1.negative_passages), cfg1)

    def stage2_set() -> list:  # the trained stage 1 ranks each hop's sentences
        hops = labelled_hops(select_hops(labels, cfg2.max_examples), claims.rows, claims.gold, corpus.passages, cfg2.negative_passages)
        return stage2_examples(stage1, hops, condenser, cfg2)

    calibration: dict = {}

    def reader_set() -> list:  # tasks/evaluation.py's verify_held_out, tasks/condensing.py's choose_context_threshold and read_reader_claims
        ev = config.evaluation
        held = sorted(claims.held_out(config.labels))
        thresholds, ranker_thresholds = training.calibration.context_grids(condenser.stage2_threshold)
        started, memo = time.perf_counter(), HopMemo()  # one retriever and one pair of condensers throughout

        def calibrated_run(engine_condenser, grid: list[float]) -> tuple:  # flows/training.py's calibrated_engine_run
            runs: dict[float, list] = {}

            def calibrated() -> tuple:  # the best and every trial of the thresholds run so far
                return calibrate_threshold({t: {v.uid: [s.key for s, _ in v.facts] for v in run} for t, run in runs.items()}, claims.gold)

            def run_and_choose(new_thresholds: list[float]) -> float:
                verdicts = verify_claims_at_thresholds(
                    claim_inputs(claims, held), new_thresholds, retriever, corpus.passages_of, stage1, stage2, None, engine_condenser, reader_config,
                    depth=ev.depth, k=ev.k, hops=ev.hops, memo=memo,
                )
                runs.update(zip(new_thresholds, verdicts, strict=True))
                return calibrated()[0].threshold

            search_threshold_grid(grid, training.calibration.steps_past_edge, run_and_choose)
            best, trials = calibrated()
            return best, trials, runs[best.threshold]

        best, trials, chosen_run = calibrated_run(condenser, thresholds)
        reads = {v.uid: v.last_read(claims.rows[v.uid]["num_hops"]) for v in chosen_run}
        if training.calibration.evidence_ranker:  # tasks/condensing.py's fit_ranker and ranked_last_reads
            text = {v.uid: claims.rows[v.uid]["claim"] for v in chosen_run}
            hop_reads = {v.uid: v.hop_reads() for v in chosen_run if v.hops}
            ranker = fit_evidence_ranker(text, hop_reads, claims.gold)
            calibration["evidence_ranker"] = ranker.model_dump(mode="json")
            if training.calibration.evidence_ranker_context:  # the ranker sets the context: the engine runs again on its scores
                best, trials, chosen_run = calibrated_run(config.with_evidence_ranker(ranker, context=True).condenser, ranker_thresholds)
                calibration["evidence_ranker_context"] = True
                hop_reads = {v.uid: v.hop_reads() for v in chosen_run if v.hops}
            reads = {v.uid: ranked_last_read(claims.rows[v.uid]["num_hops"], text[v.uid], hop_reads[v.uid][-1], ranker) if v.uid in hop_reads else v.last_read(claims.rows[v.uid]["num_hops"]) for v in chosen_run}
        floors = dict(condenser.evidence_floors)
        if config.chooses_evidence_floors:
            chosen = calibrate_evidence_floors(reads, claims.gold, condenser, training.calibration.evidence_floor_grid)
            floors = {hops: floor.threshold for hops, (floor, _) in chosen.items()}
            calibration["evidence_floor_trials"] = {str(hops): [floor_trial_row(t) for t in tried] for hops, (_, tried) in chosen.items()}
        calibration.update(
            threshold=best.threshold, claims=len(held), seconds=round(time.perf_counter() - started, 2), trials=[threshold_trial_row(t) for t in trials],
            hops_computed=memo.computed, hops_reused=memo.reused,
        )
        calibration["evidence_floors"] = json_floors(floors)
        logger.info("context threshold and evidence floors: %s", calibration)
        final = {uid: tuple(s.fact for s, _ in facts) for uid, facts in reader_facts_at_floors(reads, floors, condenser, reader_config.last_read_facts).items()}
        gold = {
            uid: ReaderClaim(uid, claims.rows[uid]["claim"], claims.rows[uid]["label"], tuple(corpus.fact(pid, sid) for pid, sid in sorted(claims.gold[uid])))
            for uid in claims.uids("train", config.labels.max_claims)
        }
        return reader_examples(reader_claims(final, gold, cfg3.max_examples), cfg3.inputs)

    def reader_record(*args) -> dict:  # the threshold the reader trained with is part of what it is
        record = {**fit_held_out(*args), "calibration": calibration}
        return record | lexical_training_stats(reader.lexical)

    def fit_stage2(train: list, held: list, work_dir: Path) -> tuple[Path, list[dict]]:  # from the backbone, or from the stage 1 just trained
        if cfg2.start == "stage1":
            stage2.start_from(stage1)
        return train_stage2(stage2, train, held, condenser, cfg2, work_dir)

    def fit_reader(train: list, held: list, work_dir: Path) -> tuple[Path, list[dict]]:  # from the backbone, or from the stage 2 just trained
        if cfg3.start == "stage2":
            reader.take_encoder_from(stage2)
        return train_reader(reader, train, held, reader_config, cfg3, work_dir)

    plan = (
        ("stage1", stage1, stage1_set, lambda train, held, d: train_stage1(stage1, train, held, condenser, cfg1, d), cfg1, None, fit_held_out),
        ("stage2", stage2, stage2_set, fit_stage2, cfg2, None, fit_held_out),
        ("reader", reader, reader_set, fit_reader, cfg3, partial(reader_training_sets, config=cfg3), reader_record),
    )
    records = {}
    for name, model, examples, trainer, cfg, split, fit_model in plan:
        records[name] = finished.model(name, model, partial(fit_model, name, examples, trainer, cfg, work, split))
        logger.info("%s: %s", name, records[name])
    return (stage1, stage2, reader), records, tokenized


def tokenize_corpus_once(stage1: SequenceModel, stage2: SequenceModel, reader: SequenceModel, corpus: Corpus) -> dict:
    """Every corpus text the condensers and the reader can read, tokenized once into their token
    caches, as the index tokenizes every passage once (``DocTokens``): stage 1 reads titles and
    sentences, and facts (``title | sentence``) as its context; stage 2 and the reader read facts.
    The engine then tokenizes only claims on its hot path, not the same passages at every hop and
    for every claim. Skipped for a model whose cache cannot hold the corpus (it would evict its
    own entries)."""
    started = time.perf_counter()
    sentences = [s for passage in corpus.passages.values() for s in passage.sentences]
    facts = [s.fact for s in sentences]
    stage1_texts = [*(passage.title for passage in corpus.passages.values()), *(s.text for s in sentences), *facts]
    texts = 0
    for model, wanted in ((stage1, stage1_texts), (stage2, facts), (reader, facts)):
        if len(wanted) <= model.token_cache.max_texts:
            before = model.token_cache.tokenized
            model.token_cache(wanted)
            texts += model.token_cache.tokenized - before
    return {"texts": texts, "seconds": round(time.perf_counter() - started, 2)}


def train_pipeline(config: BaleenConfig, claims: Claims, corpus: Corpus, bm25, work: Path, finished: FinishedSteps) -> tuple[Trained, dict]:
    """flows/training.py in memory: labels r0 (BM25) → [train FLIPR → re-index → relabel with it]
    per round → condensers and reader on the last labels."""
    started = time.perf_counter()
    held = claims.held_out(config.labels)  # as the label task: the first max_claims by uid, less the held-out ones
    gold = claim_gold(claims, corpus, [uid for uid in claims.uids("train", config.labels.max_claims) if uid not in held])
    if config.labels.round0 != "bm25":
        raise ValueError("the pipeline in memory labels round 0 with BM25 (labels.round0: bm25)")
    labels, record = finished.labels("labels-r0", lambda: label_round(bm25, gold, config.labels, 0, None))
    rounds, models, indexes = [record], {}, {}
    flipr = index = doc_tokens = index_tokenize_seconds = None
    for number in range(config.labels.rounds):
        del flipr, index
        free_device_memory(torch.device(config.retriever.device))
        flipr, models[f"flipr-r{number}"] = train_flipr_round(config, labels, claims, corpus, number, work, finished)
        if doc_tokens is None:  # once per run: every round's FLIPR reads with the same backbone's tokenizer
            tokenizing = time.perf_counter()
            doc_tokens = flipr.tokenizer.doc_tokens([corpus.texts[pid] for pid in corpus.pids])
            index_tokenize_seconds = round(time.perf_counter() - tokenizing, 2)
        index, indexes[f"flipr-r{number}"] = build_in_memory(flipr, corpus.pids, corpus.texts, config.index, doc_tokens)
        logger.info("index with FLIPR r%d: %s", number, indexes[f"flipr-r{number}"])
        if number + 1 <= config.labels.condenser_round:  # the next round's labels, or the condensers'
            ranker, previous = label_round_retriever(flipr, index, config, bm25), labels
            negatives_from = bm25 if config.labels.mixes_bm25_negatives(number + 1, "flipr") else None
            labels, record = finished.labels(f"labels-r{number + 1}", lambda: label_round(ranker, gold, config.labels, number + 1, previous, negatives_from))
            rounds.append(record)
    retriever = flipr_system_retriever(flipr, index, config, bm25)
    (stage1, stage2, reader), condenser_records, tokenized = train_condensers_and_reader(config, labels, claims, corpus, retriever, work, finished)
    models.update(condenser_records)
    flipr_steps = [m for name, m in models.items() if name.startswith("flipr-")]
    calibration = condenser_records["reader"]["calibration"]
    ranker = calibration.get("evidence_ranker")
    return Trained(
        flipr, index, stage1, stage2, reader, labels, calibration["threshold"], parse_floors(calibration.get("evidence_floors", {})),
        None if ranker is None else EvidenceRankerWeights.model_validate(ranker), calibration.get("evidence_ranker_context", False),
    ), {
        "flipr_steps_per_s": round(float(np.mean([m["steps_per_s"] for m in flipr_steps])), 2),
        "seconds": round(time.perf_counter() - started, 1),
        "train_claims": len(gold),
        "label_rounds": rounds,
        "models": models,
        "indexes": indexes,
        "index_tokenize_seconds": index_tokenize_seconds,
        "tokenize_corpus": tokenized,
    }


# ---- the engine and HoVer's metrics --------------------------------------------------------


def claim_inputs(claims: Claims, uids: Sequence[str]) -> list[ClaimInput]:
    return [ClaimInput(uid, claims.rows[uid]["claim"], int(claims.rows[uid]["num_hops"])) for uid in sorted(uids)]


def run_system(system: str, retriever, trained: Trained, config: BaleenConfig, claims: Claims, corpus: Corpus, uids: Sequence[str]) -> tuple[list[Verdict], dict]:
    """tasks/evaluation.py's ``verify_split`` for one system: every claim through the hop loop, timed."""
    inputs = claim_inputs(claims, uids)
    ev = config.evaluation
    sync(trained.stage1.device)
    started = time.perf_counter()
    verdicts = verify_claims(
        inputs, retriever, corpus.passages_of, trained.stage1, trained.stage2, trained.reader, config.condenser, config.reader,
        depth=ev.depth, k=ev.k, hops=ev.hops, single_hop=system == "single-hop",
    )
    sync(trained.stage1.device)
    seconds = time.perf_counter() - started
    hops = sum(len(v.hops) for v in verdicts)
    return verdicts, {"claims": len(inputs), "seconds": round(seconds, 2), "claims_per_s": round(len(inputs) / max(seconds, 1e-9), 3), "claim_hops_per_s": round(hops / max(seconds, 1e-9), 3)}


def prediction_differences(verdicts: Sequence[Verdict], others: Sequence[Verdict]) -> dict:
    """How far two runs over the same claims disagree: claims whose final facts, Retrieval@depth
    pool (in order, and as a set of passages) or predicted label differ, and the largest
    difference in P(SUPPORTED)."""
    pairs = list(zip(verdicts, others, strict=True))
    facts = sum([s.key for s, _ in a.facts] != [s.key for s, _ in b.facts] for a, b in pairs)
    pools = sum(a.pool != b.pool for a, b in pairs)
    pool_members = sum(set(a.pool) != set(b.pool) for a, b in pairs)  # not the order: which passages
    probs = [(a.prob_supported, b.prob_supported) for a, b in pairs if a.prob_supported is not None and b.prob_supported is not None]
    labels = sum((x >= 0.5) != (y >= 0.5) for x, y in probs)
    return {
        "claims_compared": len(pairs),
        "final_facts_differ": facts,
        "pool_differs": pools,
        "pool_members_differ": pool_members,
        "label_differs": labels,
        "max_prob_difference": round(max((abs(x - y) for x, y in probs), default=0.0), 6),
    }


#: The parts of an inference variant's name (``+``-joined, e.g. ``fp16-weights+compile``).
VARIANT_PARTS = {
    "fp16-weights": "stage 1, stage 2 and the reader predict with fp16 weights (SequenceModel.inference_copy) instead of fp32 ones under fp16 autocast",
    "compile": "their encoders under torch.compile (dynamic shapes); the variant's warm-up pays the compilation",
    "tokens-N": "their GPU batches filled to N padded tokens (condenser and reader gpu_batch_tokens)",
}


@dataclass(frozen=True)
class InferenceVariant:
    """How a variant of the engine runs (:func:`parse_inference_variant`)."""

    dtype: torch.dtype | None = None
    compile_backbone: bool = False
    batch_tokens: int | None = None


def parse_inference_variant(name: str) -> InferenceVariant:
    """The inference variant a name says (its parts: :data:`VARIANT_PARTS`)."""
    parts: dict = {}
    for part in name.split("+"):
        if part == "fp16-weights":
            parts["dtype"] = torch.float16
        elif part == "compile":
            parts["compile_backbone"] = True
        elif part.startswith("tokens-") and part.removeprefix("tokens-").isdigit() and int(part.removeprefix("tokens-")) >= 512:
            parts["batch_tokens"] = int(part.removeprefix("tokens-"))
        else:
            raise ValueError(f"unknown inference variant part {part!r} in {name!r}: join with '+' any of {', '.join(VARIANT_PARTS)} (N ≥ 512)")
    return InferenceVariant(**parts)


def inference_variant(variant: InferenceVariant, trained: Trained, config: BaleenConfig) -> tuple[Trained, BaleenConfig]:
    """``trained`` and ``config`` as ``variant`` runs them; the models given are left as they are."""
    if variant.dtype is not None or variant.compile_backbone:
        trained = replace(trained, **{m: getattr(trained, m).inference_copy(variant.dtype, variant.compile_backbone) for m in ("stage1", "stage2", "reader")})
    if variant.batch_tokens is not None:
        config = config.model_copy(update={part: getattr(config, part).model_copy(update={"gpu_batch_tokens": variant.batch_tokens}) for part in ("condenser", "reader")})
    return trained, config


def evaluate_pipeline(
    config: BaleenConfig, trained: Trained, claims: Claims, corpus: Corpus, bm25, untrained: tuple[Flipr, FliprIndex] | None, systems: Sequence[str],
    save: Callable[[dict, dict], None], profile_claims: int = 0, compare_batching: bool = False, warmup_claims: int = 32,
    variants: Sequence[str] = (),
) -> tuple[dict, dict]:
    """flows/evaluation.py in memory: every system over the same dev claims at the context
    threshold the reader trained with, scored per claim (``save`` gets the speeds and the metrics
    as soon as they exist); then, apart from the timed runs, the full system on the first
    ``profile_claims`` dev claims under cProfile (where the host's time goes: ``profile``) and
    under torch.profiler (how busy the device is, time per engine region: ``device_profile``). With
    ``compare_batching``, the full system once more the unbatched way, FLIPR searching one query
    at a time and the condensers and reader in batches of ``batch_size`` inputs (no token budget):
    its speed and how many claims' predictions differ (``batch_size_path``). The models' token caches already hold the corpus (training filled
    them), so the engine tokenizes claims only; before the timed runs the full system verifies the
    first ``warmup_claims`` dev claims untimed (``warmup``): the first system timed would otherwise
    also pay for the device's kernel and allocator warm-up. Each of ``variants``
    (:func:`inference_variant`) runs the full system again after its own warm-up: its speed and
    how many claims' predictions differ from the timed run's (``variants``)."""
    engine: dict = {}
    config = config.with_stage2_threshold(trained.context_threshold).with_evidence_floors(trained.evidence_floors).with_evidence_ranker(trained.evidence_ranker, trained.evidence_ranker_context)
    retrievers = {  # query_batch: FLIPR's queries searched together (None: the searcher's default)
        "baleen": lambda query_batch=None: flipr_system_retriever(trained.flipr, trained.index, config, bm25, query_batch),
        "single-hop": lambda query_batch=None: flipr_system_retriever(trained.flipr, trained.index, config, bm25, query_batch),
        "bm25-multihop": lambda query_batch=None: bm25,
        "untrained-flipr": lambda query_batch=None: flipr_system_retriever(*untrained, config, bm25, query_batch),
    }
    dev = claims.uids(config.evaluation.split, config.evaluation.max_claims)
    metric_rows, speeds, verdicts_of = {}, {}, {}
    main = "baleen" if "baleen" in systems else systems[0]
    if warmup_claims:
        _, engine["warmup"] = run_system(main, retrievers[main](), trained, config, claims, corpus, dev[:warmup_claims])
        logger.info("engine warm-up · %s: %s", main, engine["warmup"])
    for system in systems:
        verdicts_of[system], speeds[system] = run_system(system, retrievers[system](), trained, config, claims, corpus, dev)
        verdicts = verdicts_of[system]
        metric_rows[system] = claim_metric_rows(prediction_rows(system, verdicts), trace_rows(system, verdicts), claims.rows, claims.gold, config.evaluation.depth)
        logger.info("engine · %s: %s", system, speeds[system])
    ev = config.evaluation
    engine.update({"claims_per_s": speeds[main]["claims_per_s"], "system": main, "split": ev.split, "depth": ev.depth, "systems": speeds})
    quality = {
        "split": ev.split,
        "claims": len(dev),
        "stage2_threshold": config.condenser.stage2_threshold,
        "evidence_floors": json_floors(config.condenser.evidence_floors),
        "evidence_rule": config.condenser.evidence_rule,
        "majority_class": majority_class(metric_rows[main]),
        "systems": {s: system_results(rows, speeds[s]["claims_per_s"], ev.bootstrap, ev.seed) for s, rows in metric_rows.items()},
        "paired": {f"{main}-{s}": paired_results(metric_rows[main], rows, ev.bootstrap, ev.seed) for s, rows in metric_rows.items() if s != main},
    }
    save(engine, quality)  # a run cut short by the device's limit keeps the timed runs and the metrics
    if profile_claims:
        (_, speed), profile = profile_call(lambda: run_system(main, retrievers[main](), trained, config, claims, corpus, dev[:profile_claims]))
        engine["profile"] = {"system": main, **speed, **profile.as_dict()}
        logger.info("engine profile · %s: own seconds by package %s", main, engine["profile"]["by_package"])
        (_, speed), device_profile = device_profile_call(lambda: run_system(main, retrievers[main](), trained, config, claims, corpus, dev[:profile_claims]), trained.stage1.device)
        shown = engine["device_profile"] = {"system": main, **speed, **device_profile.as_dict()}
        logger.info("engine device profile · %s: device busy %.1f%% of %.2f s; regions %s", main, 100 * shown["device_busy_share"], shown["wall_seconds"], shown["regions"])
    save(engine, quality)
    for name in variants:
        variant = parse_inference_variant(name)
        variant_trained, variant_config = inference_variant(variant, trained, config)
        try:
            started = time.perf_counter()
            run_system(main, retrievers[main](), variant_trained, variant_config, claims, corpus, dev[: max(warmup_claims, 1)])
            warmup_seconds = time.perf_counter() - started
            verdicts, speed = run_system(main, retrievers[main](), variant_trained, variant_config, claims, corpus, dev)
            result = {"system": main, "warmup_seconds": round(warmup_seconds, 2), **speed, **prediction_differences(verdicts_of[main], verdicts)}
        except Exception as error:  # noqa: BLE001  (a variant that cannot run, e.g. no compiler for torch.compile, is a result; the rest still run)
            result = {"system": main, "error": f"{type(error).__name__}: {str(error)[:400]}"}
        engine.setdefault("variants", {})[name] = result
        logger.info("engine · %s, variant %s: %s", main, name, result)
        save(engine, quality)
        del variant_trained
        free_device_memory(trained.stage1.device)
    if compare_batching:
        per_item = config.model_copy(update={part: getattr(config, part).model_copy(update={"gpu_batch_tokens": None}) for part in ("condenser", "reader")})
        plain, speed = run_system(main, retrievers[main](query_batch=1), trained, per_item, claims, corpus, dev)
        engine["batch_size_path"] = {
            "system": main, "batch_size": config.condenser.batch_size, "flipr_queries_per_search": 1, **speed, **prediction_differences(verdicts_of[main], plain)
        }
        logger.info("engine · %s, unbatched (FLIPR one query at a time, models in batches of %d): %s", main, config.condenser.batch_size, engine["batch_size_path"])
    return engine, quality
