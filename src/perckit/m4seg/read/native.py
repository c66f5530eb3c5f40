"""The native M⁴Seg file (``annotations/m4seg_{split}.json.gz``) read as rows: the bounded stream and its
parse, the prepass (:func:`scan_native`), the split into contiguous shards for ``num_proc``
(:func:`native_shards`) and the row iterator (:func:`iter_native`).

Examples come from :func:`read_examples` (ijson), rows from :func:`perckit.m4seg.rows.native_rows`, 1,000
examples at a time. A shard after the first parses and drops the examples before it (:data:`SKIP_COST_PARSE` sizes
the shards for that).

Everything here is bounded by documented limits, whatever the file holds:

- :class:`JsonGuard` refuses nesting deeper than :data:`MAX_JSON_DEPTH` and an example or a string longer
  than :data:`MAX_EXAMPLE_BYTES` before the parser sees them; it skips one UTF-8 byte-order mark at the very
  start of the stream (the project's one BOM rule, :data:`perckit.io.jsonio.UTF8_BOM`) and refuses one anywhere
  else outside a string, naming its byte offset.
- :func:`read_examples` parses examples with ijson and refuses a JSON object that repeats a key (ijson, like
  ``json``, would keep only the last value).
"""

from __future__ import annotations

import collections
import gzip
import itertools
import re
from array import array
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Mapping, Sequence

import numpy as np

from ...errors import PerckitError, ReleaseFormatError, short_repr as _short
from ...io.jsonio import UTF8_BOM
from ..rows import EXAMPLE_ALIASES, ConvertState, _alias, _MAPS, native_parts, native_rows, native_to_row
from .ids import IdGuard, derived_example_id, occurrence_index, stable_hash

#: Deepest JSON nesting accepted in a native file (an example is about 7 levels deep). ijson keeps one
#: prefix string per level, each as long as the path to it: 100,000 levels would need tens of gigabytes.
MAX_JSON_DEPTH = 64
#: Largest decompressed JSON accepted for one example, and for one string (real examples are a few KB).
MAX_EXAMPLE_BYTES = 64 << 20
#: Errors of a corrupt or truncated gzip stream (``BadGzipFile`` is an ``OSError``, a cut stream an ``EOFError``).
GZIP_ERRORS = (OSError, EOFError, zlib.error)

_ESCAPE = re.compile(rb"\\.", re.S)
#: Every byte but the JSON structure the scan needs: quotes, brackets and the colons that end object keys.
_NOT_TOKENS = bytes(c for c in range(256) if c not in b'"[]{}:')
_STEP = np.zeros(256, dtype=np.int64)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


def ijson_module():
    try:
        import ijson
    except ImportError as e:  # pragma: no cover - ijson is a core dependency
        raise ImportError("reading the native M4Seg JSON needs ijson: pip install ijson") from e
    return ijson


def json_error(e: Exception) -> str:
    """ijson's parse error as one line of text (yajl gives bytes with the context on several lines)."""
    msg = e.args[0] if e.args else e
    if isinstance(msg, bytes):
        msg = msg.decode("utf-8", "replace")
    return " ".join(str(msg).split())


def pull_translating(items: Iterator, errors: tuple, convert: Callable[[BaseException], Exception]) -> Iterator:
    """The items of ``items``; an exception of ``errors`` raised while *pulling* the next item is raised as
    ``convert(e)``. The ``yield`` sits outside the ``try``: an exception the consumer throws in (GeneratorExit when
    it closes the iterator) is never matched against ``errors``, so it passes through unchanged, and a reader left
    suspended until interpreter exit (a streaming ``next(iter(ds))``) closes quietly. (A ``yield`` inside ``try ...
    except ijson.JSONError`` evaluates that clause at finalisation, when module globals are already None: "Exception
    ignored ... TypeError: catching classes that do not inherit from BaseException".)"""
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except errors as e:
            raise convert(e) from None
        yield item


