"""The held-out rule: whole claims, the share asked for, the same claims for the same seed."""

import json

import pytest

from baleen_core.held_out import DEV_CLAIMS_RECORD, agreed_split, held_out_uids, pack_split, question_groups, recorded_split, split_by_question, split_held_out
from baleen_core.training.condenser_trainer import ReaderExample


def test_held_out_uids_takes_the_share_of_distinct_claims_and_is_seeded():
    uids = [f"u{i}" for i in range(40)] * 3  # repeats count once
    held = held_out_uids(uids, 0.25, seed=3)
    assert len(held) == 10 and held <= set(uids)
    assert held_out_uids(reversed(uids), 0.25, seed=3) == held  # order of arrival does not matter
    assert held_out_uids(uids, 0.25, seed=4) != held
    assert held_out_uids(uids, 0.0, seed=3) == set()


def test_split_held_out_keeps_whole_claims_together():
    examples = [ReaderExample(f"u{i // 3}", "c", (), 0) for i in range(60)]
    train, validation = split_held_out(examples, 0.1, seed=1)
    assert len(validation) == 6 and {e.uid for e in train}.isdisjoint({e.uid for e in validation})
    assert {e.uid for e in validation} == held_out_uids((e.uid for e in examples), 0.1, seed=1)
    assert split_held_out(examples, 0.1, seed=1) == (train, validation)
    assert split_held_out(examples, 0.0, seed=1) == (examples, [])


def _claim(uid, hpqa_id, *titles):
    return {"uid": uid, "hpqa_id": hpqa_id, "supporting_facts": [[t, 0] for t in titles]}


def test_question_groups_join_a_question_and_a_title_set_transitively():
    claims = [
        _claim("a", "q1", "X", "Y"),
        _claim("b", "q1", "X", "Z"),  # same question as a
        _claim("c", "q2", "Z", "X"),  # same title set as b (order does not matter)
        _claim("d", "q3", "X", "Y", "W"),  # shares titles with a, but not the set
        _claim("e", "q3", "V", "U"),  # same question as d
    ]
    assert question_groups(claims) == [[0, 1, 2], [3, 4]]


def test_split_by_question_never_splits_a_group_and_takes_about_the_share():
    claims = [_claim(f"u{i}", f"q{i // 3}", f"T{i // 3}", f"S{i}") for i in range(90)]  # 30 questions of 3 claims
    claims += [_claim(f"v{i}", f"r{i}", "Shared", "Set") for i in range(10)]  # 10 questions, one title set
    kept, held = split_by_question(claims, 0.2, seed=5)
    assert len(kept) + len(held) == len(claims) and 20 <= len(held) < 20 + 10
    questions = {c["hpqa_id"] for c in held}
    title_sets = {frozenset(t for t, _ in c["supporting_facts"]) for c in held}
    assert not any(c["hpqa_id"] in questions or frozenset(t for t, _ in c["supporting_facts"]) in title_sets for c in kept)
    assert split_by_question(claims, 0.2, seed=5) == (kept, held)
    assert split_by_question(claims, 0.2, seed=6)[1] != held
    assert split_by_question(claims, 0.0, seed=5) == (claims, [])


def test_the_held_out_pack_splits_training_claims_as_hover_mini_splits_dev(hover_mini, tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from held_out_pack import write_held_out_pack

    train = json.loads((hover_mini / "claims_train.json").read_text())
    dev = json.loads((hover_mini / "claims_dev.json").read_text())
    # the rule is the pack's own: no group of train + dev spans the two splits
    assert all(len({i < len(train) for i in group}) == 1 for group in question_groups(train + dev))

    kept, held = write_held_out_pack(hover_mini, tmp_path / "pack", 0.15, seed=0)
    assert json.loads((tmp_path / "pack" / "claims_dev.json").read_text()) == held
    assert json.loads((tmp_path / "pack" / "claims_train.json").read_text()) == kept
    assert sorted(c["uid"] for c in kept + held) == sorted(c["uid"] for c in train)
    assert 0.15 * len(train) <= len(held) < 0.15 * len(train) + 13  # whole groups: at most one group (≤ 12 claims) more
    assert all(len({i < len(kept) for i in group}) == 1 for group in question_groups(kept + held))
    assert (tmp_path / "pack" / "wiki").is_symlink() and (tmp_path / "pack" / "beir_corpus.jsonl.gz").resolve() == (hover_mini / "beir_corpus.jsonl.gz").resolve()
    # the pack says what its dev claims are; hover-mini itself holds dev claims
    assert pack_split(tmp_path / "pack") == "held-out train" and pack_split(hover_mini) == "dev"


def test_runs_compared_together_must_have_evaluated_the_same_claims(tmp_path):
    (tmp_path / DEV_CLAIMS_RECORD).write_text(json.dumps({"split": "dev", "pack": "/p"}))
    assert recorded_split(tmp_path) == "dev" and recorded_split(tmp_path / "elsewhere") is None
    # every run recorded the same: that, and --split may repeat it
    assert agreed_split({"a": "held-out train", "b": "held-out train"}, None) == "held-out train"
    assert agreed_split({"a": "dev", "b": "dev"}, "dev") == "dev"
    # nothing recorded: --split decides, and must be given
    assert agreed_split({"a": None, "b": None}, "dev") == "dev"
    with pytest.raises(ValueError, match="no split recorded for a, b"):
        agreed_split({"a": None, "b": None}, None)
    # some recorded: --split must agree with them, and is needed for the others
    assert agreed_split({"a": "held-out train", "b": None}, "held-out train") == "held-out train"
    with pytest.raises(ValueError, match="no split recorded for b"):
        agreed_split({"a": "held-out train", "b": None}, None)
    with pytest.raises(ValueError, match="--split 'dev', but the runs recorded 'held-out train'"):
        agreed_split({"a": "held-out train", "b": None}, "dev")
    with pytest.raises(ValueError, match="different claims: a: dev, b: held-out train"):
        agreed_split({"a": "dev", "b": "held-out train"}, "dev")
