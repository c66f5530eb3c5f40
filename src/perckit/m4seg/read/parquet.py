"""The Parquet shards of an M⁴Seg split (``data/{split}-*.parquet``) as Arrow tables of the builder's schema,
one per record batch: the columns renamed, the lists rebuilt and every field checked by pyarrow compute over
whole columns (rows never become Python dicts). This is the only Parquet converter: the builder's tables (:func:`iter_parquet_tables`)
and the first row of each shard, converted while the splits are planned (:func:`parquet_shards`).

Every check runs over a whole column and, when it refuses values, names the first refused one itself: the row (its
``example_id``), the field and the index inside it, what was expected and what was found, with the same error types
and messages as the field rules in :mod:`perckit.m4seg.rows` (``_check_span``, ``_check_image_size``,
``_check_image_index``, ``parse_int``, ``rle.to_rle``, ``paths.check_relative``). A column check that is stricter
than its rule (a path the compiled prefilter flags, a mask the counts scan does not take, a value of an unusual Arrow type) hands
the flagged values one by one to that rule, which gives the value or the error. A batch raises the error of its
first refused row, in the order the fields of a row are read (``example_id``, ``a``, ``images`` and each image's
height, width, size and path, then each grounding's image_index, segmentation, bbox, answer_span), after the rows
before it have been converted (their entity-code warnings given, their ids checked).

Before the rows: each shard is opened by :func:`open_parquet` (its column chunks checked), its schema by
:func:`check_parquet_schema`, and the ``example_id`` uniqueness pass over the split is :func:`scan_parquet_ids`."""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...core import counts as _kernels
from ... import rle as rle_ops
from ...errors import PerckitError, ReleaseFormatError, short_repr as _short
from ...io.parquetio import check_column_chunk_sizes
from ...io.paths import MAX_PATH_CHARS, check_relative
from ..features import row_features
from ..layout import PARQUET_GLOB
from ..metric.codes import span_code_problems
from ..rows import (
    PARQUET_ALIASES, PARQUET_GROUNDING_ALIASES, ConvertState, _check_image_index, _check_image_size, _check_span,
    _id_list, _int,
)

BATCH_SIZE = 10_000


@dataclass
class ParquetShard:
    """Row groups ``[rg_start, rg_stop)`` of one Parquet file (``rg_stop=None``: every row group)."""

    path: str
    rg_start: int = 0
    rg_stop: int | None = None


#: Columns (one of the names) and nested fields every M4Seg Parquet shard must have [card].
PARQUET_COLUMNS: dict[str, tuple[str, ...]] = {
    "example_id": ("example_id",), "a": ("a", "answer"), "images": ("images",), "groundings": ("groundings",),
}
PARQUET_IMAGE_FIELDS = ("height", "width")
PARQUET_GROUNDING_FIELDS: dict[str, tuple[str, ...]] = {
    "image_index": ("image_index",), "answer_span": ("answer_span",), "segmentation": PARQUET_GROUNDING_ALIASES["segmentation"],
}
#: What pyarrow raises on a corrupt or truncated file (a bad footer, a bad data page).
PARQUET_ERRORS = (OSError, EOFError, ValueError)


#: The local files whose column chunks this process has checked, by identity (device, inode, size, mtime).
_CHECKED: set[tuple] = set()


def _identity(f: BinaryIO) -> tuple | None:
    """The open local file's identity (``fstat`` of the file read, so it cannot be swapped), or None."""
    try:
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError):  # not a local file (a streaming opener)
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def open_parquet(f: BinaryIO, where: str) -> Any:
    """``pyarrow.parquet.ParquetFile(f)``; an unreadable file raises :class:`ReleaseFormatError` naming it.

    The column-chunk check reads every page header; a local file it passed in this process (the same device,
    inode, size and modification time: ``parquet_shards`` then the generation open it twice) is not re-read."""
    try:
        pf = pq.ParquetFile(f)
    except (pa.ArrowException, *PARQUET_ERRORS) as e:  # ArrowInvalid on a bad footer, OSError on a cut file
        raise ReleaseFormatError(f"{where}: not a readable Parquet file ({type(e).__name__}: {e})") from None
    ident = _identity(f)
    if ident is None or ident not in _CHECKED:
        check_column_chunk_sizes(pf, where, source=f)  # the footer and the page headers (a footer can lie)
        if ident is not None:
            _CHECKED.add(ident)
    return pf


@contextmanager
def open_shard(opener: Callable, path: str, split: str) -> Iterator[tuple[Any, str]]:
    """``(ParquetFile, where)`` of one shard of a split: opened by :func:`open_parquet`, its schema checked."""
    where = f"M4Seg {split} split, {Path(path).name}"
    with opener(path, "rb") as f:
        pf = open_parquet(f, where)
        check_parquet_schema(pf.schema_arrow, where)
        yield pf, where


