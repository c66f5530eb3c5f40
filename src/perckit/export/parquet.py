"""Write one split of an export as Parquet shards the Hub's Dataset Viewer can page.

The rules, as the Viewer applies them to a data-only Parquet dataset:

- the column types come from the ``huggingface`` schema metadata of the Parquet files (the features JSON);
  every shard is written with ``ds.features.arrow_schema``, which carries it;
- a page of the Viewer is :data:`VIEWER_PAGE_ROWS` rows; one page request may read at most
  :data:`VIEWER_MAX_PAGE_BYTES` bytes of row groups (a page index lets it read only the pages it needs, small
  row groups keep the rest small), so row groups are cut at :data:`MAX_ROW_GROUP_BYTES` uncompressed bytes and
  every column chunk carries a page index (offset index, and a column index wherever the chunk has statistics);
- image, audio and video cells become assets only when they carry their bytes: a value that names a local file
  by ``path`` alone shows as nothing, so such files are embedded (read into ``bytes``, ``path`` reduced to its
  base name, as ``push_to_hub`` does); values that already carry bytes are written unchanged;
- at most :data:`VIEWER_MAX_SPLITS` splits per config.

Bytes are measured on the Arrow data itself, vectorised (value widths, the offsets of variable-length values,
list lengths), never a per-row Python loop: a row range's size is the sum of its rows' sizes. A row larger than
the row-group limit is a row group of its own, reported in :attr:`SplitExport.max_row_bytes`. Shards are cut
once they would exceed ``max_shard_size``. The table is read one bounded slice at a time, so memory stays flat
for splits of hundreds of thousands of rows. The same input gives the same bytes (pyarrow writes no timestamp).
"""

from __future__ import annotations

import bisect
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import ReleaseFormatError
from ..hf.cli import progress as progress_bar
from ..io.paths import atomic_file, open_regular_file, read_regular_file

#: Uncompressed bytes per row group (datasets' ``MAX_ROW_GROUP_SIZE`` of 100MB since 4.1; the Viewer used to
#: copy a Parquet file as is only when its row groups were under this size).
MAX_ROW_GROUP_BYTES: int = 100_000_000
#: Rows in one page of the Viewer (its rows endpoint's largest ``length``).
VIEWER_PAGE_ROWS: int = 100
#: Bytes of row groups one page request may read (the rows index's ``max_arrow_data_in_memory``).
VIEWER_MAX_PAGE_BYTES: int = 300_000_000
#: Splits one config may have before the Viewer refuses it.
VIEWER_MAX_SPLITS: int = 30

#: Rows read from the source table per slice (fewer when media are embedded: the files are read into memory).
READ_ROWS = 10_000
EMBED_READ_ROWS = 100
#: Largest media file embedded into a shard (a value the builder gives by path alone).
MAX_EMBED_FILE_BYTES = 1 << 30


@dataclass
class SplitExport:
    name: str
    num_examples: int
    num_bytes: int
    files: list[str] = field(default_factory=list)
    max_row_bytes: int = 0
    max_row_group_bytes: int = 0
    max_page_bytes: int = 0


# ----------------------------------------------------------------------------------------------- byte measure

def _fixed_size(t: pa.DataType) -> float | None:
    """Bytes of every value of type ``t`` when they all have the same size (fixed-width values, fixed-size lists
    and structs of them), else None."""
    if isinstance(t, pa.ExtensionType):
        return _fixed_size(t.storage_type)
    if pa.types.is_null(t):
        return 0.0
    if pa.types.is_boolean(t):
        return 0.125
    if pa.types.is_fixed_size_list(t):
        child = _fixed_size(t.value_type)
        return None if child is None else child * t.list_size
    if pa.types.is_struct(t):
        sizes = [_fixed_size(f.type) for f in t]
        return None if any(x is None for x in sizes) else float(sum(sizes))
    if pa.types.is_dictionary(t) or _is_bytes_or_text(t) or pa.types.is_list(t) or pa.types.is_large_list(t) \
            or pa.types.is_map(t):
        return None
    try:
        return t.bit_width / 8
    except ValueError:
        return None


