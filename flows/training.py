"""The training flow: latent hop ordering rounds and FLIPR training, chained.

    labels r0 (BM25 or untrained FLIPR) → train FLIPR → re-index → labels r1 (trained FLIPR) → train FLIPR → re-index …
    → [colbert-full evaluated: FLIPR with full interaction on the last FLIPR round's labels → index]
    → labels with the final FLIPR (``labels.relabel_for_condensers``)
    → condenser stage 1 → condenser stage 2 (on the last labels)
    → the engine without its reader over the held-out training claims, at every context threshold (one pass)
    → the context threshold whose final facts match the gold ones best (``training.calibration``)
    → with ``training.calibration.evidence_ranker``, the evidence ranker fitted on that run's hops (with
      ``evidence_ranker_context``, the engine again with the ranker setting the context, and the threshold chosen on that)
    → the evidence floor per hop count whose re-cut evidence matches them best (``training.calibration.evidence_floors``)
    → reader (on that run's final facts at those floors and on gold facts)
    → condensers and reader on the dev claims' gold passages

No label round labels the held-out training claims (``labels.held_out_share``), so neither FLIPR
nor the condensers train on them: the context threshold is chosen on the facts the engine finds
for claims it has never seen, and the reader learns from them, as it will read them on dev (the
evaluation runs the engine with the threshold and floors the reader was trained with).

:func:`condensers_flow` runs only the last two lines, on one round's labels (e.g. after
``baleen labels --round 1``, to train the condensers on FLIPR's negatives without training FLIPR
again).

Every step is a fingerprinted task, so an interrupted flow resumes where it stopped (training
itself resumes at its last finished epoch).
"""

from __future__ import annotations

from prefect import flow

from baleen_core.condensing.calibration import search_threshold_grid
from baleen_core.config import BaleenConfig
from baleen_core.engine import HopMemo
from baleen_flows.config_check import config_checked
from baleen_flows.index import index_flow
from baleen_flows.run_names import training_run_name
from baleen_storage import ArtifactRef, ArtifactStore, new_run_id
from baleen_storage.indexes import FULL_INTERACTION_TAG, PRODUCER as UNTRAINED_INDEX_PRODUCER, newest_trained_index, trained_flipr_tag
from baleen_storage.lineage import index_for, passages_for_claims
from baleen_tasks.catalog import refresh_catalog
from baleen_tasks.condensing import (
    choose_context_threshold,
    choose_evidence_floors,
    evaluate_condensers,
    fit_ranker,
    train_claim_reader,
    train_condenser_stage1,
    train_condenser_stage2,
)
from baleen_tasks.evaluation import verify_held_out
from baleen_tasks.labels import label_round, labels_producer
from baleen_tasks.training import retrieval_recall, train_flipr_on_labels
from baleen_tasks.validation import validate_artifact


