"""Corpus ingestion: upstream readers, sentence splitting, title normalisation and merging."""

from baleen_core.corpus.merge import CorpusBatch, CorpusMerger, CorpusStats, read_source, source_bytes
from baleen_core.corpus.readers import SourceRecord, read_abstracts, read_beir
from baleen_core.corpus.splitting import get_splitter
from baleen_core.corpus.titles import normalize_title, passage_id

__all__ = [
    "CorpusBatch",
    "CorpusMerger",
    "CorpusStats",
    "SourceRecord",
    "get_splitter",
    "normalize_title",
    "passage_id",
    "read_abstracts",
    "read_beir",
    "read_source",
    "source_bytes",
]
