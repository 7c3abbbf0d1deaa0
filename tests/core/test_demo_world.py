"""The seeded demo world: deterministic, multi-hop, and its facts point at real sentences."""

from __future__ import annotations

import bz2
import json
import os
import subprocess
import sys

from baleen_core.config import DemoConfig
from baleen_core.demo_world import DemoWorld, write_demo_world

SMALL = DemoConfig(n_people=40, n_films=20, n_bands=10, n_companies=10, n_cities=12, n_countries=5, n_universities=6,
                   n_distractors=15, n_train_claims=30, n_dev_claims=12)


def test_same_seed_same_world(tmp_path):
    a = write_demo_world(tmp_path / "a", SMALL)
    b = write_demo_world(tmp_path / "b", SMALL)
    for name in ("claims_train.json", "claims_dev.json", "beir_corpus.jsonl.gz", "wiki/AA/wiki_00.bz2"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    c = write_demo_world(tmp_path / "c", SMALL.model_copy(update={"seed": 99}))
    assert (c / "claims_train.json").read_bytes() != (a / "claims_train.json").read_bytes()


def test_same_world_whatever_the_hash_seed(tmp_path):
    # Python randomises str hashes per process, so iterating a set of names would make the world
    # depend on the process: generate it in two processes with different hash seeds.
    script = "import sys; from baleen_core.config import DemoConfig; from baleen_core.demo_world import write_demo_world; " \
        f"write_demo_world(sys.argv[1], DemoConfig(**{SMALL.model_dump()!r}))"
    for seed in ("1", "2"):
        subprocess.run([sys.executable, "-c", script, str(tmp_path / seed)], check=True, env={**os.environ, "PYTHONHASHSEED": seed})
    for name in ("claims_train.json", "claims_dev.json", "wiki/AA/wiki_00.bz2"):
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes(), name


def test_claims_are_multi_hop_with_bridges_unnamed(tmp_path):
    root = write_demo_world(tmp_path, SMALL)
    passages = {}
    for line in bz2.open(root / "wiki" / "AA" / "wiki_00.bz2", "rt"):
        row = json.loads(line)
        passages[row["title"]] = [s.strip() for s in row["text"]]
    claims = json.loads((root / "claims_train.json").read_text()) + json.loads((root / "claims_dev.json").read_text())
    assert {c["num_hops"] for c in claims} == {2, 3, 4}
    assert {c["label"] for c in claims} == {"SUPPORTED", "NOT_SUPPORTED"}
    for claim in claims:
        titles = [t for t, _ in claim["supporting_facts"]]
        assert len(set(titles)) == claim["num_hops"]
        assert titles[0] in claim["claim"]  # only the first entity is named ...
        assert all(t not in claim["claim"] for t in titles[1:])  # ... bridges are found by hopping
        for title, sid in claim["supporting_facts"]:
            assert 0 <= sid < len(passages[title]) and 2 <= len(passages[title]) <= 5


def test_passages_use_pronouns():
    world = DemoWorld(SMALL)
    person = world.entities["person"][0]
    assert any(s.startswith(("He ", "She ")) for s in person.sentences[1:])


def test_rewrite_is_skipped_for_the_same_config(tmp_path):
    root = write_demo_world(tmp_path, SMALL)
    mtime = (root / "claims_dev.json").stat().st_mtime_ns
    write_demo_world(tmp_path, SMALL)
    assert (root / "claims_dev.json").stat().st_mtime_ns == mtime
