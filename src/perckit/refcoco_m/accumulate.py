"""RefCOCO-M's ``refer_iou`` as a :class:`perckit.hf.contract.MetricCore`.

One record per expression: its id, its category and supercategory (the group labels the reduce needs) and its
exact :class:`perckit.core.segmentation.PairScore` (intersection, union, IoU). The reduce is the metric's own
:func:`perckit.refcoco_m.metric.reduce_labelled` (fsum means, integer sums: the same numbers in any order),
so :meth:`~perckit.hf.accumulate.Accumulator.compute` equals :func:`perckit.refcoco_m.metric.refer_iou` on the
same rows; only ``per_example`` follows the order the pairs were completed in. The metric is always strict: a
reference without a prediction is a :class:`~perckit.errors.PredictionError` at ``compute`` (an empty mask is
the "no object" answer).

In a state, a record is ``[expression_id, category, supercategory, intersection, union, iou]``, checked against
:data:`RECORD` and its invariants before it loads (:func:`perckit.hf.contract.check_records`): the id is the one
it is recorded under, ``0 <= intersection <= union`` as integers, and ``iou`` is ``intersection / union`` (the
option ``empty_union_iou`` when the union is empty), exactly as the metric computes it.

A state holds the rows still waiting for their other half as they came, and loads them only in the metric's
declared form (what ``add_batch`` takes: masks as compressed RLE with str counts): bytes counts are refused by
``save`` and by ``load_state_dict``, and a binary-array mask would come back as nested lists, so give pending
predictions as RLE (:func:`perckit.rle.encode`) before taking the state, or update with both halves.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import NamedTuple

from .. import rle as rle_ops
from ..core import segmentation as seg
from ..hf.contract import COUNT, TEXT, UNIT, Item, MetricCore, RecordSchema, refuse, same_id
from ..errors import OptionError, PredictionError, make_options
from ..hf.feature_check import Positional
from . import features as feats, metric as m

NAME = "refer_iou"


class ExpressionRecord(NamedTuple):
    """One scored expression: what :func:`perckit.refcoco_m.metric.reduce_labelled` reads of it (a tuple: built
    once per pair, at a fraction of a frozen dataclass's cost)."""

    expression_id: str
    category: str
    supercategory: str
    score: seg.PairScore


def _score(prediction: Mapping | None, reference: Mapping, opts: m.ReferIoUOptions) -> ExpressionRecord:
    """The record of one (prediction, reference) pair (:func:`perckit.refcoco_m.metric.score_expression`)."""
    if prediction is None:  # unreachable: the metric is strict, compute refuses missing predictions first
        raise PredictionError(f"expression {reference.get('expression_id')!r}: no prediction ({seg.EMPTY_MASK_HINT})")
    return ExpressionRecord(
        expression_id=reference["expression_id"],
        category=m._group(reference, "category"),
        supercategory=m._group(reference, "supercategory"),
        score=m.score_expression(prediction, reference, opts),
    )


def _reduce(items: list[Item], opts: m.ReferIoUOptions) -> dict:
    ids, categories, supercategories, scores = zip(*(item.record for item in items)) if items else ((),) * 4
    return m.reduce_labelled(scores, ids, categories, supercategories, opts)


def _to_state(record: ExpressionRecord) -> list:
    s = record.score
    return [record.expression_id, record.category, record.supercategory, int(s.intersection), int(s.union), float(s.iou)]


#: A record as a state holds it (:func:`_to_state`).
RECORD = Positional({"expression_id": TEXT, "category": TEXT, "supercategory": TEXT, "intersection": COUNT, "union": COUNT,
                     "iou": UNIT})


def _schema(opts: m.ReferIoUOptions) -> RecordSchema:
    """:data:`RECORD` and its invariants under ``opts`` (the IoU of an empty union is ``opts.empty_union_iou``)."""

    def invariants(key: str, r: list) -> None:
        eid, _, _, inter, union, iou = r
        same_id(".expression_id", eid, key)
        if inter > union:
            raise refuse(".intersection", f"at most the union ({union})", inter)
        want = rle_ops.pair_iou(inter, union, opts.empty_union_iou)
        if iou != want:
            raise refuse(".iou", f"intersection / union = {want!r}" if union else f"empty_union_iou = {want!r} (an empty union)", iou)

    return RecordSchema(RECORD, (invariants,))


def refer_iou_core(config: str | None = None) -> MetricCore:
    """The :class:`~perckit.hf.contract.MetricCore` of ``refer_iou`` (no configs: ``config`` must be None)."""
    if config is not None:
        raise OptionError(f"metric {NAME!r} has no configs, got config {config!r}")
    return MetricCore(
        name=NAME, config=None, id_key="expression_id", prepare=partial(make_options, NAME, m.ReferIoUOptions),
        score=_score, reduce=_reduce, record_to_state=_to_state, record_schema=_schema,
        record_from_state=lambda s: ExpressionRecord(s[0], s[1], s[2], seg.PairScore(s[3], s[4], float(s[5]))),
        features=lambda: (feats.prediction_schema(), feats.reference_schema()),
        strict=lambda opts: True, empty_hint=seg.EMPTY_MASK_HINT, lax_option=None,
    )
