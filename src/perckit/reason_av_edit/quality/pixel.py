"""The model-free edit-quality metrics, exact: ``ssim``, ``psnr``, ``bg_psnr``, ``bg_ssim`` of an edited clip against
its source, and the frame-alignment rules applied before them.

Every frame is 8-bit RGB (uint8 ``(H, W, 3)``); each value is computed per frame, then averaged over the frames
(:func:`perckit.core.stats.fmean`):

- ``psnr`` = ``10 log10(255^2 / MSE)``, the MSE over every pixel and channel (float64); identical frames
  (MSE 0) score ``psnr_cap`` (default 100 dB), and so does any frame above the cap (JSON has no infinity);
- ``ssim`` = :func:`skimage.metrics.structural_similarity` with ``data_range=255`` and ``channel_axis=-1``
  (scikit-image's defaults otherwise: a ``win_size`` x ``win_size`` uniform window, 7, ``K1 = 0.01``,
  ``K2 = 0.03``, sample covariance; its mean leaves out a border of ``(win_size - 1) // 2`` pixels). The
  default ``ssim_impl="boxsum"`` computes that same definition from exact window sums (:func:`ssim_map`:
  8-bit values make every window sum an integer, exact in float32 up to a 15 x 15 window, in float64 above;
  OpenCV's box filter), about 5 times faster than scikit-image's float64 uniform filters and equal to it to
  rounding (1e-15; a property test checks it against scikit-image); ``ssim_impl="skimage"`` calls
  scikit-image itself;
- ``bg_psnr``: the same PSNR on the MSE of the background pixels only (outside the target region);
- ``bg_ssim``: the edited frame with its target region pasted back from the source (so that only background
  changes count: an SSIM window straddling the region's edge sees the source there), its SSIM map against the
  source (``full=True``, averaged over the channels), averaged over the background pixels of the interior
  scikit-image's own mean uses; with no region this is ``ssim``.

A frame with no background pixel (the region covers the frame) has no ``bg_*`` value and is left out of the
``bg_*`` means; a sample with none is ``None``. ``region`` ``None`` means the whole frame is background.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...errors import OptionError, PredictionError
from ...core.stats import fmean

#: The frame-count rules (``frame_mismatch``) and the frame-size rules (``resize_edited``); ``None`` refuses.
FRAME_MISMATCH = (None, "truncate", "resample")
RESIZE_EDITED = (None, "bilinear")
PIXEL_KEYS = ("ssim", "psnr", "bg_psnr", "bg_ssim")


def psnr_from_mse(mse: float, cap: float) -> float:
    """``10 log10(255^2 / mse)``, at most ``cap`` (``cap`` for ``mse == 0``)."""
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


SSIM_IMPLS = ("boxsum", "skimage")
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


def check_frames(frames: np.ndarray, where: str) -> np.ndarray:
    """``frames`` as uint8 ``(T, H, W, 3)`` with ``T >= 1``; anything else raises :class:`PredictionError`."""
    x = np.asarray(frames)
    if x.dtype != np.uint8 or x.ndim != 4 or x.shape[-1] != 3 or x.shape[0] == 0:
        raise PredictionError(f"{where}: expected uint8 RGB frames (T, H, W, 3) with T >= 1, got {x.dtype} {x.shape}")
    return x


def clip_scores(edited: np.ndarray, source: np.ndarray, region: np.ndarray | None, psnr_cap: float = 100.0,
                win_size: int = 7, where: str = "sample", ssim_impl: str = "boxsum") -> dict[str, Any]:
    """The four pixel metrics of one sample: per frame (:func:`frame_scores`), then the mean over the frames.

    ``edited`` and ``source`` must have one shape (see :func:`conform` for the mismatch rules); ``region`` is
    bool ``(T, H, W)`` or ``None``. Also returns ``num_frames`` and ``num_bg_frames`` (frames with a background).
    """
    edited, source = check_frames(edited, f"{where}: edited video"), check_frames(source, f"{where}: source video")
    if edited.shape != source.shape:
        raise PredictionError(f"{where}: the edited frames {edited.shape} and the source frames {source.shape} differ")
    t, h, w = source.shape[:3]
    if region is not None and region.shape != (t, h, w):
        raise PredictionError(f"{where}: the target region has shape {region.shape}, expected {(t, h, w)} (the source grid)")
    if min(h, w) < win_size:
        raise PredictionError(f"{where}: frames of {w} x {h} are smaller than the SSIM window ssim_win_size={win_size}; "
                              "pass a smaller odd ssim_win_size (>= 3)")
    per = [frame_scores(edited[j], source[j], None if region is None else region[j], psnr_cap, win_size, ssim_impl) for j in range(t)]
    return {**{k: fmean([p[k] for p in per if p[k] is not None]) for k in PIXEL_KEYS}, "num_frames": t,
            "num_bg_frames": sum(1 for p in per if p["bg_psnr"] is not None)}


# ---------------------------------------------------------------- aligning the edited clip with the source


def resample_index(n_edited: int, n_source: int) -> np.ndarray:
    """The nearest edited frame of each source frame: ``j -> min(n_edited - 1, floor((j + 0.5) * n_edited / n_source))``."""
    j = np.arange(n_source, dtype=np.int64)
    return np.minimum(n_edited - 1, ((2 * j + 1) * n_edited) // (2 * n_source))


def conform(edited: np.ndarray, source: np.ndarray, region: np.ndarray | None, frame_mismatch: str | None,
            resize_edited: str | None, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(edited, source, region)`` on one grid, the source's (the region is on the source grid).

    - frame size: an edited frame of another ``H x W`` is refused, or with ``resize_edited="bilinear"`` resized
      to the source size (``cv2.resize``, ``INTER_LINEAR``);
    - frame count: another count is refused, or with ``frame_mismatch="truncate"`` all three are cut to the
      shorter length, with ``"resample"`` the edited frames are mapped to the source length
      (:func:`resample_index`, nearest frame).
    """
    te, he, we = edited.shape[:3]
    ts, hs, ws = source.shape[:3]
    if (he, we) != (hs, ws):
        if resize_edited is None:
            raise PredictionError(f"{where}: the edited video has {te} frames of {we} x {he}, the source {ts} frames of {ws} x "
                                  f"{hs} (W x H); pass resize_edited='bilinear' to resize the edited frames to the source size")
        try:
            import cv2
        except ImportError:
            raise OptionError("resize_edited='bilinear' needs OpenCV: pip install opencv-python-headless") from None
        edited = np.stack([cv2.resize(f, (ws, hs), interpolation=cv2.INTER_LINEAR) for f in edited]).astype(np.uint8)
    if te != ts:
        if frame_mismatch is None:
            raise PredictionError(f"{where}: the edited video has {te} frames, the source {ts} (frames of {ws} x {hs}); pass "
                                  f"frame_mismatch='truncate' (score the shorter length) or 'resample' (map the edited frames to "
                                  f"the source length)")
        if frame_mismatch == "truncate":
            n = min(te, ts)
            edited, source = edited[:n], source[:n]
            region = None if region is None else region[:n]
        else:
            edited = edited[resample_index(te, ts)]
    return edited, source, region


def mean_table(records: list[Mapping[str, Any]]) -> dict[str, Any]:
    """``{key: mean, n_<key>: count}`` of the four pixel metrics over per-sample records (``None`` values left out)."""
    out: dict[str, Any] = {}
    for k in PIXEL_KEYS:
        vals = [r[k] for r in records if r.get(k) is not None]
        out[k] = fmean(vals)
        out[f"n_{k}"] = len(vals)
    return out


__all__ = ["FRAME_MISMATCH", "PIXEL_KEYS", "RESIZE_EDITED", "SSIM_IMPLS", "clip_scores", "ssim_map", "window_sums", "conform", "frame_mse", "frame_scores",
           "mean_table", "psnr_from_mse", "resample_index", "ssim_frame"]
