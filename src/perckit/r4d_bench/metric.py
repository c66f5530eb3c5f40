"""The metrics of R4D-Bench: ``mask_temporal`` (masks over the frames of a query) and ``track_id`` (sets of
target track ids). Every formula below is written once, here; the accumulator (and through it the evaluate
modules) and the drop-in command lines reach it through :func:`score_query` / :func:`score_track_query` (the
per-query record) and :func:`reduce_mask_temporal` / :func:`reduce_track_id` (the reduce);
:func:`mask_temporal` / :func:`track_id` pair and run both.

``mask_temporal``, for a query q (masks: compressed COCO RLE):

- F_q, the evaluated frames (option ``evaluated_frames``, [inferred]): ``"annotated_and_existence"`` the
  reference's mask frames ∪ its ``evaluated_frame_ids``; ``"annotated"`` the mask frames; ``"all_scene_frames"``
  its ``scene_frame_ids`` (:func:`evaluated_frame_ids`). n = |F_q|. A predicted frame outside F_q is ignored
  (counted in ``num_ignored_prediction_frames``).
- G_t, P_t: the reference / predicted mask of frame t, the empty mask when that side has no entry. A predicted
  mask of another size raises, or is resized (``resize_predictions="nearest"``): :func:`perckit.core.segmentation.fit_prediction`.
- IoU_t = |P_t ∩ G_t| / |P_t ∪ G_t|, exact integer counts in the RLE domain
  (:func:`perckit.rle.rle_pair_counts`); ``empty_union_iou`` (default 1.0) when |P_t ∪ G_t| = 0.
- p_t = [P_t ≠ ∅], g_t = [G_t ≠ ∅]; S_p = {t: p_t}, S_g = {t: g_t}, S_i = {t: p_t ∧ g_t}, S_u = {t: p_t ∨ g_t}.

Per query (:func:`score_query`)::

    acc = existence_acc = |{t ∈ F_q: p_t = g_t}| / n            (the R4D-Bench-QA protocol's Acc)
    viou               = Σ_{t ∈ S_i} IoU_t / |S_u|,  1.0 if S_u = ∅  (the protocol's vIoU)
    miou               = Σ_{t ∈ F_q} IoU_t / n
    temporal_acc       = |{t ∈ F_q: IoU_t ≥ τ}| / n              (τ = iou_threshold, default 0.5)
    macc (class_mean)  = mean of TP/(TP+FN) and TN/(TN+FP) over those with a denominator > 0, else 1.0;
                         TP, FP, FN, TN pooled over F_q, TN = Σ (H·W − |P_t ∪ G_t|)   (:func:`query_macc`)
    macc (frame_success) = temporal_acc
    tiou               = |S_i| / |S_u|,  1.0 if S_u = ∅
    temporal_precision = |S_i| / |S_p|,  if S_p = ∅: 1.0 when S_g = ∅ else 0.0
    temporal_recall    = |S_i| / |S_g|,  if S_g = ∅: 1.0 when S_p = ∅ else 0.0
    intersection, union = Σ_{t ∈ F_q} |P_t ∩ G_t|, Σ_{t ∈ F_q} |P_t ∪ G_t|

An empty F_q gives every per-query value 1.0 when no predicted frame has foreground, else 0.0.

Reduce (:func:`reduce_mask_temporal`), over all queries and per scene, per query type, positive, negative::

    every per-query key: the mean over the queries (:func:`perckit.core.stats.fmean`)
    viou@R      = |{q: viou_q > R}| / |Q|,  R ∈ {0.3, 0.5}
    overall_iou = Σ_q intersection_q / Σ_q union_q,  1.0 if the union is 0

``track_id``, for a query q with Pred, GT the sets of ``str(id)`` of the predicted and the reference ids and
TP = |Pred ∩ GT| (:func:`score_track_query`)::

    precision = TP / |Pred|,  recall = TP / |GT|,  f1 = 2·P·R / (P + R) (0 when P + R = 0)
    exact_match = [Pred = GT]
    Pred = GT = ∅: P = R = F1 = 1;  exactly one of them empty: P = R = F1 = 0

Reduce (:func:`reduce_track_id`): the mean of each key over the queries (macro), and micro precision / recall / F1
from the pooled TP, |Pred|, |GT| with the same empty rules; over all queries, per scene, positive and negative.

Predictions are paired with references by ``query_id`` (:func:`perckit.core.matching.pair_by_id`); a reference
without a prediction raises (``strict``) or is scored as "no output" (empty masks, the empty id set)."""

