"""av_edit_quality: ReasonAVEdit-Bench final edit quality of edited clips as an evaluate module.

All logic lives in ``perckit.reason_av_edit.quality`` (``metric.py`` the tables, ``pixel.py`` the model-free metrics,
``formulas.py`` the model-based metrics' math, ``decode.py`` the inputs, ``models/`` the networks); see README.md
beside this file.
Helpers: perckit.reason_av_edit.to_quality_reference, make_quality_prediction, load_quality_predictions_dir.
"""

from perckit.hf import metric as evaluate_base
from perckit.reason_av_edit.quality import metric as core
from perckit.reason_av_edit.quality import predictions as preds
from perckit.reason_av_edit.quality import references as refs

_DESCRIPTION = """\
Final edit quality of ReasonAVEdit-Bench (instruction-guided joint audio-video editing): the edited clip against
its source. Exact, without model weights: SSIM and PSNR (8-bit RGB, per frame, mean over frames) and background
preservation bg_psnr / bg_ssim outside the target region of the full-timeline mask video (the placement box for
instance addition). With local weights: FVD, FAD, TV-A, TC, TA-A, AV-A, LPAPS, Sync-C / Sync-D, PQ, DeSync, PEAVS;
a metric whose library or weights are absent is None, with the reason in `skipped`. The main ranking is over the
pure-instruction samples; the reference-guided samples, each category, sub-track, language and orientation get their
own tables (TV-A and TA-A use English text encoders: read them in per_language["en"]).
The benchmark's own evaluator is not available: numbers are not claimed to reproduce its tables.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of {"sample_id": str, "edited_video": {"bytes": video bytes or None, "path": str},
        "edited_audio": {"bytes": WAV bytes or None, "path": str}}. Build them with
        perckit.reason_av_edit.make_quality_prediction(sample_id, edited_video, edited_audio=None) or read a folder of
        <sample_id>.mp4 (+ optional <sample_id>.wav) with load_quality_predictions_dir(folder).
    references: ReasonAVEdit-Bench builder rows projected with perckit.reason_av_edit.to_quality_reference(row).
        Predictions are matched by sample_id.
    psnr_cap (100.0), ssim_win_size (7), ssim_impl ("boxsum" or "skimage"), pixel_device (None: the compiled CPU
    kernels; or a torch device), num_proc (1: processes scoring the model-free metrics), mask_threshold (127),
    addition_region ("box" or "mask"),
    frame_mismatch (None, "truncate" or "resample"), resize_edited (None or "bilinear"), missing ("error" or "skip"),
    metrics (None: every key), models ({name or key: weights path / repo id or a ModelMetric}), device ("cpu"),
    batch_size (16), return_per_sample (False).
Returns:
    dict with ssim, psnr, bg_psnr, bg_ssim, fvd, fad, tv_a, tc, ta_a, av_a, lpaps, sync_c, sync_d, pq, desync, peavs
    over the pure-instruction samples, n_<key> for each, num_samples, num_without_edited_audio,
    num_reference_samples, num_missing, reference, per_category, per_sub_track, per_language, per_orientation
    (the same keys per table),
    suggested (the card's per-category diagnostic keys), skipped ({key: reason} for every None key) and, when
    asked, per_sample.
Examples:
    >>> import evaluate
    >>> from perckit.hf.entrypoints import build_split
    >>> from perckit.reason_av_edit import make_quality_prediction, to_quality_reference
    >>> metric = evaluate.load("metrics/av_edit_quality")
    >>> rows = build_split("reason_av_edit", "default", "/path/to/ReasonAVEdit-Bench")
    >>> refs = [to_quality_reference(row) for row in rows]
    >>> preds = [make_quality_prediction(r["sample_id"], r["video"]) for r in refs]   # the source as the edit
    >>> out = metric.compute(predictions=preds, references=refs, metrics=["ssim", "psnr", "bg_psnr", "bg_ssim"])
    >>> out["ssim"], out["psnr"], out["bg_ssim"]
    (1.0, 100.0, 1.0)
"""

_CITATION = """\
ReasonAVEdit-Bench: https://huggingface.co/datasets/bigfacing/ReasonAVEdit-Bench
SSIM: Wang et al., IEEE TIP 2004 (scikit-image's structural_similarity). FVD: Unterthiner et al., 2019.
FAD: Kilgour et al., 2019. CLIP score: Hessel et al., 2021. DeSync: MMAudio's av-benchmark (Cheng et al., 2025).
"""


class AVEditQuality(evaluate_base.PerckitMetric):
    CARD = evaluate_base.Card(_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION, ("https://huggingface.co/datasets/bigfacing/ReasonAVEdit-Bench",))
    SCHEMAS = (preds.prediction_schema, refs.reference_schema)
    COMPUTE = core.av_edit_quality
