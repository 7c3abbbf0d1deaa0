"""The condenser stages and the reader: a BERT-family encoder with a small linear head.

All three are a :class:`SequenceModel` of one ``kind``:

- ``stage1``, ``stage2``: one logit per scored sentence or fact, from the [MASK] in front of it
  (``scoring: marker``, Baleen's) or from the similarity of its tokens to the query's
  (``scoring: similarity``, :class:`SimilarityHead`);
- ``reader``: two logits (NOT_SUPPORTED, SUPPORTED) from [CLS] (``scoring: cls``), plus, with
  ``scoring: alignment``, a term for how well the facts match the claim's worst-matched tokens
  (:class:`AlignmentHead`).

A checkpoint directory holds ``backbone/`` (Hugging Face format, with its tokenizer), ``head.pt``
(the head's state dict, loaded with ``weights_only=True``) and ``model_config.json``; a reader
trained with ``reader.lexical_coverage`` also holds its second expert (``lexical.LEXICAL_FILE``).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from baleen_core.condensing.layouts import PaddedBatch, SpecialIds, TokenCache, Window, pad_windows
from baleen_core.condensing.lexical import LexicalCoverage
from baleen_core.config import CondenserConfig, ReaderConfig
from baleen_core.retrieval.modeling import batch_limits, engine_attention, length_batches, load_pretrained, resolve_device, training_chunk_tokens

Kind = Literal["stage1", "stage2", "reader"]
#: How a head scores: from the marker in front of each item ([CLS] for the reader), from
#: pooled similarity to the query (condensers), or [CLS] plus claim-to-facts alignment (reader).
HeadScoring = Literal["marker", "similarity", "alignment"]
HEAD_FILE = "head.pt"
CONFIG_FILE = "model_config.json"
#: Reader classes, in logit order.
READER_LABELS = ("NOT_SUPPORTED", "SUPPORTED")


class SimilarityHead(nn.Module):
    """``scale · cos(query, item) + w · item + b`` over mean-pooled token states.

    A sentence-embedding backbone (the default MiniLM) is pretrained for exactly this cosine, so
    the head ranks facts well before any training, where a fresh linear head on [MASK] states
    starts at chance and learns slowly (measured in docs/engine.md). ``w`` starts at 0 and lets
    training add what the cosine misses; ``b`` centres the scores so that P > 0.5 means kept."""

    def __init__(self, hidden_size: int, initial_scale: float = 10.0, initial_center: float = 0.5) -> None:
        super().__init__()
        self.log_scale = nn.Parameter(torch.tensor(math.log(initial_scale)))
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.constant_(self.linear.bias, -initial_scale * initial_center)

    def forward(self, items: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        cosine = F.cosine_similarity(items, queries, dim=-1).unsqueeze(-1)
        return self.log_scale.exp() * cosine + self.linear(items)


class AlignmentHead(nn.Module):
    """The reader's [CLS] logits plus ``(-s/2, +s/2)``, where ``s`` says how well the facts cover
    the claim: ``s = scale · (w · (min, mean of the 3 lowest, mean) + b)`` over the claim's
    content tokens' MaxSims (each token's best cosine with any fact token, as FLIPR scores).

    A NOT_SUPPORTED claim is mostly a supported one with a word or name swapped; that token finds no
    match among the facts, so its MaxSim is the claim's lowest. A [CLS] head must learn this
    comparison from labels alone and stayed at chance at our budgets (docs/benchmarks.md); the
    MaxSims hand it over. ``w`` starts on the mean of the 3 lowest, centred where an untrained
    MiniLM's median claim lies, and ``scale`` learns in log space so that it moves at the head's
    learning rate. No fact at all counts as no match (MaxSim −1)."""

    FEATURES = 3
    WORST = 3

    def __init__(self, hidden_size: int, content_tokens: torch.Tensor, initial_scale: float = 10.0, initial_center: float = 0.55) -> None:
        super().__init__()
        self.cls = nn.Linear(hidden_size, 2)
        self.log_scale = nn.Parameter(torch.tensor(math.log(initial_scale)))
        self.coverage = nn.Linear(self.FEATURES, 1)
        with torch.no_grad():
            self.coverage.weight.copy_(torch.tensor([[0.0, 1.0, 0.0]]))
            self.coverage.bias.fill_(-initial_center)
        # vocabulary ids holding a letter or digit: punctuation in the claim is not a claim to check
        self.register_buffer("content_tokens", content_tokens, persistent=False)

    def token_masks(self, batch: PaddedBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """``[B, L]`` bool each: the claim's content tokens and the facts' tokens of ``batch``
        (padded with ``pool_spans``: its query and item spans)."""
        return (batch.query_pool > 0) & self.content_tokens[batch.input_ids], batch.item_pool.sum(1) > 0

    def coverage_features(self, hidden: torch.Tensor, claim: torch.Tensor, facts: torch.Tensor) -> torch.Tensor:
        """``[B, 3]``: min, mean of the lowest 3 and mean of the claim tokens' MaxSims over fact tokens."""
        unit = F.normalize(hidden.float(), dim=-1)
        sims = torch.bmm(unit, unit.transpose(1, 2)).masked_fill(~facts[:, None, :], -1.0)
        best = sims.max(-1).values  # [B, L]: each position's best fact token
        worst = best.masked_fill(~claim, 1.0).topk(min(self.WORST, best.shape[1]), dim=-1, largest=False).values
        mean = (best * claim).sum(-1) / claim.sum(-1).clamp(min=1)
        return torch.stack([worst[:, 0], worst.mean(-1), mean], dim=-1)

    def forward(self, cls_states: torch.Tensor, hidden: torch.Tensor, claim: torch.Tensor, facts: torch.Tensor) -> torch.Tensor:
        features = self.coverage_features(hidden, claim, facts)  # float32 whatever the weights (cosines near 1)
        support = self.log_scale.exp() * self.coverage(features.to(self.coverage.weight.dtype))
        return self.cls(cls_states) + torch.cat([-support / 2, support / 2], dim=-1)


