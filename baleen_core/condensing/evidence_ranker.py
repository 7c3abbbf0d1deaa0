"""The evidence ranker: stage 2's last read re-scored with what the words say.

Stage 2 is a cross-encoder trained on about a thousand labelled hops, and it memorises them (its
training loss falls to 0.02 while its held-out loss stays near 0.28, docs/benchmarks.md). On the
held-out training claims it ranks a gold fact it was shown below a wrong one often enough that
the evidence loses a seventh of the gold passages of a 4-hop claim after retrieval found them.
Signals it does not weigh, or weighs badly on claims it never saw, are cheap to count: HoVer's
claims name most of their passages' titles, a bridge passage is named by another passage's fact,
and the retriever's rank says how well the whole passage matched.

:class:`HopRead` is what one hop of a claim read; :func:`read_features` turns each fact of it into
:data:`FEATURES`; :func:`fit_evidence_ranker` fits a logistic regression (gold fact or not) on the
engine's hops over the held-out training claims, every hop of them; :func:`evidence_scores` gives
its log-odds for the facts of a claim's last hop, which the evidence rule then cuts instead of
stage 2's scores (``condenser.evidence_ranker``; the engine, :mod:`baleen_core.engine`). The
context rule, and so every hop's retrieval, still reads stage 2's scores.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from baleen_core.condensing.layouts import Sentence
from baleen_core.condensing.lexical import STOPWORDS, words
from baleen_core.condensing.logistic import StandardisedLogistic, fit_logistic
from baleen_core.config import EvidenceRankerWeights

#: What each fact stage 2 read is described by, in this order (:func:`read_features`).
FEATURES = (
    "stage2_score",
    "stage2_rank",
    "stage1_score",
    "was_context",
    "title_in_claim",
    "title_words_in_claim",
    "title_in_other_facts",
    "claim_words_held",
    "claim_names_held",
    "retrieval_rank",
    "facts_of_passage",
    "hop",
    "last_hop",
)
#: The rank given to a fact's passage that the hop did not retrieve (a context fact from earlier).
NOT_RETRIEVED_RANK = 100
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)\s*$")


@dataclass(frozen=True)
class HopRead:
    """What stage 2 read at one hop of a claim, and what the hop knew of it."""

    hop: int
    last: bool  # the claim's last hop: its evidence is cut from this read
    candidates: tuple[Sentence, ...]  # context facts first, then the new ones
    stage2_scores: tuple[float, ...]
    stage1_scores: Mapping[tuple[int, int], float]  # the new facts' stage-1 scores; a fact without one was context
    retrieved: tuple[int, ...]  # the passages the condensers read at this hop, best first


def bare_title(title: str) -> str:
    """A title as a claim would name it: lower case, its trailing "(…)" dropped ("Foxes (soundtrack)" → "foxes")."""
    return _PARENTHETICAL.sub("", title).lower()


def content_words(text: str) -> set[str]:
    """The lower-cased words of ``text`` that are not function words."""
    return {w.lower() for w in words(text) if w.lower() not in STOPWORDS}


def claim_names(claim: str) -> set[str]:
    """The claim's names and numbers, lower-cased: words that start with a capital (its first word
    excepted) or hold a digit (as :func:`~baleen_core.condensing.lexical.coverage_features` counts them)."""
    return {w.lower() for i, w in enumerate(words(claim)) if (i > 0 and w[0].isupper()) or any(ch.isdigit() for ch in w)}


def read_features(claim: str, read: HopRead) -> np.ndarray:
    """One row of :data:`FEATURES` per fact of ``read``, in its order:

    - ``stage2_score``; ``stage2_rank``, how many facts of the read stage 2 scored higher;
    - ``stage1_score`` (0 for a context fact) and ``was_context``;
    - ``title_in_claim``: the fact's :func:`bare_title` occurs in the claim (case-insensitive);
      ``title_words_in_claim``: the share of the title's content words the claim holds;
    - ``title_in_other_facts``: the bare title occurs in a fact of another passage of the read (a bridge);
    - ``claim_words_held``, ``claim_names_held``: the share of the claim's content words, and of its
      names, that the fact ("title | sentence") holds;
    - ``retrieval_rank``: log(1 + the rank of its passage among the hop's retrieved passages),
      :data:`NOT_RETRIEVED_RANK` when the hop did not retrieve it;
    - ``facts_of_passage``: how many facts of the read come from its passage;
    - ``hop``, ``last_hop``."""
    lowered_claim = claim.lower()
    claim_content, names = content_words(claim), claim_names(claim)
    rank_of = {pid: i for i, pid in reversed(list(enumerate(read.retrieved)))}
    facts = [f"{s.title} {s.text}".lower() for s in read.candidates]
    rows = []
    for i, (sentence, score) in enumerate(zip(read.candidates, read.stage2_scores, strict=True)):
        title = bare_title(sentence.title)
        held = {w.lower() for w in words(f"{sentence.title} {sentence.text}")}
        others = " ".join(fact for fact, other in zip(facts, read.candidates, strict=True) if other.pid != sentence.pid)
        title_content = content_words(title)
        rows.append([
            score,
            float(sum(other > score for other in read.stage2_scores)),
            read.stage1_scores.get(sentence.key, 0.0),
            float(sentence.key not in read.stage1_scores),
            float(bool(title) and title in lowered_claim),
            len(title_content & claim_content) / max(1, len(title_content)),
            float(bool(title) and title in others),
            len(claim_content & held) / max(1, len(claim_content)),
            len(names & held) / max(1, len(names)),
            math.log1p(rank_of.get(sentence.pid, NOT_RETRIEVED_RANK)),
            float(sum(other.pid == sentence.pid for other in read.candidates)),
            float(read.hop),
            float(read.last),
        ])
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(FEATURES))


def fit_evidence_ranker(claims: Mapping[str, str], reads: Mapping[str, Sequence[HopRead]], gold: Mapping[str, Collection[tuple[int, int]]], l2: float = 1.0) -> EvidenceRankerWeights:
    """The ranker fitted on every hop of ``reads`` (uid → the claim's hops) of the claims with
    gold facts: each fact read is one example, gold or not. ``claims``: uid → claim text."""
    uids = sorted(uid for uid in reads if uid in gold and uid in claims)
    blocks = [(read_features(claims[uid], read), [float(s.key in gold[uid]) for s in read.candidates]) for uid in uids for read in reads[uid] if read.candidates]
    if not blocks:
        raise ValueError("the evidence ranker needs engine runs over claims with gold facts; none were given")
    raw = np.vstack([rows for rows, _ in blocks])
    y = np.concatenate([labels for _, labels in blocks])
    if y.min() == y.max():
        raise ValueError(f"the evidence ranker needs both gold and other facts among the {len(y)} facts read; all were {'gold' if y[0] else 'other'}")
    fitted = fit_logistic(raw, y, l2)
    return EvidenceRankerWeights(
        features=list(FEATURES), weights=list(fitted.weights), bias=fitted.bias, mean=list(fitted.mean), scale=list(fitted.scale), examples=len(y), claims=len(uids)
    )


def evidence_scores(ranker: EvidenceRankerWeights, claim: str, read: HopRead) -> list[float]:
    """The ranker's log-odds that each fact of ``read`` is gold, in its order."""
    if ranker.features != list(FEATURES):
        raise ValueError(f"this evidence ranker was fitted on features {ranker.features}, this version computes {list(FEATURES)}: retrain the reader")
    if not read.candidates:
        return []
    model = StandardisedLogistic(tuple(ranker.weights), ranker.bias, tuple(ranker.mean), tuple(ranker.scale))
    return [float(x) for x in model.log_odds(read_features(claim, read))]


def ranker_summary(ranker: EvidenceRankerWeights) -> dict:
    """What the ranker learned, for reports: each feature's weight (on the standardised feature)."""
    return {"weights": {name: round(w, 4) for name, w in zip(ranker.features, ranker.weights, strict=True)}, "bias": round(ranker.bias, 4), "examples": ranker.examples, "claims": ranker.claims}
