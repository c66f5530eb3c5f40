"""R4D-Bench's metrics as :class:`perckit.hf.contract.MetricCore` records: ``mask_temporal`` and ``track_id``.

The per-query records are the metrics' own (:class:`QueryScore`, :class:`TrackScore`), reduced by the metrics'
own reduce halves; a missing prediction (lax mode) is scored as "no output" and counted in
``num_missing_predictions``, exactly as :func:`perckit.r4d_bench.metric.mask_temporal` / ``track_id`` do.

A record read from a state is checked against its declared schema (:data:`QUERY_RECORD` / :data:`TRACK_RECORD` and
their invariants, by :func:`perckit.hf.contract.check_records`) before it is converted: every rate in [0, 1], counts
as integers >= 0 with ``intersection <= union``, one IoU per evaluated frame and no frame twice; ``tp <= num_pred``
and ``tp <= num_gt``, ``is_negative`` exactly when the ground truth is empty."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Mapping

from ..hf.contract import COUNT, FLAG, TEXT, UNIT, Item, MetricCore, RecordSchema, refuse, same_id
from ..errors import OptionError, check_options
from ..hf.feature_check import Positional, Scalar
from . import metric as m

#: A :class:`~perckit.r4d_bench.metric.QueryScore` as a state holds it (``asdict``): every rate in [0, 1] (the
#: empty-union IoU is an option in [0, 1] too), the pixel and frame counts, the per-frame IoUs.
QUERY_RECORD = {
    "query_id": TEXT, "scene": TEXT, "query_type": TEXT, "is_negative": FLAG,
    **{k: UNIT for k in m.QUERY_KEYS},
    "intersection": COUNT, "union": COUNT, "num_evaluated_frames": COUNT, "num_ignored_prediction_frames": COUNT,
    "num_existence_frames_without_mask": COUNT,
    "frame_ious": [Positional({"frame_id": Scalar("int64"), "iou": UNIT})],
}

#: A :class:`~perckit.r4d_bench.metric.TrackScore` as a state holds it.
TRACK_RECORD = {
    "query_id": TEXT, "scene": TEXT, "is_negative": FLAG,
    **{k: UNIT for k in m.TRACK_KEYS},
    "tp": COUNT, "num_pred": COUNT, "num_gt": COUNT,
}


def _query_invariants(key: str, r: Mapping[str, Any]) -> None:
    same_id(".query_id", r["query_id"], key)
    if r["intersection"] > r["union"]:
        raise refuse(".intersection", f"at most the union ({r['union']})", r["intersection"])
    if len(r["frame_ious"]) != r["num_evaluated_frames"]:
        raise refuse(".frame_ious", f"one IoU per evaluated frame ({r['num_evaluated_frames']})", r["frame_ious"])
    if len({f for f, _ in r["frame_ious"]}) != len(r["frame_ious"]):
        raise refuse(".frame_ious", "each frame once", r["frame_ious"])


def _track_invariants(key: str, r: Mapping[str, Any]) -> None:
    same_id(".query_id", r["query_id"], key)
    if r["tp"] > min(r["num_pred"], r["num_gt"]):
        raise refuse(".tp", f"at most num_pred ({r['num_pred']}) and num_gt ({r['num_gt']})", r["tp"])
    if r["is_negative"] != (r["num_gt"] == 0):
        raise refuse(".is_negative", f"{r['num_gt'] == 0} (num_gt is {r['num_gt']})", r["is_negative"])


QUERY_SCHEMA = RecordSchema(QUERY_RECORD, (_query_invariants,))
TRACK_SCHEMA = RecordSchema(TRACK_RECORD, (_track_invariants,))


def _core(name: str, config: str | None, options: tuple, defaults: dict, score: Any, reduce: Any, schema: RecordSchema,
          from_state: Any, empty_hint: str) -> MetricCore:
    """The :class:`MetricCore` both metrics share: no configs, ``options`` (names) checked then given over
    ``defaults`` to :class:`~perckit.r4d_bench.metric.MaskTemporalOptions`, the records reduced by ``reduce`` plus
    ``num_missing_predictions`` (the items scored as "no output"), the declared features of
    :mod:`perckit.r4d_bench.features` (imported when needed)."""
    if config is not None:
        raise OptionError(f"metric {name!r} has no configs, got config {config!r}")

    def prepare(opts: Mapping[str, Any]) -> m.MaskTemporalOptions:
        check_options(name, opts, options)
        return m.MaskTemporalOptions(**{**defaults, **opts})

    def reduce_items(items: list[Item], opts: m.MaskTemporalOptions) -> dict:
        return {**reduce([item.record for item in items]), "num_missing_predictions": sum(1 for i in items if not i.predicted)}

    def features() -> tuple:
        from .features import prediction_schema, reference_schema

        return prediction_schema(name), reference_schema(name)

    return MetricCore(
        name=name, config=None, id_key="query_id", prepare=prepare, score=score, reduce=reduce_items,
        record_to_state=asdict, record_from_state=from_state, record_schema=lambda opts: schema, features=features,
        strict=lambda opts: opts.strict, selects=lambda opts: opts.selects, empty_hint=empty_hint, lax_option="strict=False",
    )


def mask_temporal_core(config: str | None = None) -> MetricCore:
    return _core("mask_temporal", config, m.MaskTemporalOptions.__dataclass_fields__, {}, m.score_query, m.reduce_mask_temporal,
                 QUERY_SCHEMA, lambda s: m.QueryScore(**{**s, "frame_ious": [(f, v) for f, v in s["frame_ious"]]}),
                 m.MASK_EMPTY_HINT)


def track_id_core(config: str | None = None) -> MetricCore:
    # lax by default, as metric.track_id
    return _core("track_id", config, ("only_query_prefix", "only_queries", "strict"), {"strict": False},
                 lambda p, r, opts: m.score_track_query(p, r), m.reduce_track_id, TRACK_SCHEMA,
                 lambda s: m.TrackScore(**s), m.TRACK_EMPTY_HINT)
