"""Fixtures of the flow tests: a tiny demo world (118 passages, 42 claims) written to a temp dir,
and the whole pipeline run once per session on it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from baleen_core.demo_world import write_demo_world
from baleen_storage import ArtifactRef, ArtifactStore
from helpers import TINY, kill_when, published, start_cli

#: Small budgets that still train: two label rounds (round 0 with the untrained FLIPR), two epochs
#: each, so the loss can fall and a run killed after FLIPR's first epoch has one left to resume;
#: a retrieval depth of 12 per claim (6 / 4 / 3 passages per hop for 2 / 3 / 4 hops) keeps the
#: evaluation of five systems quick; two hard-negative passages per hop for the condensers (8 by
#: default; nine windows per stage-1 example made the condensers about half the fixture's
#: training time); the reader's rewrites (off by default) run end to end too.
PIPELINE_CONFIG = (
    "retriever: {device: cpu}\nindex: {batch_size: 16}\nlabels: {rounds: 2, round0: flipr, depth: 50}\n"
    "training: {flipr: {epochs: 2, batch_size: 8}, stage1: {epochs: 2, max_examples: 40, negative_passages: 2},"
    " stage2: {epochs: 2, max_examples: 40, negative_passages: 2},"
    " reader: {epochs: 2, batch_size: 8, max_examples: 20, augment: [swap, drop, shuffle]}}\n"
    "evaluation: {depth: 12, worst_claims: 2, bootstrap: 200}\n"
)


@pytest.fixture
def tiny_world(tmp_path):
    """Upstream files of the tiny world, in hover-mini layout."""
    return write_demo_world(tmp_path / "demo", TINY)


@dataclass
class KilledTraining:
    """What a training run left behind when it was SIGKILLed after FLIPR's first epoch."""

    published: dict[str, dict[str, str]]  # artifact name → producer → run id
    epoch0_steps: list[dict]  # the first epoch's step records, from its checkpoint


@dataclass
class PipelineWorld:
    store: ArtifactStore
    config: str
    refs: dict[str, ArtifactRef]
    killed: KilledTraining


@pytest.fixture(scope="session")
def pipeline_world(prefect_server, tmp_path_factory) -> PipelineWorld:
    """The whole pipeline on the tiny world, once per session (training and evaluating take
    minutes), and the hard way: ingest and index; then `baleen train` in its own process,
    SIGKILLed as soon as FLIPR's first epoch is checkpointed; then the pipeline flow, which
    must reuse and resume all of that. tests/flows/test_faults.py checks that it did."""
    from baleen_flows.index import index_flow
    from baleen_flows.ingest import ingest_flow
    from baleen_flows.pipeline import pipeline_flow

    tmp = tmp_path_factory.mktemp("pipeline")
    world = write_demo_world(tmp / "demo", TINY)
    store = ArtifactStore(tmp / "store")
    config = tmp / "config.yaml"  # names its store: no test depends on $BALEEN_STORE
    config.write_text(f"store_root: {store.root}\n{PIPELINE_CONFIG}")
    ingest_flow(str(world), str(config))
    index_flow(str(config))

    log = tmp / "killed-training.log"
    first_epoch = lambda: next(iter(store.root.glob("work/flipr-*/epoch-000/trainer_state.pt")), None)  # noqa: E731
    kill_when(start_cli(["train", "--config", str(config)], store.root, log), lambda: first_epoch() is not None, log)
    killed = KilledTraining(
        published={name: published(store.root, name) for name in ("hop_labels", "flipr_checkpoint")},
        epoch0_steps=json.loads((Path(first_epoch()).parent / "steps.json").read_text()),
    )
    return PipelineWorld(store, str(config), pipeline_flow(str(world), str(config)), killed)
