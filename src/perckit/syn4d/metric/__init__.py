"""The Syn4D metric: ``tracking``, ``depth`` and ``pose``, as per-sequence scores and their reduce.

Formulas (spec §4.1, one sequence; every one is written once, here or in the kernel it names):

* tracking (:func:`tracking_metrics`; the per-sample pass is :func:`perckit.syn4d.metric._kernels.tracking`):
  ``F = valid ∧ finite(gt) ∧ finite(pred)``; ``s = median‖gt[F]‖ / median‖pred[F]‖`` (0 when the denominator
  is ≤ 1e-12); ``d = ‖gt − s·pred‖``; ``acc_τ = mean(d ≤ τ)``, ``apd = mean_τ acc_τ``, ``epe = mean d``, over
  ``F`` and (``dynamic_`` keys) ``F ∧ dynamic``; ``score = (1−w)·apd + w·dynamic_apd`` (``apd`` without dynamic
  samples).
* depth (:func:`depth_metrics`; the per-pixel passes are :func:`perckit.syn4d.metric._kernels.depth_medians` and
  :func:`perckit.syn4d.metric._kernels.depth_sums`): the prediction resized to the GT (OpenCV bilinear); valid
  pixels ``finite(g) ∧ finite(p) ∧ min < g ≤ max ∧ p > 0``; ``p' = clip(s·p + t)``, ``g' = clip(g)`` to
  ``[min, max]`` with ``(s, t)`` = (median g / median p, 0) for ``scale``, least squares for ``scale_shift``,
  (1, 0) for ``metric``; ``abs_rel = mean|p'−g'|/g'``, ``sq_rel = mean (p'−g')²/g'``, ``rmse = √mean (p'−g')²``,
  ``ℓ = log p' − log g'``, ``rmse_log = √mean ℓ²``, ``silog = 100·√(mean ℓ² − (mean ℓ)²)``,
  ``δk = mean(max(g'/p', p'/g') < 1.25^k)``.
* pose (:func:`pose_metrics`): both trajectories relative to their first frame, Sim(3) (:func:`umeyama_sim3`:
  ``Σ = (P−μP)ᵀ(G−μG)/N = U S Vᵀ``, ``D = diag(1, 1, −1)`` if ``det(V Uᵀ) < 0``, ``R = V D Uᵀ``,
  ``c = Σ(S·diag D) / mean‖P−μP‖²``, ``t = μG − c R μP``) of the predicted centres onto the GT; ATE and rotation
  errors per frame (``arccos(clip((tr(Rpᵀ Rg) − 1)/2, −1, 1))``, :func:`rotation_error_deg`), RPE over
  consecutive pairs, ``auc_θ = mean(max(rpe_rot, trans_angle) ≤ θ)`` with an undefined angle counting as 180°.
* coverage (tracking, depth; :func:`coverage_entry`): ``scored / GT-valid``, the scored count of the formula
  above over the GT-valid points (visible, finite GT) or pixels (finite GT in ``(min, max]``); a run warns once
  (:class:`LowCoverageWarning`) when a sequence is below ``min_coverage``.
* the means (:func:`mean_rows`, spec §4.2): the macro mean over sequences of every numeric key, its non-finite
  values left out (:func:`perckit.core.stats.fmean`).

Per sequence: :func:`tracking_metrics`, :func:`depth_metrics` and :func:`pose_metrics` score one sequence;
:func:`task_metrics` does it from a (reference, prediction) pair of builder-style rows, :func:`score_sequence`
adds the ids and the coverage entry, and :func:`score_sequences` matches predictions to references by
``sequence_id`` (:func:`perckit.core.matching.pair_by_id`) and applies the strict / lax failure policy (spec §4.3,
:class:`FailurePolicy`, which the file runner uses too). Reduce: :func:`mean_rows` and :func:`aggregate` make the
macro means and the per-variant / per-scene blocks (spec §4.2), :func:`summarize_coverage` the coverage block;
:func:`compute_task` runs both and :func:`to_official_summary` merges the per-task results into the official
``evaluate.py`` JSON shape.

Nothing here is reconstructed: every per-sequence formula reproduces the official Syn4D evaluator operation for
operation (float64 NumPy, ``np.mean`` / ``np.median``, OpenCV bilinear resize), because the parity target is 1e-9
relative. The compiled kernels of depth and tracking (:mod:`perckit.syn4d.metric._kernels`, numba, the one
implementation of those passes) keep every per-element operation, decision and exact median; tracking and pose give
the numbers of the straightforward numpy formulas (``tests/oracles/syn4d.py``) bit for bit, depth differs from them
only in its summation order (~1e-16 relative). The other deliberate difference is in :func:`mean_rows`, which
averages with :func:`perckit.core.stats.fmean` (an ``fsum``, order-independent, for evaluate's distributed mode): it
differs from the official ``np.mean`` by an ulp at most (2.2e-16 relative on the fixture)."""

from __future__ import annotations

import heapq
import math
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from ...errors import (InputNotFoundError, OptionError, PerckitError, PredictionError, check_choice, check_option_type,
                       check_options)
from ...core.matching import pair_by_id
from ...core.stats import fmean

