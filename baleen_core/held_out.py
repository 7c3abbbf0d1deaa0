"""Which training claims are held out: seeded rules for every stage that needs unseen claims.

- :func:`held_out_training_claims`: the training claims no retriever or condenser trains on
  (``labels.held_out_share``, split by HotpotQA question as hover-mini splits train from dev):
  the engine runs over them to make the reader's training facts, so the reader learns from facts
  as the engine hands them for a claim it has never seen.
- :func:`held_out_uids`: the condensers' and the reader's validation curves hold out whole claims
  (never single hops, so no claim is half seen), chosen the same way from the same seed.
- :func:`pack_split` / :func:`agreed_split`: what a benchmark pack's ``claims_dev.json`` holds
  (hover-mini's dev claims, or held-out *training* claims), so that no result is labelled as
  the other.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

#: Written into a held-out pack's folder (``benchmarks/held_out_pack.py``): what its dev claims are.
PACK_RECORD = "pack.json"
#: Written into a benchmark's work folder by its training and evaluation: what its dev claims are.
DEV_CLAIMS_RECORD = "dev-claims.json"
HELD_OUT_SPLIT, DEV_SPLIT = "held-out train", "dev"


def pack_split(pack: Path) -> str:
    """What ``pack``'s ``claims_dev.json`` holds: held-out training claims when its
    :data:`PACK_RECORD` says so, otherwise dev claims."""
    record = pack / PACK_RECORD
    return json.loads(record.read_text())["dev_claims"] if record.is_file() else DEV_SPLIT


def record_split(work: Path, pack: Path, split: str) -> None:
    """Record in a benchmark work folder what its dev claims are: ``split``, those of ``pack``."""
    (work / DEV_CLAIMS_RECORD).write_text(json.dumps({"split": split, "pack": str(pack.resolve())}) + "\n")


def recorded_split(work: Path) -> str | None:
    """What a benchmark work folder recorded its dev claims to be (:func:`record_split`); None
    for a folder made before the record existed."""
    record = work / DEV_CLAIMS_RECORD
    return json.loads(record.read_text())["split"] if record.is_file() else None


def agreed_split(recorded: Mapping[str, str | None], given: str | None) -> str:
    """The split that runs compared together evaluated: what every run recorded (run name →
    split, None where unrecorded), which ``given`` may only repeat; ``given`` alone where no run
    recorded one. ValueError when runs disagree, contradict ``given``, or nothing says."""
    known = {split for split in recorded.values() if split is not None}
    if len(known) > 1:
        raise ValueError("the runs evaluated different claims: " + ", ".join(f"{name}: {split or 'unrecorded'}" for name, split in recorded.items()))
    if given is not None and known and given not in known:
        raise ValueError(f"--split {given!r}, but the runs recorded {known.pop()!r}")
    if given is None and None in recorded.values():
        unrecorded = ", ".join(name for name, split in recorded.items() if split is None)
        raise ValueError(f"no split recorded for {unrecorded} (made before the record existed): pass --split 'held-out train' or --split dev")
    return given if given is not None else known.pop()


def held_out_uids(uids: Iterable[str], share: float, seed: int) -> set[str]:
    """A seeded ``share`` of the distinct claim uids: the claims held out of training."""
    distinct = sorted(set(uids))
    n = round(share * len(distinct))
    return set(random.Random(seed).sample(distinct, n)) if n else set()


def split_held_out(examples: Sequence, share: float, seed: int) -> tuple[list, list]:
    """(train, held out) of examples with a ``uid``: every example of a held-out claim
    (:func:`held_out_uids`) goes to the second list."""
    held = held_out_uids((e.uid for e in examples), share, seed)
    return [e for e in examples if e.uid not in held], [e for e in examples if e.uid in held]


def question_groups(claims: Sequence[Mapping]) -> list[list[int]]:
    """Indices of HoVer claims (``hpqa_id``, ``supporting_facts``) grouped as hover-mini splits
    them: claims of one HotpotQA question, or with the same set of gold titles, are one group,
    transitively (HoVer writes several claims per question: mutations and longer chains of it)."""
    parent = list(range(len(claims)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_with: dict[tuple, int] = {}
    for i, claim in enumerate(claims):
        titles = tuple(sorted({title for title, _ in claim["supporting_facts"]}))
        for key in (("question", claim.get("hpqa_id")), ("titles", titles)):
            if key[1] is None:
                continue
            if key in first_with:
                parent[root(i)] = root(first_with[key])
            else:
                first_with[key] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(claims)):
        groups.setdefault(root(i), []).append(i)
    return sorted(groups.values())


def split_by_question(claims: Sequence[Mapping], share: float, seed: int) -> tuple[list, list]:
    """(kept, held out) HoVer claims, split as hover-mini splits train from dev: whole
    :func:`question_groups`, seeded, until the held-out claims reach ``share`` of all. No held-out
    claim then shares a question or a gold-title set with a kept one, so a model trained on the
    kept claims meets the held-out ones as it meets dev claims: without having seen their chains."""
    groups = question_groups(claims)
    random.Random(seed).shuffle(groups)
    target, held = round(share * len(claims)), set()
    for group in groups:
        if len(held) >= target:
            break
        held.update(group)
    return [c for i, c in enumerate(claims) if i not in held], [c for i, c in enumerate(claims) if i in held]


def held_out_training_claims(claims: Sequence[Mapping], share: float, seed: int) -> set[str]:
    """uids of the training claims (``uid``, ``hpqa_id``, ``supporting_facts``) that no retriever
    or condenser trains on: whole :func:`question_groups` (a question's claims, or a gold-title
    set's) up to ``share`` of the claims, seeded, taken from the claims in uid order so that the
    choice does not depend on the order they were read in."""
    if share <= 0:
        return set()
    ordered = sorted(claims, key=lambda c: c["uid"])
    _, held = split_by_question(ordered, share, seed)
    return {c["uid"] for c in held}
