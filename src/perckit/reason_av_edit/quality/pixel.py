"""The model-free edit-quality metrics, exact: ``ssim``, ``psnr``, ``bg_psnr``, ``bg_ssim`` of an edited clip against
its source, and the frame-alignment rules applied before them.

Every frame is 8-bit RGB (uint8 ``(H, W, 3)``); each value is computed per frame, then averaged over the frames
(:func:`perckit.core.stats.fmean`):

- ``psnr`` = ``10 log10(255^2 / MSE)``, the MSE over every pixel and channel (float64); identical frames
  (MSE 0) score ``psnr_cap`` (default 100 dB), and so does any frame above the cap (JSON has no infinity);
- ``ssim`` = :func:`skimage.metrics.structural_similarity` with ``data_range=255`` and ``channel_axis=-1``
  (scikit-image's defaults otherwise: a ``win_size`` x ``win_size`` uniform window, 7, ``K1 = 0.01``,
  ``K2 = 0.03``, sample covariance; its mean leaves out a border of ``(win_size - 1) // 2`` pixels). The
  default ``ssim_impl="boxsum"`` computes that same definition in compiled kernels (:mod:`._kernels`: 8-bit
  values make every window sum an exact integer, the formula is float64 on them), equal to scikit-image to
  rounding (1e-12; tests check it against scikit-image); ``ssim_impl="skimage"`` calls scikit-image itself;
- ``bg_psnr``: the same PSNR on the MSE of the background pixels only (outside the target region);
- ``bg_ssim``: the edited frame with its target region pasted back from the source (so that only background
  changes count: an SSIM window straddling the region's edge sees the source there), its SSIM map against the
  source (averaged over the channels), averaged over the background pixels of the interior scikit-image's own mean
  uses; with no region this is ``ssim``. The pasted map is computed only where it can differ from the frame's own
  map (:func:`frame_scores`).

Every value is a sum of one pass over the frame (:func:`frame_sums`), divided once; ``device`` (``pixel_device``): the
same sums on a torch device (:func:`_torch_sums`), torch imported only then.

A frame with no background pixel (the region covers the frame) has no ``bg_*`` value and is left out of the
``bg_*`` means; a sample with none is ``None``. ``region`` ``None`` means the whole frame is background.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
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


SSIM_IMPLS = ("boxsum", "skimage")
#: scikit-image's constants: K1, K2 and the data range of 8-bit frames.
_C1 = (0.01 * 255.0) ** 2
_C2 = (0.03 * 255.0) ** 2


@lru_cache(maxsize=8)
def torch_device(device: str, ssim_impl: str = "boxsum") -> Any:
    """``torch.device(device)`` for the pixel metrics, checked once by placing a tensor there. It computes
    ``ssim_impl="boxsum"``; another impl, torch absent or a device torch cannot use is an :class:`OptionError`."""
    if ssim_impl != "boxsum":
        raise OptionError(f"option 'pixel_device': {device!r} computes ssim_impl='boxsum'; got ssim_impl={ssim_impl!r} "
                          "(scikit-image runs on the CPU: pass pixel_device=None)")
    try:
        import torch

        dev = torch.device(device)
        torch.zeros(1, device=dev)
    except ImportError:
        raise OptionError(f"option 'pixel_device': {device!r} needs torch (pip install torch); "
                          "pixel_device=None computes the pixel metrics without it") from None
    except (RuntimeError, AssertionError) as e:  # an unknown device name; CUDA absent ("not compiled with CUDA")
        raise OptionError(f"option 'pixel_device': expected a torch device this machine has (e.g. 'cpu', 'cuda'), "
                          f"got {device!r}: {e}") from None
    return dev


def _torch_sums(a: np.ndarray, b: np.ndarray, bg: np.ndarray, sel: np.ndarray, win: int, dev: Any) -> list[float]:
    """:func:`frame_sums`' four sums on a torch device: the window sums in float64 (cumulative sums, exact for
    these integers), then :func:`._kernels.ssim_value` on them, the compiled path's formula."""
    import torch

    from ._kernels import ssim_value

    x, y = (torch.from_numpy(v).to(dev).permute(2, 0, 1).double() for v in (a, b))

    def box(t: Any) -> Any:  # window sums at every interior pixel: (C, H - win + 1, W - win + 1)
        c = torch.nn.functional.pad(t, (0, 0, 1, 0)).cumsum(1)
        c = torch.nn.functional.pad(c[:, win:] - c[:, :-win], (1, 0)).cumsum(2)
        return c[:, :, win:] - c[:, :, :-win]

    n = win * win
    smap = ssim_value(box(x), box(y), box(x * x), box(y * y), box(x * y), n, _C1 * n * n, _C2 * n * (n - 1)).sum(0)
    se = ((x - y) ** 2).sum(0)
    return torch.stack([se.sum(), se[torch.from_numpy(bg).to(dev)].sum(), smap.sum(), smap[torch.from_numpy(sel).to(dev)].sum()]).tolist()


