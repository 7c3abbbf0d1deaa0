"""Updating an index in place when the corpus changes: what changed, where it was, and when an
update should give way to a rebuild.

A corpus version differs from the one an index was built from by passages *added* (a pid the
index never held), *updated* (same pid, other text) and *removed*. The update encodes the added
and updated passages with the index's own encoder and codec, appends them as delta shards, and
marks the positions of the updated and removed passages dead (:class:`FliprIndex` never returns
a dead position). Pids are title hashes, so an unchanged passage keeps its pid and its tokens.

The codec was trained for the corpus of its day. Two measurements say when it no longer fits
(:func:`rebuild_reason`): the share of passages added since it was trained, and the
reconstruction error of the new tokens against the error on the tokens it was trained for.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def text_digests(pids: Sequence[int], texts: Sequence[str]) -> dict[int, bytes]:
    """A 16-byte digest of every passage's text, by pid (what decides "updated")."""
    return {int(pid): hashlib.blake2b(text.encode(), digest_size=16).digest() for pid, text in zip(pids, texts, strict=True)}


@dataclass(frozen=True)
class PassageChanges:
    """How a corpus version differs from an older one, as sorted pid arrays."""

    added: np.ndarray
    updated: np.ndarray
    removed: np.ndarray

    @property
    def to_encode(self) -> np.ndarray:
        """Passages whose tokens the index does not hold yet: added and updated."""
        return np.union1d(self.added, self.updated)

    @property
    def retired(self) -> np.ndarray:
        """Passages whose stored tokens must never be returned again: updated and removed."""
        return np.union1d(self.updated, self.removed)

    @property
    def empty(self) -> bool:
        return not (len(self.added) or len(self.updated) or len(self.removed))

    def counts(self) -> dict[str, int]:
        return {"added": len(self.added), "updated": len(self.updated), "removed": len(self.removed)}


def passage_changes(old: Mapping[int, bytes], new: Mapping[int, bytes]) -> PassageChanges:
    """Compare two corpus versions given as pid → text digest (:func:`text_digests`)."""
    as_array = lambda pids: np.array(sorted(pids), dtype=np.int64)  # noqa: E731
    return PassageChanges(
        added=as_array(new.keys() - old.keys()),
        updated=as_array(pid for pid in new.keys() & old.keys() if new[pid] != old[pid]),
        removed=as_array(old.keys() - new.keys()),
    )


def retired_positions(position_of_pid: Mapping[int, int], retired: np.ndarray) -> np.ndarray:
    """Index positions of the retired passages (each is live at exactly one position)."""
    return np.array(sorted(position_of_pid[int(pid)] for pid in retired), dtype=np.int64)


@dataclass(frozen=True)
class RebuildLimits:
    """When an update gives way to a full rebuild with a codec trained on the current corpus."""

    max_added_share: float  # passages added since the codec was trained, over those it was trained for
    max_error_ratio: float  # new tokens' reconstruction error over the error on the codec's own tokens


def rebuild_reason(limits: RebuildLimits, codec_passages: int, added_since_codec: int, codec_error: float | None, delta_error: float | None) -> str | None:
    """Why the index should be rebuilt rather than updated (None: update it). ``codec_error`` is
    the reconstruction error on the tokens the codec was trained on, ``delta_error`` that on
    tokens encoded since (either None when not measured)."""
    share = added_since_codec / max(codec_passages, 1)
    if share > limits.max_added_share:
        return (
            f"{added_since_codec:,} passages added since the codec was trained for {codec_passages:,} "
            f"({share:.1%} > index.rebuild_added_share {limits.max_added_share:.0%})"
        )
    if codec_error and delta_error is not None and delta_error / codec_error > limits.max_error_ratio:
        return (
            f"the new passages' tokens reconstruct with error {delta_error:.4f}, {delta_error / codec_error:.2f}× the codec's "
            f"{codec_error:.4f} on its own tokens (> index.rebuild_error_ratio {limits.max_error_ratio})"
        )
    return None


@dataclass(frozen=True)
class UpdatedLists:
    """What an update writes next to the shards: the merged inverted lists and the dead positions."""

    ivf_offsets: np.ndarray
    ivf_docs: np.ndarray
    dead_positions: np.ndarray


def update_lists(
    base_offsets: np.ndarray,
    base_docs: np.ndarray,
    base_positions: int,
    base_dead: np.ndarray,
    newly_dead: np.ndarray,
    delta_codes: Sequence[np.ndarray],
    delta_doclens: Sequence[np.ndarray],
) -> UpdatedLists:
    """Inverted lists and dead positions of an index of ``base_positions`` stored passages after
    appending the delta shards (their codes and doclens, in order) and retiring ``newly_dead``."""
    from baleen_core.retrieval.index import build_ivf, merge_ivf

    n_centroids = len(base_offsets) - 1
    codes = np.concatenate(delta_codes) if delta_codes else np.zeros(0, dtype=np.uint16)
    doclens = np.concatenate(delta_doclens) if delta_doclens else np.zeros(0, dtype=np.int32)
    offsets, docs = merge_ivf(base_offsets, base_docs, *build_ivf(codes, doclens, n_centroids), base_positions)
    dead = np.union1d(base_dead.astype(np.int64), newly_dead.astype(np.int64))
    return UpdatedLists(offsets, docs, dead)
