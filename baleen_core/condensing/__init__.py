"""Condenser stages 1 and 2 and the reader: models, input layouts, inference and evaluation."""

from baleen_core.condensing.condense import CondensedHop, ScoredSentence, Stage1Query, condense_hop, condense_stage1, condense_stage2, evidence_facts, kept_facts, read_verdicts, reader_facts, stage2_candidates
from baleen_core.condensing.layouts import PassageSentences, Sentence
from baleen_core.condensing.models import READER_LABELS, SequenceModel, cpu_has_native_bfloat16

__all__ = [
    "CondensedHop",
    "READER_LABELS",
    "PassageSentences",
    "ScoredSentence",
    "Sentence",
    "SequenceModel",
    "Stage1Query",
    "condense_hop",
    "condense_stage1",
    "condense_stage2",
    "cpu_has_native_bfloat16",
    "evidence_facts",
    "kept_facts",
    "read_verdicts",
    "reader_facts",
    "stage2_candidates",
]
