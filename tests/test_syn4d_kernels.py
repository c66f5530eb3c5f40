"""Syn4D's compiled kernels (numba; the one implementation of the depth and tracking passes) against the
straightforward numpy formulas of ``tests/oracles/syn4d.py`` (the official evaluator's shape), and the pose
batching against its one-call-per-formula form. Depth: the same valid pixels, scale, shift and ``delta*``
(exact decisions), the means within 1e-12 relative (only the summation order differs). Tracking and pose:
bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracles import syn4d as oracle

from perckit.syn4d import metric as core
from perckit.syn4d.metric import _kernels
from perckit.syn4d.metric import rotation_error_deg, umeyama_sim3

EXACT_DEPTH_KEYS = ("valid_pixels", "scale", "shift", "delta1", "delta2", "delta3")


def _outcome(fn):
    """``fn()``, or the text of its ValueError."""
    try:
        return fn()
    except ValueError as e:
        return f"ValueError: {e}"


def _assert_depth_close(a: dict, b: dict, rel: float = 1e-12) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if k in EXACT_DEPTH_KEYS:
            assert a[k] == b[k] and type(a[k]) is type(b[k]), k
        else:
            assert type(a[k]) is float and a[k] == pytest.approx(b[k], rel=rel, abs=1e-13), k


def _random_depth(rng, trial):
    t, h, w = int(rng.integers(1, 4)), int(rng.integers(1, 40)), int(rng.integers(1, 40))
    kind = trial % 5
    if kind == 0:
        gt = rng.uniform(0, 400, (t, h, w))
    elif kind == 1:
        gt = rng.lognormal(1, 3, (t, h, w))  # many binades, subnormal-free
    elif kind == 2:
        gt = np.round(rng.uniform(0, 5, (t, h, w)))  # heavy ties
    elif kind == 3:
        gt = np.full((t, h, w), 7.25)
    else:
        gt = 10.0 + rng.integers(0, 3, (t, h, w)) * 2.0**-19  # ties one float32 ulp apart
    gt = gt.astype(np.float32)
    gt[rng.random(gt.shape) < 0.05] = np.nan
    gt[rng.random(gt.shape) < 0.02] = np.inf
    ph, pw = (h, w) if trial % 3 == 0 else (max(1, h // 2), max(1, w // 2))
    pred = rng.uniform(-1, 100, (t, ph, pw)).astype(np.float32)
    if trial % 4 == 0:
        pred = np.round(pred)
    pred[rng.random(pred.shape) < 0.03] = np.nan
    pred[rng.random(pred.shape) < 0.02] = np.inf
    return gt, pred


def test_depth_matches_the_numpy_formulas(monkeypatch):
    """Every alignment, float32 and float64 GT, random bounds; records which alignment route each scored case
    took (the streaming radix medians or the valid values), so that a route refusing everything fails."""
    streamed = []
    medians = _kernels.depth_medians
    monkeypatch.setattr(_kernels, "depth_medians", lambda *a: streamed.append(1) or medians(*a))
    rng = np.random.default_rng(11)
    routes = {"streamed": 0, "valid_values": 0}
    for trial in range(300):
        gt, pred = _random_depth(rng, trial)
        if trial % 5 == 4:
            gt = gt.astype(np.float64) * (1 + 2.0**-40)  # not float32-representable
        align = ("scale", "metric", "scale_shift")[trial % 3]
        bounds = {} if trial % 4 else {"min_depth": float(rng.uniform(0, 2)), "max_depth": float(rng.uniform(3, 500))}
        before = len(streamed)
        ours = _outcome(lambda: core.depth_metrics(gt, pred, align=align, **bounds))
        reference = _outcome(lambda: oracle.depth_metrics(gt, pred, align=align, **bounds))
        if isinstance(reference, str):
            assert ours == reference
            continue
        _assert_depth_close(ours, reference)
        if align != "metric":
            routes["streamed" if len(streamed) > before else "valid_values"] += 1
    assert routes["streamed"] > 40 and routes["valid_values"] > 40, routes


def test_depth_is_deterministic_and_blocks_do_not_matter(monkeypatch):
    rng = np.random.default_rng(3)
    gt = rng.lognormal(2, 1, (3, 60, 70)).astype(np.float32)
    pred = (gt[:, ::2, ::2] * rng.uniform(0.5, 1.5, (3, 30, 35))).astype(np.float32)
    first = core.depth_metrics(gt, pred)
    assert core.depth_metrics(gt, pred) == first
    for block in (1, 7, 4096):  # block sums are added exactly (math.fsum): blocking changes nothing material
        monkeypatch.setattr(_kernels, "DEPTH_BLOCK", block)
        _assert_depth_close(core.depth_metrics(gt, pred), first, rel=1e-14)


def test_depth_medians_are_exact():
    rng = np.random.default_rng(5)
    cases = [np.full(1, 3.0), np.full(2, 3.0), np.array([1.0, 2.0]), np.array([2.0, 1.0, 3.0]),
             np.array([np.finfo(np.float32).tiny, 1e-40, 5e-45, 1.0]),  # normal and subnormal float32
             np.array([1.0, np.nextafter(np.float32(1.0), np.float32(2.0))] * 3, dtype=np.float32)]
    cases += [rng.lognormal(0, 4, int(rng.integers(1, 500))) for _ in range(100)]
    cases += [np.round(rng.uniform(0, 4, int(rng.integers(1, 500)))) for _ in range(100)]
    for values in cases:
        g = np.asarray(values, dtype=np.float32)
        p = g[::-1].copy() * np.float32(3)
        valid = np.isfinite(g) & np.isfinite(p) & (g > 0) & (g <= 1e30) & (p > 0)
        n, median_g, median_p = _kernels.depth_medians(g, p, 0.0, 1e30)
        assert n == int(valid.sum())
        if n:
            assert median_g == np.median(g[valid].astype(np.float64))
            assert median_p == np.median(p[valid].astype(np.float64))


def test_tracking_median_is_exact():
    rng = np.random.default_rng(6)
    cases = [np.zeros(1), np.zeros(2), np.array([0.0, np.inf]), np.array([3.0, 1.0, np.inf, 0.0]),
             1.0 + np.arange(9) * 2.0**-52, np.array([5e-324, 0.0, 1e308])]
    cases += [rng.lognormal(0, 30, int(rng.integers(1, 400))) for _ in range(200)]
    cases += [np.round(rng.uniform(0, 3, int(rng.integers(1, 400)))) for _ in range(200)]
    for values in cases:
        assert _kernels.median_nonnegative(values) == np.median(values)
    assert math.isnan(_kernels.median_nonnegative(np.zeros(0)))


def _random_tracks(rng, trial):
    t, q = int(rng.integers(1, 10)), int(rng.integers(1, 50))
    gt = rng.uniform(-3, 3, (t, q, 3)).astype(np.float32 if trial % 2 else np.float64)
    pred = gt * rng.uniform(0.1, 3) + rng.normal(0, 10 ** rng.uniform(-3, 0), gt.shape)
    if trial % 5 == 0:
        pred = np.round(pred, 1)  # ties among the norms and at the thresholds
    if trial % 7 == 0:
        pred[:] = 0.0  # scale 0
    gt[rng.random(gt.shape) < 0.05] = np.nan
    pred[rng.random(pred.shape) < 0.03] = np.inf
    return gt, pred, rng.random((t, q)) > 0.3, rng.random(q) > rng.uniform(0, 1)


def test_tracking_matches_the_numpy_formulas_bit_for_bit():
    rng = np.random.default_rng(7)
    scored = 0
    for trial in range(400):
        gt, pred, valid, dynamic = _random_tracks(rng, trial)
        thresholds = (0.1, 0.3, 0.5, 1.0) if trial % 3 else (0.05, 2, 1.0)
        ours = _outcome(lambda: core.tracking_metrics(gt, pred, valid, dynamic, thresholds=thresholds))
        reference = _outcome(lambda: oracle.tracking_metrics(gt, pred, valid, dynamic, thresholds=thresholds))
        assert ours == reference
        if isinstance(ours, dict):
            assert list(ours) == list(reference) and [type(v) for v in ours.values()] == [type(v) for v in reference.values()]
            scored += 1
    assert scored > 300


def _pose_reference(gt_c2w, pred_c2w):
    """Spec §4.1 pose, one numpy call per formula (the official evaluator's shape)."""
    gt, pred = oracle.relative_to_first(gt_c2w), oracle.relative_to_first(pred_c2w)
    scale, rotation, translation = umeyama_sim3(pred[:, :3, 3], gt[:, :3, 3])
    aligned = pred.copy()
    aligned[:, :3, 3] = (scale * (rotation @ pred[:, :3, 3].T)).T + translation
    aligned[:, :3, :3] = rotation[None] @ pred[:, :3, :3]
    position_error = np.linalg.norm(aligned[:, :3, 3] - gt[:, :3, 3], axis=-1)
    rotation_error = rotation_error_deg(aligned[:, :3, :3], gt[:, :3, :3])
    gt_rel = np.linalg.inv(gt[:-1]) @ gt[1:]
    pred_rel = np.linalg.inv(aligned[:-1]) @ aligned[1:]
    rpe_rotation = rotation_error_deg(pred_rel[:, :3, :3], gt_rel[:, :3, :3])
    rpe_translation = np.linalg.norm(pred_rel[:, :3, 3] - gt_rel[:, :3, 3], axis=-1)
    a, b = pred_rel[:, :3, 3], gt_rel[:, :3, 3]
    norm = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    ok = norm > 1e-12
    angle = np.full(norm.shape, np.nan)
    angle[ok] = np.degrees(np.arccos(np.clip(np.sum(a[ok] * b[ok], axis=-1) / norm[ok], -1, 1)))
    pair = np.maximum(rpe_rotation, np.nan_to_num(angle, nan=180.0))
    return {
        "ate_rmse": float(np.sqrt(np.mean(position_error**2))), "position_mean": float(np.mean(position_error)),
        "position_median": float(np.median(position_error)), "rotation_mean_deg": float(np.mean(rotation_error)),
        "rotation_median_deg": float(np.median(rotation_error)),
        "rpe_translation_rmse": float(np.sqrt(np.mean(rpe_translation**2))),
        "rpe_rotation_mean_deg": float(np.mean(rpe_rotation)),
        "translation_direction_mean_deg": float(np.nanmean(angle)) if np.isfinite(angle).any() else math.nan,
        "auc_5deg": float(np.mean(pair <= 5.0)), "auc_10deg": float(np.mean(pair <= 10.0)),
        "auc_20deg": float(np.mean(pair <= 20.0)), "alignment_scale": float(scale), "num_frames": int(gt.shape[0]),
    }


def _random_rotations(rng, n, sigma):
    """Rotation matrices exp([w]x) for w ~ N(0, sigma²), by Rodrigues' formula."""
    w = rng.normal(0, sigma, (n, 3))
    theta = np.linalg.norm(w, axis=1)[:, None, None]
    k = np.zeros((n, 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -w[:, 2], w[:, 1], -w[:, 0]
    k -= np.swapaxes(k, 1, 2)
    k /= np.where(theta > 0, theta, 1.0)
    return np.eye(3) + np.sin(theta) * k + (1 - np.cos(theta)) * (k @ k)


def test_pose_batched_calls_match_the_straightforward_formulas_bit_for_bit():
    rng = np.random.default_rng(8)
    for trial in range(300):
        t = int(rng.integers(3, 40))
        gt = np.tile(np.eye(4), (t, 1, 1))
        gt[:, :3, :3] = _random_rotations(rng, t, 1.0 if trial % 3 else 0.0)
        if trial % 5 == 0:
            gt[:, :3, :3] = gt[:, :3, :3] @ np.diag([1.0, 1.0, -1.0])  # det -1, as the Unreal GT
        gt[:, :3, 3] = np.cumsum(rng.normal(0, 0.3, (t, 3)), axis=0)
        pred = gt.copy()
        pred[:, :3, :3] = _random_rotations(rng, t, 10 ** rng.uniform(-6, -1)) @ pred[:, :3, :3]
        pred[:, :3, 3] = pred[:, :3, 3] * rng.uniform(0.2, 5) + rng.normal(0, 10 ** rng.uniform(-6, -1), (t, 3))
        if trial % 7 == 0 and t > 3:
            pred[2], gt[3] = pred[1], gt[2]  # zero translations: NaN angles
        if trial % 11 == 0:
            pred = pred.astype(np.float32)
        ours, reference = core.pose_metrics(gt, pred), _pose_reference(gt, pred)
        assert list(ours) == list(reference)
        for k, v in reference.items():
            assert type(ours[k]) is type(v) and (ours[k] == v or (math.isnan(v) and math.isnan(ours[k]))), (trial, k)
