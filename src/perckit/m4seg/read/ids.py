"""Example ids of a split in flat memory: the duplicate check, the occurrence of repeated pair ids, and the
derived id of a native example without one.

A split holds up to 743k examples; these keep 8 bytes per id (int64 hashes), never the strings."""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from ...errors import ReleaseFormatError


class IdGuard:
    """Raises on a repeated example id, keeping 8 bytes per id (a sorted int64 array of hashes).

    Ids are checked in blocks of 10,000 against the sorted array, so memory stays flat-ish (6 MB for the 743k train
    ids) and the cost is linear. A 64-bit hash collision would be reported as a duplicate (probability about 1e-8
    for the whole train split)."""

    BLOCK = 10_000

    def __init__(self, where: str) -> None:
        self.where = where
        self._sorted = np.empty(0, dtype=np.int64)
        self._pending: dict[int, str] = {}
        self.count = 0

    def _dup(self, eid: str) -> ReleaseFormatError:
        return ReleaseFormatError(f"{self.where}: duplicate example_id {eid!r} (example ids must be unique within a split)")

    def add(self, eid: str) -> None:
        h = hash(eid)
        if h in self._pending:
            raise self._dup(eid)
        self._pending[h] = eid
        self.count += 1
        if len(self._pending) >= self.BLOCK:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        arr = np.sort(np.fromiter(self._pending.keys(), dtype=np.int64, count=len(self._pending)))
        pos = np.searchsorted(self._sorted, arr)
        if self._sorted.size:
            hit = self._sorted[np.minimum(pos, self._sorted.size - 1)] == arr
            if hit.any():
                raise self._dup(self._pending[int(arr[int(np.argmax(hit))])])
        self._sorted = np.insert(self._sorted, pos, arr)
        self._pending.clear()


def occurrence_index(pair_ids: Sequence[str] | np.ndarray) -> np.ndarray:
    """Per example: -1 when its pair_id is unique in the split, else its 0-based occurrence in file order."""
    h = np.asarray([hash(p) for p in pair_ids] if not isinstance(pair_ids, np.ndarray) else pair_ids, dtype=np.int64)
    out = np.full(h.size, -1, dtype=np.int32)
    if h.size == 0:
        return out
    order = np.argsort(h, kind="stable")
    _, starts, run, lengths = np.unique(h[order], return_index=True, return_inverse=True, return_counts=True)
    rank = np.arange(h.size) - starts[run]  # the runs of equal hashes in the sorted order
    dup = lengths[run] > 1
    out[order[dup]] = rank[dup]
    return out


def derived_example_id(pair_id: str, occurrence: int) -> str:
    """[inferred] id of a native example without ``example_id``: ``pair_id`` when unique, else ``pair_id#k``."""
    return pair_id if occurrence < 0 else f"{pair_id}#{occurrence}"


def stable_hash(text: str) -> int:
    """A 64-bit hash of a str that is the same in every process (``hash()`` is salted per interpreter)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little", signed=True)
