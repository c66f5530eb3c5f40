"""``refer_iou``: the RefCOCO-M metric. One predicted mask P_i per expression i (matched by ``expression_id``) and
its ground-truth instance mask G_i, both compressed COCO RLE compared in the RLE domain:

- I_i = |P_i ∩ G_i|, U_i = |P_i ∪ G_i| (exact pixel counts, :func:`perckit.rle.rle_pair_counts`);
  IoU_i = I_i / U_i, and ``empty_union_iou`` (1.0) when U_i = 0 (:func:`perckit.rle.pair_iou`); a prediction of
  another size raises, or with ``resize_predictions="nearest"`` is resized to G_i first;
- mIoU = (1/N) Σ_i IoU_i (the card's primary metric); cIoU = Σ_i I_i / Σ_i U_i (1.0 when Σ U = 0);
  precision@t = |{i : IoU_i ≥ t}| / N for t in ``thresholds`` (0.5 .. 0.9, inclusive);
- the same mIoU, cIoU and N per supercategory and per category.

Accumulate: :func:`score_expression` scores one pair; reduce: :func:`reduce_refer_iou` (:func:`reduce_labelled` on the
references' labels, over
:func:`perckit.core.segmentation.reduce_iou` and ``reduce_groups``); :func:`refer_iou` pairs and runs both.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from typing import Any

from ..core import segmentation as seg
from ..errors import OptionError, make_options


#: The rule ``resize_predictions="nearest"`` resizes with: OpenCV's ``INTER_NEAREST``. The RefCOCO-M card and the
#: LISA / LAVT evaluators score masks at the image size and resize none; OpenCV's ``cv2.resize`` is the common way
#: mask pipelines resize, so a resized run says it (``"pil"`` on request).
NEAREST_RULE = "opencv"


@dataclass(frozen=True)
class ReferIoUOptions:
    #: precision@t thresholds (inclusive, IoU >= t); also the key names ``precision@{t:g}``.
    thresholds: tuple = seg.DEFAULT_THRESHOLDS
    #: [inferred] IoU when both masks are empty (LISA / ReLA: 1.0; LAVT: 0.0).
    empty_union_iou: float = 1.0
    #: None: a prediction of another size raises; "pil" or "opencv": it is resized to the GT size under that
    #: nearest-neighbour rule; "nearest": :data:`NEAREST_RULE`.
    resize_predictions: str | None = None
    return_per_example: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "thresholds", seg.check_thresholds(self.thresholds))
        object.__setattr__(self, "empty_union_iou", seg.check_threshold(seg.EMPTY_UNION_OPTION, self.empty_union_iou))
        object.__setattr__(self, "resize_predictions", seg.resize_rule(self.resize_predictions, NEAREST_RULE))
        if not isinstance(self.return_per_example, bool):
            raise OptionError(f"option 'return_per_example': expected True or False, got {self.return_per_example!r}")


def score_expression(prediction: Mapping, reference: Mapping, options: ReferIoUOptions = ReferIoUOptions()) -> seg.PairScore:
    """Accumulate half: the exact I, U and IoU of one expression."""
    return seg.score_pair(prediction.get("mask"), reference.get("mask"), resize=options.resize_predictions,
                          empty_union_iou=options.empty_union_iou, where=f"expression {reference['expression_id']!r}")


def _group(reference: Mapping, key: str) -> str:
    value = reference.get(key)
    return value if isinstance(value, str) else ""


def reduce_refer_iou(references: Sequence[Mapping], scores: Sequence[seg.PairScore], options: ReferIoUOptions = ReferIoUOptions()) -> dict:
    """Reduce half: the summary, ``per_supercategory``, ``per_category`` and optionally ``per_example``."""
    return reduce_labelled(scores, [r["expression_id"] for r in references], [_group(r, "category") for r in references],
                           [_group(r, "supercategory") for r in references], options)


def reduce_labelled(scores: Sequence[seg.PairScore], ids: Sequence[str], categories: Sequence[str], supercategories: Sequence[str],
                    options: ReferIoUOptions = ReferIoUOptions()) -> dict:
    """:func:`reduce_refer_iou` on the references' labels alone (what the accumulator's records hold of them)."""
    out = seg.reduce_iou(scores, options.thresholds)
    out["per_supercategory"] = seg.reduce_groups(scores, supercategories, options.thresholds)
    out["per_category"] = seg.reduce_groups(scores, categories, options.thresholds)
    if options.return_per_example:
        out["per_example"] = [{"expression_id": i, "iou": s.iou, "intersection": s.intersection, "union": s.union}
                              for i, s in zip(ids, scores)]
    return out


def refer_iou(predictions: Sequence[Mapping], references: Sequence[Mapping], **options: Any) -> dict:
    """Score one predicted mask per expression against the references (see the ``refer_iou`` metric card).

    Predictions are matched by ``expression_id``: a duplicate id, an id unknown to the
    references, or a reference without a prediction raises ``PredictionError``.
    """
    opts = make_options("refer_iou", ReferIoUOptions, options)
    pairs = seg.match_by_id(predictions, references, "expression_id")
    refs = [r for _, r in pairs]
    return reduce_refer_iou(refs, [score_expression(p, r, opts) for p, r in pairs], opts)
