"""The Fréchet distance between two Gaussians fitted to feature sets: the math of FVD and FAD.

Each set of feature rows (``(n, d)``: I3D features of video clips for FVD, VGGish frame embeddings for
FAD) is summarised by its mean and covariance; the distance of the two Gaussians is (Dowson & Landau, 1982)

    FD = |mu1 - mu2|^2 + Tr(S1 + S2 - 2 (S1 S2)^(1/2))

The conventions follow the reference implementations:

- the covariance is the unbiased one (``ddof=1``): Google's Fréchet Audio Distance divides by ``n - 1``
  (``create_embeddings_beam.ComputeMeanAndCovariance``), TF-GAN's
  ``frechet_classifier_distance_from_activations`` (which the original FVD code calls) scales to the
  unbiased covariance, gudgud96's ``frechet_audio_distance`` uses ``np.cov(rowvar=False)``. (StyleGAN-V's
  ``FeatureStats.get_mean_cov`` divides by ``n``; the two differ by the factor ``n / (n - 1)``, which only
  matters for small sets.)
- ``(S1 S2)^(1/2)`` is ``scipy.linalg.sqrtm`` of the product; if it is not finite (a singular product),
  ``eps`` is added to both diagonals and it is computed again (1e-6 as pytorch-fid and gudgud96's FAD;
  Google's FAD uses 1e-7); a small imaginary part is numerical noise and dropped (the references accept
  ``|imag| <= 1e-3`` on the diagonal).

Two departures, both where the references' computation is unreliable, never where it is sound: when either
covariance is singular (fewer rows than feature dimensions, as in every per-category FVD over fewer than 400
clips, or repeated rows), the product ``S1 S2`` can be defective and ``sqrtm`` of it loses up to half the
digits (a relative error of 2e-6 on a 3-dimensional example, and asymmetric in the two sets); the trace is then
taken from the symmetric form ``Tr((S1^(1/2) S2 S1^(1/2))^(1/2))`` (equal in exact arithmetic, as TF-GAN
computes it, real by construction, with the rounding noise of the zero eigenvalues set to 0). The same form replaces the
references' error on a large imaginary part. With both covariances positive definite (the main ranking's
1,100 clips for FVD, the thousands of 0.96 s frames for FAD) the value is the references' computation.

The rows are sorted before the statistics are computed, so the value does not depend on the order in which
the records arrive (evaluate's distributed mode gathers them in process order). With fewer rows than
feature dimensions the covariance is singular and the estimate is biased upwards (FVD and FAD are meant for
hundreds of samples or more); the value is still reported, and a set of fewer than two rows has no
covariance at all: :func:`fd_of_features` returns ``None`` for it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: added to both covariance diagonals when the square root of their product is not finite
SINGULAR_EPS = 1e-6
#: the largest imaginary part on the diagonal of sqrtm(S1 S2) dropped as numerical noise
IMAG_ATOL = 1e-3


def _rows(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` as a finite float64 ``(n, d)`` array (a 1-D array is ``n`` rows of one feature)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{name}: expected feature rows of shape (n, d), got an array of shape {np.shape(x)}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: the features are not all finite ({int((~np.isfinite(a)).sum())} NaN / inf values)")
    return a


def _sorted_rows(a: np.ndarray) -> np.ndarray:
    """The rows of ``a`` in lexicographic order (the statistics then do not depend on the row order)."""
    if a.shape[0] < 2 or a.shape[1] == 0:
        return a
    return a[np.lexsort(a.T[::-1])]


def feature_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean ``(d,)`` and unbiased covariance ``(d, d)`` (``ddof=1``) of the feature rows ``x`` ``(n, d)``.

    Needs at least two rows (:class:`ValueError` otherwise: one row has no covariance)."""
    a = _rows(x, "feature_stats")
    if a.shape[0] < 2:
        raise ValueError(f"feature_stats: a covariance needs at least 2 feature rows, got {a.shape[0]}")
    a = _sorted_rows(a)
    mu = a.mean(axis=0)
    sigma = np.atleast_2d(np.cov(a, rowvar=False, ddof=1))
    return mu, sigma


def _sqrtm(m: np.ndarray) -> np.ndarray:
    """``scipy.linalg.sqrtm`` without its warning on singular input (expected here: a covariance of fewer
    rows than dimensions is singular; the caller checks the result)."""
    from scipy import linalg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", linalg.LinAlgWarning)
        with np.errstate(all="ignore"):
            return np.asarray(linalg.sqrtm(m))


def _positive_definite(s: np.ndarray) -> bool:
    """Whether the symmetric matrix ``s`` is numerically positive definite: its smallest eigenvalue above
    ``d * machine epsilon`` times its largest (numpy's ``matrix_rank`` tolerance)."""
    w = np.linalg.eigvalsh((s + s.T) / 2.0)
    return bool(w[-1] > 0 and w[0] > w[-1] * s.shape[0] * np.finfo(np.float64).eps)


def _clipped_eigenvalues(w: np.ndarray, d: int) -> np.ndarray:
    """Eigenvalues of a symmetric positive semi-definite matrix with the rounding noise around 0 (below ``d *
    machine epsilon`` times the largest, numpy's ``matrix_rank`` tolerance, or negative) set to 0: the square
    root would turn that noise of order 1e-16 into errors of order 1e-8."""
    top = float(w.max(initial=0.0))
    return np.where(w > top * d * np.finfo(np.float64).eps, w, 0.0)


def _psd_sqrt(s: np.ndarray) -> np.ndarray:
    """The symmetric square root of a symmetric positive semi-definite matrix."""
    w, v = np.linalg.eigh((s + s.T) / 2.0)
    return (v * np.sqrt(_clipped_eigenvalues(w, s.shape[0]))) @ v.T


