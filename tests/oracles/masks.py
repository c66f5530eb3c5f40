"""Reference implementations of perckit's mask samplers, the dense way: decode the whole mask, index it, encode.

They are what ``perckit.rle.resize_nearest``, ``perckit.previews.small_mask`` and
``perckit.lmms_eval.box_mask`` computed before issue 28 made them work from the runs (no full-size decode): the
tests compare the new code with these on random masks, bit for bit. Slow and memory-hungry on purpose; small
inputs only.
"""

from __future__ import annotations

import numpy as np
from pycocotools import mask as _coco


def dense(rle: dict) -> np.ndarray:
    """The RLE decoded by pycocotools, as bool."""
    counts = rle["counts"]
    c = {"size": list(rle["size"]), "counts": counts.encode() if isinstance(counts, str) else counts}
    return _coco.decode(c).astype(bool)


def encode(mask: np.ndarray) -> dict:
    """pycocotools' encode of a bool array, counts as str."""
    r = _coco.encode(np.asfortranarray(mask, dtype=np.uint8))
    return {"size": [int(v) for v in r["size"]], "counts": r["counts"].decode("ascii")}


def resize_nearest(rle: dict, size) -> dict:
    """OpenCV INTER_NEAREST on the decoded mask: row i of the target is row min(i * H // h, H - 1) of the source."""
    src = dense(rle)
    sh, sw = src.shape
    h, w = int(size[0]), int(size[1])
    rows = np.minimum((np.arange(h) * sh) // h, sh - 1)
    cols = np.minimum((np.arange(w) * sw) // w, sw - 1)
    return encode(src[np.ix_(rows, cols)])


def small_mask(rle: dict, out_h: int, out_w: int) -> np.ndarray:
    """The decoded mask sampled at the ``out_h`` x ``out_w`` grid of pixel centres (the previews' rule)."""
    src = dense(rle)
    h, w = src.shape
    ys = np.minimum(((np.arange(out_h) + 0.5) * h / out_h).astype(np.int64), h - 1)
    xs = np.minimum(((np.arange(out_w) + 0.5) * w / out_w).astype(np.int64), w - 1)
    return src[np.ix_(ys, xs)]


def box_mask(box, height: int, width: int) -> dict:
    """The pixels whose centre lies in ``[x1, y1, x2, y2]``, as a dense outer product."""
    x1, y1, x2, y2 = (float(v) for v in box)
    cols = (np.arange(width) + 0.5 >= x1) & (np.arange(width) + 0.5 < x2)
    rows = (np.arange(height) + 0.5 >= y1) & (np.arange(height) + 0.5 < y2)
    return encode(np.outer(rows, cols))
