"""The Parquet shards of an M⁴Seg split as Arrow tables of the builder's schema, one per record batch, with
the columns renamed and restructured by pyarrow compute and every check of
:func:`perckit.m4seg.rows.parquet_to_row` done over whole columns (rows never become Python dicts).

The contract that keeps rows and messages identical: :func:`batch_to_table` takes a batch on the fast path
only when its types are the ones handled here (string ids and texts, integer sizes and indices, numeric
bboxes, string or binary counts; an optional column may be missing) and every vectorised check passes. Any
other batch, including one with a single bad value, is converted by the reference path (``parquet_to_row``
per record, then :func:`perckit.builder_base.rows_to_table`), which raises the precise message or, where a
fast check is only stricter (a path rule, a mask the scan does not take), produces the rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _kernels
from .. import rle as rle_ops
from ..builder_base import rows_to_table
from ..errors import ReleaseFormatError
from ..paths import MAX_PATH_CHARS
from . import codes
from .parquet_reader import BATCH_SIZE
from .parquet_reader import PARQUET_ERRORS
from .parquet_reader import ParquetShard
from .parquet_reader import check_parquet_schema
from .parquet_reader import open_parquet
from .rows import PARQUET_ALIASES
from .rows import PARQUET_GROUNDING_ALIASES
from .rows import ConvertState
from .rows import parquet_to_row

#: A path the fast path leaves to ``check_relative`` (stricter than it is fine): absolute, a drive, a ``..``.
_BAD_PATH = r"^[/\\]|^[A-Za-z]:|(^|[\\/])\.\.([\\/]|$)"
#: An ASCII entity code (``codes.CODE_RE`` fully matched) with its image digit: the digits after the last '_'.
_CODE = r"^[A-Za-z0-9_]+_(?P<d>[0-9])(?:[0-9]{4}|[0-9]{2})$"


class Refused(Exception):
    """The fast path does not take this batch; the reference path converts it."""


IdCheck = Callable[[list], None]


def iter_parquet_tables(
    opener: Callable, shards: Sequence[ParquetShard], split: str, schema: pa.Schema, on_ids: IdCheck | None = None
) -> Iterator[pa.Table]:
    """Tables of ``schema`` (the builder's row schema) from Parquet shards in order, one per record batch of
    ``iter_batches(batch_size=BATCH_SIZE)``; the same rows, warnings and errors as
    :func:`perckit.m4seg.parquet_reader.iter_parquet` + ``rows_to_table``.

    ``on_ids`` (the id guard) sees the example ids in file order: a fast batch's all at once, a reference
    batch's one row at a time right after that row's conversion, so that a duplicate id before a bad row
    raises first, as it did row by row."""
    for shard in shards:
        name = Path(shard.path).name
        where = f"M4Seg {split} split, {name}"
        state = ConvertState(split, name)
        with opener(shard.path, "rb") as f:
            pf = open_parquet(f, where)
            check_parquet_schema(pf.schema_arrow, where)
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
                table = batch_to_table(batch, state, schema, where, i, on_ids)
                del batch
                i += table.num_rows
                yield table
                del table
                # Hand Arrow's freed buffers back to the OS so the RSS stays flat over a long split.
                pa.default_memory_pool().release_unused()
        state.finish()


def _unreadable(where: str, i: int, e: BaseException) -> ReleaseFormatError:
    return ReleaseFormatError(f"{where}: rows from {i} on cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})")


def batch_to_table(
    batch: pa.RecordBatch, state: ConvertState, schema: pa.Schema, where: str = "", first: int = 0, on_ids: IdCheck | None = None
) -> pa.Table:
    """One record batch as a table of ``schema``: the fast path, else the reference path (see the module)."""
    try:
        table, flagged = fast_table(batch, schema)
    except (Refused, pa.ArrowException, ValueError, TypeError, OverflowError, KeyError, IndexError):
        return reference_table(batch, state, schema, where, first, on_ids)
    if flagged:
        _warn(table, flagged, state)
    if on_ids is not None:
        on_ids(table.column("example_id").to_pylist())
    return table


def reference_table(
    batch: pa.RecordBatch, state: ConvertState, schema: pa.Schema, where: str = "", first: int = 0, on_ids: IdCheck | None = None
) -> pa.Table:
    """The reference path: ``parquet_to_row`` per record (the precise checks and messages), then ``rows_to_table``."""
    try:
        records = batch.to_pylist()
    except (pa.ArrowException, *PARQUET_ERRORS) as e:
        raise _unreadable(where, first, e) from None
    rows = []
    for rec in records:
        row = parquet_to_row(rec, state)
        if on_ids is not None:
            on_ids([row["example_id"]])
        rows.append(row)
    return rows_to_table(rows, schema)


def _warn(table: pa.Table, flagged: list[int], state: ConvertState) -> None:
    """The entity-code warnings of the rows that may have some, exactly as ``parquet_to_row`` gives them."""
    sub = table.select(["example_id", "answer", "groundings"]).take(pa.array(flagged, pa.int64())).to_pylist()
    for row in sub:
        problems = codes.span_code_problems(row["answer"], row["groundings"])
        if problems:
            state.warn_spans(row["example_id"], problems)


# ---------------------------------------------------------------- column helpers


def _is_str(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _field(arr: pa.Array, names: Sequence[str]) -> list[pa.Array]:
    """The struct fields of ``arr`` among ``names``, in that order."""
    have = {arr.type.field(i).name for i in range(arr.type.num_fields)}
    return [pc.struct_field(arr, [n]) for n in names if n in have]


def _coalesce(cols: list[pa.Array], n: int, want: Callable[[pa.DataType], bool], what: str) -> pa.Array | None:
    """The first non-null of ``cols`` (an alias table's order); None when there is none; Refused on another type."""
    for c in cols:
        if not want(c.type):
            raise Refused(f"{what}: type {c.type}")
    if not cols:
        return None
    if len(cols) == 1 or cols[0].null_count == 0:
        return cols[0]
    if all(c.type == cols[0].type for c in cols):
        return pc.coalesce(*cols)
    raise Refused(f"{what}: aliases of different types")


def _text(cols: list[pa.Array], n: int, what: str) -> pa.Array:
    """A string column (alias-coalesced; all null when absent)."""
    out = _coalesce(cols, n, lambda t: _is_str(t) or pa.types.is_null(t), what)
    return pa.nulls(n, pa.string()) if out is None else out.cast(pa.string())


def _ints(arr: pa.Array, what: str) -> np.ndarray:
    """An integer column without nulls as int64."""
    if not pa.types.is_integer(arr.type) or arr.null_count:
        raise Refused(what)
    return arr.cast(pa.int64()).to_numpy(zero_copy_only=False)


def _offsets(lengths: np.ndarray) -> pa.Array:
    out = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    if out[-1] >= 2**31:
        raise Refused("list too long")
    return pa.array(out.astype(np.int32))


def _list(lengths: np.ndarray, values: pa.Array, type_: pa.DataType) -> pa.Array:
    return pa.ListArray.from_arrays(_offsets(lengths), values, type=type_)


def _list_parts(arr: pa.Array, n: int, what: str, null_ok: bool = False) -> tuple[np.ndarray, pa.Array]:
    """(lengths, values) of a list column; a null list is Refused unless ``null_ok`` (then it is empty)."""
    if not pa.types.is_list(arr.type):
        raise Refused(f"{what}: type {arr.type}")
    if arr.null_count and not null_ok:
        raise Refused(f"{what}: null")
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    values = arr.flatten()
    if len(values) != int(lengths.sum()):
        raise Refused(f"{what}: offsets")
    return lengths, values


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The offsets (n + 1) and data (uint8) of a string or binary array, without a copy."""
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, dtype=np.uint8)
    return off, data


# ---------------------------------------------------------------- the fast path


def fast_table(batch: pa.RecordBatch, schema: pa.Schema) -> tuple[pa.Table, list[int]]:
    """The batch as a table of ``schema`` and the rows whose entity-code warnings must be computed (a superset
    of the rows with a warning); :class:`Refused` (or an Arrow error) when the batch is not for this path."""
    n = batch.num_rows
    names = batch.schema.names
    cols = {name: batch.column(name) for name in names}

    def top(field_: str) -> list[pa.Array]:
        return [cols[a] for a in PARQUET_ALIASES[field_] if a in cols]

    out: dict[str, pa.Array] = {}
    for field_ in PARQUET_ALIASES:
        out[field_] = _text(top(field_), n, field_)
    if out["example_id"].null_count or out["answer"].null_count:
        raise Refused("null example_id or answer")
    images, img_off, heights, widths = _images(cols["images"], n, schema.field("images").type)
    out["images"] = images
    out["groundings"], flagged = _groundings(cols["groundings"], n, img_off, heights, widths, out["answer"], schema.field("groundings").type)
    table = pa.Table.from_arrays([out[f.name] for f in schema], schema=schema)
    return table, flagged


def _images(col: pa.Array, n: int, type_: pa.DataType) -> tuple[pa.Array, np.ndarray, np.ndarray, np.ndarray]:
    lengths, items = _list_parts(col, n, "images")
    if (lengths == 0).any() or not pa.types.is_struct(items.type) or items.null_count:
        raise Refused("images: empty or null")
    h = _ints(pc.struct_field(items, ["height"]), "height")
    w = _ints(pc.struct_field(items, ["width"]), "width")
    limit = rle_ops.MAX_PIXELS
    if (h <= 0).any() or (w <= 0).any() or (h > limit).any() or (w > limit).any() or (h * w > limit).any():
        raise Refused("image size")
    m = len(items)
    image_id = _text(_field(items, ["image_id"]), m, "image_id")
    path = _text(_field(items, ["path"]), m, "path")
    if path.null_count < m:
        bad = pc.or_(
            pc.or_(pc.equal(pc.utf8_length(path), 0), pc.greater(pc.utf8_length(path), MAX_PATH_CHARS)),
            pc.or_(pc.match_substring(path, "\x00"), pc.match_substring_regex(path, _BAD_PATH)),
        )
        if pc.any(bad).as_py():
            raise Refused("image path")
    item_type = type_.value_type
    values = pa.StructArray.from_arrays(
        [image_id, path, pa.array(h.astype(np.int32)), pa.array(w.astype(np.int32))], fields=list(item_type)
    )
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    return _list(lengths, values, type_), off, h, w


def _groundings(
    col: pa.Array, n: int, img_off: np.ndarray, heights: np.ndarray, widths: np.ndarray, answer: pa.Array, type_: pa.DataType
) -> tuple[pa.Array, list[int]]:
    lengths, g = _list_parts(col, n, "groundings", null_ok=True)
    item_type = type_.value_type
    m = len(g)
    if m == 0:
        return _list(lengths, pa.array([], item_type), type_), []
    if not pa.types.is_struct(g.type) or g.null_count:
        raise Refused("groundings: null item")
    parent = np.repeat(np.arange(n, dtype=np.int64), lengths)
    k = _ints(pc.struct_field(g, ["image_index"]), "image_index")
    n_images = np.diff(img_off)[parent]
    if (k < 1).any() or (k > n_images).any():
        raise Refused("image_index")
    img = img_off[parent] + k - 1
    gh, gw = heights[img], widths[img]

    mask = _mask(g, gh, gw, item_type.field("mask").type)
    bbox = _bbox(g, m, mask, item_type.field("bbox_xywh").type)
    span, starts, ends = _spans(g, m, answer, parent, item_type.field("answer_span").type)
    fields = {
        "image_index": pa.array(k.astype(np.int32)),
        "name": _text(_field(g, ["name"]), m, "name"),
        "annotation_ids": _annotation_ids(g, m, item_type.field("annotation_ids").type),
        "object_annotation_id": _text(_field(g, ["object_annotation_id"]), m, "object_annotation_id"),
        "answer_span": span,
        "bbox_xywh": bbox,
        "mask": mask,
    }
    values = pa.StructArray.from_arrays([fields[f.name] for f in item_type], fields=list(item_type))
    flagged = _code_suspects(answer, parent, starts, ends, k)
    return _list(lengths, values, type_), flagged


def _mask(g: pa.Array, gh: np.ndarray, gw: np.ndarray, type_: pa.DataType) -> pa.Array:
    """The masks as ``{size: [H, W], counts}``: each one's size is its image's, its runs sum to H*W and the
    counts scan takes it (what ``rle.validate`` checks); else Refused."""
    obj = _coalesce(_field(g, PARQUET_GROUNDING_ALIASES["mask"]), len(g), pa.types.is_struct, "mask")
    if obj is None or obj.null_count:
        raise Refused("mask: none")
    size_col, counts_col = _field(obj, ["size"]), _field(obj, ["counts"])
    if not size_col or not counts_col:
        raise Refused("mask fields")
    lengths, size_values = _list_parts(size_col[0], len(g), "mask.size")
    if (lengths != 2).any():
        raise Refused("mask.size length")
    size = _ints(size_values, "mask.size")
    if not (np.array_equal(size[0::2], gh) and np.array_equal(size[1::2], gw)):
        raise Refused("mask.size")
    counts = counts_col[0]
    if not (pa.types.is_string(counts.type) or pa.types.is_binary(counts.type)) or counts.null_count:
        raise Refused(f"mask.counts: type {counts.type}")
    scanned = _kernels.scan_counts(*_buffers(counts))
    if scanned[:, _kernels.STATUS].any() or not np.array_equal(scanned[:, _kernels.TOTAL], gh * gw):
        raise Refused("mask.counts")
    size_type = type_.field("size").type
    sizes = pa.ListArray.from_arrays(
        pa.array(np.arange(0, 2 * len(g) + 1, 2, dtype=np.int32)), pa.array(size.astype(np.int32)), type=size_type
    )
    return pa.StructArray.from_arrays([sizes, counts.cast(pa.string())], fields=list(type_))


def _is_number_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) and (pa.types.is_integer(t.value_type) or pa.types.is_floating(t.value_type))


def _bbox(g: pa.Array, m: int, mask: pa.Array, type_: pa.DataType) -> pa.Array:
    """4 finite numbers as float32; a null bbox is the mask's (``rle.to_bbox``)."""
    col = _coalesce(_field(g, PARQUET_GROUNDING_ALIASES["bbox_xywh"]), m, _is_number_list, "bbox")
    if col is None:
        col = pa.nulls(m, pa.list_(pa.float64()))
    lengths, values = _list_parts(col, m, "bbox", null_ok=True)
    present = ~np.asarray(col.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if (lengths[present] != 4).any() or values.null_count:
        raise Refused("bbox: length")
    vals = values.cast(pa.float64()).to_numpy(zero_copy_only=False)
    if not np.isfinite(vals).all():
        raise Refused("bbox: not finite")
    out = np.zeros((m, 4), dtype=np.float64)
    out[present] = vals.reshape(-1, 4)
    missing = np.flatnonzero(~present)
    if missing.size:
        rles = mask.take(pa.array(missing)).to_pylist()
        out[missing] = np.asarray([rle_ops.to_bbox(r) for r in rles], dtype=np.float64).reshape(-1, 4)
    flat = pa.array(out.reshape(-1)).cast(pa.float32())
    return pa.ListArray.from_arrays(pa.array(np.arange(0, 4 * m + 1, 4, dtype=np.int32)), flat, type=type_)


def _annotation_ids(g: pa.Array, m: int, type_: pa.DataType) -> pa.Array:
    """A list of str per grounding (a null list is empty); a scalar or a null item: Refused."""
    cols = _field(g, ["annotation_ids"])
    if not cols:
        return pa.ListArray.from_arrays(pa.array(np.zeros(m + 1, dtype=np.int32)), pa.array([], pa.string()), type=type_)
    col = cols[0]
    if not (pa.types.is_list(col.type) and _is_str(col.type.value_type)):
        raise Refused(f"annotation_ids: type {col.type}")
    lengths, values = _list_parts(col, m, "annotation_ids", null_ok=True)
    if values.null_count:
        raise Refused("annotation_ids: null item")
    return _list(lengths, values.cast(pa.string()), type_)


def _spans(g: pa.Array, m: int, answer: pa.Array, parent: np.ndarray, type_: pa.DataType) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """``[start, end)`` with ``0 <= start <= end <= len(answer)`` (code points), as int32 lists."""
    cols = _field(g, ["answer_span"])
    if not cols or not (pa.types.is_list(cols[0].type) and pa.types.is_integer(cols[0].type.value_type)):
        raise Refused("answer_span: type")
    lengths, values = _list_parts(cols[0], m, "answer_span")
    if (lengths != 2).any():
        raise Refused("answer_span: length")
    v = _ints(values, "answer_span")
    s, e = v[0::2], v[1::2]
    alen = pc.utf8_length(answer).to_numpy(zero_copy_only=False).astype(np.int64)[parent]
    if (s < 0).any() or (s > e).any() or (e > alen).any():
        raise Refused("answer_span: bounds")
    span = pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * m + 1, 2, dtype=np.int32)), pa.array(v.astype(np.int32)), type=type_)
    return span, s, e


