"""mask_temporal: R4D-Bench (referring segmentation in dynamic 4D scenes) mask metrics as an evaluate module.

All logic lives in ``perckit.r4d_bench.metric``; see README.md beside this file.
"""

from perckit.hf import metric as evaluate_base
from perckit.r4d_bench import features as feats

_DESCRIPTION = """\
Spatio-temporal referring-segmentation metrics of R4D-Bench (referring segmentation in dynamic 4D scenes):
acc (frame-wise temporal activation accuracy, the R4D-Bench-QA protocol's Acc, also reported as existence_acc)
and vIoU first, then per-query mean frame IoU (miou), two-class pixel accuracy (macc), temporal accuracy
(fraction of evaluated frames with IoU >= threshold), vIoU@0.3/0.5, temporal IoU and temporal
precision/recall, macro-averaged over queries, plus the pooled overall IoU. Masks are compressed COCO RLE
compared exactly in the RLE domain; a frame where both masks are empty has IoU 1.0.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of {"query_id": str, "frames": [{"frame_id": int, "mask": {"size": [H, W], "counts": str}}]}.
        A frame that is missing counts as an empty mask; use "frames": [] for "no output".
    references: the R4D-Bench builder's query rows projected with
        perckit.r4d_bench.features.to_metric_reference(row) (keys query_id, scene, query_type, is_negative,
        frames, evaluated_frame_ids, scene_frame_ids). Predictions are matched by query_id.
    iou_threshold (float, default 0.5): inclusive threshold of temporal_acc.
    evaluated_frames (str): "annotated_and_existence" (default), "annotated" or "all_scene_frames".
    macc_mode (str): "class_mean" (default) or "frame_success".
    resize_predictions (None or "nearest"): resize predictions whose size differs from the GT (default: raise).
    empty_union_iou (float, default 1.0): IoU of a frame where both masks are empty.
        (resize_mismatched and empty_iou are deprecated aliases of these two: they warn.)
    only_query_prefix (str), only_queries (list of str): score a subset, like the official flags.
    strict (bool, default True): a reference without a prediction row raises; False scores it as no output.
Returns:
    dict with acc and viou (the R4D-Bench-QA protocol's Acc and vIoU; acc equals existence_acc), miou, macc,
    temporal_acc, existence_acc, viou@0.3, viou@0.5, tiou, temporal_precision,
    temporal_recall, overall_iou, num_queries, num_ignored_prediction_frames,
    num_existence_frames_without_mask, num_missing_predictions, per_scene, per_query_type, positive, negative, per_query.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/mask_temporal")
    >>> ref = {"query_id": "q", "scene": "s", "query_type": "A", "is_negative": False,
    ...        "frames": [{"frame_id": 1, "mask": {"size": [1, 4], "counts": "022"}}],
    ...        "evaluated_frame_ids": [1], "scene_frame_ids": [1]}
    >>> pred = {"query_id": "q", "frames": [{"frame_id": 1, "mask": {"size": [1, 4], "counts": "013"}}]}
    >>> metric.compute(predictions=[pred], references=[ref])["miou"]
    0.5
"""

_CITATION = """\
R4D-Bench dataset repository: https://huggingface.co/datasets/LiYacheng/r4d-bench-qa
vIoU as in TubeDETR (Yang et al., CVPR 2022).
"""


class MaskTemporal(evaluate_base.PerckitMetric):
    CARD = evaluate_base.Card(_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION, ("https://huggingface.co/datasets/LiYacheng/r4d-bench-qa",))
    SCHEMAS = (feats.prediction_schema, feats.reference_schema)
    ACCUMULATOR = "mask_temporal"
