"""The geometry half of ``metrics/m4seg``'s accumulate step: checking one (prediction, reference) pair and
computing each image's P×G IoU matrix, its mask pairing and its gIoU / cIoU counts.

Every pixel count comes from the one mask-pair core :mod:`perckit.core.segmentation`: the P×G matrix is
:func:`~perckit.core.segmentation.rle_count_matrix` (IoU by :func:`~perckit.core.segmentation.iou_matrix`), a
prediction of another size than its image goes through :func:`~perckit.core.segmentation.fit_prediction` (option
``resize_predictions``), and the per-image union counts through :func:`~perckit.rle.rle_pair_counts`.

The mask pairing of an image (option ``matching``) is GLaMM's greedy pairing (:func:`greedy_pairs`) or the Hungarian
alternative (:func:`hungarian_pairs`); both are deterministic, ties going to the first cell in row-major order."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Sequence

import numpy as np

from ... import rle as rle_ops
from ...core import segmentation as seg
from ...errors import PredictionError, short_repr as _short
from ...io.jsonio import parse_int
from .codes import clean_prediction_text, display_name, resolve_answer
from .options import M4SegOptions

#: IoU of a (prediction, GT) cell of the P×G matrix whose union is empty: 0, GLaMM's rule (such a pair has no
#: common pixel and is never paired). Not ``empty_union_iou``: the pairing keeps only pairs with IoU > 0.
PAIRING_EMPTY_UNION_IOU = 0.0


@dataclass
class ImageGeom:
    """One image of one sample: prediction and GT indices, IoU matrix P x G and the mIoU pairing."""

    k: int
    pred: list[int]
    gt: list[int]
    iou: np.ndarray
    pairs: list[tuple[int, int, float]]
    inter: int = 0
    union: int = 0


@dataclass
class SampleGeom:
    example_id: str
    type: str
    dataset_name: str
    granularity: str
    pred_text: str
    gt_text: str
    pred_names: list[str]
    gt_names: list[str]
    images: list[ImageGeom]


# ---------------------------------------------------------------- mask pairing (option ``matching``)


def greedy_pairs(iou: np.ndarray) -> list[tuple[int, int, float]]:
    """GLaMM's mIoU pairing: repeatedly take the global maximum while it is > 0 (first in row-major order on
    ties), record it and delete its row and column. Returns (row, col, IoU)."""
    m = np.array(iou, dtype=np.float64)
    out = []
    while m.size and m.max() > 0:
        i, j = np.unravel_index(int(np.argmax(m)), m.shape)
        out.append((int(i), int(j), float(iou[i, j])))
        m[i, :] = m[:, j] = -1.0
    return out


def linear_assignment(cost: np.ndarray) -> list[tuple[int, int]]:
    """Minimum-cost one-to-one assignment of a rectangular matrix (Hungarian algorithm with potentials).

    Assigns min(rows, cols) pairs; returns (row, col) sorted by row. Pure numpy: scipy is not a dependency."""
    c = np.asarray(cost, dtype=np.float64)
    if c.size == 0:
        return []
    transposed = c.shape[0] > c.shape[1]
    a = c.T if transposed else c
    n, m = a.shape
    u = np.zeros(n + 1)
    v = np.zeros(m + 1)
    p = np.zeros(m + 1, dtype=np.int64)  # p[j]: row (1-based) assigned to column j
    way = np.zeros(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = p[j0]
            free = ~used[1:]
            cur = a[i0 - 1] - u[i0] - v[1:]
            better = free & (cur < minv[1:])
            minv[1:][better] = cur[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            u[p[used]] += delta
            v[used] -= delta
            minv[~used] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    pairs = [(int(p[j]) - 1, j - 1) for j in range(1, m + 1) if p[j]]
    if transposed:
        pairs = [(b, a_) for a_, b in pairs]
    return sorted(pairs)


def hungarian_pairs(iou: np.ndarray) -> list[tuple[int, int, float]]:
    """Linear assignment on -IoU, keeping the pairs with IoU > 0 (option ``matching="hungarian"``)."""
    iou = np.asarray(iou, dtype=np.float64)
    return [(i, j, float(iou[i, j])) for i, j in linear_assignment(-iou) if iou[i, j] > 0]


def pair_masks(iou: np.ndarray, matching: str = "greedy") -> list[tuple[int, int, float]]:
    """The mask pairing of one image (prediction row, GT column, IoU)."""
    return hungarian_pairs(iou) if matching == "hungarian" else greedy_pairs(iou)


# ---------------------------------------------------------------- one sample's geometry


def _list(value: Any, where: str, what: str) -> list:
    """``value`` as a list (None: empty); anything else raises naming ``where``."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise PredictionError(f"{where}: expected a list of {what}, found {_short(value)}")
    return list(value)


