"""Features of the Syn4D builder, the metric's input schemas, and the row projections."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import OptionError, PredictionError
from .layout import ARRAY_DTYPES
from .metric import REFERENCE_KEYS as TASK_REFERENCE_KEYS  # the keys task_metrics reads, written there once


def tracking_features(num_queries: int) -> dict:
    import datasets
    from datasets import Value

    q = int(num_queries)
    return {
        "sequence_id": Value("string"),
        "variant": Value("string"),
        "scene": Value("string"),
        "sequence": Value("string"),
        "camera": Value("int32"),
        "schema": Value("string"),
        "frame_indices": [Value("int32")],
        "image_size": [Value("int32")],
        "intrinsics": [Value("float64")],
        "query_uv": datasets.Array2D(shape=(None, 2), dtype="float32"),
        "tracks_ref0": datasets.Array3D(shape=(None, q, 3), dtype="float32"),
        "visibility": datasets.Array2D(shape=(None, q), dtype="bool"),
        "dynamic": [Value("bool")],
    }


def challenge_features(num_queries: int, depth_hw: tuple[int, int]) -> dict:
    import datasets

    h, w = (int(v) for v in depth_hw)
    return {
        **tracking_features(num_queries),
        "video": datasets.Video(decode=False),
        "depth_m": datasets.Array3D(shape=(None, h, w), dtype="float32"),
        "camera_c2w": datasets.Array3D(shape=(None, 4, 4), dtype="float64"),
        "camera_unreal": datasets.Array2D(shape=(None, 6), dtype="float64"),
    }


def _a3(dtype: str):
    import datasets
    from datasets import Value

    return datasets.Sequence(datasets.Sequence(datasets.Sequence(Value(dtype))))


def prediction_schema() -> dict:
    import datasets
    from datasets import Value

    return {
        "sequence_id": Value("string"),
        "tracking_xyz": _a3("float64"),
        "depth": _a3("float32"),
        "camera_c2w": _a3("float64"),
        "frame_indices": datasets.Sequence(Value("int32")),
    }


def reference_schema(task: str) -> dict:
    import datasets
    from datasets import Value

    ident = {
        "sequence_id": Value("string"), "variant": Value("string"), "scene": Value("string"),
        "frame_indices": datasets.Sequence(Value("int32")),
    }
    if task == "tracking":
        return {**ident, "tracks_ref0": _a3("float32"), "visibility": datasets.Sequence(datasets.Sequence(Value("bool"))), "dynamic": datasets.Sequence(Value("bool"))}
    if task == "depth":
        return {**ident, "depth_m": _a3("float32")}
    if task == "pose":
        return {**ident, "camera_c2w": _a3("float64")}
    raise OptionError(f"unknown Syn4D task {task!r}: expected one of ['depth', 'pose', 'tracking']")


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def to_metric_reference(row: Mapping, task: str) -> dict:
    """A builder row (``tracking`` or ``challenge`` config) projected onto the ``syn4d`` metric's reference keys of ``task``."""
    if task not in TASK_REFERENCE_KEYS:
        raise OptionError(f"unknown Syn4D task {task!r}: expected one of {sorted(TASK_REFERENCE_KEYS)}")
    keys = ("sequence_id", "variant", "scene", "frame_indices") + TASK_REFERENCE_KEYS[task]
    missing = [k for k in keys if k not in row]
    if missing:
        raise PredictionError(f"row is missing the key(s) {missing} needed by the syn4d {task!r} references (build the "
                         f"{'challenge' if task != 'tracking' else 'tracking or challenge'} config)")
    return {k: _plain(row[k]) for k in keys}


def to_numpy_row(row: Mapping) -> dict:
    """A builder row with every array field as a numpy array of its stored dtype.

    ``Dataset.with_format("numpy")`` casts every float to float32 by default, which would truncate the float64
    poses; this keeps each field's own dtype (or pass ``with_format("numpy", dtype=...)`` yourself)."""
    return {k: (np.asarray(v, dtype=ARRAY_DTYPES[k]) if k in ARRAY_DTYPES and v is not None else v) for k, v in row.items()}