def _code_suspects(answer: pa.Array, parent: np.ndarray, s: np.ndarray, e: np.ndarray, k: np.ndarray) -> list[int]:
    """Rows that may have an entity-code warning: one of their groundings' ``answer[s:e]`` is not an ASCII
    code naming its ``image_index``, or their answer is not ASCII (offsets are then code points)."""
    ascii_rows = pc.string_is_ascii(answer).to_numpy(zero_copy_only=False)
    off, data = _buffers(answer)
    ascii_g = np.asarray(ascii_rows, dtype=bool)[parent]
    start = off[parent].astype(np.int64) + s
    lengths = np.where(ascii_g, e - s, 0)  # a non-ASCII answer's row is flagged as it is
    sub_off = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=sub_off[1:])
    idx = np.repeat(start - sub_off[:-1], lengths) + np.arange(int(sub_off[-1]), dtype=np.int64)
    sub = pa.Array.from_buffers(
        pa.large_binary(), lengths.size, [None, pa.py_buffer(sub_off), pa.py_buffer(data[np.clip(idx, 0, max(len(data) - 1, 0))] if idx.size else b"")]
    )
    digit = pc.struct_field(pc.extract_regex(sub.cast(pa.large_string(), safe=False), _CODE), [0])
    ok = pc.fill_null(pc.equal(pc.cast(digit, pa.int64(), safe=False), pa.array(k)), False).to_numpy(zero_copy_only=False)
    bad = ~np.asarray(ok, dtype=bool) | ~ascii_g
    return sorted(set(parent[bad].tolist()))