TASKS = ("depth", "pose", "tracking")
PROTOCOL = "syn4d-multitask-v1"
DEPTH_ALIGNS = ("scale", "scale_shift", "metric")
TRACKING_THRESHOLDS_M = (0.1, 0.3, 0.5, 1.0)
DYNAMIC_WEIGHT = 0.5
DEPTH_MIN_M = 0.001
DEPTH_MAX_M = 300.0
#: The prediction array each task reads (an NPZ key of the official format).
PREDICTION_KEYS = {"tracking": "tracking_xyz", "depth": "depth", "pose": "camera_c2w"}
#: The ground-truth arrays each task reads from a reference row (builder-row field names), beside the ids
#: ``sequence_id``, ``variant``, ``scene`` and ``frame_indices``.
REFERENCE_KEYS = {"tracking": ("tracks_ref0", "visibility", "dynamic"), "depth": ("depth_m",), "pose": ("camera_c2w",)}
BLOCK_KEYS = ("overall", "by_variant", "by_scene", "sequences")
#: Below this fraction of GT-valid points scored, a run warns.
DEFAULT_MIN_COVERAGE = 0.9
#: The tasks that leave predicted values out, hence have a coverage (pose needs every pose finite, or the sequence fails).
COVERAGE_TASKS = ("depth", "tracking")


def _compiled():
    """:mod:`perckit.syn4d.metric._kernels`, imported on first use (it imports numba, which is slow to import)."""
    from . import _kernels

    return _kernels


def _finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


@dataclass(frozen=True)
class Syn4DOptions:
    """Options shared by the three Syn4D configs (spec §4.3)."""

    #: ``True`` (leaderboard mode, the official ``--strict``): a missing prediction or any task error raises.
    #: ``False``: they become failure records and the sequence is left out of the means.
    strict: bool = True
    depth_align: str = "scale"
    depth_min_m: float = DEPTH_MIN_M
    depth_max_m: float = DEPTH_MAX_M
    tracking_thresholds_m: tuple = TRACKING_THRESHOLDS_M
    dynamic_weight: float = DYNAMIC_WEIGHT
    #: Warn (:class:`LowCoverageWarning`, once per run) when a sequence was scored on
    #: fewer than this fraction of its GT-valid points / pixels (see :func:`coverage_entry`).
    min_coverage: float = DEFAULT_MIN_COVERAGE

    @classmethod
    def from_kwargs(cls, **options: Any) -> "Syn4DOptions":
        """The options of a metric call; an unknown name raises :class:`OptionError` (not ``TypeError``)."""
        check_options("syn4d", options, cls.__dataclass_fields__)
        return cls(**options)

    def __post_init__(self) -> None:
        object.__setattr__(self, "strict", bool(check_option_type("strict", self.strict, "bool")))
        check_choice("depth_align", self.depth_align, DEPTH_ALIGNS)
        for name in ("depth_min_m", "depth_max_m"):
            value = getattr(self, name)
            if not _finite_number(value) or float(value) <= 0.0:
                raise OptionError(f"option {name!r}: expected a finite number > 0, got {value!r}")
        if not float(self.depth_min_m) < float(self.depth_max_m):
            raise OptionError(f"options 'depth_min_m' / 'depth_max_m': expected min < max, got {self.depth_min_m!r} and "
                              f"{self.depth_max_m!r}")
        thresholds = self.tracking_thresholds_m
        if isinstance(thresholds, (str, bytes)) or not isinstance(thresholds, Sequence) or not thresholds:
            raise OptionError(f"option 'tracking_thresholds_m': expected a non-empty sequence of numbers, got {thresholds!r}")
        if not all(_finite_number(t) and float(t) > 0.0 for t in thresholds):
            raise OptionError(f"option 'tracking_thresholds_m': expected finite numbers > 0, got {thresholds!r}")
        object.__setattr__(self, "tracking_thresholds_m", tuple(thresholds))
        w = self.dynamic_weight
        if not _finite_number(w) or not 0.0 <= float(w) <= 1.0:
            raise OptionError(f"option 'dynamic_weight': expected a number in [0, 1], got {w!r}")
        c = float(check_option_type("min_coverage", self.min_coverage, "number"))  # in [0, 1] (0 never warns)
        if not 0.0 <= c <= 1.0:
            raise OptionError(f"option 'min_coverage': expected a number in [0, 1], got {self.min_coverage!r}")
        object.__setattr__(self, "min_coverage", c)


# ---- The failure policy (spec §4.3), written once: the metric (:func:`score_sequences`) and the file runner
# (:func:`perckit.syn4d.evaluate.evaluate_release`) both go through :class:`FailurePolicy`. Strict: the first
# missing prediction or failing task raises. Lax: each becomes a failure record; a missing prediction leaves the
# sequence out of every task's means, a task error leaves it out of that task's.

T = TypeVar("T")

#: The official failure reason of a sequence without a prediction (the file runner adds the NPZ path).
MISSING_PREDICTION = "missing prediction"


class TaskFailedError(PerckitError, RuntimeError):
    """A task of a sequence failed in strict mode: the official ``RuntimeError("<sequence_id> <task> failed")``,
    whose ``__cause__`` is the error naming the field and the problem."""


def failure_reason(exc: BaseException) -> str:
    """The official failure text: ``"<ExceptionType>: <message>"``."""
    return f"{type(exc).__name__}: {exc}"


