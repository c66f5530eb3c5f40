"""The seven M⁴Seg metrics (PRIMA's table) plus gIoU / cIoU, as accumulate / reduce halves.

Accumulate: :func:`sample_geometry` checks one (prediction, reference) pair and computes its per-image IoU
matrices and mask pairing (exact integer pixel counts in the RLE domain); :func:`score_sample` adds the
text-dependent values from precomputed embeddings. Reduce: :func:`reduce_scores` averages with
``math.fsum`` over samples sorted by ``example_id``, so evaluate's distributed mode (which gathers shards
in process order) gives identical numbers.

Provenance: ``miou`` and ``recall`` follow GLaMM's GCG evaluator, applied per image; METEOR is GLaMM's
pipeline. ``ss``, ``siou``, ``i_ss`` and ``i_siou`` are **reconstructed** (the PRIMA evaluator was not
available): each lives in one function (:func:`semantic_similarity`, :func:`semantic_iou`,
:func:`image_semantic_similarity`, :func:`image_semantic_iou`) behind its option.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping, Sequence

import numpy as np

from .. import rle as rle_ops
from .. import segmentation as seg
from ..errors import OptionError, PredictionError, RLEError, check_choice, check_option_type, check_options
from ..errors import short_repr as _short
from ..jsonio import parse_int
from ..matching import index_by_id
from . import text as textmod
from .codes import NAME_STYLES, display_name, resolve_answer
from .io import clean_prediction_text

logger = logging.getLogger(__name__)

SEVEN = ("miou", "recall", "i_ss", "i_siou", "ss", "siou", "meteor")
EXTRA_RATES = ("giou", "ciou", "miou_strict")
RATE_KEYS = SEVEN + EXTRA_RATES
TEXT_METRICS = ("recall", "ss", "siou", "i_ss", "i_siou")
MIOU_UNITS = ("sample", "image")
MATCHINGS = ("greedy", "hungarian")
RECALL_ENCODERS = ("minilm", "bert-base-uncased-meanpool")
SS_LEVELS = ("answer", "phrase")
I_MODES = ("image", "mask")
RESIZE_MODES = (None, "nearest")
#: gIoU of a sample, and cIoU of a set, whose pooled union is empty (GT masks all empty, no predicted pixel):
#: 1.0, the rule of ``refer_iou`` (``perckit.segmentation.pair_iou`` / ``reduce_iou``): nothing to find, nothing found.
EMPTY_UNION_IOU = 1.0
GROUPS = {"per_question_type": "question_type", "per_dataset_name": "dataset_name", "per_granularity": "granularity"}


@dataclass(frozen=True)
class M4SegOptions:
    """Keyword options of ``compute`` (see the metric card)."""

    as_percent: bool = False
    miou_unit: str = "sample"
    matching: str = "greedy"
    recall_iou_threshold: float = 0.5
    recall_text_threshold: float = 0.5
    recall_text_encoder: str = "minilm"
    ss_level: str = "answer"
    siou_threshold: float = 0.5
    siou_soft: bool = False
    i_mode: str = "image"
    resolved_name_style: str = "name"
    resize_predictions: str | None = None
    #: callable ``list[str] -> [n, d]`` or a registered name ("minilm", "stub"); None = MiniLM
    embed_fn: Any = None
    #: encoder of ``recall`` only (callable or name); None = per ``recall_text_encoder``
    recall_embed_fn: Any = None
    #: callable ``(candidates, references) -> corpus METEOR``; None = pycocoevalcap + Java
    meteor_fn: Any = None
    text_model_path: str | None = None
    bert_model_path: str | None = None
    skip_unavailable: bool = False
    #: which of the seven to compute (None = all); the others are None and listed in ``skipped``
    metrics: tuple | None = None
    per_sample: bool = True
    #: a reference without a prediction raises (True, the spec's rule) or is scored as an empty prediction
    #: (``answer=""``, ``groundings=[]``) and counted in ``num_missing_predictions`` (False)
    strict: bool = True

    def __post_init__(self) -> None:
        check_choice("miou_unit", self.miou_unit, MIOU_UNITS)
        check_choice("matching", self.matching, MATCHINGS)
        check_choice("recall_text_encoder", self.recall_text_encoder, RECALL_ENCODERS)
        check_choice("ss_level", self.ss_level, SS_LEVELS)
        check_choice("i_mode", self.i_mode, I_MODES)
        check_choice("resolved_name_style", self.resolved_name_style, NAME_STYLES)
        check_choice("resize_predictions", self.resize_predictions, RESIZE_MODES)
        for name in ("recall_iou_threshold", "recall_text_threshold", "siou_threshold"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not -1.0 <= float(v) <= 1.0:
                raise OptionError(f"option {name!r}: expected a number in [-1, 1], got {v!r}")
        for name in ("as_percent", "siou_soft", "skip_unavailable", "per_sample", "strict"):
            if not isinstance(getattr(self, name), bool):
                raise OptionError(f"option {name!r}: expected True or False, got {getattr(self, name)!r}")
        for name in ("embed_fn", "recall_embed_fn"):
            v = getattr(self, name)
            if v is not None and not callable(v) and v not in textmod.ENCODERS:
                raise OptionError(f"option {name!r}: expected a callable or one of {list(textmod.ENCODERS)}, got {v!r}")
        for name in ("text_model_path", "bert_model_path"):
            check_option_type(name, getattr(self, name), "path | None")
        if self.meteor_fn is not None and not callable(self.meteor_fn):
            raise OptionError(f"option 'meteor_fn': expected a callable, got {self.meteor_fn!r}")
        if self.metrics is not None:
            if not isinstance(self.metrics, (str, list, tuple)):
                raise OptionError(f"option 'metrics': expected a list of some of {list(SEVEN)}, got {_short(self.metrics)}")
            ms = (self.metrics,) if isinstance(self.metrics, str) else tuple(self.metrics)
            for m in ms:
                check_choice("metrics", m, SEVEN)
            object.__setattr__(self, "metrics", ms)

    def wants(self, metric: str) -> bool:
        return self.metrics is None or metric in self.metrics

    def summary(self) -> dict:
        """The options as plain values (callables by name; never copied: an encoder may hold a model)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if callable(v):
                v = getattr(v, "__name__", type(v).__name__)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out


