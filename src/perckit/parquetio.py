"""A footer check shared by the Parquet readers: memory stays bounded by what a row group declares."""

from __future__ import annotations

from typing import Any

from .errors import ReleaseFormatError

#: Largest uncompressed column chunk (one column of one row group) a reader accepts. pyarrow decompresses a
#: row group's column whole while it iterates record batches, so a few-KB file of highly compressible
#: pages declaring gigabytes would allocate them. Hub-converted Parquet uses row groups of ~100 MB.
MAX_COLUMN_CHUNK_BYTES = 1 << 30


def check_column_chunk_sizes(pf: Any, where: str, limit: int | None = None) -> None:
    """Refuse a Parquet file (``pyarrow.parquet.ParquetFile``) whose footer declares a column chunk that
    decompresses to more than ``limit`` bytes (default :data:`MAX_COLUMN_CHUNK_BYTES`), naming the row group
    and column."""
    limit = MAX_COLUMN_CHUNK_BYTES if limit is None else limit
    md = pf.metadata
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            size = col.total_uncompressed_size
            if size > limit:
                raise ReleaseFormatError(
                    f"{where}: row group {g}, column {col.path_in_schema!r}: expected at most {limit} bytes "
                    f"uncompressed per column chunk, the footer declares {size} ({col.total_compressed_size} compressed)"
                )
