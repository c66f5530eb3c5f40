"""Features of the M⁴Seg builder and the input schemas of ``metrics/m4seg``.

List literals throughout: ``Sequence({...})`` of a struct would become a dict of lists in datasets 3.6 and 5.x."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from ..core.schema import project, rle_feature

if TYPE_CHECKING:  # the functions that build features import datasets; importing this module does not
    import datasets

#: The release's source names and the annotation family of each (``granularity``) [card].
SOURCE_GRANULARITY = {
    "ade20k_part234": "part",
    "paco_lvis": "part",
    "pascal_part": "part",
    "ade20k_objects": "object",
    "coco_objects": "object",
    "pascal_objects": "object",
}
#: The builder column of the embedded source images (only with the option ``image_root``).
IMAGE_FILES = "image_files"


def row_features(with_images: bool = False) -> datasets.Features:
    """The builder's features; ``with_images`` adds ``image_files`` (one ``Image`` per entry of ``images``)."""
    import datasets
    from datasets import Value

    f = {
        "example_id": Value("string"),
        "pair_id": Value("string"),
        "dataset_name": Value("string"),
        "type": Value("string"),
        "granularity": Value("string"),
        "q": Value("string"),
        "a": Value("string"),  # with entity codes
        "images": [{"image_id": Value("string"), "path": Value("string"), "height": Value("int32"), "width": Value("int32")}],
        "groundings": [{
            "image_index": Value("int32"),  # 1-based index into ``images``
            "name": Value("string"),
            "annotation_ids": [Value("string")],
            "object_annotation_id": Value("string"),  # null when absent
            "answer_span": [Value("int32")],  # [start, end), length 2 checked in code
            "bbox": [Value("float32")],  # [x, y, w, h] of the mask, length 4 checked in code
            "segmentation": rle_feature(),
        }],
    }
    if with_images:
        f[IMAGE_FILES] = [datasets.Image()]
    return datasets.Features(f)


def prediction_schema() -> dict:
    from datasets import Value

    return {
        "example_id": Value("string"),
        "a": Value("string"),
        "groundings": [{"image_index": Value("int32"), "name": Value("string"), "segmentation": rle_feature()}],
    }


def reference_schema() -> dict:
    from datasets import Value

    return {
        "example_id": Value("string"),
        "a": Value("string"),
        "type": Value("string"),
        "dataset_name": Value("string"),
        "granularity": Value("string"),
        "images": [{"height": Value("int32"), "width": Value("int32")}],
        "groundings": [{
            "image_index": Value("int32"),
            "name": Value("string"),
            "answer_span": [Value("int32")],
            "segmentation": rle_feature(),
        }],
    }


def to_metric_reference(row: Mapping) -> dict:
    """A builder row projected onto the ``metrics/m4seg`` reference keys (``None`` strings become ``""``)."""
    return project(row, reference_schema())


def to_metric_prediction(row: Mapping) -> dict:
    """Any dict with ``example_id``, ``a`` and ``groundings`` projected onto the prediction keys."""
    return project(row, prediction_schema())


def gt_as_prediction(row: Mapping, style: str = "name") -> dict:
    """The ground truth as a prediction: the resolved answer text and the GT groundings (a perfect model)."""
    from .metric.codes import resolve_answer

    pred = to_metric_prediction(row)
    pred["a"] = resolve_answer(row.get("a") or "", row.get("groundings") or [], style)
    return pred