def _text(value: Any, where: str) -> str:
    """A str field (None: ""); anything else raises naming ``where``."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PredictionError(f"{where}: expected a string, found {_short(value)}")
    return value


def union_mask_counts(pred_masks: Sequence[rle_ops.RLE], gt_masks: Sequence[rle_ops.RLE], size: Sequence[int], where: str) -> tuple[int, int]:
    """gIoU / cIoU counts of one image: ``(|∪P_k ∩ ∪G_k|, |∪P_k ∪ ∪G_k|)`` as Python ints.

    Every image of a sample counts, whichever side is empty: an image with predictions only adds their union to the
    union (a false mask in an image without GT is penalised), one with GT only adds the GT union, one with neither
    adds (0, 0). The pair counts are :func:`perckit.rle.rle_pair_counts` (the union masks are
    pycocotools' output, already valid), the mask-pair code every metric uses."""
    if not pred_masks and not gt_masks:
        return 0, 0
    up = rle_ops.union(list(pred_masks), size=size, where=f"{where}: predicted masks")
    ug = rle_ops.union(list(gt_masks), size=size, where=f"{where}: ground-truth masks")
    counts = rle_ops.rle_pair_counts(up, ug, where)
    return counts.intersection, counts.union


def _grounding_image(g: Any, where: str, n: int, fields: str, about_n: str) -> int:
    """The checked 1-based ``image_index`` of one grounding (a reference's or a prediction's) of a sample with
    ``n`` images; ``fields`` names what a grounding holds and ``about_n`` explains the range in the message."""
    if not isinstance(g, Mapping):
        raise PredictionError(f"{where}: expected {fields}, found {_short(g)}")
    k = parse_int(g.get("image_index"), f"{where}.image_index", PredictionError)
    if not 1 <= k <= n:
        raise PredictionError(f"{where}.image_index: expected 1..{n} ({about_n}), found {k}")
    return k


def sample_geometry(prediction: Mapping, reference: Mapping, options: M4SegOptions = M4SegOptions()) -> SampleGeom:
    """Check one pair and compute its per-image IoU matrices and mask pairing (exact integer pixel counts)."""
    eid = str(reference["example_id"])
    rw = f"reference {eid!r}"
    pw = f"prediction {eid!r}"
    prediction = {} if prediction is None else prediction
    if not isinstance(prediction, Mapping):
        raise PredictionError(f"{pw}: expected a dict {{example_id, answer, groundings}}, found {_short(prediction)}")
    images = _list(reference.get("images"), f"{rw}: images", "{height, width}")
    if not images:
        raise PredictionError(f"{rw}: images: expected at least one {{height, width}}, found none")
    sizes = []
    for k, im in enumerate(images):
        if not isinstance(im, Mapping):
            raise PredictionError(f"{rw}: images[{k}]: expected {{height, width}}, found {_short(im)}")
        h = parse_int(im.get("height"), f"{rw}: images[{k}].height", PredictionError)
        w = parse_int(im.get("width"), f"{rw}: images[{k}].width", PredictionError)
        if h <= 0 or w <= 0 or h * w > rle_ops.MAX_PIXELS:
            raise PredictionError(
                f"{rw}: images[{k}]: expected a positive height and width of at most {rle_ops.MAX_PIXELS} pixels "
                f"(a mask that size is decoded when resizing), found [H, W] = {[h, w]}"
            )
        sizes.append([h, w])
    n = len(sizes)
    answer = _text(reference.get("a"), f"{rw}: a")
    gts = []
    ref_groundings = _list(reference.get("groundings"), f"{rw}: groundings", "{image_index, name, answer_span, segmentation}")
    for j, g in enumerate(ref_groundings):
        gw = f"{rw}: groundings[{j}]"
        k = _grounding_image(g, gw, n, "{image_index, name, answer_span, segmentation}", f"1-based, {n} image(s)")
        span = g.get("answer_span")
        if span is not None:
            if not isinstance(span, (list, tuple)) or len(span) != 2:
                raise PredictionError(f"{gw}.answer_span: expected [start, end) (2 ints), found {_short(span)}")
            s = parse_int(span[0], f"{gw}.answer_span[0]", PredictionError)
            e = parse_int(span[1], f"{gw}.answer_span[1]", PredictionError)
            if not 0 <= s <= e <= len(answer):
                raise PredictionError(f"{gw}.answer_span: expected 0 <= start <= end <= {len(answer)} (the answer's length), found {[s, e]}")
        name = _text(g.get("name"), f"{gw}.name")
        mask = seg.prediction_rle(g.get("segmentation"), f"{gw}.segmentation")
        if mask["size"] != sizes[k - 1]:
            raise PredictionError(f"{gw}.segmentation: expected the size of image {k}, [H, W] = {sizes[k - 1]}, found {mask['size']}")
        gts.append((k, name, mask))
    preds = []
    warned = False
    budget = seg.row_budget()  # the pixels this sample's predicted masks may be resized to
    pred_answer = _text(prediction.get("a"), f"{pw}: a")
    for j, g in enumerate(_list(prediction.get("groundings"), f"{pw}: groundings", "{image_index, name, segmentation}")):
        gw = f"{pw}: groundings[{j}]"
        k = _grounding_image(g, gw, n, "{image_index, name, segmentation}", f"the reference has {n} image(s)")
        name = _text(g.get("name"), f"{gw}.name")
        mask = seg.prediction_rle(g.get("segmentation"), f"{gw}.segmentation")
        if mask["size"] != sizes[k - 1]:
            # the resize rule (one warning per sample)
            mask = seg.fit_prediction(mask, sizes[k - 1], resize=options.resize_predictions, where=f"{gw}.segmentation",
                                      target=f"the size of image {k}", warn=not warned, budget=budget)
            warned = True
        preds.append((k, name, mask))
    geoms = []
    for k in range(1, n + 1):
        pi = [i for i, p in enumerate(preds) if p[0] == k]
        gi = [i for i, g in enumerate(gts) if g[0] == k]
        pm, gm = [preds[i][2] for i in pi], [gts[j][2] for j in gi]
        iou = seg.iou_matrix(*seg.rle_count_matrix(pm, gm, f"{rw}: image {k}"), PAIRING_EMPTY_UNION_IOU)
        pairs = pair_masks(iou, options.matching) if pi and gi else []
        geoms.append(ImageGeom(k, pi, gi, iou, pairs, *union_mask_counts(pm, gm, sizes[k - 1], f"{rw}: image {k}")))
    return SampleGeom(
        example_id=eid,
        type=str(reference.get("type") or ""),
        dataset_name=str(reference.get("dataset_name") or ""),
        granularity=str(reference.get("granularity") or ""),
        pred_text=clean_prediction_text(pred_answer),
        gt_text=resolve_answer(answer, ref_groundings, options.resolved_name_style),
        pred_names=[display_name(p[1]) for p in preds],
        gt_names=[display_name(g[1]) for g in gts],
        images=geoms,
    )
