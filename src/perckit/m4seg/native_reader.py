"""The native M⁴Seg file (``annotations/m4seg_{split}.json.gz``) read as rows: the prepass
(:func:`scan_native`), the split into contiguous shards for ``num_proc`` (:func:`native_shards`) and the row
iterator (:func:`iter_native`).

One reader: the file is parsed item by item with ``ijson`` (its C backend when installed) through the
bounded stream of :mod:`perckit.m4seg.native`, the prepass with ijson's prefix filter; each example becomes a
row by :func:`perckit.m4seg.rows.native_to_row`. A shard after the first parses and drops the examples before
it (:data:`SKIP_COST_PARSE` sizes the shards for that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Mapping, Sequence

import numpy as np

from ..errors import ReleaseFormatError
from ..errors import short_repr as _short
from .ids import IdGuard
from .ids import Int64Buffer
from .ids import derived_example_id
from .ids import occurrence_index
from .ids import stable_hash
from .native import gunzip as _gunzip
from .native import ijson_module as _ijson
from .native import iter_items
from .native import pull_translating as _pull_translating
from .native import read_errors
from .native import reading_error as _reading_error
from .native import top_level_kind
from .rows import EXAMPLE_ALIASES
from .rows import ConvertState
from .rows import _alias
from .rows import _MAPS
from .rows import native_to_row


@dataclass
class NativeScan:
    """What the prepass over a native file learnt (only run when needed: see the builder)."""

    kind: str  #: "list" or "object"
    count: int | None = None
    #: per example: -1 or the occurrence of a repeated pair_id (only when the examples have no example_id)
    occurrence: np.ndarray | None = None
    id_key: str | None = None  #: the key the prepass read ("example_id" or a pair-id alias)
    #: stable_hash of that key's value for every example: the reader checks it sees the same examples
    id_hashes: np.ndarray | None = field(default=None, repr=False)


def _iter_items(ijson_mod: Any, gz: BinaryIO, kind: str, where: str = "native M4Seg file", first: int = 0) -> Iterator[tuple[str | None, Any]]:
    """Top-level items, a repeated key in any object refused (:func:`perckit.m4seg.native.iter_items`)."""
    return iter_items(ijson_mod, gz, kind, where, first)


def first_example(opener: Callable, path: str, where: str) -> tuple[str, Mapping | None, str | None]:
    """(top-level kind, the first example or None, its key when the top level is an object)."""
    ijson = _ijson()
    with opener(path, "rb") as f:
        kind = top_level_kind(f, where)
    with opener(path, "rb") as f:
        with read_errors(ijson, where):
            for key, ex in _iter_items(ijson, _gunzip(f, where), kind, where):
                return kind, ex, None if key is None else str(key)
    return kind, None, None


def scan_native(opener: Callable, path: str, split: str, need_count: bool = False, size_order: str = "auto") -> NativeScan:
    """The prepass over a native file, run only when it is needed.

    It reads the first example. When the examples have an ``example_id`` and no count is needed
    (``num_proc`` <= 1), that is all. Otherwise it reads one field per example with ijson's prefix filter,
    keeping 8 bytes per example: the ``example_id`` (checked unique over the whole split) or, without ids,
    the pair id, from which the occurrence of every repeated pair_id is derived. The reader verifies every
    example against the prepass (``id_hashes``).
    """
    ijson = _ijson()
    where = f"M4Seg {split} split, {Path(path).name}"
    kind, first, first_key = first_example(opener, path, where)
    if first is not None and not isinstance(first, Mapping):
        raise ReleaseFormatError(f"{where}: example 0: expected an object, found {_short(first)}")
    if first is not None:
        # The first example converted (and dropped) here: a file of another format fails before generation.
        native_to_row(first, ConvertState(split, Path(path).name, size_order, quiet=True), first_key)
    if kind != "list" or first is None:
        return NativeScan(kind=kind, count=None if first is not None else 0)
    if first.get("example_id") is not None:
        if not need_count:
            return NativeScan(kind=kind)
        key = "example_id"
    else:
        key = next((k for k in EXAMPLE_ALIASES["pair_id"] if first.get(k) is not None), None)
        if key is None:
            raise ReleaseFormatError(f"{where}: example 0: expected an 'example_id' or a 'pair_id'/'id', found neither (keys {sorted(first)})")

    hashes = Int64Buffer()
    guard = IdGuard(where)
    dup: list[ReleaseFormatError] = []  # a repeated example_id is raised once the whole file has parsed
    with opener(path, "rb") as f:
        with read_errors(ijson, where):
            for v in ijson.items(_gunzip(f, where), f"item.{key}"):
                v = str(v)
                hashes.append(stable_hash(v))
                if key == "example_id" and not dup:
                    try:
                        guard.add(v)
                    except ReleaseFormatError as e:
                        dup.append(e)
    if key == "example_id" and not dup:
        guard.flush()
    if dup:
        raise dup[0]
    arr = hashes.array()
    occ = occurrence_index(arr) if key != "example_id" else None
    return NativeScan(kind=kind, count=int(arr.size), occurrence=occ, id_key=key, id_hashes=arr)


@dataclass
class NativeShard:
    """Examples ``[start, stop)`` of one native file (``stop=None``: to the end)."""

    path: str
    start: int = 0
    stop: int | None = None
    kind: str = "list"
    #: occurrence of repeated pair_ids for examples start..stop (None: ids come from the file)
    occurrence: np.ndarray | None = field(default=None, repr=False)
    #: the key the prepass read and the stable_hash of its value for examples start..stop
    id_key: str | None = None
    id_hashes: np.ndarray | None = field(default=None, repr=False)


def iter_native(opener: Callable, shards: Sequence[NativeShard], split: str, size_order: str = "auto") -> Iterator[dict]:
    """Rows of contiguous shards of one native file, parsed item by item in one pass with ijson through the
    guarded stream (:func:`perckit.m4seg.native.iter_items`). The examples before the first shard are parsed
    and dropped; every example is checked against the prepass's id hashes when there are some."""
    if not shards:
        return
    ctx = _Reading(shards, split, size_order)
    ijson = _ijson()
    start, stop, where = ctx.start, ctx.stop, ctx.where

    def rows(f: BinaryIO) -> Iterator[dict]:
        for i, (key, ex) in enumerate(_iter_items(ijson, _gunzip(f, where), shards[0].kind, where)):
            if i < start:
                continue
            if stop is not None and i >= stop:
                break
            yield ctx.convert(i, key, ex)

    # The parse runs in ``rows``; only pulling the next row translates reading errors, and the ``yield`` is
    # outside any ``try`` (native.pull_translating): a consumer that never exhausts the iterator leaves it
    # suspended until interpreter exit, and closing it then must not evaluate ``except`` clauses.
    errors, convert = _reading_error(ijson, where)
    with opener(ctx.path, "rb") as f:
        yield from _pull_translating(rows(f), errors, convert)
    ctx.state.finish()


