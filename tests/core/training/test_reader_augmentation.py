"""The reader's rewrites of SUPPORTED training examples: what each makes, and from what."""

import random

import pytest

from baleen_core.config import ReaderTrainingConfig
from baleen_core.held_out import split_held_out
from baleen_core.training.condenser_trainer import ReaderExample
from baleen_core.training.reader_augmentation import NOT_SUPPORTED, SUPPORTED, augment_reader_examples, name_pool, reader_training_sets, swap_detail

FILM = ReaderExample(
    "u1",
    "The director of Walter's Meadow was born in Ashford in 1931.",
    ("Walter's Meadow | Walter's Meadow is a film directed by Esther Rosden.", "Esther Rosden | Esther Rosden was born in Ashford in 1931."),
    SUPPORTED,
)
SCHOOL = ReaderExample("u2", "Olive Marcroft studied at the University of Embergate.", ("Olive Marcroft | Olive Marcroft studied at the University of Embergate.",), SUPPORTED)
REFUTED = ReaderExample("u3", "Olive Marcroft was born in Kormark.", ("Olive Marcroft | Olive Marcroft was born in Elmhaven.", "Elmhaven | Elmhaven is a city."), NOT_SUPPORTED)


def test_names_are_whole_capitalised_spans_without_punctuation():
    assert name_pool([FILM, SCHOOL]) == ["Ashford", "Esther Rosden", "Olive Marcroft", "University of Embergate", "Walter's Meadow"]


def test_a_swap_replaces_one_detail_the_facts_contain_with_one_they_lack():
    pool = name_pool([FILM, SCHOOL, REFUTED])
    evidence = " ".join(FILM.facts)
    details = ("Walter's Meadow", "Ashford", "1931")  # what the claim says that the facts show ("The" starts the sentence)
    swapped_out = set()
    for seed in range(40):
        swapped = swap_detail(FILM.claim, FILM.facts, pool, random.Random(seed))
        (old, new), = [
            (old, swapped[len(before) : len(swapped) - len(after)])
            for old in details
            for before, after in [FILM.claim.split(old)]
            if swapped.startswith(before) and swapped.endswith(after) and len(swapped) > len(before) + len(after)
        ]
        assert new != old and new not in evidence and (new in pool or new.isdigit())
        swapped_out.add(old)
    assert swapped_out == set(details)  # each detail gets its turn


def test_a_year_moves_and_a_name_comes_from_elsewhere():
    for seed in range(20):
        swapped = swap_detail("It opened in 1931.", ("X | It opened in 1931.",), ["Elmhaven"], random.Random(seed))
        year = int(swapped.removeprefix("It opened in ").rstrip("."))
        assert year != 1931 and abs(year - 1931) <= 12
    assert swap_detail("Olive Marcroft studied at Embergate.", ("Olive Marcroft | She studied at Embergate.",), ["Olive Marcroft", "Embergate"], random.Random(0)) is None  # nothing else to swap in
    assert swap_detail("Olive Marcroft studied at Embergate.", ("Kormark | A country.",), ["Elmhaven"], random.Random(0)) is None  # the facts say nothing of it


def test_each_supported_example_gets_its_rewrites_and_refuted_ones_none():
    out = augment_reader_examples([FILM, SCHOOL, REFUTED], ["swap", "drop", "shuffle"], seed=0)
    assert out[:3] == [FILM, SCHOOL, REFUTED]
    extra = out[3:]
    assert {e.uid for e in extra} == {"u1", "u2"}  # never the NOT_SUPPORTED claim
    film = [e for e in extra if e.uid == "u1"]
    swapped, dropped, shuffled = film
    assert swapped.label == NOT_SUPPORTED and swapped.facts == FILM.facts and swapped.claim != FILM.claim
    assert dropped.label == NOT_SUPPORTED and dropped.claim == FILM.claim and len(dropped.facts) == 1 and dropped.facts[0] in FILM.facts
    assert shuffled.label == SUPPORTED and shuffled.facts == FILM.facts[::-1]
    school = [e for e in extra if e.uid == "u2"]
    assert [e.label for e in school] == [NOT_SUPPORTED]  # one fact: a swap only, nothing to drop or shuffle
    assert augment_reader_examples([FILM, SCHOOL, REFUTED], ["swap", "drop", "shuffle"], seed=0) == out
    assert augment_reader_examples([FILM, SCHOOL], [], seed=0) == [FILM, SCHOOL]
    assert [e.label for e in augment_reader_examples([FILM], ["drop"], seed=0)] == [SUPPORTED, NOT_SUPPORTED]


def test_unknown_rewrites_are_refused():
    with pytest.raises(ValueError, match="unknown reader augmentation"):
        augment_reader_examples([FILM], ["negate"], seed=0)


def test_held_out_claims_are_never_rewritten():
    examples = [ReaderExample(f"u{i}", FILM.claim, FILM.facts, SUPPORTED) for i in range(40)]
    config = ReaderTrainingConfig(validation_share=0.25, augment=["drop", "shuffle"])
    train, held_out = reader_training_sets(examples, config)
    plain_train, plain_held_out = split_held_out(examples, 0.25, config.seed)
    assert held_out == plain_held_out and len(held_out) == 10
    assert train[:30] == plain_train and len(train) == 30 * 3
    assert {e.uid for e in train}.isdisjoint({e.uid for e in held_out})