from __future__ import annotations

import warnings
from dataclasses import InitVar, asdict, dataclass, field
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .. import rle as rle_ops
from ..core import segmentation as seg
from ..errors import OptionError, PredictionError, check_choice, check_option_type, check_options
from ..io.jsonio import parse_int
from ..core.matching import pair_by_id
from ..core.stats import fmean

EVALUATED_FRAMES = ("annotated_and_existence", "annotated", "all_scene_frames")
MACC_MODES = ("class_mean", "frame_success")
RESIZE_MODES = seg.RESIZE_MODES
#: The rule ``resize_predictions="nearest"`` resizes with: PIL's ``Image.NEAREST``, as ReferGaussian's evaluator,
#: which the R4D-Bench evaluation follows, resizes a mask of another size (``"opencv"`` on request).
NEAREST_RULE = "pil"
#: The deprecated option names of ``mask_temporal`` and their one name across the metrics (they warn).
DEPRECATED_OPTIONS = {"resize_mismatched": seg.RESIZE_OPTION, "empty_iou": seg.EMPTY_UNION_OPTION}
VIOU_THRESHOLDS = (0.3, 0.5)
#: The keys that reproduce the R4D-Bench-QA camera-ready protocol (``Trump0412/ReferGaussian:docs/METRICS.md``):
#: ``acc`` = Acc (frame-wise temporal activation accuracy over F_q, the value of ``existence_acc``) and
#: ``viou`` = vIoU. Reports and ``--self-check`` lead with them.
PAPER_KEYS = ("acc", "viou")
#: What that protocol emits only as diagnostics and perckit computes with the same definition.
DIAGNOSTIC_KEYS = ("tiou", "temporal_precision", "temporal_recall")
QUERY_KEYS = PAPER_KEYS + ("miou", "macc", "temporal_acc", "existence_acc") + DIAGNOSTIC_KEYS
GROUP_KEYS = QUERY_KEYS[:6] + tuple(f"viou@{r}" for r in VIOU_THRESHOLDS) + QUERY_KEYS[6:] + ("overall_iou", "num_queries")


class _Unset:
    """The default of a deprecated option alias: not given."""

    def __repr__(self) -> str:
        return "<not given>"


_UNSET: Any = _Unset()
#: Missing-row hints of the two R4D-Bench metrics (see :func:`perckit.core.matching.missing_ids_message`).
MASK_EMPTY_HINT = "frames=[] means no output"
TRACK_EMPTY_HINT = "target_track_ids=[] means no output"