def frame_sums(a: np.ndarray, b: np.ndarray, bg: np.ndarray, sel: np.ndarray, win: int, impl: str = "boxsum",
               device: str | None = None) -> list[float]:
    """``[Σ (a - b)², the same over the pixels where bg, Σ SSIM map, the same over the interior pixels where sel]`` of
    two uint8 RGB frames ``(H, W, 3)``, over the channels too; the map of ``a`` against ``b`` on the interior (``p =
    (win - 1) // 2`` pixels in from each side); ``bg``, ``sel``: bool ``(H, W)`` and the interior's shape.
    ``device``: :func:`_torch_sums`; else OpenCV's norm (a double within 2 ulp of the integer sum: rounded back,
    exact) and :func:`._kernels.ssim_sums`, or scikit-image's map for ``impl="skimage"``."""
    if device is not None:
        return _torch_sums(a, b, bg, sel, win, torch_device(device, impl))
    import cv2

    from . import _kernels

    out = [round(cv2.norm(a, b, cv2.NORM_L2SQR)), round(cv2.norm(a, b, cv2.NORM_L2SQR, mask=bg.view(np.uint8)))]
    if impl == "skimage":
        from skimage.metrics import structural_similarity

        p = (win - 1) // 2
        smap = structural_similarity(a, b, data_range=255, channel_axis=-1, win_size=win, full=True)[1]  # float64
        smap = smap[p : a.shape[0] - p, p : a.shape[1] - p].sum(axis=-1)
        return out + [float(smap.sum()), float(smap[sel].sum())]
    n, sums = win * win, np.zeros(2)
    _kernels.ssim_sums(*(np.ascontiguousarray(v).reshape(len(v), -1) for v in (a, b)), sel, win, _C1 * n * n, _C2 * n * (n - 1), sums)
    return out + sums.tolist()


def frame_scores(a: np.ndarray, b: np.ndarray, region: np.ndarray | None, psnr_cap: float = 100.0,
                 win_size: int = 7, ssim_impl: str = "boxsum", device: str | None = None) -> dict[str, float | None]:
    """``{psnr, ssim, bg_psnr, bg_ssim}`` of one edited frame ``a`` against its source frame ``b``; ``region`` is the
    bool target region ``(H, W)`` (``None``: no region, all background).

    The pasted frame's SSIM map (``bg_ssim``) differs from ``a``'s own only at the centres whose window meets the
    region (the region dilated by the window): it is computed only there, on the smallest box of the frame holding
    those windows; everywhere else the background sum is the full map's (:func:`frame_sums`, one pass each)."""
    import cv2

    h, w = a.shape[:2]
    p = (win_size - 1) // 2
    region = np.zeros((h, w), bool) if region is None else region
    bg = ~region
    keep = bg[p : h - p, p : w - p]
    near = cv2.dilate(region.view(np.uint8), np.ones((win_size, win_size), np.uint8))[p : h - p, p : w - p].view(bool)
    se, se_bg, total, far = frame_sums(a, b, bg, keep & ~near, win_size, ssim_impl, device)
    close = keep & near  # the background centres whose window meets the region
    rows, cols = np.flatnonzero(close.any(axis=1)), np.flatnonzero(close.any(axis=0))
    if rows.size:  # their windows: interior rows r0..r1 are frame rows r0..r1 + 2p
        (r0, r1), (c0, c1) = (rows[0], rows[-1] + 1), (cols[0], cols[-1] + 1)
        box = (slice(r0, r1 + 2 * p), slice(c0, c1 + 2 * p))
        pasted = np.where(region[box][..., None], b[box], a[box])  # only background changes count
        far += frame_sums(pasted, b[box], bg[box], np.ascontiguousarray(close[r0:r1, c0:c1]), win_size, ssim_impl, device)[3]
    n_bg, n_keep = int(np.count_nonzero(bg)), int(np.count_nonzero(keep))
    return {
        "psnr": psnr_from_mse(se / (3 * h * w), psnr_cap),
        "ssim": total / (3 * keep.size),
        "bg_psnr": psnr_from_mse(se_bg / (3 * n_bg), psnr_cap) if n_bg else None,
        "bg_ssim": far / (3 * n_keep) if n_keep else None,
    }


def check_frames(frames: np.ndarray, where: str) -> np.ndarray:
    """``frames`` as uint8 ``(T, H, W, 3)`` with ``T >= 1``; anything else raises :class:`PredictionError`."""
    x = np.asarray(frames)
    if x.dtype != np.uint8 or x.ndim != 4 or x.shape[-1] != 3 or x.shape[0] == 0:
        raise PredictionError(f"{where}: expected uint8 RGB frames (T, H, W, 3) with T >= 1, got {x.dtype} {x.shape}")
    return x


def clip_scores(edited: np.ndarray, source: np.ndarray, region: np.ndarray | None, psnr_cap: float = 100.0,
                win_size: int = 7, where: str = "sample", ssim_impl: str = "boxsum", device: str | None = None) -> dict[str, Any]:
    """The four pixel metrics of one sample: per frame (:func:`frame_scores`), then the mean over the frames.

    ``edited`` and ``source`` must have one shape (see :func:`conform` for the mismatch rules); ``region`` is
    bool ``(T, H, W)`` or ``None``. Also returns ``num_frames`` and ``num_bg_frames`` (frames with a background).
    ``device``: a torch device computes the same sums there (``ssim_impl="boxsum"`` only); ``None``, the compiled
    kernels.
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
    per = [frame_scores(edited[j], source[j], None if region is None else region[j], psnr_cap, win_size, ssim_impl, device)
           for j in range(t)]
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


__all__ = ["FRAME_MISMATCH", "PIXEL_KEYS", "RESIZE_EDITED", "SSIM_IMPLS", "clip_scores", "conform", "frame_scores",
           "frame_sums", "mean_table", "psnr_from_mse", "resample_index", "torch_device"]
