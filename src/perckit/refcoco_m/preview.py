"""The export preview of RefCOCO-M (:mod:`perckit.draw.previews`): the referred mask(s) over the image the row carries.

``expressions``: the expression's mask; ``images``: every sample's mask, one Okabe–Ito colour each.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..draw import previews


def expression_preview(row: Mapping[str, Any]) -> bytes:
    """The image with the expression's mask (fill + outline)."""
    where = f"RefCOCO-M expression {row.get('expression_id')!r}"
    t = previews.masks_tile(row.get("image"), [row.get("mask")], [row.get("height"), row.get("width")], where)
    return previews.encode_tile(t, row.get("image"), "no image and no mask")


def image_preview(row: Mapping[str, Any]) -> bytes:
    """The image with every referred object's mask, one colour per object."""
    where = f"RefCOCO-M image {row.get('image_id')!r}"
    masks = [s.get("mask") for s in (row.get("samples") or []) if isinstance(s, Mapping)]
    return previews.encode_tile(previews.masks_tile(row.get("image"), masks, None, where), row.get("image"), "no image and no mask")


def make_previewer(builder: Any, config: str) -> previews.Previewer | None:
    """The previewer of ``config`` (``expressions`` or ``images``)."""
    if config == "expressions":
        picture = ("image", "mask", "height", "width")  # the expressions of one sample share their picture
        return previews.Previewer(expression_preview, picture + ("expression_id",), "refcoco_m/expressions", same=picture,
                                  legend=lambda row: previews.mask_legend(["the referred object's mask"], row.get("image")))
    if config == "images":
        return previews.Previewer(image_preview, ("image", "samples", "image_id"), "refcoco_m/images")
    return None