def content_tokens(tokenizer) -> torch.Tensor:
    """``[vocab]`` bool: which token ids hold a letter or digit (word pieces, not punctuation)."""
    vocab, special = tokenizer.get_vocab(), set(tokenizer.all_special_ids)
    mask = torch.zeros(max(len(tokenizer), max(vocab.values()) + 1), dtype=torch.bool)
    for token, index in vocab.items():
        mask[index] = index not in special and any(ch.isalnum() for ch in token)
    return mask


class HeadedEncoder(nn.Module):
    """Backbone → hidden states at the scored positions (or pooled spans) → head."""

    def __init__(self, backbone: nn.Module, outputs: int, scoring: HeadScoring = "marker", content: torch.Tensor | None = None) -> None:
        super().__init__()
        if scoring == "similarity" and outputs != 1:
            raise ValueError(f"similarity scoring gives one score per item, not {outputs} outputs")
        if scoring == "alignment" and (outputs != 2 or content is None):
            raise ValueError("alignment scoring is the reader's (2 outputs) and needs the tokenizer's content tokens")
        self.backbone = backbone
        self.scoring = scoring
        hidden = backbone.config.hidden_size
        if scoring == "alignment":
            self.head = AlignmentHead(hidden, content)
        elif scoring == "similarity":
            self.head = SimilarityHead(hidden)
        else:
            self.head = nn.Linear(hidden, outputs)

    def forward(self, batch: PaddedBatch) -> torch.Tensor:
        hidden = self.backbone(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
        if self.scoring == "marker":
            return self.head(hidden[batch.rows, batch.cols])
        if self.scoring == "alignment":
            return self.head(hidden[batch.rows, batch.cols], hidden, *self.head.token_masks(batch))
        items = torch.bmm(batch.item_pool.to(hidden.dtype), hidden)[batch.rows, batch.slots]
        queries = torch.bmm(batch.query_pool.to(hidden.dtype).unsqueeze(1), hidden).squeeze(1)[batch.rows]
        return self.head(items, queries)


def cpu_has_native_bfloat16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX-BF16), where autocast to it
    is about twice as fast as float32; elsewhere it is emulated and slower. False where unknown."""
    try:
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo.read_text().splitlines() if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _with_fresh_head(kind: Kind, backbone: nn.Module, tokenizer, scoring: HeadScoring, head_seed: int) -> HeadedEncoder:
    """``backbone`` under a new head for ``kind``, initialised from ``head_seed`` alone."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(head_seed)
        if kind != "reader":
            return HeadedEncoder(backbone, 1, scoring)
        if scoring == "alignment":
            return HeadedEncoder(backbone, 2, "alignment", content_tokens(tokenizer))
        return HeadedEncoder(backbone, 2, "marker")  # Baleen's reader: two logits at [CLS]


