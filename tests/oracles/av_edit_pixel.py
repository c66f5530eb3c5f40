"""The model-free edit-quality metrics per frame as perckit computed them before issue 32 (commit e922da3): exact
integer window sums (OpenCV's box filter), the SSIM formula in float64 over whole-frame maps, and a second full-frame
SSIM map of the pasted frame for ``bg_ssim``. The tests compare the compiled path of
:mod:`perckit.reason_av_edit.quality.pixel` with it (equal numbers within rounding)."""

from __future__ import annotations

import math

import numpy as np


def psnr_from_mse(mse: float, cap: float) -> float:
    return float(cap) if mse <= 0.0 else min(float(cap), 10.0 * math.log10(255.0 ** 2 / mse))


def squared_error(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The squared difference of two uint8 frames summed over the channels, per pixel: int64 ``(H, W)``, exact."""
    d = a.astype(np.int32) - b.astype(np.int32)
    return np.einsum("hwc,hwc->hw", d, d, dtype=np.int64)


def frame_mse(a: np.ndarray, b: np.ndarray, keep: np.ndarray | None = None, se: np.ndarray | None = None) -> float | None:
    """Mean squared difference of two uint8 frames over every channel of the pixels where ``keep`` (bool
    ``(H, W)``) is true (all pixels for ``None``); ``None`` when no pixel is kept. The sum is an exact integer
    (``se``: :func:`squared_error` when already computed)."""
    se = squared_error(a, b) if se is None else se
    c = a.shape[-1]
    if keep is None:
        return int(se.sum()) / (se.size * c)
    n = int(np.count_nonzero(keep))
    return int(se[keep].sum()) / (n * c) if n else None


#: scikit-image's constants: K1, K2 and the data range of 8-bit frames.
_C1 = (0.01 * 255.0) ** 2
_C2 = (0.03 * 255.0) ** 2


def window_sums(x: np.ndarray, win_size: int) -> np.ndarray:
    """The ``win_size`` x ``win_size`` window sums of ``x`` (float ``(H, W, C)`` holding integers) at every interior
    pixel (a border of ``(win_size - 1) // 2`` left out, as scikit-image's mean does), as float64
    ``(H - win_size + 1, W - win_size + 1, C)``. Exact: every partial sum is an integer the dtype holds."""
    import cv2

    p = (win_size - 1) // 2
    s = cv2.boxFilter(x, -1, (win_size, win_size), normalize=False, borderType=cv2.BORDER_CONSTANT)
    return s[p : x.shape[0] - p, p : x.shape[1] - p].astype(np.float64, copy=False)


def _sum_dtype(win_size: int) -> type:
    # a window sum of squares of 8-bit values is at most win_size^2 * 255^2: exact in float32 below 2^24
    return np.float32 if win_size * win_size * 255 * 255 < 2 ** 24 else np.float64


def ssim_map(a: np.ndarray, b: np.ndarray, win_size: int = 7, b_sums: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """scikit-image's SSIM map of two uint8 frames ``(H, W, C)`` on the interior, per channel (float64
    ``(H - 2p, W - 2p, C)``, ``p = (win_size - 1) // 2``): with the window sums ``S`` of ``x``, ``y``, ``x²``,
    ``y²``, ``xy`` over ``N = win_size²`` pixels, ``u = S/N``, ``v = (N S_xx - S_x²) / (N (N - 1))`` (the sample
    covariance), ``SSIM = (2 u_x u_y + C1)(2 v_xy + C2) / ((u_x² + u_y² + C1)(v_x + v_y + C2))``. ``b_sums``:
    ``b``'s own sums (``S_y``, ``S_yy``) when already computed."""
    dt = _sum_dtype(win_size)
    x, y = a.astype(dt), b.astype(dt)
    n = float(win_size * win_size)
    sx, sxx, sxy = window_sums(x, win_size), window_sums(x * x, win_size), window_sums(x * y, win_size)
    sy, syy = b_sums if b_sums is not None else (window_sums(y, win_size), window_sums(y * y, win_size))
    # the formula above, in place (float64 throughout; every sum is exact)
    d = n * (n - 1.0)
    c1, c2 = _C1 * n * n, _C2 * d
    sxy_ = sx * sy                          # S_x S_y
    num = np.multiply(sxy, n, out=sxy)      # N S_xy
    num -= sxy_
    num *= 2.0
    num += c2                               # d (2 v_xy + C2)
    sxy_ *= 2.0
    sxy_ += c1                              # N² (2 u_x u_y + C1)
    num *= sxy_
    sx2 = np.multiply(sx, sx, out=sx)
    sy2 = sy * sy
    den = np.add(sxx, syy, out=sxx)
    den *= n
    den -= sx2
    den -= sy2
    den += c2                               # d (v_x + v_y + C2)
    sx2 += sy2
    sx2 += c1                               # N² (u_x² + u_y² + C1)
    den *= sx2
    num /= den
    return num


def ssim_frame(a: np.ndarray, b: np.ndarray, win_size: int = 7, impl: str = "boxsum",
               b_sums: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[float, np.ndarray]:
    """``(mssim, map)``: the SSIM of two RGB uint8 frames (the mean over channels of each channel's interior mean,
    as scikit-image) and its interior map averaged over the channels (float64 ``(H - 2p, W - 2p)``); ``b_sums``:
    :func:`ssim_map`'s, for ``"boxsum"``."""
    if impl == "skimage":
        from skimage.metrics import structural_similarity

        mssim, full = structural_similarity(a, b, data_range=255, channel_axis=-1, win_size=win_size, full=True)
        p = (win_size - 1) // 2
        inner = np.asarray(full, dtype=np.float64)[p : a.shape[0] - p, p : a.shape[1] - p]
        return float(mssim), inner.mean(axis=-1)
    m = ssim_map(a, b, win_size, b_sums)
    return float(np.mean([m[..., c].mean() for c in range(m.shape[-1])])), m.mean(axis=-1)


def frame_scores(a: np.ndarray, b: np.ndarray, region: np.ndarray | None, psnr_cap: float = 100.0,
                 win_size: int = 7, ssim_impl: str = "boxsum") -> dict[str, float | None]:
    """``{psnr, ssim, bg_psnr, bg_ssim}`` of one edited frame ``a`` against its source frame ``b``; ``region`` is the
    bool target region ``(H, W)`` (``None``: no region, all background)."""
    se = squared_error(a, b)
    mse = frame_mse(a, b, se=se)
    bg = None if region is None or not region.any() else ~region
    bg_mse = mse if bg is None else frame_mse(a, b, bg, se)
    pasted = None if bg is None else np.where(region[..., None], b, a)  # only background changes count
    y = None if ssim_impl == "skimage" else b.astype(_sum_dtype(win_size))
    own = None if y is None else (window_sums(y, win_size), window_sums(y * y, win_size))  # serve both maps
    mssim, smap = ssim_frame(a, b, win_size, ssim_impl, own)
    if pasted is not None:
        smap = ssim_frame(pasted, b, win_size, ssim_impl, own)[1]
    p = (win_size - 1) // 2
    keep = np.ones(smap.shape, dtype=bool) if bg is None else bg[p : bg.shape[0] - p, p : bg.shape[1] - p]
    n = int(np.count_nonzero(keep))
    return {
        "psnr": psnr_from_mse(mse, psnr_cap),
        "ssim": mssim,
        "bg_psnr": None if bg_mse is None else psnr_from_mse(bg_mse, psnr_cap),
        "bg_ssim": (float(smap[keep].sum()) / n) if n else None,
    }
