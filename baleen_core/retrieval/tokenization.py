"""Turning claims, context facts and passages into FLIPR encoder inputs.

Query layout (Baleen/ColBERT)::

    [CLS] [Q] claim … [SEP] [MASK] [MASK] …      ← exactly ``query_maxlen`` (64) claim positions
    fact₁ tokens [SEP] fact₂ tokens … [SEP]      ← context positions, up to ``context_maxlen`` (448)

The context is the reference's (``QueryTokenizer.tensorize`` with a context): the facts joined by
[SEP] and tokenized as one text of at most 512 − 64 + 1 tokens whose leading [CLS] is dropped, so
at most 448 positions, and a longer context loses its tail, never its final [SEP].

Document layout: ``[CLS] [D] title | text [SEP]``, at most ``doc_maxlen`` tokens. Punctuation
tokens stay in the encoder's input but are left out of the embeddings a document is scored with
(``DocBatch.score_mask``), as ColBERT's ``mask_punctuation`` skiplist does.

The [Q]/[D] markers are vocabulary tokens looked up by name (BERT vocabularies reserve
``[unused0]``/``[unused1]``, as ColBERT uses); a vocabulary without them gets them added as special
tokens, and the encoder grows its embedding table to match. No token id is written in this file.
"""

from __future__ import annotations

import itertools
import os
import string
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

CONTEXT_SEPARATOR = " | "


def fact_text(title: str, sentence: str) -> str:
    """How a context fact is written into a query: ``title | sentence``."""
    return f"{title}{CONTEXT_SEPARATOR}{sentence}"


def passage_text(title: str, text: str) -> str:
    return f"{title}{CONTEXT_SEPARATOR}{text}"


@dataclass
class QueryBatch:
    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L] what the encoder attends to
    score_mask: torch.Tensor  # [B, L] bool: positions that may count in FLIPR
    n_claim: int  # positions < n_claim are claim positions

    def to(self, device: torch.device | str) -> QueryBatch:
        return QueryBatch(self.input_ids.to(device), self.attention_mask.to(device), self.score_mask.to(device), self.n_claim)


@dataclass
class DocBatch:
    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L] what the encoder attends to
    score_mask: torch.Tensor  # [B, L] bool: the tokens a document is scored with (no padding, no punctuation)

    def to(self, device: torch.device | str) -> DocBatch:
        return DocBatch(self.input_ids.to(device), self.attention_mask.to(device), self.score_mask.to(device))