def value_sizes(arr: pa.Array) -> np.ndarray:
    """Uncompressed Arrow bytes of each value of ``arr`` (float64, one per value): fixed-width values at their
    width (a boolean is one bit), variable-length values their data bytes plus one offset, lists the sum of their
    elements plus one offset, structs the sum of their fields. Validity bitmaps are not counted."""
    n = len(arr)
    t = arr.type
    if isinstance(t, pa.ExtensionType):
        return value_sizes(arr.storage)
    if n == 0:
        return np.zeros(0)
    fixed = _fixed_size(t)
    if fixed is not None:  # no array per element: a depth map of a million floats is one multiplication
        return np.full(n, fixed)
    if pa.types.is_dictionary(t):
        return value_sizes(arr.indices)
    if _is_bytes_or_text(t):
        lengths = pc.fill_null(pc.binary_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.float64)
        return lengths + (8 if pa.types.is_large_binary(t) or pa.types.is_large_string(t) else 4)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        offs = np.asarray(arr.offsets, dtype=np.int64)
        width = 8 if pa.types.is_large_list(t) else 4
        child_fixed = _fixed_size(t.value_type)
        if child_fixed is not None:
            return np.diff(offs) * child_fixed + width
        start, stop = int(offs[0]), int(offs[-1])
        child = value_sizes(arr.values.slice(start, stop - start))
        total = np.concatenate([[0.0], np.cumsum(child)])
        offs = offs - start
        return total[offs[1:]] - total[offs[:-1]] + width
    if pa.types.is_fixed_size_list(t):
        k = t.list_size
        child = value_sizes(arr.values.slice(arr.offset * k, n * k))
        return child.reshape(n, k).sum(axis=1) if k else np.zeros(n)
    if pa.types.is_struct(t):
        out = np.zeros(n)
        for i in range(t.num_fields):
            out += value_sizes(arr.field(i))
        return out
    return np.full(n, arr.nbytes / n)  # a type this function does not know (a union...): its average value size


def row_sizes(table: pa.Table) -> np.ndarray:
    """Uncompressed Arrow bytes of each row of ``table`` (see :func:`value_sizes`)."""
    out = np.zeros(table.num_rows)
    for column in table.columns:
        out += np.concatenate([np.zeros(0), *map(value_sizes, column.chunks)])
    return out


# -------------------------------------------------------------------------------------------------- embedding

def _path_only(chunk: pa.Array) -> np.ndarray:
    """Mask of the values that name a file by path and carry no bytes."""
    missing = pc.and_(pc.is_valid(chunk), pc.is_null(pc.struct_field(chunk, "bytes")))
    missing = pc.and_(missing, pc.is_valid(pc.struct_field(chunk, "path")))
    return pc.fill_null(missing, False).to_numpy(zero_copy_only=False)


def _media_prefixes(pf) -> list[str]:
    """The Parquet column paths of every struct of exactly the fields ``bytes`` and ``path`` in a file's schema
    (``image``, ``frames.list.element.image``): the storage of every datasets media feature."""
    leaves = [pf.schema.column(i).path for i in range(len(pf.schema))]
    prefixes = [leaf[: -len(".bytes")] for leaf in leaves if leaf.endswith(".bytes")]
    return [p for p in prefixes if {leaf[len(p) + 1:] for leaf in leaves if leaf.startswith(p + ".")} == {"bytes", "path"}]


def _is_bytes_or_text(t: pa.DataType) -> bool:
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


#: deepest nesting of structs and lists the media check walks (perckit's features nest under 10 levels)
MAX_MEDIA_DEPTH = 64