def reading_error(ijson_mod: Any, where: str) -> tuple[tuple, Callable[[BaseException], Exception]]:
    """``(errors, convert)`` for :func:`pull_translating`: ijson's and gzip's errors as
    :class:`ReleaseFormatError` naming ``where``."""

    def convert(e: BaseException) -> Exception:
        if isinstance(e, ijson_mod.JSONError):
            return ReleaseFormatError(f"{where}: invalid JSON: {json_error(e)}")
        return ReleaseFormatError(f"{where}: unreadable gzip data ({type(e).__name__}: {e})")

    return (ijson_mod.JSONError, *GZIP_ERRORS), convert


class JsonGuard:
    """A read-only stream over decompressed JSON that refuses, before the parser sees them, the inputs that
    would make it allocate without bound: nesting deeper than :data:`MAX_JSON_DEPTH`, and an example (anything
    below the top level) or a string longer than :data:`MAX_EXAMPLE_BYTES`.

    A UTF-8 BOM as the first bytes of the stream is skipped; a BOM anywhere else outside a string raises,
    naming its offset in the decompressed stream (inside a string it is the character U+FEFF).

    Each read is scanned at C speed: escapes are removed by a regex, everything but quotes, brackets and colons by
    ``bytes.translate``, and NumPy counts the brackets outside strings. The state (depth, inside a string, a pending
    escape) carries across reads. Invalid JSON is left to the parser.

    With ``count_keys``, the same scan counts, below the top level, the colons outside strings (one per key of an
    object) and the ``{``; :attr:`items` gets their running totals at the end of each top-level item that is an
    object or a list, for :func:`read_examples`' repeated-key check."""

    def __init__(self, raw: BinaryIO, where: str, count_keys: bool = False) -> None:
        self._raw, self._where = raw, where
        self._depth = self._in_str = self._item_bytes = self._str_bytes = self._keys = self._objects = 0
        self._escaped = self._started = False
        #: bytes of the decompressed stream read so far (the skipped BOM included)
        self.offset = 0
        #: (keys, objects) below the top level up to the end of each item scanned so far, oldest first (count_keys)
        self.items: collections.deque | None = collections.deque() if count_keys else None

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        if not self._started and data:  # (ijson's read(0), to tell bytes from text, does not start the stream)
            self._started = True
            while data and len(data) < len(UTF8_BOM) and UTF8_BOM.startswith(data):
                more = self._raw.read(len(UTF8_BOM))
                if not more:
                    break
                data += more
            if data.startswith(UTF8_BOM):
                self.offset += len(UTF8_BOM)
                data = data[len(UTF8_BOM):] or self._raw.read(size)
        if data:
            self._scan_checked(data)
            self.offset += len(data)
        return data

    def _scan_checked(self, data: bytes) -> None:
        pos = data.find(UTF8_BOM)
        start = 0
        while pos >= 0:
            if pos > start:
                self._scan(data[start:pos])
            if not self._in_str:
                raise ReleaseFormatError(
                    f"{self._where}: a UTF-8 byte-order mark at byte {self.offset + pos} of the decompressed JSON, outside "
                    "a string; expected one only at the very start of the stream (where it is skipped)"
                )
            start = pos
            pos = data.find(UTF8_BOM, pos + 1)
        self._scan(data[start:])

    def _too_long(self, what: str) -> ReleaseFormatError:
        return ReleaseFormatError(
            f"{self._where}: {what} is longer than {MAX_EXAMPLE_BYTES} bytes of decompressed JSON; expected M4Seg "
            "examples of a few KB (a corrupt file or a decompression bomb)"
        )

    def _scan(self, data: bytes) -> None:
        n = len(data)
        d = data
        if self._escaped:  # the first byte is escaped by a backslash that ended the previous read
            d = d[1:]
            self._escaped = False
        if b"\\" in d:
            d = _ESCAPE.sub(b"", d)
            if d.endswith(b"\\"):
                self._escaped = True
                d = d[:-1]
        tokens = np.frombuffer(d.translate(None, _NOT_TOKENS), dtype=np.uint8)
        quotes = tokens == 0x22
        inside = (np.cumsum(quotes) + self._in_str) & 1  # per token: 1 inside a string (a closing quote gives 0)
        brackets = tokens[~quotes & (inside == 0)]  # (and colons)
        was_in_str = self._in_str
        self._in_str = int(inside[-1]) if tokens.size else self._in_str
        if self._in_str:
            last = d.rfind(b'"')
            self._str_bytes = (self._str_bytes + n) if last < 0 and was_in_str else len(d) - last
            if self._str_bytes > MAX_EXAMPLE_BYTES:
                raise self._too_long("a JSON string")
        else:
            self._str_bytes = 0
        if brackets.size:
            depth = self._depth + np.cumsum(_STEP[brackets])
            if int(depth.max()) > MAX_JSON_DEPTH:
                raise ReleaseFormatError(
                    f"{self._where}: JSON nested more than {MAX_JSON_DEPTH} levels deep; expected M4Seg examples "
                    "(about 7 levels: list, example, groundings, img_k, grounding, mask, counts)"
                )
            back_to_top = bool((depth <= 1).any())
            self._depth = int(depth[-1])
            if self.items is not None:
                self._count_keys(brackets, depth)
        else:
            back_to_top = self._depth <= 1
        self._item_bytes = n if back_to_top else self._item_bytes + n
        if self._item_bytes > MAX_EXAMPLE_BYTES:
            raise self._too_long("an example")

    def _count_keys(self, tokens: np.ndarray, depth: np.ndarray) -> None:
        deep = depth >= 2  # (a colon's depth is the depth of its object; a brace's, the depth it opens)
        keys = np.cumsum((tokens == 0x3A) & deep) + self._keys
        objects = np.cumsum((tokens == 0x7B) & deep) + self._objects
        ends = np.flatnonzero((depth == 1) & ((tokens == 0x7D) | (tokens == 0x5D)))  # an item closes
        self.items.extend(zip(keys[ends].tolist(), objects[ends].tolist()))
        self._keys, self._objects = int(keys[-1]), int(objects[-1])