def check_parquet_schema(schema: Any, where: str) -> None:
    """Every column and nested field the conversion needs is there (extra ones are fine; the values are checked per row)."""
    names = list(schema.names)
    missing = [" or ".join(repr(a) for a in aliases) for aliases in PARQUET_COLUMNS.values() if not any(a in names for a in aliases)]
    if missing:
        raise ReleaseFormatError(
            f"{where}: missing column(s) {', '.join(missing)}; expected the M4Seg columns example_id, pair_id, "
            f"dataset_name, type, granularity, q, a, images, groundings (found {names})"
        )
    for column, required in (("images", {f: (f,) for f in PARQUET_IMAGE_FIELDS}), ("groundings", PARQUET_GROUNDING_FIELDS)):
        arrow_type = schema.field(column).type
        if not _is_list(arrow_type) or not pa.types.is_struct(item := arrow_type.value_type):
            raise ReleaseFormatError(f"{where}: column {column!r}: expected a list of structs, found {arrow_type}")
        fields = [item.field(i).name for i in range(item.num_fields)]
        lacking = [name for name, aliases in required.items() if not any(a in fields for a in aliases)]
        if lacking:
            raise ReleaseFormatError(
                f"{where}: column {column!r}: its items lack the field(s) {lacking}; expected {sorted(required)} (found {fields})"
            )


def scan_parquet_ids(opener: Callable, paths: Sequence[str], split: str) -> int:
    """Check example_id uniqueness over every shard of a split (the ``example_id`` column only); returns the count.

    The ids are taken as ``str()`` of each value (:func:`str_column`; a null as ``'None'``), so an int 7 in one
    shard and "7" in another repeat. A 64-bit hash of each id (FNV-1a, compiled: :func:`_id_hashes`) decides
    first: distinct hashes are distinct ids. Only when two hashes are equal (a repeat, or a collision) pyarrow's
    dictionary encoding numbers the distinct ids (exact, in C++); the first id whose number was seen before is the
    first repeat in order, and raises naming it. This runs before any row is converted and before the ``num_proc``
    workers start."""
    columns = _example_id_columns(opener, paths, split)
    chunks = [pc.fill_null(str_column(chunk), "None") for c in columns for chunk in c.chunks]
    hashes = np.zeros(sum(len(c) for c in chunks), dtype=np.uint64)
    at = 0
    for c in chunks:
        if len(c):
            _kernels._compiled(_id_hashes)(*_buffers(c), hashes[at : at + len(c)])
        at += len(c)
    hashes.sort()
    if not (hashes[1:] == hashes[:-1]).any():
        return len(hashes)
    chunks = [c.cast(pa.large_string()) for c in chunks]
    ids = pa.chunked_array(chunks, pa.large_string()).combine_chunks() if chunks else pa.array([], pa.large_string())
    if len(ids):
        codes = ids.dictionary_encode().indices.to_numpy(zero_copy_only=False)
        _, first = np.unique(codes, return_index=True)  # the codes are 0..d-1: first[c] is where id c first occurs
        repeats = np.flatnonzero(first[codes] != np.arange(codes.size))
        if repeats.size:
            eid = ids[int(repeats[0])].as_py()
            raise ReleaseFormatError(
                f"M4Seg {split} split, {PARQUET_GLOB.format(split=split)}: duplicate example_id {eid!r} (example ids must be unique within a split)"
            )
    return len(ids)


def _id_hashes(off, data, out):
    """The compiled FNV-1a hash (64 bits) of each string ``data[off[i]:off[i + 1]]`` into ``out[i]``."""
    for i in range(off.shape[0] - 1):
        h = np.uint64(14695981039346656037)
        for p in range(off[i], off[i + 1]):
            h = (h ^ np.uint64(data[p])) * np.uint64(1099511628211)
        out[i] = h


def str_column(arr: Any) -> Any:
    """``str()`` of each value of an Arrow array as a string array, nulls kept (ids are stored as ``str(...)``
    whatever their type): a string or integer column is cast (the same text), any other goes value by value."""
    t = arr.type
    if pa.types.is_string(t):
        return arr
    if pa.types.is_large_string(t) or (pa.types.is_integer(t)):
        return arr.cast(pa.string())
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    return pa.array([None if x is None else str(x) for x in arr.to_pylist()], pa.string())


def _example_id_columns(opener: Callable, paths: Sequence[str], split: str) -> list:
    """The ``example_id`` column of every shard, each file's footer and schema checked first; a column that
    cannot be read raises naming its file."""
    columns = []
    for p in paths:
        with open_shard(opener, p, split) as (pf, where):
            try:
                columns.append(pf.read(columns=["example_id"], use_threads=False).column(0))  # (one column: threads only cost)
            except (pa.ArrowException, *PARQUET_ERRORS) as e:
                raise ReleaseFormatError(
                    f"{where}: the example_id column cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})"
                ) from None
    return columns


