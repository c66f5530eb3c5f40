"""m4seg: the seven M4Seg metrics of PRIMA's table (mIoU, Recall, I-SS, I-SIoU, SS, SIoU, METEOR) plus gIoU / cIoU.

All logic lives in ``perckit.m4seg.metric``; see README.md beside this file.
"""

from perckit.hf import metric as evaluate_base
from perckit.m4seg import features as feats

_DESCRIPTION = """\
M4Seg (multi-image pixel-grounded reasoning, PRIMA) metrics. Masks are paired per image (a prediction in the
wrong image never matches): miou (GLaMM's greedy one-to-one IoU pairing, averaged per sample) and recall (GLaMM's
loop with IoU >= 0.5 and text similarity >= 0.5 and its early stop, micro over GT groundings); ss, siou, i_ss and
i_siou compare texts with a sentence encoder (all-MiniLM-L6-v2 by default) and are RECONSTRUCTED definitions (the
PRIMA evaluator was not available); meteor is GLaMM's pycocoevalcap pipeline (needs Java). Extras: giou, ciou,
miou_strict, counts and per question type / source / granularity breakdowns. Values are fractions in [0, 1]
(as_percent=True gives the paper's percentages).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of {"example_id": str, "a": str, "groundings": [{"image_index": int (1-based),
        "name": str, "segmentation": {"size": [H, W], "counts": str}}]} (the rows' own field names, M4Seg's).
        a="" and groundings=[] mean no output.
        perckit.m4seg.parse_grounded_answer(text, masks) converts GLaMM/PRIMA-style output.
    references: M4Seg builder rows projected with perckit.m4seg.to_metric_reference(row). Matched by example_id.
    embed_fn: callable list[str] -> [n, d] L2-normalised array, or "minilm" (default) / "stub".
    text_model_path (str): local all-MiniLM-L6-v2 folder (else $M4SEG_TEXT_MODEL, else the packaged weights).
    as_percent (bool, False), miou_unit ("sample" | "image"), matching ("greedy" | "hungarian"),
    recall_iou_threshold (0.5), recall_text_threshold (0.5), recall_text_encoder ("minilm" |
    "bert-base-uncased-meanpool", with bert_model_path), ss_level ("answer" | "phrase"), siou_threshold (0.5),
    siou_soft (False), i_mode ("image" | "mask"), resolved_name_style ("name" | "name_instance"),
    resize_predictions (None | "nearest" = "opencv" | "pil"), skip_unavailable (False), metrics (subset of the seven),
    meteor_fn (callable (candidates, references) -> corpus score), per_sample (True),
    strict (True: a reference without a prediction raises; False: it is scored as an empty prediction).
Returns:
    dict with miou, recall, i_ss, i_siou, ss, siou, meteor, giou, ciou, miou_strict, num_samples,
    num_samples_without_groundings, num_gt_groundings, num_pred_groundings, num_missing_predictions, skipped,
    per_question_type, per_dataset_name, per_granularity, options and per_sample.
Examples:
    >>> import evaluate
    >>> metric = evaluate.load("metrics/m4seg")
    >>> ref = {"example_id": "e", "a": "chair_101", "type": "spatial", "dataset_name": "coco_objects",
    ...        "granularity": "object", "images": [{"height": 1, "width": 4}, {"height": 1, "width": 2}],
    ...        "groundings": [{"image_index": 1, "name": "chair", "answer_span": [0, 9],
    ...                        "segmentation": {"size": [1, 4], "counts": "022"}}]}
    >>> pred = {"example_id": "e", "a": "chair", "groundings": [{"image_index": 1, "name": "chair",
    ...         "segmentation": {"size": [1, 4], "counts": "022"}}]}
    >>> metric.compute(predictions=[pred], references=[ref], embed_fn="stub", metrics=["miou", "recall"])["miou"]
    1.0
"""

_CITATION = """\
PRIMA: Multi-Image Vision-Language Models for Reasoning Segmentation (Nguyen et al., WACV 2027);
GLaMM: Pixel Grounding Large Multimodal Model (Rasheed et al., CVPR 2024) for the mIoU / Recall / METEOR evaluator.
"""


class M4Seg(evaluate_base.PerckitMetric):
    CARD = evaluate_base.Card(_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION, ("https://huggingface.co/datasets/kanguyen-vn/M4Seg",))
    SCHEMAS = (feats.prediction_schema, feats.reference_schema)
    ACCUMULATOR = "m4seg"
