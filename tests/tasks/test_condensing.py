"""Which condenser settings retrain which model (tasks/condensing.py fingerprints)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from baleen_core.config import CondenserConfig, EvidenceRankerWeights, ReaderConfig, ReaderTrainingConfig, Stage2TrainingConfig
from baleen_schemas import STAGE2_CHECKPOINT
from baleen_storage import fingerprint
from baleen_tasks.condensing import reader_settings, reader_start, reader_training_params, stage2_fingerprint, stage2_params, training_layout

RANKER = EvidenceRankerWeights(features=["stage2_score"], weights=[1.0], bias=0.0, mean=[0.0], scale=[1.0], examples=1, claims=1)


def test_the_keeping_rules_retrain_no_model_and_input_layouts_retrain_every_one():
    """The threshold, min_kept, the evidence sizes, rule and ranker decide which facts the engine keeps: no
    model's training examples depend on them directly (the reader's do through the engine run it
    reads, whose fingerprint holds them); the input layouts shape every model's examples."""
    default = CondenserConfig()
    keeping = default.model_copy(
        update={"min_kept": 1, "stage2_threshold": -1.0, "evidence_min_facts": 3, "evidence_max_passages": 2, "evidence_floors": {3: -1.0}, "evidence_rule": "first-h-passages", "evidence_ranker": RANKER}
    )
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
        params={"round": 1, "training": {k: v for k, v in default.model_dump(mode="json").items() if k not in {"start", "cpu_precision"}}, "layout": training_layout(condenser)},
    )
    assert stage2_fingerprint("L", "S1", condenser, default, 1) == old
    assert stage2_fingerprint("L", "S1", condenser, from_stage1, 1) not in {old, stage2_fingerprint("L", "S1b", condenser, from_stage1, 1)}
    assert "start" in stage2_params(condenser, from_stage1, 1)["training"] and "start" not in stage2_params(condenser, default, 1)["training"]


def test_a_reader_from_stage2_is_a_reader_of_its_own_and_the_default_keeps_stores_readers():
    """``training.reader.start``: a reader started from stage 2 depends on that stage 2 (another
    stage 2, another reader); left at its default, the reader's start and settings are recorded as
    stores recorded them before the setting existed (the backbone; no ``start`` key)."""
    reader, default = ReaderConfig(), ReaderTrainingConfig()
    from_stage2 = default.model_copy(update={"start": "stage2"})
    stage2 = SimpleNamespace(fingerprint="S2")
    assert reader_start(reader, default, stage2) == (reader.resolved_backbone(), {})
    assert reader_start(reader.model_copy(update={"checkpoint": Path("/tmp/r")}), default, None) == ("/tmp/r", {})
    assert reader_start(reader, from_stage2, stage2) == ("stage2 encoder S2", {"stage2": "S2"})
    assert reader_start(reader, from_stage2, SimpleNamespace(fingerprint="S2b"))[0] != reader_start(reader, from_stage2, stage2)[0]
    with pytest.raises(ValueError, match="needs the trained stage 2"):
        reader_start(reader, from_stage2, None)
    assert reader_training_params(default) == {k: v for k, v in default.model_dump(mode="json").items() if k not in {"start", "cpu_precision", "contrast_margin"}}
    assert reader_training_params(from_stage2)["start"] == "stage2"
    assert "contrast_margin" not in reader_training_params(default)  # stores' readers keep their fingerprints
    assert reader_training_params(default.model_copy(update={"contrast_margin": 1.0}))["contrast_margin"] == 1.0


def test_a_model_trained_in_bf16_is_a_model_of_its_own_and_float32_keeps_stores_models():
    """``training.*.cpu_precision``: bf16 steps make another model, never reused for a float32 one;
    at its default (float32) the fingerprint is what stores recorded before the setting existed."""
    from baleen_core.config import OPTIMIZER_FIELDS_ADDED_LATER, OptimizerConfig

    assert set(OPTIMIZER_FIELDS_ADDED_LATER) <= set(OptimizerConfig.model_fields)
    condenser, default = CondenserConfig(), Stage2TrainingConfig()
    bf16 = default.model_copy(update={"cpu_precision": "bfloat16"})
    assert "cpu_precision" not in stage2_params(condenser, default, 1)["training"]
    assert stage2_params(condenser, bf16, 1)["training"]["cpu_precision"] == "bfloat16"
    assert stage2_fingerprint("L", "S1", condenser, bf16, 1) != stage2_fingerprint("L", "S1", condenser, default, 1)


def test_the_engine_runs_with_the_readers_evidence_rule_and_old_runs_keep_their_settings():
    """``trained_config``: the evaluation and ``baleen verify`` read facts cut as the reader's were,
    whatever the configuration says; ``engine_settings`` leaves the L3x rule out, as engine runs
    recorded it before the setting existed."""
    from datetime import datetime, timezone

    from baleen_core.config import BaleenConfig
    from baleen_storage import ArtifactRef, Manifest
    from baleen_tasks.evaluation import engine_settings, trained_config

    def reader(params: dict) -> dict:
        manifest = Manifest(
            name="reader_checkpoint", producer="reader-r1", run_id="r", schema_version=1, rows=0, files=[], bytes=0, fingerprint="f",
            params=params, created_at=datetime.now(timezone.utc), code_version="test",
        )
        return {"reader": ArtifactRef(path=Path("."), manifest=manifest)}

    asked = BaleenConfig().model_copy(update={"condenser": CondenserConfig(evidence_rule="first-h-passages")})
    assert trained_config(asked, reader({"context_threshold": 1.0})).condenser.evidence_rule == "l3x"  # a reader from before the rule
    by_hops = trained_config(BaleenConfig(), reader({"context_threshold": 1.0, "evidence_rule": "first-h-passages"}))
    assert by_hops.condenser.evidence_rule == "first-h-passages" and by_hops.condenser.stage2_threshold == 1.0
    assert trained_config(asked, {}).condenser.evidence_rule == "first-h-passages"  # no reader: as configured
    assert "evidence_rule" not in engine_settings(BaleenConfig()) and engine_settings(by_hops)["evidence_rule"] == "first-h-passages"
    # the reader reads what it was trained on: the best 9 of the last read, or (no key) the evidence, whatever is asked
    wide = BaleenConfig().with_reader_last_read_facts(7)
    assert trained_config(BaleenConfig(), reader({"reader": {"last_read_facts": 9}})).reader.last_read_facts == 9
    assert trained_config(wide, reader({"reader": {"scoring": "alignment"}})).reader.last_read_facts is None
    assert trained_config(wide, {}).reader.last_read_facts == 7


def test_a_reader_reading_the_last_read_is_a_reader_of_its_own_and_the_default_keeps_stores_readers():
    """``reader.last_read_facts`` and ``reader.lexical_coverage``: unset, the reader's and the
    engine runs' recorded settings are what stores recorded before they existed; set, another
    reader and other runs."""
    default = ReaderConfig()
    assert reader_settings(default) == default.model_dump(mode="json", exclude={"device", "batch_size", "checkpoint", "last_read_facts", "lexical_coverage"})
    assert reader_settings(default.model_copy(update={"last_read_facts": 9}))["last_read_facts"] == 9
    assert reader_settings(default.model_copy(update={"lexical_coverage": True}))["lexical_coverage"] is True
    assert reader_settings(default.model_copy(update={"device": "cpu", "batch_size": 4})) == reader_settings(default)