def _first_path_only(arr: pa.Array, depth: int = 0) -> tuple[int, str | None]:
    """(how many, the first) media values of ``arr`` that name a file by ``path`` and carry no ``bytes``, at any
    depth (structs and lists walked; an empty path, the "not provided" marker, does not count)."""
    if depth > MAX_MEDIA_DEPTH:
        raise ReleaseFormatError(f"expected columns nested at most {MAX_MEDIA_DEPTH} levels deep, got deeper ones")
    t = arr.type
    if isinstance(t, pa.ExtensionType):
        return 0, None
    if pa.types.is_struct(t):
        names = {t.field(i).name: t.field(i).type for i in range(t.num_fields)}
        if set(names) == {"bytes", "path"} and all(_is_bytes_or_text(x) for x in names.values()):
            path = pc.struct_field(arr, "path")
            named = pc.greater(pc.binary_length(path.cast(pa.large_binary())), 0)  # a non-empty path
            bad = pc.fill_null(pc.and_(pc.and_(pc.is_valid(arr), pc.is_null(pc.struct_field(arr, "bytes"))), named), False)
            count = pc.sum(bad).as_py() or 0
            return (count, path.filter(bad)[0].as_py()) if count else (0, None)
        total, first = 0, None
        for i in range(t.num_fields):
            n, f = _first_path_only(pc.struct_field(arr, [i]), depth + 1)
            total, first = total + n, first if first is not None else f
        return total, first
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _first_path_only(arr.flatten(), depth + 1)
    return 0, None


def check_media_table(table, where: str) -> None:
    """Refuse a table (a ``pyarrow.Table``, or the Arrow table of a loaded ``datasets.Dataset``: ``ds.data``) holding a
    media value ``{bytes: null, path: "<a file>"}`` at any depth: datasets' ``Image`` / ``Audio`` / ``Video`` decode
    such a value by opening ``path`` on this machine (or fetching it, for a URL), so a row of a stranger's export could
    read any local file. An export perckit wrote embeds every file's bytes (:func:`write_split`), so its rows pass.
    On a memory-mapped table this reads the validity bitmaps and the path offsets, not the bytes.
    ``ReleaseFormatError`` naming ``where``, the column, how many values and the first path."""
    for name in table.column_names:
        count, first = 0, None
        for chunk in table.column(name).chunks:
            try:
                n, path = _first_path_only(chunk)
            except ReleaseFormatError as e:
                raise ReleaseFormatError(f"{where}column {name!r}: {e}") from None
            count, first = count + n, first if first is not None else path
        if count:
            raise ReleaseFormatError(
                f"{where}column {name!r}: expected every media value to carry its bytes (an export embeds them), got "
                f"{count} naming a file by path alone, e.g. {str(first)[:200]!r} (decoding would read that file "
                "from this machine)")


def check_media_bytes(pf, where: str) -> None:
    """:func:`check_media_table` on a Parquet file (``pyarrow.parquet.ParquetFile``, already past
    :func:`perckit.io.parquetio.open_parquet`) that is not loaded here (``write_task`` hands the files to lmms-eval):
    every struct of exactly the fields ``bytes`` and ``path`` is read, only those leaves, one row group at a time.
    The message names ``where`` and the row group."""
    prefixes = _media_prefixes(pf)
    if not prefixes:
        return
    for g in range(pf.num_row_groups):
        try:
            table = pf.read_row_group(g, columns=prefixes)
        except (pa.ArrowException, OSError, ValueError) as e:
            raise ReleaseFormatError(f"{where}: row group {g}: the media columns {prefixes} cannot be read "
                                     f"({type(e).__name__}: {str(e)[:200]})") from None
        check_media_table(table, f"{where}: row group {g}, ")


