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
    try:
        return store.get("passages", _passages_of_index_run(index), PASSAGES_PRODUCER).fingerprint == passages.fingerprint
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


def newest_index_of(store: ArtifactStore, passages: ArtifactRef, producer: str, claims: ArtifactRef | None = None) -> ArtifactRef:
    """The newest ``producer`` index built from ``passages``; if there is none, the error names the
    newest index there is and the passages it was built from."""
    candidates = store.refs("flipr_index", producer)
    if not candidates:
        raise StoreError(f"no {producer!r} index in the store at {store.root}; run `baleen index` first")
    matching = [ref for ref in candidates if indexes(store, ref, passages)]
    return matching[-1] if matching else check_index_of(store, candidates[-1], passages, claims)  # the latter raises
