"""Extra reader examples made from the SUPPORTED training claims' own facts.

With a thousand training claims the reader memorises them (hover-mini: held-out loss above a
constant guess). HoVer's NOT_SUPPORTED claims are SUPPORTED ones with a detail changed, or ones
whose evidence does not cover them; these three rewrites teach exactly that, per SUPPORTED example:

- ``swap``: a name or year of the claim that its facts contain is replaced by another name from
  the training facts (or a nearby year) that they do not → NOT_SUPPORTED;
- ``drop``: one of its facts removed (every gold fact is needed) → NOT_SUPPORTED;
- ``shuffle``: its facts in another order → SUPPORTED, so the order of facts says nothing.

Off by default (``training.reader.augment: []``): measured on held-out *training* claims of
hover-mini (never dev) by ``benchmarks/reader.py``, at the default 2 epochs they cost accuracy
(docs/benchmarks.md, "Reader rewrites").
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import get_args

from baleen_core.config import ReaderRewrite, ReaderTrainingConfig
from baleen_core.held_out import split_held_out
from baleen_core.training.condenser_trainer import NOT_SUPPORTED, SUPPORTED, ReaderExample

AUGMENTATIONS = get_args(ReaderRewrite)

#: A capitalised name of one or more words ("University of Embergate", "Esther Rosden"), or a year.
_YEAR = r"\b(?:1[0-9]|20)\d\d\b"
_WORD = r"[A-Z][\w'\-]*"
SPAN = re.compile(rf"{_YEAR}|\b{_WORD}(?:\s+(?:of|the|de|and|&)\s+{_WORD}|\s+{_WORD})*")
_MIN_SPAN = 4  # shorter capitalised words ("He", "The") are rarely the claim's checkable detail


def spans(text: str) -> list[re.Match]:
    return [m for m in SPAN.finditer(text) if len(m.group(0)) >= _MIN_SPAN]


def name_pool(examples: Sequence[ReaderExample]) -> list[str]:
    """Every distinct non-year span of the examples' facts, in a fixed order."""
    found = {m.group(0) for e in examples for fact in e.facts for m in spans(fact) if not m.group(0).isdigit()}
    return sorted(found)


def swap_detail(claim: str, facts: Sequence[str], pool: Sequence[str], rng: random.Random) -> str | None:
    """``claim`` with one span that ``facts`` contain replaced by one they do not contain; None
    when the claim has no such span (the sentence-initial word does not count: it is capitalised
    because it starts the sentence)."""
    evidence = " ".join(facts)
    candidates = [m for m in spans(claim) if m.start() > 0 and m.group(0) in evidence]
    if not candidates:
        return None
    chosen = rng.choice(candidates)
    old = chosen.group(0)
    if old.isdigit():
        new = str(int(old) + rng.choice((-1, 1)) * rng.randint(1, 12))
    else:
        options = [name for name in pool if name != old and name not in evidence]
        if not options:
            return None
        new = rng.choice(options)
    return claim[: chosen.start()] + new + claim[chosen.end() :]


def augment_reader_examples(examples: Sequence[ReaderExample], kinds: Sequence[str], seed: int) -> list[ReaderExample]:
    """``examples`` followed by the rewrites of ``kinds`` of each SUPPORTED example with facts
    (seeded: the same examples and seed give the same list)."""
    unknown = set(kinds) - set(AUGMENTATIONS)
    if unknown:
        raise ValueError(f"unknown reader augmentation(s) {sorted(unknown)}; choose from {AUGMENTATIONS}")
    rng = random.Random(seed)
    pool = name_pool(examples) if "swap" in kinds else []
    extra: list[ReaderExample] = []
    for example in examples:
        if example.label != SUPPORTED or not example.facts:
            continue
        if "swap" in kinds and (claim := swap_detail(example.claim, example.facts, pool, rng)) is not None:
            extra.append(replace(example, claim=claim, label=NOT_SUPPORTED))
        if "drop" in kinds and len(example.facts) > 1:
            kept = list(example.facts)
            del kept[rng.randrange(len(kept))]
            extra.append(replace(example, facts=tuple(kept), label=NOT_SUPPORTED))
        if "shuffle" in kinds and len(set(example.facts)) > 1:
            order = list(example.facts)
            while tuple(order) == example.facts:
                rng.shuffle(order)
            extra.append(replace(example, facts=tuple(order)))
    return [*examples, *extra]


def reader_training_sets(examples: Sequence[ReaderExample], config: ReaderTrainingConfig) -> tuple[list[ReaderExample], list[ReaderExample]]:
    """(train, held out): the held-out claims' examples as they are (the validation curve measures
    real claims), the other claims' examples plus their rewrites."""
    train, held_out = split_held_out(examples, config.validation_share, config.seed)
    return augment_reader_examples(train, config.augment, config.seed), held_out
