"""Reference implementations of perckit's mask samplers, the dense way: decode the whole mask, index it, encode.

The resizes are the libraries themselves (PIL, OpenCV) on the decoded mask; ``box_mask`` is what
``perckit.lmms_eval.box_mask`` computed before issue 28 made it work from the runs (no full-size decode): the
tests compare perckit's code with these on random masks, bit for bit. Slow and memory-hungry on purpose; small
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


def library_resize(mask: np.ndarray, size, rule: str) -> np.ndarray:
    """A bool mask resized to ``size`` ([H, W]) by the library itself: PIL ``Image.NEAREST`` (``rule="pil"``) or
    ``cv2.resize(..., interpolation=cv2.INTER_NEAREST)`` (``rule="opencv"``)."""
    h, w = int(size[0]), int(size[1])
    img = np.ascontiguousarray(mask, dtype=np.uint8)
    if rule == "opencv":
        import cv2

        return cv2.resize(img, (w, h), interpolation=cv2.INTER_NEAREST).astype(bool)
    from PIL import Image

    return np.asarray(Image.fromarray(img * 255, mode="L").resize((w, h), Image.NEAREST)) > 0


def resize_nearest(rle: dict, size, rule: str) -> dict:
    """The decoded mask resized by the library of ``rule`` (:func:`library_resize`), encoded."""
    return encode(library_resize(dense(rle), size, rule))


def small_mask(rle: dict, out_h: int, out_w: int) -> np.ndarray:
    """The decoded mask resized by PIL's ``Image.NEAREST`` (the previews' rule)."""
    return library_resize(dense(rle), (out_h, out_w), "pil")


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
