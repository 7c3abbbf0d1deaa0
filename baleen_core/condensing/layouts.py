"""Input layouts of the condenser stages and the reader, built from token ids the tokenizer names.

Stage 1 (one input per passage, a second window when a passage does not fit)::

    [CLS] claim [SEP] fact₁ [SEP] fact₂ … [SEP] title [MASK] s₁ [MASK] s₂ … [SEP]

Stage 2 (one input per hop: the context facts and the best stage-1 facts)::

    [CLS] claim [SEP] [MASK] fact₁ [MASK] fact₂ … [SEP]

Reader::

    [CLS] claim [SEP] fact₁ [SEP] fact₂ … [SEP]

A sentence or fact is scored from the [MASK] in front of it (``scoring: marker``, Baleen) or from
its own tokens against the query's (``scoring: similarity``; each window records the item spans
and the query span for that); the reader from [CLS]. Facts are
written ``title | sentence``. Every id comes from the tokenizer (``cls_token_id`` …); a tokenizer
without a [MASK] token is refused with the reason. Items are cut to their token budgets, never
dropped: stage 2 and the reader shrink the per-fact budget so that every fact gets a marker.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from baleen_core.retrieval.tokenization import batch_token_ids, fact_text, group_ranks, right_padded


def share_budget(lengths: Sequence[int], budget: int) -> list[int]:
    """Tokens each item keeps so that together they fit ``budget``: short items whole, the long
    ones cut to one equal share of what is left, so every item keeps at least ``budget // n``
    tokens (or all of its own) and none is cut away by the items before it."""
    kept = [0] * len(lengths)
    remaining = max(0, budget)
    for done, i in enumerate(sorted(range(len(lengths)), key=lambda i: lengths[i])):
        kept[i] = min(lengths[i], remaining // (len(lengths) - done))
        remaining -= kept[i]
    return kept


def fit_facts(fact_ids: Sequence[Sequence[int]], budget: int, separator: int) -> list[int]:
    """Facts each followed by ``separator``, within ``budget`` positions, every fact shortened to
    its share (:func:`share_budget`) rather than the last ones dropped."""
    ids: list[int] = []
    for fact, keep in zip(fact_ids, share_budget([len(f) for f in fact_ids], budget - len(fact_ids)), strict=True):
        ids.extend([*fact[:keep], separator])
    return ids[: max(0, budget)]


@dataclass(frozen=True)
class Sentence:
    """One corpus sentence, HoVer's (title, sentence index) as (pid, sid)."""

    pid: int
    sid: int
    title: str
    text: str

    @property
    def key(self) -> tuple[int, int]:
        return (self.pid, self.sid)

    @property
    def fact(self) -> str:
        return fact_text(self.title, self.text)


@dataclass(frozen=True)
class PassageSentences:
    pid: int
    title: str
    sentences: tuple[Sentence, ...]


def passage_or_nothing(passages: Mapping[int, PassageSentences], pid: int) -> PassageSentences:
    """``passages[pid]``, or ``pid`` with no title and no sentences (nothing to score) when
    ``passages`` lacks it."""
    return passages.get(pid) or PassageSentences(pid, "", ())


@dataclass
class Window:
    """One encoder input: token ids, the positions scored, and which item each scores. ``spans``
    are the scored items' own tokens ``[start, end)`` (the reader's: its facts') and ``query_end``
    ends the claim (+ context) tokens after [CLS]; the similarity and alignment heads read them."""

    input_ids: list[int]
    positions: list[int]
    items: list[int]
    spans: list[tuple[int, int]] = field(default_factory=list)
    query_end: int = 0

    def add_item(self, item: int, marker: int, piece_end: int) -> None:
        """Record scored item ``item``: its marker at ``marker``, its tokens up to ``piece_end``."""
        self.items.append(item)
        self.positions.append(marker)
        self.spans.append((marker + 1, piece_end) if piece_end > marker + 1 else (marker, marker + 1))  # a fact cut to nothing pools its marker


@dataclass
class PaddedBatch:
    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, L]
    rows: torch.Tensor  # [N] window of each scored position
    cols: torch.Tensor  # [N] position inside the window
    # the similarity head's pooling (None when not asked for):
    item_pool: torch.Tensor | None = None  # [B, M, L] mean-pooling weights of each window's scored items (M: most items in a window)
    slots: torch.Tensor | None = None  # [N] each scored position's item slot in its window
    query_pool: torch.Tensor | None = None  # [B, L] mean-pooling weights of each window's query tokens

    def to(self, device: torch.device) -> PaddedBatch:
        return PaddedBatch(*(None if (t := getattr(self, f.name)) is None else t.to(device) for f in fields(self)))


