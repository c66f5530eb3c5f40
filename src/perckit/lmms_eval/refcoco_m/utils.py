"""The lmms-eval task ``refcoco_m_mask``: RefCOCO-M referring segmentation scored by mask IoU (``refer_iou``).

One doc is one row of the export's ``expressions`` config (an image and one referring sentence). The model sees
the image and the sentence and must answer with the referred object's mask as text; the answer forms read (see
:func:`perckit.lmms_eval.mask_from_value`) are a COCO RLE JSON ``{"size": [H, W], "counts": "..."}`` (the
prompt asks for it), polygons in pixels ``{"polygons": [[x0, y0, x1, y1, ...]]}``, and a pixel box
``{"bbox_2d": [x1, y1, x2, y2]}`` (filled: a box-only model gets a box-as-mask IoU), in prose or a code fence.
An answer none of these reads scores as the empty mask (IoU 0) and counts in ``unparsed``.

lmms-eval imports this file by its path (``!function utils.x`` in the YAML beside it): imports are absolute."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from perckit import lmms_eval as common, rle as rle_ops
from perckit.refcoco_m.features import to_metric_reference

METRIC = "refer_iou"
#: ``refer_iou`` options of the task: a mask at another size than the image is resized rather than failing the
#: run (one warning per example), with OpenCV's ``INTER_NEAREST`` (``refer_iou``'s rule: the RefCOCO-M evaluators
#: resize none, and a model's mask at its own resolution is usually resized with ``cv2.resize``); edit to score
#: strictly (None) or with PIL's rule ("pil").
OPTIONS: dict[str, Any] = {"resize_predictions": "opencv"}

PROMPT = ("Segment the object that this expression refers to: \"{sentence}\". The image is {width} pixels wide and "
          "{height} pixels high. Answer with the object's mask as COCO run-length encoding in JSON, "
          "{{\"size\": [{height}, {width}], \"counts\": \"...\"}}, or with its outline as polygons in pixels, "
          "{{\"polygons\": [[x1, y1, x2, y2, x3, y3, ...]]}}.")


def refcoco_m_doc_to_visual(doc: Mapping) -> list:
    """The doc's image, as RGB."""
    return [doc["image"].convert("RGB")]


def refcoco_m_doc_to_text(doc: Mapping, lmms_eval_specific_kwargs: Mapping | None = None) -> str:
    """``pre_prompt`` + the segmentation request (sentence, image size, answer format) + ``post_prompt``."""
    kw = lmms_eval_specific_kwargs or {}
    text = PROMPT.format(sentence=doc["sentence"], height=int(doc["height"]), width=int(doc["width"]))
    return f"{kw.get('pre_prompt', '')}{text}{kw.get('post_prompt', '')}"


def refcoco_m_doc_to_target(doc: Mapping) -> str:
    """The answer of a perfect model: the ground-truth mask as RLE JSON."""
    return json.dumps({"size": list(doc["mask"]["size"]), "counts": doc["mask"]["counts"]})


def parse_answer(text: str, doc: Mapping) -> tuple[dict, bool, str]:
    """``(prediction, parsed, form)``: the ``refer_iou`` prediction row the answer reads as (the empty mask when
    nothing reads: ``parsed`` False, form ``none``)."""
    h, w = int(doc["height"]), int(doc["width"])
    found = common.mask_from_text(text, h, w)
    if found is None:
        return {"expression_id": doc["expression_id"], "mask": rle_ops.empty(h, w)}, False, "none"
    mask, form = found
    return {"expression_id": doc["expression_id"], "mask": mask}, True, form


def refcoco_m_process_results(doc: Mapping, results: Sequence[Any]) -> dict:
    """The doc scored into a one-pair ``refer_iou`` accumulator; the same item under every reported key."""
    prediction, parsed, form = parse_answer(common.first_text(results), doc)
    one = common.item(METRIC, OPTIONS, prediction, to_metric_reference(doc), parsed, form)
    return {key: one for key in KEYS}


def _result(items: Sequence[Mapping]) -> dict:
    return common.reduce_items(METRIC, OPTIONS, items)


#: reported key -> its aggregation (the YAML's metric_list names the same functions, defined here by name)
AGGREGATIONS = common.aggregations(_result, {
    "miou": ("refcoco_m_miou",
             "mIoU: the mean IoU over expressions (the RefCOCO-M card's metric; LISA's gIoU without its epsilon)."),
    "ciou": ("refcoco_m_ciou", "cIoU: summed intersections over summed unions."),
    "precision@0.5": ("refcoco_m_precision_50", "precision@0.5: the fraction of expressions with IoU >= 0.5."),
    "precision@0.7": ("refcoco_m_precision_70", "precision@0.7."),
    "precision@0.9": ("refcoco_m_precision_90", "precision@0.9."),
    "unparsed": ("refcoco_m_unparsed", "The fraction of answers no form read (scored as empty masks)."),
})
globals().update({fn.__name__: fn for fn in AGGREGATIONS.values()})
KEYS = tuple(AGGREGATIONS)