class _Reading:
    """What the reader keeps over a run of shards: the range, the prepass's ids and the conversion."""

    def __init__(self, shards: Sequence[NativeShard], split: str, size_order: str) -> None:
        self.shards = shards
        self.path = shards[0].path
        self.start, self.stop = shards[0].start, shards[-1].stop
        occ_parts = [s.occurrence for s in shards]
        self.occurrence = np.concatenate(occ_parts) if all(o is not None for o in occ_parts) else None
        hash_parts = [s.id_hashes for s in shards]
        self.id_hashes = np.concatenate(hash_parts) if all(h is not None for h in hash_parts) else None
        self.id_key = shards[0].id_key
        self.state = ConvertState(split, Path(self.path).name, size_order)
        self.where = f"M4Seg {split} split, {Path(self.path).name}"

    def convert(self, i: int, key: Any, ex: Any) -> dict:
        """Example ``i`` (``key``: its key in an object file) checked against the prepass and converted."""
        j = i - self.start
        id_hashes, id_key = self.id_hashes, self.id_key
        if id_hashes is not None and isinstance(ex, _MAPS):
            v = ex.get(id_key)
            if j >= len(id_hashes) or v is None or stable_hash(str(v)) != id_hashes[j]:
                raise ReleaseFormatError(
                    f"{self.where}: example {i} does not have the {id_key} the prepass read there ({v!r}); the file "
                    "changed during the build or defeats the prepass: build it with num_proc=1"
                )
        fallback = None
        if key is not None:
            fallback = str(key)
        elif isinstance(ex, _MAPS) and ex.get("example_id") is None:
            pid = _alias(ex, EXAMPLE_ALIASES["pair_id"])
            if pid is not None:
                if self.occurrence is None:
                    raise ReleaseFormatError(
                        f"{self.state.where(str(pid))}: has no 'example_id' while the file's first example has one; "
                        "give every example an example_id or none"
                    )
                fallback = derived_example_id(str(pid), int(self.occurrence[j]))
        return native_to_row(ex, self.state, fallback)


#: Cost of skipping an example before a shard (parsing it with ijson), relative to converting it (about
#: 0.06-0.12 measured).
SKIP_COST_PARSE = 0.08


def shard_bounds(n: int, num_shards: int, skip_cost: float = SKIP_COST_PARSE) -> list[int]:
    """Boundaries of ``num_shards`` contiguous ranges over ``n`` examples with equal expected work.

    Shard j skips its ``b_j`` predecessors (cost ``skip_cost`` each) and converts its own: equal work T
    gives len_j = T - skip_cost * b_j, so b_{j+1} = (1 - r) b_j + T and T = n r / (1 - (1 - r)^num_shards).
    """
    r = float(skip_cost)
    t = n / num_shards if r <= 0 else n * r / (1 - (1 - r) ** num_shards)
    bounds, b = [0], 0.0
    for _ in range(num_shards - 1):
        b = (1 - r) * b + t
        bounds.append(int(round(b)))
    bounds.append(n)
    return bounds


def native_shards(path: str, scan: NativeScan | None, num_shards: int) -> list[NativeShard]:
    """Split a native file into ``num_shards`` contiguous example ranges (one shard when the count is unknown).

    The last range is open-ended, so every example is read even if the count were off.
    """
    kind = scan.kind if scan else "list"
    occ = scan.occurrence if scan else None
    hashes = scan.id_hashes if scan else None
    key = scan.id_key if scan else None
    if scan is None or scan.count is None or num_shards <= 1 or scan.count < 2 or kind != "list":
        return [NativeShard(path, 0, None, kind, occ, key, hashes)]
    n = scan.count
    bounds = shard_bounds(n, min(num_shards, n), SKIP_COST_PARSE)
    shards = []
    for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        shards.append(NativeShard(
            path, a, None if j == len(bounds) - 2 else b, kind,
            None if occ is None else occ[a:b], key, None if hashes is None else hashes[a:b],
        ))
    return shards
