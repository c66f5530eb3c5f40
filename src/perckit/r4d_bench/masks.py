"""R4D-Bench masks: a mask PNG (ground truth or prediction) as RLE under the one foreground rule, and the
frame mask of a dense-GT frame (the OR of its instance masks, from COCO segmentations or from PNGs)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as _cocomask

from .. import rle as rle_ops
from ..errors import ReleaseFormatError, ReleaseNotFoundError
from ..images import mask_foreground
from ..paths import read_regular_file, resolve_under
from .files import MAX_MASK_PNG_BYTES


def png_mask(path: Path, where: str) -> rle_ops.RLE:
    """A PNG mask as RLE; foreground by :func:`perckit.images.mask_foreground` (any channel > 0).

    The file is read by :func:`perckit.paths.read_regular_file` under :data:`files.MAX_MASK_PNG_BYTES`:
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


def frame_mask_from_segmentations(masks: Sequence[Mapping], size: tuple[int, int] | None, where: str) -> rle_ops.RLE:
    """OR of the ``segmentation`` of every mask of one frame; RLE sizes win, polygons use ``size``.

    A frame whose masks are all plain polygons (what the release holds) takes :func:`_polygon_frame_mask`,
    which gives the same RLE in one pycocotools call; anything else, and every error, comes from
    :func:`frame_mask_reference`."""
    if size is not None:
        fast = _polygon_frame_mask(masks, size)
        if fast is not None:
            return fast
    return frame_mask_reference(masks, size, where)


def _polygon_frame_mask(masks: Sequence[Mapping], size: tuple[int, int]) -> rle_ops.RLE | None:
    """The frame mask of :func:`frame_mask_reference` when every mask is a ``dict`` whose ``segmentation`` is
    a non-empty list of plain polygons (:func:`perckit.rle._plain_polygon_ok`) or absent / empty, and
    ``size`` is two positive ints within :data:`perckit.rle.MAX_PIXELS`; None otherwise (the caller takes
    the reference path).

    The same RLE: the reference rasterises each mask's polygons with ``frPyObjects``, merges them, then
    merges the masks; pycocotools' merge emits a run only where the OR changes value, so the union of all
    the frame's polygons at once is the same canonical RLE (the tests compare both on every sample release
    and on hand-made frames)."""
    h, w = size
    if type(h) is not int or type(w) is not int or h <= 0 or w <= 0 or h * w > rle_ops.MAX_PIXELS:
        return None
    polys: list = []
    for m in masks:
        if type(m) is not dict:
            return None
        seg = m.get("segmentation")
        if seg is None:
            continue
        if type(seg) is not list:
            return None  # an RLE (or an empty dict): the reference path
        if seg and type(seg[0]) is not list:
            return None  # a single flat polygon: the reference wraps it
        for poly in seg:
            if not rle_ops._plain_polygon_ok(poly, h, w):
                return None
        polys.extend(seg)
    if not polys:
        return None
    parts = _cocomask.frPyObjects(polys, h, w)
    merged = _cocomask.merge(parts, intersect=False) if len(parts) > 1 else parts[0]
    return {"size": [h, w], "counts": merged["counts"].decode("ascii")}


def frame_mask_reference(masks: Sequence[Mapping], size: tuple[int, int] | None, where: str) -> rle_ops.RLE:
    """The reference rule of :func:`frame_mask_from_segmentations` (every mask through :func:`perckit.rle.to_rle`,
    then :func:`perckit.rle.union`), with every check and its message."""
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
    parts = []
    for k, seg in enumerate(segs):
        if seg is None or (isinstance(seg, (list, dict)) and len(seg) == 0):
            continue
        if isinstance(seg, list) and size is None:
            raise ReleaseFormatError(f"{where}: masks[{k}] is a polygon and the frame size is unknown (no COCO image, no RLE)")
        parts.append(rle_ops.to_rle(seg, size=size, where=f"{where}: masks[{k}].segmentation"))
    if size is None:
        raise ReleaseFormatError(f"{where}: cannot build the frame mask: frame size unknown (no COCO image and no RLE)")
    return rle_ops.union(parts, size=size, where=where)


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