def _trace_sqrt_symmetric(s1: np.ndarray, s2: np.ndarray) -> float:
    """``Tr((S1^(1/2) S2 S1^(1/2))^(1/2))``, which equals ``Tr((S1 S2)^(1/2))`` for covariances."""
    r = _psd_sqrt(s1)
    m = r @ s2 @ r
    w = np.linalg.eigvalsh((m + m.T) / 2.0)
    return float(np.sqrt(_clipped_eigenvalues(w, m.shape[0])).sum())


def trace_sqrt_product(s1: np.ndarray, s2: np.ndarray, eps: float = SINGULAR_EPS) -> float:
    """``Tr((S1 S2)^(1/2))`` (see the module docstring): with both covariances positive definite as the
    references compute it (``sqrtm`` of the product, ``eps`` on both diagonals when that is not finite, the
    real part when the imaginary part on the diagonal is at most :data:`IMAG_ATOL`); the symmetric form when
    either is singular or the imaginary part is larger."""
    if not (_positive_definite(s1) and _positive_definite(s2)):
        return _trace_sqrt_symmetric(s1, s2)
    covmean = _sqrtm(s1 @ s2)
    if not np.isfinite(covmean).all():
        offset = np.eye(s1.shape[0]) * eps
        covmean = _sqrtm((s1 + offset) @ (s2 + offset))
    if not np.isfinite(covmean).all():
        return _trace_sqrt_symmetric(s1, s2)
    if np.iscomplexobj(covmean):
        if not np.allclose(np.diagonal(covmean).imag, 0.0, atol=IMAG_ATOL):
            return _trace_sqrt_symmetric(s1, s2)
        covmean = covmean.real
    return float(np.trace(covmean))


def frechet_distance(mu1: np.ndarray, s1: np.ndarray, mu2: np.ndarray, s2: np.ndarray, eps: float = SINGULAR_EPS) -> float:
    """The Fréchet distance ``|mu1 - mu2|^2 + Tr(S1 + S2 - 2 (S1 S2)^(1/2))`` of two Gaussians.

    ``mu`` are ``(d,)`` means, ``s`` ``(d, d)`` covariances (a scalar mean / variance is one dimension);
    the two must have the same ``d`` (:class:`ValueError` otherwise). Symmetric in its two Gaussians;
    exactly 0 for two identical Gaussians."""
    m1 = np.atleast_1d(np.asarray(mu1, dtype=np.float64))
    m2 = np.atleast_1d(np.asarray(mu2, dtype=np.float64))
    c1 = np.atleast_2d(np.asarray(s1, dtype=np.float64))
    c2 = np.atleast_2d(np.asarray(s2, dtype=np.float64))
    if m1.ndim != 1 or m1.shape != m2.shape:
        raise ValueError(f"frechet_distance: the means must be vectors of one length, got shapes {m1.shape} and {m2.shape}")
    d = m1.shape[0]
    if c1.shape != (d, d) or c2.shape != (d, d):
        raise ValueError(f"frechet_distance: expected ({d}, {d}) covariances for {d}-dimensional means, got {c1.shape} and {c2.shape}")
    if np.array_equal(m1, m2) and np.array_equal(c1, c2):
        return 0.0  # exact; the numerical square root of a singular S @ S would leave rounding of order 1e-8
    diff = m1 - m2
    return float(diff @ diff + np.trace(c1) + np.trace(c2) - 2.0 * trace_sqrt_product(c1, c2, eps))


def fd_of_features(a: np.ndarray, b: np.ndarray) -> float | None:
    """The Fréchet distance between Gaussians fitted (:func:`feature_stats`) to the feature rows ``a`` and
    ``b`` (``(n_a, d)`` and ``(n_b, d)``, the same ``d``).

    ``None`` when either side has fewer than 2 rows: a Gaussian needs a covariance, and one row (or none)
    has none. For FVD a row is one clip, for FAD one 0.96 s audio frame."""
    ra = _rows(a, "fd_of_features (first set)") if np.size(a) else np.zeros((0, 0))
    rb = _rows(b, "fd_of_features (second set)") if np.size(b) else np.zeros((0, 0))
    if ra.shape[0] < 2 or rb.shape[0] < 2:
        return None
    if ra.shape[1] != rb.shape[1]:
        raise ValueError(f"fd_of_features: the two sets have {ra.shape[1]} and {rb.shape[1]} feature dimensions")
    mu1, s1 = feature_stats(ra)
    mu2, s2 = feature_stats(rb)
    return frechet_distance(mu1, s1, mu2, s2)


def pooled_rows(records: Sequence[Mapping[str, Any]], side: str) -> np.ndarray:
    """The feature rows ``record[side]`` of every record, stacked (records without rows add none), as the
    references pool every clip's / every frame's features of a set into one Gaussian."""
    parts = [np.asarray(r[side], dtype=np.float64) for r in records if r.get(side) is not None and np.size(r[side])]
    if not parts:
        return np.zeros((0, 0), dtype=np.float64)
    return np.concatenate([p if p.ndim == 2 else p[None, :] for p in parts], axis=0)


def pooled_fd(records: Sequence[Mapping[str, Any]], a: str = "edited", b: str = "source") -> float | None:
    """:func:`fd_of_features` of the pooled rows ``a`` against the pooled rows ``b`` of ``records``
    (``None`` when either side pools fewer than 2 rows)."""
    return fd_of_features(pooled_rows(records, a), pooled_rows(records, b))
