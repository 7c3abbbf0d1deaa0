"""GPU benchmark: the whole of openbaleen on one device, driving ``baleen_core`` directly.

No Prefect, DuckDB, great-expectations, faiss or blingfire: the GPU machine has only Python 3.12,
torch, transformers 5, pyarrow, numpy, pandas, pyyaml and tqdm. The rest comes in a carry folder
that ``benchmarks/gpu_carry.sh`` builds here (under 64 MiB): the backbone (fp16 safetensors), the
wheels of pydantic and bm25s, and hover-mini ingested and resolved by the project's own readers
(Parquet in the store's schemas). The index uses the ``fp16`` codec, k-means in torch: no faiss.
The pipeline runs in memory (``baleen_core.pipeline`` over ``baleen_core.dataset``), through the
``baleen_core`` functions the Prefect tasks call on what they read from the store.

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
- ``engine``: ``baleen_core.engine.verify_claims`` over the dev claims, claims/s per system, at the
  context threshold chosen in training on the held-out training claims, as the evaluation flow
  does; with ``--compare-batching`` (default on a GPU) the full system again unbatched, FLIPR
  searching one query at a time and the models in batches of ``batch_size`` inputs instead of
  token budgets, with how many claims' predictions differ;
- ``engine.profile``, ``engine.device_profile``: the full system on ``--profile-claims`` dev claims
  under cProfile (host seconds by package and function) and torch.profiler (the device's busy
  share, seconds per engine region, top kernels); ``engine.variants``: ``--engine-variants``;
- ``hover_mini_dev``: HoVer's metrics per system and hop count (``baleen_core.results``).

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
import json
import logging
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python3 benchmarks/gpu.py` from a plain checkout (no install)
    sys.path.insert(0, str(ROOT))

from baleen_core.runtime import SAFE_DEFAULTS  # noqa: E402  (os and pathlib only)

for _key, _value in SAFE_DEFAULTS.items():  # offline, no telemetry: before transformers is imported
    os.environ.setdefault(_key, _value)

import torch  # noqa: E402

from baleen_core.config import BaleenConfig, CondenserConfig, EvaluationConfig, FliprTrainingConfig, IndexConfig, LabelConfig, ReaderConfig  # noqa: E402
from baleen_core.config import ReaderTrainingConfig, RetrieverConfig, Stage1TrainingConfig, Stage2TrainingConfig, TrainingConfig, default_backbone  # noqa: E402
from baleen_core.dataset import Corpus, load_claims, load_corpus  # noqa: E402
from baleen_core.pipeline import FinishedSteps, evaluate_pipeline, parse_inference_variant, train_pipeline  # noqa: E402
from baleen_core.results import SectionedResults, device_description, git_commit  # noqa: E402
from baleen_core.retrieval import Flipr  # noqa: E402
from baleen_core.retrieval.building import build_in_memory  # noqa: E402
from baleen_core.retrieval.throughput import free_device_memory, matmul_rate, measure_encoding  # noqa: E402

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


class Elapsed(logging.Formatter):
    """Every line with the seconds since the start and the peak memory so far."""

    def format(self, record: logging.LogRecord) -> str:
        return f"[{time.perf_counter() - STARTED:8.1f} s, peak RSS {peak_rss_gib():5.1f} GiB] {record.getMessage()}"


log = logging.getLogger("gpu-benchmark").info


def encoding_section(flipr: Flipr, corpus: Corpus, args: argparse.Namespace) -> dict:
    """The device's matmul rate, then FLIPR's encoding at each token budget (``measure_encoding``)."""
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


def default_out() -> Path:
    return Path(os.environ["OUT"]) / "gpu.json" if os.environ.get("OUT") else ROOT / "benchmarks" / "results" / "gpu.json"


def check_backbone(path: Path) -> None:
    """Refuse a half-precision backbone that would load as fp16 (transformers 5 loads with
    dtype="auto"): the trainers need fp32 parameters."""
    config = json.loads((path / "config.json").read_text())
    dtype = config.get("dtype") or config.get("torch_dtype")
    if dtype not in (None, "float32"):
        sys.exit(f"{path}/config.json says dtype {dtype!r}: set it to float32 (benchmarks/gpu_carry.sh does)")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    variants = lambda text: [v for v in text.split(",") if v and parse_inference_variant(v)]  # noqa: E731  (a bad name fails here, before any work)
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
    group.add_argument("--matmul-size", type=int, default=None, help="n of the n×n matmul timed (default: 8192 on a GPU, 2048 on a CPU)")
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
    group.add_argument("--compare-batching", action=argparse.BooleanOptionalAction, default=None, help="run the full system again unbatched (one FLIPR query at a time, models in batches of batch_size) and count differing predictions (default: on a GPU)")
    group.add_argument("--engine-variants", type=variants, default=[], help="inference variants the full system runs again, each timed after its own warm-up, with its differences counted: comma-separated, each a '+'-join of fp16-weights, compile, tokens-N (baleen_core.pipeline.VARIANT_PARTS)")
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
    args.matmul_size = args.matmul_size or (8192 if gpu else 2048)  # 1024² is too small for a CPU's rate (cpu-encoding.json)
    args.matmul_iterations = args.matmul_iterations or (50 if gpu else 10)
    args.profile_claims = (100 if gpu else 0) if args.profile_claims is None else args.profile_claims
    args.compare_batching = gpu if args.compare_batching is None else args.compare_batching
    args.backbone = args.backbone or (args.carry / "backbone" if (args.carry / "backbone").is_dir() else Path(default_backbone()))
    args.out = args.out or default_out()
    return args


def save_engine(results: SectionedResults, engine: dict, quality: dict) -> None:
    results.doc["engine"] = engine
    results.set("hover_mini_dev", quality)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(Elapsed())
    for name in ("gpu-benchmark", "baleen_core"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.INFO)
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
    results = SectionedResults(args.out, {
        "commit": args.commit or git_commit(ROOT),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": device_description(device),
        "data": {"passages": len(corpus.pids), "sentences": len(corpus.sentence_text), "train_claims": len(train_uids), "dev_claims": len(dev_uids), "carry": str(args.carry)},
        "settings": {"backbone": str(args.backbone), "sections": args.sections, **config.model_dump(mode="json", exclude={"store_root", "demo", "corpus", "orchestration"})},
    }, RESULT_SECTIONS)
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
                index, timing = build_in_memory(flipr, corpus.pids, corpus.texts, config.index)
                log(f"index build (untrained FLIPR): {timing}")
                if "index" in args.sections:
                    results.set("index_build", timing)
                untrained = (flipr, index) if "untrained-flipr" in args.systems else None
                del index
            del flipr
            free_device_memory(device)
        if "pipeline" in args.sections:
            from baleen_core.retrieval.bm25 import Bm25Retriever  # bm25s: only the pipeline needs it

            started = time.perf_counter()
            bm25 = Bm25Retriever(corpus.pids, [corpus.texts[pid] for pid in corpus.pids])
            bm25_seconds = time.perf_counter() - started
            # what the trained models depend on (not the index batch or the evaluation's settings)
            finished = FinishedSteps(args.state, {"data": results.doc["data"], "backbone": str(args.backbone), **config.model_dump(mode="json", include={"retriever", "labels", "condenser", "reader", "training"})})
            trained, training = train_pipeline(config, claims, corpus, bm25, work, finished)
            results.set("training", {"bm25_index_seconds": round(bm25_seconds, 2), **training})
            if results.doc["index_build"] is None:  # no index section: the first trained FLIPR's build is the same work
                results.set("index_build", {**training["indexes"]["flipr-r0"], "model": "flipr-r0"})
            save_engine(results, *evaluate_pipeline(config, trained, claims, corpus, bm25, untrained, args.systems, partial(save_engine, results), args.profile_claims, args.compare_batching, variants=args.engine_variants))
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
