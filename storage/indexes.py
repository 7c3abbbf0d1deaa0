"""Opening a published FLIPR index: the index artifact, its shards and the encoder it was built with."""

from __future__ import annotations

from collections.abc import Callable

from baleen_core.config import RetrieverConfig, SearchConfig
from baleen_core.retrieval import Flipr, FliprIndex, FliprSearcher, passage_text
from baleen_core.retrieval.bm25 import Bm25Retriever
from baleen_storage import lineage
from baleen_storage.store import ArtifactRef, ArtifactStore, CorruptArtifact, StoreError

PRODUCER = "index"


def index_retriever_config(store: ArtifactStore, ref: ArtifactRef, device: str = "auto") -> RetrieverConfig:
    """The retriever settings an index was built with (queries must be encoded the same way),
    its trained checkpoint read from this store even if the store was copied or moved since."""
    raw = dict(ref.manifest.params["retriever"])
    raw["device"] = device
    if raw.get("checkpoint"):
        raw["checkpoint"] = str(store.relocated(raw["checkpoint"]))
    return RetrieverConfig.model_validate(raw)


def shard_refs(store: ArtifactStore, ref: ArtifactRef) -> list[ArtifactRef]:
    return [store.get("flipr_shard", s["run_id"], s["producer"]) for s in ref.manifest.stats["shards"]]


def open_index(store: ArtifactStore, ref: ArtifactRef | None = None, storage: str = "codec", use_gpu: bool = False) -> tuple[FliprIndex, ArtifactRef]:
    """Load an index (default: the newest, of any producer) with its shards; ``storage`` as in
    :meth:`FliprIndex.open`."""
    ref = ref or store.latest("flipr_index")
    try:
        shards = shard_refs(store, ref)
    except CorruptArtifact:
        raise
    except StoreError as err:
        raise StoreError(f"index {ref.path} refers to a shard that is gone ({err}); rebuild it with `baleen index`") from err
    with store.reading(ref, *shards):
        return FliprIndex.open(ref.path, [s.path for s in shards], storage=storage, use_gpu=use_gpu), ref


def open_searcher(
    store: ArtifactStore,
    search: SearchConfig,
    device: str = "auto",
    ref: ArtifactRef | None = None,
    storage: str = "codec",
    full_interaction: bool = False,
    warn: Callable[[str], None] | None = None,
) -> tuple[FliprSearcher, ArtifactRef]:
    """A searcher over an index (default: the newest), with the encoder it was built with;
    ``full_interaction`` scores with every query position (ColBERT) instead of FLIPR's top k.
    ``warn`` hears of settings the index cannot honour as given (an ``nprobe`` above its centroids)."""
    index, ref = open_index(store, ref, storage)
    flipr = Flipr.load(index_retriever_config(store, ref, device))
    searcher = FliprSearcher(flipr, index, search.nprobe, search.ncandidates, full_interaction, k_claim_first_hop=search.k_claim_first_hop)
    if warn is not None and searcher.nprobe_note:
        warn(searcher.nprobe_note)
    return searcher, ref


def open_bm25(store: ArtifactStore, passages: ArtifactRef, sentences: ArtifactRef) -> Bm25Retriever:
    """BM25 over every passage's ``title | text`` (the round-0 labeller and the sparse baseline)."""
    table = store.passage_texts(passages, sentences)
    texts = [passage_text(t, x) for t, x in zip(table.column("title").to_pylist(), table.column("text").to_pylist(), strict=True)]
    return Bm25Retriever(table.column("pid").to_pylist(), texts)


TRAINED_TAG_PREFIX = "flipr-r"


def trained_flipr_tag(round_number: int) -> str:
    """Tag of FLIPR trained on round ``round_number``'s labels, and of the index built with it
    (producer ``index-<tag>``): ``flipr-r0``, ``flipr-r1``, …"""
    return f"{TRAINED_TAG_PREFIX}{round_number}"


#: Tag of FLIPR trained with full interaction (every query position counts, ColBERT-style) on the
#: last FLIPR round's labels, and of its index: the ``colbert-full`` system.
FULL_INTERACTION_TAG = "colbert-full"


def _by_age(refs: list[ArtifactRef]) -> list[ArtifactRef]:
    """Oldest first; the producer breaks ties (flipr-r1's index after flipr-r0's)."""
    return sorted(refs, key=lambda ref: (ref.manifest.created_at, ref.manifest.producer))


def newest_full_interaction_index(store: ArtifactStore, passages: ArtifactRef | None = None) -> ArtifactRef:
    """The newest index of FLIPR trained with full interaction (producer ``index-colbert-full``),
    of ``passages`` when given."""
    trained = store.refs("flipr_index", f"{PRODUCER}-{FULL_INTERACTION_TAG}")
    none = "no index of FLIPR trained with full interaction in this store; run `baleen train` with colbert-full among evaluation.systems"
    return lineage.newest_index_among(store, _by_age(trained), passages, None, none)


def newest_trained_index(store: ArtifactStore, passages: ArtifactRef | None = None) -> ArtifactRef:
    """The newest index built with a trained FLIPR (producer ``index-flipr-rN``, the highest round
    of the newest training run), of ``passages`` when given."""
    trained = [ref for ref in store.refs("flipr_index") if ref.manifest.producer.startswith(f"{PRODUCER}-{TRAINED_TAG_PREFIX}")]
    return lineage.newest_index_among(store, _by_age(trained), passages, None, "no index built with a trained FLIPR in this store; run `baleen train` first")


def index_passages_ref(store: ArtifactStore, ref: ArtifactRef) -> tuple[ArtifactRef, ArtifactRef]:
    """The passages and sentences artifacts an index was built from."""
    passages = lineage.index_passages(store, ref)
    return passages, store.get("sentences", passages.manifest.run_id, "corpus")


def refreshable_indexes(store: ArtifactStore) -> list[tuple[str | None, str | None]]:
    """The indexes a refresh keeps up to date, as (tag, checkpoint) for the index flow: the
    untrained index, the newest trained FLIPR's and the newest full-interaction one, each when
    the store has one (of any corpus version); the untrained one also when it has no index at
    all, so that search works after a first refresh."""
    found: list[tuple[str | None, str | None]] = []
    if store.refs("flipr_index", PRODUCER) or not store.refs("flipr_index"):
        found.append((None, None))
    for newest in (newest_trained_index, newest_full_interaction_index):
        try:
            ref = newest(store)
        except StoreError:
            continue
        found.append((ref.manifest.producer.removeprefix(f"{PRODUCER}-"), str(store.relocated(ref.manifest.params["retriever"]["checkpoint"]))))
    return found
