"""Titles are the join key between HoVer facts and passages, so both sides normalise them alike."""

from __future__ import annotations

import hashlib
import unicodedata


def normalize_title(title: str) -> str:
    """NFC form with runs of whitespace collapsed; case and punctuation are kept (Wikipedia titles
    are case-sensitive after the first letter, and 'Heat (1995 film)' differs from 'Heat')."""
    return unicodedata.normalize("NFC", " ".join(title.split()))


def passage_id(title: str) -> int:
    """Stable 63-bit id of a normalised title: the same title gets the same pid in every run and
    every corpus, independent of source order. (A collision is detected at merge time.)"""
    digest = hashlib.blake2b(title.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1
