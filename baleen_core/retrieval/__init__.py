"""FLIPR, Baleen's retriever: encoder (``modeling``), inputs (``tokenization``), scoring
(``scoring``), compressed storage (``codec``), the index (``index``, ``building``) and search
(``search``)."""

from baleen_core.retrieval.codec import ResidualCodec
from baleen_core.retrieval.index import FliprIndex, ShardPlan, plan_shards
from baleen_core.retrieval.modeling import Flipr, FliprEncoder, resolve_device
from baleen_core.retrieval.scoring import flipr_aggregate, flipr_score, maxsim, maxsim_grouped
from baleen_core.retrieval.search import FliprSearcher, Hit, TokenMatch
from baleen_core.retrieval.tokenization import FliprTokenizer, QueryBatch, fact_text, passage_text

__all__ = [
    "Flipr",
    "FliprEncoder",
    "FliprIndex",
    "FliprSearcher",
    "FliprTokenizer",
    "Hit",
    "QueryBatch",
    "ResidualCodec",
    "ShardPlan",
    "TokenMatch",
    "fact_text",
    "flipr_aggregate",
    "flipr_score",
    "maxsim",
    "maxsim_grouped",
    "passage_text",
    "plan_shards",
    "resolve_device",
]
