"""Lexical coverage: which of a claim's words and names its facts never mention.

HoVer writes most NOT_SUPPORTED claims by editing a supported one: a name, a year or a word is
swapped for another. The swapped-in word then appears in none of the claim's facts, however well
they were retrieved. :class:`LexicalCoverage` is a logistic regression over a handful of such
counts (:data:`FEATURES`), fitted on the reader's own training examples; the reader's
P(SUPPORTED) and its odds are combined as two experts (:func:`combine`), the training prior
counted once.

Why exact words beside the reader's alignment head (``models.AlignmentHead``): the head compares
contextual embeddings, and a swapped name in the same sentence frame ("Steve Perry" for "Steve
Augeri") stays close to the original in that space. A missing string is unambiguous.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from baleen_core.condensing.logistic import StandardisedLogistic, fit_logistic

LEXICAL_FILE = "lexical_coverage.json"

#: What a claim's words are checked for, in this order (:func:`coverage_features`).
FEATURES = ("missing_word_share", "missing_words", "missing_names", "missing_name_share", "negation", "facts")

# function words say nothing about whether the facts cover the claim
STOPWORDS = frozenset(
    "a an the of in on at to for and or is was were are be been by with as from that this which who whose it its his her their he she they also both".split()
)
NEGATIONS = frozenset(("not", "never", "no", "neither", "nor", "only"))
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The runs of letters and digits of ``text``, in order ("Foxes (soundtrack)" → Foxes, soundtrack)."""
    return _WORD.findall(text)


def coverage_features(claim: str, facts: Sequence[str]) -> list[float]:
    """:data:`FEATURES` of ``claim`` against ``facts`` (each "title | sentence", so titles count):

    - ``missing_word_share``, ``missing_words``: the claim's content words (not in
      :data:`STOPWORDS`) that no fact holds, as a share and a count;
    - ``missing_names``, ``missing_name_share``: the same for its names and numbers, the words
      that start with a capital (the claim's first word excepted) or hold a digit;
    - ``negation``: 1 when the claim says not, never, no, neither, nor or only;
    - ``facts``: how many facts there are.

    Words match case-insensitively and exactly: no stemming, so "American" does not cover "America"."""
    covered = {w.lower() for fact in facts for w in words(fact)}
    claim_words = words(claim)
    content = [w for w in claim_words if w.lower() not in STOPWORDS]
    names = [w for i, w in enumerate(claim_words) if (i > 0 and w[0].isupper()) or any(ch.isdigit() for ch in w)]
    missing = [w for w in content if w.lower() not in covered]
    missing_names = [w for w in names if w.lower() not in covered]
    return [
        len(missing) / max(1, len(content)),
        float(len(missing)),
        float(len(missing_names)),
        len(missing_names) / max(1, len(names)),
        float(any(w.lower() in NEGATIONS for w in claim_words)),
        float(len(facts)),
    ]


def logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def combine(prob_reader: float, lexical_log_odds: float, prior_log_odds: float) -> float:
    """P(SUPPORTED) of two experts that each saw the same training prior: the reader's log-odds
    plus the lexical model's, less the prior's log-odds, which both have counted."""
    return 1 / (1 + math.exp(-(logit(prob_reader) + lexical_log_odds - prior_log_odds)))


@dataclass(frozen=True)
class LexicalCoverage:
    """An L2-regularised logistic regression over standardised :func:`coverage_features`."""

    weights: tuple[float, ...]
    bias: float
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    prior_log_odds: float  # log(SUPPORTED / NOT_SUPPORTED) among the examples it was fitted on
    examples: int

    @classmethod
    def fit(cls, claims: Sequence[str], facts: Sequence[Sequence[str]], supported: Sequence[bool], l2: float = 1.0, iterations: int = 50) -> LexicalCoverage:
        """Fitted by Newton's method on ``claims`` with their ``facts``; ``supported``: each
        claim's label. ``l2`` penalises the weights (not the bias) of the standardised features."""
        if not claims:
            raise ValueError("the lexical coverage model needs training examples")
        y = np.asarray(supported, dtype=np.float64)
        positives = float(y.sum())
        if positives in (0.0, float(len(y))):
            raise ValueError("the lexical coverage model needs both SUPPORTED and NOT_SUPPORTED examples")
        raw = np.array([coverage_features(c, f) for c, f in zip(claims, facts, strict=True)], dtype=np.float64)
        fitted = fit_logistic(raw, y, l2, iterations)
        return cls(fitted.weights, fitted.bias, fitted.mean, fitted.scale, math.log(positives / (len(y) - positives)), len(y))

    def log_odds(self, claim: str, facts: Sequence[str]) -> float:
        """Log-odds of SUPPORTED from ``claim``'s words against ``facts``."""
        return float(StandardisedLogistic(self.weights, self.bias, self.mean, self.scale).log_odds(np.asarray([coverage_features(claim, facts)]))[0])

    def prob_supported(self, claim: str, facts: Sequence[str], prob_reader: float) -> float:
        """The reader's ``prob_reader`` combined with this model's odds (:func:`combine`)."""
        return combine(prob_reader, self.log_odds(claim, facts), self.prior_log_odds)

    def summary(self) -> dict:
        """What it learned, for a training record: each feature's weight (on the standardised
        feature), the bias, the prior and how many examples it was fitted on."""
        return {"weights": dict(zip(FEATURES, self.weights, strict=True)), "bias": self.bias, "prior_log_odds": self.prior_log_odds, "examples": self.examples}

    def save(self, directory: Path | str) -> Path:
        path = Path(directory) / LEXICAL_FILE
        path.write_text(json.dumps({"features": list(FEATURES), **{k: getattr(self, k) for k in self.__dataclass_fields__}}, indent=2))
        return path

    @classmethod
    def load(cls, directory: Path | str) -> LexicalCoverage | None:
        """The model saved in ``directory``, or None when there is none."""
        path = Path(directory) / LEXICAL_FILE
        if not path.exists():
            return None
        raw = json.loads(path.read_text())
        if raw.get("features") != list(FEATURES):
            raise ValueError(f"{path} was fitted on features {raw.get('features')}, this version computes {list(FEATURES)}: retrain the reader")
        return cls(tuple(raw["weights"]), raw["bias"], tuple(raw["mean"]), tuple(raw["scale"]), raw["prior_log_odds"], raw["examples"])


def training_stats(expert: LexicalCoverage | None) -> dict:
    """A trained reader's record of its second expert: ``{"lexical_coverage": summary}``, or
    nothing for a reader trained without one."""
    return {"lexical_coverage": expert.summary()} if expert is not None else {}
