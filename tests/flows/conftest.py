"""Fixtures of the flow tests: a tiny demo world (118 passages, 42 claims) written to a temp dir."""

from __future__ import annotations

import pytest

from baleen_core.demo_world import write_demo_world
from helpers import TINY


@pytest.fixture
def tiny_world(tmp_path):
    """Upstream files of the tiny world, in hover-mini layout."""
    return write_demo_world(tmp_path / "demo", TINY)
