"""Fixtures of the flow tests: a tiny demo world (118 passages, 42 claims) written to a temp dir."""

from __future__ import annotations

import pytest

from baleen_core.config import DemoConfig
from baleen_core.demo_world import write_demo_world

TINY = DemoConfig(n_people=40, n_films=20, n_bands=10, n_companies=10, n_cities=12, n_countries=5, n_universities=6,
                  n_distractors=15, n_train_claims=30, n_dev_claims=12)


@pytest.fixture
def tiny_world(tmp_path):
    """Upstream files of the tiny world, in hover-mini layout."""
    return write_demo_world(tmp_path / "demo", TINY)
