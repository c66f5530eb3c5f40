"""Features of the R4D-Bench builder, the input schemas of its two metrics and the projections of a builder row
onto them (:func:`to_metric_reference` and the other ``to_*`` helpers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import check_choice
from ..core.schema import project, rle_feature

if TYPE_CHECKING:  # the functions that build features import datasets; importing this module does not
    import datasets


def query_features() -> datasets.Features:
    import datasets
    from datasets import Value

    return datasets.Features({
        "query_id": Value("string"),
        "scene": Value("string"),
        "text_en": Value("string"),
        "text_zh": Value("string"),
        "target_track_ids": [Value("string")],
        "target_count": Value("int32"),
        "is_negative": Value("bool"),
        "query_type": Value("string"),
        "requires_motion_understanding": Value("bool"),
        "temporal_relation": Value("string"),
        "expected_temporal_anchor": Value("string"),
        "distractor": Value("string"),
        "note": Value("string"),
        "existence_frames": [Value("int32")],
        "frames": [{"frame_id": Value("int32"), "mask": rle_feature(), "num_instance_masks": Value("int32")}],
        "evaluated_frame_ids": [Value("int32")],
        "scene_frame_ids": [Value("int32")],
        "extra_metadata_json": Value("string"),
    })


def frame_features() -> datasets.Features:
    import datasets
    from datasets import Value

    return datasets.Features({
        "scene": Value("string"),
        "frame_id": Value("int32"),
        "image": datasets.Image(),
        "file_name": Value("string"),
        "id": Value("int64"),
        "height": Value("int32"),
        "width": Value("int32"),
        "annotations": [{
            "id": Value("int64"),
            "category_id": Value("int64"),
            "category_name": Value("string"),
            "track_id": Value("string"),
            "bbox": [Value("float32")],
            "area": Value("float32"),
            "iscrowd": Value("bool"),
            "segmentation": rle_feature(),
        }],
    })


METRICS = ("mask_temporal", "track_id")


def prediction_schema(metric: str = "mask_temporal") -> dict:
    """The declared prediction features of ``metric`` (``"mask_temporal"`` or ``"track_id"``)."""
    from datasets import Value

    check_choice("metric", metric, METRICS)
    if metric == "track_id":
        return {"query_id": Value("string"), "target_track_ids": [Value("string")]}
    return {"query_id": Value("string"), "frames": [{"frame_id": Value("int32"), "mask": rle_feature()}]}


def reference_schema(metric: str = "mask_temporal") -> dict:
    """The declared reference features of ``metric`` (``"mask_temporal"`` or ``"track_id"``)."""
    from datasets import Value

    check_choice("metric", metric, METRICS)
    if metric == "track_id":
        return {"query_id": Value("string"), "scene": Value("string"), "target_track_ids": [Value("string")]}
    return {
        "query_id": Value("string"),
        "scene": Value("string"),
        "query_type": Value("string"),
        "is_negative": Value("bool"),
        "frames": [{"frame_id": Value("int32"), "mask": rle_feature()}],
        "evaluated_frame_ids": [Value("int32")],
        "scene_frame_ids": [Value("int32")],
    }


def to_metric_reference(row: Mapping) -> dict:
    """A builder query row projected onto the ``mask_temporal`` reference keys."""
    return project(row, reference_schema("mask_temporal"))


def to_metric_prediction(row: Mapping) -> dict:
    """A builder query row (or any dict with ``query_id`` and ``frames``) as a ``mask_temporal`` prediction."""
    return project(row, prediction_schema("mask_temporal"))


def to_track_reference(row: Mapping) -> dict:
    """A builder query row projected onto the ``track_id`` reference keys."""
    return project(row, reference_schema("track_id"))


def to_track_prediction(row: Mapping) -> dict:
    return project(row, prediction_schema("track_id"))
