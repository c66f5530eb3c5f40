"""Syn4D geometry: the Unreal camera conversion (spec §2.4) and the Umeyama Sim(3) fit (spec §4.1).

Both reproduce the official evaluator operation for operation, in float64, so
that the metric numbers agree with the official ones to the last few ulps.
"""

from __future__ import annotations

import numpy as np

#: OpenCV camera axes (x right, y down, z forward) -> Unreal axes (forward +x, right +y, up +z).
OPENCV_TO_UNREAL = np.array([[0, 0, 1], [1, 0, 0], [0, -1, 0]], dtype=np.float64)


def unreal_to_c2w(x_cm: float, y_cm: float, z_cm: float, yaw_deg: float, pitch_deg: float, roll_deg: float) -> np.ndarray:
    """One camera CSV row to a 4x4 float64 camera-to-world matrix (spec §2.4).

    ``c2w[:3, :3] = Rz(yaw) · Ry'(pitch) · Rx'(roll) · M`` and ``c2w[:3, 3] = [x, y, z] / 100``
    (centimetres to metres). The rotation block has determinant -1 because the
    Unreal world is left-handed; do not treat it as an SO(3) element.
    """
    yaw, pitch, roll = np.radians([float(yaw_deg), float(pitch_deg), float(roll_deg)])
    r_yaw = np.array([[np.cos(yaw), -np.sin(yaw), 0], [np.sin(yaw), np.cos(yaw), 0], [0, 0, 1]], dtype=np.float64)
    r_pitch = np.array([[np.cos(pitch), 0, -np.sin(pitch)], [0, 1, 0], [np.sin(pitch), 0, np.cos(pitch)]], dtype=np.float64)
    r_roll = np.array([[1, 0, 0], [0, np.cos(roll), np.sin(roll)], [0, -np.sin(roll), np.cos(roll)]], dtype=np.float64)
    out = np.eye(4, dtype=np.float64)
    out[:3, :3] = r_yaw @ r_pitch @ r_roll @ OPENCV_TO_UNREAL
    out[:3, 3] = np.array([float(x_cm), float(y_cm), float(z_cm)], dtype=np.float64) / 100.0
    return out


def unreal_rows_to_c2w(rows: np.ndarray) -> np.ndarray:
    """``[T, 6]`` rows ``(x_cm, y_cm, z_cm, yaw_deg, pitch_deg, roll_deg)`` to ``[T, 4, 4]`` float64.

    Applies :func:`unreal_to_c2w` row by row (rather than batched matrix
    products) so every matrix is bit-identical to the scalar conversion, which
    is the official one.
    """
    arr = np.asarray(rows, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 6:
        raise ValueError(f"camera rows: expected shape [T, 6] (x, y, z, yaw, pitch, roll), got {arr.shape}")
    if arr.shape[0] == 0:
        return np.zeros((0, 4, 4), dtype=np.float64)
    return np.stack([unreal_to_c2w(*row) for row in arr.tolist()]).astype(np.float64, copy=False)


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
