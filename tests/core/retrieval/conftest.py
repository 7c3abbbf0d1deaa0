"""A FLIPR model on the shipped MiniLM, loaded once for the retrieval tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def flipr():
    from baleen_core.config import RetrieverConfig
    from baleen_core.retrieval import Flipr

    # the reference's 64 claim positions, of which FLIPR counts 32: claim-side focusing is exercised
    return Flipr.load(RetrieverConfig(device="cpu", query_maxlen=64, context_maxlen=24))


@pytest.fixture(scope="session")
def passages() -> list[tuple[str, str]]:
    """Six tiny (title, text) passages of a made-up world."""
    return PASSAGES


PASSAGES = [
    ("Kelda Marrow", "Kelda Marrow is an Australian actress and producer. She starred in Glass Harbour."),
    ("Glass Harbour", "Glass Harbour is a 2014 thriller film directed by Oren Vask."),
    ("Oren Vask", "Oren Vask is a Danish director. He was born in Aarhus."),
    ("Aarhus", "Aarhus is the second-largest city in Denmark."),
    ("Tin Lanterns", "Tin Lanterns are an indie rock band from Leeds. Their debut album sold well."),
    ("Leeds", "Leeds is a city in West Yorkshire, England."),
]