@dataclass(frozen=True)
class MaskTemporalOptions:
    iou_threshold: float = 0.5
    evaluated_frames: str = "annotated_and_existence"
    macc_mode: str = "class_mean"
    #: None: a predicted mask of another size than the reference raises; "pil" or "opencv": it is resized under that
    #: nearest-neighbour rule (``perckit.rle.resize_nearest``); "nearest": :data:`NEAREST_RULE`.
    resize_predictions: str | None = None
    #: IoU of a frame where both masks are empty.
    empty_union_iou: float = 1.0
    only_query_prefix: str | None = None
    only_queries: tuple[str, ...] | None = None
    #: A reference without a prediction row: ``True`` raises, ``False`` scores it as "no output" (empty
    #: masks / empty id set) and counts it in ``num_missing_predictions``.
    strict: bool = True
    #: Deprecated aliases of ``resize_predictions`` / ``empty_union_iou`` (a ``FutureWarning``); not fields.
    resize_mismatched: InitVar[str | None] = _UNSET
    empty_iou: InitVar[float] = _UNSET

    def __post_init__(self, resize_mismatched: Any = _UNSET, empty_iou: Any = _UNSET) -> None:
        self._take_alias("resize_mismatched", resize_mismatched, None)
        self._take_alias("empty_iou", empty_iou, 1.0)
        check_choice("evaluated_frames", self.evaluated_frames, EVALUATED_FRAMES)
        check_choice("macc_mode", self.macc_mode, MACC_MODES)
        object.__setattr__(self, "resize_predictions", seg.resize_rule(self.resize_predictions, NEAREST_RULE))
        for name in ("iou_threshold", seg.EMPTY_UNION_OPTION):
            value = check_option_type(name, getattr(self, name), "number")
            if not 0.0 <= float(value) <= 1.0:
                raise OptionError(f"option {name!r}: expected a number in [0, 1], got {value!r}")
        check_option_type("only_query_prefix", self.only_query_prefix, "str | None")
        check_option_type("only_queries", self.only_queries, "str | strs | None")
        check_option_type("strict", self.strict, "bool")
        object.__setattr__(self, "strict", bool(self.strict))
        if isinstance(self.only_queries, str):
            object.__setattr__(self, "only_queries", tuple(q for q in self.only_queries.split(",") if q))
        elif self.only_queries is not None:
            object.__setattr__(self, "only_queries", tuple(self.only_queries))

    def _take_alias(self, old: str, value: Any, default: Any) -> None:
        """A deprecated option given by its old name: checked under that name, warned about, and moved to the
        new name; both names with different values raise :class:`OptionError`."""
        if value is _UNSET:
            return
        new = DEPRECATED_OPTIONS[old]
        if old == "resize_mismatched":
            check_choice(old, value, RESIZE_MODES)
        elif not 0.0 <= float(check_option_type(old, value, "number")) <= 1.0:
            raise OptionError(f"option {old!r}: expected a number in [0, 1], got {value!r}")
        current = getattr(self, new)
        if current != default and current != value:
            raise OptionError(f"option {old!r} is a deprecated alias of {new!r}; pass only {new!r}, got {old}={value!r} and {new}={current!r}")
        warnings.warn(f"mask_temporal: option {old!r} is deprecated, use {new!r} (the name every metric uses)", FutureWarning, stacklevel=4)
        object.__setattr__(self, new, value)

    def selects(self, query_id: str) -> bool:
        if self.only_query_prefix and not query_id.startswith(self.only_query_prefix):
            return False
        return self.only_queries is None or query_id in self.only_queries


@dataclass
class QueryScore:
    """The per-query record of ``mask_temporal`` (the accumulate half's output)."""

    query_id: str
    scene: str
    query_type: str
    is_negative: bool
    acc: float
    viou: float
    miou: float
    macc: float
    temporal_acc: float
    existence_acc: float
    tiou: float
    temporal_precision: float
    temporal_recall: float
    intersection: int
    union: int
    num_evaluated_frames: int
    num_ignored_prediction_frames: int = 0
    num_existence_frames_without_mask: int = 0
    frame_ious: list[tuple[int, float]] = field(default_factory=list, repr=False)

    def as_row(self) -> dict:
        row = asdict(self)
        row.pop("frame_ious")
        return row


def _ratio(num: int, den: int, both_zero: float, den_zero: float = 0.0) -> float:
    return num / den if den else both_zero if num == 0 else den_zero


def frame_masks(frames: Iterable[Mapping], where: str, error: type[Exception] = PredictionError) -> dict[int, rle_ops.RLE]:
    """``[{frame_id, mask}]`` to ``{frame_id: validated RLE}``; duplicate or non-integer frame ids raise."""
    out: dict[int, rle_ops.RLE] = {}
    if frames is not None and not isinstance(frames, (list, tuple)):
        raise error(f"{where}: expected 'frames' to be a list of {{frame_id, mask}}, got {type(frames).__name__}")
    for i, fr in enumerate(frames or []):
        if not isinstance(fr, Mapping):
            raise error(f"{where}: frames[{i}]: expected {{frame_id, mask}}, got {type(fr).__name__}")
        fid = parse_int(fr.get("frame_id"), f"{where}: frames[{i}].frame_id", error)
        if fid in out:
            raise error(f"{where}: duplicate frame_id {fid}")
        mask = fr.get("mask")
        if mask is None:
            continue
        out[fid] = seg.prediction_rle(mask, f"{where}: frame {fid} mask", error=error)
    return out


