"""How fast FLIPR encodes, against what the device can do: passages/s, tokens/s, FLOPs.

The encoder's forward FLOPs per token are counted from its shape (BERT family), the device's rate
is measured on the densest work there is (a square matmul), and their ratio says how much of the
device the encoder uses. GPU work is queued: :func:`sync` makes a timer wait for it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from baleen_core.retrieval.modeling import Flipr, length_batches

logger = logging.getLogger(__name__)


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so that a timer measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free_device_memory(device: torch.device) -> None:
    """Return cached GPU blocks (between models, so that the next one finds the memory)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


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
    tokens, ``peak`` the device's FLOP/s. The best budget is also timed end to end from text
    (tokenizing included). A budget that runs out of GPU memory is recorded as such."""
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
            free_device_memory(device)
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
        logger.info("encoding, %d tokens per batch: %s", budget, runs[str(budget)])
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