#: Where in a row a check looks, in the order the fields of a row are read (the second item of a key).
_ID, _ANSWER, _IMAGES, _IMAGE, _GROUNDING = range(5)


def first_row(pf: Any, where: str, state: ConvertState, schema: Any = None) -> dict | None:
    """The first row of an open Parquet file, converted to ``schema`` (default :func:`row_schema`); None for a file
    without rows. Only the first row group with rows is read (a reader of every row group decodes ahead)."""
    md = pf.metadata
    groups = [g for g in range(md.num_row_groups) if md.row_group(g).num_rows > 0][:1]
    try:
        batch = next(pf.iter_batches(batch_size=1, row_groups=groups), None) if groups else None
    except (pa.ArrowException, *PARQUET_ERRORS) as e:
        raise _unreadable(where, 0, e) from None
    if batch is None or batch.num_rows == 0:
        return None
    return batch_to_table(batch, state, row_schema() if schema is None else schema).to_pylist()[0]


def row_schema() -> Any:
    """The Arrow schema of a builder row without image bytes (what the Parquet shards are converted to)."""
    return row_features().arrow_schema


def parquet_shards(opener: Callable, paths: Sequence[str], rows_per_shard: int | None = 20_000, split: str = "") -> list[ParquetShard]:
    """One shard per file, or per run of row groups of about ``rows_per_shard`` rows (finer ``num_proc`` shards;
    None: one per file, for one process).

    Reads every file's footer and converts its first row: an unreadable file, a missing column or a file of another
    format raises here, before generation."""
    out, schema = [], None
    for p in paths:
        with open_shard(opener, p, split) as (pf, where):
            md = pf.metadata
            schema = row_schema() if schema is None else schema  # (after the first file's guard: it imports datasets)
            first_row(pf, where, ConvertState(split, Path(p).name, quiet=True), schema)
        acc, start = 0, 0
        for rg in range(md.num_row_groups if rows_per_shard else 0):
            acc += md.row_group(rg).num_rows
            if acc >= rows_per_shard and rg + 1 < md.num_row_groups:
                out.append(ParquetShard(p, start, rg + 1))
                start, acc = rg + 1, 0
        out.append(ParquetShard(p, start, None if start == 0 else md.num_row_groups))
    return out


def iter_parquet_tables(opener: Callable, shards: Sequence[ParquetShard], split: str, schema: pa.Schema) -> Iterator[pa.Table]:
    """Tables of ``schema`` (the builder's row schema) from Parquet shards in order, one per record batch of
    ``iter_batches(batch_size=BATCH_SIZE)`` (the example ids are checked unique before: :func:`scan_parquet_ids`)."""
    for shard in shards:
        state = ConvertState(split, Path(shard.path).name)
        with open_shard(opener, shard.path, split) as (pf, where):
            stop = pf.metadata.num_row_groups if shard.rg_stop is None else shard.rg_stop
            groups = list(range(shard.rg_start, stop))
            if not groups:
                continue
            first = sum(pf.metadata.row_group(g).num_rows for g in range(shard.rg_start))
            batches = pf.iter_batches(batch_size=BATCH_SIZE, row_groups=groups)
            i = first
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except (pa.ArrowException, *PARQUET_ERRORS) as e:
                    raise _unreadable(where, i, e) from None
                table = batch_to_table(batch, state, schema)
                del batch
                i += table.num_rows
                yield table
                del table
        # Arrow's pool reuses the freed buffers for the next batches (no release_unused() here: once a shard, the
        # next buffers were faulted in again, ~0.5 s CPU over 743k rows; the peak RSS stays flat without it: bench.py).
        state.finish()


def _unreadable(where: str, i: int, e: BaseException) -> ReleaseFormatError:
    return ReleaseFormatError(f"{where}: rows from {i} on cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})")


def batch_to_table(batch: pa.RecordBatch, state: ConvertState, schema: pa.Schema) -> pa.Table:
    """One record batch as a table of ``schema``, its entity-code warnings given; a refused value raises naming
    its row and field, after the rows before it are converted (their warnings given)."""
    table, flagged, verdict = _convert(batch, state, schema)
    if verdict.error is not None:
        row = verdict.key[0]
        if row:
            batch_to_table(batch.slice(0, row), state, schema)
        raise verdict.error
    if flagged:
        _warn(table, flagged, state)
    return table


def _warn(table: pa.Table, flagged: list[int], state: ConvertState) -> None:
    """The entity-code warnings of the rows that may have some (:func:`span_code_problems` decides)."""
    sub = table.select(["example_id", "a", "groundings"]).take(pa.array(flagged, pa.int64())).to_pylist()
    for row in sub:
        problems = span_code_problems(row["a"], row["groundings"])
        if problems:
            state.warn_spans(row["example_id"], problems)


