"""The evidence ranker: each feature by hand, the fit on a signal stage 2 misses, the weights' checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baleen_core.condensing.evidence_ranker import FEATURES, NOT_RETRIEVED_RANK, HopRead, bare_title, evidence_scores, fit_evidence_ranker, read_features
from baleen_core.condensing.layouts import Sentence
from baleen_core.config import EvidenceRankerWeights

CLAIM = "Glass Harbour was directed by a man born in Denmark."
CONTEXT = Sentence(2, 1, "Glass Harbour", "It was directed by Oren Vask.")
BRIDGE = Sentence(3, 1, "Oren Vask (director)", "He was born in Aarhus.")
DISTRACTOR = Sentence(7, 0, "Harbour Lights", "Harbour Lights is a novel set in Leeds.")
READ = HopRead(hop=2, last=True, candidates=(CONTEXT, BRIDGE, DISTRACTOR), stage2_scores=(3.0, -1.0, 0.5), stage1_scores={BRIDGE.key: 2.0, DISTRACTOR.key: 4.0}, retrieved=(7, 3))


def test_bare_title_drops_a_trailing_parenthetical_and_case():
    assert bare_title("Oren Vask (director)") == "oren vask"
    assert bare_title("Foxes (soundtrack)") == "foxes"
    assert bare_title("(What's the Story) Morning Glory?") == "(what's the story) morning glory?"


def test_read_features_hand_worked():
    rows = read_features(CLAIM, READ)
    assert rows.shape == (3, len(FEATURES))
    named = [dict(zip(FEATURES, row, strict=True)) for row in rows]
    # the claim's content words: glass harbour directed man born denmark (6); its names: harbour denmark
    # ("Glass" comes first); "man" is no stopword
    context, bridge, distractor = named
    assert context == {
        "stage2_score": 3.0, "stage2_rank": 0.0, "stage1_score": 0.0, "was_context": 1.0,
        "title_in_claim": 1.0, "title_words_in_claim": 1.0, "title_in_other_facts": 0.0,
        "claim_words_held": 3 / 6,  # glass harbour directed
        "claim_names_held": 1 / 2,  # harbour
        "retrieval_rank": math.log1p(NOT_RETRIEVED_RANK),  # context from an earlier hop, not retrieved at this one
        "facts_of_passage": 1.0, "hop": 2.0, "last_hop": 1.0,
    }
    # the bridge: its bare title "oren vask" is named by the context fact of another passage
    assert bridge["title_in_claim"] == 0.0 and bridge["title_words_in_claim"] == 0.0 and bridge["title_in_other_facts"] == 1.0
    assert bridge["stage2_rank"] == 2.0 and bridge["stage1_score"] == 2.0 and bridge["was_context"] == 0.0
    assert bridge["claim_words_held"] == 1 / 6 and bridge["retrieval_rank"] == math.log1p(1)  # born; second retrieved
    # the distractor shares "harbour" with the claim but its title is not in it
    assert distractor["title_in_claim"] == 0.0 and distractor["title_words_in_claim"] == 1 / 2
    assert distractor["claim_words_held"] == 1 / 6 and distractor["claim_names_held"] == 1 / 2 and distractor["retrieval_rank"] == 0.0


def _world(n_claims: int, seed: int) -> tuple[dict[str, str], dict[str, list[HopRead]], dict[str, set[tuple[int, int]]]]:
    """Claims whose gold fact's title the claim names, while stage 2's score is noise: a ranker
    that reads the words must beat stage 2's order."""
    rng = np.random.default_rng(seed)
    names = ["Oren Vask", "Kelda Marrow", "Ilse Brandt", "Tomas Reyl", "Anouk Fenn", "Piet Olm", "Sana Quill", "Bram Tarr"]
    claims, reads, gold = {}, {}, {}
    for i in range(n_claims):
        uid = f"c{i}"
        chosen = rng.choice(len(names), size=4, replace=False)
        claims[uid] = f"{names[chosen[0]]} wrote a novel."
        candidates = tuple(Sentence(10 * i + j, 0, names[k], f"{names[k]} is a writer.") for j, k in enumerate(chosen))
        reads[uid] = [HopRead(1, True, candidates, tuple(rng.normal(size=4)), {s.key: 0.0 for s in candidates}, tuple(s.pid for s in candidates))]
        gold[uid] = {candidates[0].key}
    return claims, reads, gold


def _top_is_gold(ranker, claims, reads, gold) -> float:
    hits = []
    for uid, (read,) in reads.items():
        scores = evidence_scores(ranker, claims[uid], read)
        hits.append(read.candidates[int(np.argmax(scores))].key in gold[uid])
    return float(np.mean(hits))


def test_the_ranker_learns_what_the_words_say_and_holds_on_new_claims():
    train, held_out = _world(200, seed=0), _world(100, seed=1)
    ranker = fit_evidence_ranker(*train)
    assert ranker.examples == 800 and ranker.claims == 200 and ranker.features == list(FEATURES)
    weights = dict(zip(ranker.features, ranker.weights, strict=True))
    assert weights["title_in_claim"] > 1.0 and abs(weights["stage2_score"]) < 0.5
    assert _top_is_gold(ranker, *held_out) == 1.0
    # stage 2's own order finds the gold fact about a quarter of the time here
    claims, reads, gold = held_out
    assert np.mean([r[0].candidates[int(np.argmax(r[0].stage2_scores))].key in gold[uid] for uid, r in reads.items()]) < 0.5


def test_the_ranker_refuses_what_it_cannot_fit_or_was_not_fitted_on():
    claims, reads, gold = _world(5, seed=0)
    with pytest.raises(ValueError, match="none were given"):
        fit_evidence_ranker(claims, reads, {})
    with pytest.raises(ValueError, match="both gold and other facts"):
        fit_evidence_ranker(claims, reads, {uid: {s.key for s in r[0].candidates} for uid, r in reads.items()})
    ranker = fit_evidence_ranker(claims, reads, gold)
    older = ranker.model_copy(update={"features": ["stage2_score", *ranker.features[1:-1], "hops"]})
    with pytest.raises(ValueError, match="retrain the reader"):
        evidence_scores(older, CLAIM, READ)
    with pytest.raises(ValueError, match="one weight, mean and scale per feature"):
        EvidenceRankerWeights.model_validate({**ranker.model_dump(), "weights": ranker.weights[:-1]})
    # as a manifest holds it, it reads back to the same scores
    again = EvidenceRankerWeights.model_validate_json(ranker.model_dump_json())
    assert evidence_scores(again, CLAIM, READ) == evidence_scores(ranker, CLAIM, READ)
