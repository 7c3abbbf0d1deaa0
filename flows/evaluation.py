"""The evaluation flow: every system verifies the same claims on the same corpus, then one report.

    for each system (baleen, bm25-multihop, colbert-full, single-hop, untrained-flipr; flipr-alone beside a fused baleen):
        verify-claims → predictions + hop_traces → gates → score-predictions → claim_metrics
    evaluation-report (table with bootstrap intervals, plots, HTML traces of the worst claims)

Models default to the newest trained ones in the store (the highest-round trained FLIPR index,
the newest condenser and reader checkpoints); the pipeline passes its own. The engine's context
threshold is the one the reader was trained with (chosen in training, ``training.calibration``).
"""

from __future__ import annotations

from prefect import flow

from baleen_core.config import BaleenConfig
from baleen_flows.config_check import config_checked
from baleen_flows.run_names import evaluation_run_name
from baleen_storage import ArtifactRef, ArtifactStore, StoreError, new_run_id
from baleen_storage.indexes import PRODUCER, newest_full_interaction_index, newest_trained_index
from baleen_storage.lineage import check_index_of, newest_index_of, passages_for_claims
from baleen_tasks.catalog import refresh_catalog
from baleen_tasks.evaluation import evaluation_report, score_predictions, trained_config, verify_split
from baleen_tasks.validation import validate_artifact


def trained_models(
    store: ArtifactStore, given: dict[str, ArtifactRef] | None = None, passages: ArtifactRef | None = None, claims: ArtifactRef | None = None
) -> dict[str, ArtifactRef]:
    """What the systems read: ``index`` (trained FLIPR), ``untrained_index``, ``colbert_index``
    (FLIPR trained with full interaction, when one was), and the ``stage1``, ``stage2`` and
    ``reader`` checkpoints; ``given`` ones win, the rest are the store's newest. With ``passages``
    the indexes are those of these passages (given ones must be: a :class:`LineageError` names
    the runs otherwise)."""
    models = dict(given or {})
    models.setdefault("index", newest_trained_index(store, passages))
    optional = {"colbert_index": lambda: newest_full_interaction_index(store, passages), "untrained_index": lambda: newest_index_of(store, passages, PRODUCER, claims)}
    for kind, newest in optional.items():
        if kind not in models:
            try:
                models[kind] = newest()
            except StoreError:  # none, or none of these passages: only colbert-full / untrained-flipr need it, and say so
                pass
    for kind in ("stage1", "stage2", "reader"):
        models.setdefault(kind, store.latest(f"{kind}_checkpoint"))
    if passages is not None:  # the ones chosen here are of these passages; the given ones must be too
        for kind in INDEX_MODELS:
            if kind in (given or {}):
                check_index_of(store, models[kind], passages, claims)
    return models


#: The models that are indexes of a corpus (and so must index the claims' passages).
INDEX_MODELS = ("index", "untrained_index", "colbert_index")


@flow(name="evaluation", flow_run_name=evaluation_run_name, log_prints=True)
@config_checked
def evaluation_flow(
    config_path: str | None = None,
    run_id: str | None = None,
    force: bool = False,
    claims_run: str | None = None,
    passages_run: str | None = None,
    models: dict[str, ArtifactRef] | None = None,
) -> dict[str, ArtifactRef]:
    """Verify the evaluation split's claims with every configured system and report HoVer's
    metrics by hop count (see ``evaluation`` in the configuration)."""
    config = BaleenConfig.load(config_path)
    store = ArtifactStore(config.store_root)
    root, run_id, split = str(store.root), run_id or new_run_id(), config.evaluation.split
    claims = store.get("claims", claims_run, "claims") if claims_run else store.latest("claims", "claims")
    gold_facts = store.get("gold_facts", claims.manifest.run_id, "claims")
    passages = passages_for_claims(store, claims, passages_run)
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")
    models = trained_models(store, models, passages, claims)
    config = trained_config(config, models)

    outputs: dict[str, dict[str, ArtifactRef]] = {}
    for system in config.evaluated_systems():
        verified = verify_split(root, system, claims, passages, sentences, models, config, run_id, force)
        for gated in ("predictions", "hop_traces"):  # both gated: neither reaches the metrics or a later run before both pass
            validate_artifact(root, gated, verified, config.gates)
        metrics = score_predictions(root, system, verified["predictions"], verified["hop_traces"], claims, gold_facts, run_id, force)
        outputs[system] = {**verified, "claim_metrics": metrics}
    evaluation_report(root, outputs, claims, gold_facts, passages, sentences, models, config, split, run_id)
    refresh_catalog(root)
    return {f"{system}/{name}": ref for system, refs in outputs.items() for name, ref in refs.items()}