def gunzip(fileobj: BinaryIO, where: str = "native M4Seg file", count_keys: bool = False) -> JsonGuard:
    """The decompressed stream of a native file, guarded (see :class:`JsonGuard`)."""
    return JsonGuard(gzip.GzipFile(fileobj=fileobj, mode="rb"), where, count_keys)


def top_level_kind(fileobj: BinaryIO, where: str) -> str:
    """``"list"`` or ``"object"``: the first non-blank character of the decompressed file (after a BOM)."""
    gz = gunzip(fileobj, where)
    try:
        head = gz.read(4096).lstrip()
    except GZIP_ERRORS as e:
        raise ReleaseFormatError(f"{where}: expected a gzip-compressed JSON file, found unreadable data ({type(e).__name__}: {e})") from None
    kind = {b"[": "list", b"{": "object"}.get(head[:1])
    if kind is None:
        raise ReleaseFormatError(f"{where}: expected a JSON list of examples or an object of examples, found {head[:40]!r}")
    return kind


def _example_label(key: Any, ex: Any) -> str:
    if key is not None:
        return f" ({str(key)!r})"
    if isinstance(ex, Mapping):
        for k in ("example_id", "pair_id", "id"):
            v = ex.get(k)
            if v is not None and not isinstance(v, (dict, list)):
                return f" ({_short(v)})"
    return ""


class _Object(dict):
    """A JSON object that keeps a key it was given twice (:func:`_repeated_key`; only to name it: a slow path)."""

    __slots__ = ("repeats",)

    def __setitem__(self, k: Any, v: Any) -> None:
        if k in self:
            self.repeats = k
        dict.__setitem__(self, k, v)


