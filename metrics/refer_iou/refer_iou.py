"""refer_iou: referring-segmentation mask IoU (RefCOCO-M) as an evaluate module.

All logic lives in ``perckit.refcoco_m.metric`` over ``perckit.core.segmentation``; see README.md beside this file.
"""

from perckit.hf import metric as evaluate_base
from perckit.refcoco_m import features as feats

_DESCRIPTION = """\
Referring expression segmentation metrics of RefCOCO-M: one predicted mask per (image, sentence) example,
scored against the instance mask by IoU. Outputs the mean IoU over examples (miou, the card's primary
metric), the pooled cumulative IoU (ciou = sum of intersections / sum of unions), precision@0.5..0.9
(fraction of examples with IoU >= t), the example count, and the same per supercategory and category.
Masks are compressed COCO RLE compared exactly in the RLE domain; no epsilon.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of {"expression_id": str, "mask": {"size": [H, W], "counts": str}}, one per reference.
        An empty mask is a valid "no object" answer.
    references: the RefCOCO-M builder's expressions rows projected with
        perckit.refcoco_m.to_metric_reference(row) (keys expression_id, mask, category, supercategory).
        Predictions are matched by expression_id.
    thresholds (list of float, default [0.5, 0.6, 0.7, 0.8, 0.9]): precision@t thresholds (inclusive).
    empty_union_iou (float, default 1.0): IoU of an example where both masks are empty.
    resize_predictions (None or "nearest"): resize predictions whose size differs from the GT (default: raise).
    return_per_example (bool, default False): add per_example, a list of {expression_id, iou, intersection, union}.
Returns:
    dict with miou, ciou, precision@0.5 ... precision@0.9, num_examples, per_supercategory and per_category
    ({name: {miou, ciou, num_examples}}), and per_example when asked.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/refer_iou")
    >>> ref = {"expression_id": "10:0", "mask": {"size": [2, 3], "counts": "033"}, "category": "dog", "supercategory": "animal"}
    >>> pred = {"expression_id": "10:0", "mask": {"size": [2, 3], "counts": "021O1"}}
    >>> metric.compute(predictions=[pred], references=[ref])["miou"]
    0.5
"""

_CITATION = """\
RefCOCO-M: https://huggingface.co/datasets/moondream/refcoco-m
cIoU / precision@t as in LAVT (Yang et al., CVPR 2022).
"""


class ReferIoU(evaluate_base.PerckitMetric):
    CARD = evaluate_base.Card(_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION, ("https://huggingface.co/datasets/moondream/refcoco-m",))
    SCHEMAS = (feats.prediction_schema, feats.reference_schema)
    ACCUMULATOR = "refer_iou"
