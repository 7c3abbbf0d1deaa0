"""GPU benchmark: the whole of openbaleen on one device, driving ``baleen_core`` directly.

No Prefect, DuckDB, great-expectations, faiss or blingfire: the GPU machine this is meant for has
only Python 3.12, torch, transformers 5, pyarrow, numpy, pandas, pyyaml and tqdm. Everything else
comes in a carry folder that ``benchmarks/gpu_carry.sh`` builds here (under 64 MiB): the backbone
(fp16 safetensors), the wheels of pydantic and bm25s, and hover-mini already ingested and resolved
with the project's own readers, splitter and claim resolver (Parquet in the store's schemas). The
index uses the ``fp16`` codec with k-means and nearest-centroid search in torch on the device, so
faiss is never imported. Hop labels become training examples and verdicts become claim metric
rows through the same ``baleen_core`` functions the Prefect tasks call on what they read from the
store (``label_row``, ``flipr_examples``, ``labelled_hops``, ``baleen_core.verdicts``); here their
inputs come from memory.

What it measures, written as JSON to ``--out`` after every section (a run cut short keeps what it
finished):

- ``encoding``: FLIPR document encoding of passages tokenized once, at several token budgets per
  batch, passages/s and tokens/s (the best budget reported, and the same end to end from text),
  the backbone's forward FLOPs per token, the device's measured matmul rate (bf16 on a GPU, fp32
  on a CPU) and the share of it the encoder reaches;
- ``index_build``: seconds to index the corpus as the index flow does (encode a sample and train
  the codec, encode every passage, inverted lists);
- ``training``: the training flow: label round 0 (BM25), then per FLIPR round: train, re-index,
  relabel with the trained FLIPR; condenser stage 1, stage 2, the reader; seconds, steps/s and
  losses per model;
- ``engine``: ``baleen_core.engine.verify_claims`` over the dev claims, claims/s per system (the
  full system and BM25 multi-hop by default), at the context threshold chosen in training on the
  held-out training claims (``training.calibration``), as the evaluation flow does; with
  ``--compare-batching`` (default on a GPU) the full system again in batches of ``batch_size``
  inputs instead of token budgets, with how many claims' predictions differ;
- ``engine.profile``: the full system once more on ``--profile-claims`` dev claims under cProfile
  (``baleen_core.profiling``): host seconds by package and the functions with the most own time,
  to see what holds claims/s down when the device is fast;
- ``hover_mini_dev``: HoVer's metrics per system and hop count (``baleen_core.results``
  on the same per-claim rows as the evaluation's ``claim_metrics``).

Usage::

    benchmarks/gpu_carry.sh                                  # here, once: builds .carry/
    # on the GPU machine (the run tool with carry [".carry"]): wheels, the gpu tests, this script
    bash benchmarks/gpu_device.sh --commit <sha> --state /tmp/b/state --work /tmp/b/work --out /tmp/b/gpu.json
    # a CPU smoke test here (tiny budgets; minutes on 2 cores, ~14 GB peak RSS in stage-1 training):
    .venv/bin/python benchmarks/gpu.py --device cpu --out /tmp/gpu.json --corpus-passages 400 \\
      --train-claims 40 --dev-claims 20 --epochs 1 --rounds 1 --max-examples 16 --depth 20 \\
      --encode-passages 128 --bootstrap 200
    # a run cut off at the device's 10-minute limit: the same command again, on the warm machine,
    # goes on from what --state kept

Defaults are the full budget meant for a GPU: every training claim, two label rounds, several
epochs, every dev claim at a retrieval depth of 100.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python3 benchmarks/gpu.py` from a plain checkout (no install)
    sys.path.insert(0, str(ROOT))

from baleen_core.runtime import SAFE_DEFAULTS  # noqa: E402  (os and pathlib only)

for _key, _value in SAFE_DEFAULTS.items():  # offline, no telemetry: before transformers is imported
    os.environ.setdefault(_key, _value)

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import torch  # noqa: E402

from baleen_core.condensing import PassageSentences, Sentence, SequenceModel  # noqa: E402
from baleen_core.condensing.calibration import calibrate_threshold  # noqa: E402
from baleen_core.config import (  # noqa: E402
    BaleenConfig,
    CondenserConfig,
    EvaluationConfig,
    FliprTrainingConfig,
    IndexConfig,
    LabelConfig,
    ReaderConfig,
    ReaderTrainingConfig,
    RetrieverConfig,
    Stage1TrainingConfig,
    Stage2TrainingConfig,
    TrainingConfig,
    default_backbone,
)
from baleen_core.engine import ClaimInput, Verdict, verify_claims, verify_claims_at_thresholds  # noqa: E402
from baleen_core.held_out import held_out_training_claims, split_held_out  # noqa: E402
from baleen_core.profiling import profile_call  # noqa: E402
from baleen_core.results import git_commit, machine_description, majority_class, paired_results, system_results  # noqa: E402
from baleen_core.retrieval import Flipr, FliprIndex, FliprSearcher, passage_text  # noqa: E402
from baleen_core.retrieval.modeling import length_batches  # noqa: E402
from baleen_core.retrieval.fusion import hop_retriever  # noqa: E402
from baleen_core.retrieval.building import encode_shard, merge_shards, train_codec  # noqa: E402
from baleen_core.retrieval.codec import codec_sample_size  # noqa: E402
from baleen_core.training.condenser_trainer import (  # noqa: E402
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
from baleen_core.training.flipr_trainer import flipr_examples, train_flipr  # noqa: E402
from baleen_core.training.hop_ordering import ClaimGold, claims_from_rows, label_row, order_hops, round_statistics  # noqa: E402
from baleen_core.training.reader_augmentation import reader_training_sets  # noqa: E402
from baleen_core.verdicts import claim_metric_rows, prediction_rows, trace_rows  # noqa: E402

#: Modules that must never be imported: the GPU machine does not have them (and the science
#: package must not need them). Checked at the end of every run.
FORBIDDEN_MODULES = ("prefect", "duckdb", "great_expectations", "faiss", "blingfire", "baleen_tasks", "baleen_flows", "baleen_storage")
SECTIONS = ("encoding", "index", "pipeline")
RESULT_SECTIONS = ("encoding", "index_build", "training", "engine", "hover_mini_dev")
SYSTEMS = ("baleen", "bm25-multihop", "single-hop", "untrained-flipr")
STARTED = time.perf_counter()


def peak_rss_gib() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def log(message: str) -> None:
    print(f"[{time.perf_counter() - STARTED:8.1f} s, peak RSS {peak_rss_gib():5.1f} GiB] {message}", flush=True)


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so that a timer measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_gpu(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


# ---- inputs: the carry folder -----------------------------------------------------------------


@dataclass
class Corpus:
    """The corpus in memory, in the three shapes the science reads it in."""

    pids: list[int]  # sorted: the index's passage order
    titles: dict[int, str]
    texts: dict[int, str]  # "title | text" of the non-empty sentences: what FLIPR and BM25 read
    passages: dict[int, PassageSentences]  # non-empty sentences: what the condensers read
    sentence_text: dict[tuple[int, int], str]  # every sentence, '' included: gold facts point into these

    def passages_of(self, pids) -> dict[int, PassageSentences]:
        """The engine's ``passages_of`` (tasks/condensing.py's ``passages_by_pid``)."""
        return {pid: self.passages[pid] for pid in pids if pid in self.passages}


@dataclass
class Claims:
    """Resolved claims (``claims.resolved``) and their gold facts."""

    rows: dict[str, dict]  # uid → {uid, claim, label, num_hops, split, hpqa_id}
    gold: dict[str, set[tuple[int, int]]]  # uid → gold (pid, sid)

    def uids(self, split: str, limit: int | None) -> list[str]:
        """The first ``limit`` resolved claims of ``split`` by uid (the order every flow uses)."""
        return sorted(uid for uid, row in self.rows.items() if row["split"] == split)[:limit]

    def held_out(self, config: LabelConfig) -> set[str]:
        """tasks/labels.py's ``held_out_training_uids``: the training claims no label round labels
        (gold passages stand in for their titles: one per title)."""
        train = self.uids("train", config.max_claims)
        claims = [{"uid": uid, "hpqa_id": self.rows[uid].get("hpqa_id"), "supporting_facts": sorted(self.gold.get(uid, ()))} for uid in train]
        return held_out_training_claims(claims, config.held_out_share, config.held_out_seed)

    def gold_pids(self, uids: Sequence[str]) -> set[int]:
        return {pid for uid in uids for pid, _ in self.gold.get(uid, ())}


def load_claims(data: Path) -> Claims:
    rows = pq.read_table(data / "claims.parquet", columns=["uid", "claim", "label", "num_hops", "split", "hpqa_id", "resolved"]).to_pylist()
    resolved = {r["uid"]: r for r in rows if r["resolved"]}
    gold: dict[str, set[tuple[int, int]]] = {}
    for fact in pq.read_table(data / "gold_facts.parquet", columns=["uid", "pid", "sid"]).to_pylist():
        if fact["uid"] in resolved:
            gold.setdefault(fact["uid"], set()).add((fact["pid"], fact["sid"]))
    return Claims(resolved, gold)


def load_corpus(data: Path, keep: set[int], others: int | None) -> Corpus:
    """Every passage, or (``others`` given, for smoke tests) the ``keep`` passages plus the first
    ``others`` of the rest by pid (pids are title hashes: a uniform random sample)."""
    passages = pq.read_table(data / "passages.parquet", columns=["pid", "title"])
    titles = dict(zip(passages.column("pid").to_pylist(), passages.column("title").to_pylist(), strict=True))
    pids = sorted(titles)
    if others is not None:
        missing = keep - titles.keys()
        if missing:
            raise ValueError(f"{len(missing)} gold passages are not in the corpus")
        pids = sorted(keep | set([pid for pid in pids if pid not in keep][:others]))
        titles = {pid: titles[pid] for pid in pids}
    sentences = pq.read_table(data / "sentences.parquet", columns=["pid", "sid", "text"]).sort_by([("pid", "ascending"), ("sid", "ascending")])
    sentence_text: dict[tuple[int, int], str] = {}
    by_pid: dict[int, list[Sentence]] = {}
    for pid, sid, text in zip(*(sentences.column(c).to_pylist() for c in ("pid", "sid", "text")), strict=True):
        if pid not in titles:
            continue
        sentence_text[(pid, sid)] = text
        if text:  # the store's passage_sentences / passage_texts skip empty sentences too
            by_pid.setdefault(pid, []).append(Sentence(pid, sid, titles[pid], text))
    return Corpus(
        pids=pids,
        titles=titles,
        texts={pid: passage_text(titles[pid], " ".join(s.text for s in by_pid.get(pid, ()))) for pid in pids},
        passages={pid: PassageSentences(pid, titles[pid], tuple(s)) for pid, s in by_pid.items()},
        sentence_text=sentence_text,
    )


def claim_gold(claims: Claims, corpus: Corpus, uids: Sequence[str]) -> list[ClaimGold]:
    """The claims with their gold sentences (what ``ArtifactStore.claim_gold`` gives the label
    rounds): rows sorted by uid, pid, sid, grouped by ``claims_from_rows``."""
    rows = [
        {**claims.rows[uid], "pid": pid, "sid": sid, "title": corpus.titles[pid], "text": corpus.sentence_text[(pid, sid)]}
        for uid in sorted(uids)
        for pid, sid in sorted(claims.gold[uid])
    ]
    return claims_from_rows(rows)


# ---- encoding: throughput and FLOPs ---------------------------------------------------------


def matmul_rate(device: torch.device, dtype: torch.dtype, n: int, iterations: int) -> float:
    """FLOP/s of an ``n × n`` matmul: what the device reaches on the densest work there is."""
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):  # warm-up: kernel selection, clocks
        a @ b
    sync(device)
    started = time.perf_counter()
    for _ in range(iterations):
        a @ b
    sync(device)
    return 2 * n**3 * iterations / (time.perf_counter() - started)


def flops_per_token(flipr: Flipr) -> Callable[[int], float]:
    """Forward FLOPs per token of the encoder at sequence length L (BERT-family backbone):
    2 × weight-matrix parameters (embeddings and pooler excluded: a lookup, and [CLS] only)
    + 4 × layers × L × hidden (QKᵀ and attention × V) + 2 × hidden × dim (the projection)."""
    backbone = flipr.encoder.backbone
    weights = sum(p.numel() for name, p in backbone.named_parameters() if p.ndim == 2 and not name.startswith(("embeddings.", "pooler.")))
    layers, hidden = backbone.config.num_hidden_layers, backbone.config.hidden_size
    return lambda length: 2.0 * weights + 4.0 * layers * length * hidden + 2.0 * hidden * flipr.dim


def measure_encoding(flipr: Flipr, texts: Sequence[str], budgets: Sequence[int], peak: float) -> dict:
    """Tokenize the passages once (timed), then encode the same tokens at each token budget per
    batch (``Flipr.encode_passages`` with ``max_tokens``: length-sorted batches of as many passages
    as fill it); FLOPs counted on the padded batches (what the device computes), tokens/s on real
    tokens. The best budget is also timed end to end from text (tokenizing included)."""
    device, per_token = flipr.device, flops_per_token(flipr)
    started = time.perf_counter()
    tokens = flipr.tokenizer.doc_tokens(texts)
    tokenize_seconds = time.perf_counter() - started
    lengths = tokens.lengths
    ordered = np.sort(lengths)[::-1]
    runs = {}
    for budget in budgets:
        try:
            flipr.encode_passages(tokens, len(texts), max_tokens=budget)  # warm-up: every batch shape once
            sync(device)
            started = time.perf_counter()
            _, doclens = flipr.encode_passages(tokens, len(texts), max_tokens=budget)
            sync(device)
            seconds = time.perf_counter() - started
        except torch.cuda.OutOfMemoryError:
            free_gpu(device)
            runs[str(budget)] = {"error": "out of memory"}
            continue
        batches = [(end - start, int(ordered[start])) for start, end in length_batches(ordered, len(texts), budget)]
        flops = sum(n * width * per_token(width) for n, width in batches)
        runs[str(budget)] = {
            "seconds": round(seconds, 3),
            "batches": len(batches),
            "passages_per_s": round(len(texts) / seconds, 1),
            "tokens_per_s": round(int(lengths.sum()) / seconds, 1),
            "scored_tokens_per_s": round(int(doclens.sum()) / seconds, 1),
            "padded_tokens_per_s": round(sum(n * width for n, width in batches) / seconds, 1),
            "tflops": round(flops / seconds / 1e12, 3),
            "fraction_of_matmul_peak": round(flops / seconds / peak, 4),
        }
        log(f"encoding, {budget} tokens per batch: {runs[str(budget)]}")
    measured = {b: r for b, r in runs.items() if "error" not in r}
    best = max(measured, key=lambda b: measured[b]["passages_per_s"]) if measured else None
    end_to_end = None
    if best is not None:
        sync(device)
        started = time.perf_counter()
        flipr.encode_passages(texts, len(texts), max_tokens=int(best))
        sync(device)
        end_to_end = round(len(texts) / (time.perf_counter() - started), 1)
    mean_length = float(np.mean(lengths)) if len(lengths) else 0.0
    return {
        "passages": len(texts),
        "mean_tokens": round(mean_length, 1),
        "tokenize_seconds": round(tokenize_seconds, 3),
        "flops_per_token": round(per_token(round(mean_length))),
        "flops_per_token_formula": "2 * weight-matrix params (no embeddings) + 4 * layers * length * hidden + 2 * hidden * dim, at the mean length",
        "best_batch_tokens": None if best is None else int(best),
        **({k: measured[best][k] for k in ("passages_per_s", "tokens_per_s", "tflops", "fraction_of_matmul_peak")} if best else {}),
        "passages_per_s_from_text": end_to_end,
        "by_batch_tokens": runs,
    }


def encoding_section(flipr: Flipr, corpus: Corpus, args: argparse.Namespace) -> dict:
    device = flipr.device
    peak_dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    peak = matmul_rate(device, peak_dtype, args.matmul_size, args.matmul_iterations)
    rates = {str(peak_dtype).removeprefix("torch."): round(peak / 1e12, 2)}
    if device.type == "cuda":  # the encoder runs under fp16 autocast: its rate, for comparison
        rates["float16"] = round(matmul_rate(device, torch.float16, args.matmul_size, args.matmul_iterations) / 1e12, 2)
    log(f"matmul {args.matmul_size}²: {rates} TFLOP/s")
    texts = [corpus.texts[pid] for pid in corpus.pids[: args.encode_passages]]
    result = measure_encoding(flipr, texts, args.batch_tokens, peak)
    return {"matmul_tflops": rates, "matmul_size": args.matmul_size, "peak_dtype": str(peak_dtype).removeprefix("torch."), **result}


# ---- the index ------------------------------------------------------------------------------


def build_index(flipr: Flipr, corpus: Corpus, config: IndexConfig) -> tuple[FliprIndex, dict]:
    """What the index flow does (tasks/index.py: train-codec, encode-shard, build-index), in one
    shard and in memory; k-means and nearest centroids in torch on the encoder's device."""
    device = flipr.device
    pids = np.asarray(corpus.pids, dtype=np.int64)
    n_sample = min(len(pids), config.sample_passages or codec_sample_size(len(pids)))
    sample = np.sort(np.random.default_rng(config.seed).choice(pids, n_sample, replace=False))
    started = time.perf_counter()
    codec = train_codec(flipr, [corpus.texts[int(p)] for p in sample], len(pids), config, use_gpu=False, device=device)
    sync(device)
    codec_done = time.perf_counter()
    shard = encode_shard(flipr, codec, pids, [corpus.texts[int(p)] for p in pids], config)
    sync(device)
    encoded = time.perf_counter()
    offsets, docs = merge_shards([shard.codes], [shard.doclens], codec.n_centroids)
    index = FliprIndex(codec, shard.pids, shard.doclens, shard.codes, shard.payload, offsets, docs)
    done = time.perf_counter()
    return index, {
        "seconds": round(done - started, 2),
        "codec_seconds": round(codec_done - started, 2),
        "encode_seconds": round(encoded - codec_done, 2),
        "ivf_seconds": round(done - encoded, 2),
        "passages": len(pids),
        "sample_passages": n_sample,
        "tokens": index.n_tokens,
        "n_centroids": codec.n_centroids,
        "codec": codec.kind,
        "batch_size": config.batch_size,
        "gpu_batch_tokens": config.gpu_batch_tokens,
        "passages_per_s": round(len(pids) / max(encoded - codec_done, 1e-9), 1),
    }


