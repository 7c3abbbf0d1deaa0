"""FLIPR's encoding throughput: the FLOP count against the encoder's own layers, the rates against
their definitions."""

from __future__ import annotations

import pytest
import torch

from baleen_core.retrieval.throughput import flops_per_token, measure_encoding


def test_flops_per_token_counts_every_weight_matrix_once_and_attention_by_length(flipr):
    backbone = flipr.encoder.backbone
    linear = [m for m in backbone.encoder.modules() if isinstance(m, torch.nn.Linear)]
    weights = sum(m.weight.numel() for m in linear)  # MiniLM-L6: 6 layers × (4 attention + 2 feed-forward) matrices
    assert len(linear) == 6 * backbone.config.num_hidden_layers
    hidden, layers = backbone.config.hidden_size, backbone.config.num_hidden_layers
    per_token = flops_per_token(flipr)
    for length in (1, 45, 180):
        assert per_token(length) == pytest.approx(2 * weights + 4 * layers * length * hidden + 2 * hidden * flipr.dim)
    assert per_token(180) - per_token(45) == pytest.approx(4 * layers * 135 * hidden)


def test_measured_encoding_reports_rates_that_agree_with_each_other(flipr, passages):
    texts = [f"{t} | {x}" for t, x in passages] * 4
    result = measure_encoding(flipr, texts, budgets=[64, 4096], peak=1e12)
    assert result["passages"] == 24 and result["best_batch_tokens"] in (64, 4096)
    for run in result["by_batch_tokens"].values():
        assert run["passages_per_s"] == pytest.approx(24 / run["seconds"], rel=0.01)
        assert run["padded_tokens_per_s"] >= run["tokens_per_s"] >= run["scored_tokens_per_s"] > 0
        assert run["fraction_of_matmul_peak"] == pytest.approx(run["tflops"], abs=6e-4)  # peak = 1 TFLOP/s; tflops is rounded to 0.001
    assert result["by_batch_tokens"]["64"]["batches"] > result["by_batch_tokens"]["4096"]["batches"] == 1
    assert result["passages_per_s_from_text"] > 0