class SpecialIds:
    """The special token ids a layout needs, looked up on the tokenizer."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        names = {"cls": tokenizer.cls_token_id, "sep": tokenizer.sep_token_id, "mask": tokenizer.mask_token_id, "pad": tokenizer.pad_token_id}
        missing = [name for name, value in names.items() if value is None]
        if missing:
            raise ValueError(
                f"tokenizer {type(tokenizer).__name__} has no {', '.join(missing)} token; the condensers and the reader need a "
                "BERT-style vocabulary with [CLS], [SEP], [MASK] and [PAD] (bert, electra, MiniLM, ColBERT checkpoints have them)"
            )
        self.cls, self.sep, self.mask, self.pad = names["cls"], names["sep"], names["mask"], names["pad"]


def token_ids(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str]) -> dict[str, list[int]]:
    """Ids of each distinct text, without special tokens (:func:`~baleen_core.retrieval.tokenization.batch_token_ids`)."""
    distinct = list(dict.fromkeys(texts))
    return dict(zip(distinct, batch_token_ids(tokenizer, distinct), strict=True))


class TokenCache:
    """:func:`token_ids` that remembers: ids of the texts one tokenizer has already tokenized,
    kept for the next call. The engine reads the same passage sentences at every hop and for many
    claims; tokenizing them again was 40% of its time on a GPU (docs/benchmarks.md). Holds at
    most ``max_texts`` texts, the least recently used leaving first; ids are tuples, so no
    caller can change what the next one reads."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_texts: int = 200_000) -> None:
        if max_texts < 1:
            raise ValueError(f"a token cache needs room for at least one text, not {max_texts}")
        self.tokenizer = tokenizer
        self.max_texts = max_texts
        self._ids: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self.tokenized = 0  # texts sent to the tokenizer so far (the rest were served from the cache)

    def __len__(self) -> int:
        return len(self._ids)

    def __call__(self, texts: Sequence[str]) -> dict[str, tuple[int, ...]]:
        """Ids of each distinct text of ``texts``, without special tokens; only texts not seen
        before reach the tokenizer, in one batched call."""
        distinct = list(dict.fromkeys(texts))
        missing = [t for t in distinct if t not in self._ids]
        fresh = dict(zip(missing, map(tuple, batch_token_ids(self.tokenizer, missing)), strict=True))
        self.tokenized += len(missing)
        found = {t: fresh[t] if t in fresh else self._ids[t] for t in distinct}
        for text, ids in found.items():
            self._ids[text] = ids
            self._ids.move_to_end(text)
        while len(self._ids) > self.max_texts:
            self._ids.popitem(last=False)
        return found


