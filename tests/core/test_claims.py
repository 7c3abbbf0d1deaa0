"""HoVer claims: validation, resolution against the corpus, flags and reconciliation."""

from __future__ import annotations

import json
import unicodedata

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from baleen_core.claims import read_hover_claims, resolve_claims
from baleen_core.corpus import passage_id
from baleen_core.rejects import InputError


@pytest.fixture
def passages_file(tmp_path):
    titles = ["Pokémon Red", "Ed Wood", "Tim Burton"]
    table = pa.table({"pid": [passage_id(t) for t in titles], "title": titles, "n_sentences": pa.array([2, 3, 1], pa.int32())})
    path = tmp_path / "passages.parquet"
    pq.write_table(table, path)
    return path


def _claim(uid, facts, label="SUPPORTED", hops=2, **extra):
    return {"uid": uid, "claim": f"claim {uid}", "supporting_facts": facts, "label": label, "num_hops": hops, "hpqa_id": "h", **extra}


def _write(tmp_path, claims, name="claims_dev.json"):
    path = tmp_path / name
    path.write_text(json.dumps(claims, ensure_ascii=False))
    return path


def test_facts_resolve_and_unresolved_ones_flag_their_claim(tmp_path, passages_file):
    nfd = unicodedata.normalize("NFD", "Pokémon Red")
    path = _write(tmp_path, [
        _claim("a", [["Ed Wood", 0], ["Tim Burton", 0]]),
        _claim("b", [[nfd, 1], ["Ed Wood", 2]]),  # NFD title against the NFC corpus: resolves
        _claim("c", [["Ed Wood", 3], ["Nowhere", 0]]),  # sid out of range, unknown title
    ])
    resolved = resolve_claims(list(read_hover_claims(path, "dev")), [passages_file])
    claims = {r["uid"]: r for r in resolved.claims.to_pylist()}
    assert [claims[u]["resolved"] for u in "abc"] == [True, True, False]
    assert claims["c"]["n_facts"] == 2 and claims["c"]["n_resolved_facts"] == 0
    assert claims["b"]["n_gold_passages"] == 2
    assert sorted(r["reason"] for r in resolved.rejects.to_pylist()) == ["sid_out_of_range", "unknown_title"]
    assert resolved.gold_facts.num_rows == 4
    stats = resolved.stats
    assert (stats.claims_in, stats.claims_out, stats.facts_in, stats.facts_out, stats.fact_rejects()) == (3, 3, 6, 4, 2)
    assert stats.reconciles()


@pytest.mark.parametrize(
    "claim, reason",
    [
        (_claim("x", [["Ed Wood", 0]], label="REFUTES"), "invalid_label"),
        (_claim("x", [["Ed Wood", 0]], hops=7), "invalid_num_hops"),
        ({"uid": "x", "claim": "c", "label": "SUPPORTED", "num_hops": 2}, "missing_field"),
        (_claim("x", [["Ed Wood", 0]], claim="  "), "empty_text"),
        ("just a string", "wrong_type"),
    ],
)
def test_unusable_claims_are_quarantined(tmp_path, passages_file, claim, reason):
    resolved = resolve_claims(list(read_hover_claims(_write(tmp_path, [claim]), "dev")), [passages_file])
    (reject,) = resolved.rejects.to_pylist()
    assert reject["artifact"] == "claims" and reject["reason"] == reason and reject["line"] == 1
    assert resolved.claims.num_rows == 0 and resolved.stats.reconciles()


def test_duplicate_uid_across_files_and_duplicate_fact(tmp_path, passages_file):
    seen: set[str] = set()
    train = _write(tmp_path, [_claim("a", [["Ed Wood", 0], ["Ed Wood", 0], ["Tim Burton", 0]])], "claims_train.json")
    dev = _write(tmp_path, [_claim("a", [["Ed Wood", 1]])], "claims_dev.json")
    records = list(read_hover_claims(train, "train", seen)) + list(read_hover_claims(dev, "dev", seen))
    resolved = resolve_claims(records, [passages_file])
    reasons = sorted((r["artifact"], r["reason"]) for r in resolved.rejects.to_pylist())
    assert reasons == [("claims", "duplicate_uid"), ("gold_facts", "duplicate_fact")]
    assert resolved.claims.to_pylist()[0]["n_facts"] == 2 and resolved.stats.reconciles()


def test_unlabelled_test_split_is_accepted(tmp_path, passages_file):
    path = _write(tmp_path, [{"uid": "t", "claim": "c", "num_hops": 3}], "claims_test.json")
    resolved = resolve_claims(list(read_hover_claims(path, "test")), [passages_file])
    assert resolved.claims.to_pylist()[0]["label"] is None and resolved.claims.to_pylist()[0]["resolved"]


def test_unreadable_claims_files_name_file_and_line(tmp_path):
    bad = tmp_path / "claims_dev.json"
    bad.write_text('[\n {"uid": "a",\n  oops }\n]')
    with pytest.raises(InputError, match=r"claims_dev.json:3: invalid JSON"):
        list(read_hover_claims(bad, "dev"))
    bad.write_bytes(b'[\n{"uid": "\xff"}]')
    with pytest.raises(InputError, match=r"claims_dev.json:2: byte 0xff is not valid UTF-8"):
        list(read_hover_claims(bad, "dev"))


def test_rejects_name_the_file_line_where_the_claim_starts_and_its_uid(tmp_path, passages_file):
    claims = [_claim("a", [["Ed Wood", 0]]), {"uid": "b", "claim": "c", "num_hops": 2}, _claim("c", [["Nowhere", 0]])]
    path = tmp_path / "claims_dev.json"
    path.write_text(json.dumps(claims, indent=2))  # as HoVer ships them: one field per line
    lines = path.read_text().splitlines()
    resolved = resolve_claims(list(read_hover_claims(path, "dev")), [passages_file])
    by_reason = {r["reason"]: r for r in resolved.rejects.to_pylist()}
    missing, unknown = by_reason["missing_field"], by_reason["unknown_title"]
    # each reject's line is where its claim's object opens, the line holding "{" before its uid
    assert lines[missing["line"] - 1].strip() == "{" and '"uid": "b"' in lines[missing["line"]]
    assert lines[unknown["line"] - 1].strip() == "{" and '"uid": "c"' in lines[unknown["line"]]
    assert missing["key"] == "b" and unknown["key"].startswith("c|")


def test_empty_and_malformed_claims_files_say_what_is_wrong(tmp_path):
    empty = tmp_path / "claims_dev.json"
    empty.write_text("\n")
    with pytest.raises(InputError, match=r"^claims_dev.json: the file is empty"):
        list(read_hover_claims(empty, "dev"))
    control = tmp_path / "claims_train.json"
    control.write_text('[\n{"uid": "a\tb"}]')
    with pytest.raises(InputError, match=r"^claims_train.json:2: invalid JSON at column 11: Invalid control character$"):
        list(read_hover_claims(control, "train"))
