"""The Parquet footer check: a column chunk declaring more than the limit uncompressed is refused before
pyarrow decompresses it, in both Parquet builders, with the first line naming the shard."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perckit.io import parquetio
from perckit.hf.entrypoints import build_split
from perckit.errors import ReleaseFormatError


def test_compressible_column_over_the_limit(tmp_path):
    path = tmp_path / "zeros.parquet"
    # 8 MB of zeros: a few KB on disk with zstd, 8 MB once decompressed
    pq.write_table(pa.table({"id": pa.array(range(8)), "blob": pa.array([bytes(1 << 20)] * 8)}), path, compression="zstd")
    assert path.stat().st_size < 100_000
    pf = pq.ParquetFile(path)
    parquetio.check_column_chunk_sizes(pf, "zeros.parquet")  # the default limit (1 GiB) accepts it
    with pytest.raises(ReleaseFormatError, match=r"zeros\.parquet: row group 0, column 'blob': expected at most 1048576 bytes uncompressed per column chunk, the footer declares \d{7,}"):
        parquetio.check_column_chunk_sizes(pf, "zeros.parquet", limit=1 << 20)


@pytest.mark.parametrize("name, config, kwargs", [("m4seg", "default", {"source": "parquet"}), ("refcoco_m", "expressions", {})])
def test_builders_refuse_before_generation(name, config, kwargs, refcoco_release, tmp_path, monkeypatch):
    if name == "m4seg":
        from perckit.samples import write_release

        root = write_release("m4seg", tmp_path / "m4", train_rows=4, test_rows=2, shards=1, write_manifest=False).root
    else:
        root = refcoco_release.root
    monkeypatch.setattr(parquetio, "MAX_COLUMN_CHUNK_BYTES", 64)
    with pytest.raises(ReleaseFormatError, match=r"\.parquet: row group 0, column '.*': expected at most 64 bytes uncompressed"):
        build_split(name, config, root, tmp_path / "cache", **kwargs)


def test_dictionary_page_longest_entry_in_a_real_file(tmp_path):
    """The page walk reads a real dictionary page's longest entry (a 5,000-byte value among short ones)."""
    values = [f"v{i % 7}" for i in range(1000)] + ["L" * 5000]
    path = tmp_path / "dict.parquet"
    pq.write_table(pa.table({"s": pa.array(values)}), path, use_dictionary=True, compression="snappy")
    pf = pq.ParquetFile(path)
    col = pf.metadata.row_group(0).column(0)
    with open(path, "rb") as f:
        total = parquetio._chunk_pages_bytes(parquetio._Window(f), col, path.stat().st_size, 1 << 40, None)
    # the data page's 1,001 dictionary indices count the longest entry each, on top of the pages and offsets
    assert total >= 1001 * 5000


@pytest.mark.parametrize("limit, refused", [(16 << 20, False), (1 << 20, True)])
def test_dictionary_bound_then_exact_walk_gives_the_exact_decision(tmp_path, limit, refused):
    """The page walk first bounds a dictionary's longest entry by its page size (no body read); a chunk over the
    limit under that bound is walked again exactly: accepted when the real entries fit, refused (with the exact
    total) when they do not, as a walk reading every dictionary gives."""
    values = [f"{i % 2000:05d}" for i in range(200_000)]  # 2,000 short entries, 200,000 indices
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"s": pa.array(values)}), path, use_dictionary=True, compression="zstd", row_group_size=len(values))
    col = pq.ParquetFile(path).metadata.row_group(0).column(0)
    size = path.stat().st_size
    with open(path, "rb") as f:
        bound = parquetio._walk_chunk_pages(parquetio._Window(f), col, size, 1 << 60, None, exact_dictionary=False)
        exact = parquetio._walk_chunk_pages(parquetio._Window(f), col, size, 1 << 60, None, exact_dictionary=True)
        got = parquetio._chunk_pages_bytes(parquetio._Window(f), col, size, limit, None)
        exact_at_limit = parquetio._walk_chunk_pages(parquetio._Window(f), col, size, limit, None, exact_dictionary=True)
    assert bound > 16 << 20 > exact  # the bound alone would refuse at both limits
    assert (got > limit) is refused
    assert got == (exact_at_limit if refused else exact)


