"""``refer_iou``: the RefCOCO-M metric (mIoU, cIoU, precision@t) over :mod:`perckit.core.segmentation`, the one
mask-pair core (counts, the resize rule, the empty-union rule, the id matcher) of every perckit mask metric.

Accumulate: :func:`score_expression` scores one (prediction, reference) pair. Reduce:
:func:`reduce_refer_iou` aggregates the pair scores (overall, per supercategory, per
category). :func:`refer_iou` matches predictions to references by ``expression_id`` and
runs both halves.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from typing import Any

from ..core import segmentation as seg
from ..errors import OptionError, check_choice, check_options


@dataclass(frozen=True)
class ReferIoUOptions:
    #: precision@t thresholds (inclusive, IoU >= t); also the key names ``precision@{t:g}``.
    thresholds: tuple = seg.DEFAULT_THRESHOLDS
    #: [inferred] IoU when both masks are empty (LISA / ReLA: 1.0; LAVT: 0.0).
    empty_union_iou: float = 1.0
    #: None: a prediction of another size raises; "nearest": it is resized to the GT size.
    resize_predictions: str | None = None
    return_per_example: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "thresholds", seg.check_thresholds(self.thresholds))
        object.__setattr__(self, "empty_union_iou", seg.check_threshold(seg.EMPTY_UNION_OPTION, self.empty_union_iou))
        check_choice(seg.RESIZE_OPTION, self.resize_predictions, seg.RESIZE_MODES)
        if not isinstance(self.return_per_example, bool):
            raise OptionError(f"option 'return_per_example': expected True or False, got {self.return_per_example!r}")


def score_expression(prediction: Mapping, reference: Mapping, options: ReferIoUOptions = ReferIoUOptions()) -> seg.PairScore:
    """Accumulate half: the exact I, U and IoU of one expression."""
    where = f"expression {reference['expression_id']!r}"
    return seg.score_pair(
        prediction.get("mask"), reference.get("mask"),
        resize=options.resize_predictions, empty_union_iou=options.empty_union_iou, where=where,
    )


def _group(reference: Mapping, key: str) -> str:
    value = reference.get(key)
    return value if isinstance(value, str) else ""


def reduce_refer_iou(references: Sequence[Mapping], scores: Sequence[seg.PairScore], options: ReferIoUOptions = ReferIoUOptions()) -> dict:
    """Reduce half: the summary, ``per_supercategory``, ``per_category`` and optionally ``per_example``."""
    out = seg.reduce_iou(scores, options.thresholds)
    out["per_supercategory"] = seg.reduce_groups(scores, [_group(r, "supercategory") for r in references], options.thresholds)
    out["per_category"] = seg.reduce_groups(scores, [_group(r, "category") for r in references], options.thresholds)
    if options.return_per_example:
        out["per_example"] = seg.per_example_rows([r["expression_id"] for r in references], scores, "expression_id")
    return out


def refer_iou(predictions: Sequence[Mapping], references: Sequence[Mapping], **options: Any) -> dict:
    """Score one predicted mask per expression against the references (see the ``refer_iou`` metric card).

    Predictions are matched by ``expression_id``: a duplicate id, an id unknown to the
    references, or a reference without a prediction raises ``PredictionError``.
    """
    check_options("refer_iou", options, ReferIoUOptions.__dataclass_fields__)
    opts = ReferIoUOptions(**options)
    pairs = seg.match_by_id(predictions, references, "expression_id")
    refs = [r for _, r in pairs]
    return reduce_refer_iou(refs, [score_expression(p, r, opts) for p, r in pairs], opts)
