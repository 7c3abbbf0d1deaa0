"""openbaleen from Python, for notebooks and applications: one object over a store and a config.

    from baleen_flows.api import Baleen

    baleen = Baleen("my-config.yaml")            # validated now; the config names the store
    baleen.refresh("/data/my-corpus")            # ingest what changed, update the indexes
    baleen.add([{"title": "Velmora Quay", "text": "Velmora Quay is a harbour wall."}])
    baleen.delete(["Some Old Title"])
    baleen.search("a harbour wall built for herring boats", k=5)   # [{"pid", "title", "score", "text"}]
    baleen.verify("Velmora Quay was built before 1850.", hops=2)   # {"label", "prob_supported", "facts", "hops"}
    baleen.sql("SELECT count(*) FROM index_passages")               # a pyarrow Table

Every method runs the flow or function that the CLI command of the same name runs, with the same
gates, lineage and reuse; results are plain Python objects or Arrow tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pyarrow as pa

from baleen_core.config import SYSTEMS, BaleenConfig
from baleen_storage import ArtifactRef, ArtifactStore


class Baleen:
    def __init__(self, config: str | Path | None = None) -> None:
        self.config_path = str(Path(config).expanduser().resolve()) if config else None
        self.config = BaleenConfig.load(self.config_path)  # a bad config fails here, with the key and the file
        self.store = ArtifactStore(self.config.store_root)

    # ---- stages ----------------------------------------------------------------------------------
    def ingest(self, dataset: str | Path) -> dict[str, ArtifactRef]:
        """Corpus and claims of a dataset directory (``baleen corpus`` + ``baleen claims``)."""
        from baleen_flows.ingest import ingest_flow

        return ingest_flow(str(dataset), self.config_path)

    def index(self, force: bool = False) -> dict[str, ArtifactRef]:
        """Index the newest passages, or update the newest index in place (``baleen index``)."""
        from baleen_flows.index import index_flow

        return index_flow(self.config_path, force=force)

    def train(self) -> dict[str, ArtifactRef]:
        """Label rounds, FLIPR, condenser stages 1 and 2, the reader (``baleen train``)."""
        from baleen_flows.training import training_flow

        return training_flow(self.config_path)

    def evaluate(self) -> dict[str, ArtifactRef]:
        """Every configured system on the evaluation split (``baleen evaluate``)."""
        from baleen_flows.evaluation import evaluation_flow

        return evaluation_flow(self.config_path)

    def refresh(self, dataset: str | Path) -> dict[str, ArtifactRef]:
        """Ingest what changed, update every index, re-evaluate (``baleen refresh``)."""
        from baleen_flows.refresh import refresh_flow

        return refresh_flow(str(dataset), self.config_path)

    # ---- changing the corpus -------------------------------------------------------------------
    def add(self, passages: Iterable[Mapping[str, str]]) -> dict[str, ArtifactRef]:
        """Add passages (``{"title", "text"}``; a title the corpus holds is replaced) and update
        the index in place: ``baleen corpus-delta --upsert``, then ``baleen index``."""
        rows = [{"_id": p["title"], "title": p["title"], "text": p["text"]} for p in passages]
        with self.store.scratch_dir("api-delta") as scratch:
            upserts = scratch / "upserts.jsonl"
            upserts.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
            return self._apply(str(upserts), None)

    def delete(self, titles: Iterable[str]) -> dict[str, ArtifactRef]:
        """Delete passages by title and update the index (``baleen corpus-delta --delete``, then
        ``baleen index``); a title the corpus does not hold is quarantined in ``rejects``."""
        with self.store.scratch_dir("api-delta") as scratch:
            deletes = scratch / "deletes.txt"
            deletes.write_text("".join(f"{title}\n" for title in titles), encoding="utf-8")
            return self._apply(None, str(deletes))

    def _apply(self, upserts: str | None, deletes: str | None) -> dict[str, ArtifactRef]:
        from baleen_flows.index import index_flow
        from baleen_flows.ingest import corpus_delta_flow

        corpus = corpus_delta_flow(upserts, deletes, self.config_path)
        return {**{f"corpus/{k}": v for k, v in corpus.items()}, **{f"index/{k}": v for k, v in index_flow(self.config_path, corpus["passages"].manifest.run_id).items()}}

    # ---- reading -------------------------------------------------------------------------------
    def search(self, query: str, k: int = 10, context: Sequence[str] = ()) -> list[dict]:
        """The newest index's top ``k`` passages for a claim (and context facts, ``Title | sentence``),
        best first: ``{"pid", "title", "score", "text"}`` (``baleen search``)."""
        from baleen_storage.indexes import index_passages_ref, open_searcher

        searcher, ref = open_searcher(self.store, self.config.search, self.config.retriever.device)
        hits = searcher.search([query], [list(context)], k=k)[0]
        passages, sentences = index_passages_ref(self.store, ref)
        rows = {row["pid"]: row for row in self.store.passage_texts(passages, sentences, pids=[h.pid for h in hits]).to_pylist()}
        return [{"pid": h.pid, "title": rows[h.pid]["title"], "score": h.score, "text": rows[h.pid]["text"]} for h in hits]

    def verify(self, claim: str, hops: int = 2, system: str = "baleen") -> dict:
        """Verify one claim with the newest trained models (``baleen verify``): the label, P(SUPPORTED),
        the evidence facts and, for each hop, the passages retrieved and the facts kept."""
        verdict, titles = verify_claim(self.store, self.config, claim, hops, system)
        from baleen_core.condensing import READER_LABELS

        def facts(scored) -> list[dict]:
            return [{"title": s.title, "sid": s.sid, "fact": s.fact, "score": x} for s, x in scored]

        return {
            "claim": claim,
            "label": READER_LABELS[int(verdict.prob_supported > 0.5)],
            "prob_supported": verdict.prob_supported,
            "facts": facts(verdict.facts),
            "hops": [
                {"hop": h.hop, "retrieved": [{"pid": pid, "title": titles.get(pid), "score": score} for pid, score in h.retrieved], "kept": facts(h.kept)}
                for h in verdict.hops
            ],
        }

    def sql(self, query: str) -> pa.Table:
        """A read-only DuckDB query over every artifact (``baleen sql``)."""
        from baleen_storage.catalog import query as run_query

        return run_query(self.store, query)


def verify_claim(store: ArtifactStore, config: BaleenConfig, claim: str, hops: int, system: str = "baleen", models: dict[str, ArtifactRef] | None = None):
    """The engine on one claim with the store's newest trained models (or ``models``, as
    :func:`~baleen_flows.evaluation.trained_models` found them) and the context threshold the
    reader was trained with: (its verdict, title by pid of every passage it retrieved)."""
    from baleen_core.engine import ClaimInput, verify_claims
    from baleen_flows.evaluation import trained_models
    from baleen_storage.indexes import index_passages_ref
    from baleen_tasks.condensing import passages_by_pid
    from baleen_tasks.evaluation import engine_models, system_retriever, trained_config

    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; choose one of {', '.join(SYSTEMS)}")
    models = models or trained_models(store)
    passages, sentences = index_passages_ref(store, models["index"])
    config = trained_config(config, models)
    retriever = system_retriever(store, system, config, models, passages, sentences)
    stage1, stage2, reader = engine_models(models, config)
    texts = lambda pids: passages_by_pid(store, passages, sentences, pids)  # noqa: E731
    verdict = verify_claims(
        [ClaimInput("api", claim, hops)], retriever, texts, stage1, stage2, reader, config.condenser, config.reader,
        depth=config.evaluation.depth, k=config.evaluation.k, single_hop=system == "single-hop",
    )[0]
    titles = {pid: p.title for pid, p in texts({pid for h in verdict.hops for pid, _ in h.retrieved}).items()}
    return verdict, titles
