"""Corpus and claims flows: upstream files → validated Parquet artifacts."""

from __future__ import annotations

from prefect import flow

from baleen_core.config import BaleenConfig, DatasetConfig
from baleen_flows.config_check import config_checked
from baleen_flows.run_names import on_dataset
from baleen_storage import ArtifactRef, ArtifactStore, new_run_id
from baleen_tasks.catalog import refresh_catalog
from baleen_tasks.claims import ingest_claims
from baleen_tasks.corpus import apply_corpus_delta_task, ingest_corpus
from baleen_tasks.validation import validate_artifact


def _setup(dataset_dir: str, config_path: str | None, run_id: str | None) -> tuple[BaleenConfig, DatasetConfig, str]:
    config = BaleenConfig.load(config_path)
    return config, DatasetConfig.discover(dataset_dir), run_id or new_run_id()


@flow(name="corpus", flow_run_name=on_dataset("corpus"), log_prints=True)
@config_checked
def corpus_flow(dataset_dir: str, config_path: str | None = None, run_id: str | None = None, force: bool = False) -> dict[str, ArtifactRef]:
    """Sentence-split corpus: sources → passages + sentences (+ rejects), each gated."""
    config, dataset, run_id = _setup(dataset_dir, config_path, run_id)
    store_root = str(config.store_root)
    refs = ingest_corpus(store_root, dataset, config.corpus, run_id, force)
    for artifact in ("passages", "sentences", "rejects"):
        validate_artifact(store_root, artifact, refs, config.gates)
    refresh_catalog(store_root)
    return refs


@flow(name="corpus-delta", flow_run_name="corpus-delta", log_prints=True)
@config_checked
def corpus_delta_flow(
    upserts: str | None = None,
    deletes: str | None = None,
    config_path: str | None = None,
    passages_run: str | None = None,
    run_id: str | None = None,
    force: bool = False,
) -> dict[str, ArtifactRef]:
    """The next corpus version from an explicit delta on ``passages_run`` (default: the newest):
    ``upserts`` (BEIR JSON lines, by title: replace or add) and ``deletes`` (titles, one a line),
    each gated as an ingest's. ``baleen index`` then updates the index in place."""
    if not upserts and not deletes:
        raise ValueError("a corpus delta needs passages to upsert, titles to delete, or both")
    config = BaleenConfig.load(config_path)
    store = ArtifactStore(config.store_root)
    base = store.get("passages", passages_run, "corpus") if passages_run else store.latest("passages", "corpus")
    refs = apply_corpus_delta_task(str(store.root), base, upserts, deletes, config.corpus, run_id or new_run_id(), force)
    for artifact in ("passages", "sentences", "rejects"):
        validate_artifact(str(store.root), artifact, refs, config.gates)
    refresh_catalog(str(store.root))
    return refs


@flow(name="claims", flow_run_name=on_dataset("claims"), log_prints=True)
@config_checked
def claims_flow(
    dataset_dir: str,
    config_path: str | None = None,
    run_id: str | None = None,
    passages_run: str | None = None,
    force: bool = False,
) -> dict[str, ArtifactRef]:
    """HoVer claims → claims + gold_facts (+ rejects), resolved against a passages artifact
    (``passages_run``, default: the newest one in the store), each gated."""
    config, dataset, run_id = _setup(dataset_dir, config_path, run_id)
    store = ArtifactStore(config.store_root)
    passages = store.get("passages", passages_run, "corpus") if passages_run else store.latest("passages", "corpus")
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")
    refs = ingest_claims(str(store.root), dataset, passages, run_id, force)
    siblings = {"sentences": sentences, **refs}
    for artifact in ("claims", "gold_facts", "rejects"):
        validate_artifact(str(store.root), artifact, siblings, config.gates)
    refresh_catalog(str(store.root))
    return refs


@flow(name="ingest", flow_run_name=on_dataset("ingest"), log_prints=True)
@config_checked
def ingest_flow(dataset_dir: str, config_path: str | None = None, force: bool = False, run_id: str | None = None) -> dict[str, ArtifactRef]:
    """Corpus then claims, in one run."""
    run_id = run_id or new_run_id()
    corpus = corpus_flow(dataset_dir, config_path, run_id, force)
    claims = claims_flow(dataset_dir, config_path, run_id, corpus["passages"].manifest.run_id, force)
    return {**{f"corpus/{k}": v for k, v in corpus.items()}, **{f"claims/{k}": v for k, v in claims.items()}}
