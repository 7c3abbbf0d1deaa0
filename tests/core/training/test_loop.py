"""The shared epoch loop's step and resume pieces, on a tiny module with a CPU gradient scaler
(the same code path CUDA's fp16 scaler takes)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from baleen_core.training.loop import optimizer_step, restore_rng, restore_scaler, rng_state


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
