"""Syn4D builder rows to Arrow tables: the numpy arrays of the rows become Arrow list arrays over their own
flat buffers, instead of ``datasets`` encoding each nested array element by element.

:func:`reference_table` is the builder's previous behaviour, kept as the reference: every row encoded with
``Features.encode_example`` and written by ``datasets``' own ``ArrowWriter`` (a typed sequence per column).
:func:`rows_to_table` builds the same table directly; a column it does not handle (the video, a ``None``
value, a dtype or shape other than the feature's, anything that fails) takes the reference path, for that
column or the whole table, so the rows and the errors are the reference's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasets
import numpy as np
import pyarrow as pa

#: The storage dtype of each ``ArrayXD`` value type.
_NUMPY_OF = {"float32": np.float32, "float64": np.float64, "bool": np.bool_, "int32": np.int32}


def reference_table(rows: Sequence[dict], features: datasets.Features) -> pa.Table:
    """The table ``datasets``' per-example path writes for ``rows`` (``encode_example``, then ``ArrowWriter``)."""
    from datasets.arrow_writer import ArrowWriter

    sink = pa.BufferOutputStream()
    with ArrowWriter(features=features, stream=sink, writer_batch_size=max(1, len(rows))) as writer:
        for row in rows:
            writer.write(features.encode_example(row))
        writer.finalize()
    return pa.ipc.open_stream(sink.getvalue()).read_all()


def rows_to_table(rows: Sequence[dict], features: datasets.Features) -> pa.Table:
    """The table of ``rows`` (builder rows, ``features``' keys), equal to :func:`reference_table`'s.

    Fixed-shape numpy columns (``Array2D`` / ``Array3D`` with a free first dimension) become nested list arrays
    over one concatenated buffer, plain strings / numbers / lists of them go through ``pa.array`` with the
    column's type; any other column (the video, a column with a ``None``) is encoded by the reference."""
    schema = features.arrow_schema
    try:
        arrays = [_column([r[name] for r in rows], schema.field(name).type) for name in schema.names]
    except (TypeError, ValueError, OverflowError, pa.ArrowException):
        return reference_table(rows, features)
    if any(a is None for a in arrays):
        names = [n for n, a in zip(schema.names, arrays) if a is None]
        ref = reference_table([{n: r[n] for n in names} for r in rows], datasets.Features({n: features[n] for n in names}))
        arrays = [ref.column(n).combine_chunks() if a is None else a for n, a in zip(schema.names, arrays)]
    return pa.Table.from_arrays(arrays, schema=schema)


def _column(values: list[Any], typ: pa.DataType) -> pa.Array | None:
    """``values`` as an array of ``typ``, or None for a column left to the reference."""
    if any(v is None for v in values):
        return None
    if isinstance(typ, pa.ExtensionType):
        return _array_xd(values, typ)
    if typ in (pa.string(), pa.int32()) or (pa.types.is_list(typ) and typ.value_type in (pa.int32(), pa.float64(), pa.bool_())):
        if any(isinstance(v, np.ndarray) for v in values):
            return None
        return pa.array(values, typ)
    return None


def _array_xd(values: list[Any], typ: pa.ExtensionType) -> pa.Array | None:
    """An ``ArrayXD`` column: every value a numpy array of the storage dtype and of the feature's shape (its
    first dimension free); the storage ``list<list<...>>`` is built from offsets over one flat buffer."""
    shape = getattr(typ, "shape", None)
    dtype = _NUMPY_OF.get(str(getattr(typ, "value_type", "")))
    if shape is None or dtype is None or shape[0] is not None or any(d is None for d in shape[1:]):
        return None
    inner = tuple(int(d) for d in shape[1:])
    for v in values:
        if not isinstance(v, np.ndarray) or v.dtype != dtype or v.ndim != len(shape) or v.shape[1:] != inner:
            return None
    lengths = np.array([v.shape[0] for v in values], dtype=np.int64)
    if sum(v.size for v in values) > np.iinfo(np.int32).max:  # 32-bit list offsets
        return None
    flat = np.concatenate([v.reshape(-1) for v in values]) if values else np.zeros(0, dtype)
    arr: pa.Array = pa.array(flat)
    # innermost first: each level groups the level below in runs of its dimension
    count = flat.size
    for d in reversed(inner):
        count //= d
        arr = pa.ListArray.from_arrays(pa.array(np.arange(0, (count + 1) * d, d, dtype=np.int32)), arr)
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    arr = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), arr)
    if arr.type != typ.storage_type:
        return None
    return pa.ExtensionArray.from_storage(typ, arr)
