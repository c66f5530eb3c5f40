"""The Parquet shards of an M⁴Seg split (``data/{split}-*.parquet``): opening a shard (:func:`open_parquet`),
the schema check, the row-group shard type and the ``example_id`` uniqueness pass (:func:`scan_parquet_ids`).

The rows (the split into row-group shards for ``num_proc``, the record batches converted to the builder's
tables) are :mod:`perckit.m4seg.parquet_tables`'.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Sequence

from ..errors import ReleaseFormatError
from ..io.parquetio import check_column_chunk_sizes
from .layout import PARQUET_GLOB
from .rows import PARQUET_GROUNDING_ALIASES

BATCH_SIZE = 1000


@dataclass
class ParquetShard:
    """Row groups ``[rg_start, rg_stop)`` of one Parquet file (``rg_stop=None``: every row group)."""

    path: str
    rg_start: int = 0
    rg_stop: int | None = None


#: Columns (one of the names) and nested fields every M4Seg Parquet shard must have [card].
PARQUET_COLUMNS: dict[str, tuple[str, ...]] = {
    "example_id": ("example_id",),
    "a": ("a", "answer"),
    "images": ("images",),
    "groundings": ("groundings",),
}
PARQUET_IMAGE_FIELDS = ("height", "width")
PARQUET_GROUNDING_FIELDS: dict[str, tuple[str, ...]] = {
    "image_index": ("image_index",),
    "answer_span": ("answer_span",),
    "segmentation": PARQUET_GROUNDING_ALIASES["mask"],
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
    import pyarrow as pa
    import pyarrow.parquet as pq

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


def _list_of_struct_fields(arrow_type: Any) -> list[str] | None:
    import pyarrow as pa

    if not (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)):
        return None
    item = arrow_type.value_type
    return [item.field(i).name for i in range(item.num_fields)] if pa.types.is_struct(item) else None


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
        fields = _list_of_struct_fields(arrow_type)
        if fields is None:
            raise ReleaseFormatError(f"{where}: column {column!r}: expected a list of structs, found {arrow_type}")
        lacking = [name for name, aliases in required.items() if not any(a in fields for a in aliases)]
        if lacking:
            raise ReleaseFormatError(
                f"{where}: column {column!r}: its items lack the field(s) {lacking}; expected {sorted(required)} (found {fields})"
            )


def scan_parquet_ids(opener: Callable, paths: Sequence[str], split: str) -> int:
    """Check example_id uniqueness over every shard of a split (the ``example_id`` column only); returns the count.

    The ids are taken as ``str()`` of each value (:func:`str_column`; a null as ``'None'``), so an int 7 in one
    shard and "7" in another repeat. pyarrow's dictionary encoding numbers the distinct ids (exact, in C++;
    this runs before the ``num_proc`` workers start); the first id whose number was seen before is the first
    repeat in order, and raises naming it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = _example_id_columns(opener, paths, split)
    chunks = [pc.fill_null(str_column(chunk), "None").cast(pa.large_string()) for c in columns for chunk in c.chunks]
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


def str_column(arr: Any) -> Any:
    """``str()`` of each value of an Arrow array as a string array, nulls kept (ids are stored as ``str(...)``
    whatever their type): a string or integer column is cast (the same text), any other goes value by value."""
    import pyarrow as pa

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
    import pyarrow as pa

    columns = []
    for p in paths:
        where = f"M4Seg {split} split, {Path(p).name}"
        with opener(p, "rb") as f:
            pf = open_parquet(f, where)
            check_parquet_schema(pf.schema_arrow, where)
            try:
                columns.append(pf.read(columns=["example_id"]).column(0))
            except (pa.ArrowException, *PARQUET_ERRORS) as e:
                raise ReleaseFormatError(
                    f"{where}: the example_id column cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})"
                ) from None
    return columns
