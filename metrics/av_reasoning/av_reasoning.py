"""av_reasoning: ReasonAVEdit-Bench reasoning diagnostics [proposal] as an evaluate module.

All logic lives in ``perckit.reason_av_edit.metric`` (the formulas, input decoding, scoring); see README.md
beside this file.
Helpers: perckit.reason_av_edit.to_metric_reference, make_prediction, load_predictions_dir.
"""

from perckit.hf import metric as evaluate_base
from perckit.reason_av_edit import features as feats

_DESCRIPTION = """\
Reasoning diagnostics of ReasonAVEdit-Bench (instruction-guided joint audio-video editing), all of them
PROPOSALS (the benchmark's own evaluator is not available): visual IoU of the predicted target region at the
anchor frame (mean IoU, cIoU, null-anchor accuracy, IoU with null, background leak), acoustic temporal IoU of the
edit window (frame vector and hull, recall at 0.5 / 0.7), acoustic time-frequency IoU of the reasoning waveform,
video temporal IoU of the full-timeline mask, Which-Acc (discrete / visual / audio rule, with rule counts) and the
A/V support offset. Macro means over samples, per category, sub-track, language and orientation; null ground
truth is decided from the data. Learned-model quality metrics (FVD, FAD, CLAP, Synchformer DeSync, LPAPS, ...) are out of scope.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of {"sample_id": str, "anchor_mask": {"size": [H, W], "counts": str},
        "reason_audio": {"bytes": WAV bytes or None, "path": str}, "edit_window_s": [start, end) seconds or None,
        "mask_video": {"bytes": mp4 bytes or None, "path": str}, "selected_instance_index": int or None}.
        Build them with perckit.reason_av_edit.make_prediction(...), which fills the "not provided" markers
        (RLE size [] / counts ""; media bytes None / path ""; None).
    references: ReasonAVEdit-Bench builder rows projected with perckit.reason_av_edit.to_metric_reference(row).
        Predictions are matched by sample_id.
    rms_floor (1e-4), rel_db (40.0), gap_close_s (0.10), min_run_s (0.05), n_fft (1024), hop (256),
    sample_rate (16000), null_area_frac (0.001), mask_video_threshold (127), which_iou_threshold (0.5),
    tiou_recall_thresholds ((0.5, 0.7)), restrict_to_suggested (True), gt_temporal_source ("annotation" or
    "reason_audio"), resample (True), resize_predictions (None or "nearest"), return_per_sample (False).
Returns:
    dict with visual_iou, visual_ciou, visual_null_acc, visual_iou_with_null, bg_leak, audio_tiou, audio_tiou_hull,
    audio_tiou_r@0.5, audio_tiou_r@0.7, audio_tf_iou, audio_null_acc, video_tiou, video_tiou_hull, video_null_acc,
    av_onset_offset_abs_s, av_support_offset_s, av_support_tiou, num_av_undefined, which_acc,
    which_acc_rule_counts, n_<key> for every mean, num_samples, num_reference_samples, reference, per_category,
    per_sub_track, per_language, per_orientation, skipped ({key: reason} for every None key) and, when asked,
    per_sample.
Examples:
    >>> import evaluate
    >>> from perckit.reason_av_edit import make_prediction
    >>> metric = evaluate.load("metrics/av_reasoning")
    >>> ref = {"sample_id": "w", "category": "where_only", "sub_track": "W1_same_class_pair", "language": "en",
    ...        "orientation": "landscape",
    ...        "anchor_mask": {"size": [2, 4], "counts": "242"}, "reason_audio": {"bytes": None, "path": ""},
    ...        "mask_video": {"bytes": None, "path": ""}, "edit_window_s": None, "edit_window_frames": None,
    ...        "fps": 25.0, "num_frames": 75, "selected_instance_index": None}
    >>> pred = make_prediction("w", anchor_mask={"size": [2, 4], "counts": "44"})
    >>> round(metric.compute(predictions=[pred], references=[ref])["visual_iou"], 6)
    0.333333
"""

_CITATION = """\
ReasonAVEdit-Bench: https://huggingface.co/datasets/bigfacing/ReasonAVEdit-Bench
gIoU / cIoU as in LISA (Lai et al., CVPR 2024); null-target handling as in GRES (Liu et al., CVPR 2023).
"""


class AVReasoning(evaluate_base.PerckitMetric):
    CARD = evaluate_base.Card(_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION, ("https://huggingface.co/datasets/bigfacing/ReasonAVEdit-Bench",))
    SCHEMAS = (feats.prediction_schema, feats.reference_schema)
    ACCUMULATOR = "av_reasoning"