class FailurePolicy:
    """The strict / lax policy of one run; ``failures`` collects the lax records in the order they happened."""

    def __init__(self, strict: bool) -> None:
        self.strict = bool(strict)
        self.failures: list[dict] = []

    def missing(self, sequence_id: str, path: str | Path | None = None) -> None:
        """``sequence_id`` has no prediction: no row (or a row whose arrays are all ``None``) or, given ``path``,
        no NPZ file there.

        Strict: raises :class:`~perckit.errors.PredictionError` ``"<sequence_id>: missing prediction"``, or for
        a file :class:`~perckit.errors.InputNotFoundError` (a ``FileNotFoundError``) ``"missing prediction
        <path>"``, the official texts. Lax: records the task-less failure ``{"sequence_id", "reason"}``, the
        reason ``"missing prediction"`` (``"missing prediction <path>"`` for a file)."""
        reason = MISSING_PREDICTION if path is None else f"{MISSING_PREDICTION} {path}"
        if self.strict:
            if path is None:
                raise PredictionError(f"{sequence_id}: {reason}")
            raise InputNotFoundError(reason)
        self.failures.append({"sequence_id": sequence_id, "reason": reason})

    def attempt(self, sequence_id: str, task: str, score: Callable[..., T], *args: Any) -> T | None:
        """``score(*args)`` for one task of one sequence, or ``None`` when it failed in lax mode.

        As the official loop, any exception is a task failure: strict raises :class:`TaskFailedError`
        ``"<sequence_id> <task> failed"`` from it; lax records ``{"sequence_id", "task", "reason":
        "<ExceptionType>: <message>"}`` (:func:`failure_reason`)."""
        try:
            return score(*args)
        except Exception as exc:  # the official loop records any task error in lax mode
            if self.strict:
                raise TaskFailedError(f"{sequence_id} {task} failed") from exc
            self.failures.append({"sequence_id": sequence_id, "task": task, "reason": failure_reason(exc)})
            return None


# ---- Accumulate: one sequence


def _accuracy_keys(prefix: str, counts: Sequence[int], distances: np.ndarray, thresholds: Sequence[float]) -> dict:
    """The keys of one non-empty subset from its threshold counts and distances."""
    n = distances.size
    # count / n equals np.mean of the boolean array exactly (a float64 sum of 0s and 1s is exact)
    out: dict[str, Any] = {f"{prefix}acc_{t:g}m": int(c) / n for t, c in zip(thresholds, counts)}
    out[f"{prefix}apd"] = float(np.mean(list(out.values())))
    out[f"{prefix}epe"] = float(np.add.reduce(distances) / n)  # np.mean(distances), operation for operation
    out[f"{prefix}count"] = int(n)
    return out


def tracking_metrics(gt: np.ndarray, pred: np.ndarray, valid: np.ndarray, dynamic: np.ndarray,
                     thresholds: Sequence[float] = TRACKING_THRESHOLDS_M,
                     dynamic_weight: float = DYNAMIC_WEIGHT) -> dict:
    """3D point tracking of one sequence (module docstring), one global median scale for all subsets.

    ``gt``/``pred`` are ``[T, Q, 3]``, ``valid`` ``[T, Q]`` and ``dynamic`` ``[Q]``; ``dynamic_`` keys are
    absent when that subset is empty; thresholds are inclusive."""
    gt, pred = np.asarray(gt), np.asarray(pred)
    valid_mask = np.asarray(valid, dtype=bool)
    dynamic_q = np.asarray(dynamic, dtype=bool).reshape(-1)
    if gt.shape != pred.shape or gt.ndim != 3 or gt.shape[-1] != 3:
        raise ValueError(f"tracking arrays must match [T,Q,3], got {gt.shape} and {pred.shape}")
    if valid_mask.shape != gt.shape[:2] or dynamic_q.shape != (gt.shape[1],):
        raise ValueError(f"tracking validity/dynamic shapes do not match tracks {gt.shape}: visibility {valid_mask.shape}, "
                         f"dynamic {dynamic_q.shape}")
    # One compiled pass (see perckit.syn4d.metric._kernels.tracking): the scored samples compacted in (t, q) order,
    # the exact median scale, the distances of both subsets and their threshold counts.
    limits = np.asarray(thresholds, dtype=np.float64)
    counts = np.zeros((2, limits.size), dtype=np.int64)
    scale, distances, dynamic_distances = _compiled().tracking(
        np.ascontiguousarray(gt, dtype=np.float64), np.ascontiguousarray(pred, dtype=np.float64),
        np.ascontiguousarray(valid_mask), np.ascontiguousarray(dynamic_q), limits, counts,
    )
    if distances.size == 0:
        raise ValueError("sequence has no finite valid tracking correspondences")
    result: dict[str, Any] = {"scale": float(scale)}
    result.update(_accuracy_keys("", counts[0].tolist(), distances, thresholds))
    if dynamic_distances.size:
        result.update(_accuracy_keys("dynamic_", counts[1].tolist(), dynamic_distances, thresholds))
    result["dynamic_query_fraction"] = int(np.count_nonzero(dynamic_q)) / dynamic_q.size  # = np.mean (an exact count)
    dyn = result.get("dynamic_apd")
    result["score"] = float(result["apd"] if dyn is None else (1.0 - dynamic_weight) * result["apd"] + dynamic_weight * dyn)
    return result


