"""Quarantined input rows: why a record could not be used, and where it came from."""

from __future__ import annotations

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
