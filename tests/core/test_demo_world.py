"""The seeded demo world: deterministic, multi-hop, and its facts point at real sentences."""

from __future__ import annotations

import bz2
import json
import os
import re
import subprocess
import sys

from baleen_core.config import DemoConfig, demo_preset
from baleen_core.demo_world import INSTITUTION_KINDS, DemoWorld, write_demo_world

DEFAULT_SIZE = DemoConfig()
SMALL = DemoConfig(n_people=40, n_films=20, n_bands=10, n_companies=10, n_cities=12, n_countries=5, n_universities=6,
                   n_distractors=15, n_train_claims=30, n_dev_claims=12)


def test_same_seed_same_world(tmp_path):
    a = write_demo_world(tmp_path / "a", SMALL)
    b = write_demo_world(tmp_path / "b", SMALL)
    for name in ("claims_train.json", "claims_dev.json", "beir_corpus.jsonl.gz", "wiki/AA/wiki_00.bz2"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    c = write_demo_world(tmp_path / "c", SMALL.model_copy(update={"seed": 99}))
    assert (c / "claims_train.json").read_bytes() != (a / "claims_train.json").read_bytes()


def test_the_dev_claims_do_not_move_with_the_number_of_training_claims(tmp_path):
    """Training size is a budget knob: changing it must leave the dev claims (and so every dev
    number it is compared on) as they were, while the training claims grow."""
    a = write_demo_world(tmp_path / "a", SMALL)
    b = write_demo_world(tmp_path / "b", SMALL.model_copy(update={"n_train_claims": 2 * SMALL.n_train_claims}))
    assert (a / "claims_dev.json").read_bytes() == (b / "claims_dev.json").read_bytes()
    train_a, train_b = (json.loads((r / "claims_train.json").read_text()) for r in (a, b))
    assert len(train_b) == 2 * len(train_a)


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


def test_pronouns_follow_the_given_name_and_articles_fit():
    world = DemoWorld(DEFAULT_SIZE)
    for person in world.entities["person"]:
        wrong = {"f": ("He", "His", "he", "his"), "m": ("She", "Her", "she", "her")}[person.attrs["gender"]]
        words = " ".join(person.sentences[1:]).replace(".", " ").replace(",", " ").split()
        assert not set(words) & set(wrong), person.sentences
        assert any(s.startswith(person.pronouns) for s in person.sentences[1:])
    sentences = [s for group in world.entities.values() for e in group for s in e.sentences]
    train, dev = world.starts()
    sentences += [c["claim"] for c in world.claims(300, train, set())]
    slips = [s for s in sentences if re.search(r"\ba [aeio]|\ban [bcdfghjklmnpqrstvwxyz]|\ban uni|(Brothers|Sons|Holdings|Industries)'s|  |\bin on\b|\bin the (western|eastern) (coast|steppe)", s)]
    assert not slips, slips[:5]


def test_names_collide_like_real_names():
    world = DemoWorld(DEFAULT_SIZE)
    people = world.entities["person"]
    surnames = [p.name.split()[-1] for p in people]
    assert len(set(surnames)) < 0.8 * len(surnames)  # namesakes share surnames
    assert sum(any(c.name.startswith(s + " ") for c in world.entities["company"]) for s in set(surnames)) >= 10  # family firms
    film_titles = {f.name for f in world.entities["film"]}
    assert {n.name.removesuffix(" (novel)") for n in world.entities["novel"]} <= film_titles  # a novel and a film share a title
    titles = [e.name for group in world.entities.values() for e in group]
    assert len(titles) == len(set(titles))  # ... yet every title names one passage


def test_names_tokenize_like_real_words():
    # Invented syllable names split into many rare word pieces; names built from English parts
    # split into few common ones, as real names do.
    from transformers import AutoTokenizer

    from baleen_core.config import default_backbone

    tokenizer = AutoTokenizer.from_pretrained(default_backbone())
    world = DemoWorld(DEFAULT_SIZE)
    words = [w for kind in ("person", "city", "country", "university", "film", "band", "company") for e in world.entities[kind] for w in e.name.split()]
    pieces = [len(tokenizer.tokenize(w)) for w in words]
    assert sum(pieces) / len(pieces) < 2.0


def test_train_and_dev_are_split_by_chain(tmp_path):
    root = write_demo_world(tmp_path, DEFAULT_SIZE)
    train = json.loads((root / "claims_train.json").read_text())
    dev = json.loads((root / "claims_dev.json").read_text())
    assert len(train) == DEFAULT_SIZE.n_train_claims and len(dev) == DEFAULT_SIZE.n_dev_claims

    def prefixes(claim):
        titles = [t for t, _ in claim["supporting_facts"]]
        return {tuple(titles[:2]), tuple(titles)}

    train_chains = set().union(*(prefixes(c) for c in train))
    assert not any(prefixes(c) & train_chains for c in dev)
    assert not {c["hpqa_id"] for c in train} & {c["hpqa_id"] for c in dev}
    for hops in (2, 3, 4):
        labels = {c["label"] for c in dev if c["num_hops"] == hops}
        assert labels == {"SUPPORTED", "NOT_SUPPORTED"}, hops


def test_the_last_passage_is_not_named_by_the_claim():
    # The final fact of a 3- or 4-hop claim is a value many passages share (a river, a century, a
    # language) and the claim does not say which kind of institution: the last passage cannot be
    # singled out from the claim alone, only through the bridge named in the passage before it.
    world = DemoWorld(DEFAULT_SIZE)
    by_title = {e.name: e for group in world.entities.values() for e in group}
    train, _ = world.starts()
    claims = [c for c in world.claims(300, train, set()) if c["num_hops"] > 2 and c["label"] == "SUPPORTED"]
    assert claims
    demo_depth = demo_preset().evaluation.depth
    for claim in claims:
        title, sid = claim["supporting_facts"][-1]
        last = by_title[title]
        assert title not in claim["claim"]
        value = set(re.findall(r"\w+", last.sentences[sid])) & set(re.findall(r"\w+", claim["claim"])) - set(COMMON.split())
        assert value, (claim["claim"], last.sentences[sid])
        others = [e for e in by_title.values() if e is not last and value <= set(re.findall(r"\w+", " ".join(e.sentences)))]
        # more passages than the demo reads for a whole claim: the value alone cannot find it
        assert len(others) >= demo_depth, (claim["claim"], value, len(others))
        assert not {kind.lower() for kind in INSTITUTION_KINDS} & set(claim["claim"].lower().split())


COMMON = "The the a an in of on is was It it that city country river lies founded established century whose official language Its its"
