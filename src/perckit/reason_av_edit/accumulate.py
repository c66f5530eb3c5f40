"""ReasonAVEdit-Bench's ``av_reasoning`` metric as a :class:`perckit.hf.contract.MetricCore`.

The per-sample record is the metric's own :class:`~.metric.SampleScore` (exact integer pixel counts, per-sample
tIoUs and offsets, the Which-Acc rule, what each side provided), made by :func:`~.metric.score_sample` as soon as a
prediction meets its reference; the media (mask videos, reasoning audio, as bytes or paths) are decoded then and
never kept in the record (read from a state, a record is checked against :data:`RECORD` and its invariants first).
The reduce is :func:`~.metric.reduce_scores` (``fmean`` on ``math.fsum`` and integer
counts: any order of the samples gives the same numbers), so :meth:`~perckit.hf.accumulate.Accumulator.compute` equals
:func:`~.metric.av_reasoning` exactly.

The metric is always strict (as :func:`~.metric.av_reasoning`): a reference without a prediction is an error at
``compute``, whose message says what an empty prediction is (``make_prediction(sample_id)``). A row still waiting
for its other half keeps its media; when that media is bytes, ``save`` refuses (the base's message: pass paths, or
keep the state in memory), while ``state_dict`` works.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from functools import partial
from typing import Any, Mapping

import numpy as np

from ..hf.contract import COUNT, FLAG, TEXT, UNIT, MetricCore, RecordSchema, refuse, same_id
from ..errors import OptionError, make_options
from ..hf.feature_check import Nullable, OptionalKey, Scalar
from . import features as feats, metric as m

#: A :class:`~.metric.SampleScore` as a state holds it: ``None`` where the sample has no such value; the IoUs,
#: tIoUs, background leak and the pixel counts in their ranges, the A/V offsets in seconds >= 0.
RECORD = {
    "sample_id": TEXT, "category": TEXT, "sub_track": TEXT,
    **{k: OptionalKey(Nullable(TEXT)) for k in ("language", "orientation")},  # absent in states saved before issue 31
    **{k: Nullable(FLAG) for k in ("visual_null", "visual_null_correct", "audio_null", "audio_null_correct", "video_null",
                                   "video_null_correct", "which_correct")},
    "visual_intersection": Nullable(COUNT), "visual_union": Nullable(COUNT),
    **{k: Nullable(UNIT) for k in ("visual_iou", "visual_iou_with_null", "bg_leak", "audio_tiou", "audio_tiou_hull", "audio_tf_iou",
                                   "video_tiou", "video_tiou_hull", "av_support_tiou")},
    **{k: Nullable(Scalar("float64", 0, math.inf)) for k in ("av_onset_offset_abs_s", "av_support_offset_s")},
    "which_rule": TEXT,
    **{k: FLAG for k in ("av_undefined", "pred_mask", "pred_audio", "pred_window", "pred_video", "ref_mask", "ref_audio",
                         "ref_video", "video_unavailable")},
}


def _invariants(key: str, r: Mapping[str, Any]) -> None:
    """The rules :func:`~.metric.score_sample` keeps: the visual counts with their IoU, the Which-Acc rule."""
    same_id(".sample_id", r["sample_id"], key)
    inter, union, iou = r["visual_intersection"], r["visual_union"], r["visual_iou"]
    if (inter is None) != (iou is None) or (union is None) != (iou is None):
        raise refuse(".visual_iou", "null exactly when visual_intersection and visual_union are", iou)
    if iou is not None:
        if not 0 < union or inter > union:
            raise refuse(".visual_intersection", f"at most the union ({union}), which is > 0", inter)
        if iou != inter / union:
            raise refuse(".visual_iou", f"visual_intersection / visual_union = {inter / union!r}", iou)
    if r["which_rule"] not in m.RULES:
        raise refuse(".which_rule", f"one of {list(m.RULES)}", r["which_rule"])
    if (r["which_correct"] is None) != (r["which_rule"] == "unscored"):
        raise refuse(".which_correct", "null exactly when which_rule is 'unscored'", r["which_correct"])


SCHEMA = RecordSchema(RECORD, (_invariants,))


def _record_to_state(record: m.SampleScore) -> dict:
    """A :class:`~.metric.SampleScore` as a JSON-safe dict: every field, as a plain Python scalar (numpy scalars from the
    pixel and audio counts become int / float / bool)."""
    return {k: v.item() if isinstance(v, np.generic) else v for k, v in asdict(record).items()}


def av_reasoning_core(config: str | None = None) -> MetricCore:
    """The ``av_reasoning`` core (no configs): records by ``sample_id``, always strict."""
    if config is not None:
        raise OptionError(f"metric 'av_reasoning' has no configs, got config {config!r}")
    return MetricCore(
        name="av_reasoning", config=None, id_key="sample_id", prepare=partial(make_options, "av_reasoning", m.AVReasoningOptions),
        score=m.score_sample, reduce=lambda items, opts: m.reduce_scores([item.record for item in items], opts),
        record_to_state=_record_to_state, record_from_state=lambda state: m.SampleScore(**state),
        record_schema=lambda opts: SCHEMA,
        features=lambda: (feats.prediction_schema(), feats.reference_schema()),
        strict=lambda opts: True, empty_hint=m.EMPTY_PREDICTION, lax_option=None,
    )
