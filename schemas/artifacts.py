"""pyarrow schemas of every artifact: corpus, claims, index, labels, training and evaluation.

A schema's ``version`` goes into every manifest and into the step fingerprints: bump it when the
columns change, and artifacts written under the old version are recomputed instead of reused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import pyarrow as pa

#: HoVer's labels. The test release has no labels, so ``claims.label`` may be null there.
LABELS = ("SUPPORTED", "NOT_SUPPORTED")
#: HoVer claims need 2, 3 or 4 supporting documents.
HOP_RANGE = (2, 4)


def _col(name: str, type_: pa.DataType, doc: str, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


@dataclass(frozen=True)
class ArtifactSchema:
    """One artifact: its name, schema version, columns and unique key."""

    name: str
    version: int
    schema: pa.Schema
    key: tuple[str, ...]
    description: str
    #: Rows are sorted by these columns within a write (helps DuckDB's zone maps).
    sort_by: tuple[str, ...] = field(default=())
    #: Every run of it passes a validation gate (``baleen_tasks.gates``) before later stages may
    #: read it: until then its step's outputs are held back (see ``ArtifactStore.release_state``).
    gated: bool = False

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)


class RejectReason(str, Enum):
    """Why a row was quarantined in ``rejects`` instead of reaching its artifact."""

    INVALID_JSON = "invalid_json"
    INVALID_UTF8 = "invalid_utf8"
    MISSING_FIELD = "missing_field"
    WRONG_TYPE = "wrong_type"
    EMPTY_TITLE = "empty_title"
    EMPTY_TEXT = "empty_text"
    DUPLICATE_TITLE = "duplicate_title"
    DUPLICATE_UID = "duplicate_uid"
    INVALID_LABEL = "invalid_label"
    INVALID_NUM_HOPS = "invalid_num_hops"
    UNKNOWN_TITLE = "unknown_title"
    SID_OUT_OF_RANGE = "sid_out_of_range"
    DUPLICATE_FACT = "duplicate_fact"


PASSAGES = ArtifactSchema(
    name="passages",
    gated=True,
    version=1,
    description="One row per corpus passage (a Wikipedia intro), after merging all sources.",
    key=("pid",),
    schema=pa.schema(
        [
            _col("pid", pa.int64(), "Stable passage id: 63-bit hash of the NFC-normalised title."),
            _col("title", pa.string(), "NFC-normalised title; the join key with HoVer facts."),
            _col("source", pa.string(), "Source name, e.g. 'abstracts' or 'beir'."),
            _col("source_id", pa.string(), "The record's id in its source file.", nullable=True),
            _col("source_file", pa.string(), "File the passage was read from, relative to its source root."),
            _col("source_line", pa.int64(), "1-based line of that file."),
            _col("n_sentences", pa.int32(), "Number of sentences; sentence ids run 0..n_sentences-1."),
            _col("n_chars", pa.int32(), "Characters of text over all sentences."),
        ]
    ),
)

SENTENCES = ArtifactSchema(
    name="sentences",
    gated=True,
    version=1,
    description="One row per sentence; (pid, sid) is HoVer's (title, sentence index).",
    key=("pid", "sid"),
    sort_by=("pid", "sid"),
    schema=pa.schema(
        [
            _col("pid", pa.int64(), "Passage id (passages.pid)."),
            _col("sid", pa.int32(), "Sentence index inside the passage, from 0."),
            _col("text", pa.string(), "Sentence text, whitespace-trimmed (may be '' to keep ids aligned)."),
        ]
    ),
)

CLAIMS = ArtifactSchema(
    name="claims",
    gated=True,
    version=1,
    description="One row per HoVer claim; flagged, never dropped, when some gold facts do not resolve.",
    key=("uid",),
    schema=pa.schema(
        [
            _col("uid", pa.string(), "HoVer claim uid."),
            _col("claim", pa.string(), "Claim text."),
            _col("label", pa.string(), "SUPPORTED or NOT_SUPPORTED (null in an unlabelled test split).", nullable=True),
            _col("num_hops", pa.int8(), "Number of supporting documents HoVer gives (2-4)."),
            _col("split", pa.string(), "train, dev or test (from the file it came from)."),
            _col("hpqa_id", pa.string(), "HotpotQA question the claim was built from.", nullable=True),
            _col("n_facts", pa.int16(), "Supporting facts listed upstream."),
            _col("n_resolved_facts", pa.int16(), "Of those, facts that resolved to a corpus sentence."),
            _col("n_gold_passages", pa.int16(), "Distinct passages among the resolved facts."),
            _col("resolved", pa.bool_(), "True when every listed fact resolved (use only these for training)."),
        ]
    ),
)

GOLD_FACTS = ArtifactSchema(
    name="gold_facts",
    gated=True,
    version=1,
    description="One row per supporting fact that resolved to a corpus sentence.",
    key=("uid", "pid", "sid"),
    sort_by=("uid", "pid", "sid"),
    schema=pa.schema(
        [
            _col("uid", pa.string(), "Claim uid (claims.uid)."),
            _col("title", pa.string(), "NFC-normalised title of the supporting passage."),
            _col("sid", pa.int32(), "Sentence index inside that passage."),
            _col("pid", pa.int64(), "Passage id the title resolved to (passages.pid)."),
        ]
    ),
)

REJECTS = ArtifactSchema(
    name="rejects",
    gated=True,
    version=1,
    description="Quarantined input rows with the reason; input rows = output rows + rejects, always.",
    key=("artifact", "source_file", "line", "key"),
    schema=pa.schema(
        [
            _col("artifact", pa.string(), "Artifact the row was meant for (passages, claims, gold_facts)."),
            _col("reason", pa.string(), "A RejectReason value."),
            _col("source_file", pa.string(), "Input file, relative to its source root."),
            _col("line", pa.int64(), "1-based line in that file where the record starts (for a JSON array file, the line of its element's opening brace)."),
            _col("key", pa.string(), "What the row was about: a title (else the record's id), a uid, 'uid|title|sid'."),
            _col("detail", pa.string(), "Human-readable explanation: what to fix."),
            _col("record", pa.string(), "The offending input, truncated to 500 characters.", nullable=True),
        ]
    ),
)

INDEX_PASSAGES = ArtifactSchema(
    name="index_passages",
    gated=True,
    version=1,
    description="One row per live indexed passage: where its tokens live in a FLIPR index (an updated index also stores retired passages, at positions no row names).",
    key=("pid",),
    sort_by=("position",),
    schema=pa.schema(
        [
            _col("pid", pa.int64(), "Passage id (see passages)."),
            _col("position", pa.int64(), "Row of the passage in the index (shard order), 0-based."),
            _col("shard", pa.int32(), "Index shard that holds it."),
            _col("n_tokens", pa.int32(), "Document tokens stored, [CLS] [D] title | text [SEP], truncated to doc_maxlen."),
        ]
    ),
)

HOP_LABELS = ArtifactSchema(
    name="hop_labels",
    gated=True,
    version=1,
    description="Latent hop ordering: per training claim and hop, the positive gold passage, its rank and hard negatives.",
    key=("round", "uid", "hop"),
    sort_by=("round", "uid", "hop"),
    schema=pa.schema(
        [
            _col("round", pa.int32(), "Label round: 0 = heuristic retriever, r+1 = FLIPR trained on round r."),
            _col("labeller", pa.string(), "Retriever that ranked: 'bm25', 'flipr', 'flipr+bm25' (search.fusion: bm25), 'bm25>flipr' (search.fusion: bm25-first-hop) or 'flipr+bm25>flipr' (search.fusion: bm25-fused-first-hop); ' · bm25 negatives' appended when BM25 supplied every other hard negative (labels.bm25_negatives)."),
            _col("uid", pa.string(), "Claim uid."),
            _col("hop", pa.int32(), "Hop number, from 1."),
            _col("context_pids", pa.list_(pa.int64()), "Gold passages assigned to earlier hops."),
            _col("context_facts", pa.list_(pa.string()), "Their gold sentences as 'title | sentence': the query context."),
            _col("positive_pid", pa.int64(), "The gold passage assigned to this hop."),
            _col("positive_rank", pa.int32(), "Its 1-based rank for claim + context; null = beyond the search depth.", nullable=True),
            _col("positive_score", pa.float64(), "Its exact retriever score."),
            _col("negative_pids", pa.list_(pa.int64()), "Best-ranked non-gold passages (hard negatives)."),
            _col("remaining_gold_pids", pa.list_(pa.int64()), "Gold passages not yet assigned before this hop (incl. the positive)."),
            _col("remaining_gold_ranks", pa.list_(pa.int32()), "Their ranks, aligned; null = beyond the depth."),
            _col("reached", pa.bool_(), "positive_rank is not null."),
        ]
    ),
)

TRAINING_STEPS = ArtifactSchema(
    name="training_steps",
    version=2,
    description="One row per optimizer step of a training run.",
    key=("model", "round", "step"),
    sort_by=("step",),
    schema=pa.schema(
        [
            _col("model", pa.string(), "Which model: 'flipr', 'stage1', 'stage2' or 'reader'."),
            _col("round", pa.int32(), "Label round the training examples came from."),
            _col("epoch", pa.int32(), "Epoch, from 0."),
            _col("step", pa.int64(), "Optimizer step, from 0, over all epochs."),
            _col("loss", pa.float64(), "Training loss of the step's batch."),
            _col("val_loss", pa.float64(), "Mean loss on the held-out claims, on the steps where it was measured.", nullable=True),
            _col("lr", pa.float64(), "Backbone learning rate after the step."),
            _col("examples", pa.int32(), "Examples in the batch."),
            _col("seconds", pa.float64(), "Wall time of the step."),
        ]
    ),
)

PREDICTIONS = ArtifactSchema(
    name="predictions",
    gated=True,
    version=2,
    description="The engine's verdict per evaluated claim and system: label, P(SUPPORTED) and the final facts, best first.",
    key=("system", "uid"),
    sort_by=("system", "uid"),
    schema=pa.schema(
        [
            _col("system", pa.string(), "Evaluated system, e.g. 'baleen', 'bm25-multihop', 'single-hop'."),
            _col("uid", pa.string(), "Claim uid."),
            _col("hops", pa.int32(), "Hops the engine ran for this claim."),
            _col("label", pa.string(), "Predicted label: SUPPORTED when prob_supported > 0.5."),
            _col("prob_supported", pa.float64(), "The reader's P(SUPPORTED)."),
            _col("fact_pids", pa.list_(pa.int64()), "Final facts (the last hop's evidence: the reference's L3x rule), best first: passage ids."),
            _col("fact_sids", pa.list_(pa.int32()), "Their sentence ids, aligned."),
            _col("fact_scores", pa.list_(pa.float64()), "Their stage-2 scores, aligned."),
        ]
    ),
)

HOP_TRACES = ArtifactSchema(
    name="hop_traces",
    gated=True,
    version=3,
    description="What the engine did at each hop: passages retrieved, new facts stage 2 read, the next hop's context, the evidence.",
    key=("system", "uid", "hop"),
    sort_by=("system", "uid", "hop"),
    schema=pa.schema(
        [
            _col("system", pa.string(), "Evaluated system."),
            _col("uid", pa.string(), "Claim uid."),
            _col("hop", pa.int32(), "Hop number, from 1."),
            _col("retrieved_pids", pa.list_(pa.int64()), "Passages the condensers read at this hop, best first (none with a fact in the hop's context; an earlier hop's may recur)."),
            _col("retrieved_scores", pa.list_(pa.float64()), "Their retriever scores, aligned."),
            _col("pool_pids", pa.list_(pa.int64()), "Passages this hop added to the claim's Retrieval@depth pool (distinct over the claim's hops), in rank order: the hop that first retrieved them."),
            _col("stage1_pids", pa.list_(pa.int64()), "New facts stage 1 put forward to stage 2: passage ids, best first."),
            _col("stage1_sids", pa.list_(pa.int32()), "Their sentence ids, aligned."),
            _col("stage1_scores", pa.list_(pa.float64()), "Their stage-1 scores, aligned."),
            _col("stage2_pids", pa.list_(pa.int64()), "Every fact stage 2 read, in its input order (the context first): passage ids."),
            _col("stage2_sids", pa.list_(pa.int32()), "Their sentence ids, aligned."),
            _col("stage2_scores", pa.list_(pa.float64()), "Their stage-2 scores, aligned."),
            _col("kept_pids", pa.list_(pa.int64()), "The next hop's context: of stage 2's best 5, those scoring above the threshold (0): passage ids, best first."),
            _col("kept_sids", pa.list_(pa.int32()), "Their sentence ids, aligned."),
            _col("kept_scores", pa.list_(pa.float64()), "Their stage-2 scores, aligned."),
            _col(
                "evidence_pids", pa.list_(pa.int64()),
                "The evidence (the reference's L3x): of stage 2's best 5, those above min(0, the second best), from the first 4 passages; "
                "the last hop's are the claim's final facts. Passage ids, best first.",
            ),
            _col("evidence_sids", pa.list_(pa.int32()), "Their sentence ids, aligned."),
            _col("evidence_scores", pa.list_(pa.float64()), "Their stage-2 scores, aligned."),
        ]
    ),
)

CLAIM_METRICS = ArtifactSchema(
    name="claim_metrics",
    version=4,
    description="HoVer's metrics per evaluated claim and system, computed from predictions, hop_traces and gold_facts.",
    key=("system", "uid"),
    sort_by=("system", "uid"),
    schema=pa.schema(
        [
            _col("system", pa.string(), "Evaluated system."),
            _col("uid", pa.string(), "Claim uid."),
            _col("num_hops", pa.int32(), "The claim's hop count (2, 3 or 4)."),
            _col("gold_label", pa.string(), "HoVer's label; null on an unlabelled split.", nullable=True),
            _col("label", pa.string(), "Predicted label."),
            _col("passage_precision", pa.float64(), "Passages of the final facts against the gold passages."),
            _col("passage_recall", pa.float64(), "Passage recall."),
            _col("passage_f1", pa.float64(), "Passage F1."),
            _col("passage_em", pa.float64(), "1 when the final facts' passages are exactly the gold passages."),
            _col("sentence_precision", pa.float64(), "Final facts against the gold facts."),
            _col("sentence_recall", pa.float64(), "Sentence recall."),
            _col("sentence_f1", pa.float64(), "Sentence F1."),
            _col("sentence_em", pa.float64(), "1 when the final facts are exactly the gold facts."),
            _col("retrieval_at_hops", pa.float64(), "1 when every gold passage was read by the condensers at some hop (k per hop)."),
            _col("depth", pa.int32(), "The engine's retrieval depth: the size of the claim's pool (Baleen: 100)."),
            _col("retrieval_at_depth", pa.float64(), "1 when every gold passage is among the first `depth` distinct passages retrieved over the hops (pool_pids): Retrieval@100 at depth 100."),
            _col("label_accuracy", pa.float64(), "1 when the predicted label is right; null without a gold label.", nullable=True),
            _col("hover_score", pa.float64(), "HoVer score: label right and evidence from every gold passage; null without a gold label.", nullable=True),
            _col("gold_first_hop", pa.list_(pa.int32()), "Per gold passage (by pid), the hop that first retrieved it (added it to the pool, pool_pids); null = never."),
            _col("gold_retrieved", pa.float64(), "Share of the gold passages retrieved at any hop."),
            _col("gold_in_stage1", pa.float64(), "Share of the gold passages stage 1 put forward to stage 2 at any hop."),
            _col("gold_in_facts", pa.float64(), "Share of the gold passages among the final facts' passages (= passage_recall)."),
            _col("final_facts", pa.int32(), "How many final facts the system kept."),
            _col("final_passages", pa.int32(), "From how many distinct passages."),
        ]
    ),
)

ARTIFACTS: dict[str, ArtifactSchema] = {
    a.name: a for a in (PASSAGES, SENTENCES, CLAIMS, GOLD_FACTS, REJECTS, INDEX_PASSAGES, HOP_LABELS, TRAINING_STEPS, PREDICTIONS, HOP_TRACES, CLAIM_METRICS)
}


@dataclass(frozen=True)
class FileArtifactSpec:
    """An artifact made of binary files (arrays, faiss structures, checkpoints) plus a manifest.

    Not queryable as a table; its manifest (with ``stats``) is, through the ``artifacts`` view.
    """

    name: str
    version: int
    description: str
    files: dict[str, str]


FLIPR_CODEC = FileArtifactSpec(
    name="flipr_codec",
    version=1,
    description="faiss k-means centroids and the residual product quantiser, trained on a sample of passages.",
    files={"centroids.npy": "[K, dim] float32 unit centroids", "residual_pq.faiss": "faiss ProductQuantizer (codec pq only)"},
)
FLIPR_SHARD = FileArtifactSpec(
    name="flipr_shard",
    version=1,
    description="One shard of encoded, compressed passages (producer shard-NNNNN).",
    files={
        "pids.npy": "[N] int64 passage ids",
        "doclens.npy": "[N] int32 tokens per passage",
        "codes.npy": "[T] nearest centroid per token",
        "payload.npy": "[T, m] uint8 PQ residual codes, or [T, dim] float16 (codec fp16)",
        "fp16.npy": "[T, dim] float16 uncompressed copy (index.keep_fp16 only)",
    },
)
FLIPR_INDEX = FileArtifactSpec(
    name="flipr_index",
    version=1,
    description="The merged FLIPR index: codec, inverted lists; its manifest lists the shards and encoder.",
    files={
        "centroids.npy": "copied from flipr_codec",
        "residual_pq.faiss": "copied from flipr_codec (codec pq)",
        "ivf_offsets.npy": "[K+1] int64 CSR offsets",
        "ivf_docs.npy": "passage positions per centroid",
    },
)

FLIPR_CHECKPOINT = FileArtifactSpec(
    name="flipr_checkpoint",
    version=1,
    description="A trained FLIPR (producer flipr-rN: trained on round-N hop labels); use as retriever.checkpoint.",
    files={"backbone/": "Hugging Face model + tokenizer", "flipr_head.pt": "projection state dict (weights_only)", "flipr_config.json": "retriever settings"},
)

_SEQUENCE_MODEL_FILES = {"backbone/": "Hugging Face model + tokenizer", "head.pt": "linear head state dict (weights_only)", "model_config.json": "kind and input layout"}
STAGE1_CHECKPOINT = FileArtifactSpec(
    name="stage1_checkpoint",
    version=1,
    description="A trained condenser stage 1 (producer stage1-rN: trained on round-N hop labels); use as condenser.stage1_checkpoint.",
    files=_SEQUENCE_MODEL_FILES,
)
STAGE2_CHECKPOINT = FileArtifactSpec(
    name="stage2_checkpoint",
    version=1,
    description="A trained condenser stage 2 (producer stage2-rN); use as condenser.stage2_checkpoint.",
    files=_SEQUENCE_MODEL_FILES,
)
READER_CHECKPOINT = FileArtifactSpec(
    name="reader_checkpoint",
    version=1,
    description="A trained reader (producer reader-rN); use as reader.checkpoint. Its stats hold the dev evaluation.",
    files=_SEQUENCE_MODEL_FILES,
)

FILE_ARTIFACTS: dict[str, FileArtifactSpec] = {
    a.name: a for a in (FLIPR_CODEC, FLIPR_SHARD, FLIPR_INDEX, FLIPR_CHECKPOINT, STAGE1_CHECKPOINT, STAGE2_CHECKPOINT, READER_CHECKPOINT)
}


def file_artifact_spec(name: str) -> FileArtifactSpec:
    try:
        return FILE_ARTIFACTS[name]
    except KeyError:
        raise KeyError(f"unknown file artifact {name!r}; known: {', '.join(sorted(FILE_ARTIFACTS))}") from None


def artifact_schema(name: str) -> ArtifactSchema:
    """The schema registered under ``name``; a clear error lists the known ones."""
    try:
        return ARTIFACTS[name]
    except KeyError:
        raise KeyError(f"unknown artifact {name!r}; known artifacts: {', '.join(sorted(ARTIFACTS))}") from None
