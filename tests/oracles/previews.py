"""The export previews as perckit drew them before issue 32, to compare the faster path with.

Then every picture was encoded as PNG and re-encoded as JPEG (quality 80, baseline, 4:2:0) when the PNG passed
48,000 bytes; every row decoded its image again; each mask was painted over the whole picture (no bounding box) and
sampled by the dense way (``oracles.masks.small_mask``: decode, PIL ``NEAREST``). :func:`old_path` puts these in
place of perckit's (pytest's ``monkeypatch``); a previewer's ``draw`` (not its call, which reuses the row before's
bytes) then gives a row's old preview.
"""

from __future__ import annotations

import io
from typing import Mapping

import numpy as np
from PIL import Image

from perckit.draw import figures, previews

from oracles import masks

PNG_LIMIT = 48_000


def encode(image: Image.Image, photo: bool | None = None) -> bytes:
    """PNG (zlib level 1), or JPEG at quality 80 when the PNG is over :data:`PNG_LIMIT` bytes (``photo`` unused)."""
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    if buf.tell() <= PNG_LIMIT:
        return buf.getvalue()
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="JPEG", quality=80, optimize=False, progressive=False, subsampling=2)
    return buf.getvalue()


def open_canvas(image, out_h: int, out_w: int, where: str = "image"):
    """The image as RGB at ``out_h`` x ``out_w`` (a JPEG drafted), None without bytes: decoded on every call."""
    if isinstance(image, Mapping):
        image = image.get("bytes")
    if image is None or (isinstance(image, (bytes, bytearray)) and not image):
        return None
    im = image if isinstance(image, Image.Image) else Image.open(io.BytesIO(image))
    if im.format == "JPEG":
        im.draft("RGB", (out_w, out_h))
    im = im.convert("RGB")
    resample = Image.NEAREST if im.width <= out_w and im.height <= out_h else Image.BILINEAR
    return im if im.size == (out_w, out_h) else im.resize((out_w, out_h), resample)


def canvas(image, out_h: int, out_w: int, where: str):
    im = open_canvas(image, out_h, out_w, where)
    return None if im is None else np.asarray(im, dtype=np.uint8)


def outline(mask, width=1):
    """The mask's pixels with a 4-neighbour outside it or outside the image, ``width`` rings inward (numpy shifts)."""
    m = np.asarray(mask, dtype=bool)
    interior = m
    for _ in range(max(int(width), 1)):
        p = np.pad(interior, 1, constant_values=False)
        interior = p[:-2, 1:-1] & p[2:, 1:-1] & p[1:-1, :-2] & p[1:-1, 2:] & interior
    return m & ~interior


def paint_masks(base, drawn, alpha=figures.FILL_ALPHA, line=1):
    """Each mask filled over the whole picture, then outlined."""
    out = np.array(base, dtype=np.uint8)
    a = int(round(alpha * 256))
    for m, colour in drawn:
        px = out[m].astype(np.uint16)
        out[m] = ((px * (256 - a) + np.asarray(colour, dtype=np.uint16) * a) >> 8).astype(np.uint8)
    for m, colour in drawn:
        out[outline(m, line)] = colour
    return out


def old_path(monkeypatch) -> None:
    """Draw previews the old way from here on (within the test)."""
    monkeypatch.setattr(previews, "encode", encode)
    monkeypatch.setattr(previews, "canvas", canvas)
    monkeypatch.setattr(previews, "small_mask", lambda m, h, w, where="mask": masks.small_mask(m, h, w))
    monkeypatch.setattr(figures, "paint_masks", paint_masks)
