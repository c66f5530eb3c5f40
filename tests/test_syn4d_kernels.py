"""Syn4D compiled kernels (numba) against the numpy paths and the straightforward official-style formulas.

The numpy path runs when numba is missing; here it is forced by replacing the kernel getters with
``lambda: None``. Depth: the same valid pixels, scale, shift and ``delta*`` (exact decisions), the
means within 1e-12 relative (only the summation order differs). Tracking and pose: bit for bit.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from perckit.syn4d import _kernels
from perckit.syn4d import metrics as core
from perckit.syn4d.geometry import relative_to_first, rotation_error_deg, umeyama_sim3

needs_numba = pytest.mark.skipif(_kernels.depth_kernels() is None, reason="numba is not importable")
EXACT_DEPTH_KEYS = ("valid_pixels", "scale", "shift", "delta1", "delta2", "delta3")


@pytest.fixture
def numpy_path(monkeypatch):
    """Run the metrics as without numba."""
    monkeypatch.setattr(_kernels, "depth_kernels", lambda: None)
    monkeypatch.setattr(_kernels, "tracking_kernel", lambda: None)


def _both(fn, monkeypatch):
    """(compiled result, numpy-path result) of ``fn()``; an exception becomes its text."""
    out = []
    for disable in (False, True):
        with monkeypatch.context() as m:
            if disable:
                m.setattr(_kernels, "depth_kernels", lambda: None)
                m.setattr(_kernels, "tracking_kernel", lambda: None)
            try:
                out.append(fn())
            except ValueError as e:
                out.append(f"ValueError: {e}")
    return out


def _assert_depth_close(a: dict, b: dict, rel: float = 1e-12) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if k in EXACT_DEPTH_KEYS:
            assert a[k] == b[k] and type(a[k]) is type(b[k]), k
        else:
            assert type(a[k]) is float and a[k] == pytest.approx(b[k], rel=rel, abs=1e-13), k


def _official_depth(gt, pred, lo=0.001, hi=300.0):
    """Spec §4.1 depth, the straightforward way: whole arrays in float64, boolean masks, np.median / np.mean."""
    h, w = gt.shape[1:]
    p = pred.astype(np.float32)
    if p.shape[1:] != (h, w):
        p = np.stack([cv2.resize(f, (w, h), interpolation=cv2.INTER_LINEAR) for f in p])
    p, g = p.astype(np.float64), gt.astype(np.float64)
    valid = np.isfinite(g) & np.isfinite(p) & (g > lo) & (g <= hi) & (p > 0)
    g, p = g[valid], p[valid]
    s = np.median(g) / max(np.median(p), 1e-12)
    p, g = np.clip(s * p, lo, hi), np.clip(g, lo, hi)
    diff, ld = p - g, np.log(p) - np.log(g)
    ratio = np.maximum(g / p, p / g)
    return {"abs_rel": np.mean(np.abs(diff) / g), "sq_rel": np.mean(diff * diff / g), "rmse": np.sqrt(np.mean(diff * diff)),
            "rmse_log": np.sqrt(np.mean(ld * ld)), "silog": np.sqrt(max(0.0, np.mean(ld * ld) - np.mean(ld) ** 2)) * 100.0,
            "delta1": np.mean(ratio < 1.25), "delta2": np.mean(ratio < 1.25**2), "delta3": np.mean(ratio < 1.25**3),
            "scale": s, "valid_pixels": int(valid.sum())}


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


@needs_numba
def test_depth_compiled_matches_numpy_path_and_official_formulas(monkeypatch):
    rng = np.random.default_rng(11)
    scored = 0
    for trial in range(300):
        gt, pred = _random_depth(rng, trial)
        align = ("scale", "metric", "scale_shift")[trial % 3]
        bounds = {} if trial % 4 else {"min_depth": float(rng.uniform(0, 2)), "max_depth": float(rng.uniform(3, 500))}
        compiled, numpy_ = _both(lambda: core.depth_metrics(gt, pred, align=align, **bounds), monkeypatch)
        if isinstance(numpy_, str):
            assert compiled == numpy_
            continue
        _assert_depth_close(compiled, numpy_)
        if align == "scale":
            official = _official_depth(gt, pred, **{"lo": bounds.get("min_depth", 0.001), "hi": bounds.get("max_depth", 300.0)})
            for k, v in official.items():
                if k in EXACT_DEPTH_KEYS:
                    assert compiled[k] == v, k
                else:
                    assert compiled[k] == pytest.approx(v, rel=1e-12, abs=1e-13), k
            scored += 1
    assert scored > 50


@needs_numba
def test_depth_compiled_is_deterministic_and_blocks_do_not_matter(monkeypatch):
    rng = np.random.default_rng(3)
    gt = rng.lognormal(2, 1, (3, 60, 70)).astype(np.float32)
    pred = (gt[:, ::2, ::2] * rng.uniform(0.5, 1.5, (3, 30, 35))).astype(np.float32)
    first = core.depth_metrics(gt, pred)
    assert core.depth_metrics(gt, pred) == first
    for block in (1, 7, 4096):  # block sums are added exactly (math.fsum): blocking changes nothing material
        monkeypatch.setattr(_kernels, "DEPTH_BLOCK", block)
        _assert_depth_close(core.depth_metrics(gt, pred), first, rel=1e-14)


@needs_numba
def test_depth_medians_are_exact():
    kernels = _kernels.depth_kernels()
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
        n, median_g, median_p = _kernels.depth_medians(kernels, g, p, 0.0, 1e30)
        assert n == int(valid.sum())
        if n:
            assert median_g == np.median(g[valid].astype(np.float64))
            assert median_p == np.median(p[valid].astype(np.float64))


@needs_numba
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


@needs_numba
def test_tracking_compiled_matches_numpy_path_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(7)
    scored = 0
    for trial in range(400):
        gt, pred, valid, dynamic = _random_tracks(rng, trial)
        thresholds = (0.1, 0.3, 0.5, 1.0) if trial % 3 else (0.05, 2, 1.0)
        compiled, numpy_ = _both(lambda: core.tracking_metrics(gt, pred, valid, dynamic, thresholds=thresholds), monkeypatch)
        assert list(compiled) == list(numpy_) if isinstance(compiled, dict) else compiled == numpy_
        if isinstance(compiled, dict):
            assert compiled == numpy_ and [type(v) for v in compiled.values()] == [type(v) for v in numpy_.values()]
            scored += 1
    assert scored > 300


def _pose_reference(gt_c2w, pred_c2w):
    """Spec §4.1 pose, one numpy call per formula (the official evaluator's shape)."""
    gt, pred = relative_to_first(np.asarray(gt_c2w, np.float64)), relative_to_first(np.asarray(pred_c2w, np.float64))
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


def test_numpy_path_scores_the_spec_vectors(numpy_path):
    """Without numba the metrics still run (the D1 / T1 numbers are checked in test_syn4d_metric)."""
    gt = np.array([[[1, 2, 3], [4, 0, 5]]], dtype=np.float32)
    r = core.depth_metrics(gt, np.array([[[1, 2, 3], [8, 7, -1]]], dtype=np.float32))
    assert r["valid_pixels"] == 4 and r["abs_rel"] == pytest.approx(0.25, rel=1e-15)
    tracks = np.ones((2, 3, 3))
    r = core.tracking_metrics(tracks, tracks, np.ones((2, 3), bool), np.zeros(3, bool))
    assert r["scale"] == 1.0 and r["epe"] == 0.0 and "dynamic_apd" not in r
