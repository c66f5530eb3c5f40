"""RefCOCO-M's ``refer_iou`` as a :class:`perckit.accumulate.MetricCore`.

One record per expression: its id, its category and supercategory (the group labels the reduce needs) and its
exact :class:`perckit.segmentation.PairScore` (intersection, union, IoU). The reduce is the metric's own
:func:`perckit.refcoco_m.metrics.reduce_refer_iou` (fsum means, integer sums: the same numbers in any order),
so :meth:`~perckit.accumulate.Accumulator.compute` equals :func:`perckit.refcoco_m.metrics.refer_iou` on the
same rows; only ``per_example`` follows the order the pairs were completed in. The metric is always strict: a
reference without a prediction is a :class:`~perckit.errors.PredictionError` at ``compute`` (an empty mask is
the "no object" answer).

A saved state (:meth:`~perckit.accumulate.Accumulator.save`, JSON) holds the rows still waiting for their other
half as they came: masks as compressed RLE with str counts save and load exactly; bytes counts are refused by
``save``, and a binary-array mask would come back as nested lists (read as polygons), so give pending predictions
as RLE (:func:`perckit.rle.encode`) before saving, or keep the state in memory (``state_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import segmentation as seg
from ..accumulate import Item, MetricCore
from ..errors import OptionError, PredictionError, check_options
from . import metrics as m

NAME = "refer_iou"


@dataclass(frozen=True)
class ExpressionRecord:
    """One scored expression: what :func:`perckit.refcoco_m.metrics.reduce_refer_iou` reads of it."""

    expression_id: str
    category: str
    supercategory: str
    score: seg.PairScore


def _options(options: Mapping[str, Any]) -> m.ReferIoUOptions:
    check_options(NAME, options, m.ReferIoUOptions.__dataclass_fields__)
    return m.ReferIoUOptions(**options)


def _score(prediction: Mapping | None, reference: Mapping, opts: m.ReferIoUOptions) -> ExpressionRecord:
    """The record of one (prediction, reference) pair (:func:`perckit.refcoco_m.metrics.score_expression`)."""
    if prediction is None:  # unreachable: the metric is strict, compute refuses missing predictions first
        raise PredictionError(f"expression {reference.get('expression_id')!r}: no prediction ({seg.EMPTY_MASK_HINT})")
    return ExpressionRecord(
        expression_id=reference["expression_id"],
        category=m._group(reference, "category"),
        supercategory=m._group(reference, "supercategory"),
        score=m.score_expression(prediction, reference, opts),
    )


def _reduce(items: list[Item], opts: m.ReferIoUOptions) -> dict:
    records = [item.record for item in items]
    refs = [{"expression_id": r.expression_id, "category": r.category, "supercategory": r.supercategory} for r in records]
    return m.reduce_refer_iou(refs, [r.score for r in records], opts)


def _to_state(record: ExpressionRecord) -> list:
    s = record.score
    return [record.expression_id, record.category, record.supercategory, int(s.intersection), int(s.union), float(s.iou)]


def _from_state(state: Any) -> ExpressionRecord:
    """A record from ``[expression_id, category, supercategory, intersection, union, iou]`` (checked)."""
    if not isinstance(state, list) or len(state) != 6:
        raise ValueError(f"expected [expression_id, category, supercategory, intersection, union, iou], got {state!r}")
    eid, category, supercategory, inter, union, iou = state
    if not all(isinstance(v, str) for v in (eid, category, supercategory)):
        raise TypeError(f"expected the id, category and supercategory as strings, got {state[:3]!r}")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (inter, union)) or inter > union:
        raise ValueError(f"expected intersection <= union as integers >= 0, got {inter!r} and {union!r}")
    if isinstance(iou, bool) or not isinstance(iou, (int, float)) or not 0.0 <= float(iou) <= 1.0:
        raise ValueError(f"expected an IoU in [0, 1], got {iou!r}")
    return ExpressionRecord(eid, category, supercategory, seg.PairScore(inter, union, float(iou)))


def refer_iou_core(config: str | None = None) -> MetricCore:
    """The :class:`~perckit.accumulate.MetricCore` of ``refer_iou`` (no configs: ``config`` must be None)."""
    if config is not None:
        raise OptionError(f"metric {NAME!r} has no configs, got config {config!r}")
    return MetricCore(
        name=NAME, config=None, id_key="expression_id", prepare=_options, score=_score, reduce=_reduce,
        record_to_state=_to_state, record_from_state=_from_state,
        strict=lambda opts: True, empty_hint=seg.EMPTY_MASK_HINT, lax_option=None,
    )