def resize_depth(pred: np.ndarray, hw: Sequence[int]) -> np.ndarray:
    """Predicted depth ``[T, h, w]`` to float32 ``[T, H, W]``: per-frame ``cv2.resize`` (INTER_LINEAR), as the official code.

    The cast to float32 comes first; a prediction already at ``(H, W)`` is returned unresized."""
    arr = np.asarray(pred, dtype=np.float32)
    if arr.ndim != 3:
        raise ValueError(f"predicted depth must be [T,H,W], got {arr.shape}")
    height, width = (int(v) for v in hw)
    if arr.shape[1:] == (height, width):
        return arr
    import cv2

    frames = [cv2.resize(frame, (width, height), interpolation=cv2.INTER_LINEAR) for frame in arr]
    return np.stack(frames) if frames else np.zeros((0, height, width), dtype=np.float32)


def _exact_median(values: np.ndarray) -> float:
    """``np.median(values.astype(np.float64))`` without the float64 copy: partition in the stored dtype
    (float32 -> float64 is exact, so the order and the middle values are the same), average in float64."""
    n = values.size
    k = n // 2
    if n % 2:
        return float(np.float64(np.partition(values, k)[k]))
    part = np.partition(values, [k - 1, k])
    return float((np.float64(part[k - 1]) + np.float64(part[k])) / 2.0)


def _valid_values(gt: np.ndarray, pred: np.ndarray, lo: np.float64, hi: np.float64) -> tuple[np.ndarray, np.ndarray]:
    """The valid pixels' values of both sides, in their stored dtype (per frame: the masks of one frame only);
    the comparisons are against float64 bounds, so exactly the official decisions."""
    g_parts, p_parts = [], []
    for g_t, p_t in zip(gt, pred):
        valid = np.isfinite(g_t) & np.isfinite(p_t) & (g_t > lo) & (g_t <= hi) & (p_t > 0)
        g_parts.append(g_t[valid])
        p_parts.append(p_t[valid])
    if not g_parts:
        return np.zeros(0, gt.dtype), np.zeros(0, np.float32)
    return np.concatenate(g_parts), np.concatenate(p_parts)


def _depth_alignment(gt: np.ndarray, pred: np.ndarray, align: str, lo: np.float64, hi: np.float64) -> tuple[float, float]:
    """``(scale, shift)`` of ``align`` over the valid pixels; raises when there are none.

    ``scale`` on a float32 GT with ``lo >= 0`` (every release and :func:`task_metrics` call): the exact
    medians by two streaming radix passes over the arrays (:func:`perckit.syn4d.metric._kernels.depth_medians`,
    no copy). The medians of any other GT dtype, and the least squares of ``scale_shift``, need the valid
    values themselves: :func:`_valid_values`, then :func:`_exact_median` / ``np.linalg.lstsq``."""
    if align == "metric":
        return 1.0, 0.0
    if align == "scale" and gt.dtype == np.dtype(np.float32) and lo >= 0:
        n, median_g, median_p = _compiled().depth_medians(gt.reshape(-1), pred.reshape(-1), float(lo), float(hi))
        if n == 0:
            raise ValueError("sequence has no valid depth pixels")
        return float(median_g / max(median_p, 1e-12)), 0.0
    g_all, p_all = _valid_values(gt, pred, lo, hi)
    if g_all.size == 0:
        raise ValueError("sequence has no valid depth pixels")
    if align == "scale":
        return float(_exact_median(g_all) / max(_exact_median(p_all), 1e-12)), 0.0
    design = np.stack([p_all.astype(np.float64), np.ones(g_all.size)], axis=1)
    scale, shift = np.linalg.lstsq(design, g_all.astype(np.float64), rcond=None)[0].tolist()
    return scale, shift


def depth_metrics(gt: np.ndarray, pred: np.ndarray, align: str = "scale", min_depth: float = DEPTH_MIN_M,
                  max_depth: float = DEPTH_MAX_M) -> dict:
    """Video depth of one sequence (module docstring), one alignment shared by every frame and pixel.

    Same numbers as the official code (which casts both whole arrays to float64 first), without its whole-array
    copies: the alignment (:func:`_depth_alignment`), then one compiled streaming pass for the clipped values and
    the sums (:func:`perckit.syn4d.metric._kernels.depth_sums`); only the summation order differs (~1e-16)."""
    check_choice("align", align, DEPTH_ALIGNS)
    gt = np.asarray(gt)
    if gt.dtype not in (np.float32, np.float64):
        gt = gt.astype(np.float64)
    if gt.ndim != 3:
        raise ValueError(f"GT depth must be [T,H,W], got {gt.shape}")
    pred = resize_depth(pred, gt.shape[1:])
    if gt.shape != pred.shape:
        raise ValueError(f"depth arrays must have the same shape, got {gt.shape} and {pred.shape}")
    lo, hi = np.float64(min_depth), np.float64(max_depth)
    gt, pred = np.ascontiguousarray(gt), np.ascontiguousarray(pred)
    scale, shift = _depth_alignment(gt, pred, align, lo, hi)
    n, sums, below = _compiled().depth_sums(gt.reshape(-1), pred.reshape(-1), float(lo), float(hi), scale, shift)
    if n == 0:
        raise ValueError("sequence has no valid depth pixels")
    mean = np.asarray(sums, dtype=np.float64) / n
    return {
        "abs_rel": float(mean[0]),
        "sq_rel": float(mean[1]),
        "rmse": float(np.sqrt(mean[2])),
        "rmse_log": float(np.sqrt(mean[3])),
        "silog": float(np.sqrt(max(0.0, mean[3] - mean[4] ** 2)) * 100.0),
        **{f"delta{k}": float(below[k - 1] / n) for k in (1, 2, 3)},
        "scale": float(scale),
        "shift": float(shift),
        "valid_pixels": int(n),
    }


