"""Condenser-stage and reader models on the shipped MiniLM, plus a tiny made-up world."""

from __future__ import annotations

import pytest

from helpers import passage


@pytest.fixture(scope="session")
def backbone() -> str:
    from baleen_core.config import default_backbone

    return default_backbone()


@pytest.fixture(scope="session")
def stage1(backbone):
    from baleen_core.condensing import SequenceModel

    return SequenceModel.load("stage1", backbone, "cpu")


@pytest.fixture(scope="session")
def film():
    return passage(1, "Glass Harbour", "Glass Harbour is a 2014 thriller film.", "It was directed by Oren Vask.", "It stars Kelda Marrow.")
