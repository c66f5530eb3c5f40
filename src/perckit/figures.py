"""Pictures for the demo report, drawn with Pillow: mask overlays, 3D tracks, waveforms."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

from . import rle

GT_COLOUR = (0, 200, 0)
PRED_COLOUR = (230, 30, 30)


def _canvas(image: bytes | dict | Image.Image | None, size_hw: Sequence[int]) -> Image.Image:
    h, w = int(size_hw[0]), int(size_hw[1])
    if isinstance(image, dict):  # datasets Image storage {bytes, path}
        image = image.get("bytes")
    if image is None:
        return Image.new("RGB", (w, h), (40, 40, 40))
    im = image if isinstance(image, Image.Image) else Image.open(io.BytesIO(image))
    return im.convert("RGB").resize((w, h))


def mask_overlay(image: bytes | Image.Image | None, gt: dict | None, pred: dict | None, scale: int = 1, alpha: float = 0.45) -> Image.Image:
    """The frame with the ground-truth mask in green and the prediction in red (overlap looks yellow)."""
    ref = gt or pred
    if ref is None:
        raise ValueError("mask_overlay needs at least one mask")
    h, w = ref["size"]
    base = np.asarray(_canvas(image, (h, w)), dtype=np.float32)
    out = base.copy()
    for mask, colour in ((gt, GT_COLOUR), (pred, PRED_COLOUR)):
        if mask is None:
            continue
        m = rle.decode(mask)
        out[m] = (1 - alpha) * out[m] + alpha * np.asarray(colour, dtype=np.float32)
    im = Image.fromarray(out.clip(0, 255).astype(np.uint8))
    return im.resize((w * scale, h * scale), Image.NEAREST) if scale != 1 else im


def side_by_side(images: Sequence[Image.Image], gap: int = 4) -> Image.Image:
    h = max(i.height for i in images)
    w = sum(i.width for i in images) + gap * (len(images) - 1)
    out = Image.new("RGB", (w, h), (255, 255, 255))
    x = 0
    for i in images:
        out.paste(i, (x, 0))
        x += i.width + gap
    return out


def tracks_plot(tracks_gt: np.ndarray, tracks_pred: np.ndarray | None, intrinsics: Sequence[float], image_hw: Sequence[int],
                valid: np.ndarray | None = None, max_tracks: int = 24, scale: float = 0.4) -> Image.Image:
    """Projected 3D tracks (frame-0 camera): ground truth in green, prediction (scale-aligned) in red.
    Only samples marked ``valid`` ([T, Q], e.g. the GT visibility) are drawn."""
    fx, fy, cx, cy = (float(v) for v in intrinsics)
    h, w = int(image_hw[0] * scale), int(image_hw[1] * scale)
    im = Image.new("RGB", (w, h), (25, 25, 25))
    draw = ImageDraw.Draw(im)

    def project(p: np.ndarray) -> list[tuple[float, float]]:
        pts = []
        for x, y, z in p:
            if np.isfinite([x, y, z]).all() and z > 1e-6:
                pts.append((scale * (fx * x / z + cx), scale * (fy * y / z + cy)))
        return pts

    for q in range(min(max_tracks, tracks_gt.shape[1])):
        for arr, colour in ((tracks_gt, GT_COLOUR), (tracks_pred, PRED_COLOUR)):
            if arr is None:
                continue
            p = np.array(arr[:, q], dtype=np.float64)
            if valid is not None:
                p[~np.asarray(valid[:, q], dtype=bool)] = np.nan
            pts = project(p)
            if len(pts) > 1:
                draw.line(pts, fill=colour, width=1)
            if pts:
                draw.ellipse([pts[0][0] - 2, pts[0][1] - 2, pts[0][0] + 2, pts[0][1] + 2], outline=colour)
    return im


def waveform_plot(samples: np.ndarray, sample_rate: int, window_s: tuple[float, float] | None = None,
                  pred_window_s: tuple[float, float] | None = None, width: int = 640, height: int = 120) -> Image.Image:
    """A mono waveform with the ground-truth edit window shaded green and the predicted one red."""
    im = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(im, "RGBA")
    n = len(samples)
    duration = n / float(sample_rate) if n else 1.0
    for win, colour in ((window_s, GT_COLOUR), (pred_window_s, PRED_COLOUR)):
        if win is not None:
            x0, x1 = (int(width * t / duration) for t in win)
            draw.rectangle([x0, 0, x1, height], fill=colour + (60,))
    if n:
        cols = np.array_split(np.asarray(samples, dtype=np.float32), width)
        peak = max(float(np.abs(samples).max()), 1e-9)
        mid = height / 2
        for x, c in enumerate(cols):
            if c.size:
                lo, hi = float(c.min()) / peak, float(c.max()) / peak
                draw.line([(x, mid - hi * mid * 0.9), (x, mid - lo * mid * 0.9)], fill=(30, 30, 120))
    return im


def save(image: Image.Image, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, format="PNG")
    return path