@flow(name="training", flow_run_name=training_run_name, log_prints=True)
@config_checked
def training_flow(
    config_path: str | None = None,
    run_id: str | None = None,
    force: bool = False,
    claims_run: str | None = None,
    passages_run: str | None = None,
    index_run: str | None = None,
) -> dict[str, ArtifactRef]:
    """Label rounds and FLIPR training on the given (default: newest) claims, the passages they
    were resolved against and an untrained index of those passages (the newest, or ``index_run``;
    needed only when ``labels.round0`` is ``flipr``)."""
    config = BaleenConfig.load(config_path)
    store = ArtifactStore(config.store_root)
    root, run_id = str(store.root), run_id or new_run_id()

    claims = store.get("claims", claims_run, "claims") if claims_run else store.latest("claims", "claims")
    gold_facts = store.get("gold_facts", claims.manifest.run_id, "claims")
    passages = passages_for_claims(store, claims, passages_run)  # by lineage, not age
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")
    labeller = config.labels.round0
    # BM25 labels round 0 without it: the untrained index then only served a recall report, so
    # the flow takes one when it exists (or is named) and asks for one only when FLIPR labels
    needs_index = labeller == "flipr" or index_run or store.refs("flipr_index", UNTRAINED_INDEX_PRODUCER)
    index = index_for(store, passages, UNTRAINED_INDEX_PRODUCER, index_run, claims) if needs_index else None
    device, search = config.retriever.device, config.search

    recall_args = (root, claims, gold_facts, sentences, "dev", search, device)
    if index is not None:
        retrieval_recall(root, index, *recall_args[1:], label="untrained FLIPR")
    labels = label_round(root, claims, gold_facts, passages, sentences, 0, labeller, index if labeller == "flipr" else None, config.labels, search, device, run_id, None, force)
    validate_artifact(root, "hop_labels", {"hop_labels": labels, "passages": passages})
    refs: dict[str, ArtifactRef] = {"labels-r0": labels}
    for round_number in range(config.labels.rounds):
        flipr_labels = labels
        trained = train_flipr_on_labels(root, labels, claims, passages, sentences, config.retriever, config.training.flipr, round_number, run_id, force)
        tag = trained_flipr_tag(round_number)
        index = index_flow(config_path, passages.manifest.run_id, run_id, force, checkpoint=str(trained["flipr_checkpoint"].path), tag=tag)["flipr_index"]
        retrieval_recall(root, index, *recall_args[1:], label=f"FLIPR trained on round-{round_number} labels")
        refs.update({f"{tag}/checkpoint": trained["flipr_checkpoint"], f"{tag}/steps": trained["training_steps"], f"{tag}/index": index})
        if round_number + 1 <= config.labels.condenser_round:  # the next FLIPR round's labels, or the condensers'
            labels = label_round(root, claims, gold_facts, passages, sentences, round_number + 1, "flipr", index, config.labels, search, device, run_id, labels, force)
            validate_artifact(root, "hop_labels", {"hop_labels": labels, "passages": passages})
            refs[f"labels-r{round_number + 1}"] = labels
    refs["index"] = index  # the last round's: what the engine searches
    if "colbert-full" in config.evaluation.systems:
        # the ablation of focused scoring compares two *trained* retrievers: the same labels, every query position counting
        full = config.retriever.model_copy(update={"k_claim": None, "k_context": None})
        last_round = config.labels.rounds - 1
        trained = train_flipr_on_labels(root, flipr_labels, claims, passages, sentences, full, config.training.flipr, last_round, run_id, force, tag=FULL_INTERACTION_TAG)
        refs["colbert_index"] = index_flow(config_path, passages.manifest.run_id, run_id, force, checkpoint=str(trained["flipr_checkpoint"].path), tag=FULL_INTERACTION_TAG)["flipr_index"]
        refs[f"{FULL_INTERACTION_TAG}/checkpoint"] = trained["flipr_checkpoint"]
    refs.update(train_condensers_and_reader(config, labels, index, claims, gold_facts, passages, sentences, run_id, force))
    refresh_catalog(root)
    return refs


def train_condensers_and_reader(
    config: BaleenConfig, labels: ArtifactRef, index: ArtifactRef, claims: ArtifactRef, gold_facts: ArtifactRef, passages: ArtifactRef, sentences: ArtifactRef,
    run_id: str, force: bool,
) -> dict[str, ArtifactRef]:
    """Stage 1 → stage 2 (on stage 1's candidates) → the engine (FLIPR ``index``, both stages, no
    reader) over the held-out training claims, at every context threshold of the calibration →
    the threshold chosen on them → the evidence ranker fitted on that run (with it setting the
    context, the engine again at the ranker's thresholds, and the threshold chosen on that) → the
    evidence floor per hop count chosen on that run's last reads (the ranker's scores) → reader (on that run's final facts at those floors and on gold facts), then all
    three on the dev claims' gold passages."""
    root, round_number, training = str(config.store_root), labels.manifest.params.get("round", 0), config.training
    data = (claims, gold_facts, passages, sentences)
    stage1 = train_condenser_stage1(root, labels, *data, config.condenser, training.stage1, round_number, run_id, force)["stage1_checkpoint"]
    stage2 = train_condenser_stage2(root, labels, stage1, *data, config.condenser, training.stage2, round_number, run_id, force)["stage2_checkpoint"]
    thresholds, ranker_thresholds = training.calibration.context_grids(config.condenser.stage2_threshold)
    models = {"index": index, "stage1": stage1, "stage2": stage2}
    memo = HopMemo()  # every calibration run reads hop 1 alike, and many claims later hops alike
    engine_facts = calibrated_engine_run(root, data, models, config, thresholds, run_id, force, memo)
    ranker = fit_ranker(root, engine_facts, *data)["ranker"] if training.calibration.evidence_ranker else None
    if ranker is not None and training.calibration.evidence_ranker_context:  # the ranker sets the context: the engine runs again on its scores
        engine_facts = calibrated_engine_run(root, data, models, config.with_evidence_ranker(ranker, context=True), ranker_thresholds, run_id, force, memo)
    floors = (
        choose_evidence_floors(root, engine_facts, claims, gold_facts, config.condenser, training.calibration.evidence_floor_grid, ranker, passages, sentences)["floors"]
        if config.chooses_evidence_floors
        else None
    )
    reader = train_claim_reader(root, engine_facts, *data, config.condenser, config.reader, training.reader, round_number, run_id, force, floors, stage2, ranker)["reader_checkpoint"]
    evaluate_condensers(root, stage1, stage2, reader, *data, config.condenser, config.reader, "dev", run_id)
    return {"stage1": stage1, "stage2": stage2, "reader_facts": engine_facts, "reader": reader}


