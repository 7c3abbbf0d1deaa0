"""Readers for the upstream corpus formats.

* HotpotQA "abstracts" layout: a directory tree of ``.bz2`` (or plain) files, one JSON object a
  line, ``{"id", "title", "text": [sentence, ...]}``. The given split is kept as is: HoVer's
  sentence ids point into it.
* BEIR corpus JSON lines (optionally ``.gz``): ``{"_id", "title", "text", "metadata"}`` with raw
  text, which is split into sentences here.

Both yield :class:`SourceRecord` for usable rows and :class:`~baleen_core.rejects.Reject` for rows
that must be quarantined; a file that cannot be read at all raises
:class:`~baleen_core.rejects.InputError` naming the file and line.
"""

from __future__ import annotations

import bz2
import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from baleen_core.corpus.titles import normalize_title
from baleen_core.rejects import InputError, Reject, json_error_detail
from baleen_schemas import RejectReason

_ARTIFACT = "passages"


@dataclass(frozen=True)
class SourceRecord:
    """A usable corpus record, not yet merged with the other sources."""

    source: str
    source_file: str
    line: int
    source_id: str | None
    title: str
    sentences: list[str]


def iter_lines(path: Path, display: str) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw bytes) of a plain, .bz2 or .gz file.

    Decoding is left to the caller so one bad byte quarantines one line, not the file. A
    compressed stream that ends early (a truncated download) raises ``InputError``.
    """
    opener: Callable = open
    if path.suffix == ".bz2":
        opener = bz2.open
    elif path.suffix == ".gz":
        opener = gzip.open
    line_no = 0
    try:
        with opener(path, "rb") as fh:
            for line_no, raw in enumerate(fh, start=1):
                yield line_no, raw
    except EOFError:
        raise InputError(
            display,
            line_no + 1,
            f"compressed stream ends early after {line_no} complete lines: the file is truncated "
            "(interrupted download or copy?). Fetch it again or remove it from the source.",
        ) from None
    except OSError as err:  # corrupt compressed data
        raise InputError(display, line_no + 1, f"cannot decompress ({err}); the file is corrupt.") from None


def _decode_json_line(raw: bytes, display: str, line: int) -> dict | Reject | None:
    """Parse one JSON-lines row; None for a blank line, a Reject for a bad one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        bad = raw[err.start : err.start + 1].hex()
        return Reject(
            _ARTIFACT,
            RejectReason.INVALID_UTF8,
            display,
            line,
            "",
            f"byte 0x{bad} at column {err.start + 1} is not valid UTF-8; re-encode the file as UTF-8",
            raw.decode("utf-8", errors="replace"),
        )
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        return Reject(
            _ARTIFACT, RejectReason.INVALID_JSON, display, line, "", json_error_detail(err, one_line=True), text
        )
    if not isinstance(obj, dict):
        return Reject(
            _ARTIFACT, RejectReason.WRONG_TYPE, display, line, "", f"expected a JSON object, got {type(obj).__name__}", text
        )
    return obj


def _title_or_reject(obj: dict, display: str, line: int, raw: bytes, id_field: str) -> str | Reject:
    """The normalised title, or a reject keyed by the record's id when it has one."""
    key = _source_id(obj, id_field) or ""
    if "title" not in obj:
        return Reject(_ARTIFACT, RejectReason.MISSING_FIELD, display, line, key, "missing field 'title'", raw.decode())
    if not isinstance(obj["title"], str):
        return Reject(_ARTIFACT, RejectReason.WRONG_TYPE, display, line, key, "'title' must be a string", raw.decode())
    title = normalize_title(obj["title"])
    if not title:
        return Reject(_ARTIFACT, RejectReason.EMPTY_TITLE, display, line, key, "'title' is empty", raw.decode())
    return title


def _source_id(obj: dict, field: str) -> str | None:
    value = obj.get(field)
    return None if value is None else str(value)


ProgressCallback = Callable[[int], None]


def read_abstracts(root: Path, source: str = "abstracts", on_file_done: ProgressCallback | None = None) -> Iterator[SourceRecord | Reject]:
    """Records of a HotpotQA abstracts tree, in sorted file order (deterministic ids and precedence).

    ``on_file_done(n_bytes)`` is called after each file, for progress reporting."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(str(root), None, "abstracts source must be a directory of .bz2/.jsonl files")
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise InputError(str(root), None, "abstracts directory holds no files")
    for path in files:
        display = str(path.relative_to(root))
        for line, raw in iter_lines(path, display):
            obj = _decode_json_line(raw, display, line)
            if obj is None or isinstance(obj, Reject):
                if obj is not None:
                    yield obj
                continue
            title = _title_or_reject(obj, display, line, raw, "id")
            if isinstance(title, Reject):
                yield title
                continue
            text = obj.get("text")
            if text is None:
                yield Reject(_ARTIFACT, RejectReason.MISSING_FIELD, display, line, title, "missing field 'text'", raw.decode())
                continue
            if not isinstance(text, list) or not all(isinstance(s, str) for s in text):
                yield Reject(
                    _ARTIFACT,
                    RejectReason.WRONG_TYPE,
                    display,
                    line,
                    title,
                    "'text' must be a list of sentence strings in the abstracts layout",
                    raw.decode(),
                )
                continue
            # Keep every sentence, even an empty one: HoVer's sentence ids index this list.
            sentences = [s.strip() for s in text]
            if not any(sentences):
                yield Reject(_ARTIFACT, RejectReason.EMPTY_TEXT, display, line, title, "passage has no text", raw.decode())
                continue
            yield SourceRecord(source, display, line, _source_id(obj, "id"), title, sentences)
        if on_file_done is not None:
            on_file_done(path.stat().st_size)


def read_beir(
    path: Path, split_sentences: Callable[[str], list[str]], source: str = "beir", on_file_done: ProgressCallback | None = None
) -> Iterator[SourceRecord | Reject]:
    """Records of a BEIR corpus file, raw text split into sentences by ``split_sentences``."""
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), None, "BEIR source must be a .jsonl or .jsonl.gz file")
    display = path.name
    for line, raw in iter_lines(path, display):
        obj = _decode_json_line(raw, display, line)
        if obj is None or isinstance(obj, Reject):
            if obj is not None:
                yield obj
            continue
        title = _title_or_reject(obj, display, line, raw, "_id")
        if isinstance(title, Reject):
            yield title
            continue
        if "_id" not in obj or "text" not in obj:
            missing = "_id" if "_id" not in obj else "text"
            yield Reject(_ARTIFACT, RejectReason.MISSING_FIELD, display, line, title, f"missing field {missing!r}", raw.decode())
            continue
        if not isinstance(obj["text"], str):
            yield Reject(_ARTIFACT, RejectReason.WRONG_TYPE, display, line, title, "'text' must be a string", raw.decode())
            continue
        sentences = [s.strip() for s in split_sentences(obj["text"]) if s.strip()]
        if not sentences:
            yield Reject(_ARTIFACT, RejectReason.EMPTY_TEXT, display, line, title, "passage has no text", raw.decode())
            continue
        yield SourceRecord(source, display, line, _source_id(obj, "_id"), title, sentences)
    if on_file_done is not None:
        on_file_done(path.stat().st_size)
