"""The seven M⁴Seg metrics (PRIMA's table) plus gIoU / cIoU, as accumulate / reduce halves.

Accumulate: :func:`sample_geometry` (:mod:`perckit.m4seg.geometry`) checks one (prediction, reference) pair and
computes its per-image IoU matrices and mask pairing (exact integer pixel counts from the one mask-pair core
:mod:`perckit.core.segmentation`); :func:`score_sample` adds the text-dependent values from precomputed embeddings.
Reduce: :func:`reduce_scores` averages with :func:`perckit.core.stats.fmean` over samples sorted by ``example_id``, so
evaluate's distributed mode (which gathers shards in process order) gives identical numbers.

Provenance: ``miou`` and ``recall`` follow GLaMM's GCG evaluator, applied per image; METEOR is GLaMM's
pipeline. ``ss``, ``siou``, ``i_ss`` and ``i_siou`` are **reconstructed** (the PRIMA evaluator was not
available): each lives in one function (:func:`semantic_similarity`, :func:`semantic_iou`,
:func:`image_semantic_similarity`, :func:`image_semantic_iou`, in :mod:`perckit.m4seg.semantic`) behind its option.

The pieces live by responsibility: :mod:`perckit.m4seg.options` (options and names),
:mod:`perckit.m4seg.pairing` (greedy / Hungarian pairing, the recall loop, text matching),
:mod:`perckit.m4seg.semantic` (the reconstructed definitions), :mod:`perckit.m4seg.geometry` (input checks and
P×G geometry); this module scores, reduces and matches, and re-exports their public names.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..core import segmentation as seg
from ..errors import check_options
from ..core.matching import pair_by_id
from ..core.stats import fmean
from . import text as textmod
# Re-exported (noqa: F401): every name this module had before the split stays importable from it.
from .geometry import PAIRING_EMPTY_UNION_IOU, ImageGeom, SampleGeom, sample_geometry, union_mask_counts
from .options import (
    EMPTY_UNION_IOU, EXTRA_RATES, GROUPS, I_MODES, MATCHINGS, MIOU_UNITS, RATE_KEYS, RECALL_ENCODERS, RESIZE_MODES,
    SEVEN, SS_LEVELS, TEXT_METRICS, M4SegOptions,
)
from .pairing import greedy_pairs, greedy_text_matches, hungarian_pairs, linear_assignment, pair_masks, recall_true_positives
from .semantic import ImageText, image_semantic_iou, image_semantic_similarity, semantic_iou, semantic_similarity

#: The empty-prediction hint of a missing ``example_id`` (see :func:`perckit.core.matching.missing_ids_message`).
EMPTY_PREDICTION_HINT = "answer='' and groundings=[] mean no output"


# ---------------------------------------------------------------- accumulate


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
        miou=(fmean(recorded) if recorded else 0.0) if n_gt else None,
        miou_strict=fmean(recorded, n_gt) if n_gt else None,
        pred_text=geom.pred_text, gt_text=geom.gt_text,
    )
    for im in geom.images:
        if im.gt:
            rec = [iou for _, _, iou in im.pairs]
            s.miou_images.append(fmean(rec) if rec else 0.0)
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


def group_block(scores: Sequence[SampleScore], options: M4SegOptions, meteor: Any = None, available: Mapping[str, bool] | None = None) -> dict:
    """The metrics over a set of samples (recall micro, METEOR corpus-level within the set)."""
    available = available or {}
    with_gt = [s for s in scores if s.num_gt > 0]
    out: dict[str, Any] = {}
    if options.miou_unit == "image":
        out["miou"] = fmean([v for s in with_gt for v in s.miou_images])
    else:
        out["miou"] = fmean([s.miou for s in with_gt])
    n_gt = sum(s.num_gt for s in scores)
    out["recall"] = (sum(s.recall_tp for s in with_gt) / n_gt if n_gt else None) if available.get("recall", True) else None
    out["i_ss"] = fmean([s.i_ss for s in with_gt]) if available.get("i_ss", True) else None
    out["i_siou"] = fmean([s.i_siou for s in scores]) if available.get("i_siou", True) else None
    out["ss"] = fmean([s.ss for s in scores]) if available.get("ss", True) else None
    out["siou"] = fmean([s.siou for s in scores]) if available.get("siou", True) else None
    out["meteor"] = meteor.corpus([s.example_id for s in scores]) if meteor is not None and available.get("meteor", True) else None
    pooled = seg.reduce_iou([seg.PairScore(s.inter, s.union, s.giou) for s in with_gt], thresholds=())
    out["giou"], out["ciou"] = pooled["miou"], pooled["ciou"]
    out["miou_strict"] = fmean([s.miou_strict for s in with_gt])
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
    """Pair predictions with references by ``example_id`` (reference order): :func:`perckit.core.matching.pair_by_id`.

    Duplicate ids on either side and a prediction whose id is unknown to the references raise. A reference
    without a prediction raises when ``strict``, else it is paired with ``None`` (scored as an empty prediction).
    """
    return pair_by_id(predictions, references, "example_id", strict=strict, empty_hint=EMPTY_PREDICTION_HINT, lax_option="strict=False")


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
    """Score predictions against reference rows (see the ``metrics/m4seg`` card): pair them, compute each pair's
    geometry (:func:`sample_geometry`, the per-sample half) and reduce them (:func:`reduce_geometries`)."""
    check_options("m4seg", options, M4SegOptions.__dataclass_fields__)
    opts = M4SegOptions(**options)
    pairs = match_by_example_id(predictions, references, opts.strict)
    geoms = [sample_geometry(p, r, opts) for p, r in pairs]
    return reduce_geometries(geoms, opts, sum(1 for p, _ in pairs if p is None))


def reduce_geometries(geoms: Sequence[SampleGeom], opts: M4SegOptions, num_missing_predictions: int = 0) -> dict:
    """The reduce half of :func:`compute` over the samples' geometries (:func:`sample_geometry`, in any order):
    embed every distinct text of all samples in one sorted call per encoder, score each sample
    (:func:`score_sample`), build the corpus-level METEOR of all samples and reduce (:func:`reduce_scores`).
    Texts are embedded and samples reduced in sorted order, so any order of ``geoms`` gives the same numbers.
    ``num_missing_predictions``: how many of them were scored as an empty prediction (lax mode)."""
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
        out["num_missing_predictions"] = num_missing_predictions
        return out
    finally:
        if meteor is not None:
            meteor.close()



__all__ = [
    "M4SegOptions", "SampleScore", "compute", "greedy_pairs", "hungarian_pairs", "image_semantic_iou",
    "image_semantic_similarity", "linear_assignment", "recall_true_positives", "reduce_geometries", "reduce_scores", "sample_geometry",
    "score_sample", "semantic_iou", "semantic_similarity",
]
