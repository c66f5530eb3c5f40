"""Pictures for the demo report and the export previews, drawn with Pillow.

Colours are the Okabe–Ito palette (safe for the common colour-vision deficiencies): ground truth blue
(:data:`GT_COLOUR`), prediction orange (:data:`PRED_COLOUR`), their overlap bluish green
(:data:`OVERLAP_COLOUR`). A mask is drawn as a light fill (:func:`light`) plus its outline: the pixels of the mask
with a 4-neighbour outside it (or on the image border), see :func:`outline`. A legend, ``(label, colour)`` pairs
(:data:`MASK_LEGEND`, ...), is the page's (:func:`perckit.draw.report.legend_html`); small synthetic frames are
upscaled with nearest-neighbour (:func:`enlarged`) so the report shows them at least :data:`MIN_WIDTH` wide.
"""

from __future__ import annotations

import contextlib
import io
import textwrap
from pathlib import Path
from collections.abc import Mapping
from typing import Iterator, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .. import rle
from ..errors import ReleaseFormatError
from ..io.paths import atomic_file

#: Okabe–Ito colours (RGB).
BLUE = (0, 114, 178)
ORANGE = (230, 159, 0)
BLUISH_GREEN = (0, 158, 115)
VERMILLION = (213, 94, 0)
SKY_BLUE = (86, 180, 233)
REDDISH_PURPLE = (204, 121, 167)
YELLOW = (240, 228, 66)
BLACK = (0, 0, 0)

GT_COLOUR = BLUE
PRED_COLOUR = ORANGE
OVERLAP_COLOUR = BLUISH_GREEN
#: One colour per object where several masks are drawn (previews): Okabe–Ito order, cycled.
OBJECT_COLOURS = (BLUE, ORANGE, BLUISH_GREEN, VERMILLION, SKY_BLUE, REDDISH_PURPLE, YELLOW)
#: The canvas where a figure has no image.
NEUTRAL = (224, 224, 224)
#: The waveform of :func:`waveform_plot`.
WAVE_COLOUR = (60, 60, 60)
#: The narrowest figure the report shows (smaller figures are upscaled, nearest-neighbour).
MIN_WIDTH = 640
#: Fill strength of a mask (the outline is opaque).
FILL_ALPHA = 0.35


#: the text size of captions and of the time axis (Pillow's default TrueType font; 10 px runs words together when shrunk)
FONT_SIZE = 13


def open_canvas(image: bytes | dict | Image.Image | None, out_h: int, out_w: int, where: str = "image") -> np.ndarray | None:
    """An encoded image (bytes, ``{bytes, path}`` with bytes, or a PIL image) as an RGB array at ``out_h`` × ``out_w``
    (a JPEG decoded by Pillow at a reduced DCT scale where the picture is at most half of it); None when there are no
    bytes; brought to its size by :func:`resized`. Bytes that do not decode raise
    :class:`~perckit.errors.ReleaseFormatError` naming ``where``."""
    if not has_image(image):
        return None
    image = image["bytes"] if isinstance(image, Mapping) else image
    try:
        im = image if isinstance(image, Image.Image) else Image.open(io.BytesIO(image))
        if im.format == "JPEG":
            im.draft("RGB", (out_w, out_h))
        im.load()
        arr = np.asarray(im if im.mode == "RGB" else im.convert("RGB"))
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise ReleaseFormatError(f"{where}: the image cannot be decoded ({type(e).__name__}: {e})") from None
    return resized(arr, out_h, out_w)


def resized(picture: np.ndarray | Image.Image, out_h: int, out_w: int) -> np.ndarray | Image.Image:
    """``picture`` (an array of uint8, or a PIL image, returned as one: modes other than L, RGB and RGBA become RGB) at
    ``out_h`` × ``out_w``: enlarged nearest-neighbour; shrunk by OpenCV, below 2x by ``INTER_LINEAR_EXACT`` (its
    bilinear resize in integer arithmetic, the same bytes on every machine; 1.2 ms a 640x480 picture, Pillow's
    ``BILINEAR`` filter 2.8 ms), from 2x by ``INTER_AREA`` (where bilinear taps would skip pixels). Every picture perckit
    shrinks (canvases, previews, report figures) goes through here."""
    import cv2

    if isinstance(picture, Image.Image):
        im = picture if picture.mode in ("L", "RGB", "RGBA") else picture.convert("RGB")
        return im if im.size == (out_w, out_h) else Image.fromarray(resized(np.asarray(im), out_h, out_w))
    h, w = picture.shape[:2]
    if (h, w) == (out_h, out_w):
        return picture
    if h <= out_h and w <= out_w:
        return np.asarray(Image.fromarray(picture).resize((out_w, out_h), Image.NEAREST))
    return cv2.resize(picture, (out_w, out_h), interpolation=cv2.INTER_AREA if w >= 2 * out_w or h >= 2 * out_h else cv2.INTER_LINEAR_EXACT)