class SequenceModel:
    """Encoder, head, tokenizer and device of one condenser stage or the reader."""

    def __init__(self, kind: Kind, module: HeadedEncoder, tokenizer, device: torch.device, source: str) -> None:
        self.kind = kind
        self.module = module.to(device).eval()
        self.tokenizer = tokenizer
        self.special = SpecialIds(tokenizer)
        self.token_cache = TokenCache(tokenizer)  # ids of the texts this model has read (the engine rereads them every hop)
        self.device = device
        self.source = source
        self.cpu_bfloat16 = False  # see use_cpu_precision
        self.lexical: LexicalCoverage | None = None  # a reader's second expert, when it was trained with one (reader.lexical_coverage)

    def use_cpu_precision(self, precision: str) -> SequenceModel:
        """Predict in ``precision`` ('float32' or 'bfloat16', by autocast) when on a CPU; returns self."""
        if precision not in ("float32", "bfloat16"):
            raise ValueError(f"unknown CPU precision {precision!r}; choose float32 or bfloat16")
        self.cpu_bfloat16 = precision == "bfloat16"
        return self

    def inference_copy(self, dtype: torch.dtype | None = None, compile_backbone: bool = False) -> SequenceModel:
        """A copy of this model to predict with, never to train: its weights cast to ``dtype``
        (fp16 on a GPU: each forward reads half the bytes and autocast no longer casts every
        weight on every call) and, with ``compile_backbone``, its encoder under ``torch.compile``
        (dynamic shapes: the engine's batches vary in both sizes). It shares this model's
        tokenizer and token cache."""
        module = copy.deepcopy(self.module)
        if dtype is not None:
            module = module.to(dtype)
        if compile_backbone:
            module.backbone = torch.compile(module.backbone, dynamic=True)
        made = [f"weights in {str(dtype).removeprefix('torch.')}"] * (dtype is not None) + ["compiled"] * compile_backbone
        copied = SequenceModel(self.kind, module, self.tokenizer, self.device, f"{self.source} ({', '.join(made) or 'copy'}, for inference)")
        copied.token_cache, copied.cpu_bfloat16, copied.lexical = self.token_cache, self.cpu_bfloat16, self.lexical
        return copied

    @classmethod
    def load(cls, kind: Kind, source: str | Path, device: torch.device | str = "auto", head_seed: int = 0, scoring: HeadScoring = "marker") -> SequenceModel:
        """From a saved checkpoint directory of this kind (with the scoring it was trained with),
        or from any Hugging Face checkpoint path plus a fresh ``scoring`` head (seeded; the
        reader's is ``marker``, from [CLS], or ``alignment``). A fresh head here is Baleen's marker
        unless asked otherwise; the pipeline asks for its configured scoring through
        :meth:`condenser_to_train` and :meth:`reader_to_train`. Never downloads: a missing path fails with what to fix."""
        source = Path(source)
        saved = (source / CONFIG_FILE).exists()
        if saved:
            recorded = json.loads((source / CONFIG_FILE).read_text())
            if recorded.get("kind") != kind:
                raise ValueError(f"{source} holds a {recorded.get('kind')!r} model, not a {kind!r} one")
            scoring = recorded.get("scoring", "marker")  # checkpoints from before the choice scored from [MASK]
        backbone_dir = source / "backbone" if saved else source
        tokenizer, backbone = load_pretrained(backbone_dir, "the condenser/reader backbone or checkpoint setting")
        module = _with_fresh_head(kind, backbone, tokenizer, scoring, head_seed)
        if saved:
            module.head.load_state_dict(torch.load(source / HEAD_FILE, map_location="cpu", weights_only=True))
        device = resolve_device(device) if isinstance(device, str) else device
        model = cls(kind, module, tokenizer, device, str(source))
        if saved and kind == "reader":
            model.lexical = LexicalCoverage.load(source)
        return model

    @classmethod
    def condenser_to_train(cls, stage: Literal["stage1", "stage2"], condenser: CondenserConfig, head_seed: int) -> SequenceModel:
        """Condenser ``stage`` where its training starts (:meth:`CondenserConfig.start`), with the
        configured scoring when the head is fresh."""
        return cls.load(stage, condenser.start(stage), condenser.device, head_seed, condenser.scoring)

    @classmethod
    def reader_to_train(cls, reader: ReaderConfig, head_seed: int, encoder_of: SequenceModel | None = None) -> SequenceModel:
        """The reader where its training starts: ``reader.checkpoint``, or the backbone with a
        fresh head of ``reader.scoring``; or, given ``encoder_of`` (the trained stage 2,
        ``training.reader.start: stage2``), a copy of that model's encoder under the same fresh
        head, without loading a backbone it would replace (:meth:`take_encoder_from` does it to a
        reader already made)."""
        scoring = "alignment" if reader.scoring == "alignment" else "marker"
        if encoder_of is None:
            return cls.load("reader", reader.checkpoint or reader.resolved_backbone(), reader.device, head_seed, scoring)
        encoder, source = encoder_of._encoder_copy()
        return cls("reader", _with_fresh_head("reader", encoder, encoder_of.tokenizer, scoring, head_seed), encoder_of.tokenizer, resolve_device(reader.device), source)

    def save(self, directory: Path | str) -> Path:
        directory = Path(directory)
        self.module.backbone.save_pretrained(directory / "backbone")
        self.tokenizer.save_pretrained(directory / "backbone")
        torch.save(self.module.head.state_dict(), directory / HEAD_FILE)
        (directory / CONFIG_FILE).write_text(json.dumps({"kind": self.kind, "scoring": self.module.scoring, "architecture": type(self.module.backbone).__name__, "trained_from": self.source}, indent=2))
        if self.lexical is not None:
            self.lexical.save(directory)
        return directory

    @classmethod
    def copy_of(cls, other: SequenceModel, kind: Kind) -> SequenceModel:
        """A new ``kind`` model that starts as a copy of ``other``'s encoder, head and tokenizer,
        to train on from there without loading a backbone it would replace: the stage-2 task
        starts from the trained stage 1 this way (:meth:`start_from` does it to a model already
        made)."""
        return cls(kind, copy.deepcopy(other.module), other.tokenizer, other.device, f"{other.kind}: {other.source}")

    def start_from(self, other: SequenceModel) -> SequenceModel:
        """Take a copy of ``other``'s encoder and head (backbone, head and scoring) as this model's
        own, to train on from there; returns self. Stage 2 starts from the trained stage 1 this way
        (``training.stage2.start: stage1``). Both must read with the same vocabulary, since each
        keeps its own token cache."""
        self._check_same_vocabulary(other)
        copied = SequenceModel.copy_of(other, self.kind)
        self.module, self.source = copied.module.to(self.device).eval(), copied.source
        return self

    def take_encoder_from(self, other: SequenceModel) -> SequenceModel:
        """Take a copy of ``other``'s encoder (its backbone, not its head) and keep this model's
        own head, to train on from there; returns self. The reader starts from the trained stage 2
        this way (``training.reader.start: stage2``): stage 2's encoder has learned to read a claim
        against its facts, and the reader's head has a task of its own (two logits, its scoring)."""
        self._check_same_vocabulary(other)
        mine, theirs = self.module.backbone.config.hidden_size, other.module.backbone.config.hidden_size
        if mine != theirs:  # one vocabulary is no proof of one backbone: MiniLM-L6 and bert-base share theirs
            raise ValueError(f"{self.kind} cannot take the encoder of {other.kind} ({other.source}): its head reads {mine} dimensions, that encoder gives {theirs}")
        encoder, self.source = other._encoder_copy()
        self.module.backbone = encoder.to(self.device).eval()
        return self

    def _encoder_copy(self) -> tuple[nn.Module, str]:
        """A copy of this model's encoder to train on elsewhere, and the source that names it."""
        return copy.deepcopy(self.module.backbone), f"{self.kind} encoder: {self.source}"

    def _check_same_vocabulary(self, other: SequenceModel) -> None:
        """Both models must read with one vocabulary, since each keeps its own token cache."""
        if other.tokenizer.get_vocab() != self.tokenizer.get_vocab():
            raise ValueError(f"{self.kind} cannot start from {other.kind} ({other.source}): their tokenizers' vocabularies differ")

    # ---- what the training loop needs (baleen_core.training.loop.Trainable) ----
    def head_parameters(self) -> list[nn.Parameter]:
        return list(self.module.head.parameters())

    def load_weights(self, directory: Path | str) -> None:
        loaded = SequenceModel.load(self.kind, directory, self.device)
        self.module.load_state_dict(loaded.module.state_dict())
        self.lexical = loaded.lexical

    # ---- scoring ----
    def logits(self, windows: Sequence[Window]) -> torch.Tensor:
        """Logits at every scored position of ``windows``, in order: ``[N]`` for the condensers,
        ``[N, 2]`` for the reader. Keeps the autograd graph (training calls this)."""
        out = self.module(pad_windows(windows, self.special.pad, self.module.scoring != "marker").to(self.device)).float()
        return out if self.kind == "reader" else out.squeeze(-1)

    def training_logits(self, windows: Sequence[Window]) -> torch.Tensor:
        """:meth:`logits` of a training batch, computed in length-sorted chunks of at most
        ``training_chunk_tokens`` padded positions (on the CPU; at once on a GPU) and returned in
        the windows' order. Each window is its own sequence, so its logits are the same up to float
        rounding, without the FLOPs of padding every window to the batch's longest."""
        max_tokens = training_chunk_tokens(self.device)
        if max_tokens is None:
            return self.logits(windows)
        lengths = np.fromiter((len(w.input_ids) for w in windows), dtype=np.int64, count=len(windows))
        order = np.argsort(-lengths, kind="stable")
        pieces: list[torch.Tensor | None] = [None] * len(windows)
        for start, end in length_batches(lengths[order], len(windows), max_tokens):
            rows = order[start:end].tolist()
            chunk = self.logits([windows[i] for i in rows])
            for i, piece in zip(rows, torch.split(chunk, [len(windows[i].positions) for i in rows]), strict=True):
                pieces[i] = piece
        return torch.cat(pieces)  # type: ignore[arg-type]

    @torch.inference_mode()
    def predict(self, windows: Sequence[Window], batch_size: int, gpu_batch_tokens: int | None = None) -> list[torch.Tensor]:
        """Per window, its logits (on CPU). Batches are length-sorted so padding stays small, of
        ``batch_size`` windows, or on a GPU with ``gpu_batch_tokens``, as many as fill that many
        padded positions; the logits stay on the device until every batch is done (one copy)."""
        lengths = np.fromiter((len(w.input_ids) for w in windows), dtype=np.int64, count=len(windows))
        order = np.argsort(-lengths, kind="stable")
        items, max_tokens = batch_limits(self.device, batch_size, gpu_batch_tokens)
        if self.device.type == "cuda":
            autocast = torch.autocast("cuda", dtype=torch.float16)
        else:
            autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cpu_bfloat16)
        parts = []
        for start, end in length_batches(lengths[order], items, max_tokens):
            with autocast, engine_attention(self.device):
                parts.append(self.logits([windows[i] for i in order[start:end]]))
        if not parts:
            return []
        flat = torch.cat(parts).cpu()
        counts = [len(windows[i].positions) for i in order]
        results: list[torch.Tensor | None] = [None] * len(windows)
        for i, logits in zip(order.tolist(), torch.split(flat, counts), strict=True):
            results[i] = logits
        return results  # type: ignore[return-value]