def _embed_top_level_media(columns: list[str]) -> Callable[[pa.Table], pa.Table]:
    """Table function: read the file of every ``{bytes: null, path}`` media value into ``bytes`` (path becomes
    its basename, as ``push_to_hub`` does); the other values are unchanged. Works for every media type, on both
    datasets lines (datasets 3.6 does not embed ``Video``). Each file is read with the checked reader: a regular
    file of at most :data:`MAX_EMBED_FILE_BYTES` (an Arrow binary value holds at most 2 GiB)."""

    def embed(table: pa.Table) -> pa.Table:
        for name in columns:
            idx = table.schema.get_field_index(name)
            column = table.column(idx)
            if not any(_path_only(c).any() for c in column.chunks):
                continue
            out = []
            for v in column.to_pylist():
                if v is not None and v.get("bytes") is None and v.get("path"):
                    where = f"column {name!r}: path {v['path'][:200]!r}"
                    data = read_regular_file(v["path"], where, MAX_EMBED_FILE_BYTES, ReleaseFormatError)
                    v = {**v, "bytes": data, "path": os.path.basename(v["path"])}
                out.append(v)
            table = table.set_column(idx, table.schema.field(idx), pa.array(out, type=table.schema.field(idx).type))
        return table

    return embed


def _embedder(ds: datasets.Dataset) -> Callable[[pa.Table], pa.Table] | None:
    """The table function embedding the media that name a file by path only (bytes null), None when there are none:
    rows whose media already carry their bytes are written unchanged (embedding would also rewrite each ``path`` to
    its basename, so the export would no longer equal the builder's rows). Nested media: ``embed_table_storage``."""
    from datasets.features.features import require_decoding
    from datasets.table import embed_table_storage

    columns = [n for n, f in ds.features.items() if require_decoding(f, ignore_decode_attribute=True)]
    types = [ds.data.column(n).type for n in columns]
    if not all(pa.types.is_struct(t) and t.get_field_index("bytes") >= 0 and t.get_field_index("path") >= 0 for t in types):
        return embed_table_storage  # media nested in lists or structs
    if any(_path_only(chunk).any() for n in columns for chunk in ds.data.column(n).chunks):
        return _embed_top_level_media(columns)
    return None


# ----------------------------------------------------------------------------------------------------- writing

