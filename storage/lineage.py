"""Which artifacts belong together: stages pick their inputs by lineage, not by age.

A store can hold several datasets' runs at once. "The newest claims, the newest passages and the
newest index" may then come from three different corpora, and a stage that mixes them labels
nothing (no gold passage is in that index) or resolves facts against the wrong titles. So the
passages of a stage are the ones its claims were resolved against, and its index must be an index
of those passages; a mismatch is a :class:`LineageError` that names the runs and what to run.
"""

from __future__ import annotations

from baleen_storage.store import ArtifactRef, ArtifactStore, StoreError

PASSAGES_PRODUCER = "corpus"


class LineageError(StoreError):
    """Two inputs of one stage come from different data (e.g. claims of one corpus, index of another)."""


def _passages_of_index_run(index: ArtifactRef) -> str:
    return index.manifest.stats["passages_run"]


def index_passages(store: ArtifactStore, index: ArtifactRef) -> ArtifactRef:
    """The passages artifact ``index`` was built from."""
    return store.get("passages", _passages_of_index_run(index), PASSAGES_PRODUCER)


def claims_passages(store: ArtifactStore, claims: ArtifactRef) -> ArtifactRef:
    """The passages artifact ``claims`` were resolved against."""
    wanted = claims.manifest.inputs.get("passages")
    found = store.find("passages", PASSAGES_PRODUCER, wanted) if wanted else None
    if found is None:
        raise LineageError(
            f"the claims of run {claims.manifest.run_id} were resolved against passages that are no longer in the store; "
            f"resolve them again against the passages you have: `baleen claims DATASET`"
        )
    return found


def passages_for_claims(store: ArtifactStore, claims: ArtifactRef, passages_run: str | None = None) -> ArtifactRef:
    """``passages_run``'s passages if given (they must be the claims' own), else the claims' passages."""
    own = claims_passages(store, claims)
    if passages_run is None:
        return own
    given = store.get("passages", passages_run, PASSAGES_PRODUCER)
    if given.fingerprint != own.fingerprint:
        raise LineageError(
            f"the claims of run {claims.manifest.run_id} were resolved against passages run {own.manifest.run_id}, "
            f"not passages run {passages_run}; resolve them against it first (`baleen claims DATASET --passages-run {passages_run}`)"
        )
    return given


def indexes(store: ArtifactStore, index: ArtifactRef, passages: ArtifactRef) -> bool:
    """Whether ``index`` was built from ``passages`` (or from a run with the same content)."""
    if _passages_of_index_run(index) == passages.manifest.run_id:
        return True  # no manifest to read
    try:
        return index_passages(store, index).fingerprint == passages.fingerprint
    except StoreError:
        return False


def check_index_of(store: ArtifactStore, index: ArtifactRef, passages: ArtifactRef, claims: ArtifactRef | None = None) -> ArtifactRef:
    """``index`` itself if it indexes ``passages``, else a :class:`LineageError` naming both runs."""
    if not indexes(store, index, passages):
        built_from = _passages_of_index_run(index)
        whose = f"the claims of run {claims.manifest.run_id} were resolved against" if claims else "this stage reads"
        raise LineageError(
            f"index run {index.manifest.run_id} ({index.manifest.producer}) was built from passages run {built_from}, "
            f"but {whose} passages run {passages.manifest.run_id}; build an index of those passages "
            f"(`baleen index --passages-run {passages.manifest.run_id}`) or pick runs that belong together"
        )
    return index


def newest_index_among(
    store: ArtifactStore, candidates: list[ArtifactRef], passages: ArtifactRef | None, claims: ArtifactRef | None, none_message: str
) -> ArtifactRef:
    """The newest of ``candidates`` (oldest first) built from ``passages`` (any, when None); if
    none is, the error names the newest candidate and the passages it was built from."""
    if not candidates:
        raise StoreError(none_message)
    if passages is None:
        return candidates[-1]
    matching = [ref for ref in candidates if indexes(store, ref, passages)]
    return matching[-1] if matching else check_index_of(store, candidates[-1], passages, claims)  # the latter raises


def newest_index_of(store: ArtifactStore, passages: ArtifactRef | None, producer: str, claims: ArtifactRef | None = None) -> ArtifactRef:
    """The newest ``producer`` index built from ``passages`` (see :func:`newest_index_among`)."""
    none = f"no {producer!r} index in the store at {store.root}; run `baleen index` first"
    return newest_index_among(store, store.refs("flipr_index", producer), passages, claims, none)


def index_for(
    store: ArtifactStore, passages: ArtifactRef, producer: str, index_run: str | None = None, claims: ArtifactRef | None = None
) -> ArtifactRef:
    """Run ``index_run``'s ``producer`` index if given (it must index ``passages``), else the newest one that does."""
    if index_run:
        return check_index_of(store, store.get("flipr_index", index_run, producer), passages, claims)
    return newest_index_of(store, passages, producer, claims)