def umeyama_sim3(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Least-squares similarity ``dst ≈ c · R · src + t`` for row-vector points (module docstring).

    Raises ``ValueError`` for mismatched or non-``[N, 3]`` inputs, N < 3, and
    ``ValueError("Degenerate source trajectory")`` when ``mean‖P−μP‖² <= 1e-12``."""
    src, dst = (np.asarray(x, dtype=np.float64) for x in (src, dst))
    if src.shape != dst.shape or src.ndim != 2 or src.shape[1] != 3 or src.shape[0] < 3:
        raise ValueError(f"Umeyama alignment needs matching [N,3] arrays with N >= 3, got {src.shape} and {dst.shape}")
    mu_src, mu_dst = src.mean(0), dst.mean(0)
    src0, dst0 = src - mu_src, dst - mu_dst
    covariance = (src0.T @ dst0) / src.shape[0]
    u, singular, vt = np.linalg.svd(covariance)
    sign = np.ones(3, dtype=np.float64)
    if np.linalg.det(vt.T @ u.T) < 0:
        sign[-1] = -1
    rotation = vt.T @ np.diag(sign) @ u.T
    variance = float(np.mean(np.sum(src0 * src0, axis=1)))
    if variance <= 1e-12:
        raise ValueError("Degenerate source trajectory")
    scale = float(np.sum(singular * sign) / variance)
    translation = mu_dst - scale * (rotation @ mu_src)
    return scale, rotation, translation


def rotation_error_deg(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Geodesic angle in degrees between rotation stacks: ``arccos(clip((tr(Rpᵀ Rg) − 1)/2, −1, 1))``."""
    relative = np.swapaxes(np.asarray(pred, dtype=np.float64), -1, -2) @ np.asarray(gt, dtype=np.float64)
    cosine = np.clip((np.trace(relative, axis1=-2, axis2=-1) - 1.0) * 0.5, -1.0, 1.0)
    return np.degrees(np.arccos(cosine))


def pose_metrics(gt_c2w: np.ndarray, pred_c2w: np.ndarray) -> dict:
    """Camera trajectory of one sequence (module docstring): frame-0 normalisation, then Sim(3) on the centres."""
    gt, pred = (np.asarray(x, dtype=np.float64) for x in (gt_c2w, pred_c2w))
    if gt.shape != pred.shape or gt.ndim != 3 or gt.shape[1:] != (4, 4):
        raise ValueError(f"poses must match [T,4,4], got {gt.shape} and {pred.shape}")
    if gt.shape[0] < 3 or not np.isfinite(gt).all() or not np.isfinite(pred).all():
        raise ValueError("pose evaluation needs at least three finite poses")
    n = gt.shape[0]
    # Frame-0 normalisation of both trajectories (``relative_to_first``), the two inverses in one batched
    # call: numpy inverts each matrix of a stack on its own, so every number is that of separate calls.
    first = np.linalg.inv(np.stack((gt[0], pred[0])))
    gt, pred = first[0][None] @ gt, first[1][None] @ pred
    scale, rotation, translation = umeyama_sim3(pred[:, :3, 3], gt[:, :3, 3])
    aligned = pred.copy()
    aligned[:, :3, 3] = (scale * (rotation @ pred[:, :3, 3].T)).T + translation
    aligned[:, :3, :3] = rotation[None] @ pred[:, :3, :3]
    position_error = np.linalg.norm(aligned[:, :3, 3] - gt[:, :3, 3], axis=-1)

    # Relative motions inv(X[i]) @ X[i+1] of the GT and of the aligned prediction, batched the same way
    # (stacked matrices, each product and inverse on its own), and both rotation errors in one call.
    rel = np.linalg.inv(np.concatenate((gt[:-1], aligned[:-1]))) @ np.concatenate((gt[1:], aligned[1:]))
    gt_rel, pred_rel = rel[: n - 1], rel[n - 1 :]
    angles = rotation_error_deg(np.concatenate((aligned[:, :3, :3], pred_rel[:, :3, :3])),
                                np.concatenate((gt[:, :3, :3], gt_rel[:, :3, :3])))
    rotation_error, rpe_rotation = angles[:n], angles[n:]
    a, b = pred_rel[:, :3, 3], gt_rel[:, :3, 3]
    rpe_translation = np.linalg.norm(a - b, axis=-1)
    norm = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)  # the angle of a and b in degrees; NaN where |a|·|b| <= 1e-12
    ok = norm > 1e-12
    translation_angle = np.full(norm.shape, np.nan, dtype=np.float64)
    translation_angle[ok] = np.degrees(np.arccos(np.clip(np.sum(a[ok] * b[ok], axis=-1) / norm[ok], -1, 1)))
    undefined = np.isnan(translation_angle)
    pair_error = np.maximum(rpe_rotation, np.where(undefined, 180.0, translation_angle))  # np.nan_to_num(nan=180)
    defined = n - 1 - int(np.count_nonzero(undefined))
    # np.nanmean (NaNs summed as 0, divided by the count); all-NaN gives NaN here, without the warning.
    direction = float(np.add.reduce(np.where(undefined, 0.0, translation_angle)) / defined) if defined else float("nan")
    # np.mean(x) is np.add.reduce(x) / x.size, np.median of a sorted row its middle (mean of the two middle) values.
    ordered = np.sort(np.stack((position_error, rotation_error)), axis=1)
    k = n // 2
    middle = ordered[:, k] if n % 2 else (ordered[:, k - 1] + ordered[:, k]) / 2.0
    return {
        "ate_rmse": math.sqrt(np.add.reduce(position_error * position_error) / n),
        "position_mean": float(np.add.reduce(position_error) / n),
        "position_median": float(middle[0]),
        "rotation_mean_deg": float(np.add.reduce(rotation_error) / n),
        "rotation_median_deg": float(middle[1]),
        "rpe_translation_rmse": math.sqrt(np.add.reduce(rpe_translation * rpe_translation) / (n - 1)),
        "rpe_rotation_mean_deg": float(np.add.reduce(rpe_rotation) / (n - 1)),
        "translation_direction_mean_deg": direction,
        **{f"auc_{d}deg": int(np.count_nonzero(pair_error <= float(d))) / (n - 1) for d in (5, 10, 20)},
        "alignment_scale": float(scale),
        "num_frames": int(gt.shape[0]),
    }


