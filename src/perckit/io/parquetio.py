"""The size guard shared by the Parquet readers (RefCOCO-M, M4Seg): memory stays bounded by what the data pages
themselves declare, not by what the footer claims.

Two checks, both before pyarrow decompresses anything:

1. the footer: no column chunk (one column of one row group) declares more than the limit uncompressed;
2. the pages: the footer can lie (a hand-edited ``total_uncompressed_size``), so every page header of every
   column chunk is read (Thrift compact protocol, a few hundred bytes each, the page bodies skipped; headers close
   together come from one read of :data:`WINDOW_BYTES`) and the
   sizes pyarrow will really allocate are added up: each page's ``uncompressed_page_size`` (what the codec
   decompresses into: a page that inflates beyond it is a codec error, not an allocation), plus what
   decoding can add on top of the decompressed bytes: 16 bytes of offsets / levels per value, and for a
   dictionary-encoded page ``num_values`` times the longest dictionary entry (one 1 MB entry repeated by a
   few bytes of run-length indices is a bomb of its own), for ``DELTA_BYTE_ARRAY`` ``num_values`` times the
   page size (shared prefixes). A chunk whose pages add up to more than the limit is refused naming the row
   group and column, as is a page header that cannot be parsed or a chunk of more than
   :data:`MAX_PAGES_PER_CHUNK` pages.

:func:`open_parquet` is the entry point for a Parquet file named by a path: the file opened with the checked
reader (a regular file), its footer read, and both checks run on it before the caller reads anything (an
export's shards, before ``datasets`` decodes them: :mod:`perckit.export.state`).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import ReleaseFormatError
from .paths import open_regular_file

#: Largest uncompressed column chunk (one column of one row group) a reader accepts, as the footer declares it
#: and as its pages add up (decoded). pyarrow decompresses and decodes a column's pages while it iterates
#: record batches, so a few-KB file of highly compressible pages declaring gigabytes would allocate them.
#: Hub-converted Parquet uses row groups of ~100 MB.
MAX_COLUMN_CHUNK_BYTES = 1 << 30
#: Most pages walked in one column chunk (pyarrow writes pages of ~1 MB: a 1 GiB chunk has about a thousand).
MAX_PAGES_PER_CHUNK = 100_000
#: Largest page header read (pyarrow's own default limit); real headers are a few hundred bytes.
MAX_PAGE_HEADER_BYTES = 16 << 20
#: Decoded bytes per value on top of the page data (64-bit offsets, levels, validity).
PER_VALUE_BYTES = 16

_DATA_PAGE, _INDEX_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 1, 2, 3
_PLAIN_DICTIONARY, _DELTA_BYTE_ARRAY, _RLE_DICTIONARY = 2, 7, 8
#: Bytes read at a time while walking the page headers (the next headers are usually in the same read).
WINDOW_BYTES = 1 << 16
#: Deepest nesting of Thrift structs in a page header read (a real one has 3 levels).
MAX_THRIFT_DEPTH = 16


class _Window:
    """Reads of one open file served from a window of :data:`WINDOW_BYTES` read ahead: page headers that lie
    close together (small column chunks one after another) come from one read; nothing is copied out of it."""

    def __init__(self, f: Any) -> None:
        self.f, self.start, self.buf = f, 0, memoryview(b"")

    def read_at(self, pos: int, n: int) -> memoryview:
        """Up to ``n`` bytes at ``pos`` (fewer only at the end of the file)."""
        off = pos - self.start
        if off < 0 or off + n > len(self.buf):
            self.f.seek(pos)
            self.buf, self.start, off = memoryview(self.f.read(max(n, WINDOW_BYTES))), pos, 0
        return self.buf[off : off + n]


def _varint(buf: Any, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it (an ``IndexError`` past the buffer's end)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 70:
            raise ValueError("a varint longer than 10 bytes")


def _value(buf: Any, pos: int, ftype: int, depth: int) -> tuple[Any, int]:
    """A Thrift compact value of ``ftype`` at ``pos``: an int, a bool, a struct as ``{field id: value}`` or None
    (a double, binary, list or map, skipped), and the position after it."""
    if 4 <= ftype <= 6:
        n, pos = _varint(buf, pos)
        return (n >> 1) ^ -(n & 1), pos
    if ftype == 12:
        return _struct(buf, pos, depth + 1)
    if ftype in (1, 2):  # bool in a field header
        return ftype == 1, pos
    if ftype == 3:
        return buf[pos], pos + 1
    if ftype in (7, 8):
        n, pos = (8, pos) if ftype == 7 else _varint(buf, pos)
        if pos + n > len(buf):
            raise IndexError
        return None, pos + n
    if ftype in (9, 10):
        head = buf[pos]
        size, etype = head >> 4, head & 0x0F
        pos += 1
        if size == 15:
            size, pos = _varint(buf, pos)
        if size > len(buf) - pos:  # every element takes at least a byte
            raise ValueError(f"a list of {size} elements in {len(buf) - pos} bytes")
        for _ in range(size):
            if etype in (1, 2):
                buf[pos]
                pos += 1
            else:
                pos = _value(buf, pos, etype, depth + 1)[1]
        return None, pos
    if ftype == 11:
        size, pos = _varint(buf, pos)
        if size:
            if 2 * size > len(buf) - pos:
                raise ValueError(f"a map of {size} entries in {len(buf) - pos} bytes")
            kv = buf[pos]
            pos += 1
            for _ in range(size):
                pos = _value(buf, pos, kv >> 4, depth + 1)[1]
                pos = _value(buf, pos, kv & 0x0F, depth + 1)[1]
        return None, pos
    raise ValueError(f"unknown Thrift compact type {ftype}")


def _struct(buf: Any, pos: int = 0, depth: int = 0) -> tuple[dict, int]:
    """The Thrift compact struct at ``pos`` as ``{field id: value}`` (see :func:`_value`) and the position after it."""
    if depth > MAX_THRIFT_DEPTH:
        raise ValueError("Thrift structs nested too deep")
    out: dict = {}
    last = 0
    while True:
        head = buf[pos]
        pos += 1
        if head == 0:
            return out, pos
        ftype = head & 0x0F
        if head >> 4:
            fid = last + (head >> 4)
        else:
            fid, pos = _varint(buf, pos)
            fid = (fid >> 1) ^ -(fid & 1)
        if 4 <= ftype <= 6:  # the most common type inline (as _value reads it)
            n, pos = _varint(buf, pos)
            out[fid] = (n >> 1) ^ -(n & 1)
        else:
            out[fid], pos = _value(buf, pos, ftype, depth)
        last = fid


def _read_page_header(src: _Window, pos: int, end: int) -> tuple[dict, int]:
    """(the PageHeader's fields, its length in bytes) at ``pos`` (a header never extends past ``end``)."""
    size = 4096
    while True:
        want = min(size, end - pos, MAX_PAGE_HEADER_BYTES)
        buf = src.read_at(pos, want)
        try:
            return _struct(buf)
        except IndexError:  # the bytes read end inside the header: read more
            if len(buf) < want or want >= min(end - pos, MAX_PAGE_HEADER_BYTES):
                raise ValueError(f"the page header at byte {pos} is cut or longer than {want} bytes") from None
            size *= 16


def _max_dictionary_entry(src: _Window, pos: int, header: dict, codec: str, physical: str, type_length: int | None,
                          exact: bool = True) -> int:
    """The longest entry of a PLAIN dictionary page (the page body follows its header at ``pos``); with
    ``exact=False``, for ``BYTE_ARRAY``, the page's uncompressed size (a bound of it; nothing read)."""
    if physical == "FIXED_LEN_BYTE_ARRAY":
        return int(type_length or 0)
    if physical != "BYTE_ARRAY":
        return 12  # INT96, the widest fixed-width physical type
    compressed, uncompressed = int(header.get(3) or 0), int(header.get(2) or 0)
    if not exact:
        return uncompressed
    body = src.read_at(pos, compressed)
    if len(body) != compressed:
        raise ValueError(f"the dictionary page at byte {pos} is cut")
    if codec.upper() != "UNCOMPRESSED":
        import pyarrow as pa

        name = {"LZ4_RAW": "lz4_raw", "LZ4": "lz4_raw"}.get(codec.upper(), codec.lower())
        try:
            body = pa.Codec(name).decompress(body, decompressed_size=uncompressed, asbytes=True)
        except Exception:  # a codec pyarrow names otherwise or a corrupt page: assume the worst case
            return uncompressed
    count = int((header.get(7) or {}).get(1) or 0)
    best, p, n = 0, 0, len(body)
    unpack = struct.Struct("<I").unpack_from
    for _ in range(count):
        if p + 4 > n:
            break
        length = unpack(body, p)[0]
        best = max(best, length)
        p += 4 + length
    return min(best, uncompressed)


def _chunk_pages_bytes(src: _Window, col: Any, file_size: int, limit: int, type_length: int | None) -> int:
    """What the pages of one column chunk decompress and decode to, at most (see the module docstring).

    A dictionary's longest entry is at most its page's uncompressed size: the walk first takes that bound,
    which reads no dictionary body; only a chunk that the bound puts over ``limit`` is walked again with
    every dictionary read and decompressed for its real longest entry (the same accept / refuse decision
    as always walking exactly, and the same total where it refuses)."""
    total = _walk_chunk_pages(src, col, file_size, limit, type_length, exact_dictionary=False)
    if total > limit:
        total = _walk_chunk_pages(src, col, file_size, limit, type_length, exact_dictionary=True)
    return total


def _walk_chunk_pages(src: _Window, col: Any, file_size: int, limit: int, type_length: int | None, exact_dictionary: bool) -> int:
    start = col.data_page_offset
    if col.has_dictionary_page and col.dictionary_page_offset is not None and 0 < col.dictionary_page_offset < start:
        start = col.dictionary_page_offset
    end = min(start + max(col.total_compressed_size, 0), file_size)
    codec, physical = str(col.compression), str(col.physical_type)
    total, pos, pages, dict_entry = 0, start, 0, None
    while pos < end:
        pages += 1
        if pages > MAX_PAGES_PER_CHUNK:
            raise ValueError(f"more than {MAX_PAGES_PER_CHUNK} pages")
        header, header_len = _read_page_header(src, pos, end)
        ptype, uncompressed, compressed = header.get(1), int(header.get(2) or 0), int(header.get(3) or 0)
        if uncompressed < 0 or compressed < 0:
            raise ValueError(f"the page at byte {pos} declares a negative size")
        body = pos + header_len
        total += uncompressed
        if ptype == _DICTIONARY_PAGE:
            dict_entry = _max_dictionary_entry(src, body, header, codec, physical, type_length, exact_dictionary)
        elif ptype in (_DATA_PAGE, _DATA_PAGE_V2):
            sub = header.get(5 if ptype == _DATA_PAGE else 8) or {}
            num_values = max(int(sub.get(1) or 0), 0)
            encoding = sub.get(2 if ptype == _DATA_PAGE else 4)
            total += PER_VALUE_BYTES * num_values
            if encoding in (_PLAIN_DICTIONARY, _RLE_DICTIONARY):
                total += num_values * (dict_entry if dict_entry is not None else uncompressed)
            elif encoding == _DELTA_BYTE_ARRAY:
                total += num_values * uncompressed
        if total > limit:
            return total
        pos = body + compressed
    return total


def _column_chunks(md: Any) -> Iterator[tuple[int, int, Any]]:
    """``(row group, column, column chunk metadata)`` of every column chunk of a Parquet footer ``md``."""
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            yield g, c, rg.column(c)


def check_column_chunk_sizes(pf: Any, where: str, limit: int | None = None, source: Any = None) -> None:
    """Refuse a Parquet file (``pyarrow.parquet.ParquetFile``) with a column chunk that decompresses to more than
    ``limit`` bytes (default :data:`MAX_COLUMN_CHUNK_BYTES`), naming the row group and column: as its footer
    declares it and, when ``source`` (the open binary file ``pf`` reads, seekable) is given, as its page
    headers add up (the footer may lie). Every reader passes ``source``."""
    limit = MAX_COLUMN_CHUNK_BYTES if limit is None else limit
    chunks = list(_column_chunks(pf.metadata))
    for g, _, col in chunks:
        size = col.total_uncompressed_size
        if size > limit:
            raise ReleaseFormatError(
                f"{where}: row group {g}, column {col.path_in_schema!r}: expected at most {limit} bytes "
                f"uncompressed per column chunk, the footer declares {size} ({col.total_compressed_size} compressed)"
            )
    if source is None:
        return
    saved = source.tell()
    try:
        source.seek(0, os.SEEK_END)
        file_size = source.tell()
        lengths = [getattr(pf.schema.column(i), "length", None) for i in range(len(pf.schema))]
        src = _Window(source)
        for g, c, col in chunks:
            try:
                total = _chunk_pages_bytes(src, col, file_size, limit, lengths[c] if c < len(lengths) else None)
            except (ValueError, OSError, EOFError, RecursionError) as e:
                raise ReleaseFormatError(
                    f"{where}: row group {g}, column {col.path_in_schema!r}: expected readable Parquet page headers, "
                    f"got {e}"
                ) from None
            if total > limit:
                raise ReleaseFormatError(
                    f"{where}: row group {g}, column {col.path_in_schema!r}: expected at most {limit} bytes "
                    f"uncompressed per column chunk, its page headers add up to at least {total} decompressed and decoded "
                    f"(the footer declares {col.total_uncompressed_size})"
                )
    finally:
        source.seek(saved)


@contextmanager
def open_parquet(path: str | os.PathLike, where: str, not_found: type[Exception] | None = None,
                 limit: int | None = None) -> Iterator[Any]:
    """``pyarrow.parquet.ParquetFile`` of ``path`` once it passed the guard: a regular file
    (:func:`perckit.io.paths.open_regular_file`: no FIFO, device or folder; missing: ``not_found``, default
    :class:`~perckit.errors.ReleaseNotFoundError`), a readable Parquet footer, and every column chunk within
    ``limit`` (default :data:`MAX_COLUMN_CHUNK_BYTES`) as its footer and its page headers declare it
    (:func:`check_column_chunk_sizes`). Errors are :class:`~perckit.errors.ReleaseFormatError` naming ``where``
    (and the row group and column). The file stays open while the block runs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open_regular_file(path, where, None, ReleaseFormatError, not_found) as f:
        try:
            pf = pq.ParquetFile(f)
        except (pa.ArrowException, OSError, EOFError, ValueError) as e:
            raise ReleaseFormatError(f"{where}: not a readable Parquet file ({type(e).__name__}: {e})") from None
        check_column_chunk_sizes(pf, where, limit, source=f)
        yield pf