# ---------------------------------------------------------------- matching


def greedy_pairs(iou: np.ndarray) -> list[tuple[int, int, float]]:
    """GLaMM's mIoU pairing: repeatedly take the global maximum while it is > 0 (first in row-major order on
    ties), record it and delete its row and column. Returns (row, col, IoU)."""
    m = np.array(iou, dtype=np.float64)
    out = []
    while m.size and m.max() > 0:
        i, j = np.unravel_index(int(np.argmax(m)), m.shape)
        out.append((int(i), int(j), float(iou[i, j])))
        m[i, :] = -1.0
        m[:, j] = -1.0
    return out


def linear_assignment(cost: np.ndarray) -> list[tuple[int, int]]:
    """Minimum-cost one-to-one assignment of a rectangular matrix (Hungarian algorithm with potentials).

    Assigns min(rows, cols) pairs; returns (row, col) sorted by row. Pure numpy: scipy is not a dependency.
    """
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


def recall_true_positives(iou_gp: np.ndarray, text_gp: np.ndarray, iou_threshold: float = 0.5, text_threshold: float = 0.5) -> int:
    """GLaMM's recall loop on one image (G x P matrices): take the global max IoU; if it is below the IoU
    threshold **or** its text similarity is below the text threshold, stop (lower pairs are never tried);
    otherwise count a TP and zero that row and column."""
    ious = np.array(iou_gp, dtype=np.float64)
    sims = np.array(text_gp, dtype=np.float64)
    tp = 0
    while ious.size > 0:
        i, j = np.unravel_index(int(np.argmax(ious)), ious.shape)
        if ious[i, j] < iou_threshold or sims[i, j] < text_threshold:
            break
        tp += 1
        ious[i, :] = 0
        ious[:, j] = 0
        sims[i, :] = 0
        sims[:, j] = 0
    return tp