def _items(ijson_mod: Any, gz: BinaryIO, kind: str, map_type: Any) -> Iterator[tuple[str | None, Any]]:
    if kind == "list":
        return ((None, ex) for ex in ijson_mod.items(gz, "item", use_float=True, map_type=map_type))
    return ijson_mod.kvitems(gz, "", use_float=True, map_type=map_type)


#: Examples converted together (their masks by one :func:`perckit.rle.to_rles`, their boxes by one pycocotools call).
ROWS_PER_BATCH = 1000


def read_examples(ijson_mod: Any, opener: Callable, path: str, kind: str, where: str) -> Iterator[tuple[str | None, Any]]:
    """``(key, example)`` of every top-level item of the file at ``path`` in order (``key`` None for a list), parsed
    with ijson behind the :class:`JsonGuard`.

    An object anywhere in an example that repeats a key raises :class:`ReleaseFormatError` naming the example
    (its index and its id) and the key: ijson keeps the last value silently, so a second ``example_id`` or
    ``image_paths`` would otherwise replace the first. The objects ijson made for an example (plain dicts, listed as
    they are made) hold as many keys as the guard counted colons in its text unless one repeats a key; only then is
    the file read again, up to that example, to name the key. (A repeated top-level key of an object file is a
    repeated example id, which the id check refuses.)"""
    made: list[dict] = []

    def new_object() -> dict:
        made.append(obj := {})
        return obj

    keys = objects = 0
    with opener(path, "rb") as f:
        gz = gunzip(f, where, count_keys=True)
        for i, (key, ex) in enumerate(_items(ijson_mod, gz, kind, new_object)):
            if type(ex) in (dict, list):  # (a scalar item has no brackets: the guard did not count it)
                keys_to, objects_to = gz.items.popleft()
                n = objects_to - objects
                if sum(map(len, made[:n])) != keys_to - keys:
                    _refuse_repeat(ijson_mod, opener, path, kind, where, i, key, ex)
                del made[:n]
                keys, objects = keys_to, objects_to
            yield key, ex


def _refuse_repeat(ijson_mod: Any, opener: Callable, path: str, kind: str, where: str, index: int, key: Any, ex: Any) -> None:
    """Raise the error of example ``index``, whose objects hold fewer keys than its text: the file read again up to
    it, with objects that keep a repeated key, names the key."""
    with opener(path, "rb") as f:
        again = itertools.islice(_items(ijson_mod, gunzip(f, where), kind, _Object), index, None)
        k = _repeated_key(next(again, (None, None))[1])
    what = f"a JSON object repeats the key {k!r}" if k is not None else "its JSON objects hold fewer keys than its text (the file changed while it was read?)"
    raise ReleaseFormatError(
        f"{where}: example {index}{_example_label(key, ex)}: {what}; expected every key once (parsers disagree on which value wins)"
    )