def stage1_claim_budget(claim_length: int, fact_lengths: Sequence[int], query_maxlen: int) -> int:
    """Tokens of the claim in stage 1's query: all of them up to ``query_maxlen``, but never so
    many that the context facts (each with its [SEP]) get less than half the query, or less than
    they need when that is less. A claim that fills the query would otherwise leave the context
    no room at all, and stage 1 would read the hop as if nothing had been found yet."""
    context_need = sum(length + 1 for length in fact_lengths)
    return min(claim_length, query_maxlen - min(context_need, query_maxlen // 2))


def stage1_windows(
    tokenizer: PreTrainedTokenizerBase,
    claim: str,
    context: Sequence[str],
    passage: PassageSentences,
    query_maxlen: int,
    window_maxlen: int,
    ids: Mapping[str, Sequence[int]] | None = None,
) -> list[Window]:
    """Windows scoring every sentence of ``passage`` (item i = sentence i) for claim + context."""
    special = SpecialIds(tokenizer)
    ids = ids if ids is not None else token_ids(tokenizer, [claim, *context, passage.title, *(s.text for s in passage.sentences)])
    return stage1_passage_windows(special, stage1_query(special, claim, context, query_maxlen, ids), passage, window_maxlen, ids)


def stage1_query(special: SpecialIds, claim: str, context: Sequence[str], query_maxlen: int, ids: Mapping[str, Sequence[int]]) -> list[int]:
    """Stage 1's query ids, ``claim [SEP] fact₁ [SEP] fact₂ …``: the same for every passage of a
    hop, so the engine builds it once per claim and hop (:func:`stage1_passage_windows`)."""
    claim_ids = list(ids[claim][: stage1_claim_budget(len(ids[claim]), [len(ids[fact]) for fact in context], query_maxlen)])
    # every context fact keeps its share of what the claim leaves (none is cut away), each
    # preceded by [SEP]: fit_facts writes "fact [SEP]", so the separators are rotated to the front
    facts = fit_facts([ids[fact] for fact in context], query_maxlen - len(claim_ids), special.sep)
    return claim_ids + ([special.sep, *facts[:-1]] if facts else [])


def stage1_passage_windows(special: SpecialIds, query: Sequence[int], passage: PassageSentences, window_maxlen: int, ids: Mapping[str, Sequence[int]]) -> list[Window]:
    """:func:`stage1_windows` of one passage for a query built by :func:`stage1_query`."""
    prefix = [special.cls, *query, special.sep, *ids[passage.title]][: window_maxlen - 3]
    room = window_maxlen - len(prefix) - 1  # the closing [SEP]
    query_end = min(1 + len(query), len(prefix))
    windows: list[Window] = []
    current = Window(list(prefix), [], [], query_end=query_end)
    for i, sentence in enumerate(passage.sentences):
        piece = [special.mask, *ids[sentence.text]][:room]
        if current.items and len(current.input_ids) + len(piece) + 1 > window_maxlen:
            windows.append(current)
            current = Window(list(prefix), [], [], query_end=query_end)
        current.add_item(i, len(current.input_ids), len(current.input_ids) + len(piece))
        current.input_ids.extend(piece)
    if current.items:
        windows.append(current)
    for window in windows:
        window.input_ids.append(special.sep)
    return windows


def _claim_prefix(tokenizer, claim: str, facts: Sequence[str], claim_maxlen: int, ids: dict[str, list[int]] | None):
    """Special ids, the ids of claim and facts, and ``[CLS] claim [SEP]`` (stage 2 and the reader)."""
    special = SpecialIds(tokenizer)
    ids = ids if ids is not None else token_ids(tokenizer, [claim, *facts])
    return special, ids, [special.cls, *ids[claim][:claim_maxlen], special.sep]


def _fact_budget(n_facts: int, room: int, fact_maxlen: int) -> int:
    return max(1, min(fact_maxlen, room // max(1, n_facts) - 1))


def stage2_window(
    tokenizer: PreTrainedTokenizerBase, claim: str, facts: Sequence[str], claim_maxlen: int, fact_maxlen: int, maxlen: int, ids: dict[str, list[int]] | None = None
) -> Window:
    """One input scoring every fact (item i = fact i) from the [MASK] in front of it."""
    special, ids, input_ids = _claim_prefix(tokenizer, claim, facts, claim_maxlen, ids)
    budget = _fact_budget(len(facts), maxlen - len(input_ids) - 1, fact_maxlen)
    window = Window(input_ids, [], [], query_end=len(input_ids) - 1)
    for i, fact in enumerate(facts):
        piece = [special.mask, *ids[fact][:budget]]
        window.add_item(i, len(window.input_ids), len(window.input_ids) + len(piece))
        window.input_ids.extend(piece)
    window.input_ids.append(special.sep)
    return window


def reader_window(
    tokenizer: PreTrainedTokenizerBase, claim: str, facts: Sequence[str], claim_maxlen: int, fact_maxlen: int, maxlen: int, ids: dict[str, list[int]] | None = None
) -> Window:
    """One input scored from [CLS] (item 0). Its ``spans`` are the facts' tokens and ``query_end``
    ends the claim's, for the alignment head (which compares the two)."""
    special, ids, input_ids = _claim_prefix(tokenizer, claim, facts, claim_maxlen, ids)
    budget = _fact_budget(len(facts), maxlen - len(input_ids), fact_maxlen)
    window = Window(input_ids, [0], [0], query_end=len(input_ids) - 1)
    for fact in facts:
        piece = ids[fact][:budget]
        if piece:
            window.spans.append((len(input_ids), len(input_ids) + len(piece)))
        input_ids += [*piece, special.sep]
    return window


def pad_windows(windows: Sequence[Window], pad_id: int, pool_spans: bool = False) -> PaddedBatch:
    """Right-pad to the longest window; scored positions as (row, col) index tensors; with
    ``pool_spans``, the mean-pooling weights of every item span and query span too. Built with
    array operations over all windows at once (no Python work per token or span: the engine pads
    tens of thousands of windows per hop)."""
    input_ids, filled = right_padded(_flat(w.input_ids for w in windows), _lengths(w.input_ids for w in windows), pad_id)
    width = input_ids.shape[1]
    n_scored = _lengths(w.positions for w in windows)
    rows = np.repeat(np.arange(len(windows)), n_scored)
    batch = PaddedBatch(
        torch.from_numpy(input_ids), torch.from_numpy(filled.astype(np.int64)), torch.from_numpy(rows), torch.from_numpy(_flat(w.positions for w in windows))
    )
    if pool_spans:
        n_spans = _lengths(w.spans for w in windows)
        spans = _flat((edge for span in w.spans for edge in span) for w in windows).reshape(-1, 2)
        span_lengths = spans[:, 1] - spans[:, 0]
        # one entry per pooled token: (window, item slot, column) and the weight 1 / span length
        token_row = np.repeat(np.repeat(np.arange(len(windows)), n_spans), span_lengths)
        token_slot = np.repeat(group_ranks(n_spans), span_lengths)
        token_col = np.repeat(spans[:, 0], span_lengths) + group_ranks(span_lengths)
        item_pool = np.zeros((len(windows), int(n_spans.max(initial=0)) or 1, width), dtype=np.float32)
        item_pool[token_row, token_slot, token_col] = np.repeat(1.0 / np.maximum(span_lengths, 1), span_lengths)
        query_end = np.fromiter((w.query_end for w in windows), dtype=np.int64, count=len(windows))
        in_query = (np.arange(width) >= 1) & (np.arange(width) < query_end[:, None])
        batch.item_pool = torch.from_numpy(item_pool)
        batch.query_pool = torch.from_numpy((in_query / np.maximum(query_end - 1, 1)[:, None]).astype(np.float32))
        batch.slots = torch.from_numpy(group_ranks(n_scored))
    return batch


def _lengths(sequences) -> np.ndarray:
    return np.fromiter((len(x) for x in sequences), dtype=np.int64)


def _flat(sequences) -> np.ndarray:
    return np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int64)