@contextlib.contextmanager
def one_opencv_thread() -> Iterator[None]:
    """OpenCV's own thread pool off while many small pictures are drawn (the export previews), its thread count
    restored after. Between two small calls the pool's workers wait by spinning (``sched_yield``): a 600-image
    RefCOCO-M preview pass spent about 0.7 s of its 4.9 s of CPU there, for no gain in time. The pictures are the
    same: every OpenCV call perckit draws with gives the same bytes on any number of threads."""
    import cv2

    before = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        yield
    finally:
        cv2.setNumThreads(before)


def has_image(image: bytes | dict | Image.Image | None) -> bool:
    """True when ``image`` has a picture for :func:`open_canvas` (bytes, a ``{bytes, path}`` with bytes, a PIL image)."""
    image = image.get("bytes") if isinstance(image, Mapping) else image
    return image is not None and not (isinstance(image, (bytes, bytearray)) and not image)


def outline(mask: np.ndarray, width: int = 1) -> np.ndarray:
    """The boundary of a boolean mask: its pixels with at least one 4-neighbour outside the mask or outside the
    image (a filled 5×5 square gives its 16 perimeter pixels); ``width`` > 1 takes that many such rings inward
    (OpenCV's erosion by the 4-neighbourhood, outside the image empty)."""
    import cv2

    m = np.ascontiguousarray(mask, dtype=bool)
    if m.ndim != 2 or m.size == 0:
        return np.zeros_like(m, dtype=bool)
    cross = cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))
    interior = cv2.erode(m.view(np.uint8), cross, iterations=max(int(width), 1), borderType=cv2.BORDER_CONSTANT, borderValue=0)
    return m & ~interior.view(bool)


def light(colour: tuple[int, int, int], alpha: float = FILL_ALPHA) -> tuple[int, int, int]:
    """``colour`` at ``alpha`` over white: a mask's fill on a white ground (legend swatches, edit windows)."""
    return tuple(int(255 * (1 - alpha) + c * alpha) for c in colour)


def paint_masks(base: np.ndarray, masks: Sequence[tuple[np.ndarray, tuple[int, int, int]]], alpha: float = FILL_ALPHA,
                line: int = 1) -> np.ndarray:
    """``base`` (H, W, 3 uint8) with each ``(mask, colour)`` filled at ``alpha`` and then outlined (opaque, ``line``
    pixels wide), in order: later outlines are drawn over earlier ones. Each mask is painted within its bounding box
    (outside it the mask is empty, so its outline there is the whole picture's)."""
    import cv2

    out = np.array(base, dtype=np.uint8)
    a = int(round(alpha * 256))
    boxes = [_box(m) for m, _ in masks]
    for (m, colour), box in zip(masks, boxes):  # (level * (256 - a) + colour * a) >> 8, as a table per channel
        table = (np.arange(256, dtype=np.uint16)[:, None, None] * (256 - a) + np.asarray(colour, dtype=np.uint16) * a) >> 8
        out[box] = cv2.copyTo(cv2.LUT(out[box], table.astype(np.uint8)), np.ascontiguousarray(m[box]).view(np.uint8), out[box])
    for (m, colour), box in zip(masks, boxes):
        out[box][outline(m[box], line)] = colour
    return out


def _box(mask: np.ndarray) -> tuple[slice, slice]:
    """The slices of the bounding box of a 2-D boolean mask (empty slices for an empty mask)."""
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    return (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)) if rows.size else (slice(0, 0), slice(0, 0))


