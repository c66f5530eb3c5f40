"""Readers of the M⁴Seg release: the Parquet shards and the native gzip JSON, both to one typed row.

Nothing holds a split in memory. Each responsibility has its own module, and this one re-exports all their
names (the builder, the tests and user code import them from here):

- :mod:`perckit.m4seg.layout`: where each split's files are and which source a build reads
  (:func:`resolve_source`, :func:`confine_files`);
- :mod:`perckit.m4seg.rows`: one example to one builder row with every field check (:func:`native_to_row`,
  the only place the native format is interpreted, with its [inferred] alias tables; the field rules the
  Parquet column path names a refused value with);
- :mod:`perckit.m4seg.ids`: example ids in flat memory (:class:`IdGuard`, :func:`occurrence_index`);
- :mod:`perckit.m4seg.native_reader`: the native file's prepass, shards and rows, parsed item by item with
  ``ijson`` over the bounded stream of :mod:`perckit.m4seg.native`;
- :mod:`perckit.m4seg.parquet_reader`: the Parquet shards' schema, row-group shards, rows
  (``iter_batches(batch_size=1000)``) and example-id scan; :mod:`perckit.m4seg.parquet_tables`: a record
  batch as one Arrow table (the only Parquet converter);
- :mod:`perckit.m4seg.images`: the source images.
"""

from __future__ import annotations

from .ids import IdGuard  # noqa: F401
from .ids import Int64Buffer as _Int64Buffer  # noqa: F401
from .ids import derived_example_id  # noqa: F401
from .ids import occurrence_index  # noqa: F401
from .ids import stable_hash  # noqa: F401
from .images import MAX_IMAGE_BYTES  # noqa: F401
from .images import iter_image_paths  # noqa: F401
from .images import missing_images  # noqa: F401
from .images import read_image_bytes  # noqa: F401
from .layout import NATIVE_FILE  # noqa: F401
from .layout import PARQUET_GLOB  # noqa: F401
from .layout import SOURCES  # noqa: F401
from .layout import SPLITS  # noqa: F401
from .layout import confine_files  # noqa: F401
from .layout import native_path  # noqa: F401
from .layout import parquet_paths  # noqa: F401
from .layout import resolve_source  # noqa: F401
from .native import GZIP_ERRORS  # noqa: F401
from .native import MAX_EXAMPLE_BYTES  # noqa: F401
from .native import MAX_JSON_DEPTH  # noqa: F401
from .native import JsonGuard as _JsonGuard  # noqa: F401
from .native_reader import SKIP_COST_PARSE  # noqa: F401
from .native_reader import NativeScan  # noqa: F401
from .native_reader import NativeShard  # noqa: F401
from .native_reader import first_example  # noqa: F401
from .native_reader import iter_native  # noqa: F401
from .native_reader import native_shards  # noqa: F401
from .native_reader import scan_native  # noqa: F401
from .native_reader import shard_bounds  # noqa: F401
from .parquet_reader import BATCH_SIZE  # noqa: F401
from .parquet_reader import PARQUET_COLUMNS  # noqa: F401
from .parquet_reader import PARQUET_ERRORS  # noqa: F401
from .parquet_reader import PARQUET_GROUNDING_FIELDS  # noqa: F401
from .parquet_reader import PARQUET_IMAGE_FIELDS  # noqa: F401
from .parquet_reader import ParquetShard  # noqa: F401
from .parquet_reader import check_parquet_schema  # noqa: F401
from .parquet_reader import open_parquet  # noqa: F401
from .parquet_reader import scan_parquet_ids  # noqa: F401
from .parquet_tables import first_row  # noqa: F401
from .parquet_tables import iter_parquet  # noqa: F401
from .parquet_tables import parquet_shards  # noqa: F401
from .rows import EXAMPLE_ALIASES  # noqa: F401
from .rows import GROUNDING_ALIASES  # noqa: F401
from .rows import MAX_WARNINGS  # noqa: F401
from .rows import PARQUET_ALIASES  # noqa: F401
from .rows import PARQUET_GROUNDING_ALIASES  # noqa: F401
from .rows import SIZE_ORDERS  # noqa: F401
from .rows import ConvertState  # noqa: F401
from .rows import native_to_row  # noqa: F401
from .rows import resolve_image_sizes  # noqa: F401

__all__ = [
    "ConvertState", "IdGuard", "NativeScan", "NativeShard", "ParquetShard", "iter_native", "iter_parquet",
    "native_shards", "native_to_row", "occurrence_index", "parquet_shards", "resolve_source",
    "scan_native", "scan_parquet_ids",
]