@dataclass(frozen=True)
class DocTokens:
    """Documents tokenized once (:meth:`FliprTokenizer.doc_tokens`): document i's encoder input is
    ``ids[offsets[i] : offsets[i + 1]]``, and ``scored`` marks its positions a document is scored
    with (not punctuation)."""

    ids: np.ndarray  # int32 [T]
    offsets: np.ndarray  # int64 [N + 1]
    scored: np.ndarray  # bool [T]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        """Encoder positions per document."""
        return np.diff(self.offsets)

    @property
    def doclens(self) -> np.ndarray:
        """Scored positions per document: the token embeddings an index stores for it."""
        counts = np.concatenate([[0], np.cumsum(self.scored, dtype=np.int64)])
        return (counts[self.offsets[1:]] - counts[self.offsets[:-1]]).astype(np.int32)

    def select(self, rows: np.ndarray) -> DocTokens:
        """Documents ``rows``, in that order, as their own :class:`DocTokens` (a codec sample of
        a corpus tokenized once)."""
        source, lengths = self._positions(rows)
        return DocTokens(self.ids[source], np.concatenate([[0], np.cumsum(lengths)]), self.scored[source])

    def _positions(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The flat positions of documents ``rows``' tokens, in order, and their lengths."""
        lengths = self.lengths[rows]
        return np.repeat(self.offsets[rows], lengths) + group_ranks(lengths), lengths

    def batch(self, rows: np.ndarray, pad_id: int) -> DocBatch:
        """Documents ``rows``, in that order, right-padded to the longest of them (no Python loop
        per document: one gather of the flat ids)."""
        source, lengths = self._positions(rows)
        ids, filled = right_padded(self.ids[source], lengths, pad_id)
        scored, _ = right_padded(self.scored[source], lengths, False)
        return DocBatch(torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(filled.astype(np.int64)), torch.from_numpy(scored))


def group_ranks(counts: np.ndarray) -> np.ndarray:
    """0, 1, …, counts[0] − 1, 0, 1, …, counts[1] − 1, …: each element's rank inside its group."""
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


def right_padded(values: np.ndarray, lengths: np.ndarray, fill) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``lengths[i]`` values, taken in order from the flat ``values``, right-padded with
    ``fill`` to the longest: ``(padded [N, width], filled [N, width] bool)``."""
    width = int(lengths.max(initial=0))
    filled = np.arange(width) < lengths[:, None]
    padded = np.full((len(lengths), width), fill, dtype=values.dtype)
    padded[filled] = values
    return padded, filled


#: Texts per thread below which one call tokenizes them all (threads cost more than they save).
THREAD_TEXTS = 2048


def batch_token_ids(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], threads: int | None = None, min_texts: int = THREAD_TEXTS) -> list[list[int]]:
    """Ids of each text, without special tokens or truncation, as ``tokenizer(texts)`` gives them.

    A fast tokenizer's Rust backend is called directly (transformers' per-text conversion of its
    output cost as much again) and, for many texts, from several threads at once: the backend
    releases the GIL, so this parallelises even with ``TOKENIZERS_PARALLELISM=false``, which the
    project sets to keep Prefect's workers fork-safe. ``threads`` defaults to the CPUs, at most 8
    (the hover-mini passages, timed both ways: docs/benchmarks.md, "On a GPU")."""
    texts = list(texts)
    if not texts:
        return []
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:  # a slow (pure Python) tokenizer
        return tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
    # a checkpoint's tokenizer.json may ask its backend to truncate and pad (the shipped MiniLM: to
    # 128); transformers resets both on every call as asked, and so does this
    backend.no_truncation()
    backend.no_padding()
    threads = min(threads or min(os.cpu_count() or 1, 8), max(1, len(texts) // min_texts))
    encode = lambda part: [e.ids for e in backend.encode_batch(part, add_special_tokens=False)]  # noqa: E731
    if threads == 1:
        return encode(texts)
    size = -(-len(texts) // threads)
    with ThreadPoolExecutor(threads) as pool:
        return [ids for part in pool.map(encode, (texts[i : i + size] for i in range(0, len(texts), size))) for ids in part]


def punctuation_ids(tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    """Ids of the punctuation symbols that are one token each: ColBERT's skiplist (every
    character of ``string.punctuation``, as the vocabulary writes it)."""
    ids = tokenizer(list(string.punctuation), add_special_tokens=False)["input_ids"]
    return frozenset(symbol[0] for symbol in ids if len(symbol) == 1)


class FliprTokenizer:
    """Builds query and document id tensors; special ids all come from the wrapped tokenizer."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        query_maxlen: int = 64,
        context_maxlen: int = 448,
        doc_maxlen: int = 256,
        attend_to_mask_tokens: bool = False,
        query_marker: str = "[unused0]",
        doc_marker: str = "[unused1]",
        mask_punctuation: bool = True,
    ) -> None:
        if query_maxlen < 4 or doc_maxlen < 4:
            raise ValueError("query_maxlen and doc_maxlen must leave room for [CLS], a marker and [SEP] (≥ 4)")
        for name in ("cls_token_id", "sep_token_id", "mask_token_id", "pad_token_id"):
            if getattr(tokenizer, name) is None:
                raise ValueError(f"the tokenizer has no {name.removesuffix('_id')}; FLIPR needs a BERT-style vocabulary")
        self.tokenizer = tokenizer
        self.query_maxlen = query_maxlen
        self.context_maxlen = context_maxlen
        self.doc_maxlen = doc_maxlen
        self.attend_to_mask_tokens = attend_to_mask_tokens
        self.added_markers = [m for m in (query_marker, doc_marker) if not self._in_vocab(m)]
        if self.added_markers:
            tokenizer.add_special_tokens({"additional_special_tokens": self.added_markers})
        self.query_marker_id = tokenizer.convert_tokens_to_ids(query_marker)
        self.doc_marker_id = tokenizer.convert_tokens_to_ids(doc_marker)
        self.cls_id, self.sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
        self.mask_id, self.pad_id = tokenizer.mask_token_id, tokenizer.pad_token_id
        self.skiplist = punctuation_ids(tokenizer) if mask_punctuation else frozenset()

    def _in_vocab(self, token: str) -> bool:
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        return token_id is not None and token_id != self.tokenizer.unk_token_id

    def _ids(self, texts: Sequence[str]) -> list[list[int]]:
        return batch_token_ids(self.tokenizer, texts)

    def claim_ids(self, claim: str) -> list[int]:
        """The claim part: [CLS] [Q] claim [SEP] then [MASK] up to ``query_maxlen`` positions."""
        return self._claim_row(self._ids([claim])[0])

    def _claim_row(self, body: Sequence[int]) -> list[int]:
        ids = [self.cls_id, self.query_marker_id, *body[: self.query_maxlen - 3], self.sep_id]
        return ids + [self.mask_id] * (self.query_maxlen - len(ids))

    def context_ids(self, facts: Sequence[str]) -> list[int]:
        """Context facts joined by [SEP] and closed by one, within ``context_maxlen`` positions:
        a longer context loses its tail (the reference's truncation), never the closing [SEP]."""
        return self._context_row(self._ids(facts) if facts else [])

    def _context_row(self, fact_ids: Sequence[Sequence[int]]) -> list[int]:
        if not fact_ids or self.context_maxlen <= 0:
            return []
        joined: list[int] = []
        for i, fact in enumerate(fact_ids):
            joined.extend([self.sep_id, *fact] if i else fact)
        return [*joined[: self.context_maxlen - 1], self.sep_id]

    def queries(self, claims: Sequence[str], contexts: Sequence[Sequence[str]] | None = None) -> QueryBatch:
        """Claims plus, per claim, its context facts (already written as ``title | sentence``)."""
        contexts = contexts if contexts is not None else [()] * len(claims)
        if len(contexts) != len(claims):
            raise ValueError(f"{len(claims)} claims but {len(contexts)} context lists")
        # two tokenizer calls for the whole batch (claims, then every distinct fact), not two per query
        claim_part = [self._claim_row(body) for body in self._ids(claims)]
        distinct = list(dict.fromkeys(fact for facts in contexts for fact in facts))
        fact_ids = dict(zip(distinct, self._ids(distinct), strict=True))
        context_part = [self._context_row([fact_ids[f] for f in facts]) for facts in contexts]
        width = self.query_maxlen + max((len(c) for c in context_part), default=0)
        ids = torch.full((len(claims), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(claims), width), dtype=torch.long)
        score = torch.zeros((len(claims), width), dtype=torch.bool)
        for row, (claim, context) in enumerate(zip(claim_part, context_part, strict=True)):
            full = claim + context
            ids[row, : len(full)] = torch.tensor(full)
            score[row, : len(full)] = True
            attention[row, : len(full)] = 1
            if not self.attend_to_mask_tokens:
                attention[row, : self.query_maxlen] = torch.tensor([int(t != self.mask_id) for t in claim])
        return QueryBatch(ids, attention, score, self.query_maxlen)

    def doc_tokens(self, texts: Sequence[str]) -> DocTokens:
        """Every document's encoder input, ``[CLS] [D] title | text [SEP]`` cut to ``doc_maxlen``,
        tokenized in one call (the fast tokenizer's batch path): flat ids, offsets, and which
        positions are scored. Encoding reads these and never tokenizes again."""
        rows = [[self.cls_id, self.doc_marker_id, *ids[: self.doc_maxlen - 3], self.sep_id] for ids in self._ids(texts)]
        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=int(lengths.sum()))
        return DocTokens(ids, np.concatenate([[0], np.cumsum(lengths)]), ~self.is_punctuation(ids))

    def is_punctuation(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` are skiplist (punctuation) tokens: never scored."""
        return np.isin(ids, np.fromiter(self.skiplist, dtype=ids.dtype, count=len(self.skiplist)))

    def doc_lengths(self, texts: Sequence[str]) -> list[int]:
        """Token count of each document after truncation (for length-sorted batching)."""
        return self.doc_tokens(texts).lengths.tolist()

    def docs(self, texts: Sequence[str]) -> DocBatch:
        """Documents written as ``title | text``, padded to the longest in the batch."""
        tokens = self.doc_tokens(texts)
        return tokens.batch(np.arange(len(tokens)), self.pad_id)

    def id_to_token(self, ids: Sequence[int]) -> list[str]:
        return self.tokenizer.convert_ids_to_tokens(list(ids))