def evaluated_frame_ids(reference: Mapping, ref_masks: Mapping[int, Any], mode: str) -> list[int]:
    """[inferred] F_q of a query under ``evaluated_frames``."""
    if mode == "annotated":
        return sorted(ref_masks)
    if mode == "all_scene_frames":
        return sorted({int(t) for t in reference.get("scene_frame_ids") or []})
    return sorted(set(ref_masks) | {int(t) for t in reference.get("evaluated_frame_ids") or []})


def query_macc(tp: int, fp: int, fn: int, tn: int | None) -> float:
    """[inferred] two-class mean pixel accuracy over all pixels of F_q (classes with a positive denominator)."""
    accs = []
    if tp + fn > 0:
        accs.append(tp / (tp + fn))
    if tn is not None and tn + fp > 0:
        accs.append(tn / (tn + fp))
    elif tn is None and fp > 0:
        accs.append(0.0)
    return fmean(accs) if accs else 1.0


def score_query(prediction: Mapping | None, reference: Mapping, options: MaskTemporalOptions = MaskTemporalOptions()) -> QueryScore:
    """Accumulate half of ``mask_temporal``: one query's record."""
    qid = str(reference["query_id"])
    where = f"query {qid!r}"
    gt = frame_masks(reference.get("frames"), f"reference {where}", PredictionError)
    pred = frame_masks((prediction or {}).get("frames"), f"prediction {where}")
    F = evaluated_frame_ids(reference, gt, options.evaluated_frames)
    Fset = set(F)
    ignored = sum(1 for t in pred if t not in Fset)
    is_negative = bool(reference.get("is_negative"))
    base = dict(
        query_id=qid, scene=str(reference.get("scene") or ""), query_type=str(reference.get("query_type") or ""),
        is_negative=is_negative, num_ignored_prediction_frames=ignored,
    )
    if not F:
        v = 0.0 if any(rle_ops.area(m) > 0 for m in pred.values()) else 1.0
        return QueryScore(**base, **{k: v for k in QUERY_KEYS}, intersection=0, union=0, num_evaluated_frames=0)

    fallback = next(iter(gt.values()), None) or next(iter(pred.values()), None)
    fallback_pixels = fallback["size"][0] * fallback["size"][1] if fallback else None
    warned = False
    budget = seg.row_budget()  # the pixels this query's predicted masks may be resized to
    ious: list[tuple[int, float]] = []
    tp = fp = fn = tn = n_p = n_g = n_i = n_u = success = agree = 0  # pixel counts, frame counts (module header)
    tn_known = True
    viou_sum = 0.0
    without_mask = 0 if is_negative else sum(1 for t in reference.get("evaluated_frame_ids") or [] if int(t) not in gt)
    for t in F:
        G = gt.get(t)
        P = pred.get(t)
        if G is not None and P is not None and P["size"] != G["size"]:
            # the resize rule (one warning per query)
            P = seg.fit_prediction(P, G["size"], resize=options.resize_predictions, where=f"prediction {where}: frame {t}",
                                   warn=not warned, budget=budget)
            warned = True
        inter, uni, a_p, a_g = rle_ops.rle_pair_counts(P, G, where)  # the masks were validated once, by frame_masks
        iou = rle_ops.pair_iou(inter, uni, options.empty_union_iou)
        ious.append((t, iou))
        ref_mask = G if G is not None else P
        npix = ref_mask["size"][0] * ref_mask["size"][1] if ref_mask is not None else fallback_pixels
        tp += inter
        fp += a_p - inter
        fn += a_g - inter
        if npix is None:
            tn_known = False
        else:
            tn += npix - uni
        p_t, g_t = a_p > 0, a_g > 0
        n_p += p_t
        n_g += g_t
        if p_t and g_t:
            n_i += 1
            viou_sum += iou
        n_u += p_t or g_t
        success += iou >= options.iou_threshold
        agree += p_t == g_t
    n = len(F)
    temporal_acc = success / n
    macc = query_macc(tp, fp, fn, tn if tn_known else None) if options.macc_mode == "class_mean" else temporal_acc
    # Acc of the camera-ready protocol: (1/|F_q|) sum_t 1[t in T_q] == 1[t in T*_q], with T_q / T*_q the frames of
    # F_q where the predicted / reference mask has foreground. The same value as existence_acc (kept by that name).
    acc = agree / n
    return QueryScore(
        **base,
        acc=acc,
        viou=viou_sum / n_u if n_u else 1.0,
        miou=fmean(i for _, i in ious),
        macc=macc,
        temporal_acc=temporal_acc,
        existence_acc=acc,
        tiou=n_i / n_u if n_u else 1.0,
        temporal_precision=_ratio(n_i, n_p, 1.0 if n_g == 0 else 0.0),
        temporal_recall=_ratio(n_i, n_g, 1.0 if n_p == 0 else 0.0),
        intersection=tp,
        union=tp + fp + fn,
        num_evaluated_frames=n,
        num_existence_frames_without_mask=without_mask,
        frame_ious=ious,
    )


