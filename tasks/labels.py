"""Latent hop ordering rounds as a Prefect task: training claims → ``hop_labels``."""

from __future__ import annotations

import functools
import time

import pyarrow as pa
from prefect import task

from baleen_core.config import LabelConfig, SearchConfig
from baleen_core.held_out import held_out_training_claims
from baleen_core.retrieval.fusion import hop_retriever
from baleen_core.training.hop_ordering import HopLabel, claims_from_rows, label_claims, label_row, round_labeller, round_statistics
from baleen_schemas import HOP_LABELS
from baleen_storage import ArtifactRef, ArtifactStore, fingerprint, fingerprint_params
from baleen_storage.indexes import open_bm25, open_searcher
from baleen_tasks.policies import GPU_TAG
from baleen_tasks.reporting import Progress, flow_run_info, publish_table, run_logger

#: Claims a BM25 label round labels per ranker call (it ranks one query at a time): the progress
#: bar's step (at label_claims' default of 512 a CPU round moved in jumps of 512 claims).
BM25_CLAIMS_PER_CALL = 32


def labels_producer(round_number: int) -> str:
    return f"labels-r{round_number}"


def held_out_training_uids(store: ArtifactStore, claims: ArtifactRef, gold_facts: ArtifactRef, config: LabelConfig) -> set[str]:
    """The resolved training claims no label round labels (``labels.held_out_share`` of the
    first ``labels.max_claims`` by uid, or of all): neither FLIPR nor the condensers train on
    them; the reader trains on the engine's facts for them."""
    rows = sorted((r for r in store.read_table(claims, ["uid", "hpqa_id", "split", "resolved"]).to_pylist() if r["split"] == "train" and r["resolved"]), key=lambda r: r["uid"])
    rows = rows[: config.max_claims]
    facts: dict[str, list[tuple[str, int]]] = {}
    for fact in store.read_table(gold_facts, ["uid", "title", "sid"]).to_pylist():
        facts.setdefault(fact["uid"], []).append((fact["title"], fact["sid"]))
    claims_with_titles = [{"uid": r["uid"], "hpqa_id": r["hpqa_id"], "supporting_facts": facts.get(r["uid"], [])} for r in rows]
    return held_out_training_claims(claims_with_titles, config.held_out_share, config.held_out_seed)


def _rows(labels: list[HopLabel], round_number: int, labeller: str) -> pa.Table:
    return pa.Table.from_pylist([label_row(label, round_number, labeller) for label in labels], schema=HOP_LABELS.schema)


