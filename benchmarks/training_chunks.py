"""Training steps on the CPU with and without length-sorted chunks (no FLOPs on padding).

A FLIPR step encodes 16 queries and 64 passages (a positive and 3 hard negatives each); a stage-1
step reads the windows of 8 hops of 1 + 4 passages. Padded to the batch's longest input, most of
the work is padding: hover-mini passages average 45 tokens, a batch's longest about 180. The same
steps are timed forward and backward with the whole batch padded at once and in chunks of at
most ``CPU_TRAINING_CHUNK_TOKENS`` padded positions, interleaved, on batches built from
hover-mini's training claims (their gold passages as positives, random passages as negatives),
and the loss of each pair is checked equal (dropout off). Writes
``benchmarks/results/training-chunks.json``: seconds per step (median, min, max) each way and the
speed-up with a bootstrap interval over the batches.

    benchmarks/gpu_carry.sh                     # once: hover-mini ingested into .carry/data
    python benchmarks/training_chunks.py [--carry .carry] [--batches 6] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

import baleen_core.retrieval.modeling as modeling
from baleen_core.condensing import SequenceModel, Stage1Query
from baleen_core.condensing.condense import stage1_inputs
from baleen_core.config import CondenserConfig, RetrieverConfig
from baleen_core.dataset import load_claims, load_corpus
from baleen_core.results import git_commit, machine_description, write_results
from baleen_core.retrieval import Flipr
from baleen_core.training.flipr_trainer import FliprExample, flipr_batch_loss

ROOT = Path(__file__).resolve().parents[1]
WHOLE = 10**12  # padded positions per chunk that never split a batch: the whole batch at once


def timed_step(loss_of, chunk_tokens: int, module: torch.nn.Module) -> tuple[float, float]:
    """Seconds of one forward + backward with ``chunk_tokens`` per chunk, and the loss."""
    modeling.CPU_TRAINING_CHUNK_TOKENS = chunk_tokens
    module.zero_grad(set_to_none=True)
    started = time.perf_counter()
    loss = loss_of()
    loss.backward()
    return time.perf_counter() - started, loss.item()


def compare(name: str, batches: list, loss_of, module: torch.nn.Module, chunk_tokens: int) -> dict:
    """Each batch once each way, the order alternating; the losses of a pair must agree."""
    whole, chunked = [], []
    for i, batch in enumerate(batches):
        ways = [(WHOLE, whole), (chunk_tokens, chunked)]
        losses = {}
        for tokens, seconds in ways if i % 2 == 0 else ways[::-1]:
            took, losses[tokens] = timed_step(lambda: loss_of(batch), tokens, module)
            seconds.append(took)
        if abs(losses[WHOLE] - losses[chunk_tokens]) > 1e-3 * max(1.0, abs(losses[WHOLE])):
            raise SystemExit(f"{name}: the chunked loss {losses[chunk_tokens]} differs from the whole batch's {losses[WHOLE]}")
        print(f"{name} batch {i}: whole {whole[-1]:.2f} s, chunked {chunked[-1]:.2f} s", flush=True)
    ratios = [w / c for w, c in zip(whole, chunked, strict=True)]
    rng = np.random.default_rng(0)
    boot = sorted(statistics.mean(rng.choice(ratios, len(ratios))) for _ in range(2000))
    return {
        "batches": len(batches),
        "whole_seconds": {"median": round(statistics.median(whole), 3), "min": round(min(whole), 3), "max": round(max(whole), 3)},
        "chunked_seconds": {"median": round(statistics.median(chunked), 3), "min": round(min(chunked), 3), "max": round(max(chunked), 3)},
        "speedup": {"mean": round(statistics.mean(ratios), 3), "lo": round(boot[49], 3), "hi": round(boot[1949], 3)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--carry", type=Path, default=ROOT / ".carry", help="folder built by benchmarks/gpu_carry.sh (hover-mini in .carry/data)")
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--chunk-tokens", type=int, default=modeling.CPU_TRAINING_CHUNK_TOKENS, help="padded positions per chunk to time (default: the training code's)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "training-chunks.json")
    parser.add_argument("--note", default=None, help="what else the machine was doing, recorded in the results file")
    args = parser.parse_args()
    chunk_tokens = args.chunk_tokens
    data = args.carry / "data"
    if not (data / "passages.parquet").is_file():
        raise SystemExit(f"no hover-mini in {data}: run benchmarks/gpu_carry.sh first")
    claims = load_claims(data)
    corpus = load_corpus(data, set(), None)
    rng = random.Random(0)
    train = [uid for uid in claims.uids("train", None) if len({pid for pid, _ in claims.gold[uid]}) >= 2]
    torch.manual_seed(0)

    def hop(uid: str) -> tuple[str, tuple[str, ...], int, list[int]]:
        gold = sorted({pid for pid, _ in claims.gold[uid]})
        context = tuple(corpus.fact(pid, sid) for pid, sid in sorted(claims.gold[uid]) if pid == gold[0]) if rng.random() < 0.5 else ()
        return claims.rows[uid]["claim"], context, gold[-1], rng.sample(corpus.pids, 4)

    flipr = Flipr.load(RetrieverConfig(device="cpu"))
    flipr.encoder.eval()  # dropout off: the pair's losses must agree
    flipr_batches = []
    for _ in range(args.batches):
        examples = []
        for uid in rng.sample(train, 16):
            claim, context, positive, negatives = hop(uid)
            examples.append(FliprExample(claim, context, corpus.texts[positive], tuple(corpus.texts[p] for p in negatives[:3])))
        flipr_batches.append(examples)
    results = {"flipr": compare("FLIPR", flipr_batches, lambda batch: flipr_batch_loss(flipr, batch, hard_negatives=3), flipr.encoder, chunk_tokens)}

    condenser = CondenserConfig(device="cpu")
    stage1 = SequenceModel.condenser_to_train("stage1", condenser, 0)
    stage1.module.eval()
    stage1_batches = []
    for _ in range(args.batches):
        queries = []
        for uid in rng.sample(train, 8):
            claim, context, positive, negatives = hop(uid)
            queries.append(Stage1Query(claim, context, tuple(corpus.passages[p] for p in (positive, *negatives) if p in corpus.passages)))
        stage1_batches.append([w for _, pairs in stage1_inputs(stage1, queries, condenser) for w, _ in pairs])
    results["stage1"] = compare("stage 1", stage1_batches, lambda windows: stage1.training_logits(windows).square().mean(), stage1.module, chunk_tokens)

    document = {
        "commit": git_commit(ROOT),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(),
        "threads": torch.get_num_threads(),
        "note": args.note,
        "chunk_tokens": chunk_tokens,
        "steps": {"flipr": "16 queries, 64 passages (1 + 3 each), forward + backward", "stage1": "8 hops of 1 + 4 passages, every window, forward + backward"},
        **results,
    }
    write_results(document, args.out)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