def mask_overlay(image: bytes | dict | Image.Image | None, gt: dict | None, pred: dict | None, scale: int = 1,
                 alpha: float = FILL_ALPHA, max_pixels: int | None = None) -> Image.Image:
    """The frame (nearest-neighbour upscaled by ``scale``) with the ground truth and the prediction each as a light
    fill plus an outline: ground truth blue, prediction orange; where both cover a pixel the fill is bluish green.
    The outlines are traced on the upscaled masks, so they stay one pixel wide.

    Both masks (validated RLEs) have one size. Each costs the upscaled canvas's pixels of a
    :class:`perckit.rle.PixelBudget` of ``max_pixels`` (default :data:`perckit.rle.PIXEL_BUDGET`), charged before
    anything is decoded: past it an :class:`~perckit.errors.RLEError` naming the mask."""
    masks = {name: m for name, m in (("gt", gt), ("pred", pred)) if m is not None}
    if not masks:
        raise ValueError("mask_overlay needs at least one mask")
    h, w = rle.check_same_size(list(masks.values()), "mask_overlay: gt and pred")
    budget = rle.PixelBudget(max_pixels, unit="figure", hint="pass max_pixels=... to mask_overlay to raise it")
    for name in masks:
        budget.charge(h * scale * w * scale, f"mask_overlay: {name}")
    base = open_canvas(image, h, w, "mask_overlay: image")
    base = np.full((h, w, 3), NEUTRAL, dtype=np.uint8) if base is None else base
    out = np.repeat(np.repeat(base, scale, 0), scale, 1).astype(np.float32)
    # an absent mask is an empty one: the other is then filled and outlined alone
    g, p = (np.zeros((h * scale, w * scale), dtype=bool) if m is None else np.repeat(np.repeat(rle.decode(m), scale, 0), scale, 1)
            for m in (gt, pred))
    for m, colour in ((g & ~p, GT_COLOUR), (p & ~g, PRED_COLOUR), (g & p, OVERLAP_COLOUR)):
        out[m] = (1 - alpha) * out[m] + alpha * np.asarray(colour, dtype=np.float32)
    for m, colour in ((g, GT_COLOUR), (p, PRED_COLOUR)):
        out[outline(m)] = colour
    return Image.fromarray(out.clip(0, 255).astype(np.uint8))


def side_by_side(images: Sequence[Image.Image], gap: int = 4, vertical: bool = False) -> Image.Image:
    """Images side by side on white, top-aligned, ``gap`` pixels apart (``vertical``: one under the other,
    left-aligned)."""
    across = max(i.width if vertical else i.height for i in images)
    along = sum(i.height if vertical else i.width for i in images) + gap * (len(images) - 1)
    out = Image.new("RGB", (across, along) if vertical else (along, across), (255, 255, 255))
    pos = 0
    for i in images:
        out.paste(i, (0, pos) if vertical else (pos, 0))
        pos += (i.height if vertical else i.width) + gap
    return out


#: The legend of a mask figure.
MASK_LEGEND = (("prediction", PRED_COLOUR), ("ground truth", GT_COLOUR), ("overlap", OVERLAP_COLOUR))


def caption_strip(text: str, width: int, line_height: int = FONT_SIZE + 5) -> Image.Image:
    """``text`` wrapped to ``width`` pixels (Pillow's default font) on a white strip."""
    font = ImageFont.load_default(size=FONT_SIZE)
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    chars = max(int(width / max(probe.textlength("n", font=font), 1.0)) - 2, 10)
    lines = [ln for para in text.splitlines() for ln in (textwrap.wrap(para, chars) or [""])]
    im = Image.new("RGB", (width, 6 + line_height * len(lines)), (255, 255, 255))
    draw = ImageDraw.Draw(im)
    for i, line in enumerate(lines):
        draw.text((6, 3 + i * line_height), line, fill=BLACK, font=font)
    return im


