"""The shared epoch loop's step and resume pieces, on a tiny module with a CPU gradient scaler
(the same code path CUDA's fp16 scaler takes)."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from baleen_core.training.loop import epoch_order, optimizer_step, restore_rng, restore_scaler, rng_state


def _setup():
    torch.manual_seed(0)
    module = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (s + 1))
    return module, optimizer, scheduler, torch.amp.GradScaler("cpu", enabled=True)


def test_a_step_the_scaler_skips_does_not_advance_the_schedule():
    module, optimizer, scheduler, scaler = _setup()
    x = torch.ones(4, 3)
    assert optimizer_step(module(x).sum(), module, optimizer, scheduler, scaler, grad_clip=1.0)
    assert scheduler.last_epoch == 1
    weights = module.weight.detach().clone()
    assert not optimizer_step(module(x).sum() * float("inf"), module, optimizer, scheduler, scaler, grad_clip=1.0)  # inf gradients
    assert scheduler.last_epoch == 1 and torch.equal(module.weight, weights)  # neither the weights nor the schedule moved
    assert optimizer_step(module(x).sum(), module, optimizer, scheduler, scaler, grad_clip=1.0) and scheduler.last_epoch == 2


def test_an_enabled_scaler_resumes_a_cpu_run_that_saved_a_disabled_one():
    disabled = torch.amp.GradScaler("cuda", enabled=False)  # what a CPU run saves: {}
    assert disabled.state_dict() == {}
    _, _, _, enabled = _setup()
    restore_scaler(enabled, disabled.state_dict())  # GradScaler.load_state_dict({}) raises
    assert enabled.get_scale() == 65536.0
    saved = torch.amp.GradScaler("cpu", init_scale=8.0, enabled=True).state_dict()
    restore_scaler(enabled, saved)
    assert enabled.get_scale() == 8.0
    with pytest.raises(RuntimeError, match="empty"):
        enabled.load_state_dict({})  # the failure restore_scaler avoids


def test_the_rng_state_round_trips_so_a_resume_continues_the_same_stream():
    state = rng_state()
    first = torch.rand(5)
    restore_rng(state)
    assert torch.equal(torch.rand(5), first)
    assert ("cuda_rng" in state) == torch.cuda.is_available()


def test_a_history_summarised_by_hand():
    from baleen_core.training.loop import history_summary

    history = [
        {"epoch": 0, "loss": 2.0, "seconds": 0.25, "val_loss": None},
        {"epoch": 0, "loss": 1.0, "seconds": 0.25, "val_loss": 1.5},
        {"epoch": 1, "loss": 0.5, "seconds": 0.5},
        {"epoch": 1, "loss": 0.25, "seconds": 0.04, "val_loss": 0.75},
    ]
    assert history_summary(history) == {
        "steps": 4,
        "train_seconds": 1.0,  # 1.04, to a tenth
        "epoch_mean_loss": {"0": 1.5, "1": 0.375},
        "first_loss": 2.0,
        "last_loss": 0.25,
        "first_val_loss": 1.5,
        "last_val_loss": 0.75,
    }
    assert history_summary([]) == {"steps": 0, "train_seconds": 0, "epoch_mean_loss": {}, "first_loss": None, "last_loss": None, "first_val_loss": None, "last_val_loss": None}


class _TinyBert:
    """A Trainable around a real (tiny, random) Hugging Face BERT, whose attention the loop may switch."""

    def __init__(self):
        from transformers import BertConfig, BertModel

        torch.manual_seed(0)
        self.module = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32))
        self.device = torch.device("cpu")

    def head_parameters(self):
        return []

    def save(self, directory):
        directory.mkdir(parents=True)
        torch.save(self.module.state_dict(), directory / "weights.pt")

    def load_weights(self, directory):
        self.module.load_state_dict(torch.load(directory / "weights.pt"))


@pytest.mark.parametrize("cpu_precision", ["float32", "bfloat16"])
def test_cpu_training_runs_in_the_precision_asked_with_lane_dropout_attention_only_while_in_bf16(tmp_path, cpu_precision):
    from baleen_core.config import OptimizerConfig
    from baleen_core.training.attention import CPU_TRAINING_ATTENTION
    from baleen_core.training.loop import train_epochs

    model = _TinyBert()
    assert model.module.config._attn_implementation == "sdpa"
    seen = []

    def loss_fn(batch):
        hidden = model.module(input_ids=torch.tensor(batch)).last_hidden_state
        products = hidden @ hidden.transpose(1, 2)  # a matmul, as FLIPR's scores are: bf16 under the autocast
        seen.append((torch.is_autocast_enabled("cpu"), products.dtype, model.module.config._attn_implementation, model.module.training))
        return hidden.float().pow(2).mean()

    examples = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]
    config = OptimizerConfig(epochs=1, batch_size=2, cpu_precision=cpu_precision)
    _, history = train_epochs(model, examples, loss_fn, config, tmp_path / "run", validation=examples[:2], validate_every=1)
    bf16 = cpu_precision == "bfloat16"
    steps = [s for s in seen if s[3]]
    validations = [s for s in seen if not s[3]]
    assert len(history) == 2 and len(steps) == 2 and validations  # validated after each step, in eval mode
    assert all(s[:3] == (bf16, torch.bfloat16 if bf16 else torch.float32, CPU_TRAINING_ATTENTION if bf16 else "sdpa") for s in seen)
    assert model.module.config._attn_implementation == "sdpa"  # back to the faster one for inference
    assert all(p.dtype == torch.float32 for p in model.module.parameters())  # autocast: the weights stay float32


def test_a_failed_bf16_step_still_gives_the_backbone_its_attention_back(tmp_path):
    from baleen_core.config import OptimizerConfig
    from baleen_core.training.loop import train_epochs

    model = _TinyBert()

    def failing(batch):
        raise RuntimeError("a step failed")

    with pytest.raises(RuntimeError, match="a step failed"):
        train_epochs(model, [[1, 2], [3, 4]], failing, OptimizerConfig(batch_size=2, cpu_precision="bfloat16"), tmp_path / "run")
    assert model.module.config._attn_implementation == "sdpa"


def test_an_epochs_order_shuffles_the_units_and_keeps_each_together():
    # without units: the seeded shuffle of every index, as the loop always made it
    plain = list(range(9))
    random.Random(5).shuffle(plain)
    assert epoch_order(9, None, 5) == plain
    units = [[0, 1], [2], [3, 4], [5], [6, 7], [8]]
    order = epoch_order(9, units, 5)
    assert sorted(order) == list(range(9))
    for first, second in ([0, 1], [3, 4], [6, 7]):  # each pair stays adjacent, in its own order
        assert order.index(second) == order.index(first) + 1
    assert epoch_order(9, units, 5) == order and any(epoch_order(9, units, seed) != order for seed in range(6, 12))
