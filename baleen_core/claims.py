"""HoVer claims: read the release JSON, validate each claim, resolve its facts against the corpus.

A HoVer file is a JSON array of ``{uid, claim, supporting_facts: [[title, sent_idx]], label,
num_hops, hpqa_id}``. A claim that cannot be used at all (no uid, bad label, hop count out of range)
is quarantined; a usable claim whose facts do not all resolve is kept and flagged
(``claims.resolved = false``) and each unresolved fact is quarantined with its reason. Counts
reconcile at both levels: claims in = claims + claim rejects, facts in = gold_facts + fact rejects
(facts of a quarantined claim travel with that claim's reject row).

Resolution is a DuckDB join against the passages Parquet files, so it scales to the full 5.2M
passage corpus without loading it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from baleen_core.corpus.titles import normalize_title
from baleen_core.rejects import InputError, Reject, json_error_detail
from baleen_schemas import CLAIMS, GOLD_FACTS, HOP_RANGE, LABELS, REJECTS, RejectReason


@dataclass(frozen=True)
class ClaimRecord:
    uid: str
    claim: str
    label: str | None
    num_hops: int
    split: str
    hpqa_id: str | None
    source_file: str
    line: int  # where the claim starts in its file
    facts: list[tuple[str, int]]  # (normalised title, sentence id), duplicates removed


@dataclass
class ClaimsStats:
    claims_in: int = 0
    claims_out: int = 0
    facts_in: int = 0
    facts_out: int = 0
    rejects: Counter = field(default_factory=Counter)  # by (artifact, reason)
    flagged_claims: int = 0

    def claim_rejects(self) -> int:
        return sum(n for (artifact, _), n in self.rejects.items() if artifact == "claims")

    def fact_rejects(self) -> int:
        return sum(n for (artifact, _), n in self.rejects.items() if artifact == "gold_facts")

    def reconciles(self) -> bool:
        return (
            self.claims_in == self.claims_out + self.claim_rejects()
            and self.facts_in == self.facts_out + self.fact_rejects()
        )

    def as_dict(self) -> dict:
        return {
            "claims_in": self.claims_in,
            "claims_out": self.claims_out,
            "facts_in": self.facts_in,
            "facts_out": self.facts_out,
            "flagged_claims": self.flagged_claims,
            "rejects": {f"{a}/{r}": n for (a, r), n in sorted(self.rejects.items())},
            "reconciles": self.reconciles(),
        }


def load_hover_json(path: Path) -> list[tuple[int, object]]:
    """(file line, element) for each element of a HoVer release file's top-level array;
    unreadable files raise ``InputError``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(str(path), None, "claims file does not exist") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise InputError(path.name, line, f"byte 0x{raw[err.start:err.start+1].hex()} is not valid UTF-8; re-encode the file") from None
    if not text.strip():
        raise InputError(path.name, None, "the file is empty; a HoVer claims file is a JSON array of claim objects")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(path.name, err.lineno, json_error_detail(err)) from None
    if not isinstance(data, list):
        raise InputError(path.name, 1, "a HoVer claims file must be a JSON array of claim objects")
    return list(zip(_element_lines(text), data))


_BETWEEN_ELEMENTS = re.compile(r"[ \t\r\n,]*")  # JSON whitespace and the commas between array elements


def _element_lines(text: str) -> Iterator[int]:
    """The line each element of ``text``'s top-level array starts on (``text`` is valid JSON whose
    top level is an array), so that a reject names the line an editor shows, not an index."""
    decoder = json.JSONDecoder()
    index = text.index("[") + 1
    line = 1 + text.count("\n", 0, index)
    while True:
        start = _BETWEEN_ELEMENTS.match(text, index).end()
        if text[start] == "]":
            return
        line += text.count("\n", index, start)
        yield line
        _, index = decoder.raw_decode(text, start)
        line += text.count("\n", start, index)


