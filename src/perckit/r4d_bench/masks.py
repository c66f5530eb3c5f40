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
from pycocotools import mask as _cocomask

from .. import rle as rle_ops
from ..errors import ReleaseFormatError, ReleaseNotFoundError, RLEError
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


def frame_mask_from_segmentations(
    masks: Sequence[Mapping], size: tuple[int, int] | None, where: str, checked: AbstractSet[int] = frozenset()
) -> rle_ops.RLE:
    """OR of the ``segmentation`` of every mask of one frame; RLE sizes win, polygons use ``size``.

    A frame of plain masks (what the release holds) takes :func:`_plain_frame_mask`, which makes the same
    pycocotools calls without the per-mask conversions; anything else, and every error, comes from
    :func:`frame_mask_reference`. ``checked``: the ``id()`` of RLE segmentation dicts that
    :func:`perckit.rle.valid_many` accepted (see :func:`checked_rles`), not validated again."""
    if size is not None:
        fast = _plain_frame_mask(masks, size, where, checked)
        if fast is not None:
            return fast
    return frame_mask_reference(masks, size, where)


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


def _plain_frame_mask(
    masks: Sequence[Mapping], size: tuple[int, int], where: str, checked: AbstractSet[int] = frozenset()
) -> rle_ops.RLE | None:
    """The frame mask of :func:`frame_mask_reference`, or None (the caller then takes the reference path).

    Taken only when ``size`` is two positive ints within :data:`perckit.rle.MAX_PIXELS` and every mask is a
    ``dict`` whose ``segmentation`` is absent / empty, a list of polygons that the polygon guard of
    :func:`perckit.rle.polygon_unions` accepts, or a compressed RLE with ``str`` counts and a ``size`` equal to
    ``[H, W]`` that :func:`perckit.rle.validate` accepts; at least one mask is not empty. Then the reference
    checks all pass and this makes the same pycocotools calls in the same order: each mask's polygons
    rasterised (one ``frPyObjects`` call for the frame, :func:`perckit.rle.polygon_unions`) and merged
    per mask, then the masks merged; one mask is returned as the reference returns it (a validated RLE as
    given, not re-encoded). The tests compare both paths on the sample releases and on hand-made frames."""
    h, w = size
    if type(h) is not int or type(w) is not int or h <= 0 or w <= 0 or h * w > rle_ops.MAX_PIXELS:
        return None
    items: list = []  # per non-empty mask: a validated RLE dict, or its list of polygons
    for k, m in enumerate(masks):
        if type(m) is not dict:
            return None
        seg = m.get("segmentation")
        if seg is None or (type(seg) in (list, dict) and len(seg) == 0):
            continue
        if type(seg) is dict:
            sz = seg.get("size")
            if type(seg.get("counts")) is not str or type(sz) is not list or len(sz) != 2 or type(sz[0]) is not int or type(sz[1]) is not int or sz != [h, w]:
                return None
            if id(seg) in checked:  # what validate returns for it
                items.append({"size": [h, w], "counts": seg["counts"]})
                continue
            try:
                items.append(rle_ops.validate(seg, f"{where}: masks[{k}].segmentation", expected_size=size))
            except RLEError:
                return None
            continue
        if type(seg) is not list or type(seg[0]) is not list:
            return None  # a single flat polygon (the reference wraps it) or anything else
        items.append(seg)
    if not items:
        return None
    try:  # the polygon guard (rle.check_polygons) decides; its refusal is the reference's to name
        unions = iter(rle_ops.polygon_unions([item for item in items if type(item) is list], h, w))
    except RLEError:
        return None
    parts = [item if type(item) is dict else next(unions) for item in items]
    if len(parts) == 1:
        one = parts[0]
        return dict(one) if "counts" in one and type(one["counts"]) is str else {"size": [h, w], "counts": one["counts"].decode("ascii")}
    c_parts = [{"size": [h, w], "counts": p["counts"].encode("ascii")} if type(p["counts"]) is str else p for p in parts]
    return {"size": [h, w], "counts": _cocomask.merge(c_parts, intersect=False)["counts"].decode("ascii")}


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
