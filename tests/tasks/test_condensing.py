"""Which condenser settings retrain which model (tasks/condensing.py fingerprints)."""

from __future__ import annotations

from baleen_core.config import CondenserConfig
from baleen_tasks.condensing import training_layout

MODELS = ("stage1", "stage2", "reader")


def test_the_keeping_rule_retrains_the_reader_only():
    """The threshold and min_kept decide which facts the engine keeps: the reader trains on those,
    the condensers' examples do not depend on them."""
    default = CondenserConfig()
    keeping = default.model_copy(update={"min_kept": 0, "stage2_threshold": -1.0})
    assert [training_layout(keeping, m) == training_layout(default, m) for m in MODELS] == [True, True, False]


def test_input_layouts_retrain_every_model_and_inference_settings_none():
    default = CondenserConfig()
    longer_query = default.model_copy(update={"query_maxlen": default.query_maxlen + 32})
    assert not any(training_layout(longer_query, m) == training_layout(default, m) for m in MODELS)
    inference_only = default.model_copy(update={"device": "cpu", "batch_size": 4, "stage1_cpu_precision": "bfloat16", "stage2_cpu_precision": "bfloat16"})
    assert all(training_layout(inference_only, m) == training_layout(default, m) for m in MODELS)
