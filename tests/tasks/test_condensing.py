"""Which condenser settings retrain which model (tasks/condensing.py fingerprints)."""

from __future__ import annotations

from baleen_core.config import CondenserConfig, Stage2TrainingConfig
from baleen_schemas import STAGE2_CHECKPOINT
from baleen_storage import fingerprint
from baleen_tasks.condensing import stage2_fingerprint, stage2_params, training_layout


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


def test_stage2_from_stage1_is_a_stage2_of_its_own_and_the_default_keeps_stores_stage2():
    """``training.stage2.start``: a stage 2 started from stage 1 is never reused for one started from
    the backbone, or for one started from another stage 1; left at its default it leaves the
    fingerprint as stores recorded it before the setting existed (no ``start`` key)."""
    condenser, default = CondenserConfig(), Stage2TrainingConfig()
    from_stage1 = default.model_copy(update={"start": "stage1"})
    old = fingerprint(
        step="train_stage2", labels="L", stage1="S1", start=condenser.start("stage2"), version=STAGE2_CHECKPOINT.version,
        params={"round": 1, "training": {k: v for k, v in default.model_dump(mode="json").items() if k != "start"}, "layout": training_layout(condenser)},
    )
    assert stage2_fingerprint("L", "S1", condenser, default, 1) == old
    assert stage2_fingerprint("L", "S1", condenser, from_stage1, 1) not in {old, stage2_fingerprint("L", "S1b", condenser, from_stage1, 1)}
    assert "start" in stage2_params(condenser, from_stage1, 1)["training"] and "start" not in stage2_params(condenser, default, 1)["training"]