def searcher(flipr: Flipr, index: FliprIndex, config: BaleenConfig) -> FliprSearcher:
    return FliprSearcher(flipr, index, config.search.nprobe, config.search.ncandidates, device=flipr.device)


def flipr_system_retriever(flipr: Flipr, index: FliprIndex, config: BaleenConfig, bm25):
    """A FLIPR system's retriever under ``search.fusion`` (as tasks/evaluation.py)."""
    return hop_retriever(searcher(flipr, index, config), config.search.fusion, lambda: bm25)


# ---- training: the training flow in memory -------------------------------------------------


def label_round(ranker, gold: Sequence[ClaimGold], config: LabelConfig, number: int, previous: Sequence[dict] | None) -> tuple[list[dict], dict]:
    """Latent hop ordering over the training claims with ``ranker`` (tasks/labels.py): its
    ``hop_labels`` rows and the round's record."""
    started = time.perf_counter()
    labels = [label for claim in gold for label in order_hops(claim, ranker, config.depth, config.n_negatives)]
    before = None if previous is None else {(p["uid"], p["hop"]): p["positive_pid"] for p in previous}
    seconds = time.perf_counter() - started
    record = {"round": number, "labeller": ranker.name, "claims": len(gold), "hop_labels": len(labels), "seconds": round(seconds, 2),
              "claims_per_s": round(len(gold) / max(seconds, 1e-9), 2), "by_hop": round_statistics(labels, before)}
    log(f"label round {number} ({ranker.name}): {len(labels)} hop labels in {seconds:.1f} s")
    return [label_row(label, number, ranker.name) for label in labels], record


