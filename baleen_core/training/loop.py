"""The epoch loop every model here trains with: FLIPR, both condenser stages, the reader.

AdamW with two learning rates (the pre-trained backbone and the fresh head), linear warm-up then
linear decay, gradient clipping, fp16 autocast with gradient scaling on CUDA, bf16 autocast on a CPU
when ``cpu_precision`` asks for it (:func:`training_precision`). Every epoch ends with
a checkpoint directory written atomically (``epoch-NNN``: the model as the model saves itself, plus
optimizer, scheduler, scaler and RNG state, CUDA's included, and the step metrics), and ``train_epochs`` resumes from
the newest one, so a killed run loses at most one epoch. An optional validation set is scored every
``validate_every`` steps and at the end of each epoch (the validation curve).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, TypeVar

import torch
from torch import nn

from baleen_core.config import OptimizerConfig
from baleen_core.training.attention import register_cpu_training_attention

STATE_FILE = "trainer_state.pt"
STEPS_FILE = "steps.json"

Example = TypeVar("Example")


class Trainable(Protocol):
    """What the loop needs from a model."""

    module: nn.Module
    device: torch.device

    def head_parameters(self) -> list[nn.Parameter]:
        """Parameters trained at ``head_lr`` (the fresh head); the rest train at ``lr``."""

    def save(self, directory: Path) -> None: ...

    def load_weights(self, directory: Path) -> None:
        """Replace this model's weights with those saved in ``directory``."""


def history_summary(history: Sequence[dict]) -> dict:
    """What a finished run's step metrics say: steps, seconds spent in steps (forward, backward,
    optimizer), each epoch's mean loss, the first and last training and validation losses."""
    epochs = sorted({h["epoch"] for h in history})
    validated = [h["val_loss"] for h in history if h.get("val_loss") is not None]
    return {
        "steps": len(history),
        "train_seconds": round(sum(h["seconds"] for h in history), 1),
        "epoch_mean_loss": {str(e): round(sum(h["loss"] for h in history if h["epoch"] == e) / max(1, sum(h["epoch"] == e for h in history)), 4) for e in epochs},
        "first_loss": history[0]["loss"] if history else None,
        "last_loss": history[-1]["loss"] if history else None,
        "first_val_loss": validated[0] if validated else None,
        "last_val_loss": validated[-1] if validated else None,
    }


def checkpoints(work_dir: Path) -> list[Path]:
    """Finished epoch checkpoints, oldest first."""
    return sorted(p for p in work_dir.glob("epoch-*") if (p / STATE_FILE).exists())


def training_autocast(device: torch.device, cpu_precision: str = "float32") -> torch.autocast:
    """The autocast a training step runs in: float16 on CUDA (with gradient scaling), bfloat16 on a
    CPU when ``cpu_precision`` is 'bfloat16' (no scaling needed: bf16 keeps float32's range), none
    otherwise."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.float16)
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=cpu_precision == "bfloat16")


@contextmanager
def training_precision(module: nn.Module, device: torch.device, cpu_precision: str) -> Iterator[None]:
    """While training in bfloat16 on a CPU, every Hugging Face backbone inside ``module`` uses eager
    attention with a cheaper dropout (:mod:`baleen_core.training.attention`): PyTorch's fused CPU
    attention (sdpa) runs its backward in bf16 barely faster than in float32 (MiniLM-L6, 16 × 512
    tokens, one step on a 2-core AVX512-BF16 CPU: sdpa 12.7 s float32, 10.6 s bf16; eager 6.4 s
    bf16), and drawing eager attention's dropout mask element by element took a third of a bf16
    stage-2 step. Each backbone's own implementation comes back afterwards: sdpa is the faster one
    at inference."""
    switched = []
    if device.type == "cpu" and cpu_precision == "bfloat16":
        from transformers import PreTrainedModel

        training_attention = register_cpu_training_attention()
        for sub in module.modules():
            if isinstance(sub, PreTrainedModel) and sub.config._attn_implementation != training_attention:
                switched.append((sub, sub.config._attn_implementation))
                sub.set_attn_implementation(training_attention)
    try:
        yield
    finally:
        for sub, implementation in switched:
            sub.set_attn_implementation(implementation)


def validation_loss(
    examples: Sequence[Example], loss_fn: Callable[[Sequence[Example]], torch.Tensor], batch_size: int, device: torch.device, cpu_precision: str = "float32"
) -> float:
    """Mean batch loss over ``examples`` without gradients, in the training steps' precision."""
    losses, weights = [], []
    with torch.no_grad(), training_autocast(device, cpu_precision):
        for start in range(0, len(examples), batch_size):
            batch = examples[start : start + batch_size]
            losses.append(float(loss_fn(batch)))
            weights.append(len(batch))
    return sum(loss * w for loss, w in zip(losses, weights, strict=True)) / max(1, sum(weights))


