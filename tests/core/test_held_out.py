"""The held-out rule: whole claims, the share asked for, the same claims for the same seed."""

from baleen_core.held_out import held_out_uids, split_held_out
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
