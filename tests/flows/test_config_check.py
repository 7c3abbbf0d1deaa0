"""A deployment run given a bad config file (the UI's or a schedule's parameters) fails before any
task, under its input-named run name, with the one-line config error as its state message: not a
crash under a random name with the message at the bottom of a traceback."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("flow_name", ["evaluation_flow", "training_flow", "index_flow"])
def test_a_bad_config_fails_the_run_with_its_one_line_error_and_its_own_name(prefect_server, tmp_path, flow_name):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    import baleen_flows.evaluation
    import baleen_flows.index
    import baleen_flows.training

    flow = {f.fn.__name__: f for f in (baleen_flows.evaluation.evaluation_flow, baleen_flows.training.training_flow, baleen_flows.index.index_flow)}[flow_name]
    config = tmp_path / "nightly.yaml"
    config.write_text("evaluation:\n  splitt: dev\n")
    state = flow(config_path=str(config), return_state=True)

    assert state.is_failed() and not state.is_crashed(), state
    assert state.message == f"{config}: evaluation.splitt: unknown key (did you mean 'split'?)"
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))
    expected = {"evaluation_flow": "evaluation · newest claims · nightly", "training_flow": "training · newest claims · nightly", "index_flow": "index · untrained · newest passages"}
    assert run.name == expected[flow_name]
    assert tasks == [], "a task ran before the config was validated"
