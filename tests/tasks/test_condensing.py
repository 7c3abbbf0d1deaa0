"""Which condenser settings retrain which model (tasks/condensing.py fingerprints)."""

from __future__ import annotations

from baleen_core.config import CondenserConfig
from baleen_tasks.condensing import training_layout


def test_the_keeping_rules_retrain_no_model_and_input_layouts_retrain_every_one():
    """The threshold, min_kept and the evidence sizes decide which facts the engine keeps: no
    model's training examples depend on them directly (the reader's do through the engine run it
    reads, whose fingerprint holds them); the input layouts shape every model's examples."""
    default = CondenserConfig()
    keeping = default.model_copy(update={"min_kept": 1, "stage2_threshold": -1.0, "evidence_min_facts": 3, "evidence_max_passages": 2})
    assert training_layout(keeping) == training_layout(default)
    longer_query = default.model_copy(update={"query_maxlen": default.query_maxlen + 32})
    assert training_layout(longer_query) != training_layout(default)
    inference_only = default.model_copy(update={"device": "cpu", "batch_size": 4, "stage1_cpu_precision": "bfloat16", "stage2_cpu_precision": "bfloat16"})
    assert training_layout(inference_only) == training_layout(default)
