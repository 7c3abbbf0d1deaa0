"""The bf16 CPU training attention: its dropout against the Bernoulli it stands for, and the
attention itself against Transformers' own on a real (tiny, random) BERT."""

from __future__ import annotations

import math

import pytest
import torch

from baleen_core.training.attention import CPU_TRAINING_ATTENTION, dropped_lanes, keep_mask, lane_dropout, register_cpu_training_attention


@pytest.mark.parametrize("p", [0.1, 0.5, 0.02])
def test_the_mask_keeps_each_element_with_the_asked_probability_in_every_lane(p):
    torch.manual_seed(0)
    kept = keep_mask((400_001,), p)  # not a multiple of four lanes
    assert kept.shape == (400_001,) and kept.dtype == torch.bool
    # each of the four 16-bit lanes of a word on its own, within 5 standard errors
    for lane in range(4):
        share = kept[lane::4].float().mean().item()
        assert abs(share - (1 - p)) < 5 * math.sqrt(p * (1 - p) / 100_000), (lane, share)
    assert dropped_lanes(p) / 65536 == pytest.approx(p, abs=1 / 65536)


def test_neighbouring_elements_are_dropped_independently():
    torch.manual_seed(1)
    kept = keep_mask((1_000_000,), 0.5).float()
    both = (kept[:-1] * kept[1:]).mean().item()  # P(kept, next kept) = 0.25 if independent
    assert abs(both - 0.25) < 0.003


def test_the_same_seed_draws_the_same_mask_and_another_seed_another():
    torch.manual_seed(7)
    first = keep_mask((3, 5, 7), 0.1)
    torch.manual_seed(7)
    assert torch.equal(keep_mask((3, 5, 7), 0.1), first)
    torch.manual_seed(8)
    assert not torch.equal(keep_mask((3, 5, 7), 0.1), first)


def test_dropout_zeroes_dropped_elements_scales_kept_ones_and_keeps_the_mean():
    torch.manual_seed(0)
    x = torch.rand(200_000) + 1.0
    y = lane_dropout(x, 0.1)
    kept = y != 0
    scale = 65536 / (65536 - dropped_lanes(0.1))
    assert torch.allclose(y[kept], x[kept] * scale)
    assert y.mean().item() == pytest.approx(x.mean().item(), rel=0.01)
    assert lane_dropout(x, 0.0) is x


def test_the_gradient_flows_through_kept_elements_only():
    torch.manual_seed(0)
    x = torch.rand(1000, requires_grad=True)
    y = lane_dropout(x, 0.3)
    y.sum().backward()
    scale = 65536 / (65536 - dropped_lanes(0.3))
    assert torch.allclose(x.grad, (y != 0).float() * scale)


def test_an_impossible_rate_is_refused():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        keep_mask((4,), 1.0)


def _tiny_bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32))


def test_without_dropout_it_is_transformers_attention_padding_mask_included():
    model = _tiny_bert().eval()
    ids = torch.tensor([[1, 5, 6, 2, 0, 0], [1, 7, 8, 9, 10, 2]])
    mask = (ids != 0).long()
    reference = model(input_ids=ids, attention_mask=mask).last_hidden_state
    model.set_attn_implementation(register_cpu_training_attention())
    assert model.config._attn_implementation == CPU_TRAINING_ATTENTION
    ours = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.allclose(ours[0, :4], reference[0, :4], atol=1e-5)  # the padded row's real tokens
    assert torch.allclose(ours[1], reference[1], atol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # bf16 scores with the mask in their dtype
        low = model(input_ids=ids, attention_mask=mask).last_hidden_state
    assert torch.isfinite(low).all()
    assert torch.allclose(low[1].float(), reference[1], atol=0.1)


def test_in_training_the_attention_probabilities_are_dropped():
    model = _tiny_bert().train()
    model.set_attn_implementation(register_cpu_training_attention())
    ids = torch.tensor([[1, 5, 6, 7, 8, 2]])
    probabilities = model(input_ids=ids, output_attentions=True).attentions[0]
    dropped = (probabilities == 0).float().mean().item()
    assert 0.03 < dropped < 0.2  # BERT's attention dropout is 0.1; eval drops nothing
    model.eval()
    assert (model(input_ids=ids, output_attentions=True).attentions[0] > 0).all()
