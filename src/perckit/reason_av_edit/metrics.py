"""``av_reasoning``: the ReasonAVEdit-Bench reasoning diagnostics [proposal], as accumulate / reduce halves.

The benchmark's own evaluator (``bigfacing/h3eval``) is not readable, so every definition here is a
proposal (spec section 4), one function each, every constant an option of :class:`AVReasoningOptions`.

Accumulate: :func:`score_sample` turns one (prediction, reference) pair into a :class:`SampleScore`
(exact integer pixel counts, per-sample tIoUs, the Which-Acc rule). Reduce: :func:`reduce_scores`
macro-averages the records (:func:`perckit.core.stats.fmean`, on ``math.fsum``: independent of the order, so
evaluate's distributed mode gives the same numbers), per category and sub-track, with
``restrict_to_suggested``. :func:`av_reasoning` pairs predictions with references by ``sample_id``
(:func:`perckit.core.matching.pair_by_id`) and runs both. Every input value is decoded and checked by
:mod:`.inputs` (masks, windows, instance indices, audio, mask videos); nothing here parses a row.

Learned-model metrics (FVD, FAD, CLAP, Synchformer DeSync, LPAPS, ...) are out of scope: no key of
theirs is ever emitted.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import rle as rle_ops
from ..core import segmentation as seg
from ..errors import OptionError, check_choice
from ..core.matching import pair_by_id
from ..core.stats import fmean
from . import audio as au
from .features import is_media_provided
from .inputs import instance_index, mask_video_activity, optional_rle, optional_window, reference_samples, waveform
# ``_cv2`` is looked up here at every call, so that a test can stand in for a missing OpenCV.
from .inputs import cv2_or_none as _cv2
# Decoders that lived here before inputs.py; their names stay importable from this module.
from .inputs import decode_mask_video, probe_video  # noqa: F401
from .metadata import CARD_AUDIO_NULL, CARD_VISUAL_NULL, CATEGORIES

logger = logging.getLogger(__name__)

GT_TEMPORAL_SOURCES = ("annotation", "reason_audio")
RESIZE_MODES = seg.RESIZE_MODES

VISUAL_KEYS = ("visual_iou", "visual_ciou", "visual_null_acc", "visual_iou_with_null", "bg_leak")
AUDIO_TEMPORAL_KEYS = ("audio_tiou", "audio_tiou_hull")  # + audio_tiou_r@<t> + audio_null_acc
VIDEO_KEYS = ("video_tiou", "video_tiou_hull", "video_null_acc")
AV_KEYS = ("av_onset_offset_abs_s", "av_support_offset_s", "av_support_tiou")
#: The categories whose main (non-reference) samples feed each top-level key when
#: ``restrict_to_suggested`` (after the card's "Suggested metrics").
SUGGESTED = {
    "visual": ("where_only", "combined"),
    "which": ("which_only", "combined"),
    "temporal": ("when_only", "combined"),
}
RULES = ("discrete", "visual", "audio", "unscored")
#: What a missing prediction's message suggests instead: a row that provides nothing.
EMPTY_PREDICTION = "a sample without output is make_prediction(sample_id), every field 'not provided'"
#: Output keys this module never emits: the card's learned / edited-video quality metrics.
OUT_OF_SCOPE = ("FVD", "TV-A", "TC", "SSIM", "FAD", "TA-A", "LPAPS", "AV-A", "PEAVS", "Sync-C", "Sync-D", "PQ", "BG", "DeSync", "CLAP")


def recall_key(t: float) -> str:
    return f"audio_tiou_r@{t:g}"


#: The audio constants are :class:`.audio.AudioOptions` (the one place their defaults are written).
_AUDIO_DEFAULTS = au.AudioOptions()
AUDIO_OPTIONS = tuple(au.AudioOptions.__dataclass_fields__)


@dataclass(frozen=True)
class AVReasoningOptions:
    """Every constant of the proposal (spec 4.4), with its default."""

    rms_floor: float = _AUDIO_DEFAULTS.rms_floor
    rel_db: float = _AUDIO_DEFAULTS.rel_db
    gap_close_s: float = _AUDIO_DEFAULTS.gap_close_s
    min_run_s: float = _AUDIO_DEFAULTS.min_run_s
    n_fft: int = _AUDIO_DEFAULTS.n_fft
    hop: int = _AUDIO_DEFAULTS.hop
    sample_rate: int = _AUDIO_DEFAULTS.sample_rate
    null_area_frac: float = 0.001
    mask_video_threshold: int = 127
    which_iou_threshold: float = 0.5
    tiou_recall_thresholds: tuple = (0.5, 0.7)
    restrict_to_suggested: bool = True
    gt_temporal_source: str = "annotation"
    resample: bool = _AUDIO_DEFAULTS.resample
    resize_predictions: str | None = None
    #: Add ``per_sample`` (records sorted by sample_id) to the output.
    return_per_sample: bool = False

    def __post_init__(self) -> None:
        check_choice("gt_temporal_source", self.gt_temporal_source, GT_TEMPORAL_SOURCES)
        check_choice("resize_predictions", self.resize_predictions, RESIZE_MODES)
        for name in ("restrict_to_suggested", "return_per_sample"):
            if not isinstance(getattr(self, name), bool):
                raise OptionError(f"option {name!r}: expected True or False, got {getattr(self, name)!r}")
        seg.check_threshold("null_area_frac", self.null_area_frac)
        seg.check_threshold("which_iou_threshold", self.which_iou_threshold)
        t = self.mask_video_threshold
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= 255:
            raise OptionError(f"option 'mask_video_threshold': expected an int in [0, 255], got {t!r}")
        object.__setattr__(self, "tiou_recall_thresholds", seg.check_thresholds(self.tiou_recall_thresholds, "tiou_recall_thresholds"))
        self.audio  # validates the audio constants

    @property
    def audio(self) -> au.AudioOptions:
        """The audio constants of these options (:data:`AUDIO_OPTIONS`), checked by :class:`.audio.AudioOptions`."""
        return au.AudioOptions(**{name: getattr(self, name) for name in AUDIO_OPTIONS})


@dataclass
class SampleScore:
    """The per-sample record (accumulate half). ``None`` = not computed for this sample."""

    sample_id: str
    category: str
    sub_track: str
    # visual
    visual_null: bool | None = None
    visual_intersection: int | None = None
    visual_union: int | None = None
    visual_iou: float | None = None
    visual_null_correct: bool | None = None
    visual_iou_with_null: float | None = None
    bg_leak: float | None = None
    # audio
    audio_null: bool | None = None
    audio_tiou: float | None = None
    audio_tiou_hull: float | None = None
    audio_tf_iou: float | None = None
    audio_null_correct: bool | None = None
    # video
    video_null: bool | None = None
    video_tiou: float | None = None
    video_tiou_hull: float | None = None
    video_null_correct: bool | None = None
    # A/V support
    av_onset_offset_abs_s: float | None = None
    av_support_offset_s: float | None = None
    av_support_tiou: float | None = None
    av_undefined: bool = False
    # Which-Acc
    which_rule: str = "unscored"
    which_correct: bool | None = None
    # what the prediction / reference provided (for ``skipped``)
    pred_mask: bool = False
    pred_audio: bool = False
    pred_window: bool = False
    pred_video: bool = False
    ref_mask: bool = False
    ref_audio: bool = False
    ref_video: bool = False
    video_unavailable: bool = False

    def as_row(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- shared pieces


def interval_tiou(a: tuple[float, float] | None, b: tuple[float, float] | None) -> float:
    """|A ∩ B| / |A ∪ B| of two ``[start, end)`` intervals; 1 when both are empty, 0 when exactly one is."""
    a = a if a is not None and a[1] > a[0] else None
    b = b if b is not None and b[1] > b[0] else None
    if a is None and b is None:
        return 1.0
    if a is None or b is None:
        return 0.0
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = (a[1] - a[0]) + (b[1] - b[0]) - inter
    return inter / union


def vector_tiou(a: np.ndarray, b: np.ndarray) -> float:
    """Frame-vector tIoU with the same empty rules (frame counts)."""
    return au.mask_iou(np.asarray(a, dtype=bool), np.asarray(b, dtype=bool))


def video_hull(active: np.ndarray, fps: float) -> tuple[float, float] | None:
    """``[j_first / fps, (j_last + 1) / fps)`` of a video activity vector; ``None`` when nothing is active."""
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return None
    return int(idx[0]) / fps, (int(idx[-1]) + 1) / fps


def fit_frames(active: np.ndarray, n: int) -> np.ndarray:
    """Pad with inactive frames or drop extra frames to ``n``."""
    if active.shape[0] >= n:
        return active[:n]
    return np.concatenate([active, np.zeros(n - active.shape[0], dtype=bool)])


def which_correct(pred_index: int | None, ref_index: int | None, visual_null: bool | None, visual_iou: float | None,
                  audio_tf_iou: float | None, audio_tiou: float | None, threshold: float = 0.5) -> tuple[str, bool | None]:
    """[proposal] Which-Acc of one sample: ``(rule, correct)``; the first applicable rule decides.

    1. ``discrete``: both instance indices given; correct if equal;
    2. ``visual``: a non-null visual GT with a predicted mask; correct if IoU >= threshold;
    3. ``audio``: a visual-null GT; correct if ``audio_tf_iou`` (else ``audio_tiou``) >= threshold.

    Otherwise ``("unscored", None)``.
    """
    if pred_index is not None and ref_index is not None:
        return "discrete", int(pred_index) == int(ref_index)
    if visual_null is False and visual_iou is not None:
        return "visual", visual_iou >= threshold
    if visual_null is True:
        value = audio_tf_iou if audio_tf_iou is not None else audio_tiou
        if value is not None:
            return "audio", value >= threshold
    return "unscored", None


# ---------------------------------------------------------------- accumulate


def _visual(s: SampleScore, pred: Mapping, ref: Mapping, o: AVReasoningOptions, where: str) -> None:
    g = optional_rle(ref.get("anchor_mask"), f"reference {where}: anchor_mask")
    p = optional_rle(pred.get("anchor_mask"), f"prediction {where}: anchor_mask")
    s.ref_mask, s.pred_mask = g is not None, p is not None
    if g is None:
        return
    a_g = rle_ops.area(g)
    s.visual_null = a_g == 0
    if p is None:
        return
    inter, union = seg.pair_counts(p, g, resize=o.resize_predictions, where=where)
    hw = int(g["size"][0]) * int(g["size"][1])
    a_p = union - a_g + inter
    s.bg_leak = (a_p - inter) / (hw - a_g) if hw - a_g else 0.0
    if s.visual_null:
        s.visual_null_correct = a_p / hw < o.null_area_frac
        s.visual_iou_with_null = 1.0 if s.visual_null_correct else 0.0
    else:
        s.visual_intersection, s.visual_union = inter, union
        s.visual_iou = inter / union
        s.visual_iou_with_null = s.visual_iou


def _audio(s: SampleScore, pred: Mapping, ref: Mapping, o: AVReasoningOptions, where: str) -> tuple[tuple[float, float] | None, bool]:
    """Fills the audio keys; returns the predicted audio support (hull, in seconds) and whether one was given."""
    ao = o.audio
    gt = waveform(ref.get("reason_audio"), f"reference {where}: reason_audio", ao)
    s.ref_audio = gt is not None
    n_samples = gt.samples.shape[0] if gt is not None else reference_samples(ref, f"reference {where}", ao.sample_rate)
    pw = waveform(pred.get("reason_audio"), f"prediction {where}: reason_audio", ao, n_samples)
    window = optional_window(pred.get("edit_window_s"), f"prediction {where}: edit_window_s")
    s.pred_audio, s.pred_window = pw is not None, window is not None
    if window is not None:
        support: tuple[float, float] | None = window if window[1] > window[0] else None
    elif pw is not None:
        support = pw.hull()
    else:
        support = None
    given = window is not None or pw is not None
    s.audio_null = gt.silent if gt is not None else None
    if s.audio_null:
        if given:
            s.audio_null_correct = bool((pw is not None and pw.silent) or (window is not None and window[1] <= window[0]))
        return support, given
    # the GT temporal support
    ref_window = optional_window(ref.get("edit_window_s"), f"reference {where}: edit_window_s", strict_order=True)
    n = au.num_frames(n_samples, ao) if n_samples is not None else None
    if o.gt_temporal_source == "annotation" and ref_window is not None:
        gt_hull = ref_window if ref_window[1] > ref_window[0] else None
        gt_vec = au.window_vector(ref_window, n, ao) if n is not None else None
    elif gt is not None:
        gt_hull, gt_vec = gt.hull(), gt.active
    else:
        return support, given
    if given:
        s.audio_tiou_hull = interval_tiou(gt_hull, support)
        if gt_vec is not None:
            if window is not None:
                p_vec = au.window_vector(window, n, ao)
            else:
                p_vec = pw.active
            s.audio_tiou = vector_tiou(gt_vec, p_vec)
    if pw is not None and gt is not None:
        s.audio_tf_iou = au.mask_iou(gt.tf(), pw.tf())
    return support, given


def _video(s: SampleScore, pred: Mapping, ref: Mapping, o: AVReasoningOptions, where: str,
           audio_support: tuple[float, float] | None, audio_given: bool) -> None:
    ref_video, pred_video = ref.get("mask_video"), pred.get("mask_video")
    s.ref_video, s.pred_video = is_media_provided(ref_video), is_media_provided(pred_video)
    if _cv2() is None:
        s.video_unavailable = True
        return
    window = optional_window(pred.get("edit_window_s"), f"prediction {where}: edit_window_s")
    p_act = p_fps = None
    if s.pred_video:
        p_act, p_fps = mask_video_activity(pred_video, f"prediction {where}: mask_video", o.mask_video_threshold, o.null_area_frac)
    fps = ref.get("fps")
    if s.ref_video:
        g_act, g_fps = mask_video_activity(ref_video, f"reference {where}: mask_video", o.mask_video_threshold, o.null_area_frac)
        fps = fps or g_fps or None
        n = g_act.shape[0]
        if p_act is not None:
            p_vec = fit_frames(p_act, n)
            p_hull = video_hull(p_vec, fps) if fps else None
        elif window is not None and fps:
            p_vec = (np.arange(n) / fps >= window[0]) & (np.arange(n) / fps < window[1])
            p_hull = window if window[1] > window[0] else None
        else:
            p_vec = None
        s.video_null = not bool(g_act.any())
        if p_vec is not None:
            if s.video_null:
                s.video_null_correct = not bool(p_vec.any())
            else:
                s.video_tiou = vector_tiou(g_act, p_vec)
                if fps:
                    frames = optional_window(ref.get("edit_window_frames"), f"reference {where}: edit_window_frames", strict_order=True)
                    g_hull = (frames[0] / fps, frames[1] / fps) if frames is not None else video_hull(g_act, fps)
                    s.video_tiou_hull = interval_tiou(g_hull, p_hull)
    # A/V support: the prediction's own supports
    if p_act is not None and audio_given:
        v_fps = fps or p_fps
        v_support = video_hull(p_act, v_fps) if v_fps else None
        if audio_support is None or v_support is None:
            s.av_undefined = True
        else:
            on = abs(audio_support[0] - v_support[0])
            off = abs(audio_support[1] - v_support[1])
            s.av_onset_offset_abs_s = on
            s.av_support_offset_s = 0.5 * (on + off)
            s.av_support_tiou = interval_tiou(audio_support, v_support)


def score_sample(prediction: Mapping, reference: Mapping, options: AVReasoningOptions = AVReasoningOptions()) -> SampleScore:
    """Accumulate half: every per-sample value of one (prediction, reference) pair."""
    sid = str(reference["sample_id"])
    where = f"sample {sid!r}"
    s = SampleScore(sample_id=sid, category=str(reference.get("category") or ""), sub_track=str(reference.get("sub_track") or ""))
    _visual(s, prediction, reference, options, where)
    support, given = _audio(s, prediction, reference, options, where)
    _video(s, prediction, reference, options, where, support, given)
    s.which_rule, s.which_correct = which_correct(
        instance_index(prediction.get("selected_instance_index"), f"prediction {where}: selected_instance_index"),
        instance_index(reference.get("selected_instance_index"), f"reference {where}: selected_instance_index"),
        s.visual_null, s.visual_iou,
        s.audio_tf_iou, s.audio_tiou, options.which_iou_threshold,
    )
    return s


# ---------------------------------------------------------------- reduce


def _collect(scores: Iterable[SampleScore], attr: str) -> list:
    return [getattr(s, attr) for s in scores if getattr(s, attr) is not None]


def block(scores: Sequence[SampleScore], options: AVReasoningOptions = AVReasoningOptions()) -> dict:
    """Every key over ``scores`` (unrestricted): macro means, their counts ``n_<key>``, rule counts."""
    out: dict[str, Any] = {}

    def put(key: str, values: list) -> None:
        out[key] = fmean(values)  # math.fsum: independent of the order of the samples
        out[f"n_{key}"] = len(values)

    non_null = [s for s in scores if s.visual_iou is not None]
    put("visual_iou", [s.visual_iou for s in non_null])
    inter = sum(int(s.visual_intersection) for s in non_null)
    union = sum(int(s.visual_union) for s in non_null)
    out["visual_ciou"] = inter / union if union else None
    out["n_visual_ciou"] = len(non_null)
    put("visual_null_acc", _collect(scores, "visual_null_correct"))
    put("visual_iou_with_null", _collect(scores, "visual_iou_with_null"))
    put("bg_leak", _collect(scores, "bg_leak"))
    put("audio_tiou", _collect(scores, "audio_tiou"))
    hulls = _collect(scores, "audio_tiou_hull")
    put("audio_tiou_hull", hulls)
    for t in options.tiou_recall_thresholds:
        put(recall_key(t), [v >= t for v in hulls])
    put("audio_tf_iou", _collect(scores, "audio_tf_iou"))
    put("audio_null_acc", _collect(scores, "audio_null_correct"))
    put("video_tiou", _collect(scores, "video_tiou"))
    put("video_tiou_hull", _collect(scores, "video_tiou_hull"))
    put("video_null_acc", _collect(scores, "video_null_correct"))
    for k in AV_KEYS:
        put(k, _collect(scores, k))
    out["num_av_undefined"] = sum(1 for s in scores if s.av_undefined)
    put("which_acc", _collect(scores, "which_correct"))
    out["which_acc_rule_counts"] = {r: sum(1 for s in scores if s.which_rule == r) for r in RULES}
    out["num_samples"] = len(scores)
    return out


def key_groups(options: AVReasoningOptions) -> dict[str, tuple[str, ...]]:
    """The top-level keys of each suggested-category group."""
    recall = tuple(recall_key(t) for t in options.tiou_recall_thresholds)
    return {
        "visual": VISUAL_KEYS,
        "which": ("which_acc", "which_acc_rule_counts", "audio_tf_iou"),
        "temporal": AUDIO_TEMPORAL_KEYS + recall + ("audio_null_acc",) + VIDEO_KEYS + AV_KEYS + ("num_av_undefined",),
    }


def _skip_reason(key: str, group: str, scores: Sequence[SampleScore], restricted: bool) -> str:
    any_ = lambda attr: any(getattr(s, attr) for s in scores)  # noqa: E731
    if group == "visual":
        if not any_("pred_mask"):
            return "no predicted anchor_mask"
        if not any_("ref_mask"):
            return "no reference anchor_mask"
    if key == "which_acc" and all(s.which_rule == "unscored" for s in scores):
        return "no sample matched a Which-Acc rule (no instance-index pair, no predicted anchor_mask on a non-null visual GT, no audio score on a visual-null GT)"
    if key == "audio_tf_iou":
        if not any_("pred_audio"):
            return "no predicted reason_audio"
        if not any_("ref_audio"):
            return "no reference reason_audio"
    if key.startswith("audio_") and key != "audio_tf_iou" and not (any_("pred_window") or any_("pred_audio")):
        return "no predicted edit_window_s or reason_audio"
    if key.startswith("video_") or key.startswith("av_") or key == "num_av_undefined":
        if any_("video_unavailable"):
            return "cv2 not installed (pip install opencv-python-headless)"
        if key.startswith("av_"):
            if not any_("pred_video"):
                return "no predicted mask_video"
            if not (any_("pred_window") or any_("pred_audio")):
                return "no predicted edit_window_s or reason_audio"
            return "every sample with both supports had an empty one (see num_av_undefined)"
        if not any_("ref_video"):
            return "no reference mask_video"
        if not (any_("pred_video") or any_("pred_window")):
            return "no predicted mask_video or edit_window_s"
    where = f"in the categories {list(SUGGESTED[group])} (main samples)" if restricted else "among the samples"
    if key.endswith("_null_acc"):
        return f"no null-GT sample {where}"
    return f"no scorable sample {where}"


def _warn_null_disagreements(scores: Sequence[SampleScore]) -> None:
    def code(s: SampleScore) -> str:
        return s.sub_track.split("_", 1)[0].upper()

    vis = sorted(s.sample_id for s in scores if s.visual_null is not None and s.visual_null != (code(s) in CARD_VISUAL_NULL))
    aud = sorted(s.sample_id for s in scores if s.audio_null is not None and s.audio_null != (code(s) in CARD_AUDIO_NULL))
    if vis:
        logger.warning("av_reasoning: %d sample(s) disagree with the card's visual null anchors (H3 only), e.g. %s", len(vis), vis[:5])
    if aud:
        logger.warning("av_reasoning: %d sample(s) disagree with the card's audio null anchors (C4, R3 only), e.g. %s", len(aud), aud[:5])


def reduce_scores(scores: Sequence[SampleScore], options: AVReasoningOptions = AVReasoningOptions()) -> dict:
    """Reduce half: the top-level keys (restricted when ``restrict_to_suggested``), ``reference``,
    ``per_category``, ``per_sub_track`` and ``skipped``."""
    _warn_null_disagreements(scores)
    out: dict[str, Any] = {}
    groups = key_groups(options)
    for group, keys in groups.items():
        if options.restrict_to_suggested:
            subset = [s for s in scores if s.category in SUGGESTED[group] and s.category != "reference"]
        else:
            subset = list(scores)
        b = block(subset, options)
        for k in keys:
            out[k] = b[k]
            if f"n_{k}" in b:
                out[f"n_{k}"] = b[f"n_{k}"]
    out["num_samples"] = len(scores)
    out["num_reference_samples"] = sum(1 for s in scores if s.category == "reference")
    out["reference"] = block([s for s in scores if s.category == "reference"], options)
    cats = sorted({s.category for s in scores}, key=lambda c: (CATEGORIES.index(c) if c in CATEGORIES else len(CATEGORIES), c))
    out["per_category"] = {c: block([s for s in scores if s.category == c], options) for c in cats}
    out["per_sub_track"] = {t: block([s for s in scores if s.sub_track == t], options) for t in sorted({s.sub_track for s in scores})}
    skipped = {}
    for group, keys in groups.items():
        for k in keys:
            if out[k] is None:
                skipped[k] = _skip_reason(k, group, scores, options.restrict_to_suggested)
    out["skipped"] = dict(sorted(skipped.items()))
    if options.return_per_sample:
        out["per_sample"] = [s.as_row() for s in sorted(scores, key=lambda s: s.sample_id)]
    return out


def av_reasoning(predictions: Sequence[Mapping], references: Sequence[Mapping], **options: Any) -> dict:
    """Score reasoning predictions against reference rows (see the ``av_reasoning`` metric card).

    Predictions are matched by ``sample_id`` (:func:`perckit.core.matching.pair_by_id`, always strict): a duplicate
    id on either side, an unknown prediction id, or a reference without a prediction raises
    :class:`PredictionError`.
    """
    unknown = sorted(set(options) - set(AVReasoningOptions.__dataclass_fields__))
    if unknown:
        raise OptionError(f"av_reasoning: unknown option(s) {unknown}; expected some of {sorted(AVReasoningOptions.__dataclass_fields__)}")
    opts = AVReasoningOptions(**options)
    pairs = pair_by_id(predictions, references, "sample_id", empty_hint=EMPTY_PREDICTION)
    return reduce_scores([score_sample(p, r, opts) for p, r in pairs], opts)


__all__ = [
    "AVReasoningOptions", "SampleScore", "av_reasoning", "block", "decode_mask_video", "interval_tiou", "reduce_scores",
    "score_sample", "vector_tiou", "which_correct",
]
