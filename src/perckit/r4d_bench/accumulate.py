"""R4D-Bench's metrics as :class:`perckit.accumulate.MetricCore` records: ``mask_temporal`` and ``track_id``.

The per-query records are the metrics' own (:class:`QueryScore`, :class:`TrackScore`), reduced by the metrics'
own reduce halves; a missing prediction (lax mode) is scored as "no output" and counted in
``num_missing_predictions``, exactly as :func:`perckit.r4d_bench.metrics.mask_temporal` / ``track_id`` do.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Mapping

from ..accumulate import Item, MetricCore
from ..errors import OptionError, check_options
from . import metrics as m


def _no_config(name: str, config: str | None) -> None:
    if config is not None:
        raise OptionError(f"metric {name!r} has no configs, got config {config!r}")


def _query_score_from_state(state: Mapping[str, Any]) -> m.QueryScore:
    fields = dict(state)
    fields["frame_ious"] = [(int(f), float(v)) for f, v in fields.get("frame_ious", [])]
    return m.QueryScore(**fields)


def _mask_options(options: Mapping[str, Any]) -> m.MaskTemporalOptions:
    check_options("mask_temporal", options, m.MaskTemporalOptions.__dataclass_fields__)
    return m.MaskTemporalOptions(**options)


def _counting_missing(reduce):
    """``reduce`` of the records, plus ``num_missing_predictions`` (the items scored as "no output")."""

    def reduce_items(items: list[Item], opts: m.MaskTemporalOptions) -> dict:
        out = reduce([item.record for item in items])
        out["num_missing_predictions"] = sum(1 for item in items if not item.predicted)
        return out

    return reduce_items


def mask_temporal_core(config: str | None = None) -> MetricCore:
    _no_config("mask_temporal", config)
    return MetricCore(
        name="mask_temporal", config=None, id_key="query_id", prepare=_mask_options,
        score=lambda p, r, opts: m.score_query(p, r, opts), reduce=_counting_missing(m.reduce_mask_temporal),
        record_to_state=asdict, record_from_state=_query_score_from_state,
        strict=lambda opts: opts.strict, selects=lambda opts: opts.selects,
        empty_hint=m.MASK_EMPTY_HINT, lax_option="strict=False",
    )


def _track_options(options: Mapping[str, Any]) -> m.MaskTemporalOptions:
    check_options("track_id", options, ("only_query_prefix", "only_queries", "strict"))
    return m.MaskTemporalOptions(only_query_prefix=options.get("only_query_prefix"), only_queries=options.get("only_queries"),
                                 strict=options.get("strict", False))


def track_id_core(config: str | None = None) -> MetricCore:
    _no_config("track_id", config)
    return MetricCore(
        name="track_id", config=None, id_key="query_id", prepare=_track_options,
        score=lambda p, r, opts: m.score_track_query(p, r), reduce=_counting_missing(m.reduce_track_id),
        record_to_state=asdict, record_from_state=lambda state: m.TrackScore(**state),
        strict=lambda opts: opts.strict, selects=lambda opts: opts.selects,
        empty_hint=m.TRACK_EMPTY_HINT, lax_option="strict=False",
    )
