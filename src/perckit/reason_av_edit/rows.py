"""One builder row of ReasonAVEdit-Bench: a :class:`~.read.metadata.Sample`, its annotation and its media bytes.

:func:`build_row` is the same for both source modes (the builder passes a reader of the tars or of the
extracted folders), so archive and extracted builds give identical rows. :func:`anchor_mask_from_png`
is the one reader of a binary mask image (the release's ``reason_visual_mask`` and a prediction's
``<id>_anchor_mask.png``).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .. import rle as rle_ops
from ..errors import ReleaseFormatError
from ..io.images import mask_foreground
from .read.metadata import MEDIA_FIELDS, Sample


def anchor_mask_from_png(data: bytes, threshold: int, where: str) -> dict:
    """The RLE of a binary mask image: foreground by :func:`perckit.io.images.mask_foreground` (any stored
    channel, alpha included, > ``threshold``; palette images compare their indices)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            mode = img.mode
            arr = np.asarray(img)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        # SyntaxError: Pillow's "broken PNG file" (a chunk length that does not fit the data);
        # DecompressionBombError: a header declaring more than 2 x Image.MAX_IMAGE_PIXELS pixels.
        raise ReleaseFormatError(f"{where}: expected a readable mask image (PNG), got: {e}") from None
    return rle_ops.encode(mask_foreground(arr, mode, threshold))


def build_row(sample: Sample, fields: Mapping, annotation_text: str | None, media: Callable[[str, str], bytes], threshold: int) -> dict:
    """One builder row. ``media(field, path)`` returns the bytes of a media path.

    Every media value is ``{"bytes": <file bytes>, "path": <release-relative path>}`` in both
    source modes, so archive and extracted builds are identical.
    """
    text = ("sample_id", "category", "sub_track", "instruction", "language", "orientation")
    row: dict[str, Any] = {k: getattr(sample, k) for k in text}
    for fld in MEDIA_FIELDS:
        path = getattr(sample, fld)
        row[fld] = {"bytes": media(fld, path), "path": path} if path else None
    mask_where = f"{sample.reason_visual_mask!r} (sample {sample.sample_id!r}, column 'reason_visual_mask')"
    row["anchor_mask"] = anchor_mask_from_png(row["reason_visual_mask"]["bytes"], threshold, mask_where)
    for k in ("edit_window_s", "edit_window_frames", "anchor_frame", "selected_instance_index"):
        row[k] = fields.get(k)
    for k in ("fps", "num_frames"):  # the annotation's, else the CSV's
        row[k] = fields.get(k) if fields.get(k) is not None else getattr(sample, k)
    row["annotation_json"] = annotation_text
    return row