def _gt_array(reference: Mapping, key: str, dtype: type) -> np.ndarray:
    value = reference.get(key)
    if value is None:
        raise ValueError(f"reference {reference.get('sequence_id')!r} has no {key!r} (the GT of this task is absent)")
    return np.asarray(value, dtype=dtype)


def task_metrics(task: str, reference: Mapping, prediction: Mapping, options: Syn4DOptions = Syn4DOptions()) -> dict:
    """Score one (reference, prediction) pair for ``task``; raise on any problem (the caller applies the policy).

    As the official loop: the prediction's ``frame_indices`` (if given) must equal the reference's, then the
    reference arrays are read, then the prediction array; a ``None`` prediction array raises
    ``KeyError("<key> is not a file in the archive")`` (NumPy's NPZ message). Tracks and poses are read as
    float64, depth as float32 (the official dtypes)."""
    check_choice("task", task, TASKS)
    pred_frames = prediction.get("frame_indices")
    ref_frames = reference.get("frame_indices")
    if pred_frames is not None and ref_frames is not None and not np.array_equal(np.asarray(pred_frames), np.asarray(ref_frames)):
        against = "the tracking GT" if task == "tracking" else "the manifest"
        raise ValueError(f"prediction frame_indices do not match {against}")
    key, dtype = PREDICTION_KEYS[task], np.float32 if task == "depth" else np.float64
    gt, *flags = [_gt_array(reference, k, bool if k in ("visibility", "dynamic") else dtype) for k in REFERENCE_KEYS[task]]
    value = prediction.get(key)
    if value is None:
        raise KeyError(f"{key} is not a file in the archive")
    try:  # strings, ragged lists and the like raise naming the key
        pred = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"prediction {key!r}: expected a numeric array, got {type(value).__name__} that NumPy cannot convert ({e})") from None
    if task == "tracking":
        return tracking_metrics(gt, pred, *flags, thresholds=options.tracking_thresholds_m, dynamic_weight=options.dynamic_weight)
    if task == "depth":
        return depth_metrics(gt, pred, align=options.depth_align, min_depth=options.depth_min_m, max_depth=options.depth_max_m)
    return pose_metrics(gt, pred)


def is_missing_prediction(prediction: Mapping | None) -> bool:
    """``True`` for no prediction row, or one whose three arrays are all ``None`` (the official "no NPZ")."""
    return prediction is None or all(prediction.get(k) is None for k in PREDICTION_KEYS.values())


def score_sequence(task: str, reference: Mapping, prediction: Mapping, options: Syn4DOptions = Syn4DOptions(),
                   coverage: bool = True) -> tuple[dict, dict | None]:
    """One task of one sequence, as the metric and the file runner both record it: the row (``sequence_id``,
    ``variant``, ``scene`` and :func:`task_metrics`) and, with ``coverage``, its coverage entry
    (:func:`coverage_entry`; None for pose). Raises on any problem (the caller applies the failure policy)."""
    metrics = task_metrics(task, reference, prediction, options)
    sid = str(reference.get("sequence_id"))
    row = {"sequence_id": sid, "variant": str(reference.get("variant")), "scene": str(reference.get("scene")), **metrics}
    return row, coverage_entry(task, sid, reference, metrics, options) if coverage else None