def read_hover_claims(path: Path, split: str, seen_uids: set[str] | None = None) -> Iterator[ClaimRecord | Reject]:
    """Validated claims of one HoVer file (``line`` = the file line where the claim starts).

    ``seen_uids`` is shared across the files of one dataset so a uid repeated in train and dev is
    caught. Facts that are malformed or repeated are yielded as ``gold_facts`` rejects right after
    their claim.
    """
    seen_uids = set() if seen_uids is None else seen_uids
    display = Path(path).name
    for line, obj in load_hover_json(path):
        yield from _validate_claim(obj, split, display, line, seen_uids)


def _validate_claim(obj, split: str, display: str, line: int, seen_uids: set[str]) -> Iterator[ClaimRecord | Reject]:
    def reject(reason: RejectReason, detail: str, key: str = "") -> Reject:
        return Reject("claims", reason, display, line, key, detail, json.dumps(obj, ensure_ascii=False))

    if not isinstance(obj, dict):
        yield reject(RejectReason.WRONG_TYPE, f"expected a claim object, got {type(obj).__name__}")
        return
    labelled = split != "test"
    required = ["uid", "claim", "num_hops"] + (["label", "supporting_facts"] if labelled else [])
    missing = [k for k in required if k not in obj or obj[k] is None]
    if missing:
        yield reject(RejectReason.MISSING_FIELD, f"missing field(s): {', '.join(missing)}", str(obj.get("uid", "")))
        return
    uid = str(obj["uid"])
    if not isinstance(obj["claim"], str) or not obj["claim"].strip():
        yield reject(RejectReason.EMPTY_TEXT, "'claim' must be a non-empty string", uid)
        return
    if uid in seen_uids:
        yield reject(RejectReason.DUPLICATE_UID, f"uid {uid} appears earlier in this dataset", uid)
        return
    label = obj.get("label")
    if labelled and label not in LABELS:
        yield reject(RejectReason.INVALID_LABEL, f"label {label!r} is not one of {', '.join(LABELS)}", uid)
        return
    num_hops = obj["num_hops"]
    if isinstance(num_hops, bool) or not isinstance(num_hops, int) or not HOP_RANGE[0] <= num_hops <= HOP_RANGE[1]:
        yield reject(RejectReason.INVALID_NUM_HOPS, f"num_hops {num_hops!r} is not an integer in {HOP_RANGE[0]}..{HOP_RANGE[1]}", uid)
        return
    raw_facts = obj.get("supporting_facts") or []
    if not isinstance(raw_facts, list):
        yield reject(RejectReason.WRONG_TYPE, "'supporting_facts' must be a list of [title, sentence id] pairs", uid)
        return
    seen_uids.add(uid)
    facts: list[tuple[str, int]] = []
    fact_rejects: list[Reject] = []
    for fact in raw_facts:
        key = f"{uid}|{fact!r}"
        if (
            not isinstance(fact, (list, tuple))
            or len(fact) != 2
            or not isinstance(fact[0], str)
            or isinstance(fact[1], bool)
            or not isinstance(fact[1], int)
        ):
            fact_rejects.append(
                Reject("gold_facts", RejectReason.WRONG_TYPE, display, line, key, "a fact must be [title, sentence id]", json.dumps(fact))
            )
            continue
        normalized = (normalize_title(fact[0]), fact[1])
        if normalized in facts:
            fact_rejects.append(
                Reject("gold_facts", RejectReason.DUPLICATE_FACT, display, line, key, "fact listed twice for this claim", json.dumps(fact))
            )
            continue
        facts.append(normalized)
    hpqa = obj.get("hpqa_id")
    yield ClaimRecord(
        uid=uid,
        claim=obj["claim"].strip(),
        label=label,
        num_hops=num_hops,
        split=split,
        hpqa_id=None if hpqa is None else str(hpqa),
        source_file=display,
        line=line,
        facts=facts,
    )
    yield from fact_rejects


@dataclass
class ResolvedClaims:
    claims: pa.Table
    gold_facts: pa.Table
    rejects: pa.Table
    stats: ClaimsStats


