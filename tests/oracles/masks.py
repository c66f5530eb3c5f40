"""Reference implementations of perckit's mask samplers, the dense way: decode the whole mask, index it, encode.

They are what ``perckit.rle.resize_nearest``, ``perckit.draw.previews.small_mask`` and
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


def polygon_refusal(groups, h: int, w: int, where: str) -> str | None:
    """The message of the first rule of ``perckit.rle.check_polygons`` that ``groups`` (the polygons of each
    mask) break, checked plainly polygon by polygon and mask by mask, or ``None`` when every rule holds. Each
    polygon in order: it converts to numbers, has an even number (>= 6) of coordinates, at most
    ``MAX_POLYGON_VERTICES`` vertices, finite coordinates, vertices within the bounds; then each mask's vertex
    count, then each mask's outline (the sum over its edges, closing ones too, of max(|dx|, |dy|))."""
    import math

    from perckit import rle

    several = len(groups) > 1
    lo_x, hi_x, lo_y, hi_y = rle._coordinate_bounds(h, w)
    arrays = []
    for g, polys in enumerate(groups):
        for k, poly in enumerate(polys):
            label = f"{where}: mask {g}: polygon {k}" if several else f"{where}: polygon {k}"
            try:
                a = np.asarray(poly, dtype=np.float64).ravel()
            except (TypeError, ValueError, OverflowError):
                return f"{label} is not a list of numbers: {rle._short(poly)}"
            if a.size < 6 or a.size % 2:
                return f"{label} needs an even number (>= 6) of coordinates, got {a.size}"
            xs, ys = a[0::2], a[1::2]
            if xs.size > rle.MAX_POLYGON_VERTICES:
                return f"{label}: expected at most {rle.MAX_POLYGON_VERTICES} vertices, got {xs.size}"
            if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
                return f"{label} has a NaN or infinite coordinate"
            if not (xs.min() >= lo_x and xs.max() <= hi_x and ys.min() >= lo_y and ys.max() <= hi_y):
                return (f"{label} has a vertex far outside the {h}x{w} image: expected x in [{lo_x}, {hi_x}] and y in "
                        f"[{lo_y}, {hi_y}], got x in [{xs.min():.12g}, {xs.max():.12g}], y in [{ys.min():.12g}, {ys.max():.12g}]")
            arrays.append((g, xs, ys))
    mask_name = [f"{where}: mask {g}" if several else where for g in range(len(groups))]
    for g in range(len(groups)):
        vertices = sum(xs.size for owner, xs, _ in arrays if owner == g)
        if vertices > rle.MAX_POLYGON_VERTICES:
            return f"{mask_name[g]}: expected at most {rle.MAX_POLYGON_VERTICES} polygon vertices per mask, got {vertices}"
    limit = rle.polygon_outline_limit(h, w)
    for g in range(len(groups)):
        outline = sum(float(np.maximum(np.abs(np.roll(xs, -1) - xs), np.abs(np.roll(ys, -1) - ys)).sum())
                      for owner, xs, ys in arrays if owner == g)
        if outline > limit:
            return (f"{mask_name[g]}: expected polygons whose outline (the sum over the edges of max(|dx|, |dy|)) is at most "
                    f"{limit} pixels long for a {h}x{w} image ({rle.POLYGON_OUTLINE_FACTOR} x (H + W), at least "
                    f"{rle.MIN_POLYGON_OUTLINE}, at most {rle.MAX_POLYGON_OUTLINE}: pycocotools allocates memory in "
                    f"proportion to it), got {math.ceil(outline)}")
    return None
