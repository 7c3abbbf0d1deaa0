"""The FLIPR encoder: a BERT-family backbone, a linear projection, L2-normalised token vectors.

:class:`Flipr` bundles the encoder with its tokenizer and device, and is what the rest of the
system talks to: ``encode_queries`` and ``encode_passages`` return token embeddings ready for
:mod:`baleen_core.retrieval.scoring`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModel, AutoTokenizer

from baleen_core.config import RetrieverConfig
from baleen_core.retrieval.tokenization import DocBatch, FliprTokenizer, QueryBatch

HEAD_FILE = "flipr_head.pt"
CONFIG_FILE = "flipr_config.json"


def resolve_device(preference: str = "auto") -> torch.device:
    """``auto`` picks CUDA when a GPU is visible; asking for ``cuda`` without one is an error."""
    if preference == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' was requested but torch sees no GPU; use device: auto or cpu")
    if preference == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


def load_pretrained(directory: str | Path, setting: str) -> tuple:
    """(tokenizer, model) of a local Hugging Face checkpoint. Never downloads: a missing or
    broken path fails naming the ``setting`` to fix."""
    try:
        return AutoTokenizer.from_pretrained(str(directory)), AutoModel.from_pretrained(str(directory))
    except OSError as err:
        raise FileNotFoundError(
            f"cannot load a Hugging Face checkpoint from {directory}: {err}. Point {setting} at a local checkpoint "
            "directory (this machine cannot download models)."
        ) from err


class FliprEncoder(nn.Module):
    """Backbone → linear projection (no bias, as ColBERT) → L2 normalisation, per token."""

    def __init__(self, backbone: nn.Module, dim: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.projection = nn.Linear(backbone.config.hidden_size, dim, bias=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return F.normalize(self.projection(hidden), p=2, dim=-1)


class Flipr:
    """Encoder + tokenizer + device; the retriever's model side."""

    def __init__(self, encoder: FliprEncoder, tokenizer: FliprTokenizer, config: RetrieverConfig, device: torch.device) -> None:
        self.encoder = encoder.to(device).eval()
        self.tokenizer = tokenizer
        self.config = config
        self.device = device

    @classmethod
    def load(cls, config: RetrieverConfig, device: torch.device | None = None) -> Flipr:
        """From ``config.checkpoint`` (a saved FLIPR) or else ``config.backbone`` plus a fresh,
        seeded projection. Loading never downloads: a missing path fails with what to fix."""
        source = str(config.checkpoint) if config.checkpoint else config.resolved_backbone()
        backbone_dir = Path(source) / "backbone" if config.checkpoint else source
        hf_tokenizer, backbone = load_pretrained(backbone_dir, "retriever.backbone")
        tokenizer = FliprTokenizer(
            hf_tokenizer,
            query_maxlen=config.query_maxlen,
            context_maxlen=config.context_maxlen,
            doc_maxlen=config.doc_maxlen,
            attend_to_mask_tokens=config.attend_to_mask_tokens,
            query_marker=config.query_marker,
            doc_marker=config.doc_marker,
            mask_punctuation=config.mask_punctuation,
        )
        if tokenizer.added_markers:
            backbone.resize_token_embeddings(len(hf_tokenizer))
        max_positions = getattr(backbone.config, "max_position_embeddings", None)
        needed = max(config.query_maxlen + config.context_maxlen, config.doc_maxlen)
        if max_positions is not None and needed > max_positions:
            raise ValueError(f"query/doc lengths need {needed} positions but the backbone has {max_positions}")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.projection_seed)
            encoder = FliprEncoder(backbone, config.dim)
        if config.checkpoint:
            state = torch.load(Path(config.checkpoint) / HEAD_FILE, map_location="cpu", weights_only=True)
            encoder.projection.load_state_dict(state)
        return cls(encoder, tokenizer, config, device or resolve_device(config.device))

    def save(self, directory: Path | str) -> Path:
        """A checkpoint directory: ``backbone/`` (HF format), the projection head, the config."""
        directory = Path(directory)
        self.encoder.backbone.save_pretrained(directory / "backbone")
        self.tokenizer.tokenizer.save_pretrained(directory / "backbone")
        torch.save(self.encoder.projection.state_dict(), directory / HEAD_FILE)
        (directory / CONFIG_FILE).write_text(self.config.model_dump_json(indent=2))
        return directory

    # ---- what the training loop needs (baleen_core.training.loop.Trainable) ----
    @property
    def module(self) -> nn.Module:
        return self.encoder

    def head_parameters(self) -> list[nn.Parameter]:
        return list(self.encoder.projection.parameters())

    def load_weights(self, directory: Path | str) -> None:
        loaded = Flipr.load(self.config.model_copy(update={"checkpoint": Path(directory)}), self.device)
        self.encoder.load_state_dict(loaded.encoder.state_dict())

    @property
    def dim(self) -> int:
        return self.config.dim

    def describe(self) -> dict:
        """What identifies this encoder in manifests."""
        return {
            "backbone": self.config.resolved_backbone() if not self.config.checkpoint else None,
            "checkpoint": str(self.config.checkpoint) if self.config.checkpoint else None,
            "architecture": type(self.encoder.backbone).__name__,
            "dim": self.config.dim,
            "projection_seed": self.config.projection_seed,
            "query_maxlen": self.config.query_maxlen,
            "context_maxlen": self.config.context_maxlen,
            "doc_maxlen": self.config.doc_maxlen,
            "mask_punctuation": self.config.mask_punctuation,
        }

    def _autocast(self):
        return torch.autocast("cuda", dtype=torch.float16) if self.device.type == "cuda" else torch.autocast("cpu", enabled=False)

    @torch.inference_mode()
    def encode_queries(self, claims: Sequence[str], contexts: Sequence[Sequence[str]] | None = None) -> tuple[torch.Tensor, QueryBatch]:
        """Query token embeddings ``[B, L, dim]`` (float32, on the model's device) and the batch,
        whose ``score_mask`` says which positions may count."""
        batch = self.tokenizer.queries(claims, contexts).to(self.device)
        with self._autocast():
            embs = self.encoder(batch.input_ids, batch.attention_mask)
        return embs.float(), batch

    @torch.inference_mode()
    def encode_doc_batch(self, batch: DocBatch) -> torch.Tensor:
        batch = batch.to(self.device)
        with self._autocast():
            return self.encoder(batch.input_ids, batch.attention_mask).float()

    def encode_passages(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        on_batch: Callable[[int], None] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encode passages (``title | text``) in length-sorted batches.

        Returns ``(embeddings [T, dim] float16, doclens [N] int32)`` in the input order, the
        scored tokens (``DocBatch.score_mask``: no punctuation) of passage i at ``embeddings[sum(doclens[:i]) : sum(doclens[:i+1])]``. Sorting by length
        keeps padding (wasted FLOPs) small; ``on_batch(n)`` reports progress.
        """
        lengths = np.asarray(self.tokenizer.doc_lengths(texts), dtype=np.int64)
        order = np.argsort(-lengths, kind="stable")
        per_passage: list[np.ndarray | None] = [None] * len(texts)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            batch = self.tokenizer.docs([texts[i] for i in idx])
            embs = self.encode_doc_batch(batch).to(torch.float16).cpu().numpy()
            mask = batch.score_mask.numpy()  # padding and punctuation are not stored
            for row, i in enumerate(idx):
                per_passage[i] = embs[row][mask[row]]
            if on_batch is not None:
                on_batch(len(idx))
        doclens = np.array([p.shape[0] for p in per_passage], dtype=np.int32)
        embeddings = np.concatenate(per_passage) if per_passage else np.zeros((0, self.dim), np.float16)
        return embeddings, doclens


def read_checkpoint_config(directory: Path | str) -> RetrieverConfig:
    """The retriever config saved with a checkpoint, pointing at the checkpoint itself."""
    raw = json.loads((Path(directory) / CONFIG_FILE).read_text())
    raw["checkpoint"] = str(directory)
    return RetrieverConfig.model_validate(raw)
