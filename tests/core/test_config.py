"""Config files: every problem names the file, the line or key, and the closest valid key."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from baleen_core.config import BaleenConfig, ConfigError, SearchConfig, demo_preset

BENCHMARK_CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "configs"


def _load_error(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        BaleenConfig.load(path)
    return str(err.value)


def test_unknown_keys_name_the_file_the_key_and_the_closest_valid_one(tmp_path):
    message = _load_error(tmp_path, "run.yaml", "corpus:\n  batch_passage: 3\ntraining:\n  stage2: {epoch: 2}\n")
    assert f"{tmp_path / 'run.yaml'}: corpus.batch_passage: unknown key (did you mean 'batch_passages'?)" in message
    assert "training.stage2.epoch: unknown key (did you mean 'epochs'?)" in message


def test_an_unknown_key_with_nothing_close_lists_the_valid_ones(tmp_path):
    message = _load_error(tmp_path, "run.yaml", "labels: {zzz: 1}\n")
    assert "labels.zzz: unknown key (valid keys: rounds," in message


def test_bad_values_and_bad_syntax_say_where(tmp_path):
    assert "run.yaml: labels.rounds: Input should be greater than or equal to 1" in _load_error(tmp_path, "run.yaml", "labels: {rounds: 0}\n")
    assert "bad.yaml: not valid YAML at line 3, column 2" in _load_error(tmp_path, "bad.yaml", "corpus:\n  - a\n b: [\n")
    assert "bad.json: not valid JSON at line 1, column 2" in _load_error(tmp_path, "bad.json", "{x}")
    assert "the top level must be a mapping" in _load_error(tmp_path, "list.yaml", "- 1\n")
    assert "does not exist" in str(pytest.raises(ConfigError, BaleenConfig.load, tmp_path / "missing.yaml").value)


def test_an_empty_file_means_the_defaults(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert BaleenConfig.load(path) == BaleenConfig()


def _merged(base: dict, changes: dict) -> dict:
    """``base`` with ``changes`` written over it, nested mappings merged key by key."""
    return {**base, **{key: _merged(base[key], value) if isinstance(value, dict) else value for key, value in changes.items()}}


def test_the_demo_budget_diagnostic_is_the_demo_preset_with_only_its_stated_changes():
    # the file restates the preset (a config file cannot say "the preset, plus"): if the preset
    # moves, this fails until the file follows, so the diagnostic keeps measuring the demo's design
    diagnostic = BaleenConfig.load(BENCHMARK_CONFIGS / "demo-tuning-full-budget.yaml")
    every_example = {"max_examples": None, "epochs": 3}
    changes = {"demo": {"seed": 7}, "training": {"flipr": {"epochs": 2}, "stage1": every_example, "stage2": every_example, "reader": every_example}}
    assert diagnostic == BaleenConfig.model_validate(_merged(demo_preset().model_dump(), changes))


def test_flipr_alone_runs_beside_a_fused_full_system_and_only_there(tmp_path):
    assert "flipr-alone" not in BaleenConfig().evaluation.systems and BaleenConfig().evaluated_systems() == BaleenConfig().evaluation.systems
    fused = tmp_path / "fused.yaml"
    fused.write_text("search: {fusion: bm25}\nevaluation: {systems: [baleen, bm25-multihop]}\n")
    assert BaleenConfig.load(fused).evaluated_systems() == ["baleen", "bm25-multihop", "flipr-alone"]
    fused.write_text("search: {fusion: bm25}\nevaluation: {systems: [bm25-multihop, flipr-alone, baleen]}\n")
    assert BaleenConfig.load(fused).evaluated_systems() == ["bm25-multihop", "flipr-alone", "baleen"]  # listed: kept where it is, once
    fused.write_text("search: {fusion: bm25}\nevaluation: {systems: [single-hop]}\n")
    assert BaleenConfig.load(fused).evaluated_systems() == ["single-hop"]  # no fused full system to stand beside
    plain = tmp_path / "plain.yaml"
    plain.write_text("evaluation: {systems: [baleen, flipr-alone]}\n")
    with pytest.raises(ConfigError, match="flipr-alone differs from baleen only under a search.fusion other than none"):
        BaleenConfig.load(plain)
    fused.write_text("search: {fusion: bm25-first-hop}\nevaluation: {systems: [baleen]}\n")
    assert BaleenConfig.load(fused).evaluated_systems() == ["baleen", "flipr-alone"]


def test_stage2_starts_from_one_place(tmp_path):
    assert BaleenConfig().training.stage2.start == "backbone"
    assert _load_error(tmp_path, "both.yaml", "condenser: {stage2_checkpoint: /tmp/s2}\ntraining: {stage2: {start: stage1}}\n").count("keep one") == 1
    alone = tmp_path / "alone.yaml"
    alone.write_text("training: {stage2: {start: stage1}}\n")
    assert BaleenConfig.load(alone).training.stage2.start == "stage1"


def test_the_reader_starts_from_stage2_only_on_the_condensers_backbone_and_without_a_checkpoint(tmp_path):
    assert BaleenConfig().training.reader.start == "backbone"
    assert _load_error(tmp_path, "both.yaml", "reader: {checkpoint: /tmp/r}\ntraining: {reader: {start: stage2}}\n").count("keep one") == 1
    assert "needs the reader and the condensers on one backbone" in _load_error(tmp_path, "two.yaml", "reader: {backbone: /tmp/bert-base}\ntraining: {reader: {start: stage2}}\n")
    alone = tmp_path / "alone.yaml"
    alone.write_text("reader: {backbone: /tmp/bert-base}\ncondenser: {backbone: /tmp/bert-base}\ntraining: {reader: {start: stage2}}\n")
    assert BaleenConfig.load(alone).training.reader.start == "stage2"
    alone.write_text("reader: {checkpoint: /tmp/r}\n")  # a saved reader alone is fine: it starts from the backbone setting
    assert BaleenConfig.load(alone).training.reader.start == "backbone"


def test_evidence_floors_load_from_yaml_write_json_safe_and_read_back(tmp_path):
    path = tmp_path / "floors.yaml"
    path.write_text("condenser: {evidence_floors: {2: .inf, 3: -1, 4: -.inf}}\n")
    config = BaleenConfig.load(path)
    assert config.condenser.evidence_floors == {2: math.inf, 3: -1.0, 4: -math.inf}
    assert [config.condenser.evidence_floor(h) for h in (2, 3, 4, 5)] == [math.inf, -1.0, -math.inf, 0.0]  # 0: the reference's
    # JSON has no infinity: a manifest holds "inf" / "-inf", and the config reads them back
    dumped = config.condenser.model_dump(mode="json")["evidence_floors"]
    assert json.loads(json.dumps(dumped, allow_nan=False)) == {"2": "inf", "3": -1.0, "4": "-inf"}
    assert BaleenConfig().with_evidence_floors(dumped).condenser.evidence_floors == config.condenser.evidence_floors
    assert json.dumps(BaleenConfig().training.calibration.model_dump(mode="json"), allow_nan=False)  # the grid's ends too
    assert "not NaN" in _load_error(tmp_path, "nan.yaml", "condenser: {evidence_floors: {2: .nan}}\n")


def test_the_label_rounds_fuse_only_when_fusion_in_label_rounds_says_so(tmp_path):
    path = tmp_path / "baleen.yaml"
    path.write_text("search: {fusion: bm25}\n")
    assert BaleenConfig.load(path).search.for_label_rounds().fusion == "bm25"  # as measured first: the condensers train on the fused lists
    path.write_text("search: {fusion: bm25, fusion_in_label_rounds: false, nprobe: 6}\n")
    search = BaleenConfig.load(path).search
    labelling = search.for_label_rounds()
    assert labelling.fusion == "none" and labelling.nprobe == 6 and search.fusion == "bm25"  # the engine still fuses
    # the label rounds' settings then are FLIPR alone's, bit for bit: their labels are reused from a FLIPR-alone run
    assert labelling.model_dump(exclude={"fusion_in_label_rounds"}) == SearchConfig(nprobe=6).for_label_rounds().model_dump(exclude={"fusion_in_label_rounds"})


def test_fusion_by_hop_count_is_the_engines_and_needs_a_fusion_outside_the_label_rounds(tmp_path):
    path = tmp_path / "baleen.yaml"
    path.write_text("search: {fusion: bm25, fusion_in_label_rounds: false, fusion_hop_counts: [4, 3, 4]}\n")
    search = BaleenConfig.load(path).search
    assert search.fusion_hop_counts == (3, 4)
    labelling = search.for_label_rounds()
    assert labelling.fusion == "none" and labelling.fusion_hop_counts is None
    for text, said in (
        ("{fusion: bm25, fusion_hop_counts: [4]}", "fusion_in_label_rounds to false"),
        ("{fusion_in_label_rounds: false, fusion_hop_counts: [4]}", "other than none"),
        ("{fusion: bm25, fusion_in_label_rounds: false, fusion_hop_counts: [0]}", "at least 1"),
        ("{fusion: bm25, fusion_in_label_rounds: false, fusion_hop_counts: []}", "at least 1"),
    ):
        path.write_text(f"search: {text}\n")
        with pytest.raises(ConfigError, match=said):
            BaleenConfig.load(path)


def test_bm25_negatives_mix_only_the_condensers_flipr_label_round():
    from baleen_core.config import LabelConfig

    assert not LabelConfig().mixes_bm25_negatives(2, "flipr")  # off by default
    mixed = LabelConfig(rounds=2, bm25_negatives=True)
    assert [mixed.mixes_bm25_negatives(r, "flipr") for r in (0, 1, 2)] == [False, False, True]  # FLIPR's own rounds keep FLIPR's negatives
    last = LabelConfig(rounds=1, relabel_for_condensers=False, bm25_negatives=True)  # the condensers train on round 0's labels
    assert last.mixes_bm25_negatives(0, "flipr") and not last.mixes_bm25_negatives(0, "bm25")  # BM25's labels are BM25's already


def test_the_first_hop_k_is_the_engines_and_never_a_label_rounds(tmp_path):
    path = tmp_path / "baleen.yaml"
    path.write_text("search: {k_claim_first_hop: 8, nprobe: 6}\n")
    search = BaleenConfig.load(path).search
    assert search.k_claim_first_hop == 8
    labelling = search.for_label_rounds()
    assert labelling.k_claim_first_hop is None and labelling.nprobe == 6 and search.k_claim_first_hop == 8
    path.write_text("search: {k_claim_first_hop: 0}\n")
    with pytest.raises(ConfigError, match="k_claim_first_hop"):
        BaleenConfig.load(path)


def test_the_calibration_runs_stage_2s_grid_then_the_rankers_and_only_the_given_threshold_when_off():
    calibration = BaleenConfig().training.calibration.model_copy(update={"thresholds": [1.0, 0.0], "ranker_thresholds": [-1.0]})
    assert calibration.context_grids(0.5) == ([1.0, 0.0], [-1.0])
    assert calibration.model_copy(update={"enabled": False}).context_grids(0.5) == ([0.5], [0.5])


def test_the_evidence_ranker_and_its_context_are_on_and_turning_the_ranker_off_turns_off_both(tmp_path):
    calibration = BaleenConfig().training.calibration
    assert calibration.evidence_ranker and calibration.evidence_ranker_context
    path = tmp_path / "baleen.yaml"
    path.write_text("training: {calibration: {evidence_ranker: false}}\n")
    off = BaleenConfig.load(path).training.calibration
    assert not off.evidence_ranker and not off.evidence_ranker_context
    path.write_text("training: {calibration: {evidence_ranker_context: false}}\n")
    alone = BaleenConfig.load(path).training.calibration
    assert alone.evidence_ranker and not alone.evidence_ranker_context
    # asking for the context without the ranker it reads is an error, not a silent off
    path.write_text("training: {calibration: {evidence_ranker: false, evidence_ranker_context: true}}\n")
    with pytest.raises(ConfigError, match="evidence_ranker_context needs"):
        BaleenConfig.load(path)
