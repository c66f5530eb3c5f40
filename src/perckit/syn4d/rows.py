"""Syn4D file content to builder rows: the ground truth of a sequence as the builder's row fields
(:func:`read_sequence_gt`, with the camera CSV's Unreal poses converted to camera-to-world matrices), and the rows
to Arrow tables (:func:`arrow_table`).

The tables: the numpy arrays of the rows become Arrow list arrays over their own flat buffers, instead of
``datasets`` encoding each nested array element by element (7-12x faster on the builder's batches).
:func:`arrow_table` is the one path; the tests compare its tables value for value with ``datasets``' per-example
encoding (``Features.encode_example`` and ``ArrowWriter``, ``tests/oracles/syn4d.py``) on the sample releases and on
hand-made rows. A value of the wrong shape is refused with a :class:`~perckit.errors.ReleaseFormatError` naming the
row and the field. (The other builders' rows are already in Arrow storage form and go through
:func:`perckit.hf.builder.rows_to_table`; Syn4D's hold numpy arrays.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasets
import numpy as np
import pyarrow as pa

from ..errors import ReleaseFormatError, ReleaseNotFoundError, check_choice, inferred_reading
from .layout import PathResolver, ReleasePaths, SequenceRecord
from .read import logger, read_camera_csv, read_depth_sequence, read_tracking_npy


# ---------------------------------------------------------------- the Unreal camera (spec §2.4)

#: OpenCV camera axes (x right, y down, z forward) -> Unreal axes (forward +x, right +y, up +z).
OPENCV_TO_UNREAL = np.array([[0, 0, 1], [1, 0, 0], [0, -1, 0]], dtype=np.float64)


def unreal_to_c2w(x_cm: float, y_cm: float, z_cm: float, yaw_deg: float, pitch_deg: float, roll_deg: float) -> np.ndarray:
    """One camera CSV row to a 4x4 float64 camera-to-world matrix (spec §2.4).

    ``c2w[:3, :3] = Rz(yaw) · Ry'(pitch) · Rx'(roll) · M`` and ``c2w[:3, 3] = [x, y, z] / 100`` (centimetres to
    metres). The rotation block has determinant -1 because the Unreal world is left-handed; do not treat it as an
    SO(3) element."""
    yaw, pitch, roll = np.radians([float(yaw_deg), float(pitch_deg), float(roll_deg)])
    r_yaw = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]], dtype=np.float64)
    r_pitch = np.array([[np.cos(pitch), 0, -np.sin(pitch)], [0, 1, 0], [np.sin(pitch), 0, np.cos(pitch)]], dtype=np.float64)
    r_roll = np.array([[1, 0, 0], [0, np.cos(roll), np.sin(roll)], [0, -np.sin(roll), np.cos(roll)]], dtype=np.float64)
    out = np.eye(4, dtype=np.float64)
    out[:3, :3] = r_yaw @ r_pitch @ r_roll @ OPENCV_TO_UNREAL
    out[:3, 3] = np.array([float(x_cm), float(y_cm), float(z_cm)], dtype=np.float64) / 100.0
    return out


def unreal_rows_to_c2w(rows: np.ndarray) -> np.ndarray:
    """``[T, 6]`` rows ``(x_cm, y_cm, z_cm, yaw_deg, pitch_deg, roll_deg)`` to ``[T, 4, 4]`` float64.

    Applies :func:`unreal_to_c2w` row by row (rather than batched matrix products) so every matrix is bit-identical
    to the scalar conversion, which is the official one."""
    arr = np.asarray(rows, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 6:
        raise ValueError(f"camera rows: expected shape [T, 6] (x, y, z, yaw, pitch, roll), got {arr.shape}")
    if arr.shape[0] == 0:
        return np.zeros((0, 4, 4), dtype=np.float64)
    return np.stack([unreal_to_c2w(*row) for row in arr.tolist()]).astype(np.float64, copy=False)


# ---------------------------------------------------------------- one sequence's ground truth

#: The builder-row fields of the ground truth of each task (tracking: the NPY's fields, under the card's names).
GT_FIELDS = {
    "tracking": ("schema", "image_size", "intrinsics", "query_uv", "tracks_ref0", "visibility", "dynamic"),
    "depth": ("depth_m",),
    "pose": ("camera_unreal", "camera_c2w"),
}


def read_sequence_gt(record: SequenceRecord, paths: ReleasePaths, task: str, hw: tuple[int, int] | None = None,
                     required: bool = False, resolver: PathResolver | None = None) -> dict[str, Any]:
    """The ground truth of one task of one sequence, read from the release, as the builder's row fields
    (:data:`GT_FIELDS`); the one reader of it, for the builder and the file runner.

    ``tracking``: the NPY (:func:`read_tracking_npy`, its ``sequence_id`` checked against the record's), its fields
    under the card's names: ``tracks_ref0``, ``visibility``, ``query_uv`` as arrays, ``dynamic``, ``image_size`` and
    ``intrinsics`` as lists, and ``schema``. ``depth``: ``depth_m`` [T, H, W] in metres
    (:func:`read_depth_sequence`; every frame of size ``hw`` when given). ``pose``: ``camera_unreal`` [T, 6]
    (:func:`read_camera_csv`) and ``camera_c2w`` [T, 4, 4].

    ``resolver``: a :class:`PathResolver` of ``paths.tracking_gt`` for a pass over many records.

    An absent NPY, depth folder or camera CSV gives every field ``None`` or, with ``required``, raises
    :class:`~perckit.errors.ReleaseNotFoundError` naming it; a partial or broken one always raises. A depth folder or
    camera CSV of another shape than perckit's [inferred] reading (:class:`~perckit.errors.InferredShapeError`) gives
    one warning naming it and ``None``, or with ``required`` raises."""
    check_choice("task", task, tuple(GT_FIELDS))
    if task == "tracking":
        npy = record.tracking_npy(paths.tracking_gt, resolver)
        if not required and not npy.is_file():
            return dict.fromkeys(GT_FIELDS[task])
        gt = read_tracking_npy(npy, record.sequence_id)  # a missing file: ReleaseNotFoundError naming it
        return {k: gt[k].tolist() if k in ("image_size", "intrinsics", "dynamic") else gt[k] for k in GT_FIELDS[task]}
    depth = task == "depth"
    read, where = (read_depth_sequence, record.depth_dir) if depth else (read_camera_csv, record.camera_csv)
    args = (record, hw) if depth else (record,)
    # their names and layout are [inferred]: another shape is one warning naming the file and a null modality, unless
    # the task needs them (the file runner scores it): then the error
    value = read(*args) if required else inferred_reading(lambda: read(*args), None, repr(str(where)), logger)
    if value is None and required:
        raise ReleaseNotFoundError(f"{'depth folder' if depth else 'camera CSV'} {str(where)!r} not found")
    if depth:
        return {"depth_m": value}
    return {"camera_unreal": value, "camera_c2w": unreal_rows_to_c2w(value) if value is not None else None}


# ---------------------------------------------------------------- rows to Arrow

#: The storage dtype of each ``ArrayXD`` value type.
_NUMPY_OF = {"float32": np.float32, "float64": np.float64, "bool": np.bool_, "int32": np.int32}


def arrow_table(rows: Sequence[dict], features: datasets.Features) -> pa.Table:
    """The table of ``rows`` (builder rows, ``features``' keys): the table ``datasets``' encoding writes.

    ``ArrayXD`` columns (a free first dimension) become nested list arrays over one concatenated buffer
    (values cast to the feature's dtype, ``None`` a null row); strings, numbers, lists of them and the
    video's ``{"bytes", "path"}`` go through ``pa.array`` with the column's type."""
    schema = features.arrow_schema
    arrays = []
    for name in schema.names:
        values = [r[name] for r in rows]
        typ = schema.field(name).type
        if isinstance(typ, pa.ExtensionType):
            arrays.append(_array_xd(values, typ, name, rows))
        elif all(v is None for v in values):  # an all-null column, typed the way datasets types it
            arrays.append(pa.array(values, pa.null()).cast(typ))
        else:
            arrays.append(pa.array([v.tolist() if isinstance(v, np.ndarray) else v for v in values], typ))
    return pa.Table.from_arrays(arrays, schema=schema)


def _array_xd(values: list[Any], typ: pa.ExtensionType, name: str, rows: Sequence[dict]) -> pa.Array:
    """An ``ArrayXD`` column: the storage ``list<list<...>>`` built from offsets over one flat buffer."""
    shape = tuple(typ.shape)
    dtype = _NUMPY_OF[str(typ.value_type)]
    inner = tuple(int(d) for d in shape[1:])
    arrays: list[np.ndarray | None] = []
    for row, v in zip(rows, values):
        if v is None:
            arrays.append(None)
            continue
        a = np.asarray(v, dtype=dtype)
        if a.ndim != len(shape) or a.shape[1:] != inner:
            raise ReleaseFormatError(
                f"Syn4D row {row.get('sequence_id')!r}: field {name!r}: expected an array of shape "
                f"({', '.join(['T', *map(str, inner)])}), got {a.shape}"
            )
        arrays.append(a)
    present = [a for a in arrays if a is not None]
    if sum(a.size for a in present) > np.iinfo(np.int32).max:  # 32-bit list offsets
        raise ReleaseFormatError(f"Syn4D field {name!r}: more than 2**31 - 1 values in one table; lower writer_batch_size")
    flat = np.concatenate([a.reshape(-1) for a in present]) if present else np.zeros(0, dtype)
    arr: pa.Array = pa.array(flat)
    # innermost first: each level groups the level below in runs of its dimension
    count = flat.size
    for d in reversed(inner):
        count //= d
        arr = pa.ListArray.from_arrays(pa.array(np.arange(0, (count + 1) * d, d, dtype=np.int32)), arr)
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32)
    np.cumsum([0 if a is None else a.shape[0] for a in arrays], out=offsets[1:])
    mask = np.array([a is None for a in arrays], dtype=bool)
    arr = pa.ListArray.from_arrays(pa.array(offsets), arr, mask=pa.array(mask) if mask.any() else None)
    return pa.ExtensionArray.from_storage(typ, arr.cast(typ.storage_type))
