"""The attention a Hugging Face backbone trains with in bfloat16 on a CPU: eager attention whose
dropout draws its mask four times more cheaply.

Why: BERT-style backbones drop 10% of the attention probabilities while training, a
``[batch, heads, length, length]`` tensor per layer. PyTorch draws that mask on the CPU with
``bernoulli_``, one random number per element, and for stage 2's windows (16 × 9 facts, about 350
tokens) that draw was the largest single cost of a training step: a third of it in bf16 (MiniLM-L6
on this 2-core AVX512-BF16 CPU, docs/benchmarks.md "Attention dropout on the CPU"). Here one 64-bit
draw gives four 16-bit lanes, each compared with ``p`` quantised to 1/65,536: the same Bernoulli
mask in distribution (a keep-probability within 1e-5 of the configured one), from the same seeded
generator, at about a third of the cost.

PyTorch's fused CPU attention (sdpa) is slow backwards in bf16, so this path is eager; the backbone
gets its own implementation back after training (:func:`baleen_core.training.loop.training_precision`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

#: The name the backbone's attention is switched to while it trains in bf16 on a CPU.
CPU_TRAINING_ATTENTION = "baleen_eager_lane_dropout"
_LANES = 1 << 16  # one 16-bit lane's values


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A bool mask of ``shape``, each element True (kept) with probability ``1 - p`` rounded to
    1/65,536, from the default generator (``torch.manual_seed`` repeats it)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    n = math.prod(shape)
    words = torch.randint(-(1 << 63), (1 << 63) - 1, ((n + 3) // 4,), dtype=torch.int64)
    lanes = words.view(torch.int16)[:n].view(shape)  # four uniform signed 16-bit values a word
    return lanes >= -(_LANES // 2) + dropped_lanes(p)


def dropped_lanes(p: float) -> int:
    """How many of a lane's 65,536 values drop an element: ``p`` rounded to 1/65,536."""
    return round(p * _LANES)


def lane_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout of ``x`` at rate ``p`` (as rounded by :func:`dropped_lanes`): dropped
    elements are 0, kept ones are scaled by the inverse keep-probability, so the mean is kept."""
    if p == 0.0:
        return x
    scale = _LANES / (_LANES - dropped_lanes(p))
    return torch.where(keep_mask(x.shape, p), x, 0) * scale


def eager_attention_with_lane_dropout(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Transformers' eager attention (its signature and its additive mask), with
    :func:`lane_dropout` on the probabilities."""
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask  # made in the scores' dtype (:func:`padding_mask_in_autocast_dtype`)
    weights = nn.functional.softmax(weights, dim=-1)
    if module.training:
        weights = lane_dropout(weights, dropout)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


def padding_mask_in_autocast_dtype(*args, dtype: torch.dtype = torch.float32, **kwargs) -> torch.Tensor:
    """Transformers' eager additive mask, made once per forward pass in the CPU autocast's dtype
    when autocast is on: a float32 mask added to bf16 scores would lift every layer's whole
    ``[batch, heads, length, length]`` softmax and dropout to float32. Its minimum is that dtype's
    own (finite), so a masked position still gets a probability of 0."""
    from transformers.masking_utils import eager_mask

    if torch.is_autocast_enabled("cpu"):
        dtype = torch.get_autocast_dtype("cpu")
    return eager_mask(*args, dtype=dtype, **kwargs)


def register_cpu_training_attention() -> str:
    """Make :data:`CPU_TRAINING_ATTENTION` a name Transformers knows, with its additive padding mask
    (a name without a mask function gets no padding mask at all); returns the name. Registering
    again replaces the same functions."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(CPU_TRAINING_ATTENTION, eager_attention_with_lane_dropout)
    AttentionMaskInterface.register(CPU_TRAINING_ATTENTION, padding_mask_in_autocast_dtype)
    return CPU_TRAINING_ATTENTION
