"""Corpus ingest as a Prefect task: merged sources → ``passages``, ``sentences``, ``rejects``."""

from __future__ import annotations

import hashlib
from contextlib import ExitStack
from pathlib import Path

from prefect import task

from baleen_core.config import CorpusConfig, DatasetConfig
from baleen_core.corpus import CorpusMerger, get_splitter, read_source, source_bytes
from baleen_core.corpus.delta import apply_corpus_delta, read_deletes
from baleen_core.corpus.readers import read_beir
from baleen_schemas import PASSAGES, REJECTS, SENTENCES
from baleen_storage import ArtifactRef, ArtifactStore, file_fingerprint, fingerprint
from baleen_tasks.policies import retry_on_transient_io
from baleen_tasks.reporting import Progress, flow_run_info, publish_table, readable, run_logger

PRODUCER = "corpus"
OUTPUTS = ["passages", "sentences", "rejects"]


def corpus_fingerprint(dataset: DatasetConfig, config: CorpusConfig) -> tuple[str, dict[str, str], dict]:
    inputs = {f"{i}:{s.label}:{s.path.name}": file_fingerprint(s.path) for i, s in enumerate(dataset.sources)}
    params = {"sources": [{"kind": s.kind, "label": s.label} for s in dataset.sources], "splitter": config.splitter}
    versions = {s.name: s.version for s in (PASSAGES, SENTENCES, REJECTS)}
    return fingerprint(step=PRODUCER, inputs=inputs, params=params, schemas=versions), inputs, params


@task(name="ingest-corpus", task_run_name="ingest-corpus · {dataset.name}", tags=["io"], retries=2, retry_delay_seconds=[2, 10], retry_condition_fn=retry_on_transient_io)
def ingest_corpus(
    store_root: str, dataset: DatasetConfig, config: CorpusConfig, run_id: str, force: bool = False
) -> dict[str, ArtifactRef]:
    """Read every source in precedence order, split raw text into sentences, write three artifacts.

    Reuses the artifacts of an earlier run when sources, settings and schemas are unchanged.
    Retried only on transient I/O errors (e.g. a network file system hiccup), never on bad input.
    """
    logger = run_logger()
    store = ArtifactStore(store_root)
    fp, inputs, params = corpus_fingerprint(dataset, config)
    if not force and (reused := store.find_outputs(OUTPUTS, PRODUCER, fp)):
        logger.info("corpus unchanged (fingerprint %s): reusing run %s", fp, reused["passages"].manifest.run_id)
        return reused

    split = get_splitter(config.splitter)
    merger = CorpusMerger(batch_passages=config.batch_passages)
    meta = dict(run_id=run_id, producer=PRODUCER, fingerprint=fp, inputs=inputs, params=params, flow_run=flow_run_info())
    total_bytes = sum(source_bytes(s) for s in dataset.sources)
    with ExitStack() as stack, Progress(total_bytes, f"corpus {dataset.name}", unit="B") as progress:
        writers = {name: stack.enter_context(store.writer(name, **meta)) for name in OUTPUTS}
        sources = [(s.label, read_source(s, split, on_file_done=progress.update)) for s in dataset.sources]
        for batch in merger.batches(sources):
            writers["passages"].write(batch.passages)
            writers["sentences"].write(batch.sentences)
            writers["rejects"].write(batch.rejects)
            progress.bar.set_postfix(passages=merger.stats.passages, rejects=merger.stats.total_rejects)
        stats = merger.stats
        if not stats.reconciles():  # a bug, not bad data: never publish artifacts that lose rows
            raise RuntimeError(f"corpus counts do not reconcile: {stats.as_dict()}")
    refs = {name: w.ref for name, w in writers.items()}
    logger.info("corpus: %s", readable(stats.as_dict()))
    publish_table(
        key="corpus-ingest",
        table=[
            {"source": label, "rows_in": n} for label, n in stats.rows_in.items()
        ]
        + [{"source": "→ passages", "rows_in": stats.passages}, {"source": "→ sentences", "rows_in": stats.sentences}]
        + [{"source": f"→ rejected: {reason}", "rows_in": n} for reason, n in stats.rejects.items()],
        description=f"Corpus ingest of {dataset.name} (run {run_id}); rows in = passages + rejects.",
    )
    return refs


def _content_digest(path: str | None) -> str | None:
    """A delta file's content digest (small files; the same edits made twice are one delta)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:32] if path else None


@task(name="apply-corpus-delta", tags=["io"])
def apply_corpus_delta_task(
    store_root: str, base: ArtifactRef, upserts: str | None, deletes: str | None, config: CorpusConfig, run_id: str, force: bool = False
) -> dict[str, ArtifactRef]:
    """The next corpus version from ``base`` (a passages artifact) and an explicit delta:
    ``upserts``, BEIR JSON lines of passages to add or replace (by title), and ``deletes``, a
    text file of titles to remove, one a line. Reused when the same delta was applied to the same base."""
    logger, store = run_logger(), ArtifactStore(store_root)
    inputs = {"base": base.fingerprint, **{name: _content_digest(path) for name, path in (("upserts", upserts), ("deletes", deletes)) if path}}
    params = {"base_run": base.manifest.run_id, "splitter": config.splitter, "upserts": upserts, "deletes": deletes}
    versions = {s.name: s.version for s in (PASSAGES, SENTENCES, REJECTS)}
    fp = fingerprint(step="corpus-delta", inputs=inputs, splitter=config.splitter, schemas=versions)
    if not force and (reused := store.find_outputs(OUTPUTS, PRODUCER, fp)):
        logger.info("this delta was already applied to passages run %s: reusing run %s", base.manifest.run_id, reused["passages"].manifest.run_id)
        return reused
    sentences = store.get("sentences", base.manifest.run_id, PRODUCER)
    with store.reading(base, sentences):
        base_passages, base_sentences = store.read_table(base), store.read_table(sentences)
    records = read_beir(Path(upserts), get_splitter(config.splitter), source="delta") if upserts else iter(())
    removals = read_deletes(Path(deletes).read_text(encoding="utf-8").splitlines()) if deletes else []
    batch, counts = apply_corpus_delta(base_passages, base_sentences, records, removals, Path(deletes).name if deletes else "deletes")
    if counts.changes_nothing:  # no new version: the same delta twice, or an upsert of what is there
        for reject in batch.rejects.to_pylist():
            logger.warning("corpus delta: %s %r (%s:%s): %s", reject["reason"], reject["key"], reject["source_file"], reject["line"], reject["detail"])
        logger.info("corpus delta changes no passage of run %s (%s): nothing new published", base.manifest.run_id, readable(counts.as_dict()))
        return {"passages": base, "sentences": sentences, "rejects": store.get("rejects", base.manifest.run_id, PRODUCER)}
    meta = dict(run_id=run_id, producer=PRODUCER, fingerprint=fp, inputs=inputs, params=params, flow_run=flow_run_info())
    refs = {}
    for name, table in (("passages", batch.passages), ("sentences", batch.sentences), ("rejects", batch.rejects)):
        with store.writer(name, **meta) as writer:
            writer.write(table)
            if name == "passages":
                writer.stats = {"delta": counts.as_dict()}
        refs[name] = writer.ref
    logger.info("corpus delta on passages run %s: %s", base.manifest.run_id, readable(counts.as_dict()))
    publish_table(
        key="corpus-delta",
        table=[{"passages": what, "count": n} for what, n in counts.as_dict().items()],
        description=f"Corpus delta (run {run_id}) applied to passages run {base.manifest.run_id}.",
    )
    return refs