def training_record(history: Sequence[dict], examples: int, held_out: int, prepare_seconds: float, train_seconds: float, epochs: int, batch_size: int) -> dict:
    """Throughput and losses of one training run. ``steps_per_s`` counts the loop's own step
    times (forward, backward, optimizer); ``train_seconds`` adds validation and checkpoints."""
    step_seconds = sum(h["seconds"] for h in history)
    validated = [h["val_loss"] for h in history if h.get("val_loss") is not None]
    last_epoch = [h["loss"] for h in history if h["epoch"] == history[-1]["epoch"]] if history else []
    return {
        "examples": examples,
        "held_out": held_out,
        "epochs": epochs,
        "batch_size": batch_size,
        "steps": len(history),
        "steps_per_s": round(len(history) / max(step_seconds, 1e-9), 2),
        "examples_per_s": round(sum(h["examples"] for h in history) / max(step_seconds, 1e-9), 1),
        "prepare_seconds": round(prepare_seconds, 2),
        "train_seconds": round(train_seconds, 2),
        "seconds": round(prepare_seconds + train_seconds, 2),
        "first_loss": round(history[0]["loss"], 4) if history else None,
        "last_epoch_mean_loss": round(sum(last_epoch) / len(last_epoch), 4) if last_epoch else None,
        "last_val_loss": round(validated[-1], 4) if validated else None,
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


class Finished:
    """What a run finished, kept under ``--state`` so that a run cut off at the device's time
    limit goes on where it stopped: a warm GPU machine keeps its disk between calls. Each label
    round (pickled) and each trained model (weights and record) is kept; a later run with the same
    settings (its own subfolder) loads them instead of redoing them. No ``--state``: keeps nothing."""

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
            log(f"{name}: finished by an earlier run, loaded from {self.root}")
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
            log(f"{name}: finished by an earlier run, loaded from {self.root}")
            return {**record, "resumed": True}
        record = train()
        if self.root is not None:
            model.save(self.root / name)
            self._mark(name, record)
        return record


@dataclass
class Trained:
    flipr: Flipr
    index: FliprIndex
    stage1: SequenceModel
    stage2: SequenceModel
    reader: SequenceModel
    condenser_labels: list[dict]  # hop_labels rows
    context_threshold: float  # chosen on the held-out training claims; the reader trained on its facts


def train_flipr_round(config: BaleenConfig, labels: Sequence[dict], claims: Claims, corpus: Corpus, number: int, work: Path, finished: Finished) -> tuple[Flipr, dict]:
    """tasks/training.py's ``train_flipr_on_labels``: a fresh FLIPR from the backbone, trained in place."""
    flipr = Flipr.load(config.retriever)

    def train() -> dict:
        started = time.perf_counter()
        claim_text = {uid: row["claim"] for uid, row in claims.rows.items()}
        examples = flipr_examples(labels, claim_text, corpus.texts, config.training.flipr.max_examples)
        prepare = time.perf_counter() - started
        history, seconds = fit(f"flipr-r{number}", lambda d: train_flipr(flipr, examples, config.training.flipr, d), work)
        return training_record(history, len(examples), 0, prepare, seconds, config.training.flipr.epochs, config.training.flipr.batch_size)

    record = finished.model(f"flipr-r{number}", flipr, train)
    log(f"FLIPR round {number}: {record}")
    return flipr, record


def train_condensers_and_reader(
    config: BaleenConfig, labels: Sequence[dict], claims: Claims, corpus: Corpus, retriever, work: Path, finished: Finished
) -> tuple[tuple[SequenceModel, ...], dict]:
    """tasks/condensing.py's stage 1 → stage 2 (on stage 1's candidates) → the engine with
    ``retriever`` and no reader over the held-out training claims → reader (on their final facts
    and gold facts), each from the backbone with a seeded head, validation claims split off."""
    condenser, training = config.condenser, config.training
    cfg1, cfg2, cfg3, reader_config = training.stage1, training.stage2, training.reader, config.reader
    stage1 = SequenceModel.condenser_to_train("stage1", condenser, cfg1.seed)
    stage2 = SequenceModel.condenser_to_train("stage2", condenser, cfg2.seed)
    reader = SequenceModel.reader_to_train(reader_config, cfg3.seed)

    def stage1_set() -> list:
        return stage1_examples(labelled_hops(select_hops(labels, cfg1.max_examples), claims.rows, claims.gold, corpus.passages, cfg1.negative_passages), cfg1)

    def stage2_set() -> list:  # the trained stage 1 ranks each hop's sentences
        hops = labelled_hops(select_hops(labels, cfg2.max_examples), claims.rows, claims.gold, corpus.passages, cfg2.negative_passages)
        return stage2_examples(stage1, hops, condenser, cfg2)

    calibration: dict = {}

    def reader_set() -> list:  # tasks/evaluation.py's verify_held_out, tasks/condensing.py's choose_context_threshold and read_reader_claims
        ev = config.evaluation
        held = sorted(claims.held_out(config.labels))
        thresholds = list(training.calibration.thresholds) if training.calibration.enabled else [condenser.stage2_threshold]
        started = time.perf_counter()
        runs = verify_claims_at_thresholds(
            claim_inputs(claims, held), thresholds, retriever, corpus.passages_of, stage1, stage2, None, condenser, reader_config, depth=ev.depth, k=ev.k, hops=ev.hops,
        )
        best, trials = calibrate_threshold({t: {v.uid: [s.key for s, _ in v.facts] for v in verdicts} for t, verdicts in zip(thresholds, runs, strict=True)}, claims.gold)
        calibration.update(threshold=best.threshold, claims=len(held), seconds=round(time.perf_counter() - started, 2), trials=[asdict(t) for t in trials])
        log(f"context threshold: {calibration}")
        final = {v.uid: tuple(s.fact for s, _ in v.facts) for v in runs[thresholds.index(best.threshold)]}
        gold = {
            uid: ReaderClaim(uid, claims.rows[uid]["claim"], claims.rows[uid]["label"], tuple(f"{corpus.titles[pid]} | {corpus.sentence_text[(pid, sid)]}" for pid, sid in sorted(claims.gold[uid])))
            for uid in claims.uids("train", config.labels.max_claims)
        }
        return reader_examples(reader_claims(final, gold, cfg3.max_examples), cfg3.inputs)

    def reader_record(*args) -> dict:  # the threshold the reader trained with is part of what it is
        return {**fit_held_out(*args), "calibration": calibration}

    plan = (
        ("stage1", stage1, stage1_set, lambda train, held, d: train_stage1(stage1, train, held, condenser, cfg1, d), cfg1, None, fit_held_out),
        ("stage2", stage2, stage2_set, lambda train, held, d: train_stage2(stage2, train, held, condenser, cfg2, d), cfg2, None, fit_held_out),
        ("reader", reader, reader_set, lambda train, held, d: train_reader(reader, train, held, reader_config, cfg3, d), cfg3, partial(reader_training_sets, config=cfg3), reader_record),
    )
    records = {}
    for name, model, examples, trainer, cfg, split, fit_model in plan:
        records[name] = finished.model(name, model, partial(fit_model, name, examples, trainer, cfg, work, split))
        log(f"{name}: {records[name]}")
    return (stage1, stage2, reader), records


def training_section(config: BaleenConfig, claims: Claims, corpus: Corpus, bm25, work: Path, finished: Finished) -> tuple[Trained, dict]:
    """flows/training.py in memory: labels r0 (BM25) → [train FLIPR → re-index → relabel with it]
    per round → condensers and reader on the last labels."""
    started = time.perf_counter()
    held = claims.held_out(config.labels)  # as the label task: the first max_claims by uid, less the held-out ones
    gold = claim_gold(claims, corpus, [uid for uid in claims.uids("train", config.labels.max_claims) if uid not in held])
    if config.labels.round0 != "bm25":
        raise ValueError("this benchmark labels round 0 with BM25 (labels.round0: bm25)")
    labels, record = finished.labels("labels-r0", lambda: label_round(bm25, gold, config.labels, 0, None))
    rounds, models, indexes = [record], {}, {}
    flipr = index = None
    for number in range(config.labels.rounds):
        del flipr, index
        free_gpu(torch.device(config.retriever.device))
        flipr, models[f"flipr-r{number}"] = train_flipr_round(config, labels, claims, corpus, number, work, finished)
        index, indexes[f"flipr-r{number}"] = build_index(flipr, corpus, config.index)
        log(f"index with FLIPR r{number}: {indexes[f'flipr-r{number}']}")
        if number + 1 <= config.labels.condenser_round:  # the next round's labels, or the condensers'
            ranker, previous = searcher(flipr, index, config), labels
            labels, record = finished.labels(f"labels-r{number + 1}", lambda: label_round(ranker, gold, config.labels, number + 1, previous))
            rounds.append(record)
    retriever = flipr_system_retriever(flipr, index, config, bm25)
    (stage1, stage2, reader), condenser_records = train_condensers_and_reader(config, labels, claims, corpus, retriever, work, finished)
    models.update(condenser_records)
    flipr_steps = [m for name, m in models.items() if name.startswith("flipr-")]
    return Trained(flipr, index, stage1, stage2, reader, labels, condenser_records["reader"]["calibration"]["threshold"]), {
        "flipr_steps_per_s": round(float(np.mean([m["steps_per_s"] for m in flipr_steps])), 2),
        "seconds": round(time.perf_counter() - started, 1),
        "train_claims": len(gold),
        "label_rounds": rounds,
        "models": models,
        "indexes": indexes,
    }


# ---- the engine and HoVer's metrics --------------------------------------------------------


def claim_inputs(claims: Claims, uids: Sequence[str]) -> list[ClaimInput]:
    return [ClaimInput(uid, claims.rows[uid]["claim"], int(claims.rows[uid]["num_hops"])) for uid in sorted(uids)]


def run_engine(system: str, retriever, trained: Trained, config: BaleenConfig, claims: Claims, corpus: Corpus, uids: Sequence[str]) -> tuple[list[Verdict], dict]:
    """tasks/evaluation.py's ``verify_split`` for one system: every claim through the hop loop."""
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


def save_engine(results: Results, engine: dict, quality: dict) -> None:
    results.doc["engine"] = engine
    results.set("hover_mini_dev", quality)


def prediction_differences(verdicts: Sequence[Verdict], others: Sequence[Verdict]) -> dict:
    """How far two runs over the same claims disagree: claims whose final facts, Retrieval@depth
    pool or predicted label differ, and the largest difference in P(SUPPORTED)."""
    pairs = list(zip(verdicts, others, strict=True))
    facts = sum([s.key for s, _ in a.facts] != [s.key for s, _ in b.facts] for a, b in pairs)
    pools = sum(a.pool != b.pool for a, b in pairs)
    probs = [(a.prob_supported, b.prob_supported) for a, b in pairs if a.prob_supported is not None and b.prob_supported is not None]
    labels = sum((x >= 0.5) != (y >= 0.5) for x, y in probs)
    return {
        "claims_compared": len(pairs),
        "final_facts_differ": facts,
        "pool_differs": pools,
        "label_differs": labels,
        "max_prob_difference": round(max((abs(x - y) for x, y in probs), default=0.0), 6),
    }


def engine_section(
    config: BaleenConfig, trained: Trained, claims: Claims, corpus: Corpus, bm25, untrained: tuple[Flipr, FliprIndex] | None, systems: Sequence[str], save: Callable[[dict, dict], None], profile_claims: int = 0, compare_batching: bool = False
) -> tuple[dict, dict]:
    """flows/evaluation.py in memory: every system over the same dev claims at the context
    threshold the reader trained with, scored per claim; then, apart from the timed runs, the
    full system on the first ``profile_claims`` dev claims under cProfile (where the host's time
    goes: ``engine.profile``). With ``compare_batching``, the full system once more with the
    condensers and reader in batches of ``batch_size`` inputs (no token budget): its speed and how
    many claims' predictions differ (``engine.batch_size_path``)."""
    engine: dict = {}
    config = config.with_stage2_threshold(trained.context_threshold)
    retrievers = {
        "baleen": lambda: flipr_system_retriever(trained.flipr, trained.index, config, bm25),
        "single-hop": lambda: flipr_system_retriever(trained.flipr, trained.index, config, bm25),
        "bm25-multihop": lambda: bm25,
        "untrained-flipr": lambda: flipr_system_retriever(*untrained, config, bm25),
    }
    dev = claims.uids(config.evaluation.split, config.evaluation.max_claims)
    metric_rows, speeds, verdicts_of = {}, {}, {}
    for system in systems:
        verdicts_of[system], speeds[system] = run_engine(system, retrievers[system](), trained, config, claims, corpus, dev)
        verdicts = verdicts_of[system]
        metric_rows[system] = claim_metric_rows(prediction_rows(system, verdicts), trace_rows(system, verdicts), claims.rows, claims.gold, config.evaluation.depth)
        log(f"engine · {system}: {speeds[system]}")
    ev = config.evaluation
    main = "baleen" if "baleen" in metric_rows else systems[0]
    engine.update({"claims_per_s": speeds[main]["claims_per_s"], "system": main, "split": ev.split, "depth": ev.depth, "systems": speeds})
    quality = {
        "split": ev.split,
        "claims": len(dev),
        "stage2_threshold": config.condenser.stage2_threshold,
        "majority_class": majority_class(metric_rows[main]),
        "systems": {s: system_results(rows, speeds[s]["claims_per_s"], ev.bootstrap, ev.seed) for s, rows in metric_rows.items()},
        "paired": {f"{main}-{s}": paired_results(metric_rows[main], rows, ev.bootstrap, ev.seed) for s, rows in metric_rows.items() if s != main},
    }
    save(engine, quality)  # a call cut short by the device's limit keeps the timed runs and the metrics
    if compare_batching:
        per_item = config.model_copy(update={part: getattr(config, part).model_copy(update={"gpu_batch_tokens": None}) for part in ("condenser", "reader")})
        plain, speed = run_engine(main, retrievers[main](), trained, per_item, claims, corpus, dev)
        engine["batch_size_path"] = {"system": main, "batch_size": config.condenser.batch_size, **speed, **prediction_differences(verdicts_of[main], plain)}
        log(f"engine · {main}, batches of {config.condenser.batch_size}: {engine['batch_size_path']}")
    if profile_claims:
        (_, speed), profile = profile_call(lambda: run_engine(main, retrievers[main](), trained, config, claims, corpus, dev[:profile_claims]))
        engine["profile"] = {"system": main, **speed, **profile.as_dict()}
        log(f"engine profile · {main}: own seconds by package {engine['profile']['by_package']}")
    return engine, quality


# ---- the run --------------------------------------------------------------------------------


def build_config(args: argparse.Namespace) -> BaleenConfig:
    """The project's own settings objects, with this run's device, backbone and budgets; the
    fp16 codec (no faiss), BM25 round 0."""
    backbone, device = str(args.backbone), args.device
    max_examples = args.max_examples

    def epochs(specific: int) -> int:
        return args.epochs or specific

    return BaleenConfig(
        retriever=RetrieverConfig(backbone=backbone, device=device),
        index=IndexConfig(codec="fp16", **({"gpu_batch_tokens": args.index_batch_tokens} if args.index_batch_tokens else {})),
        labels=LabelConfig(rounds=args.rounds, round0="bm25", max_claims=args.train_claims),
        condenser=CondenserConfig(backbone=backbone, device=device, **({"batch_size": args.inference_batch_size} if args.inference_batch_size else {})),
        reader=ReaderConfig(backbone=backbone, device=device, **({"batch_size": args.inference_batch_size} if args.inference_batch_size else {})),
        training=TrainingConfig(
            flipr=FliprTrainingConfig(epochs=epochs(args.flipr_epochs), max_examples=max_examples),
            stage1=Stage1TrainingConfig(epochs=epochs(args.stage1_epochs), max_examples=max_examples),
            stage2=Stage2TrainingConfig(epochs=epochs(args.stage2_epochs), max_examples=max_examples),
            reader=ReaderTrainingConfig(epochs=epochs(args.reader_epochs), max_examples=max_examples),
        ),
        evaluation=EvaluationConfig(split="dev", systems=list(args.systems), depth=args.depth, max_claims=args.dev_claims, bootstrap=args.bootstrap),
    )


def device_description(device: torch.device) -> dict:
    import transformers

    info = {"type": device.type, "machine": machine_description(), "python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update({"name": props.name, "memory_gib": round(props.total_memory / 2**30, 1), "cuda": torch.version.cuda})
    else:
        info.update({"name": "cpu", "threads": torch.get_num_threads()})
    return info


class Results:
    """The results document, rewritten after every section (a run cut short keeps what it did)."""

    def __init__(self, out: Path, head: dict) -> None:
        self.out = out
        self.doc = {**head, **dict.fromkeys(RESULT_SECTIONS)}
        if out.exists():  # an earlier run of the same commit into the same file: keep the sections it measured
            earlier = json.loads(out.read_text())
            if earlier.get("commit") == head["commit"]:
                self.doc.update({k: earlier[k] for k in RESULT_SECTIONS if earlier.get(k) is not None})

    def set(self, key: str, value) -> None:
        self.doc[key] = value
        self.save()

    def save(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.out.with_name(f".{self.out.name}.tmp")
        tmp.write_text(json.dumps(self.doc, indent=1) + "\n")
        os.replace(tmp, self.out)


def default_out() -> Path:
    return Path(os.environ["OUT"]) / "gpu.json" if os.environ.get("OUT") else ROOT / "benchmarks" / "results" / "gpu.json"


def default_backbone_path(carry: Path) -> Path:
    return carry / "backbone" if (carry / "backbone").is_dir() else Path(default_backbone())


def check_backbone(path: Path) -> None:
    """Refuse a half-precision backbone that would load as fp16 (transformers 5 loads with
    dtype="auto"): the trainers need fp32 parameters."""
    config = json.loads((path / "config.json").read_text())
    dtype = config.get("dtype") or config.get("torch_dtype")
    if dtype not in (None, "float32"):
        sys.exit(f"{path}/config.json says dtype {dtype!r}: set it to float32 (benchmarks/gpu_carry.sh does)")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--carry", type=Path, default=ROOT / ".carry", help="folder built by benchmarks/gpu_carry.sh")
    parser.add_argument("--backbone", type=Path, default=None, help="checkpoint of every model (default: <carry>/backbone, else the shipped MiniLM-L6)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=None, help="results JSON (default: $OUT/gpu.json, else benchmarks/results/gpu.json)")
    parser.add_argument("--commit", default=None, help="commit to record (default: git's, when the tree is a checkout)")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"which of {','.join(SECTIONS)} to run (pipeline = training + engine + metrics)")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder for epoch checkpoints (default: a temp dir, removed)")
    parser.add_argument("--state", type=Path, default=None, help="keep finished label rounds and models here; a run cut off goes on from them when run again with the same settings")
    group = parser.add_argument_group("encoding")
    group.add_argument("--batch-tokens", type=ints, default=None, help="encoder token budgets per batch to time (default: 16384,32768,65536,131072 on a GPU, 1024,4096 on a CPU)")
    group.add_argument("--encode-passages", type=int, default=None, help="passages encoded per budget (default: all on a GPU, 256 on a CPU)")
    group.add_argument("--matmul-size", type=int, default=None, help="n of the n×n matmul timed (default: 8192 on a GPU, 1024 on a CPU)")
    group.add_argument("--matmul-iterations", type=int, default=None)
    group = parser.add_argument_group("budgets (defaults: the full run meant for a GPU)")
    group.add_argument("--corpus-passages", type=int, default=None, help="index only the gold passages plus this many others (smoke tests; default: all)")
    group.add_argument("--train-claims", type=int, default=None, help="label and train on the first N training claims (default: all)")
    group.add_argument("--dev-claims", type=int, default=None, help="verify the first N dev claims (default: all)")
    group.add_argument("--rounds", type=int, default=2, help="FLIPR label rounds (round 0 BM25, then one per trained FLIPR)")
    group.add_argument("--epochs", type=int, default=None, help="epochs of every model (overrides the four below)")
    group.add_argument("--flipr-epochs", type=int, default=3)
    group.add_argument("--stage1-epochs", type=int, default=2)
    group.add_argument("--stage2-epochs", type=int, default=3)
    group.add_argument("--reader-epochs", type=int, default=2)
    group.add_argument("--max-examples", type=int, default=None, help="examples per model at most (FLIPR and condenser hops, reader claims; default: all)")
    group.add_argument("--index-batch-tokens", type=int, default=None, help="encoder token budget of the index builds on a GPU (default: the best measured, else index.gpu_batch_tokens)")
    group.add_argument("--inference-batch-size", type=int, default=None, help="condenser/reader inference batch (default: the config's)")
    group.add_argument("--depth", type=int, default=100, help="passages retrieved per claim over its hops (Retrieval@depth)")
    group.add_argument("--systems", default="baleen,bm25-multihop", help=f"engine systems, of {','.join(SYSTEMS)}")
    group.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the metric intervals")
    group.add_argument("--compare-batching", action=argparse.BooleanOptionalAction, default=None, help="run the full system again in batches of batch_size (no token budget) and count differing predictions (default: on a GPU)")
    group.add_argument("--profile-claims", type=int, default=None, help="dev claims the full system verifies again under cProfile, apart from the timed run (default: 100 on a GPU, 0 = none on a CPU)")
    args = parser.parse_args(argv)
    gpu = args.device == "cuda"
    args.sections = [s for s in args.sections.split(",") if s]
    args.systems = [s for s in args.systems.split(",") if s]
    for name, allowed in (("sections", SECTIONS), ("systems", SYSTEMS)):
        if unknown := set(getattr(args, name)) - set(allowed):
            parser.error(f"unknown {name}: {', '.join(sorted(unknown))} (choose from {', '.join(allowed)})")
    args.batch_tokens = args.batch_tokens or ([16_384, 32_768, 65_536, 131_072] if gpu else [1024, 4096])
    args.encode_passages = args.encode_passages or (None if gpu else 256)
    args.matmul_size = args.matmul_size or (8192 if gpu else 1024)
    args.matmul_iterations = args.matmul_iterations or (50 if gpu else 5)
    args.profile_claims = (100 if gpu else 0) if args.profile_claims is None else args.profile_claims
    args.compare_batching = gpu if args.compare_batching is None else args.compare_batching
    args.backbone = args.backbone or default_backbone_path(args.carry)
    args.out = args.out or default_out()
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda, but torch sees no GPU")
    check_backbone(args.backbone)
    torch.manual_seed(0)
    data = args.carry / "data"
    claims = load_claims(data)
    config = build_config(args)
    train_uids = claims.uids("train", config.labels.max_claims)
    dev_uids = claims.uids("dev", config.evaluation.max_claims)
    corpus = load_corpus(data, claims.gold_pids(train_uids) | claims.gold_pids(dev_uids), args.corpus_passages)
    log(f"{len(corpus.pids)} passages, {len(train_uids)} training and {len(dev_uids)} dev claims; backbone {args.backbone} on {device}")
    results = Results(args.out, {
        "commit": args.commit or git_commit(ROOT),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": device_description(device),
        "data": {"passages": len(corpus.pids), "sentences": len(corpus.sentence_text), "train_claims": len(train_uids), "dev_claims": len(dev_uids), "carry": str(args.carry)},
        "settings": {"backbone": str(args.backbone), "sections": args.sections, **config.model_dump(mode="json", exclude={"store_root", "demo", "corpus", "orchestration"})},
    })
    work = args.work or Path(tempfile.mkdtemp(prefix="baleen-gpu-"))
    try:
        untrained = None
        if "encoding" in args.sections or "index" in args.sections or "untrained-flipr" in args.systems:
            flipr = Flipr.load(config.retriever)
            if "encoding" in args.sections:
                results.set("encoding", encoding_section(flipr, corpus, args))
                if not args.index_batch_tokens and results.doc["encoding"]["best_batch_tokens"]:
                    config = config.model_copy(update={"index": config.index.model_copy(update={"gpu_batch_tokens": results.doc["encoding"]["best_batch_tokens"]})})
            if "index" in args.sections or "untrained-flipr" in args.systems:
                index, timing = build_index(flipr, corpus, config.index)
                log(f"index build (untrained FLIPR): {timing}")
                if "index" in args.sections:
                    results.set("index_build", timing)
                untrained = (flipr, index) if "untrained-flipr" in args.systems else None
                del index
            del flipr
            free_gpu(device)
        if "pipeline" in args.sections:
            from baleen_core.retrieval.bm25 import Bm25Retriever  # bm25s: only the pipeline needs it

            started = time.perf_counter()
            bm25 = Bm25Retriever(corpus.pids, [corpus.texts[pid] for pid in corpus.pids])
            bm25_seconds = time.perf_counter() - started
            # what the trained models depend on (not the index batch or the evaluation's settings)
            finished = Finished(args.state, {"data": results.doc["data"], "backbone": str(args.backbone), **config.model_dump(mode="json", include={"retriever", "labels", "condenser", "reader", "training"})})
            trained, training = training_section(config, claims, corpus, bm25, work, finished)
            results.set("training", {"bm25_index_seconds": round(bm25_seconds, 2), **training})
            if results.doc["index_build"] is None:  # no index section: the first trained FLIPR's build is the same work
                results.set("index_build", {**training["indexes"]["flipr-r0"], "model": "flipr-r0"})
            engine, quality = engine_section(config, trained, claims, corpus, bm25, untrained, args.systems, partial(save_engine, results), args.profile_claims, args.compare_batching)
            results.doc["engine"] = engine
            results.set("hover_mini_dev", quality)
        results.doc["device"]["peak_rss_gib"] = round(peak_rss_gib(), 2)
        if device.type == "cuda":
            results.doc["device"]["peak_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    loaded = sorted(m for m in FORBIDDEN_MODULES if m in sys.modules)
    results.doc["forbidden_modules_loaded"] = loaded
    results.doc["wall_seconds"] = round(time.perf_counter() - STARTED, 1)
    results.save()
    log(f"results: {args.out}")
    if loaded:  # the GPU machine would have failed here: keep gpu.py on baleen_core alone
        print(f"error: imported {', '.join(loaded)}, which the GPU machine does not have", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
