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
        total = parquetio._chunk_pages_bytes(f, col, path.stat().st_size, 1 << 40, None)
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
        bound = parquetio._walk_chunk_pages(f, col, size, 1 << 60, None, exact_dictionary=False)
        exact = parquetio._walk_chunk_pages(f, col, size, 1 << 60, None, exact_dictionary=True)
        got = parquetio._chunk_pages_bytes(f, col, size, limit, None)
        exact_at_limit = parquetio._walk_chunk_pages(f, col, size, limit, None, exact_dictionary=True)
    assert bound > 16 << 20 > exact  # the bound alone would refuse at both limits
    assert (got > limit) is refused
    assert got == (exact_at_limit if refused else exact)
