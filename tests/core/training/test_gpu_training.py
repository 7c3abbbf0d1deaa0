"""Training on the GPU (run with ``-m gpu`` on a machine with CUDA): a step in autocast, and a
CPU-started run resumed on the GPU."""

from __future__ import annotations

import pytest
import torch

from baleen_core.config import FliprTrainingConfig, RetrieverConfig
from baleen_core.retrieval import Flipr
from baleen_core.training.flipr_trainer import train_flipr

from test_flipr_trainer import examples

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SMALL = dict(dim=32, query_maxlen=16, context_maxlen=8, doc_maxlen=24)


def test_one_epoch_on_cuda_in_autocast_learns(tmp_path):
    flipr = Flipr.load(RetrieverConfig(device="cuda", **SMALL))
    before = flipr.encoder.projection.weight.detach().clone()
    _, history = train_flipr(flipr, examples(), FliprTrainingConfig(epochs=1, batch_size=8), tmp_path / "work")
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in history)
    assert not torch.allclose(flipr.encoder.projection.weight.detach(), before)
    assert flipr.encoder.projection.weight.device.type == "cuda"


def test_a_cpu_started_run_resumes_on_the_gpu(tmp_path):
    work = tmp_path / "work"
    config = FliprTrainingConfig(epochs=1, batch_size=8)
    train_flipr(Flipr.load(RetrieverConfig(device="cpu", **SMALL)), examples(), config, work)
    steps = []
    last, history = train_flipr(Flipr.load(RetrieverConfig(device="cuda", **SMALL)), examples(), config.model_copy(update={"epochs": 2}), work, on_step=steps.append)
    assert [s["epoch"] for s in steps] == [1, 1, 1] and last.name == "epoch-001"
    assert [h["step"] for h in history] == list(range(6))
