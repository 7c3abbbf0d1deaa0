"""Training FLIPR on hop labels.

Each example is one hop of one claim: the query is the claim plus the context facts of earlier
hops, the positive is the gold passage assigned to this hop, the negatives are the hop's hard
negatives. A step scores every query against every passage of the batch (its own positive and
hard negatives plus the other queries' passages, i.e. in-batch negatives) with FLIPR, and
minimises the cross-entropy of the positive. Mixed precision (fp16 autocast + gradient scaling)
on CUDA.

Every epoch ends with a checkpoint directory written atomically (``epoch-NNN``: model, optimizer,
scheduler, RNG state, step metrics). ``train_flipr`` resumes from the newest one, so a killed run
loses at most one epoch.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from baleen_core.config import FliprTrainingConfig
from baleen_core.retrieval.modeling import Flipr
from baleen_core.retrieval.scoring import flipr_score

STATE_FILE = "trainer_state.pt"
STEPS_FILE = "steps.json"


@dataclass(frozen=True)
class FliprExample:
    claim: str
    context: tuple[str, ...]
    positive: str
    negatives: tuple[str, ...]


def flipr_batch_loss(flipr: Flipr, examples: Sequence[FliprExample], hard_negatives: int) -> torch.Tensor:
    """Cross-entropy of each query's positive among all passages of the batch."""
    tok, device = flipr.tokenizer, flipr.device
    queries = tok.queries([e.claim for e in examples], [list(e.context) for e in examples]).to(device)
    passages: list[str] = []
    targets = []
    for e in examples:
        targets.append(len(passages))
        passages.append(e.positive)
        passages.extend(e.negatives[:hard_negatives])
    docs = tok.docs(passages).to(device)
    q = flipr.encoder(queries.input_ids, queries.attention_mask)
    d = flipr.encoder(docs.input_ids, docs.attention_mask)
    scores = flipr_score(q.float(), queries.score_mask, d.float(), docs.attention_mask.bool(), queries.n_claim, flipr.config.k_claim, flipr.config.k_context)
    return F.cross_entropy(scores, torch.tensor(targets, device=device))


def _checkpoints(work_dir: Path) -> list[Path]:
    return sorted(p for p in work_dir.glob("epoch-*") if (p / STATE_FILE).exists())


def train_flipr(
    flipr: Flipr,
    examples: Sequence[FliprExample],
    config: FliprTrainingConfig,
    work_dir: Path,
    on_step: Callable[[dict], None] | None = None,
) -> tuple[Path, list[dict]]:
    """Train in place; returns the last epoch's checkpoint directory and every step's metrics
    (including those of epochs finished before a resume)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    encoder, device = flipr.encoder, flipr.device
    head = list(encoder.projection.parameters())
    head_ids = {id(p) for p in head}
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in encoder.parameters() if id(p) not in head_ids], "lr": config.lr}, {"params": head, "lr": config.head_lr}]
    )
    steps_per_epoch = math.ceil(len(examples) / config.batch_size)
    total = steps_per_epoch * config.epochs
    warmup = max(1, int(config.warmup * total))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup))))
    scaler = torch.amp.GradScaler("cuda", enabled=device.type == "cuda")
    history: list[dict] = []
    start_epoch = 0
    if done := _checkpoints(work_dir):
        start_epoch, history = _resume(flipr, optimizer, scheduler, scaler, done[-1])
    if start_epoch >= config.epochs:
        encoder.eval()
        return done[-1], history
    encoder.train()
    step = len(history)
    for epoch in range(start_epoch, config.epochs):
        order = list(range(len(examples)))
        random.Random(config.seed + epoch).shuffle(order)
        for start in range(0, len(order), config.batch_size):
            batch = [examples[i] for i in order[start : start + config.batch_size]]
            if len(batch) < 2:
                continue  # a lone query has no in-batch negatives
            started = time.perf_counter()
            with torch.autocast(device.type, dtype=torch.float16, enabled=device.type == "cuda"):
                loss = flipr_batch_loss(flipr, batch, config.hard_negatives)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(encoder.parameters(), config.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            record = {"epoch": epoch, "step": step, "loss": float(loss.detach()), "lr": scheduler.get_last_lr()[0], "examples": len(batch), "seconds": time.perf_counter() - started}
            history.append(record)
            step += 1
            if on_step is not None:
                on_step(record)
        last = _save(flipr, optimizer, scheduler, scaler, epoch, history, work_dir)
    encoder.eval()
    return last, history


def _save(flipr, optimizer, scheduler, scaler, epoch: int, history: list[dict], work_dir: Path) -> Path:
    tmp = work_dir / f".tmp-{uuid.uuid4().hex}"
    flipr.save(tmp)
    torch.save(
        {
            "epoch": epoch,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "scaler": scaler.state_dict(),
            "torch_rng": torch.get_rng_state(),
        },
        tmp / STATE_FILE,
    )
    (tmp / STEPS_FILE).write_text(json.dumps(history))
    final = work_dir / f"epoch-{epoch:03d}"
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    return final


def _resume(flipr, optimizer, scheduler, scaler, checkpoint: Path) -> tuple[int, list[dict]]:
    loaded = Flipr.load(flipr.config.model_copy(update={"checkpoint": checkpoint}), flipr.device)
    flipr.encoder.load_state_dict(loaded.encoder.state_dict())
    state = torch.load(checkpoint / STATE_FILE, map_location="cpu", weights_only=True)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    scaler.load_state_dict(state["scaler"])
    torch.set_rng_state(state["torch_rng"])
    return state["epoch"] + 1, json.loads((checkpoint / STEPS_FILE).read_text())
