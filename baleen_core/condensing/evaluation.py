"""How well the condensers and the reader do when retrieval is (nearly) perfect.

Given a claim's gold passages (all their sentences), optionally mixed with distractor passages,
and no context, stage 1 ranks the sentences, stage 2 reads the best ``top_facts`` and the
evidence rule picks the final facts (the engine's last hop: at least 2, from at most 4 passages);
they are compared with the gold facts (HoVer's sentence precision/recall/F1/EM).
``all_sentences_f1`` is the baseline of keeping every sentence given, which shows how much there
was to filter. The reader then labels the claim twice: from the gold facts and from the final
facts. This isolates the condensers and the reader from the retriever; the full multi-hop
evaluation is the engine's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from baleen_core.condensing.condense import condense_hop, read_verdicts, reader_facts
from baleen_core.condensing.layouts import PassageSentences
from baleen_core.condensing.models import READER_LABELS, SequenceModel
from baleen_core.config import CondenserConfig, ReaderConfig
from baleen_core.metrics import set_prf


@dataclass(frozen=True)
class GoldClaim:
    uid: str
    claim: str
    label: str | None
    num_hops: int
    passages: tuple[PassageSentences, ...]  # the gold passages, every sentence
    gold: frozenset[tuple[int, int]]  # gold (pid, sid)


def evaluate_on_gold_passages(
    stage1: SequenceModel, stage2: SequenceModel, reader: SequenceModel | None, claims: Sequence[GoldClaim], condenser: CondenserConfig, reader_config: ReaderConfig
) -> list[dict]:
    """One row per claim: stage-1 recall of gold facts in its top ``top_facts``, the final facts'
    sentence P/R/F1/EM, and the reader's P(SUPPORTED) from gold and from final facts."""
    hops = condense_hop(stage1, stage2, [c.claim for c in claims], [[] for _ in claims], [c.passages for c in claims], condenser)
    candidates = [h.candidates for h in hops]
    final = [[s for s, _ in h.evidence] for h in hops]
    rows = []
    for claim, cands, facts in zip(claims, candidates, final, strict=True):
        sentence = set_prf((s.key for s in facts), claim.gold)
        everything = set_prf((s.key for p in claim.passages for s in p.sentences), claim.gold)
        rows.append(
            {
                "uid": claim.uid,
                "num_hops": claim.num_hops,
                "label": claim.label,
                "stage1_recall": len({s.key for s in cands} & claim.gold) / len(claim.gold),
                "final_facts": len(facts),
                "sentence_precision": sentence.precision,
                "sentence_recall": sentence.recall,
                "sentence_f1": sentence.f1,
                "sentence_em": sentence.em,
                "all_sentences_f1": everything.f1,
            }
        )
    if reader is not None:
        gold_facts = [[s.fact for p in c.passages for s in p.sentences if s.key in c.gold] for c in claims]
        from_gold = read_verdicts(reader, [c.claim for c in claims], gold_facts, reader_config)
        read = [reader_facts(h.evidence, h.scored, reader_config.last_read_facts) for h in hops]
        from_final = read_verdicts(reader, [c.claim for c in claims], [[s.fact for s, _ in facts] for facts in read], reader_config)
        for row, p_gold, p_final in zip(rows, from_gold, from_final, strict=True):
            truth = row["label"]
            row["reader_correct_gold"] = float((p_gold > 0.5) == (truth == READER_LABELS[1])) if truth in READER_LABELS else None
            row["reader_correct_final"] = float((p_final > 0.5) == (truth == READER_LABELS[1])) if truth in READER_LABELS else None
    return rows
