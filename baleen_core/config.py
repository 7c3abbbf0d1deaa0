"""Typed configuration, in one place.

A run is described by a :class:`BaleenConfig`: where the store is, which dataset to ingest and how.
It loads from YAML/JSON (``baleen --config run.yaml``) and every field has a safe default, so the
embedded demo needs no file at all. Later stages (index, training, evaluation) add their sections
here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from baleen_core.runtime import baleen_home

SourceKind = Literal["abstracts", "beir"]
SplitterName = Literal["blingfire", "pysbd"]

#: File names of HoVer releases, by split, that ``DatasetConfig.discover`` recognises.
_CLAIM_FILE_PATTERNS = {
    "train": ("claims_train.json", "hover_train_release_v1.1.json"),
    "dev": ("claims_dev.json", "hover_dev_release_v1.1.json"),
    "test": ("claims_test.json", "hover_test_release_v1.1.json"),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CorpusSource(_Strict):
    """One corpus input: a HotpotQA abstracts tree (pre-split) or a BEIR corpus file (raw text)."""

    kind: SourceKind
    path: Path
    name: str | None = Field(default=None, description="Label in passages.source; defaults to the kind.")

    @property
    def label(self) -> str:
        return self.name or self.kind


class DatasetConfig(_Strict):
    """The upstream files of one dataset. Sources are merged in the order listed: when a title
    occurs twice, the first source wins (HoVer's sentence ids are defined by the abstracts split,
    so list abstracts trees before BEIR files)."""

    name: str = "dataset"
    sources: list[CorpusSource]
    claims: dict[Literal["train", "dev", "test"], Path] = Field(default_factory=dict)

    @classmethod
    def discover(cls, root: Path | str, name: str | None = None) -> DatasetConfig:
        """Find the upstream files in a directory laid out like hover-mini (or the HoVer release):
        ``wiki/`` (abstracts tree), ``*.jsonl[.gz]`` (BEIR corpora), ``claims_<split>.json``."""
        root = Path(root).expanduser().resolve()
        if not root.is_dir():
            raise FileNotFoundError(f"dataset directory {root} does not exist")
        sources: list[CorpusSource] = []
        if (root / "wiki").is_dir():
            sources.append(CorpusSource(kind="abstracts", path=root / "wiki"))
        for beir in sorted(list(root.glob("*.jsonl")) + list(root.glob("*.jsonl.gz"))):
            sources.append(CorpusSource(kind="beir", path=beir))
        if not sources:
            raise FileNotFoundError(
                f"{root} has no corpus: expected a 'wiki/' abstracts tree and/or BEIR '*.jsonl[.gz]' files"
            )
        claims = {}
        for split, names in _CLAIM_FILE_PATTERNS.items():
            for file_name in names:
                if (root / file_name).is_file():
                    claims[split] = root / file_name
                    break
        return cls(name=name or root.name, sources=sources, claims=claims)


class CorpusConfig(_Strict):
    splitter: SplitterName = Field(
        default="blingfire", description="Sentence splitter for raw-text (BEIR) sources; see README."
    )
    batch_passages: int = Field(default=5_000, ge=1, description="Passages per written batch (bounds memory).")


class DemoConfig(_Strict):
    """Size of the generated demo world; defaults run every stage on 2 CPU cores in minutes."""

    seed: int = 13
    n_people: int = 240
    n_films: int = 120
    n_bands: int = 60
    n_companies: int = 60
    n_cities: int = 60
    n_countries: int = 16
    n_universities: int = 24
    n_distractors: int = 400
    n_train_claims: int = 300
    n_dev_claims: int = 120


def default_store_root() -> Path:
    """$BALEEN_STORE, else <baleen home>/store."""
    env = os.environ.get("BALEEN_STORE")
    return Path(env) if env else baleen_home() / "store"


class BaleenConfig(_Strict):
    store_root: Path = Field(default_factory=default_store_root)
    corpus: CorpusConfig = CorpusConfig()
    demo: DemoConfig = DemoConfig()

    @field_validator("store_root")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @classmethod
    def load(cls, path: Path | str | None) -> BaleenConfig:
        """Load from a YAML or JSON file, or the defaults when ``path`` is None."""
        if path is None:
            return cls()
        path = Path(path)
        try:
            raw = yaml.safe_load(path.read_text()) if path.suffix in (".yaml", ".yml") else json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"config file {path} does not exist") from None
        return cls.model_validate(raw or {})