def calibrated_engine_run(
    root: str, data: tuple[ArtifactRef, ...], models: dict[str, ArtifactRef], config: BaleenConfig, thresholds: list[float], run_id: str, force: bool,
    memo: HopMemo | None = None,
) -> ArtifactRef:
    """The engine without its reader over the held-out training claims (``data``: claims, gold
    facts, passages, sentences) at every context threshold, and past the grid's edge while an edge
    wins (``training.calibration.steps_past_edge``), each run validated; the run of the threshold
    whose final facts best match the gold ones. ``memo`` keeps the hops computed for the runs
    that follow (this pass's steps past the edge, the next pass)."""
    runs: dict[float, ArtifactRef] = {}

    def run_and_choose(new_thresholds: list[float]) -> float:
        for threshold, traces in verify_held_out(root, *data, models, config, new_thresholds, run_id, force, memo):
            validate_artifact(root, "hop_traces", {"hop_traces": traces})
            runs[threshold] = traces
        if len(runs) == 1:
            return next(iter(runs))
        return choose_context_threshold(root, list(runs.items()), data[1], config.condenser.evidence_ranker_context)["threshold"]

    return runs[search_threshold_grid(thresholds, config.training.calibration.steps_past_edge, run_and_choose)]


@flow(name="condensers", flow_run_name="condensers · labels round {round_number}", log_prints=True)
@config_checked
def condensers_flow(config_path: str | None = None, round_number: int | None = None, run_id: str | None = None, force: bool = False, labels_run: str | None = None) -> dict[str, ArtifactRef]:
    """Condenser stage 1, stage 2 and the reader on round ``round_number``'s hop labels (default:
    the round the training flow trains them on, ``labels.condenser_round``; the newest labels of that round, or
    run ``labels_run``), on the claims and passages those labels were made from. FLIPR is not
    trained; the evaluation picks up the new checkpoints as the newest."""
    config = BaleenConfig.load(config_path)
    store = ArtifactStore(config.store_root)
    round_number = config.labels.condenser_round if round_number is None else round_number
    producer = labels_producer(round_number)
    labels = store.get("hop_labels", labels_run, producer) if labels_run else store.latest("hop_labels", producer)
    made_from = labels.manifest.inputs
    claims, passages = (store.find(name, name_producer, made_from[name]) for name, name_producer in (("claims", "claims"), ("passages", "corpus")))
    if claims is None or passages is None:
        raise ValueError(f"the claims or passages that {labels.path} was made from are no longer in the store; relabel with `baleen labels --round {round_number}`")
    gold_facts = store.get("gold_facts", claims.manifest.run_id, "claims")
    sentences = store.get("sentences", passages.manifest.run_id, "corpus")
    index = newest_trained_index(store, passages)  # what the engine searches when it makes the reader's facts
    refs = train_condensers_and_reader(config, labels, index, claims, gold_facts, passages, sentences, run_id or new_run_id(), force)
    refresh_catalog(str(store.root))
    return refs