def greedy_text_matches(cos: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """Greedy one-to-one matching on cosine: take the global max while it is >= threshold (row-major ties)."""
    m = np.array(cos, dtype=np.float64)
    out = []
    while m.size:
        i, j = np.unravel_index(int(np.argmax(m)), m.shape)
        if not m[i, j] >= threshold:
            break
        out.append((int(i), int(j), float(m[i, j])))
        m[i, :] = -np.inf
        m[:, j] = -np.inf
    return out


# ---------------------------------------------------------------- the reconstructed definitions [recon]


def semantic_similarity(pred_answer: np.ndarray, gt_answer: np.ndarray, cos_pg: np.ndarray, n_gt: int, level: str = "answer") -> float:
    """[recon] SS of one sample. ``level="answer"``: cos(clean predicted answer, resolved GT answer).
    ``level="phrase"``: mean over GT groundings of the best cos against any predicted name (0 without
    predictions; a sample with no GT grounding scores 1 when it has no prediction either, else 0)."""
    if level == "answer":
        return float(np.dot(pred_answer, gt_answer))
    if n_gt == 0:
        return 1.0 if cos_pg.shape[0] == 0 else 0.0
    if cos_pg.shape[0] == 0:
        return 0.0
    return math.fsum(float(x) for x in cos_pg.max(axis=0)) / n_gt


def semantic_iou(cos_pg: np.ndarray, threshold: float = 0.5, soft: bool = False) -> float:
    """[recon] SIoU of one sample over its name lists P and G (images ignored): greedy one-to-one matching on
    cos (global max while >= threshold); M = number of matches (``soft``: sum of matched cosines);
    SIoU = M / (|P| + |G| - M). Both empty gives 1, exactly one empty gives 0."""
    n_p, n_g = cos_pg.shape
    if n_p == 0 and n_g == 0:
        return 1.0
    if n_p == 0 or n_g == 0:
        return 0.0
    matches = greedy_text_matches(cos_pg, threshold)
    m = math.fsum(c for _, _, c in matches) if soft else float(len(matches))
    den = n_p + n_g - m
    return m / den if den > 0 else 1.0


def image_semantic_similarity(per_image: Sequence["ImageText"], n_gt: int, mode: str = "image") -> float | None:
    """[recon] I-SS of one sample: for each GT grounding g of image k, the best cos(name g, name p) over the
    predictions p of image k (0 when there is none); ``mode="mask"``: the cos with the prediction paired to g
    by the mIoU pairing (0 when g is unpaired). Mean over the sample's GT groundings; None without any."""
    if n_gt == 0:
        return None
    vals: list[float] = []
    for im in per_image:
        n_p, n_g = im.cos_pg.shape
        if n_g == 0:
            continue
        if mode == "mask":
            paired = {g: p for p, g, _ in im.pairs}
            vals.extend(float(im.cos_pg[paired[g], g]) if g in paired else 0.0 for g in range(n_g))
        elif n_p == 0:
            vals.extend([0.0] * n_g)
        else:
            vals.extend(float(x) for x in im.cos_pg.max(axis=0))
    return math.fsum(vals) / n_gt


def image_semantic_iou(per_image: Sequence["ImageText"], threshold: float = 0.5, soft: bool = False, mode: str = "image") -> float:
    """[recon] I-SIoU of one sample: sum_k M_k / sum_k (|P_k| + |G_k| - M_k), M_k the SIoU matching inside
    image k (``soft``: sum of matched cosines); 1 when the denominator is 0. ``mode="mask"``: a match also
    requires the pair to be mask-paired by the mIoU pairing."""
    num, den = [], []
    for im in per_image:
        n_p, n_g = im.cos_pg.shape
        cos = im.cos_pg
        if mode == "mask":
            allowed = np.full(cos.shape, -np.inf)
            for p, g, _ in im.pairs:
                allowed[p, g] = cos[p, g]
            cos = allowed
        matches = greedy_text_matches(cos, threshold) if n_p and n_g else []
        m = math.fsum(c for _, _, c in matches) if soft else float(len(matches))
        num.append(m)
        den.append(n_p + n_g - m)
    d = math.fsum(den)
    return math.fsum(num) / d if d > 0 else 1.0


# ---------------------------------------------------------------- accumulate


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
class ImageText:
    cos_pg: np.ndarray
    pairs: list[tuple[int, int, float]]


@dataclass
class SampleGeom:
    example_id: str
    question_type: str
    dataset_name: str
    granularity: str
    pred_text: str
    gt_text: str
    pred_names: list[str]
    gt_names: list[str]
    images: list[ImageGeom]


@dataclass
class SampleScore:
    """The per-sample record (the accumulate half's output)."""

    example_id: str
    question_type: str
    dataset_name: str
    granularity: str
    num_gt: int
    num_pred: int
    miou: float | None
    miou_strict: float | None
    miou_images: list[float] = field(default_factory=list)
    recall_tp: int | None = None
    ss: float | None = None
    siou: float | None = None
    i_ss: float | None = None
    i_siou: float | None = None
    giou: float | None = None
    inter: int = 0
    union: int = 0
    pred_text: str = ""
    gt_text: str = ""

    def as_row(self) -> dict:
        row = asdict(self)
        row.pop("miou_images")
        return row


def _mask(obj: Any, size: list[int], where: str, error: type[Exception] = PredictionError) -> rle_ops.RLE:
    try:
        return rle_ops.to_rle(obj, where=where)
    except RLEError as e:
        raise error(str(e)) from None


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

    Every image of a sample counts, whichever side is empty: an image with predictions only adds their union
    to the union (a false mask in an image without GT is penalised), one with GT only adds the GT union, one
    with neither adds (0, 0). The pair counts are :func:`perckit.segmentation.pair_counts`, the mask-pair code
    ``refer_iou`` uses.
    """
    if not pred_masks and not gt_masks:
        return 0, 0
    up = rle_ops.union(list(pred_masks), size=size, where=f"{where}: predicted masks")
    ug = rle_ops.union(list(gt_masks), size=size, where=f"{where}: ground-truth masks")
    return seg.pair_counts(up, ug, where=where)


def sample_geometry(prediction: Mapping, reference: Mapping, options: M4SegOptions = M4SegOptions()) -> SampleGeom:
    """Check one pair and compute its per-image IoU matrices and mask pairing (exact integer pixel counts)."""
    eid = str(reference["example_id"])
    rw = f"reference {eid!r}"
    pw = f"prediction {eid!r}"
    if prediction is None:
        prediction = {}
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
    answer = _text(reference.get("answer"), f"{rw}: answer")
    gts = []
    ref_groundings = _list(reference.get("groundings"), f"{rw}: groundings", "{image_index, name, answer_span, mask}")
    for j, g in enumerate(ref_groundings):
        gw = f"{rw}: groundings[{j}]"
        if not isinstance(g, Mapping):
            raise PredictionError(f"{gw}: expected {{image_index, name, answer_span, mask}}, found {_short(g)}")
        k = parse_int(g.get("image_index"), f"{gw}.image_index", PredictionError)
        if not 1 <= k <= n:
            raise PredictionError(f"{gw}.image_index: expected 1..{n} (1-based, {n} image(s)), found {k}")
        span = g.get("answer_span")
        if span is not None:
            if not isinstance(span, (list, tuple)) or len(span) != 2:
                raise PredictionError(f"{gw}.answer_span: expected [start, end) (2 ints), found {_short(span)}")
            s = parse_int(span[0], f"{gw}.answer_span[0]", PredictionError)
            e = parse_int(span[1], f"{gw}.answer_span[1]", PredictionError)
            if not 0 <= s <= e <= len(answer):
                raise PredictionError(f"{gw}.answer_span: expected 0 <= start <= end <= {len(answer)} (the answer's length), found {[s, e]}")
        name = _text(g.get("name"), f"{gw}.name")
        mask = _mask(g.get("mask"), sizes[k - 1], f"{gw}.mask")
        if mask["size"] != sizes[k - 1]:
            raise PredictionError(f"{gw}.mask: expected the size of image {k}, [H, W] = {sizes[k - 1]}, found {mask['size']}")
        gts.append((k, name, mask))
    preds = []
    warned = False
    pred_answer = _text(prediction.get("answer"), f"{pw}: answer")
    for j, g in enumerate(_list(prediction.get("groundings"), f"{pw}: groundings", "{image_index, name, mask}")):
        gw = f"{pw}: groundings[{j}]"
        if not isinstance(g, Mapping):
            raise PredictionError(f"{gw}: expected {{image_index, name, mask}}, found {_short(g)}")
        k = parse_int(g.get("image_index"), f"{gw}.image_index", PredictionError)
        if not 1 <= k <= n:
            raise PredictionError(f"{gw}.image_index: expected 1..{n} (the reference has {n} image(s)), found {k}")
        name = _text(g.get("name"), f"{gw}.name")
        mask = _mask(g.get("mask"), sizes[k - 1], f"{gw}.mask")
        if mask["size"] != sizes[k - 1]:
            if options.resize_predictions is None:
                raise PredictionError(
                    f"{gw}.mask: expected the size of image {k}, [H, W] = {sizes[k - 1]}, found {mask['size']} "
                    "(pass resize_predictions='nearest' to resize predictions)"
                )
            if not warned:
                logger.warning("m4seg: %s: resizing predicted masks to the image size (nearest)", pw)
                warned = True
            mask = rle_ops.resize_nearest(mask, sizes[k - 1])
        preds.append((k, name, mask))
    p_area = rle_ops.areas([m for _, _, m in preds]) if preds else []
    g_area = rle_ops.areas([m for _, _, m in gts]) if gts else []
    geoms = []
    for k in range(1, n + 1):
        pi = [i for i, p in enumerate(preds) if p[0] == k]
        gi = [i for i, g in enumerate(gts) if g[0] == k]
        iou = np.zeros((len(pi), len(gi)))
        for a, i in enumerate(pi):
            for b, j in enumerate(gi):
                if p_area[i] and g_area[j]:
                    inter = rle_ops.intersection_area(preds[i][2], gts[j][2])
                    uni = p_area[i] + g_area[j] - inter
                    iou[a, b] = inter / uni if uni else 0.0
        geom = ImageGeom(k, pi, gi, iou, pair_masks(iou, options.matching) if pi and gi else [])
        geom.inter, geom.union = union_mask_counts(
            [preds[i][2] for i in pi], [gts[j][2] for j in gi], sizes[k - 1], f"{rw}: image {k}"
        )
        geoms.append(geom)
    gt_text = resolve_answer(answer, ref_groundings, options.resolved_name_style)
    return SampleGeom(
        example_id=eid,
        question_type=str(reference.get("question_type") or ""),
        dataset_name=str(reference.get("dataset_name") or ""),
        granularity=str(reference.get("granularity") or ""),
        pred_text=clean_prediction_text(pred_answer),
        gt_text=gt_text,
        pred_names=[display_name(p[1]) for p in preds],
        gt_names=[display_name(g[1]) for g in gts],
        images=geoms,
    )


def _cos(vecs: Mapping[str, np.ndarray], rows: Sequence[str], cols: Sequence[str]) -> np.ndarray:
    if not rows or not cols:
        return np.zeros((len(rows), len(cols)))
    a = np.stack([vecs[t] for t in rows])
    b = np.stack([vecs[t] for t in cols])
    return a @ b.T


def score_sample(geom: SampleGeom, options: M4SegOptions, vecs: Mapping[str, np.ndarray] | None, recall_vecs: Mapping[str, np.ndarray] | None) -> SampleScore:
    """Accumulate half: one sample's record. ``vecs`` / ``recall_vecs``: text -> embedding (None: unavailable)."""
    n_gt = len(geom.gt_names)
    n_pred = len(geom.pred_names)
    recorded = [iou for im in geom.images for _, _, iou in im.pairs]
    s = SampleScore(
        example_id=geom.example_id, question_type=geom.question_type, dataset_name=geom.dataset_name,
        granularity=geom.granularity, num_gt=n_gt, num_pred=n_pred,
        miou=(math.fsum(recorded) / len(recorded) if recorded else 0.0) if n_gt else None,
        miou_strict=math.fsum(recorded) / n_gt if n_gt else None,
        pred_text=geom.pred_text, gt_text=geom.gt_text,
    )
    for im in geom.images:
        if im.gt:
            rec = [iou for _, _, iou in im.pairs]
            s.miou_images.append(math.fsum(rec) / len(rec) if rec else 0.0)
    inter = sum(im.inter for im in geom.images)
    union = sum(im.union for im in geom.images)
    s.inter, s.union = inter, union
    if n_gt:
        s.giou = seg.pair_iou(inter, union, EMPTY_UNION_IOU)
    if recall_vecs is not None and n_gt:
        tp = 0
        for im in geom.images:
            if im.gt and im.pred:
                text = _cos(recall_vecs, [geom.gt_names[j] for j in im.gt], [geom.pred_names[i] for i in im.pred])
                tp += recall_true_positives(im.iou.T, text, options.recall_iou_threshold, options.recall_text_threshold)
        s.recall_tp = tp
    if vecs is not None:
        cos_all = _cos(vecs, geom.pred_names, geom.gt_names)
        s.ss = semantic_similarity(vecs[geom.pred_text], vecs[geom.gt_text], cos_all, n_gt, options.ss_level)
        s.siou = semantic_iou(cos_all, options.siou_threshold, options.siou_soft)
        per_image = [
            ImageText(_cos(vecs, [geom.pred_names[i] for i in im.pred], [geom.gt_names[j] for j in im.gt]), im.pairs)
            for im in geom.images
        ]
        s.i_ss = image_semantic_similarity(per_image, n_gt, options.i_mode)
        s.i_siou = image_semantic_iou(per_image, options.siou_threshold, options.siou_soft, options.i_mode)
    return s


# ---------------------------------------------------------------- reduce


def _mean(values: Sequence[float]) -> float | None:
    """Mean with an exactly rounded sum: independent of the order of the samples."""
    return math.fsum(values) / len(values) if values else None


def group_block(scores: Sequence[SampleScore], options: M4SegOptions, meteor: Any = None, available: Mapping[str, bool] | None = None) -> dict:
    """The metrics over a set of samples (recall micro, METEOR corpus-level within the set)."""
    available = available or {}
    with_gt = [s for s in scores if s.num_gt > 0]
    out: dict[str, Any] = {}
    if options.miou_unit == "image":
        out["miou"] = _mean([v for s in with_gt for v in s.miou_images])
    else:
        out["miou"] = _mean([s.miou for s in with_gt])
    n_gt = sum(s.num_gt for s in scores)
    out["recall"] = (sum(s.recall_tp for s in with_gt) / n_gt if n_gt else None) if available.get("recall", True) else None
    out["i_ss"] = _mean([s.i_ss for s in with_gt]) if available.get("i_ss", True) else None
    out["i_siou"] = _mean([s.i_siou for s in scores]) if available.get("i_siou", True) else None
    out["ss"] = _mean([s.ss for s in scores]) if available.get("ss", True) else None
    out["siou"] = _mean([s.siou for s in scores]) if available.get("siou", True) else None
    out["meteor"] = meteor.corpus([s.example_id for s in scores]) if meteor is not None and available.get("meteor", True) else None
    pooled = seg.reduce_iou([seg.PairScore(s.inter, s.union, s.giou) for s in with_gt], thresholds=())
    out["giou"], out["ciou"] = pooled["miou"], pooled["ciou"]
    out["miou_strict"] = _mean([s.miou_strict for s in with_gt])
    if options.as_percent:
        for k in RATE_KEYS:
            if out[k] is not None:
                out[k] = 100.0 * out[k]
    for k in SEVEN:
        if not options.wants(k):
            out[k] = None
    out["num_samples"] = len(scores)
    out["num_samples_without_groundings"] = len(scores) - len(with_gt)
    out["num_gt_groundings"] = n_gt
    out["num_pred_groundings"] = sum(s.num_pred for s in scores)
    return out


def reduce_scores(scores: Sequence[SampleScore], options: M4SegOptions = M4SegOptions(), meteor: Any = None,
                  skipped: Mapping[str, str] | None = None) -> dict:
    """Reduce half: the dataset block, the three group breakdowns, ``skipped`` and the per-sample table."""
    scores = sorted(scores, key=lambda s: s.example_id)
    skipped = dict(skipped or {})
    available = {k: k not in skipped for k in SEVEN}
    out = group_block(scores, options, meteor, available)
    for name, attr in GROUPS.items():
        groups: dict[str, list[SampleScore]] = {}
        for s in scores:
            groups.setdefault(getattr(s, attr), []).append(s)
        out[name] = {k: group_block(v, options, meteor, available) for k, v in sorted(groups.items())}
    out["skipped"] = skipped
    out["options"] = options.summary()
    if options.per_sample:
        out["per_sample"] = [s.as_row() for s in scores]
    return out


# ---------------------------------------------------------------- matching predictions to references


def match_by_example_id(predictions: Sequence[Mapping], references: Sequence[Mapping], strict: bool = True) -> list[tuple[Mapping | None, Mapping]]:
    """Pair predictions with references by ``example_id`` (reference order).

    Duplicate ids on either side and a prediction whose id is unknown to the references raise. A reference
    without a prediction raises when ``strict``, else it is paired with ``None`` (scored as an empty prediction).
    """
    refs = index_by_id(references, "references", "example_id")
    preds = index_by_id(predictions, "predictions", "example_id")
    unknown = [i for i in preds if i not in refs]
    if unknown:
        raise PredictionError(f"predictions: example_id {unknown[0]!r} is unknown to the references ({len(unknown)} unknown id(s))")
    missing = [i for i in refs if i not in preds]
    if missing and strict:
        raise PredictionError(
            f"predictions: no prediction for {len(missing)} reference example_id(s), e.g. {missing[:5]}; give every "
            "reference a prediction (answer='' and groundings=[] mean no output) or pass strict=False to score "
            "missing predictions as empty"
        )
    return [(preds.get(i), r) for i, r in refs.items()]


def _texts(geoms: Sequence[SampleGeom], answers: bool = True) -> set[str]:
    out: set[str] = set()
    for g in geoms:
        out.update(g.pred_names)
        out.update(g.gt_names)
        if answers:
            out.add(g.pred_text)
            out.add(g.gt_text)
    return out


def _unavailable(options: M4SegOptions, exc: Exception, metrics: Sequence[str], skipped: dict[str, str]) -> None:
    if not options.skip_unavailable:
        raise exc
    for m in metrics:
        skipped.setdefault(m, str(exc))


def compute(predictions: Sequence[Mapping], references: Sequence[Mapping], **options: Any) -> dict:
    """Score predictions against reference rows (see the ``metrics/m4seg`` card)."""
    check_options("m4seg", options, M4SegOptions.__dataclass_fields__)
    opts = M4SegOptions(**options)
    pairs = match_by_example_id(predictions, references, opts.strict)
    geoms = [sample_geometry(p, r, opts) for p, r in pairs]
    skipped: dict[str, str] = {k: "not requested (option metrics)" for k in SEVEN if not opts.wants(k)}
    need_main = any(opts.wants(k) for k in ("ss", "siou", "i_ss", "i_siou"))
    vecs = recall_vecs = None
    if need_main:
        try:
            embed = textmod.resolve_embed_fn(opts.embed_fn, opts.text_model_path, opts.bert_model_path)
            vecs = textmod.embed_texts(embed, _texts(geoms), "embed_fn")
        except textmod.TextToolUnavailable as e:
            _unavailable(opts, e, [m for m in ("ss", "siou", "i_ss", "i_siou") if opts.wants(m)], skipped)
    if opts.wants("recall"):
        try:
            if opts.recall_embed_fn is not None:
                spec = opts.recall_embed_fn
            elif opts.recall_text_encoder == "bert-base-uncased-meanpool":
                spec = "bert-base-uncased-meanpool"
            else:
                spec = opts.embed_fn
            if vecs is not None and spec is opts.embed_fn:
                recall_vecs = vecs
            else:
                embed = textmod.resolve_embed_fn(spec, opts.text_model_path, opts.bert_model_path)
                option = "recall_embed_fn" if opts.recall_embed_fn is not None else "embed_fn"
                recall_vecs = textmod.embed_texts(embed, _texts(geoms, answers=False), option)
        except textmod.TextToolUnavailable as e:
            _unavailable(opts, e, ["recall"], skipped)
    scores = [score_sample(g, opts, vecs, recall_vecs) for g in geoms]
    meteor = None
    if opts.wants("meteor"):
        try:
            meteor = textmod.MeteorScorer({g.example_id: g.pred_text for g in geoms}, {g.example_id: g.gt_text for g in geoms}, opts.meteor_fn)
        except textmod.TextToolUnavailable as e:
            _unavailable(opts, e, ["meteor"], skipped)
    try:
        out = reduce_scores(scores, opts, meteor, skipped)
        out["num_missing_predictions"] = sum(1 for p, _ in pairs if p is None)
        return out
    finally:
        if meteor is not None:
            meteor.close()


__all__ = [
    "M4SegOptions", "SampleScore", "compute", "greedy_pairs", "hungarian_pairs", "image_semantic_iou",
    "image_semantic_similarity", "linear_assignment", "recall_true_positives", "reduce_scores", "sample_geometry",
    "score_sample", "semantic_iou", "semantic_similarity",
]
