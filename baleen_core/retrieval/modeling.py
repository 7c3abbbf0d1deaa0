"""The FLIPR encoder: a BERT-family backbone, a linear projection, L2-normalised token vectors.

:class:`Flipr` bundles the encoder with its tokenizer and device, and is what the rest of the
system talks to: ``encode_queries`` and ``encode_passages`` return token embeddings ready for
:mod:`baleen_core.retrieval.scoring`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers import AutoModel, AutoTokenizer

from baleen_core.config import RetrieverConfig
from baleen_core.retrieval.tokenization import DocBatch, DocTokens, FliprTokenizer, QueryBatch

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
        with self._autocast(), engine_attention(self.device):
            embs = self.encoder(batch.input_ids, batch.attention_mask)
        return embs.float(), batch

    @torch.inference_mode()
    def encode_doc_batch(self, batch: DocBatch) -> torch.Tensor:
        return self._encode_docs(batch).float()

    def _encode_docs(self, batch: DocBatch) -> torch.Tensor:
        """Token embeddings ``[B, L, dim]`` in the encoder's working precision (fp16 on a GPU)."""
        ids, attention = (to_device(t, self.device) for t in (batch.input_ids, batch.attention_mask))
        with self._autocast():
            return self.encoder(ids, attention)

    @torch.inference_mode()
    def encode_passages(
        self,
        texts: Sequence[str] | DocTokens,
        batch_size: int = 32,
        on_batch: Callable[[int], None] | None = None,
        max_tokens: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encode passages (``title | text``, or :class:`DocTokens` tokenized earlier) in
        length-sorted batches.

        Returns ``(embeddings [T, dim] float16, doclens [N] int32)`` in the input order, the
        scored tokens (no padding, no punctuation) of passage i at
        ``embeddings[sum(doclens[:i]) : sum(doclens[:i+1])]``.

        Texts are tokenized once, in one call. Sorting by length keeps padding (wasted FLOPs)
        small; a batch holds at most ``batch_size`` passages and, with ``max_tokens``, at most
        that many padded positions (how a GPU is kept busy by short passages). The scored tokens
        are gathered on the device and copied back once, at the end, so the device never waits
        for the host between batches. ``on_batch(n)`` reports progress.
        """
        tokens = texts if isinstance(texts, DocTokens) else self.tokenizer.doc_tokens(texts)
        lengths = tokens.lengths
        order = np.argsort(-lengths, kind="stable")
        parts: list[torch.Tensor] = []
        for start, end in length_batches(lengths[order], batch_size, max_tokens):
            batch = tokens.batch(order[start:end], self.tokenizer.pad_id)
            scored = torch.from_numpy(np.flatnonzero(batch.score_mask.numpy()))
            embs = self._encode_docs(batch)
            parts.append(embs.reshape(-1, embs.shape[-1]).index_select(0, to_device(scored, self.device)).to(torch.float16))
            if on_batch is not None:
                on_batch(end - start)
        doclens = tokens.doclens
        if not parts:
            return np.zeros((0, self.dim), np.float16), doclens
        # the batches hold the passages in length order: gather each one's tokens back into input order
        sorted_start = np.empty(len(order), dtype=np.int64)
        sorted_start[order] = np.concatenate([[0], np.cumsum(doclens[order])[:-1]])
        input_start = np.concatenate([[0], np.cumsum(doclens)[:-1]])
        gather = np.repeat(sorted_start - input_start, doclens) + np.arange(int(doclens.sum()))
        embeddings = torch.cat(parts).index_select(0, to_device(torch.from_numpy(gather), self.device))
        return embeddings.cpu().numpy(), doclens


#: Padded positions per forward pass when a training step on the CPU encodes its inputs in
#: length-sorted chunks (:func:`encode_in_length_chunks`); a GPU step encodes them at once.
CPU_TRAINING_CHUNK_TOKENS = 4096


def training_chunk_tokens(device: torch.device) -> int | None:
    """Padded positions per forward pass of a training step: chunks on the CPU, where every padded
    position costs its FLOPs; None (the whole batch at once) on a GPU."""
    return CPU_TRAINING_CHUNK_TOKENS if device.type == "cpu" else None


def encode_in_length_chunks(
    encoder: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], input_ids: torch.Tensor, attention_mask: torch.Tensor, lengths: torch.Tensor, max_tokens: int | None
) -> torch.Tensor:
    """``encoder(input_ids, attention_mask)`` of a right-padded batch ``[B, L]``, computed in
    length-sorted chunks, each cut to its longest row (``lengths``: each row's positions before its
    padding) and holding at most ``max_tokens`` padded positions (None: one chunk), then put back
    in the batch's order and width, zeros past a row's chunk. Attention never reaches padding, so
    each row's outputs are the whole batch's up to float rounding, without the FLOPs of its padding."""
    if max_tokens is None:
        return encoder(input_ids, attention_mask)
    width = input_ids.shape[1]
    order = torch.argsort(lengths, descending=True, stable=True)
    sorted_lengths = lengths[order].cpu().numpy()
    parts = []
    for start, end in length_batches(sorted_lengths, len(sorted_lengths), max_tokens):
        rows, cut = order[start:end], int(sorted_lengths[start])
        parts.append(F.pad(encoder(input_ids[rows, :cut], attention_mask[rows, :cut]), (0, 0, 0, width - cut)))
    return torch.cat(parts)[torch.argsort(order)]


def length_batches(sorted_lengths: np.ndarray, batch_size: int, max_tokens: int | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of each batch over lengths sorted longest first: at most ``batch_size``
    items and, with ``max_tokens``, at most that many padded positions (its first item's length
    × its size), never fewer than one item."""
    batches, start, n = [], 0, len(sorted_lengths)
    while start < n:
        size = batch_size
        if max_tokens is not None:
            size = min(size, max(1, max_tokens // max(int(sorted_lengths[start]), 1)))
        batches.append((start, min(start + size, n)))
        start += size
    return batches


def engine_attention(device: torch.device) -> contextlib.AbstractContextManager:
    """Where the engine's forward passes take their attention kernels: on a GPU, PyTorch's own
    flash, memory-efficient or math kernels, never cuDNN's; elsewhere as PyTorch chooses. cuDNN
    plans each new (batch, length) shape on the host, and the engine's length-sorted batches seldom
    repeat one: on an H200 the host spent 0.81 s of 3.0 s in attention while the GPU was idle 60%
    of the time, and without cuDNN's kernels the full system verified 2.5 times as many claims a
    second (docs/engine.md, benchmarks/results/gpu-attention.json)."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


def batch_limits(device: torch.device, batch_size: int, gpu_batch_tokens: int | None) -> tuple[int, int | None]:
    """(items, padded tokens) per batch: on a GPU with ``gpu_batch_tokens``, as many items as fill
    that many padded positions; elsewhere ``batch_size`` items, as configured."""
    if device.type == "cuda" and gpu_batch_tokens is not None:
        return gpu_batch_tokens, gpu_batch_tokens
    return batch_size, None


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``tensor`` on ``device``; from the host to a GPU through page-locked memory, asynchronously."""
    if tensor.device == device:
        return tensor
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def read_checkpoint_config(directory: Path | str) -> RetrieverConfig:
    """The retriever config saved with a checkpoint, pointing at the checkpoint itself."""
    raw = json.loads((Path(directory) / CONFIG_FILE).read_text())
    raw["checkpoint"] = str(directory)
    return RetrieverConfig.model_validate(raw)