@task(name="label-round", task_run_name="label-round · r{round_number} · {labeller}", tags=[GPU_TAG])
def label_round(
    store_root: str,
    claims: ArtifactRef,
    gold_facts: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    round_number: int,
    labeller: str,
    index: ArtifactRef | None,
    config: LabelConfig,
    search: SearchConfig,
    device: str,
    run_id: str,
    previous: ArtifactRef | None = None,
    force: bool = False,
) -> ArtifactRef:
    """Order the gold passages of every resolved training claim that is not held out
    (``labels.held_out_share``) into hops with ``labeller`` (``bm25``, or ``flipr`` over
    ``index``); compare with the ``previous`` round's labels. A FLIPR round ranks as the FLIPR
    systems retrieve: fused with BM25 under ``search.fusion: bm25`` (labeller ``flipr+bm25``), BM25
    for the first hops under ``bm25-first-hop`` (labeller ``bm25>flipr``), so
    the positives and the hard negatives the condensers train on come from the system's own lists
    (FLIPR's claim-only scoring aside: :meth:`SearchConfig.for_label_rounds`). Under
    ``labels.bm25_negatives`` the condensers' round takes every other negative from BM25."""
    logger, store = run_logger(), ArtifactStore(store_root)
    producer = labels_producer(round_number)
    search = search.for_label_rounds()
    params = {"round": round_number, "labeller": labeller, **config.model_dump(include={"depth", "n_negatives", "max_claims", "held_out_share", "held_out_seed"})}
    sources = {"claims": claims.fingerprint, "passages": passages.fingerprint}
    if index is not None:
        sources["index"] = index.fingerprint
        # candidate generation decides which passages FLIPR ranks, so the ranks (and the labels) depend on it
        params["search"] = fingerprint_params(search, include={"nprobe", "ncandidates", "fusion"}, added_later=["fusion"])
    mixed_negatives = config.mixes_bm25_negatives(round_number, labeller)
    if mixed_negatives:  # only then, so that every other round's fingerprint is what it was
        params["bm25_negatives"] = True
    fp = fingerprint(step="hop_labels", sources=sources, params=params, version=HOP_LABELS.version)
    if not force and (reused := store.find("hop_labels", producer, fp)):
        logger.info("round %d labels unchanged: reusing run %s", round_number, reused.manifest.run_id)
        return reused
    # claims labelled per ranker call, and so per progress update: BM25 ranks one query at a time,
    # FLIPR encodes its query_batch together (32 on a CPU; 512 on a GPU, which ranks them as one)
    claims_per_call = BM25_CLAIMS_PER_CALL
    bm25 = functools.cache(lambda: open_bm25(store, passages, sentences))  # built once, whoever asks first (fusion, negatives)
    if labeller == "flipr":
        if index is None:
            raise ValueError("a FLIPR label round needs an index; run the index flow first")
        searcher, _ = open_searcher(store, search, device, index, warn=run_logger().warning)
        ranker = hop_retriever(searcher, search.fusion, bm25)
        claims_per_call = searcher.query_batch
    else:
        ranker = bm25()
    negatives_from = bm25() if mixed_negatives else None
    labeller = round_labeller(ranker.name, negatives_from is not None)
    held_out = held_out_training_uids(store, claims, gold_facts, config)
    gold = [c for c in claims_from_rows(store.claim_gold(claims, gold_facts, sentences, "train").to_pylist())[: config.max_claims] if c.uid not in held_out]
    started = time.perf_counter()
    with Progress(len(gold), f"label round {round_number} ({labeller})", unit="claim") as progress:
        labels = label_claims(
            gold, ranker, config.depth, config.n_negatives, on_claim=lambda: progress.update(1), batch_size=claims_per_call, negatives_from=negatives_from
        )
    before = None
    if previous is not None:
        rows = store.read_table(previous, ["uid", "hop", "positive_pid"]).to_pylist()
        before = {(r["uid"], r["hop"]): r["positive_pid"] for r in rows}
    stats = round_statistics(labels, before)
    meta = dict(run_id=run_id, producer=producer, fingerprint=fp, inputs=sources, params=params, flow_run=flow_run_info())
    with store.writer("hop_labels", **meta) as writer:
        writer.write(_rows(labels, round_number, labeller))
        # a claim labels its num_hops hops: gold passages beyond them are left unassigned
        unassigned = sum(len(claim.passages) > claim.num_hops for claim in gold)
        writer.stats = {"claims": len(gold), "held_out_claims": len(held_out), "by_hop": stats, "claims_with_unassigned_gold": unassigned}
    logger.info(
        "round %d (%s): %d claims, %d hop labels in %.1f s; %d training claims held out for the reader", round_number, labeller, len(gold), len(labels),
        time.perf_counter() - started, len(held_out),
    )
    if unassigned:
        logger.warning("%d claims have more gold passages than hops: the engine runs num_hops hops, so the extra ones got no hop label", unassigned)
    publish_table(
        key=f"hop-labels-r{round_number}",
        table=stats,
        description=f"Latent hop ordering, round {round_number} ({labeller}): assignments per hop, share reached within rank {config.depth}, ranks of positives"
        + (", positives changed since the previous round." if previous else "."),
    )
    return writer.ref