def _group_block(scores: Sequence[QueryScore]) -> dict:
    if not scores:
        return {k: None for k in GROUP_KEYS[:-1]} | {"num_queries": 0}
    out: dict[str, Any] = {k: fmean(getattr(s, k) for s in scores) for k in QUERY_KEYS}
    for r in VIOU_THRESHOLDS:
        out[f"viou@{r}"] = sum(1 for s in scores if s.viou > r) / len(scores)
    inter = sum(s.intersection for s in scores)
    uni = sum(s.union for s in scores)
    out["overall_iou"] = inter / uni if uni else 1.0
    out["num_queries"] = len(scores)
    return {k: out[k] for k in GROUP_KEYS}


def _by(scores: Sequence[Any], key: str, block: Callable[[Sequence[Any]], dict] = _group_block) -> dict[str, dict]:
    groups: dict[str, list] = {}
    for s in scores:
        groups.setdefault(getattr(s, key), []).append(s)
    return {k: block(v) for k, v in sorted(groups.items())}


def reduce_mask_temporal(scores: Sequence[QueryScore]) -> dict:
    """Reduce half of ``mask_temporal``: macro means, vIoU@R, pooled IoU, groups and the per-query table."""
    out = _group_block(scores)
    out["num_ignored_prediction_frames"] = sum(s.num_ignored_prediction_frames for s in scores)
    out["num_existence_frames_without_mask"] = sum(s.num_existence_frames_without_mask for s in scores)
    out["per_scene"] = _by(scores, "scene")
    out["per_query_type"] = _by(scores, "query_type")
    out["positive"] = _group_block([s for s in scores if not s.is_negative])
    out["negative"] = _group_block([s for s in scores if s.is_negative])
    out["per_query"] = [s.as_row() for s in scores]
    return out


def match_by_query_id(predictions: Sequence[Mapping], references: Sequence[Mapping],
                      selects: Callable[[str], bool] | None = None, strict: bool = False,
                      empty_hint: str = MASK_EMPTY_HINT) -> list[tuple[Mapping | None, Mapping]]:
    """Pair predictions with references by ``query_id`` (reference order): :func:`perckit.core.matching.pair_by_id`.

    Duplicate ids on either side and a prediction whose id is unknown to the references raise
    :class:`PredictionError`. A reference without a prediction raises when ``strict`` (the message gives
    ``empty_hint`` and ``strict=False``), else it is paired with ``None`` (scored as "no output").
    ``selects(query_id)`` keeps a subset of the references."""
    return pair_by_id(predictions, references, "query_id", strict=strict, empty_hint=empty_hint, lax_option="strict=False", selects=selects)


def mask_temporal(predictions: Sequence[Mapping], references: Sequence[Mapping], **options: Any) -> dict:
    """Score mask predictions against reference rows (see the ``mask_temporal`` metric card)."""
    check_options("mask_temporal", options, MaskTemporalOptions.__dataclass_fields__)
    opts = MaskTemporalOptions(**options)
    pairs = match_by_query_id(predictions, references, opts.selects, opts.strict)
    out = reduce_mask_temporal([score_query(p, r, opts) for p, r in pairs])
    out["num_missing_predictions"] = sum(1 for p, _ in pairs if p is None)
    return out


# ---------------------------------------------------------------- track_id

TRACK_KEYS = ("precision", "recall", "f1", "exact_match")


