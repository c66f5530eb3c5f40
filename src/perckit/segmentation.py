"""The generic per-mask IoU core that every single-mask segmentation metric shares.

Accumulate: :func:`score_pair` turns one (prediction, ground truth) mask pair into a
:class:`PairScore` with the exact integer counts I = |P ∩ G| and U = |P ∪ G| (pycocotools
``area`` and ``merge(intersect=True)`` through :mod:`perckit.rle`, cast to Python ints;
never pycocotools' ``iou()``). Reduce: :func:`reduce_iou` turns any number of pair scores
into mIoU, cIoU, precision@t and the example count; :func:`reduce_groups` does the same per
group (category, dataset, ...).

The reductions do not depend on the order of the scores: means are taken with
``math.fsum`` (exactly rounded) and the pooled cIoU sums Python ints (no overflow), so
evaluate's distributed mode, which gathers the shards in process order, gives the same
numbers bit for bit.

Used by ``metrics/refer_iou`` (RefCOCO-M). Meant for every later mask metric too: M4Seg's
pairings can build on :func:`count_matrix` and ReasonAVEdit's visual IoU / cIoU on
:func:`score_pair` and :func:`reduce_iou`, instead of computing IoU again.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import rle as rle_ops
from .errors import OptionError, PredictionError, check_choice
# The project's id index (generic over the key; it lives with the first benchmark that needed it).
from .matching import index_by_id

logger = logging.getLogger(__name__)

#: The LAVT precision@t thresholds.
DEFAULT_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
RESIZE_MODES = (None, "nearest")
#: What a group block holds (see :func:`reduce_groups`).
GROUP_KEYS = ("miou", "ciou", "num_examples")


@dataclass(frozen=True)
class PairScore:
    """One scored mask pair: exact pixel counts and the IoU under the empty-union rule."""

    intersection: int
    union: int
    iou: float


def as_rle(mask: Any, where: str = "mask") -> rle_ops.RLE:
    """Any accepted mask form as a validated compressed RLE with str counts.

    Accepted: a compressed RLE dict (``counts`` str or pycocotools' bytes), an uncompressed
    RLE dict (``counts`` a list of ints), or a 2-D binary array (any value > 0 is foreground).
    """
    return rle_ops.to_rle(mask, where=where)


def check_threshold(name: str, value: Any) -> float:
    """A number in [0, 1] as float; anything else raises :class:`OptionError` naming the option."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise OptionError(f"option {name!r}: expected a number in [0, 1], got {value!r}")
    return float(value)


def check_thresholds(values: Any, name: str = "thresholds") -> tuple[float, ...]:
    """A non-empty sequence of distinct numbers in [0, 1] (the precision@t thresholds) as a tuple."""
    if isinstance(values, (int, float)):
        values = (values,)
    if not isinstance(values, (list, tuple)) or not values:
        raise OptionError(f"option {name!r}: expected a non-empty list of numbers in [0, 1], got {values!r}")
    out = tuple(check_threshold(name, v) for v in values)
    keys = [precision_key(t) for t in out]
    if len(set(keys)) != len(keys):
        raise OptionError(f"option {name!r}: thresholds must be distinct, got {list(values)!r}")
    return out


def precision_key(threshold: float) -> str:
    """The output key of a threshold: ``precision@0.5``, ``precision@0.75``."""
    return f"precision@{threshold:g}"


def pair_counts(pred: Any, gt: Any, *, resize: str | None = None, where: str = "mask") -> tuple[int, int]:
    """Exact ``(I, U)`` of a predicted and a ground-truth mask, as Python ints.

    Both masks go through :func:`as_rle` first (validated: pycocotools loops forever on bad
    counts). A prediction whose ``size`` differs from the ground truth's raises
    :class:`PredictionError` naming ``where`` and both sizes, unless ``resize="nearest"``: it is
    then resized to the ground-truth size with nearest neighbour, and a warning is logged.
    """
    check_choice("resize", resize, RESIZE_MODES)
    p = as_rle(pred, f"{where}: predicted mask")
    g = as_rle(gt, f"{where}: ground-truth mask")
    if p["size"] != g["size"]:
        if resize is None:
            raise PredictionError(
                f"{where}: predicted mask size {p['size']} differs from the ground-truth size {g['size']} "
                "([H, W]; pass resize_predictions='nearest' to resize predictions)"
            )
        logger.warning("%s: resizing the predicted mask from %s to %s (nearest)", where, p["size"], g["size"])
        p = rle_ops.resize_nearest(p, g["size"])
    a_p = rle_ops.area(p)
    a_g = rle_ops.area(g)
    inter = rle_ops.intersection_area(p, g, where) if a_p and a_g else 0
    return inter, a_p + a_g - inter


def pair_iou(intersection: int, union: int, empty_union_iou: float = 1.0) -> float:
    """I / U, and ``empty_union_iou`` when U == 0 (both masks empty). No epsilon."""
    return intersection / union if union else float(empty_union_iou)


def score_pair(pred: Any, gt: Any, *, resize: str | None = None, empty_union_iou: float = 1.0, where: str = "mask") -> PairScore:
    """Accumulate half: one mask pair's :class:`PairScore` (see :func:`pair_counts`)."""
    inter, uni = pair_counts(pred, gt, resize=resize, where=where)
    return PairScore(inter, uni, pair_iou(inter, uni, empty_union_iou))


def count_matrix(preds: Sequence[Any], gts: Sequence[Any], *, resize: str | None = None, where: str = "masks") -> list[list[tuple[int, int]]]:
    """``(I, U)`` of every (prediction, ground truth) pair: row i = prediction i (for one-to-one pairings)."""
    return [
        [pair_counts(p, g, resize=resize, where=f"{where}: prediction {i} vs ground truth {j}") for j, g in enumerate(gts)]
        for i, p in enumerate(preds)
    ]


def _mean(values: Iterable[float], n: int) -> float:
    return math.fsum(values) / n


def reduce_iou(scores: Sequence[PairScore], thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> dict:
    """Reduce half: the summary of any number of pair scores.

    - ``miou`` = (1/N) Σ IoU_i (``math.fsum``);
    - ``ciou`` = Σ I_i / Σ U_i over Python ints, 1.0 when Σ U = 0;
    - ``precision@t`` = |{i : IoU_i ≥ t}| / N for each threshold (inclusive);
    - ``num_examples`` = N.

    With no scores every value is ``None`` and ``num_examples`` is 0.
    """
    n = len(scores)
    keys = [precision_key(t) for t in thresholds]
    if n == 0:
        return {"miou": None, "ciou": None, **dict.fromkeys(keys), "num_examples": 0}
    inter = sum(int(s.intersection) for s in scores)
    uni = sum(int(s.union) for s in scores)
    out: dict[str, Any] = {"miou": _mean((s.iou for s in scores), n), "ciou": inter / uni if uni else 1.0}
    for t, k in zip(thresholds, keys):
        out[k] = sum(1 for s in scores if s.iou >= t) / n
    out["num_examples"] = n
    return out


def reduce_groups(
    scores: Sequence[PairScore], groups: Sequence[str], thresholds: Sequence[float] = DEFAULT_THRESHOLDS, keys: Sequence[str] = GROUP_KEYS
) -> dict[str, dict]:
    """:func:`reduce_iou` per group: ``{group: {key: value for key in keys}}``, groups sorted by name.

    ``groups[i]`` is the group of ``scores[i]``; ``keys`` picks the entries of each block
    (default ``miou``, ``ciou``, ``num_examples``).
    """
    if len(groups) != len(scores):
        raise ValueError(f"reduce_groups: {len(scores)} scores but {len(groups)} group labels")
    by: dict[str, list[PairScore]] = {}
    for s, g in zip(scores, groups):
        by.setdefault(g, []).append(s)
    out = {}
    for name in sorted(by):
        block = reduce_iou(by[name], thresholds)
        out[name] = {k: block[k] for k in keys}
    return out


def per_example_rows(ids: Sequence[str], scores: Sequence[PairScore], id_key: str = "id") -> list[dict]:
    """``[{id_key, iou, intersection, union}]`` in the given order (for ``return_per_example``)."""
    return [{id_key: i, "iou": s.iou, "intersection": s.intersection, "union": s.union} for i, s in zip(ids, scores)]


def match_by_id(predictions: Sequence[Mapping], references: Sequence[Mapping], key: str) -> list[tuple[Mapping, Mapping]]:
    """Pair every reference with the prediction of the same ``key`` (reference order).

    Raises :class:`PredictionError` for a duplicate id on either side, a prediction id unknown
    to the references, and a reference without a prediction (naming a few of the ids).
    """
    refs = index_by_id(references, "references", key)
    preds = index_by_id(predictions, "predictions", key)
    unknown = [k for k in preds if k not in refs]
    if unknown:
        raise PredictionError(
            f"predictions: {len(unknown)} {key}(s) unknown to the references, e.g. {unknown[:5]}"
        )
    missing = [k for k in refs if k not in preds]
    if missing:
        raise PredictionError(
            f"predictions: no prediction for {len(missing)} reference {key}(s), e.g. {missing[:5]} "
            "(give every reference a prediction; an empty mask means 'no object')"
        )
    return [(preds[k], r) for k, r in refs.items()]