def score_sequences(predictions: Sequence[Mapping], references: Sequence[Mapping], task: str,
                    options: Syn4DOptions = Syn4DOptions(),
                    coverage: list | None = None) -> tuple[list[dict], list[dict]]:
    """Accumulate half of one task: ``(rows, failures)``, both in reference order.

    Predictions are paired with references by ``sequence_id`` (:func:`perckit.core.matching.pair_by_id`: a duplicate
    id on either side or a prediction id unknown to the references raises :class:`~perckit.errors.PredictionError`);
    a reference without a prediction, or with one whose arrays are all ``None``, and a failing task go through the
    failure policy (:class:`FailurePolicy`). ``coverage``: a list that receives the coverage entry of every scored
    sequence (:func:`coverage_entry`; tracking and depth)."""
    check_choice("task", task, TASKS)
    policy = FailurePolicy(options.strict)
    rows: list[dict] = []
    for prediction, reference in pair_by_id(predictions, references, "sequence_id", strict=False):
        sid = reference["sequence_id"]
        if is_missing_prediction(prediction):
            policy.missing(sid)
            continue
        scored = policy.attempt(sid, task, score_sequence, task, reference, prediction, options, coverage is not None)
        if scored is not None:
            rows.append(scored[0])
            if coverage is not None and scored[1] is not None:
                coverage.append(scored[1])
    return rows, policy.failures


# ---- Coverage: how much of the ground truth a prediction was scored on. The official rule leaves a non-finite
# predicted point (or a non-finite / non-positive predicted depth pixel) out of the scored set without penalty,
# so a prediction that is 99.9% NaN can score perfectly on the 0.1% it kept; the metric keeps that rule (parity)
# and reports the coverage beside it. No metric value changes.


class LowCoverageWarning(UserWarning):
    """A Syn4D prediction was scored on fewer GT-valid points / pixels than ``min_coverage`` of them."""


def summarize_coverage(entries: Sequence[Mapping], min_coverage: float) -> dict:
    """``{"overall": {...}, "sequences": entries}``. ``overall``: the summed counts and their ratio (so it
    does not depend on the order of the sequences), the lowest per-sequence coverage, and how many
    sequences fall below ``min_coverage``."""
    scored = sum(int(e["scored"]) for e in entries)
    valid = sum(int(e["gt_valid"]) for e in entries)
    per = [e["coverage"] for e in entries if e["coverage"] is not None]
    return {
        "overall": {
            "scored": scored,
            "gt_valid": valid,
            "coverage": scored / valid if valid else None,
            "min_sequence_coverage": min(per) if per else None,
            "num_sequences_below_min_coverage": sum(1 for c in per if c < min_coverage),
            "min_coverage": float(min_coverage),
        },
        "sequences": [dict(e) for e in entries],
    }


def warn_if_low(blocks: Mapping[str, Mapping], min_coverage: float) -> str | None:
    """One :class:`LowCoverageWarning` for a run whose coverage blocks (task -> :func:`summarize` output) have
    a sequence below ``min_coverage``; returns its text (None when nothing is low)."""
    parts = []
    for task in sorted(blocks):
        overall = blocks[task]["overall"]
        low = overall["num_sequences_below_min_coverage"]
        if low:
            worst = min((e for e in blocks[task]["sequences"] if e["coverage"] is not None), key=lambda e: e["coverage"])
            parts.append(f"{task}: {low} sequence(s) below, overall {overall['coverage']:.4f}, lowest {worst['coverage']:.4f} "
                         f"({worst['sequence_id']!r}: {worst['scored']} of {worst['gt_valid']} GT-valid "
                         f"{'points' if task == 'tracking' else 'pixels'} scored)")
    if not parts:
        return None
    text = (f"Syn4D: predictions cover less than min_coverage={min_coverage:g} of the ground truth; non-finite "
            f"predicted values are left out of the score (the official rule), so these scores rest on part of the "
            f"points only: " + "; ".join(parts))
    warnings.warn(text, LowCoverageWarning, stacklevel=3)
    return text


def coverage_entry(task: str, sequence_id: str, reference: Mapping, metrics: Mapping, options: Any) -> dict | None:
    """``{"sequence_id", "scored", "gt_valid", "coverage"}`` of one scored sequence (``coverage`` None when the
    GT has no valid point), for the tasks with a coverage (None for ``pose``)."""
    if task not in COVERAGE_TASKS:
        return None
    if task == "tracking":  # GT-valid points: visible with a finite GT point; scored: the formula's count
        scored, gt = int(metrics["count"]), np.asarray(reference["tracks_ref0"])
        finite = np.isfinite(gt[..., 0]) & np.isfinite(gt[..., 1]) & np.isfinite(gt[..., 2])
        valid = int(np.count_nonzero(np.asarray(reference["visibility"], dtype=bool) & finite))
    else:  # GT-valid pixels: finite, in (min, max]
        scored, lo, hi = int(metrics["valid_pixels"]), np.float64(options.depth_min_m), np.float64(options.depth_max_m)
        valid = int(sum(np.count_nonzero(np.isfinite(g) & (g > lo) & (g <= hi)) for g in np.asarray(reference["depth_m"])))
    return {"sequence_id": sequence_id, "scored": scored, "gt_valid": valid, "coverage": scored / valid if valid else None}


# ---- Reduce


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def mean_rows(rows: Sequence[Mapping]) -> dict:
    """Macro mean over sequences (spec §4.2), as the official ``_mean_metrics``: every key with a numeric
    (non-bool) value in some row, averaged over the rows that have it after dropping non-finite values (a key with
    nothing left is omitted); ``num_sequences`` is ``len(rows)``."""
    result: dict[str, Any] = {}
    for key in sorted({k for row in rows for k, v in row.items() if _is_number(v)}):
        values = np.asarray([float(row[key]) for row in rows if key in row and _is_number(row[key])], dtype=np.float64)
        values = values[np.isfinite(values)]
        if values.size:
            # exactly rounded, order-independent sum (module docstring): distributed runs agree bit for bit
            result[key] = fmean(values.tolist())
    result["num_sequences"] = len(rows)
    return result


