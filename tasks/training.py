"""Training tasks: FLIPR on hop labels (checkpoints per epoch, resumable), retrieval recall."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pyarrow as pa
from prefect import task

from baleen_core.config import OPTIMIZER_FIELDS_ADDED_LATER, FliprTrainingConfig, RetrieverConfig, SearchConfig
from baleen_core.retrieval import Flipr, passage_text
from baleen_core.retrieval.recall import gold_recall
from baleen_core.training.flipr_trainer import FliprExample, flipr_example_pids, flipr_examples, train_flipr
from baleen_core.training.loop import STATE_FILE, STEPS_FILE, history_summary
from baleen_core.training.hop_ordering import claims_from_rows
from baleen_schemas import FLIPR_CHECKPOINT, TRAINING_STEPS
from baleen_storage import ArtifactRef, ArtifactStore, fingerprint, fingerprint_params
from baleen_storage.indexes import open_searcher, trained_flipr_tag
from baleen_tasks.index import encoder_fingerprints
from baleen_tasks.policies import GPU_TAG
from baleen_tasks.reporting import Progress, flow_run_info, publish_markdown, publish_table, readable, run_logger


def read_flipr_examples(
    store: ArtifactStore, labels: ArtifactRef, claims: ArtifactRef, passages: ArtifactRef, sentences: ArtifactRef, config: FliprTrainingConfig
) -> list[FliprExample]:
    """:func:`baleen_core.training.flipr_trainer.flipr_examples` over the stored label round."""
    columns = ["uid", "hop", "context_facts", "context_pids", "positive_pid", "negative_pids", "remaining_gold_pids", "remaining_gold_ranks"]
    rows = store.read_table(labels, columns).to_pylist()
    limit = config.max_examples
    claim_text = {c["uid"]: c["claim"] for c in store.read_table(claims, ["uid", "claim"]).to_pylist()}
    table = store.passage_texts(passages, sentences, pids=sorted(flipr_example_pids(rows, limit)))
    text = {pid: passage_text(t, x) for pid, t, x in zip(*(table.column(c).to_pylist() for c in ("pid", "title", "text")), strict=True)}
    return flipr_examples(rows, claim_text, text, limit, config.claim_only_positives)


def loss_plot(history: list[dict], title: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    steps = [h["step"] for h in history]
    losses = [h["loss"] for h in history]
    ax.plot(steps, losses, lw=0.8, alpha=0.5, label="batch loss")
    window = max(1, len(losses) // 20)
    smooth = [sum(losses[max(0, i - window + 1) : i + 1]) / len(losses[max(0, i - window + 1) : i + 1]) for i in range(len(losses))]
    ax.plot(steps, smooth, lw=1.6, label=f"mean of {window}")
    validated = [(h["step"], h["val_loss"]) for h in history if h.get("val_loss") is not None]
    if validated:
        ax.plot(*zip(*validated, strict=True), "o-", lw=1.2, ms=3, label="held-out claims")
    ax.set(xlabel="step", ylabel="loss", title=title)
    ax.legend()
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


@task(name="train-flipr", task_run_name="train-flipr · round {round_number}", tags=[GPU_TAG])
def train_flipr_on_labels(
    store_root: str,
    labels: ArtifactRef,
    claims: ArtifactRef,
    passages: ArtifactRef,
    sentences: ArtifactRef,
    retriever: RetrieverConfig,
    config: FliprTrainingConfig,
    round_number: int,
    run_id: str,
    force: bool = False,
    tag: str | None = None,
) -> dict[str, ArtifactRef]:
    """Train FLIPR on one round's hop labels; publish the checkpoint and the step metrics, under
    ``tag`` (default: ``flipr-r<round>``; the full-interaction variant has its own).

    Epoch checkpoints live in ``<store>/work/flipr-<fingerprint>/`` until the run finishes, so a
    killed run resumes at its last finished epoch; a second run with the same fingerprint waits
    for the first and then reuses what it published."""
    logger, store = run_logger(), ArtifactStore(store_root)
    producer = tag or trained_flipr_tag(round_number)
    params = {"round": round_number, **fingerprint_params(config, added_later=["claim_only_positives", *OPTIMIZER_FIELDS_ADDED_LATER])}
    fps = [fingerprint(step="train_flipr", labels=labels.fingerprint, encoder=e, params=params, version=FLIPR_CHECKPOINT.version) for e in encoder_fingerprints(retriever)]
    fp = fps[0]
    waiting = lambda: logger.info("another run is training this same FLIPR (round %d) in work/flipr-%s: waiting for it", round_number, fp)  # noqa: E731
    with store.work_dir(f"flipr-{fp}", on_wait=waiting) as work_dir:  # re-checked inside: the run waited for may have published it
        if not force and (reused := store.find_outputs(["flipr_checkpoint", "training_steps"], producer, fps)):
            logger.info("FLIPR round %d already trained: reusing run %s", round_number, reused["flipr_checkpoint"].manifest.run_id)
            return reused
        examples = read_flipr_examples(store, labels, claims, passages, sentences, config)
        flipr = Flipr.load(retriever)
        steps = config.epochs * -(-len(examples) // config.batch_size)
        with Progress(steps, f"train FLIPR (round {round_number}, {len(examples)} examples)", unit="step") as progress:
            last, history = train_flipr(flipr, examples, config, work_dir, on_step=lambda record: progress.update(1))
        outputs = publish_trained_model(
            store, "flipr_checkpoint", "flipr", round_number, last, history, len(examples), str(flipr.device),
            dict(run_id=run_id, producer=producer, fingerprint=fp, inputs={"labels": labels.fingerprint}, params=params),
            title=f"FLIPR trained on round-{round_number} labels",
        )
        shutil.rmtree(work_dir, ignore_errors=True)  # published: the epoch checkpoints are no longer needed
    return outputs


def publish_trained_model(
    store: ArtifactStore, artifact: str, model: str, round_number: int, checkpoint: Path, history: list[dict], examples: int, device: str, meta: dict, title: str, extra_stats: dict | None = None
) -> dict[str, ArtifactRef]:
    """Publish a finished training run: the checkpoint (every file the model saved, not the
    trainer state), its step metrics as ``training_steps``, a loss plot and a markdown summary."""
    meta = {**meta, "flow_run": flow_run_info()}
    with store.file_writer(artifact, **meta) as writer:
        for source in checkpoint.iterdir():
            if source.name in (STATE_FILE, STEPS_FILE):
                continue
            (shutil.copytree if source.is_dir() else shutil.copy2)(source, writer.dir / source.name)
        writer.rows = examples
        summary = history_summary(history)
        writer.stats = {"examples": examples, "steps": summary["steps"], "device": device, **summary, **(extra_stats or {})}
    with store.writer("training_steps", **meta) as steps_writer:
        rows = [{"model": model, "round": round_number, **{k: h.get(k) for k in TRAINING_STEPS.schema.names if k not in ("model", "round")}} for h in history]
        steps_writer.write(pa.Table.from_pylist(rows, schema=TRAINING_STEPS.schema))
    plot = store.write_report(meta["run_id"], f"training/{meta['producer']}-loss.png", loss_plot(history, title))
    run_logger().info("%s: %s", title, readable(writer.stats))
    publish_markdown(
        key=f"{meta['producer']}-training",
        markdown=f"### {title}\n\n" + "\n".join(f"- **{k}**: {readable(v)}" for k, v in writer.stats.items()) + f"\n\nLoss curve: `{plot}`",
        description=f"{model} training",
    )
    return {artifact: writer.ref, "training_steps": steps_writer.ref}


@task(name="retrieval-recall", task_run_name="retrieval-recall · {label}")
def retrieval_recall(
    store_root: str, index: ArtifactRef, claims: ArtifactRef, gold_facts: ArtifactRef, sentences: ArtifactRef, split: str, search: SearchConfig, device: str, label: str, k: int = 25
) -> dict[str, float]:
    """Claim-only Recall@k of gold passages on one split, by hop count (a quick check of a retriever)."""
    store = ArtifactStore(store_root)
    searcher, _ = open_searcher(store, search, device, index, warn=run_logger().warning)
    gold = claims_from_rows(store.claim_gold(claims, gold_facts, sentences, split).to_pylist())
    recall = gold_recall(searcher, [(c.claim, c.num_hops, {p.pid for p in c.passages}) for c in gold], [k])[k]
    publish_table(key=f"recall-{label}".lower().replace(" ", "-"), table=[{"hops": h, f"recall@{k}": round(v, 4)} for h, v in recall.items()], description=f"{label}: claim-only Recall@{k} on {split}")
    run_logger().info("%s: Recall@%d on %s: %s", label, k, split, readable({f"{h} hops": v for h, v in recall.items()}))
    return recall
