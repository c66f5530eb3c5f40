"""The Parquet shards of an M⁴Seg split (``data/{split}-*.parquet``) read as rows: the schema check, the
split into row-group shards for ``num_proc`` (:func:`parquet_shards`), the row iterator (:func:`iter_parquet`,
``iter_batches(batch_size=1000)``, so no split is held in memory) and the ``example_id`` uniqueness pass.

Each record becomes a row by :func:`perckit.m4seg.rows.parquet_to_row`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Sequence

from ..errors import ReleaseFormatError
from ..parquetio import check_column_chunk_sizes
from .ids import IdGuard
from .layout import PARQUET_GLOB
from .rows import PARQUET_GROUNDING_ALIASES
from .rows import ConvertState
from .rows import parquet_to_row

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
    """Every column and nested field :func:`parquet_to_row` needs is there (extra ones are fine; types are checked per row)."""
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


def first_row(pf: Any, where: str, state: ConvertState) -> dict | None:
    """The first row of an open Parquet file, converted (None for a file without rows)."""
    import pyarrow as pa

    try:
        batch = next(pf.iter_batches(batch_size=1), None)
    except (pa.ArrowException, *PARQUET_ERRORS) as e:
        raise ReleaseFormatError(f"{where}: rows from 0 on cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})") from None
    if batch is None or batch.num_rows == 0:
        return None
    return parquet_to_row(batch.to_pylist()[0], state)


def parquet_shards(opener: Callable, paths: Sequence[str], rows_per_shard: int = 20_000, split: str = "") -> list[ParquetShard]:
    """One shard per file, or per run of row groups of about ``rows_per_shard`` rows (finer ``num_proc`` shards).

    Reads every file's footer and converts its first row: an unreadable file, a missing column or a file of
    another format raises here, before generation.
    """
    out = []
    for p in paths:
        where = f"M4Seg {split} split, {Path(p).name}"
        with opener(p, "rb") as f:
            pf = open_parquet(f, where)
            check_parquet_schema(pf.schema_arrow, where)
            md = pf.metadata
            first_row(pf, where, ConvertState(split, Path(p).name, quiet=True))
        acc, start = 0, 0
        for rg in range(md.num_row_groups):
            acc += md.row_group(rg).num_rows
            if acc >= rows_per_shard and rg + 1 < md.num_row_groups:
                out.append(ParquetShard(p, start, rg + 1))
                start, acc = rg + 1, 0
        out.append(ParquetShard(p, start, None if start == 0 else md.num_row_groups))
    return out


def iter_parquet(opener: Callable, shards: Sequence[ParquetShard], split: str) -> Iterator[dict]:
    """Rows of Parquet shards in order: ``ParquetFile(open(path, "rb")).iter_batches(batch_size=1000)``."""
    import pyarrow as pa

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
                    records = batch.to_pylist()
                except StopIteration:
                    break
                except (pa.ArrowException, *PARQUET_ERRORS) as e:
                    # A corrupt or truncated data page behind an intact footer.
                    raise ReleaseFormatError(
                        f"{where}: rows from {i} on cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})"
                    ) from None
                del batch
                for rec in records:
                    yield parquet_to_row(rec, state)
                i += len(records)
                # Hand Arrow's freed buffers back to the OS so the RSS stays flat over a long split.
                pa.default_memory_pool().release_unused()
        state.finish()


def scan_parquet_ids(opener: Callable, paths: Sequence[str], split: str) -> int:
    """Check example_id uniqueness over every shard of a split (the ``example_id`` column only); returns the count.

    The columns of every shard are counted by pyarrow (``count_distinct`` over them all, exact, in C++: a
    tenth of the per-id hashing for the 743k train ids, and this runs before the ``num_proc`` workers start).
    When that finds a repeat, or a column is of another type than string or integer (whose ``str()`` could
    merge distinct values) or holds nulls, :func:`_count_ids_by_reference` goes over the same columns and
    raises at the first repeated id in order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = _example_id_columns(opener, paths, split)
    kinds = (pa.types.is_string, pa.types.is_large_string, pa.types.is_integer)
    if all(any(k(c.type) for k in kinds) and not c.null_count for c in columns):
        ids = pa.chunked_array([chunk for c in columns for chunk in c.cast(pa.large_string()).chunks], pa.large_string())
        if pc.count_distinct(ids).as_py() == len(ids):
            return len(ids)
    return _count_ids_by_reference(columns, split)


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


def _count_ids_by_reference(columns: Sequence, split: str) -> int:
    """:func:`scan_parquet_ids` id by id (:class:`IdGuard`, the ids as ``str``, 65,536 at a time): raises at
    the first repeat in order; returns the count."""
    guard = IdGuard(f"M4Seg {split} split, {PARQUET_GLOB.format(split=split)}")
    for column in columns:
        for start in range(0, len(column), 65536):
            guard.add_many([str(v) for v in column.slice(start, 65536).to_pylist()])
    guard.flush()
    return guard.count
