"""The seven M⁴Seg metrics (PRIMA's table) plus gIoU / cIoU: their formulas, the per-sample score and the reduce.

Notation, per sample: P / G its predicted / ground-truth groundings (P_k / G_k: those of image k), IoU(p, g)
the exact pixel IoU of two masks of one image (0 when their union is empty), pairs_k the mask pairing of image
k (:func:`~perckit.m4seg.metric.geometry.pair_masks`: GLaMM's greedy pairing, repeatedly the largest IoU > 0 in
row-major order, its row and column removed; option ``matching="hungarian"``: the assignment maximising the
sum of IoU, pairs with IoU > 0 kept), cos(a, b) the dot product of two L2-normalised text embeddings, and
mean() the order-independent :func:`perckit.core.stats.fmean`.

- **mIoU** [GLaMM, per image] ``miou_unit="sample"``: per sample, mean of IoU over the pairs of all its
  images (0 without pairs); the dataset value is the mean over samples with |G| > 0. ``miou_unit="image"``:
  per image with G_k, the mean of IoU over pairs_k (0 without pairs), averaged over those images.
  **mIoU strict**: sum of the paired IoU / |G|, averaged over samples with |G| > 0.
- **Recall** [GLaMM's loop, per image] (:func:`recall_true_positives`): in image k, take the largest IoU(g, p); stop
  when it is below ``recall_iou_threshold`` **or** cos(name g, name p) is below ``recall_text_threshold``, else count
  a true positive and remove its row and column. Recall = sum of the true positives / sum of |G| (micro).
- **SS** [recon] (:func:`semantic_similarity`): ``ss_level="answer"``: cos(cleaned predicted answer, resolved
  GT answer); ``"phrase"``: mean over g of max_p cos(name p, name g) (0 without predictions; 1 when P and G
  are both empty, else 0 when G is). Mean over samples.
- **SIoU** [recon] (:func:`semantic_iou`): M = the number of greedy one-to-one matches of P and G on cos
  >= ``siou_threshold`` (:func:`greedy_text_matches`; ``siou_soft``: the sum of the matched cosines);
  SIoU = M / (|P| + |G| - M), 1 when both are empty, 0 when one is. Mean over samples.
- **I-SS** [recon] (:func:`image_semantic_similarity`): for each g of image k, max over p in P_k of
  cos(name p, name g) (0 when P_k is empty); ``i_mode="mask"``: cos with the p paired to g in pairs_k (0 when
  unpaired). Mean over G per sample, then over samples with |G| > 0.
- **I-SIoU** [recon] (:func:`image_semantic_iou`): sum_k M_k / sum_k (|P_k| + |G_k| - M_k), M_k the SIoU matching
  inside image k (``i_mode="mask"``: only mask-paired (p, g)); 1 when the denominator is 0. Mean over samples.
- **METEOR** [GLaMM]: pycocoevalcap's PTB tokenizer and METEOR 1.5, corpus-level over the cleaned predicted
  answers against the resolved GT answers (:mod:`perckit.m4seg.metric.text`).
- **gIoU** / **cIoU**: per sample I / U summed over its images, where per image I and U are the pixels of the
  union of its predicted masks against the union of its GT masks
  (:func:`~perckit.m4seg.metric.geometry.union_mask_counts`); gIoU = mean over samples of I / U, cIoU = sum I /
  sum U (an empty union counts 1.0, ``EMPTY_UNION_IOU``), over samples with |G| > 0.

The rates are in [0, 1] (x 100 with ``as_percent``). Provenance: ``miou`` and ``recall`` follow GLaMM's GCG
evaluator, applied per image; METEOR is GLaMM's pipeline. The four text metrics marked [recon] are
**reconstructed** (the PRIMA evaluator was not available): each lives in one function here, behind its option.

Per sample: :func:`~perckit.m4seg.metric.geometry.sample_geometry` checks one (prediction, reference) pair and
computes its per-image IoU matrices, mask pairings and union counts (exact integer pixel counts from the one
mask-pair core :mod:`perckit.core.segmentation`); :func:`score_sample` adds the text-dependent values from the
embeddings. Reduce: :func:`reduce_geometries` embeds every distinct text once and :func:`reduce_scores` averages
over samples sorted by ``example_id``, so any order of the samples (evaluate's distributed mode, an accumulator's
batches) gives identical numbers. :func:`compute` is both halves."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ... import rle as rle_ops
from ...core import segmentation as seg
from ...errors import make_options
from ...core.matching import pair_by_id
from ...core.stats import fmean
from . import text as textmod
from .geometry import SampleGeom, sample_geometry
from .options import EMPTY_UNION_IOU, GROUPS, RATE_KEYS, SEVEN, M4SegOptions

#: The empty-prediction hint of a missing ``example_id`` (see :func:`perckit.core.matching.missing_ids_message`).
EMPTY_PREDICTION_HINT = "a='' and groundings=[] mean no output"


# ---------------------------------------------------------------- the recall loop and the reconstructed text metrics


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
        ious[i, :] = ious[:, j] = 0
        sims[i, :] = sims[:, j] = 0
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
        m[i, :] = m[:, j] = -np.inf
    return out


@dataclass
class ImageText:
    """The text side of one image: cosine matrix P x G of its names and its mIoU pairing (prediction, GT, IoU)."""

    cos_pg: np.ndarray
    pairs: list[tuple[int, int, float]]


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
    return fmean((float(x) for x in cos_pg.max(axis=0)), n_gt)


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


def image_semantic_similarity(per_image: Sequence[ImageText], n_gt: int, mode: str = "image") -> float | None:
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
    return fmean(vals, n_gt)


def image_semantic_iou(per_image: Sequence[ImageText], threshold: float = 0.5, soft: bool = False, mode: str = "image") -> float:
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


# ---------------------------------------------------------------- one sample's score


@dataclass
class SampleScore:
    """The per-sample record (the accumulate half's output)."""

    example_id: str
    type: str
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


def _cos(vecs: Mapping[str, np.ndarray], rows: Sequence[str], cols: Sequence[str]) -> np.ndarray:
    if not rows or not cols:
        return np.zeros((len(rows), len(cols)))
    return np.stack([vecs[t] for t in rows]) @ np.stack([vecs[t] for t in cols]).T


def score_sample(geom: SampleGeom, options: M4SegOptions, vecs: Mapping[str, np.ndarray] | None, recall_vecs: Mapping[str, np.ndarray] | None) -> SampleScore:
    """Accumulate half: one sample's record. ``vecs`` / ``recall_vecs``: text -> embedding (None: unavailable)."""
    n_gt = len(geom.gt_names)
    n_pred = len(geom.pred_names)
    recorded = [iou for im in geom.images for _, _, iou in im.pairs]
    s = SampleScore(
        example_id=geom.example_id, type=geom.type, dataset_name=geom.dataset_name,
        granularity=geom.granularity, num_gt=n_gt, num_pred=n_pred,
        miou=(fmean(recorded) if recorded else 0.0) if n_gt else None,
        miou_strict=fmean(recorded, n_gt) if n_gt else None,
        pred_text=geom.pred_text, gt_text=geom.gt_text,
    )
    for im in geom.images:
        if im.gt:
            rec = [iou for _, _, iou in im.pairs]
            s.miou_images.append(fmean(rec) if rec else 0.0)
    s.inter = sum(im.inter for im in geom.images)
    s.union = sum(im.union for im in geom.images)
    if n_gt:
        s.giou = rle_ops.pair_iou(s.inter, s.union, EMPTY_UNION_IOU)
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
    per_image = options.miou_unit == "image"
    out["miou"] = fmean([v for s in with_gt for v in s.miou_images] if per_image else [s.miou for s in with_gt])
    n_gt = sum(s.num_gt for s in scores)
    out["recall"] = (sum(s.recall_tp for s in with_gt) / n_gt if n_gt else None) if available.get("recall", True) else None
    for k, samples in (("i_ss", with_gt), ("i_siou", scores), ("ss", scores), ("siou", scores)):
        out[k] = fmean([getattr(s, k) for s in samples]) if available.get(k, True) else None
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
        out["per_sample"] = [{k: v for k, v in asdict(s).items() if k != "miou_images"} for s in scores]
    return out


# ---------------------------------------------------------------- matching predictions to references


def match_by_example_id(predictions: Sequence[Mapping], references: Sequence[Mapping], strict: bool = True) -> list[tuple[Mapping | None, Mapping]]:
    """Pair predictions with references by ``example_id`` (reference order): :func:`perckit.core.matching.pair_by_id`.

    Duplicate ids on either side and a prediction whose id is unknown to the references raise. A reference without a
    prediction raises when ``strict``, else it is paired with ``None`` (scored as an empty prediction)."""
    return pair_by_id(predictions, references, "example_id", strict=strict, empty_hint=EMPTY_PREDICTION_HINT, lax_option="strict=False")


def _texts(geoms: Sequence[SampleGeom], answers: bool = True) -> set[str]:
    out: set[str] = set()
    for g in geoms:
        out.update(g.pred_names, g.gt_names)
        if answers:
            out.update((g.pred_text, g.gt_text))
    return out


def _unavailable(options: M4SegOptions, exc: Exception, metrics: Sequence[str], skipped: dict[str, str]) -> None:
    if not options.skip_unavailable:
        raise exc
    for m in metrics:
        skipped.setdefault(m, str(exc))


def compute(predictions: Sequence[Mapping], references: Sequence[Mapping], **options: Any) -> dict:
    """Score predictions against reference rows (see the ``metrics/m4seg`` card): pair them, compute each pair's
    geometry (:func:`sample_geometry`, the per-sample half) and reduce them (:func:`reduce_geometries`)."""
    opts = make_options("m4seg", M4SegOptions, options)
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
            spec = opts.recall_embed_fn
            if spec is None:  # the encoder option names the one registered encoder that is not embed_fn's
                spec = opts.recall_text_encoder if opts.recall_text_encoder == "bert-base-uncased-meanpool" else opts.embed_fn
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
    out = reduce_scores(scores, opts, meteor, skipped)  # (the scorer holds nothing to close: the METEOR process is shared)
    out["num_missing_predictions"] = num_missing_predictions
    return out
