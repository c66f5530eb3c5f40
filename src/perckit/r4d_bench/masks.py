"""R4D-Bench masks: a mask PNG (ground truth or prediction) as RLE under the one foreground rule, and the
frame mask of a dense-GT frame (the OR of its instance masks, from COCO segmentations or from PNGs)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from .. import rle as rle_ops
from ..errors import ReleaseFormatError, ReleaseNotFoundError, RLEError
from ..io.images import mask_foreground
from ..io.paths import read_regular_file, resolve_under
from .files import MAX_MASK_PNG_BYTES


def png_mask(path: Path, where: str) -> rle_ops.RLE:
    """A PNG mask as RLE; foreground by :func:`perckit.io.images.mask_foreground` (any channel > 0).

    The file is read by :func:`perckit.io.paths.read_regular_file` under :data:`files.MAX_MASK_PNG_BYTES`:
    a FIFO, a device or a folder is refused at once, an oversize file before it is read."""
    data = read_regular_file(path, f"{where}: mask PNG", MAX_MASK_PNG_BYTES, ReleaseFormatError, ReleaseNotFoundError)
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            mode = im.mode
            arr = np.asarray(im)
    except FileNotFoundError:
        raise ReleaseNotFoundError(f"{where}: mask PNG {str(path)!r} not found") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise ReleaseFormatError(f"{where}: cannot open mask PNG {str(path)!r}: {e}") from None
    return rle_ops.encode(mask_foreground(arr, mode, 0))


def frame_mask_from_segmentations(
    masks: Sequence[Mapping], size: tuple[int, int] | None, where: str, checked: AbstractSet[int] = frozenset()
) -> rle_ops.RLE:
    """OR of the ``segmentation`` of every mask of one frame; RLE sizes win, polygons use ``size``.

    Every mask goes through :func:`perckit.rle.to_rle` (``size`` checked, errors naming ``where: masks[k]``),
    then :func:`perckit.rle.union`, except that the polygons of the frame's masks are rasterised by one
    :func:`perckit.rle.polygon_unions` call (each mask's lists of polygons; its guard decides, and when it
    refuses, :func:`perckit.rle.to_rle` names the first refused mask) and an RLE whose ``id()`` is in
    ``checked`` (accepted by :func:`perckit.rle.valid_many`, see :func:`checked_rles`) is not validated again.
    The first bad mask (in order) raises."""
    segs = [m.get("segmentation") if isinstance(m, Mapping) else None for m in masks]
    # Only well-formed sizes (two ints) vote here; anything else is reported by rle.to_rle below.
    rle_sizes = set()
    for s in segs:
        if isinstance(s, Mapping):
            sz = s.get("size")
            if isinstance(sz, (list, tuple)) and len(sz) == 2 and type(sz[0]) is int and type(sz[1]) is int:
                rle_sizes.add((sz[0], sz[1]))
    if len(rle_sizes) > 1:
        raise ReleaseFormatError(f"{where}: masks of one frame have different sizes {sorted(rle_sizes)}")
    if rle_sizes:
        rsize = next(iter(rle_sizes))
        if size is not None and tuple(size) != rsize:
            raise ReleaseFormatError(f"{where}: RLE size {list(rsize)} differs from the frame size {list(size)} of the COCO image")
        size = rsize
    plain = size is not None and all(type(v) is int and v > 0 for v in size) and size[0] * size[1] <= rle_ops.MAX_PIXELS
    parts: list = []
    polygons: list[tuple[int, int, list]] = []  # (index in parts, k, the mask's polygons) rasterised together below
    for k, seg in enumerate(segs):
        if seg is None or (isinstance(seg, (list, dict)) and len(seg) == 0):
            continue
        if isinstance(seg, list) and size is None:
            _name_refused_polygons(polygons, size, where)
            raise ReleaseFormatError(f"{where}: masks[{k}] is a polygon and the frame size is unknown (no COCO image, no RLE)")
        if plain and type(seg) is list and all(type(p) is list for p in seg):
            polygons.append((len(parts), k, seg))
            parts.append(None)
        elif plain and id(seg) in checked and seg["size"] == [size[0], size[1]]:  # what rle.validate returns for it
            parts.append({"size": [size[0], size[1]], "counts": seg["counts"]})
        else:
            try:
                parts.append(rle_ops.to_rle(seg, size=size, where=f"{where}: masks[{k}].segmentation"))
            except (RLEError, ReleaseFormatError):
                _name_refused_polygons(polygons, size, where)  # a polygon before it was refused first
                raise
    if size is None:
        raise ReleaseFormatError(f"{where}: cannot build the frame mask: frame size unknown (no COCO image and no RLE)")
    if polygons:
        h, w = size
        try:
            unions = rle_ops.polygon_unions([seg for _, _, seg in polygons], h, w)
        except RLEError:
            _name_refused_polygons(polygons, size, where)
            raise
        for (i, _, _), one in zip(polygons, unions):
            parts[i] = one  # (pycocotools form, bytes counts: what rle.union merges)
        if len(parts) == 1:
            return {"size": [h, w], "counts": parts[0]["counts"].decode("ascii")}
    return rle_ops.union(parts, size=size, where=where)


def _name_refused_polygons(polygons: Sequence[tuple[int, int, list]], size: tuple[int, int] | None, where: str) -> None:
    """Raise the :func:`perckit.rle.to_rle` error of the first mask of ``polygons`` the polygon guard refuses, if any."""
    for _, k, seg in polygons:
        rle_ops.to_rle(seg, size=size, where=f"{where}: masks[{k}].segmentation")


def checked_rles(frames: Any) -> AbstractSet[int]:
    """The ``id()`` of every compressed RLE segmentation in dense-GT ``frames`` (``[{"masks": [{"segmentation":
    ...}]}]``) that :func:`perckit.rle.valid_many` accepts, decided in one compiled scan for a whole query.
    Anything odd is skipped, not refused: the frame-by-frame path checks it and raises the precise error.
    The ids are valid while ``frames`` is alive (the caller's entry)."""
    segs = []
    for fr in frames if type(frames) is list else ():
        for m in (fr.get("masks") if type(fr) is dict else None) or ():
            seg = m.get("segmentation") if type(m) is dict else None
            if type(seg) is dict:
                segs.append(seg)
    return {id(seg) for seg, ok in zip(segs, rle_ops.valid_many(segs)) if ok}


def frame_mask_from_pngs(root: Path, frame: Mapping, size: tuple[int, int] | None, where: str) -> rle_ops.RLE:
    """OR of the per-mask ``mask_image`` PNGs, else the frame's ``combined_mask_image``."""
    masks = frame.get("masks") or []
    paths = [m.get("mask_image") for m in masks if isinstance(m, Mapping)]
    if masks and all(isinstance(p, str) for p in paths):
        parts = []
        for k, p in enumerate(paths):
            kwhere = f"{where}: masks[{k}].mask_image"
            parts.append(png_mask(resolve_under(root, p, kwhere), kwhere))
    elif isinstance(frame.get("combined_mask_image"), str):
        cwhere = f"{where}: combined_mask_image"
        parts = [png_mask(resolve_under(root, frame["combined_mask_image"], cwhere), cwhere)]
    elif not masks:
        parts = []
    else:
        raise ReleaseFormatError(f"{where}: mask_source='mask_image' needs 'mask_image' on every mask or a 'combined_mask_image'")
    if parts:
        psize = tuple(parts[0]["size"])
        if size is not None and psize != tuple(size):
            raise ReleaseFormatError(f"{where}: mask PNG size {list(psize)} differs from the frame size {list(size)}")
        size = psize
    if size is None:
        raise ReleaseFormatError(f"{where}: cannot build the frame mask: frame size unknown")
    return rle_ops.union(parts, size=size, where=where)