def _repeated_key(value: Any) -> Any:
    """The key an :class:`_Object` in ``value`` repeated, or None."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            k = getattr(v, "repeats", None)
            if k is not None:
                return k
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


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


def first_example(opener: Callable, path: str, where: str) -> tuple[str, Mapping | None, str | None]:
    """(top-level kind, the first example or None, its key when the top level is an object)."""
    ijson = ijson_module()
    with opener(path, "rb") as f:
        kind = top_level_kind(f, where)
    for key, ex in pull_translating(read_examples(ijson, opener, path, kind, where), *reading_error(ijson, where)):
        return kind, ex, None if key is None else str(key)
    return kind, None, None


def scan_native(opener: Callable, path: str, split: str, need_count: bool = False, size_order: str = "auto") -> NativeScan:
    """The prepass over a native file, run only when it is needed.

    It reads the first example. When the examples have an ``example_id`` and no count is needed (``num_proc`` <= 1),
    that is all. Otherwise it reads one field per example with ijson's prefix filter, keeping 8 bytes per example:
    the ``example_id`` (checked unique over the whole split) or, without ids, the pair id, from which the occurrence
    of every repeated pair_id is derived. Invalid JSON anywhere in the file is refused here, before any row. The
    reader verifies every example against the prepass (``id_hashes``)."""
    ijson = ijson_module()
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

    hashes = array("q")  # 8 bytes per example (int64 hashes)
    guard = IdGuard(where)
    dup: list[ReleaseFormatError] = []  # a repeated example_id is raised once the whole file has parsed
    with opener(path, "rb") as f:  # ijson's prefix filter: only the key's values become Python objects
        values = ijson.items(gunzip(f, where), f"item.{key}", use_float=True)
        for v in pull_translating(values, *reading_error(ijson, where)):
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
    arr = np.array(hashes, dtype=np.int64)
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
    guarded stream (:func:`read_examples`). The examples before the first shard are parsed
    and dropped; every example is checked against the prepass's id hashes when there are some."""
    if not shards:
        return
    ctx = _Reading(shards, split, size_order)
    ijson = ijson_module()
    start, stop, where = ctx.start, ctx.stop, ctx.where

    def examples() -> Iterator[tuple[int, Any, Any]]:
        for i, (key, ex) in enumerate(read_examples(ijson, opener, ctx.path, shards[0].kind, where)):
            if stop is not None and i >= stop:
                return
            if i >= start:
                yield i, key, ex

    # Only pulling the next example translates reading errors, and the ``yield`` is outside any ``try``
    # (:func:`pull_translating`): a consumer that never exhausts the iterator leaves it suspended until
    # interpreter exit, and closing it then must not evaluate ``except`` clauses.
    items = pull_translating(examples(), *reading_error(ijson, where))
    while True:
        parts, error, n = [], None, 0
        try:  # a batch of examples, converted together (:func:`native_rows`) ...
            for item in itertools.islice(items, ROWS_PER_BATCH):
                n += 1
                parts.append(ctx.convert(*item))
        except PerckitError as e:  # ... up to the first that cannot be read or refused: raised after the rows before it
            error = e
        yield from native_rows(parts, ctx.state)
        if error is not None:
            raise error
        if n < ROWS_PER_BATCH:
            break
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

    def convert(self, i: int, key: Any, ex: Any) -> tuple:
        """Example ``i`` (``key``: its key in an object file) checked against the prepass, as :func:`native_parts`."""
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
        return native_parts(ex, self.state, fallback)


#: Cost of skipping an example before a shard (reading it: :func:`read_examples`), relative to reading and converting
#: it (0.24 measured: 20,000 examples of the bench's release, CPU seconds, best of 3).
SKIP_COST_PARSE = 0.24


def shard_bounds(n: int, num_shards: int, skip_cost: float = SKIP_COST_PARSE) -> list[int]:
    """Boundaries of ``num_shards`` contiguous ranges over ``n`` examples with equal expected work.

    Shard j skips its ``b_j`` predecessors (cost ``skip_cost`` each) and converts its own: equal work T gives len_j
    = T - skip_cost * b_j, so b_{j+1} = (1 - r) b_j + T and T = n r / (1 - (1 - r)^num_shards)."""
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

    The last range is open-ended, so every example is read even if the count were off."""
    scan = scan or NativeScan(kind="list")  # no prepass: one shard of a list file
    occ, hashes = scan.occurrence, scan.id_hashes
    if scan.count is None or num_shards <= 1 or scan.count < 2 or scan.kind != "list":
        return [NativeShard(path, 0, None, scan.kind, occ, scan.id_key, hashes)]
    n = scan.count
    bounds = shard_bounds(n, min(num_shards, n), SKIP_COST_PARSE)
    return [NativeShard(path, a, None if j == len(bounds) - 2 else b, scan.kind, None if occ is None else occ[a:b], scan.id_key,
                        None if hashes is None else hashes[a:b]) for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
