"""The labels flow: one latent-hop-ordering round on its own, for relabelling with a chosen
retriever without retraining (the training flow chains rounds with FLIPR training)."""

from __future__ import annotations

from prefect import flow

from baleen_core.config import BaleenConfig
from baleen_flows.config_check import config_checked
from baleen_storage import ArtifactRef, ArtifactStore, new_run_id
from baleen_storage.indexes import trained_flipr_tag
from baleen_storage.lineage import claims_passages, index_for
from baleen_tasks.catalog import refresh_catalog
from baleen_tasks.index import index_producer
from baleen_tasks.labels import label_round, labels_producer
from baleen_tasks.validation import validate_artifact


@flow(name="labels", flow_run_name="labels · round {round_number}", log_prints=True)
@config_checked
def labels_flow(
    config_path: str | None = None,
    round_number: int = 0,
    run_id: str | None = None,
    force: bool = False,
    claims_run: str | None = None,
    index_run: str | None = None,
) -> dict[str, ArtifactRef]:
    """Hop labels of round ``round_number`` on the newest (or given) claims: round 0 with
    ``labels.round0`` (BM25, or the untrained FLIPR index), round r > 0 with the index of FLIPR
    trained on round r-1 (the newest, or run ``index_run``), compared with round r-1's labels."""
    config = BaleenConfig.load(config_path)
    store = ArtifactStore(config.store_root)
    root, run_id = str(store.root), run_id or new_run_id()
    claims = store.get("claims", claims_run, "claims") if claims_run else store.latest("claims", "claims")
    gold_facts = store.get("gold_facts", claims.manifest.run_id, "claims")
    labeller = config.labels.round0 if round_number == 0 else "flipr"
    index = None
    passages = claims_passages(store, claims)  # by lineage: the passages the claims were resolved against
    if labeller == "flipr":
        # round 0 searches the untrained index; round r the one FLIPR trained on round r-1 built
        producer = index_producer(trained_flipr_tag(round_number - 1) if round_number else None)
        index = index_for(store, passages, producer, index_run, claims)
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")
    previous = store.latest("hop_labels", labels_producer(round_number - 1)) if round_number > 0 else None
    labels = label_round(
        root, claims, gold_facts, passages, sentences, round_number, labeller, index, config.labels, config.search, config.retriever.device, run_id, previous, force
    )
    validate_artifact(root, "hop_labels", {"hop_labels": labels, "passages": passages})
    refresh_catalog(root)
    return {f"labels-r{round_number}": labels}