def _column_options(features: datasets.Features, schema: pa.Schema) -> dict:
    """Media bytes are stored as they are (already compressed, no dictionary); everything else is
    dictionary-encoded and snappy-compressed."""
    from datasets.features.features import require_decoding

    def leaves(path: str, t: pa.DataType) -> Iterator[str]:
        if isinstance(t, pa.ExtensionType):
            t = t.storage_type
        if pa.types.is_struct(t):
            for f in t:
                yield from leaves(f"{path}.{f.name}", f.type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            yield from leaves(f"{path}.list.element", t.value_type)
        else:
            yield path

    compression: dict[str, str] = {}
    dictionary: list[str] = []
    for f in schema:
        media = require_decoding(features[f.name], ignore_decode_attribute=True)
        for leaf in leaves(f.name, f.type):
            plain = media and leaf.endswith(".bytes")
            compression[leaf] = "none" if plain else "snappy"
            if not plain:
                dictionary.append(leaf)
    return {"compression": compression, "use_dictionary": dictionary}


class _ShardWriter:
    """Row groups in, shard files out (temporary names until the number of shards is known)."""

    def __init__(self, folder: Path, split: str, schema: pa.Schema, options: dict, max_shard_size: int) -> None:
        self.folder, self.split, self.schema, self.options, self.max_shard_size = folder, split, schema, options, max_shard_size
        self.writer: pq.ParquetWriter | None = None
        self.file: contextlib.ExitStack | None = None  # the open atomic_file of the shard being written
        self.paths: list[Path] = []
        self.shard_bytes = 0
        self.groups: list[tuple[int, int]] = []  # (rows, measured bytes) of every row group, in order
        self.group_shard: list[int] = []

    def _open(self) -> None:
        """Start the next shard: a ``.partial`` file written through the one atomic writer (fsync-ed and renamed into
        place by :meth:`close`; removed, with an OutputError naming it, when writing fails)."""
        path = self.folder / f".{self.split}-{len(self.paths):05d}.parquet.partial"
        self.file = contextlib.ExitStack()
        f = self.file.enter_context(atomic_file(path, f"export shard {path.name!r}"))
        self.paths.append(path)
        self.writer = pq.ParquetWriter(f, self.schema, write_page_index=True, **self.options)
        self.shard_bytes = 0

    def close(self) -> None:
        if self.writer is not None:
            writer, self.writer = self.writer, None
            try:
                writer.close()
            except BaseException as e:
                self.file.__exit__(type(e), e, e.__traceback__)
                raise
            self.file.close()

    def abort(self, error: BaseException) -> None:
        """Drop the shard being written (its temporary file is removed) after ``error``."""
        if self.writer is not None:
            writer, self.writer = self.writer, None
            with contextlib.suppress(Exception):
                writer.close()
            with contextlib.suppress(Exception):
                self.file.__exit__(type(error), error, error.__traceback__)

    def write_group(self, table: pa.Table, nbytes: int) -> None:
        if self.writer is None or (self.shard_bytes > 0 and self.shard_bytes + nbytes > self.max_shard_size):
            self.close()
            self._open()
        same = table.schema.equals(self.schema, check_metadata=False)
        table = pa.Table.from_arrays(table.columns, schema=self.schema) if same else datasets.table.table_cast(table, self.schema)
        self.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self.shard_bytes += nbytes
        self.groups.append((table.num_rows, nbytes))
        self.group_shard.append(len(self.paths) - 1)


def max_page_bytes(groups: list[tuple[int, int]], page_rows: int = VIEWER_PAGE_ROWS) -> int:
    """The most bytes of row groups any ``page_rows``-row window (any start row) overlaps, for row groups given
    in order as ``(rows, bytes)`` (across the shards of one split). The maximum is reached by a window whose first
    row is the last row of some row group (moving the start further only drops that group), so those starts are
    the ones tried."""
    starts, ends, total = [], [], [0]
    pos = 0
    for rows, nbytes in groups:
        if rows <= 0:
            continue
        starts.append(pos)
        pos += rows
        ends.append(pos)
        total.append(total[-1] + nbytes)
    best = 0
    for last in ends:
        s = max(last - 1, 0)
        first = bisect.bisect_right(ends, s)          # groups that end after row s
        stop = bisect.bisect_left(starts, s + page_rows)  # groups that start before the window ends
        best = max(best, total[stop] - total[first])
    return best


def write_split(ds: datasets.Dataset, folder: Path, split: str, max_shard_size: int | str = "500MB",
                progress: bool | None = None, max_row_group_bytes: int = MAX_ROW_GROUP_BYTES) -> SplitExport:
    """``<folder>/<split>-NNNNN-of-NNNNN.parquet``: row groups of at most ``max_row_group_bytes`` uncompressed
    bytes (and at most the shard size; one row larger than that is a row group alone), shards cut before they
    exceed ``max_shard_size``, a page index in every file, media referenced by path embedded. Returns the split's
    rows, bytes, files and the sizes the Viewer cares about (the bytes of a row group are the larger of the Arrow
    measure and the uncompressed size the Parquet footer records, which is what the Viewer reads)."""
    from datasets.utils.py_utils import convert_file_size_to_int

    shard_limit = convert_file_size_to_int(max_shard_size)
    group_limit = max(min(int(max_row_group_bytes), shard_limit), 1)
    folder.mkdir(parents=True, exist_ok=True)
    schema = ds.features.arrow_schema
    embed = _embedder(ds)
    out = _ShardWriter(folder, split, schema, _column_options(ds.features, schema), shard_limit)
    bar = progress_bar(desc=f"writing {folder.name}/{split}", on=progress, total=ds.num_rows, unit="row")
    pending: list[pa.Table] = []
    pending_bytes = 0.0
    max_row = 0.0

    def flush() -> None:
        nonlocal pending, pending_bytes
        if pending:
            out.write_group(pa.concat_tables(pending), int(np.ceil(pending_bytes)))
            pending, pending_bytes = [], 0.0

    try:
        arrow = ds.with_format("arrow")
        step = EMBED_READ_ROWS if embed else READ_ROWS
        for table in (arrow[start:start + step] for start in range(0, ds.num_rows, step)):
            if embed is not None:
                table = embed(table)
            sizes = row_sizes(table)
            if len(sizes):
                max_row = max(max_row, float(sizes.max()))
            cum = np.concatenate([[0.0], np.cumsum(sizes)])
            i, n = 0, table.num_rows
            while i < n:
                # the most rows from i on that still fit in the pending row group
                k = int(np.searchsorted(cum, cum[i] + (group_limit - pending_bytes), side="right")) - 1 - i
                if k <= 0:
                    if pending:
                        flush()
                        continue
                    k = 1  # one row larger than the limit: a row group of its own
                pending.append(table.slice(i, k))
                pending_bytes += float(cum[i + k] - cum[i])
                i += k
                if i < n or pending_bytes >= group_limit:
                    flush()
            bar.update(n)
        flush()
        if out.writer is None:  # an empty split: one shard holding the schema
            out._open()
        out.close()
    except BaseException as e:
        out.abort(e)
        for p in out.paths:
            p.unlink(missing_ok=True)
        raise
    finally:
        bar.close()
    return _finish(out, folder, split, ds.num_rows, int(np.ceil(max_row)))


def _finish(out: _ShardWriter, folder: Path, split: str, num_rows: int, max_row: int) -> SplitExport:
    """Name the shards, read back their footers and compute the page bytes."""
    count = len(out.paths)
    files = []
    groups = list(out.groups)
    for index, path in enumerate(out.paths):
        with open_regular_file(path, f"export shard {path.name!r}") as f:  # the footer this writer just wrote
            md = pq.read_metadata(f)
        mine = [g for g, s in enumerate(out.group_shard) if s == index]
        for rg, g in zip(range(md.num_row_groups), mine):
            rows, nbytes = groups[g]
            groups[g] = (rows, max(nbytes, md.row_group(rg).total_byte_size))
        name = f"{split}-{index:05d}-of-{count:05d}.parquet"
        os.replace(path, folder / name)
        files.append(f"{folder.name}/{name}")
    num_bytes = sum(b for _, b in out.groups)
    return SplitExport(split, num_rows, int(num_bytes), files, max_row_bytes=max_row,
                       max_row_group_bytes=max((b for _, b in groups), default=0), max_page_bytes=max_page_bytes(groups))


def size_text(n: int) -> str:
    """``n`` bytes for a reader: ``512 B``, ``1.5 KB``, ``2.0 MB``, ``3.1 GB`` (powers of 1000)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def viewer_verdict(splits: list[SplitExport], n_splits: int) -> tuple[bool, str]:
    """(viewable, reason): False with a reason a Hub reader understands when a page would read more than
    VIEWER_MAX_PAGE_BYTES, a row is larger than MAX_ROW_GROUP_BYTES, or there are more than VIEWER_MAX_SPLITS
    splits; (True, "") otherwise."""
    reasons = []
    if n_splits > VIEWER_MAX_SPLITS:
        reasons.append(f"it has {n_splits} splits, more than the {VIEWER_MAX_SPLITS} the Dataset Viewer shows per config")
    for s in splits:
        if s.max_row_bytes > MAX_ROW_GROUP_BYTES:
            reasons.append(f"one row of split `{s.name}` holds {size_text(s.max_row_bytes)}, more than the "
                           f"{size_text(MAX_ROW_GROUP_BYTES)} row group the Dataset Viewer reads at once")
        if s.max_page_bytes > VIEWER_MAX_PAGE_BYTES:
            reasons.append(f"a page of {VIEWER_PAGE_ROWS} rows of split `{s.name}` reads {size_text(s.max_page_bytes)}, "
                           f"more than the {size_text(VIEWER_MAX_PAGE_BYTES)} the Dataset Viewer reads for one page")
    if reasons:
        return False, "; ".join(reasons) + " (load it with `datasets` instead)"
    return True, ""