def resolve_claims(records: Sequence[ClaimRecord | Reject], passage_files: Sequence[str | Path]) -> ResolvedClaims:
    """Join claims' facts with the corpus; flag claims whose facts do not all resolve."""
    stats = ClaimsStats()
    claims = [r for r in records if isinstance(r, ClaimRecord)]
    rejects = [r for r in records if isinstance(r, Reject)]
    stats.claims_in = len(claims) + sum(1 for r in rejects if r.artifact == "claims")
    stats.facts_in = sum(len(c.facts) for c in claims) + sum(1 for r in rejects if r.artifact == "gold_facts")

    facts = pa.table(
        {
            "uid": [c.uid for c in claims for _ in c.facts],
            "title": [t for c in claims for t, _ in c.facts],
            "sid": pa.array([s for c in claims for _, s in c.facts], pa.int64()),
            "source_file": [c.source_file for c in claims for _ in c.facts],
            "line": pa.array([c.line for c in claims for _ in c.facts], pa.int64()),
        }
    )
    con = duckdb.connect()
    try:
        con.register("facts", facts)
        files = [str(f) for f in passage_files]
        joined = con.sql(
            """
            SELECT f.uid, f.title, f.sid, f.source_file, f.line, p.pid, p.n_sentences
            FROM facts f LEFT JOIN read_parquet($files) p ON p.title = f.title
            ORDER BY f.source_file, f.line, f.uid, f.title, f.sid
            """,
            params={"files": files},
        ).to_arrow_table()
    finally:
        con.close()

    resolved: dict[str, list] = {c: [] for c in GOLD_FACTS.columns}
    ok_per_uid: Counter = Counter()
    passages_per_uid: dict[str, set[int]] = {}
    for row in joined.to_pylist():
        key = f"{row['uid']}|{row['title']}|{row['sid']}"
        if row["pid"] is None:
            rejects.append(
                Reject("gold_facts", RejectReason.UNKNOWN_TITLE, row["source_file"], row["line"], key,
                       f"no passage titled {row['title']!r} in the corpus (check the corpus sources)")
            )
        elif not 0 <= row["sid"] < row["n_sentences"]:
            rejects.append(
                Reject("gold_facts", RejectReason.SID_OUT_OF_RANGE, row["source_file"], row["line"], key,
                       f"sentence {row['sid']} out of range: {row['title']!r} has {row['n_sentences']} sentences")
            )
        else:
            for col in GOLD_FACTS.columns:
                resolved[col].append(row[col])
            ok_per_uid[row["uid"]] += 1
            passages_per_uid.setdefault(row["uid"], set()).add(row["pid"])

    claim_cols: dict[str, list] = {c: [] for c in CLAIMS.columns}
    for c in claims:
        n_ok = ok_per_uid[c.uid]
        flagged = n_ok != len(c.facts) or (c.split != "test" and not c.facts)
        stats.flagged_claims += flagged
        for col, value in (
            ("uid", c.uid), ("claim", c.claim), ("label", c.label), ("num_hops", c.num_hops), ("split", c.split),
            ("hpqa_id", c.hpqa_id), ("n_facts", len(c.facts)), ("n_resolved_facts", n_ok),
            ("n_gold_passages", len(passages_per_uid.get(c.uid, ()))), ("resolved", not flagged),
        ):
            claim_cols[col].append(value)

    for r in rejects:
        stats.rejects[(r.artifact, r.reason.value)] += 1
    stats.claims_out = len(claims)
    stats.facts_out = len(resolved["uid"])
    return ResolvedClaims(
        claims=pa.Table.from_pydict(claim_cols, schema=CLAIMS.schema),
        gold_facts=pa.Table.from_pydict(resolved, schema=GOLD_FACTS.schema),
        rejects=pa.Table.from_pylist([r.as_row() for r in rejects], schema=REJECTS.schema),
        stats=stats,
    )