# ---------------------------------------------------------------- the first refusal of a batch

_SKIP = object()


class _Verdict:
    """The batch's first refused value: its key ``(row, part, index, check)`` (rows in order, then the order a
    row's fields are read) and its error. Values at or after it are never looked at again."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.error: PerckitError | None = None

    def before(self, key: tuple) -> bool:
        return self.key is None or key < self.key

    def settle(self, key: tuple, rule: Callable, *args: Any) -> Any:
        """``rule(*args)`` for a value at ``key`` (its value, or the error it raises kept as the verdict when it
        comes first); ``_SKIP`` for a value at or after the verdict or refused."""
        if not self.before(key):
            return _SKIP
        try:
            return rule(*args)
        except PerckitError as e:
            self.key, self.error = key, e
            return _SKIP

    def settle_each(self, flagged: np.ndarray, key_of: Callable[[int], tuple], rule: Callable[[int], Any]) -> dict[int, Any]:
        """:meth:`settle` of each flagged index in order (their keys ascend); the values the rule gives."""
        out: dict[int, Any] = {}
        for i in flagged.tolist():
            key = key_of(i)
            if not self.before(key):
                break
            v = self.settle(key, rule, i)
            if v is not _SKIP:
                out[i] = v
        return out

    def refuse_each(self, flagged: np.ndarray, key_of: Callable[[int], tuple], message: Callable[[int], str]) -> None:
        """:meth:`settle_each` with a rule that refuses each: ``ReleaseFormatError(message(i))``."""

        def refuse(i: int) -> None:
            raise ReleaseFormatError(message(i))

        self.settle_each(flagged, key_of, refuse)


# ---------------------------------------------------------------- column helpers


#: The Arrow types of a text column, and of a counts column (text or bytes).
_STR = (pa.string(), pa.large_string())
_COUNTS = (*_STR, pa.binary(), pa.large_binary())


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def _np(arr: pa.Array) -> np.ndarray:
    return arr.to_numpy(zero_copy_only=False)


def _filled(arr: pa.Array, value: Any) -> pa.Array:
    """``pc.fill_null``, called only when there is a null (it copies the array even when there is none)."""
    return pc.fill_null(arr, value) if arr.null_count else arr


def _valid(arr: pa.Array) -> np.ndarray:
    if not arr.null_count:  # (no bitmap to unpack)
        return np.ones(len(arr), dtype=bool)
    return np.asarray(_np(arr.is_valid()), dtype=bool)


def _fields(arr: pa.Array, names: Sequence[str]) -> list[pa.Array]:
    """The struct fields of ``arr`` among ``names``, in that order (a null item gives nulls)."""
    have = {arr.type.field(i).name for i in range(arr.type.num_fields)}
    return [pc.struct_field(arr, [n]) for n in names if n in have]


def _text(cols: list[pa.Array], n: int) -> pa.Array:
    """``str()`` of the first non-null of ``cols`` (an alias table's order); null when all are."""
    cols = [str_column(c) for c in cols]
    if not cols:
        return pa.nulls(n, pa.string())
    return cols[0] if len(cols) == 1 else pc.coalesce(*cols)


def _chosen(cols: list[pa.Array], m: int) -> np.ndarray:
    """Per item: the index in ``cols`` of the first non-null alias, -1 when all are null."""
    source = np.full(m, -1, dtype=np.int64)
    for ci, c in enumerate(cols):
        source[(source < 0) & _valid(c)] = ci
    return source


def _one_source(cols: list[pa.Array], source: np.ndarray) -> pa.Array | None:
    """The one alias column every present value comes from; None when there are two (or none)."""
    if len(cols) == 1:
        return cols[0]
    top = int(source.max()) if source.size else -1
    return cols[top] if top >= 0 and ((source == top) | (source < 0)).all() else None


def _list_parts(col: pa.Array) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """(lengths, offsets, items) of a list column: a null list has no items."""
    lengths = _np(_filled(pc.list_value_length(col), 0)).astype(np.int64)
    off = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    return lengths, off, col.flatten()


def _owners(lengths: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each item's row and its position in the row."""
    parent = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
    return parent, np.arange(parent.size, dtype=np.int64) - off[parent]


def _list(lengths: np.ndarray, values: pa.Array, type_: pa.DataType) -> pa.Array:
    off = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    return pa.ListArray.from_arrays(pa.array(off.astype(np.int32)), values, type=type_)


def _pairs(lengths: np.ndarray, off: np.ndarray, values: np.ndarray, width: int) -> np.ndarray:
    """Per item, its first ``width`` values (an item of another length gives garbage: the caller refuses it)."""
    if values.size == width * lengths.size and (lengths == width).all():
        return values.reshape(-1, width)
    if values.size == 0:
        return np.zeros((lengths.size, width), dtype=values.dtype)
    idx = np.clip(off[:-1, None] + np.arange(width), 0, values.size - 1)
    return values[idx]


def _ints(arr: pa.Array, v: _Verdict, key_of: Callable[[int], tuple], where_of: Callable[[int], str]) -> np.ndarray:
    """The integers of ``arr`` as int64 by ``parse_int``'s rule (an int column takes it whole; a null, or a
    value of another type, goes to the rule); a refused value is 0 and becomes the verdict when first."""
    t = arr.type
    if pa.types.is_integer(t) and t != pa.uint64():
        valid = _valid(arr)
        if not valid.all():
            v.settle_each(np.flatnonzero(~valid), key_of, lambda i: _int(None, where_of(i)))
        return _np(_filled(arr.cast(pa.int64()), 0)).astype(np.int64)
    py = arr.to_pylist()
    out = np.zeros(len(py), dtype=np.int64)
    for i, x in v.settle_each(np.arange(len(py)), key_of, lambda i: _int(py[i], where_of(i))).items():
        out[i] = min(max(x, -(2**62)), 2**62)
    return out


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The offsets (n + 1) and data (uint8) of a string or binary array, without a copy."""
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, dtype=np.uint8)
    return off, data


def _check_bbox(bbox: Any, where: str) -> list[float]:
    """A released bbox: [x, y, width, height] of 4 finite numbers, as floats."""
    if (
        not isinstance(bbox, (list, tuple)) or len(bbox) != 4
        or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in bbox)
    ):
        raise ReleaseFormatError(f"{where}.bbox: expected [x, y, width, height] (4 numbers, all finite), found {_short(bbox)}")
    return [float(x) for x in bbox]


# ---------------------------------------------------------------- the conversion


def _convert(batch: pa.RecordBatch, state: ConvertState, schema: pa.Schema) -> tuple[pa.Table | None, list[int], _Verdict]:
    """The batch as a table of ``schema`` and the rows whose entity-code warnings must be computed (a superset
    of the rows with a warning), or no table and the verdict naming the first refused value."""
    n = batch.num_rows
    cols = {name: batch.column(name) for name in batch.schema.names}
    v = _Verdict()

    def top(field_: str) -> list[pa.Array]:
        return [cols[a] for a in PARQUET_ALIASES[field_] if a in cols]

    out = {field_: _text(top(field_), n) for field_ in PARQUET_ALIASES if field_ != "a"}
    ids = out["example_id"]
    v.refuse_each(np.flatnonzero(~_valid(ids)), lambda r: (r, _ID),
                  lambda r: f"{state.where(None)}: expected a non-null 'example_id', found None")

    def where(r: int) -> str:
        return state.where(ids[r].as_py())

    answer = out["a"] = _answer(top("a"), n, v, where)
    out["images"], img_off, heights, widths = _images(cols["images"], n, schema.field("images").type, v, where)
    out["groundings"], flagged = _groundings(cols["groundings"], n, img_off, heights, widths, answer, schema.field("groundings").type, v, where)
    if v.error is not None:
        return None, [], v
    return pa.Table.from_arrays([out[f.name] for f in schema], schema=schema), flagged, v


def _answer(cols: list[pa.Array], n: int, v: _Verdict, where: Callable[[int], str]) -> pa.Array:
    """The answer of each row: its first non-null alias, which must be a string."""
    source = _chosen(cols, n)
    bad = source < 0
    for ci, c in enumerate(cols):
        if c.type not in _STR:
            bad |= source == ci

    def refuse(r: int) -> None:
        found = None if source[r] < 0 else cols[source[r]][r].as_py()
        raise ReleaseFormatError(f"{where(r)}: 'a': expected a string, found {_short(found)}")

    v.settle_each(np.flatnonzero(bad), lambda r: (r, _ANSWER), refuse)
    texts = [c.cast(pa.string()) for c in cols if c.type in _STR]
    if not texts:
        return pa.nulls(n, pa.string())
    return texts[0] if len(texts) == 1 else pc.coalesce(*texts)


def _images(
    col: pa.Array, n: int, type_: pa.DataType, v: _Verdict, where: Callable[[int], str]
) -> tuple[pa.Array, np.ndarray, np.ndarray, np.ndarray]:
    lengths, off, items = _list_parts(col)
    parent, index = _owners(lengths, off)

    v.refuse_each(np.flatnonzero(lengths == 0), lambda r: (r, _IMAGES), lambda r: (
        f"{where(r)}: 'images': expected a non-empty list of {{image_id, path, height, width}}, found {_short(col[r].as_py())}"))

    def iw(i: int) -> str:
        return f"{where(int(parent[i]))}: images[{int(index[i])}]"

    def key(check: int) -> Callable[[int], tuple]:
        return lambda i: (int(parent[i]), _IMAGE, int(index[i]), check)

    v.refuse_each(np.flatnonzero(~_valid(items)), key(0),
                  lambda i: f"{iw(i)}: expected {{image_id, path, height, width}}, found None")
    h = _ints(pc.struct_field(items, ["height"]), v, key(1), lambda i: iw(i) + ".height")
    w = _ints(pc.struct_field(items, ["width"]), v, key(2), lambda i: iw(i) + ".width")
    limit = rle_ops.MAX_PIXELS
    v.settle_each(
        np.flatnonzero((h <= 0) | (w <= 0) | (h > limit) | (w > limit) | (h * w > limit)), key(3),
        lambda i: _check_image_size(int(h[i]), int(w[i]), iw(i)),
    )
    m = len(items)
    image_id = _text(_fields(items, ["image_id"]), m)
    path = _text(_fields(items, ["path"]), m)
    if path.null_count < m:
        flag = np.zeros(m, dtype=np.bool_)
        _kernels._compiled(_bad_paths)(*_buffers(path), MAX_PATH_CHARS, flag)
        v.settle_each(np.flatnonzero(flag & _valid(path)), key(4), lambda i: check_relative(path[i].as_py(), iw(i) + ".path"))
    values = pa.StructArray.from_arrays(
        [image_id, path, pa.array(h.astype(np.int32)), pa.array(w.astype(np.int32))], fields=list(type_.value_type)
    )
    return _list(lengths, values, type_), off, h, w


def _bad_paths(off, data, limit, out):
    """The compiled path prefilter: ``out[i]`` set for a path ``check_relative`` may refuse (it decides): empty, of
    more than ``limit`` characters, with a NUL, absolute (``/``, ``\\``, a drive ``X:``) or with a ``..`` component."""
    for i in range(off.shape[0] - 1):
        a, b = np.int64(off[i]), np.int64(off[i + 1])
        bad = b == a or data[a] == 47 or data[a] == 92 or (b - a >= 2 and data[a + 1] == 58 and 97 <= (data[a] | 0x20) <= 122)
        for p in range(a, b):
            c = data[p]
            if c == 0 or (c == 46 and p + 1 < b and data[p + 1] == 46 and (p == a or data[p - 1] == 47 or data[p - 1] == 92)
                          and (p + 2 == b or data[p + 2] == 47 or data[p + 2] == 92)):
                bad = True
        if b - a > limit:  # at most as many characters as bytes: count them only here
            chars = 0
            for p in range(a, b):
                chars += (data[p] & 0xC0) != 0x80  # not a UTF-8 continuation byte
            bad = bad or chars > limit
        out[i] = bad


def _groundings(col: pa.Array, n: int, img_off: np.ndarray, heights: np.ndarray, widths: np.ndarray, answer: pa.Array,
                type_: pa.DataType, v: _Verdict, where: Callable[[int], str]) -> tuple[pa.Array | None, list[int]]:
    lengths, off, g = _list_parts(col)  # a null list of groundings is empty
    parent, index = _owners(lengths, off)
    item_type = type_.value_type
    m = len(g)
    if m == 0:
        return _list(lengths, pa.array([], item_type), type_), []

    def gw(i: int) -> str:
        return f"{where(int(parent[i]))}: groundings[{int(index[i])}]"

    def key(check: int) -> Callable[[int], tuple]:
        return lambda i: (int(parent[i]), _GROUNDING, int(index[i]), check)

    v.refuse_each(np.flatnonzero(~_valid(g)), key(0), lambda i: f"{gw(i)}: expected a grounding object, found None")
    n_images = np.diff(img_off)[parent]
    k = _ints(pc.struct_field(g, ["image_index"]), v, key(1), lambda i: gw(i) + ".image_index")
    v.settle_each(np.flatnonzero((k < 1) | (k > n_images)), key(1), lambda i: _check_image_index(int(k[i]), int(n_images[i]), gw(i)))
    img = img_off[parent] + np.clip(k, 1, np.maximum(n_images, 1)) - 1
    if heights.size:
        img = np.clip(img, 0, heights.size - 1)
        gh, gwd = heights[img], widths[img]
    else:
        gh = gwd = np.zeros(m, dtype=np.int64)

    mask = _masks(g, gh, gwd, k, item_type.field("segmentation").type, v, gw, key)
    bbox, missing = _bboxes(g, v, gw, key)
    span, starts, ends = _spans(g, answer, parent, item_type.field("answer_span").type, v, gw, key)
    if v.error is not None:
        return None, []
    if missing.size:
        bbox[missing] = np.asarray([rle_ops.to_bbox(r) for r in mask.take(pa.array(missing)).to_pylist()], dtype=np.float64).reshape(-1, 4)
    fields = {
        "image_index": pa.array(k.astype(np.int32)),
        "name": _text(_fields(g, ["name"]), m),
        "annotation_ids": _annotation_ids(g, item_type.field("annotation_ids").type),
        "object_annotation_id": _text(_fields(g, ["object_annotation_id"]), m),
        "answer_span": span,
        "bbox": _list(np.full(m, 4), pa.array(bbox.reshape(-1)).cast(pa.float32()), item_type.field("bbox").type),
        "segmentation": mask,
    }
    values = pa.StructArray.from_arrays([fields[f.name] for f in item_type], fields=list(item_type))
    return _list(lengths, values, type_), _code_suspects(answer, parent, starts, ends, k)


def _masks(g: pa.Array, gh: np.ndarray, gwd: np.ndarray, k: np.ndarray, type_: pa.DataType, v: _Verdict,
           gw: Callable[[int], str], key: Callable[[int], Callable[[int], tuple]]) -> pa.Array:
    """The masks as ``{size: [H, W], counts}``: a compressed RLE whose size is its image's, whose counts the
    compiled scan reads and whose runs sum to H*W is taken as it is; any other goes to ``rle.to_rle``, which
    gives the mask or the precise error."""
    m = len(g)
    cols = _fields(g, PARQUET_GROUNDING_ALIASES["segmentation"])
    source = _chosen(cols, m)
    v.refuse_each(np.flatnonzero(source < 0), key(2),
                  lambda i: f"{gw(i)}.segmentation: expected a compressed RLE {{size, counts}}, found none")

    def rule(i: int) -> dict:
        hw = [int(gh[i]), int(gwd[i])]
        return rle_ops.to_rle(cols[source[i]][i].as_py(), size=hw, where=f"{gw(i)}.segmentation (image {int(k[i])}, [H, W] = {hw})")

    size = np.stack([gh, gwd], axis=1)
    c = _one_source(cols, source)
    sizes = counts = None
    if c is not None and pa.types.is_struct(c.type):
        sizes, counts = _fields(c, ["size"]), _fields(c, ["counts"])
    if sizes and counts and _is_list(sizes[0].type) and pa.types.is_integer(sizes[0].type.value_type) and counts[0].type in _COUNTS:
        lengths, off, values = _list_parts(sizes[0])
        vals = _np(_filled(values.cast(pa.int64(), safe=False), -1)).astype(np.int64)
        pairs = _pairs(lengths, off, vals, 2)
        counts = counts[0]
        if pa.types.is_large_string(counts.type) or pa.types.is_large_binary(counts.type):
            counts = counts.cast(pa.binary())
        scanned = _kernels.scan_counts(*_buffers(counts))
        status, total = scanned[:, _kernels.STATUS], scanned[:, _kernels.TOTAL]
        ok = (lengths == 2) & (pairs[:, 0] == gh) & (pairs[:, 1] == gwd) & (status == _kernels.OK) & (total == gh * gwd) & _valid(counts)
        got = v.settle_each(np.flatnonzero((source >= 0) & ~ok), key(3), rule)
        counts = counts.cast(pa.string(), safe=False)
    else:  # a mask column of another type: each mask goes to the rule
        got = v.settle_each(np.flatnonzero(source >= 0), key(3), rule)
        counts = pa.nulls(m, pa.string())
    if got:
        texts = counts.to_pylist()
        for i, r in got.items():
            texts[i], size[i] = r["counts"], r["size"]
        counts = pa.array(texts, pa.string())
    sizes_out = _list(np.full(m, 2), pa.array(size.reshape(-1).astype(np.int32)), type_.field("size").type)
    return pa.StructArray.from_arrays([sizes_out, counts], fields=list(type_))


def _bboxes(g: pa.Array, v: _Verdict, gw: Callable[[int], str], key: Callable[[int], Callable[[int], tuple]]) -> tuple[np.ndarray, np.ndarray]:
    """The released boxes (m x 4 float64) and the items without one (their box is the mask's)."""
    m = len(g)
    cols = _fields(g, PARQUET_GROUNDING_ALIASES["bbox"])
    source = _chosen(cols, m)
    out = np.zeros((m, 4), dtype=np.float64)

    def rule(i: int) -> list[float]:
        return _check_bbox(cols[source[i]][i].as_py(), gw(i))

    c = _one_source(cols, source)
    if c is not None and _is_list(c.type) and (pa.types.is_integer(c.type.value_type) or pa.types.is_floating(c.type.value_type)):
        lengths, off, values = _list_parts(c)
        vals = _np(_filled(values.cast(pa.float64(), safe=False), np.nan)).astype(np.float64)  # (a copy: written below)
        out = _pairs(lengths, off, vals, 4)
        ok = lengths == 4
        if not np.isfinite(vals).all():  # (per box only when some value is not finite)
            ok &= np.isfinite(out).all(axis=1)
        got = v.settle_each(np.flatnonzero((source >= 0) & ~ok), key(4), rule)
    else:  # a bbox column of another type: each box goes to the rule
        got = v.settle_each(np.flatnonzero(source >= 0), key(4), rule)
    for i, box in got.items():
        out[i] = box
    return out, np.flatnonzero(source < 0)


def _annotation_ids(g: pa.Array, type_: pa.DataType) -> pa.Array:
    """A list of str per grounding (``rows._id_list``: a null is empty, a scalar a list of one)."""
    m = len(g)
    cols = _fields(g, ["annotation_ids"])
    if not cols:
        return _list(np.zeros(m, dtype=np.int64), pa.array([], pa.string()), type_)
    col = cols[0]
    if _is_list(col.type) and col.type.value_type in _STR:
        lengths, _, values = _list_parts(col)
        if not values.null_count:
            return _list(lengths, values.cast(pa.string()), type_)
    return pa.array([_id_list(x) for x in col.to_pylist()], type=type_)


def _spans(g: pa.Array, answer: pa.Array, parent: np.ndarray, type_: pa.DataType, v: _Verdict, gw: Callable[[int], str],
           key: Callable[[int], Callable[[int], tuple]]) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """``[start, end)`` with ``0 <= start <= end <= len(answer)`` (code points), as int32 lists; any other
    span goes to ``rows._check_span``, which gives it or the precise error."""
    m = len(g)
    col = pc.struct_field(g, ["answer_span"])

    def rule(i: int) -> list[int]:
        return _check_span(col[i].as_py(), answer[int(parent[i])].as_py(), gw(i))

    if _is_list(col.type) and pa.types.is_integer(col.type.value_type):
        lengths, off, values = _list_parts(col)
        vals = _np(_filled(values.cast(pa.int64(), safe=False), -1)).astype(np.int64)  # (a copy: written below)
        se = _pairs(lengths, off, vals, 2)
        alen = _np(_filled(pc.utf8_length(answer), 0)).astype(np.int64)[parent]
        s, e = se[:, 0], se[:, 1]
        ok = (lengths == 2) & _valid(col) & (s >= 0) & (s <= e) & (e <= alen)
        if values.null_count:
            nulls = np.zeros(m, dtype=bool)
            nulls[_owners(lengths, off)[0][~_valid(values)]] = True
            ok &= ~nulls
        got = v.settle_each(np.flatnonzero(~ok), key(5), rule)
    else:  # a span column of another type: each span goes to the rule
        se = np.zeros((m, 2), dtype=np.int64)
        got = v.settle_each(np.arange(m), key(5), rule)
    for i, span in got.items():
        se[i] = span
    s, e = se[:, 0].copy(), se[:, 1].copy()
    span = _list(np.full(m, 2), pa.array(se.reshape(-1).astype(np.int32)), type_)
    return span, s, e


def _code_suspects(answer: pa.Array, parent: np.ndarray, s: np.ndarray, e: np.ndarray, k: np.ndarray) -> list[int]:
    """Rows that may have an entity-code warning: one of their groundings' ``answer[s:e]`` is not an ASCII
    code naming its ``image_index``, or their answer is not ASCII (offsets are then code points).

    ``metric.codes.CODE_RE`` fully matches an ASCII span exactly when its characters are all word characters and
    it ends with ``_`` and 3 digits (5 or more characters) or ``_`` and 5 digits (7 or more); the image digit
    follows that ``_``. Decided on the answers' bytes by a compiled loop over the groundings (:func:`_suspects`)."""
    ascii_rows = np.asarray(pc.string_is_ascii(answer).to_numpy(zero_copy_only=False), dtype=bool)
    off, data = _buffers(answer)
    out = np.zeros(len(answer), dtype=np.bool_)
    _kernels._compiled(_suspects)(off, data, ascii_rows, parent, s, e, k, out)
    return np.flatnonzero(out).tolist()


def _suspects(off, data, ascii_rows, parent, s, e, k, out):
    """The compiled body of :func:`_code_suspects`: ``out[row]`` set for each grounding whose span is not a code
    naming its image (its row's answer ASCII, its spans within it)."""
    for i in range(parent.shape[0]):
        r = parent[i]
        a = np.int64(off[r]) + s[i]
        b = np.int64(off[r]) + e[i]
        ok = ascii_rows[r]
        if ok:
            if b - a >= 5 and data[b - 4] == 95:  # _ddd
                digits, image = 3, np.int64(data[b - 3]) - 48
            elif b - a >= 7 and data[b - 6] == 95:  # _ddddd
                digits, image = 5, np.int64(data[b - 5]) - 48
            else:
                digits, image = 0, np.int64(-1)
            ok = digits > 0 and image == k[i]
            for j in range(1, digits + 1):
                ok = ok and 48 <= data[b - j] <= 57
            p = a
            while ok and p < b - digits - 1:
                c = data[p] | 0x20
                ok = (48 <= data[p] <= 57) or (97 <= c <= 122) or data[p] == 95
                p += 1
        if not ok:
            out[r] = True
