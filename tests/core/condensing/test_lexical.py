"""The reader's lexical coverage expert: features by hand, the fit at its optimum, the combination."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from baleen_core.condensing.lexical import FEATURES, LEXICAL_FILE, LexicalCoverage, combine, coverage_features, training_stats, words

FACTS = (
    "Cherie Currie | Cherie Currie is the lead singer of The Runaways.",
    "Foxes (soundtrack) | Foxes starred Cherie Currie.",
    "Steve Augeri | Steve Augeri was born in 1959.",
)


def test_words_split_on_everything_but_letters_and_digits():
    assert words("The Runaways' Foxes (soundtrack), 1959; Zoë-Ann") == ["The", "Runaways", "Foxes", "soundtrack", "1959", "Zoë", "Ann"]


def test_coverage_features_hand_worked():
    # content words: Runaways singer starred Foxes Steve Perry born 1959 (The, in, and, was: stopwords)
    # names and numbers: Runaways Foxes Steve Perry 1959 (the first word, The, is not a name)
    # the facts (titles included) hold every one of them but Perry
    claim = "The Runaways' singer starred in Foxes and Steve Perry was born in 1959."
    assert coverage_features(claim, FACTS) == [1 / 8, 1.0, 1.0, 1 / 5, 0.0, 3.0]
    assert coverage_features(claim.replace("Perry", "Augeri"), FACTS) == [0.0, 0.0, 0.0, 0.0, 0.0, 3.0]
    # content: Steve Augeri not born 1959 ("not" is no stopword); names: Augeri 1959 (Steve comes first)
    assert coverage_features("Steve Augeri was not born in 1959.", ()) == [1.0, 5.0, 2.0, 1.0, 1.0, 0.0]
    assert len(FEATURES) == 6


def _edited_claims(n: int, seed: int = 0) -> tuple[list[str], list[tuple[str, ...]], list[bool]]:
    """Claims whose facts name the person; an edited claim (NOT_SUPPORTED) names another."""
    rng = np.random.default_rng(seed)
    names = ["Oren Vask", "Kelda Marrow", "Ilse Brandt", "Tomas Reyl", "Anouk Fenn", "Piet Olm"]
    claims, facts, labels = [], [], []
    for i in range(n):
        person, other = rng.choice(len(names), 2, replace=False)
        supported = bool(rng.random() < 0.6)
        facts.append((f"Film {i} | Film {i} was directed by {names[person]}.",))
        claims.append(f"Film {i} was directed by {names[person if supported else other]}.")
        labels.append(supported)
    return claims, facts, labels


def test_the_fit_is_at_the_optimum_of_its_penalised_likelihood():
    claims, facts, labels = _edited_claims(80)
    model = LexicalCoverage.fit(claims, facts, labels, l2=1.0)
    # the gradient of the penalised negative log-likelihood vanishes at the fitted weights
    raw = np.array([coverage_features(c, f) for c, f in zip(claims, facts, strict=True)])
    x = np.hstack([(raw - np.array(model.mean)) / np.array(model.scale), np.ones((len(raw), 1))])
    theta = np.array([*model.weights, model.bias])
    p = 1 / (1 + np.exp(-(x @ theta)))
    gradient = x.T @ (p - np.array(labels, dtype=float)) + np.array([1.0] * len(model.weights) + [0.0]) * theta
    assert np.abs(gradient).max() < 1e-6
    assert model.prior_log_odds == pytest.approx(math.log(sum(labels) / (len(labels) - sum(labels))))
    assert model.examples == 80


def test_a_swapped_name_lowers_the_odds_on_held_out_claims():
    model = LexicalCoverage.fit(*_edited_claims(80, seed=0))
    claims, facts, labels = _edited_claims(40, seed=1)
    odds = [model.log_odds(c, f) for c, f in zip(claims, facts, strict=True)]
    assert all((o > 0) == y for o, y in zip(odds, labels, strict=True))


def test_combine_counts_the_prior_once_hand_worked():
    assert combine(0.5, math.log(3), 0.0) == pytest.approx(0.75)
    assert combine(0.8, 1.3, 1.3) == pytest.approx(0.8)  # the expert says no more than the prior
    assert combine(0.8, math.log(1 / 4), 0.0) == pytest.approx(0.5)  # 4:1 against 1:4
    model = LexicalCoverage((0.0,) * 6, math.log(2), (0.0,) * 6, (1.0,) * 6, math.log(2), 10)
    assert model.prob_supported("Anything at all.", (), 0.3) == pytest.approx(0.3)


def test_fitting_refuses_one_class_only():
    claims, facts, _ = _edited_claims(10)
    with pytest.raises(ValueError, match="both SUPPORTED and NOT_SUPPORTED"):
        LexicalCoverage.fit(claims, facts, [True] * 10)


def test_saved_and_loaded_alike_and_a_stale_file_is_named(tmp_path):
    model = LexicalCoverage.fit(*_edited_claims(30))
    assert LexicalCoverage.load(tmp_path) is None
    model.save(tmp_path)
    assert LexicalCoverage.load(tmp_path) == model
    raw = json.loads((tmp_path / LEXICAL_FILE).read_text())
    raw["features"] = raw["features"][:-1]
    (tmp_path / LEXICAL_FILE).write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="retrain the reader"):
        LexicalCoverage.load(tmp_path)


def test_a_readers_training_record_holds_its_expert_only_when_it_has_one():
    model = LexicalCoverage.fit(*_edited_claims(30))
    assert training_stats(None) == {}
    assert training_stats(model) == {"lexical_coverage": model.summary()} and list(training_stats(model)["lexical_coverage"]["weights"]) == list(FEATURES)
