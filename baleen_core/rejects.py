"""Quarantined input rows: why a record could not be used, and where it came from."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from baleen_schemas import RejectReason

RECORD_PREVIEW_CHARS = 500


@dataclass(frozen=True)
class Reject:
    """One input row that goes to the ``rejects`` artifact instead of its target artifact."""

    artifact: str
    reason: RejectReason
    source_file: str
    line: int
    key: str
    detail: str
    record: str | None = None

    def as_row(self) -> dict:
        row = asdict(self)
        row["reason"] = self.reason.value
        if row["record"] is not None:
            row["record"] = row["record"][:RECORD_PREVIEW_CHARS]
        return row


class InputError(ValueError):
    """An input file the pipeline cannot read at all; names the file and line and what to do."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


def json_error_detail(err: json.JSONDecodeError, one_line: bool = False) -> str:
    """``invalid JSON at column 16: Invalid control character`` from a decoder error. Python's
    messages often end in a dangling 'at' (their position follows in ``str(err)``), which would
    read 'at at column 16' if the column were appended. ``one_line``: the text was one line of a
    JSON-lines file, so the column counts from that line's start, whatever newline it ends in."""
    column = err.pos + 1 if one_line else err.colno
    return f"invalid JSON at column {column}: {err.msg.removesuffix(' at')}"
