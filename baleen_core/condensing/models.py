"""The condenser stages and the reader: a BERT-family encoder with a small linear head.

All three are a :class:`SequenceModel` of one ``kind``:

- ``stage1``, ``stage2``: one logit per scored [MASK] position (sentence or fact);
- ``reader``: two logits (NOT_SUPPORTED, SUPPORTED) from [CLS].

A checkpoint directory holds ``backbone/`` (Hugging Face format, with its tokenizer), ``head.pt``
(the head's state dict, loaded with ``weights_only=True``) and ``model_config.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
from torch import nn

from baleen_core.condensing.layouts import PaddedBatch, SpecialIds, Window, pad_windows
from baleen_core.retrieval.modeling import load_pretrained, resolve_device

Kind = Literal["stage1", "stage2", "reader"]
HEAD_FILE = "head.pt"
CONFIG_FILE = "model_config.json"
#: Reader classes, in logit order.
READER_LABELS = ("NOT_SUPPORTED", "SUPPORTED")


class HeadedEncoder(nn.Module):
    """Backbone → hidden states at the scored positions → linear head."""

    def __init__(self, backbone: nn.Module, outputs: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(backbone.config.hidden_size, outputs)

    def forward(self, batch: PaddedBatch) -> torch.Tensor:
        hidden = self.backbone(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
        return self.head(hidden[batch.rows, batch.cols])


class SequenceModel:
    """Encoder, head, tokenizer and device of one condenser stage or the reader."""

    def __init__(self, kind: Kind, module: HeadedEncoder, tokenizer, device: torch.device, source: str) -> None:
        self.kind = kind
        self.module = module.to(device).eval()
        self.tokenizer = tokenizer
        self.special = SpecialIds(tokenizer)
        self.device = device
        self.source = source

    @classmethod
    def load(cls, kind: Kind, source: str | Path, device: torch.device | str = "auto", head_seed: int = 0) -> SequenceModel:
        """From a saved checkpoint directory of this kind, or from any Hugging Face checkpoint
        path plus a fresh head (seeded). Never downloads: a missing path fails with what to fix."""
        source = Path(source)
        saved = (source / CONFIG_FILE).exists()
        if saved:
            found = json.loads((source / CONFIG_FILE).read_text()).get("kind")
            if found != kind:
                raise ValueError(f"{source} holds a {found!r} model, not a {kind!r} one")
        backbone_dir = source / "backbone" if saved else source
        tokenizer, backbone = load_pretrained(backbone_dir, "the condenser/reader backbone or checkpoint setting")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(head_seed)
            module = HeadedEncoder(backbone, 2 if kind == "reader" else 1)
        if saved:
            module.head.load_state_dict(torch.load(source / HEAD_FILE, map_location="cpu", weights_only=True))
        device = resolve_device(device) if isinstance(device, str) else device
        return cls(kind, module, tokenizer, device, str(source))

    def save(self, directory: Path | str) -> Path:
        directory = Path(directory)
        self.module.backbone.save_pretrained(directory / "backbone")
        self.tokenizer.save_pretrained(directory / "backbone")
        torch.save(self.module.head.state_dict(), directory / HEAD_FILE)
        (directory / CONFIG_FILE).write_text(json.dumps({"kind": self.kind, "architecture": type(self.module.backbone).__name__, "trained_from": self.source}, indent=2))
        return directory

    # ---- what the training loop needs (baleen_core.training.loop.Trainable) ----
    def head_parameters(self) -> list[nn.Parameter]:
        return list(self.module.head.parameters())

    def load_weights(self, directory: Path | str) -> None:
        loaded = SequenceModel.load(self.kind, directory, self.device)
        self.module.load_state_dict(loaded.module.state_dict())

    # ---- scoring ----
    def logits(self, windows: Sequence[Window]) -> torch.Tensor:
        """Logits at every scored position of ``windows``, in order: ``[N]`` for the condensers,
        ``[N, 2]`` for the reader. Keeps the autograd graph (training calls this)."""
        out = self.module(pad_windows(windows, self.special.pad).to(self.device)).float()
        return out if self.kind == "reader" else out.squeeze(-1)

    @torch.inference_mode()
    def predict(self, windows: Sequence[Window], batch_size: int) -> list[torch.Tensor]:
        """Per window, its logits (on CPU); batches are length-sorted so padding stays small."""
        order = sorted(range(len(windows)), key=lambda i: len(windows[i].input_ids))
        results: list[torch.Tensor | None] = [None] * len(windows)
        autocast = torch.autocast("cuda", dtype=torch.float16) if self.device.type == "cuda" else torch.autocast("cpu", enabled=False)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            with autocast:
                flat = self.logits([windows[i] for i in chunk]).cpu()
            offset = 0
            for i in chunk:
                n = len(windows[i].positions)
                results[i] = flat[offset : offset + n]
                offset += n
        return results  # type: ignore[return-value]
