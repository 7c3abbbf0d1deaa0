"""Sentence splitting for raw-text sources.

The default is Bling Fire (``blingfire``): a compiled finite-state splitter that installs from PyPI
with its model inside the wheel, so it works offline, and is fast enough for 5.2M passages. ``pysbd``
(rule-based, pure Python) is the alternative we compared it with; see README "Sentence splitting"
and ``benchmarks/sentence_splitters.py`` for the measured agreement with HotpotQA's own split.
"""

from __future__ import annotations

from collections.abc import Callable

SentenceSplitter = Callable[[str], list[str]]


def blingfire_split(text: str) -> list[str]:
    import blingfire

    text = text.strip()
    if not text:
        return []
    return [s for s in blingfire.text_to_sentences(text).split("\n") if s.strip()]


def _pysbd_split() -> SentenceSplitter:
    try:
        import pysbd
    except ImportError:
        raise ImportError("the pysbd splitter needs `pip install pysbd` (or the [test]/[bench] extra)") from None
    segmenter = pysbd.Segmenter(language="en", clean=False)

    def split(text: str) -> list[str]:
        return [s.strip() for s in segmenter.segment(text) if s.strip()]

    return split


def get_splitter(name: str) -> SentenceSplitter:
    """The splitter called ``name`` ('blingfire' or 'pysbd')."""
    if name == "blingfire":
        return blingfire_split
    if name == "pysbd":
        return _pysbd_split()
    raise ValueError(f"unknown sentence splitter {name!r}; choose 'blingfire' or 'pysbd'")
