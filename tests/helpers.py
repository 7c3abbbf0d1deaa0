"""Helpers shared by tests (importable as ``helpers``: pytest puts ``tests/`` on sys.path)."""

from __future__ import annotations

import bz2
import json
from pathlib import Path

from baleen_core.config import DemoConfig


def write_abstracts(root: Path, rows: list, name: str = "AA/wiki_00.bz2", raw_lines: list[bytes] | None = None) -> Path:
    """An abstracts tree with one bz2 file of ``rows`` (dicts) and then ``raw_lines`` verbatim."""
    path = root / "wiki" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rows) + b"".join(raw_lines or [])
    path.write_bytes(bz2.compress(data))
    return root / "wiki"


def passage(pid: int, title: str, *sentences: str):
    """A :class:`PassageSentences` with sentence ids 0, 1, …"""
    from baleen_core.condensing import PassageSentences, Sentence

    return PassageSentences(pid, title, tuple(Sentence(pid, sid, title, text) for sid, text in enumerate(sentences)))


#: The tiny demo world of the flow tests: 118 passages, 30 train and 12 dev claims.
TINY = DemoConfig(n_people=40, n_films=20, n_bands=10, n_companies=10, n_cities=12, n_countries=5, n_universities=6, n_distractors=15, n_train_claims=30, n_dev_claims=12)
