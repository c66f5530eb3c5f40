"""The one mask-pair core: every metric that compares masks gets its pixel counts here.

Accumulate: :func:`pair_counts` turns one (prediction, ground truth) mask pair into the exact
integer counts I = |P ∩ G| and U = |P ∪ G| (pycocotools ``area`` and ``merge(intersect=True)``
through :mod:`perckit.rle`, cast to Python ints; never pycocotools' ``iou()``), and
:func:`score_pair` adds the IoU under the empty-union rule (:func:`pair_iou`). Reduce:
:func:`reduce_iou` turns any number of pair scores into mIoU, cIoU, precision@t and the example
count; :func:`reduce_groups` does the same per group (category, dataset, ...).

The pair rules themselves, I and U of two validated RLEs and the empty-union IoU, are
:func:`perckit.rle.rle_pair_counts` and :func:`perckit.rle.pair_iou` (the RLE module's header states them).
The rules that live here and nowhere else:

- **counts**: :func:`rle_count_matrix` (every prediction against every ground truth of one image);
  :func:`pair_counts` validates first;
- **resize on mismatch** (option ``resize_predictions``, :data:`RESIZE_OPTION`): a prediction whose
  size differs from the ground truth's raises, or with a rule name (``"pil"`` or ``"opencv"``,
  :data:`perckit.rle.RESIZE_RULES`) is resized under that rule and a warning logged
  (:func:`fit_prediction`, one message for every metric). A metric's options also take ``"nearest"``:
  the rule that metric names in its card (:func:`resize_rule`). The resize samples the prediction's
  runs at the target grid (:func:`perckit.rle.resize_nearest`: memory the target's, never the
  prediction's declared size) and charges the prediction row's :class:`perckit.rle.PixelBudget` with
  the target's pixels first (:func:`row_budget`: 2^30 resized pixels per prediction row);
- **empty union** (option ``empty_union_iou``, :data:`EMPTY_UNION_OPTION`): the scalar rule is
  :func:`perckit.rle.pair_iou`; :func:`iou_matrix` applies it to count matrices.

The reductions do not depend on the order of the scores: means are :func:`perckit.core.stats.fmean`
(exactly rounded) and the pooled cIoU sums Python ints (no overflow), so evaluate's distributed
mode, which gathers the shards in process order, gives the same numbers bit for bit.

Used by ``refer_iou`` (RefCOCO-M), ``mask_temporal`` (R4D-Bench), ``m4seg`` (M4Seg's P×G matrix and
gIoU / cIoU) and ``av_reasoning`` (ReasonAVEdit's visual IoU / cIoU).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .. import rle as rle_ops
from ..rle import MaskCounts, pair_iou, rle_pair_counts
from ..errors import OptionError, PredictionError, RLEError, check_choice
from .matching import pair_by_id
from .stats import fmean

logger = logging.getLogger(__name__)

#: The LAVT precision@t thresholds.
DEFAULT_THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
#: The values of the resize option: None raises on a size mismatch; a rule name resizes the prediction under that
#: rule (:data:`perckit.rle.RESIZE_RULES`); "nearest" is the metric's own rule (:func:`resize_rule`).
RESIZE_MODES = (None, "nearest", *rle_ops.RESIZE_RULES)
#: The one name of the resize option, in every metric that has it.
RESIZE_OPTION = "resize_predictions"
#: The one name of the option giving the IoU of a pair whose union is empty, in every metric that has it.
EMPTY_UNION_OPTION = "empty_union_iou"
#: What a group block holds (see :func:`reduce_groups`).
GROUP_KEYS = ("miou", "ciou", "num_examples")
#: The empty-prediction hint of :func:`match_by_id` (single-mask metrics).
EMPTY_MASK_HINT = "an empty mask means 'no object'"


@dataclass(frozen=True)
class PairScore:
    """One scored mask pair: exact pixel counts and the IoU under the empty-union rule."""

    intersection: int
    union: int
    iou: float


def as_rle(mask: Any, where: str = "mask") -> rle_ops.RLE:
    """Any mask form :func:`perckit.rle.to_rle` accepts as a validated compressed RLE with str counts."""
    return rle_ops.to_rle(mask, where=where)


def prediction_rle(mask: Any, where: str, size: Sequence[int] | None = None, error: type[Exception] = PredictionError) -> rle_ops.RLE:
    """:func:`perckit.rle.to_rle` of a predicted mask (``size`` checked when given), its :class:`RLEError` raised as
    ``error`` with the same message (a bad prediction is the user's input, not a bad release)."""
    try:
        return rle_ops.to_rle(mask, size=size, where=where)
    except RLEError as e:
        raise error(str(e)) from None


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


# ---------------------------------------------------------------- the mask-pair rules


def row_budget() -> rle_ops.PixelBudget:
    """The pixel budget of one prediction row (one answer): the pixels :func:`fit_prediction` may resize its
    masks to, :data:`perckit.rle.PIXEL_BUDGET` in all; past it a :class:`PredictionError` naming the mask."""
    return rle_ops.PixelBudget(unit="prediction row", error=PredictionError,
                               hint="predict the masks at the reference size, or resize them before scoring")


def resize_rule(value: str | None, nearest: str) -> str | None:
    """The metric option ``resize_predictions`` checked (:data:`RESIZE_MODES`) and resolved: None, or the rule to
    resize with, where ``"nearest"`` is ``nearest``, the rule the metric's card names."""
    check_choice(RESIZE_OPTION, value, RESIZE_MODES)
    return nearest if value == "nearest" else value


def fit_prediction(
    pred: rle_ops.RLE, size: Sequence[int], *, resize: str | None, where: str,
    target: str = "the ground-truth size", warn: bool = True, budget: rle_ops.PixelBudget | None = None,
) -> rle_ops.RLE:
    """The resize-on-mismatch rule: a validated predicted RLE at ``size`` ([H, W]).

    Same size: ``pred`` itself. Another size: with ``resize=None`` a :class:`PredictionError` naming
    ``where``, both sizes (``target`` says what the expected size is) and the option; with
    ``resize`` a rule (``"pil"`` or ``"opencv"``: :func:`perckit.rle.resize_nearest`) the prediction resized
    under it, and a warning logged when
    ``warn`` (a metric that warns once per query passes ``warn=False`` after the first). The resize
    charges ``budget`` (the prediction row's :func:`row_budget`, shared by every mask of the row; None: a
    budget of its own) with the target's H * W first: past it a :class:`PredictionError` naming ``where``.
    """
    want = [int(size[0]), int(size[1])]
    if pred["size"] == want:
        return pred
    if resize is None:
        raise PredictionError(
            f"{where}: predicted mask size {pred['size']} differs from {target} {want} "
            f"([H, W]; pass {RESIZE_OPTION}='nearest' to resize predictions)"
        )
    (budget if budget is not None else row_budget()).charge(want[0] * want[1], where)
    if warn:
        logger.warning("%s: resizing the predicted mask from %s to %s (nearest neighbour, %s rule)", where, pred["size"],
                       want, resize)
    return rle_ops.resize_nearest(pred, want, rule=resize)


def dense_pair_counts(pred: np.ndarray, gt: np.ndarray, where: str = "masks") -> MaskCounts:
    """Exact ``(I, U, |P|, |G|)`` of two boolean arrays of one shape: the dense counterpart of
    :func:`rle_pair_counts`, for masks that are not images (ReasonAVEdit's time-frequency audio masks and
    frame-activity vectors). Arrays of different shapes raise :class:`ValueError` naming ``where``."""
    p = np.asarray(pred, dtype=bool)
    g = np.asarray(gt, dtype=bool)
    if p.shape != g.shape:
        raise ValueError(f"{where}: the two masks differ in shape, {list(p.shape)} vs {list(g.shape)}")
    a_p = int(np.count_nonzero(p))
    a_g = int(np.count_nonzero(g))
    inter = int(np.count_nonzero(p & g)) if a_p and a_g else 0
    return MaskCounts(inter, a_p + a_g - inter, a_p, a_g)


def pair_counts(pred: Any, gt: Any, *, resize: str | None = None, where: str = "mask",
                budget: rle_ops.PixelBudget | None = None) -> tuple[int, int]:
    """Exact ``(I, U)`` of a predicted and a ground-truth mask in any accepted form, as Python ints.

    Both masks go through :func:`as_rle` first (validated: pycocotools loops forever on bad
    counts); the prediction then goes through :func:`fit_prediction` (the resize rule, charging
    ``budget``: None for a row of one mask) and the pair through :func:`rle_pair_counts`.
    """
    check_choice("resize", resize, (None, *rle_ops.RESIZE_RULES))
    p = as_rle(pred, f"{where}: predicted mask")
    g = as_rle(gt, f"{where}: ground-truth mask")
    p = fit_prediction(p, g["size"], resize=resize, where=where, budget=budget)
    counts = rle_pair_counts(p, g, where)
    return counts.intersection, counts.union


def iou_matrix(intersection: np.ndarray, union: np.ndarray, empty_union_iou: float = 1.0) -> np.ndarray:
    """:func:`pair_iou` of every cell of two count matrices, as float64 (the same value as the scalar rule)."""
    inter = np.asarray(intersection, dtype=np.int64)
    uni = np.asarray(union, dtype=np.int64)
    return np.where(uni > 0, inter / np.maximum(uni, 1), float(empty_union_iou))


def score_pair(pred: Any, gt: Any, *, resize: str | None = None, empty_union_iou: float = 1.0, where: str = "mask") -> PairScore:
    """Accumulate half: one mask pair's :class:`PairScore` (see :func:`pair_counts`)."""
    inter, uni = pair_counts(pred, gt, resize=resize, where=where)
    return PairScore(inter, uni, pair_iou(inter, uni, empty_union_iou))


def rle_count_matrix(preds: Sequence[rle_ops.RLE], gts: Sequence[rle_ops.RLE], where: str = "masks") -> tuple[np.ndarray, np.ndarray]:
    """``(I, U)`` int64 matrices of every (prediction, ground truth) pair of validated RLEs of one size.

    Row i = prediction i, column j = ground truth j. The areas are taken once per mask (batched), the
    intersection only for pairs where both masks have foreground (the fast path of a P×G pairing).
    """
    a_p = rle_ops.areas(list(preds)) if preds else []
    a_g = rle_ops.areas(list(gts)) if gts else []
    inter = np.zeros((len(a_p), len(a_g)), dtype=np.int64)
    for i, p in enumerate(preds):
        if not a_p[i]:
            continue
        for j, g in enumerate(gts):
            if a_g[j]:
                inter[i, j] = rle_ops.intersection_area(p, g, f"{where}: prediction {i} vs ground truth {j}")
    union = np.add.outer(np.asarray(a_p, dtype=np.int64), np.asarray(a_g, dtype=np.int64)) - inter
    return inter, union


# ---------------------------------------------------------------- reduce


def reduce_iou(scores: Sequence[PairScore], thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> dict:
    """Reduce half: the summary of any number of pair scores.

    - ``miou`` = (1/N) Σ IoU_i (:func:`perckit.core.stats.fmean`);
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
    precision = {k: sum(1 for s in scores if s.iou >= t) / n for t, k in zip(thresholds, keys)}
    return {"miou": fmean(s.iou for s in scores), "ciou": inter / uni if uni else 1.0, **precision, "num_examples": n}


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
    blocks = {name: reduce_iou(by[name], thresholds) for name in sorted(by)}
    return {name: {k: block[k] for k in keys} for name, block in blocks.items()}


def match_by_id(
    predictions: Sequence[Mapping], references: Sequence[Mapping], key: str, empty_hint: str = EMPTY_MASK_HINT
) -> list[tuple[Mapping, Mapping]]:
    """Pair every reference with the prediction of the same ``key`` (reference order), always strict.

    :func:`perckit.core.matching.pair_by_id` and its messages: a duplicate id on either side, a prediction
    id unknown to the references and a reference without a prediction raise :class:`PredictionError`
    naming a few of the ids (``empty_hint`` says what an empty prediction looks like).
    """
    return pair_by_id(predictions, references, key, strict=True, empty_hint=empty_hint)  # type: ignore[return-value]