def _pages(path, window: int):
    """Every page header of every column chunk of ``path`` (read through a window of ``window`` bytes)."""
    import os

    md = pq.ParquetFile(path).metadata
    out = []
    with open(path, "rb") as f:
        src = parquetio._Window(f)
        src_size = os.path.getsize(path)
        for g, c, col in parquetio._column_chunks(md):
            pos = min(p for p in (col.dictionary_page_offset, col.data_page_offset) if p)
            end = pos + col.total_compressed_size
            pages = []
            while pos < end:
                header, length = parquetio._read_page_header(src, pos, min(end, src_size))
                pages.append((header, length))
                pos += length + header[3]
            out.append((col, pages))
    return out


@pytest.mark.parametrize("window", [parquetio.WINDOW_BYTES, 7])
def test_page_headers_add_up_to_what_the_footer_declares(tmp_path, monkeypatch, window):
    """Every page header is read whole (its length exact) with the fields the walk uses: per chunk, the headers and
    page sizes add up to the footer's compressed and uncompressed sizes, the data pages' num_values to the chunk's
    values; through the window read ahead as through one read per header (a 7-byte window)."""
    monkeypatch.setattr(parquetio, "WINDOW_BYTES", window)
    n = 20_000
    table = pa.table({
        "id": pa.array(range(n)), "s": pa.array([f"v{i % 300}" for i in range(n)]), "x": pa.array([i * 0.5 for i in range(n)]),
        "blob": pa.array([bytes([i % 251]) * (i % 50) for i in range(n)]), "l": pa.array([[i, i + 1] for i in range(n)]),
    })
    for version, kwargs in (("1.0", {}), ("2.0", {"use_dictionary": ["s"]})):
        path = tmp_path / f"p{version}.parquet"
        pq.write_table(table, path, compression="snappy", data_page_size=4096, row_group_size=7_000,
                       data_page_version=version, **kwargs)
        chunks = _pages(path, window)
        assert len(chunks) == 15 and sum(len(p) for _, p in chunks) > 60
        for col, pages in chunks:
            assert sum(length + h[3] for h, length in pages) == col.total_compressed_size
            assert sum(length + h[2] for h, length in pages) == col.total_uncompressed_size
            data = [h.get(5) or h.get(8) for h, _ in pages if h[1] in (0, 3)]
            assert sum(d[1] for d in data) == col.num_values
            assert {h[1] for h, _ in pages} <= {0, 2, 3}


@pytest.mark.parametrize("header, says", [
    (b"\x15", "the page header at byte 0 is cut"),
    (b"\x15\x00\x1d\x00", "unknown Thrift compact type 13"),
    (b"\x15" + b"\xff" * 11 + b"\x01\x00", "a varint longer than 10 bytes"),
    (b"\x1c" * 18 + b"\x00" * 18, "Thrift structs nested too deep"),
    (b"\x19\xf5\xff\xff\x03" + b"\x00" * 64, "a list of 65535 elements in 64 bytes"),
    (b"\x1b\xff\x7f\x55" + b"\x00" * 64, "a map of 16383 entries in"),
])
def test_a_malformed_page_header_is_refused(header, says):
    import io

    with pytest.raises(ValueError, match=says):
        parquetio._read_page_header(parquetio._Window(io.BytesIO(header)), 0, len(header))


def test_a_page_header_longer_than_the_first_read_is_read_whole():
    """A header with a 10,000-byte field (statistics) is read again in a larger read, its length exact."""
    import io

    header = b"\x15\x04\x15\x02\x15\x02\x18" + b"\xa0\x9c\x01" + b"m" * 20_000 + b"\x00"
    data = header + b"body"
    fields, length = parquetio._read_page_header(parquetio._Window(io.BytesIO(data)), 0, len(data))
    assert (length, fields) == (len(header), {1: 2, 2: 1, 3: 1, 4: None})


def test_a_corrupt_page_header_in_a_file_is_refused_naming_the_chunk(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": pa.array(range(100)), "s": pa.array([str(i) for i in range(100)])}), path)
    col = pq.ParquetFile(path).metadata.row_group(0).column(1)
    data = bytearray(path.read_bytes())
    start = col.dictionary_page_offset or col.data_page_offset
    data[start:start + 2] = b"\x1f\x1f"
    path.write_bytes(bytes(data))
    with open(path, "rb") as f, pytest.raises(
        ReleaseFormatError, match=r"^c\.parquet: row group 0, column 's': expected readable Parquet page headers, got unknown Thrift"):
        parquetio.check_column_chunk_sizes(pq.ParquetFile(f), "c.parquet", source=f)