@dataclass
class TrackScore:
    query_id: str
    scene: str
    is_negative: bool
    precision: float
    recall: float
    f1: float
    exact_match: float
    tp: int
    num_pred: int
    num_gt: int


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def track_id_set(value: Any, where: str) -> set[str]:
    """A list of track ids (strings or ints) as a set of strings; ``None`` is the empty set.

    A string (which would be read character by character), a float (NaN included), a bool or a nested value raises
    :class:`PredictionError` naming ``where``."""
    if value is None:
        return set()
    if not isinstance(value, (list, tuple)):
        raise PredictionError(f"{where}: expected a list of track ids (strings or ints), got {type(value).__name__}: {value!r}"[:300])
    out = set()
    for i, t in enumerate(value):
        if isinstance(t, bool) or not isinstance(t, (str, int)):
            raise PredictionError(f"{where}[{i}]: expected a track id (a string or an int), got {type(t).__name__}: {t!r}"[:300])
        out.add(str(t))
    return out


def score_track_query(prediction: Mapping | None, reference: Mapping) -> TrackScore:
    """Accumulate half of ``track_id``: set precision / recall / F1 on ``str(id)`` sets."""
    qid = reference["query_id"]
    pred = track_id_set((prediction or {}).get("target_track_ids"), f"prediction query {qid!r}: target_track_ids")
    gt = track_id_set(reference.get("target_track_ids"), f"reference query {qid!r}: target_track_ids")
    tp = len(pred & gt)
    # both empty: 1; exactly one empty: 0 (an empty side has tp = 0)
    p, r = _ratio(tp, len(pred), 1.0 if not gt else 0.0), _ratio(tp, len(gt), 1.0 if not pred else 0.0)
    return TrackScore(
        query_id=str(reference["query_id"]), scene=str(reference.get("scene") or ""), is_negative=not gt,
        precision=p, recall=r, f1=_f1(p, r), exact_match=float(pred == gt),
        tp=tp, num_pred=len(pred), num_gt=len(gt),
    )


def _track_block(scores: Sequence[TrackScore]) -> dict:
    if not scores:
        return {k: None for k in TRACK_KEYS + ("micro_precision", "micro_recall", "micro_f1")} | {"num_queries": 0}
    out = {k: fmean(getattr(s, k) for s in scores) for k in TRACK_KEYS}
    tp = sum(s.tp for s in scores)
    npred = sum(s.num_pred for s in scores)
    ngt = sum(s.num_gt for s in scores)
    out["micro_precision"] = _ratio(tp, npred, 1.0 if ngt == 0 else 0.0)
    out["micro_recall"] = _ratio(tp, ngt, 1.0 if npred == 0 else 0.0)
    out["micro_f1"] = _f1(out["micro_precision"], out["micro_recall"])
    out["num_queries"] = len(scores)
    return out


def reduce_track_id(scores: Sequence[TrackScore]) -> dict:
    """Reduce half of ``track_id``: macro and micro P/R/F1, exact match, groups and the per-query table."""
    out = _track_block(scores)
    out["per_scene"] = _by(scores, "scene", _track_block)
    out["positive"] = _track_block([s for s in scores if not s.is_negative])
    out["negative"] = _track_block([s for s in scores if s.is_negative])
    out["per_query"] = [asdict(s) for s in scores]
    return out


def track_id(predictions: Sequence[Mapping], references: Sequence[Mapping], only_query_prefix: str | None = None,
             only_queries: Sequence[str] | str | None = None, strict: bool = False, **unknown: Any) -> dict:
    """Score track-id set predictions against reference rows (see the ``track_id`` metric card).

    A missing query is an empty predicted set (the official evaluator's rule) unless ``strict``."""
    check_options("track_id", unknown, ())
    opts = MaskTemporalOptions(only_query_prefix=only_query_prefix, only_queries=only_queries, strict=strict)
    pairs = match_by_query_id(predictions, references, opts.selects, opts.strict, TRACK_EMPTY_HINT)
    out = reduce_track_id([score_track_query(p, r) for p, r in pairs])
    out["num_missing_predictions"] = sum(1 for p, _ in pairs if p is None)
    return out