def enlarged(figure: Image.Image, min_width: int = MIN_WIDTH) -> Image.Image:
    """``figure`` enlarged by the smallest integer factor (nearest-neighbour) that makes it at least ``min_width``
    wide, and nothing else: its caption and legend are the page's text."""
    k = -(-min_width // figure.width) if 0 < figure.width < min_width else 1
    return figure.resize((figure.width * k, figure.height * k), Image.NEAREST) if k > 1 else figure


#: The legend of a tracks figure.
TRACKS_LEGEND = (("prediction, a dot at its start", PRED_COLOUR), ("ground truth, a dot at its start", GT_COLOUR))


def tracks_plot(tracks_gt: np.ndarray, tracks_pred: np.ndarray | None, intrinsics: Sequence[float], image_hw: Sequence[int],
                valid: np.ndarray | None = None, max_tracks: int = 24, scale: float = 0.5) -> Image.Image:
    """Projected 3D tracks (frame-0 camera): ground truth blue, prediction orange, a dot at each track's start.
    Only samples marked ``valid`` ([T, Q], e.g. the GT visibility) are drawn."""
    fx, fy, cx, cy = (float(v) for v in intrinsics)
    im = Image.new("RGB", (int(image_hw[1] * scale), int(image_hw[0] * scale)), (250, 250, 250))
    draw = ImageDraw.Draw(im)
    for q in range(min(max_tracks, tracks_gt.shape[1])):
        for arr, colour in ((tracks_gt, GT_COLOUR), (tracks_pred, PRED_COLOUR)):
            if arr is None:
                continue
            shown = np.ones(len(arr), dtype=bool) if valid is None else np.asarray(valid[:, q], dtype=bool)
            pts = [(scale * (fx * x / z + cx), scale * (fy * y / z + cy)) for (x, y, z), ok in
                   zip(np.asarray(arr[:, q], dtype=np.float64), shown) if ok and np.isfinite([x, y, z]).all() and z > 1e-6]
            if len(pts) > 1:
                draw.line(pts, fill=colour, width=2)
            if pts:
                draw.ellipse([pts[0][0] - 3, pts[0][1] - 3, pts[0][0] + 3, pts[0][1] + 3], fill=colour)
    return im


#: The legend of a waveform figure.
WINDOW_LEGEND = (("predicted window", PRED_COLOUR), ("ground-truth window", GT_COLOUR), ("overlap", OVERLAP_COLOUR), ("waveform", WAVE_COLOUR))


def waveform_plot(samples: np.ndarray, sample_rate: int, window_s: tuple[float, float] | None = None,
                  pred_window_s: tuple[float, float] | None = None, width: int = 800, height: int = 140,
                  axis_height: int = 22) -> Image.Image:
    """A mono waveform over a time axis in seconds: the ground-truth edit window shaded blue with a blue border,
    the predicted one orange, their overlap bluish green."""
    im = Image.new("RGB", (width, height + axis_height), (255, 255, 255))
    draw = ImageDraw.Draw(im)
    n = len(samples)
    duration = n / float(sample_rate) if n else 1.0

    def x_of(t: float) -> int:
        return int(round((width - 1) * min(max(t / duration, 0.0), 1.0)))

    spans = {key: (x_of(float(win[0])), x_of(float(win[1]))) for key, win in (("gt", window_s), ("pred", pred_window_s))
             if win is not None}
    shade = np.full((height, width, 3), 255, dtype=np.uint8)
    x = np.arange(width)
    g, p = ((x >= spans[k][0]) & (x <= spans[k][1]) if k in spans else np.zeros(width, dtype=bool) for k in ("gt", "pred"))
    for m, colour in ((g & ~p, GT_COLOUR), (p & ~g, PRED_COLOUR), (g & p, OVERLAP_COLOUR)):  # as mask_overlay fills
        shade[:, m] = light(colour)
    im.paste(Image.fromarray(shade), (0, 0))
    for k, colour in (("gt", GT_COLOUR), ("pred", PRED_COLOUR)):
        if k in spans:
            x0, x1 = spans[k]
            y0, y1 = (0, height // 2) if k == "gt" else (height // 2, height - 1)
            draw.rectangle([x0, y0, x1, y1], outline=colour, width=2)
    if n:
        cols = np.array_split(np.asarray(samples, dtype=np.float32), width)
        peak = max(float(np.abs(samples).max()), 1e-9)
        mid = height / 2
        for x, c in enumerate(cols):
            if c.size:
                lo, hi = float(c.min()) / peak, float(c.max()) / peak
                draw.line([(x, mid - hi * mid * 0.9), (x, mid - lo * mid * 0.9)], fill=WAVE_COLOUR)
    # the time axis
    font = ImageFont.load_default(size=FONT_SIZE)
    draw.line([(0, height), (width - 1, height)], fill=BLACK)
    mag = 10 ** np.floor(np.log10(max(duration / 8, 1e-6)))  # a step of 1, 2 or 5 times mag: about eight ticks
    step = float(next(m * mag for m in (1, 2, 5, 10) if m * mag >= duration / 8))
    t = 0.0
    while t <= duration + 1e-9:
        x = x_of(t)
        draw.line([(x, height), (x, height + 4)], fill=BLACK)
        label = f"{t:.2f}".rstrip("0").rstrip(".") if step < 1 else f"{t:.0f}"
        draw.text((min(max(x, 8), width - 30), height + 5), label + " s" if t == 0 else label, fill=BLACK, font=font,
                  anchor="la" if x < 8 else "ma")
        t = round(t + step, 9)
    return im


def save(image: Image.Image, path: str | Path) -> Path:
    """``image`` as a PNG file at ``path`` (its folder created), written by the one atomic writer."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path) as f:
        image.save(f, format="PNG")
    return path
