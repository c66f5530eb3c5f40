"""Syn4D geometry: the Umeyama Sim(3) fit (spec §4.1).

Both reproduce the official evaluator operation for operation, in float64, so
that the metric numbers agree with the official ones to the last few ulps.
"""

from __future__ import annotations

import numpy as np


def umeyama_sim3(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Least-squares similarity ``dst ≈ c · R · src + t`` for row-vector points (spec §4.1).

    ``Σ = (P−μP)ᵀ(G−μG)/N``; ``Σ = U S Vᵀ``; ``D = diag(1, 1, −1)`` if
    ``det(V Uᵀ) < 0``; ``R = V D Uᵀ``; ``c = Σ(S·diag D) / var`` with
    ``var = mean‖P−μP‖²``; ``t = μG − c R μP``.

    Raises ``ValueError`` for mismatched or non-``[N, 3]`` inputs, N < 3, and
    ``ValueError("Degenerate source trajectory")`` when ``var <= 1e-12``.
    """
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
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


def relative_to_first(c2w: np.ndarray) -> np.ndarray:
    """``inv(X[0]) @ X`` for a ``[T, 4, 4]`` stack (full 4x4 inverse), in float64."""
    poses = np.asarray(c2w, dtype=np.float64)
    return np.linalg.inv(poses[0])[None] @ poses


def rotation_error_deg(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Geodesic angle in degrees between rotation stacks: ``arccos(clip((tr(Rpᵀ Rg) − 1)/2, −1, 1))``."""
    relative = np.swapaxes(np.asarray(pred, dtype=np.float64), -1, -2) @ np.asarray(gt, dtype=np.float64)
    cosine = np.clip((np.trace(relative, axis1=-2, axis2=-1) - 1.0) * 0.5, -1.0, 1.0)
    return np.degrees(np.arccos(cosine))