def aggregate(rows: Sequence[Mapping]) -> dict:
    """Reduce half: ``{"overall", "by_variant", "by_scene", "sequences"}``, blocks sorted by key."""
    out: dict[str, Any] = {"overall": mean_rows(rows)}
    for field in ("variant", "scene"):
        groups: dict[str, list[Mapping]] = defaultdict(list)
        for row in rows:
            groups[str(row[field])].append(row)
        out[f"by_{field}"] = {k: mean_rows(v) for k, v in sorted(groups.items())}
    return {**out, "sequences": [dict(r) for r in rows]}


def compute_task(predictions: Sequence[Mapping], references: Sequence[Mapping], task: str,
                 options: Syn4DOptions = Syn4DOptions(), coverage: bool = False) -> dict:
    """One config's result: ``{"protocol", "task", "requested_sequences", overall, by_variant, by_scene, sequences, failures}``.

    ``coverage=True`` (what the metric module passes) adds ``"coverage": {"overall", "sequences"}`` for
    tracking and depth (:func:`summarize_coverage`) and warns once when a sequence is below
    ``options.min_coverage``; no other value changes."""
    entries: list | None = [] if coverage and task in COVERAGE_TASKS else None
    rows, failures = score_sequences(predictions, references, task, options, entries)
    out = {"protocol": PROTOCOL, "task": task, "requested_sequences": len(references), **aggregate(rows), "failures": failures}
    if entries is not None:
        out["coverage"] = summarize_coverage(entries, options.min_coverage)
        warn_if_low({task: out["coverage"]}, options.min_coverage)
    return out


def _sequence_order(results: Mapping[str, Mapping]) -> list[str]:
    """Reference order recovered from the per-task lists (each in reference order): a topological merge of the
    ``sequences`` and ``failures`` id lists of every task; pairs the lists do not order go by ``sequence_id``
    string order, the index order of the release ((variant, scene, sequence), spec §2.2)."""
    lists: list[list[str]] = []
    for task in sorted(results):
        result = results[task]
        lists.append([str(r["sequence_id"]) for r in result.get("sequences") or []])
        lists.append(list(dict.fromkeys(str(f["sequence_id"]) for f in result.get("failures") or [])))
    first: dict[str, int] = {}
    succ: dict[str, set[str]] = defaultdict(set)
    indeg: dict[str, int] = {}
    for ids in lists:
        for sid in ids:
            first.setdefault(sid, len(first))
            indeg.setdefault(sid, 0)
        for a, b in zip(ids, ids[1:]):
            if a != b and b not in succ[a]:
                succ[a].add(b)
                indeg[b] += 1
    heap = [s for s, d in indeg.items() if d == 0]
    heapq.heapify(heap)
    order: list[str] = []
    while heap:
        sid = heapq.heappop(heap)
        order.append(sid)
        for nxt in succ[sid]:
            indeg[nxt] -= 1
            if indeg[nxt] == 0:
                heapq.heappush(heap, nxt)
    if len(order) < len(first):  # inconsistent lists (a cycle): the rest by first appearance
        seen = set(order)
        order += sorted((s for s in first if s not in seen), key=first.__getitem__)
    return order


def to_official_summary(results: Mapping[str, Mapping], sequence_order: Sequence[str] | None = None) -> dict:
    """Merge per-task :func:`compute_task` results into the official ``evaluate.py`` JSON shape.

    ``{"protocol", "requested_sequences", "tasks": {task: {overall, by_variant, by_scene, sequences}},
    "failures"}``. Tasks without rows are dropped. Failures are merged in reference order (``sequence_order``
    when given, else :func:`_sequence_order`): per sequence the task-less "missing prediction" failure once,
    then the task failures in sorted task order."""
    for task in results:
        check_choice("task", task, TASKS)
    requested = {int(r["requested_sequences"]) for r in results.values()}
    if len(requested) > 1:
        raise ValueError(f"to_official_summary: the task results disagree on requested_sequences: {sorted(requested)}")
    tasks = {task: {k: results[task][k] for k in BLOCK_KEYS}
             for task in sorted(results) if results[task].get("sequences")}
    missing: dict[str, dict] = {}
    task_failures: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for task in sorted(results):
        for failure in results[task].get("failures") or []:
            sid = str(failure["sequence_id"])
            if "task" in failure:
                task_failures[sid][str(failure["task"])].append(dict(failure))
            else:
                missing.setdefault(sid, dict(failure))
    order = list(dict.fromkeys(sequence_order if sequence_order is not None else _sequence_order(results)))
    # Failures of ids outside the given order go last, in first-seen order.
    known = set(order)
    order += [sid for sid in dict.fromkeys([*missing, *task_failures]) if sid not in known]
    failures: list[dict] = []
    for sid in order:
        if sid in missing:
            failures.append(missing[sid])
        for task in sorted(task_failures.get(sid, {})):
            failures.extend(task_failures[sid][task])
    return {"protocol": PROTOCOL, "requested_sequences": requested.pop() if requested else 0, "tasks": tasks,
            "failures": failures}
