"""Features of the RefCOCO-M builder and the input schemas of the ``refer_iou`` metric."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..core.schema import project, rle_feature

if TYPE_CHECKING:  # the functions that build features import datasets; importing this module does not
    import datasets


def images_features() -> datasets.Features:
    """The ``images`` config: the release row as published (one row per image)."""
    import datasets
    from datasets import Value

    return datasets.Features({
        "image": datasets.Image(),
        "image_id": Value("int64"),
        "file_name": Value("string"),
        "samples": [{
            "id": Value("int64"),
            "image_id": Value("int64"),
            "category": Value("string"),
            "supercategory": Value("string"),
            "label": Value("string"),
            "sentences": [Value("string")],
            "bbox": [Value("float32")],
            "mask": rle_feature(),
        }],
    })


def expression_features(with_images: bool = True) -> datasets.Features:
    """The ``expressions`` config: one row per (image, sample, sentence); ``image`` only ``with_images``."""
    import datasets
    from datasets import Value

    features: dict = {"expression_id": Value("string")}
    if with_images:
        features["image"] = datasets.Image()
    features.update({
        "image_id": Value("int64"),
        "file_name": Value("string"),
        "sample_id": Value("int64"),
        "category": Value("string"),
        "supercategory": Value("string"),
        "label": Value("string"),
        "sentence": Value("string"),
        "sentence_index": Value("int32"),
        "num_sentences": Value("int32"),
        "bbox": [Value("float32")],
        "mask": rle_feature(),
        "height": Value("int32"),
        "width": Value("int32"),
    })
    return datasets.Features(features)


def prediction_schema() -> dict:
    """``refer_iou`` predictions: one mask per expression."""
    from datasets import Value

    return {"expression_id": Value("string"), "mask": rle_feature()}


def reference_schema() -> dict:
    """``refer_iou`` references: the ``expressions`` row restricted to what scoring needs."""
    from datasets import Value

    return {
        "expression_id": Value("string"),
        "mask": rle_feature(),
        "category": Value("string"),
        "supercategory": Value("string"),
    }


def to_metric_reference(row: Mapping) -> dict:
    """An ``expressions`` row projected onto exactly the ``refer_iou`` reference keys."""
    return project(row, reference_schema())


def to_metric_prediction(row: Mapping) -> dict:
    """An ``expressions`` row (or any dict with ``expression_id`` and ``mask``) as a ``refer_iou`` prediction."""
    return project(row, prediction_schema())
