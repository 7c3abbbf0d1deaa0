"""Flow run names read like their inputs in the Prefect UI."""

from __future__ import annotations

from types import SimpleNamespace

from baleen_flows import run_names


def _with_parameters(monkeypatch, **parameters):
    monkeypatch.setattr(run_names, "flow_run", SimpleNamespace(parameters=parameters))


def test_training_and_evaluation_runs_are_named_after_their_inputs(monkeypatch, tmp_path):
    config = tmp_path / "demo-config.yaml"
    config.write_text("evaluation:\n  split: train\n")
    _with_parameters(monkeypatch, config_path=str(config), claims_run="20261123T120000Z-abcdef")
    assert run_names.training_run_name() == "training · claims 20261123T120000Z-abcdef · demo-config"
    assert run_names.evaluation_run_name() == "evaluation · train · claims 20261123T120000Z-abcdef · demo-config"
    _with_parameters(monkeypatch, config_path=None, claims_run=None)
    assert run_names.training_run_name() == "training · newest claims · default config"
    assert run_names.evaluation_run_name() == "evaluation · dev · newest claims · default config"