def train_epochs(
    model: Trainable,
    examples: Sequence[Example],
    loss_fn: Callable[[Sequence[Example]], torch.Tensor],
    config: OptimizerConfig,
    work_dir: Path,
    on_step: Callable[[dict], None] | None = None,
    validation: Sequence[Example] = (),
    validate_every: int = 50,
    min_batch: int = 1,
    units: Sequence[Sequence[int]] | None = None,
) -> tuple[Path, list[dict]]:
    """Train ``model`` in place; returns the last epoch's checkpoint directory and every step's
    metrics, including those of epochs finished before a resume. Batches smaller than
    ``min_batch`` are skipped (FLIPR needs two queries for in-batch negatives). ``units``: groups
    of example indices that are shuffled as one and so stay next to each other (:func:`epoch_order`)."""
    if not examples:
        raise ValueError("no training examples: check that the hop labels and claims artifacts are not empty")
    if units is not None and sorted(i for unit in units for i in unit) != list(range(len(examples))):
        raise ValueError("the training units must hold every example index exactly once")
    work_dir.mkdir(parents=True, exist_ok=True)
    module, device = model.module, model.device
    head_ids = {id(p) for p in model.head_parameters()}
    optimizer = torch.optim.AdamW(
        [
            {"params": [p for p in module.parameters() if id(p) not in head_ids], "lr": config.lr},
            {"params": model.head_parameters(), "lr": config.head_lr},
        ]
    )
    steps_per_epoch = math.ceil(len(examples) / config.batch_size)
    total = steps_per_epoch * config.epochs
    warmup = max(1, int(config.warmup * total))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup))))
    scaler = torch.amp.GradScaler("cuda", enabled=device.type == "cuda")
    history: list[dict] = []
    start_epoch = 0
    torch.manual_seed(config.seed)  # dropout: a rerun gives the same model (a resume restores the RNG state instead)
    if done := checkpoints(work_dir):
        start_epoch, history = _resume(model, optimizer, scheduler, scaler, done[-1])
    if start_epoch >= config.epochs:
        module.eval()
        return done[-1], history

    def validate() -> float | None:
        if not validation:
            return None
        module.eval()
        value = validation_loss(validation, loss_fn, config.batch_size, device, config.cpu_precision)
        module.train()
        return value

    module.train()
    with training_precision(module, device, config.cpu_precision):
        step = len(history)
        last = work_dir
        for epoch in range(start_epoch, config.epochs):
            order = epoch_order(len(examples), units, config.seed + epoch)
            starts = list(range(0, len(order), config.batch_size))
            for i, start in enumerate(starts):
                batch = [examples[j] for j in order[start : start + config.batch_size]]
                if len(batch) < min_batch:
                    continue
                started = time.perf_counter()
                with training_autocast(device, config.cpu_precision):
                    loss = loss_fn(batch)
                optimizer_step(loss, module, optimizer, scheduler, scaler, config.grad_clip)
                seconds = time.perf_counter() - started
                last_of_epoch = i == len(starts) - 1
                val = validate() if (last_of_epoch or (step + 1) % validate_every == 0) else None
                record = {"epoch": epoch, "step": step, "loss": float(loss.detach()), "val_loss": val, "lr": scheduler.get_last_lr()[0], "examples": len(batch), "seconds": seconds}
                history.append(record)
                step += 1
                if on_step is not None:
                    on_step(record)
            last = _save(model, optimizer, scheduler, scaler, epoch, history, work_dir)
    module.eval()
    return last, history


def epoch_order(n: int, units: Sequence[Sequence[int]] | None, seed: int) -> list[int]:
    """The order of ``n`` examples in one epoch: shuffled by ``seed``; with ``units``, the units are
    shuffled and each keeps its examples together, in its own order (a unit can still be cut by a
    batch boundary)."""
    if units is None:
        order = list(range(n))
        random.Random(seed).shuffle(order)
        return order
    shuffled = [list(unit) for unit in units]
    random.Random(seed).shuffle(shuffled)
    return [i for unit in shuffled for i in unit]


def optimizer_step(loss: torch.Tensor, module: nn.Module, optimizer, scheduler, scaler: torch.amp.GradScaler, grad_clip: float) -> bool:
    """Backward, clip, step; returns whether the optimizer stepped. A gradient scaler that finds
    inf/NaN gradients skips the optimizer's step, and then the learning-rate schedule does not
    advance either (it counts optimizer steps, so a skipped one must not shorten the warm-up)."""
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(module.parameters(), grad_clip)
    scale = scaler.get_scale()
    scaler.step(optimizer)
    scaler.update()
    stepped = scaler.get_scale() >= scale  # the scale only shrinks after a skipped step
    if stepped:
        scheduler.step()
    return stepped


def restore_scaler(scaler: torch.amp.GradScaler, state: dict) -> None:
    """Load a saved scaler state, unless it is empty: a run started on the CPU saved a disabled
    scaler's ``{}``, and an enabled (CUDA) scaler resuming it then starts from its defaults."""
    if state:
        scaler.load_state_dict(state)


def rng_state() -> dict:
    """Every RNG a training step draws from: the CPU's and, where present, each CUDA device's
    (dropout on the GPU), so that a resumed run continues the same random stream."""
    state = {"torch_rng": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda_rng"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict) -> None:
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])


def _save(model: Trainable, optimizer, scheduler, scaler, epoch: int, history: list[dict], work_dir: Path) -> Path:
    tmp = work_dir / f".tmp-{uuid.uuid4().hex}"
    model.save(tmp)
    torch.save(
        {"epoch": epoch, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "scaler": scaler.state_dict(), **rng_state()},
        tmp / STATE_FILE,
    )
    (tmp / STEPS_FILE).write_text(json.dumps(history))
    final = work_dir / f"epoch-{epoch:03d}"
    if final.exists():
        shutil.rmtree(final)
    os.rename(tmp, final)
    return final


def _resume(model: Trainable, optimizer, scheduler, scaler, checkpoint: Path) -> tuple[int, list[dict]]:
    model.load_weights(checkpoint)
    state = torch.load(checkpoint / STATE_FILE, map_location="cpu", weights_only=True)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    restore_scaler(scaler, state["scaler"])
    restore_rng(state)
    return state["epoch"] + 1, json.loads((checkpoint / STEPS_FILE).read_text())
