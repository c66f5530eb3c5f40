"""The Parquet footer check: a column chunk declaring more than the limit uncompressed is refused before
pyarrow decompresses it, in both Parquet builders, with the first line naming the shard."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from perckit import parquetio
from perckit.entrypoints import build_split
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
        from perckit.fixtures.base import write_release

        root = write_release("m4seg", tmp_path / "m4", train_rows=4, test_rows=2, shards=1, write_manifest=False).root
    else:
        root = refcoco_release.root
    monkeypatch.setattr(parquetio, "MAX_COLUMN_CHUNK_BYTES", 64)
    with pytest.raises(ReleaseFormatError, match=r"\.parquet: row group 0, column '.*': expected at most 64 bytes uncompressed"):
        build_split(name, config, root, tmp_path / "cache", **kwargs)
