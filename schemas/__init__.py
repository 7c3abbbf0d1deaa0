"""Every artifact's columns, defined once.

Each artifact is a set of Parquet files plus a manifest (see ``baleen_storage``). Its schema lives
here as an :class:`ArtifactSchema`; writers, readers, validation gates and the DuckDB catalog all
take columns from this module, so a column is renamed in exactly one place.
"""

from baleen_schemas.artifacts import (
    ARTIFACTS,
    CLAIMS,
    FILE_ARTIFACTS,
    FLIPR_CHECKPOINT,
    FLIPR_CODEC,
    FLIPR_INDEX,
    FLIPR_SHARD,
    INDEX_PASSAGES,
    FileArtifactSpec,
    file_artifact_spec,
    GOLD_FACTS,
    HOP_LABELS,
    HOP_RANGE,
    LABELS,
    PASSAGES,
    READER_CHECKPOINT,
    REJECTS,
    SENTENCES,
    STAGE1_CHECKPOINT,
    STAGE2_CHECKPOINT,
    TRAINING_STEPS,
    ArtifactSchema,
    RejectReason,
    artifact_schema,
)

__all__ = [
    "ARTIFACTS",
    "CLAIMS",
    "FILE_ARTIFACTS",
    "FLIPR_CHECKPOINT",
    "FLIPR_CODEC",
    "FLIPR_INDEX",
    "FLIPR_SHARD",
    "INDEX_PASSAGES",
    "FileArtifactSpec",
    "file_artifact_spec",
    "GOLD_FACTS",
    "HOP_LABELS",
    "HOP_RANGE",
    "LABELS",
    "PASSAGES",
    "READER_CHECKPOINT",
    "REJECTS",
    "SENTENCES",
    "STAGE1_CHECKPOINT",
    "STAGE2_CHECKPOINT",
    "TRAINING_STEPS",
    "ArtifactSchema",
    "RejectReason",
    "artifact_schema",
]
