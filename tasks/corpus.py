"""Corpus ingest as a Prefect task: merged sources → ``passages``, ``sentences``, ``rejects``."""

from __future__ import annotations

from contextlib import ExitStack

from prefect import task

from baleen_core.config import CorpusConfig, DatasetConfig
from baleen_core.corpus import CorpusMerger, get_splitter, read_source, source_bytes
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
