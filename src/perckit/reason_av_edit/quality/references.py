"""The ``av_edit_quality`` references: a builder row projected onto what the edit-quality metric reads.

:func:`to_quality_reference` keeps the source clip (``video`` and ``audio``), the full-timeline ``mask_video``,
the instruction, the category and sub-track, the edit window, ``fps`` / ``num_frames`` and the reference image.
Media are ``{bytes, path}`` ("not provided" = ``{"bytes": None, "path": ""}``); the reference image, which
``load_dataset`` decodes to a PIL image, is stored PNG-encoded (lossless), and an image row left undecoded
(``{bytes, path}``) is kept as it is.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..features import NOT_PROVIDED_MEDIA, REFERENCE_TEXT, _media_value, media_feature, project_row


def reference_schema() -> dict:
    """``av_edit_quality`` references: builder rows projected with :func:`to_quality_reference`."""
    import datasets
    from datasets import Value

    return {
        **{k: Value("string") for k in (*REFERENCE_TEXT, "instruction")},
        "video": media_feature(),
        "audio": media_feature(),
        "mask_video": media_feature(),
        "ref_image": media_feature(),
        "edit_window_s": datasets.Sequence(Value("float64")),
        "fps": Value("float64"),
        "num_frames": Value("int32"),
    }


def _image_value(value: Any, where: str) -> dict:
    """A reference image as media: a PIL image or a uint8 array PNG-encoded, bytes / a path / ``{bytes, path}`` kept."""
    if value is None:
        return dict(NOT_PROVIDED_MEDIA)
    if isinstance(value, np.ndarray):
        from PIL import Image

        value = Image.fromarray(value)
    if hasattr(value, "save") and hasattr(value, "mode"):  # a PIL image
        buf = io.BytesIO()
        img = value if value.mode in ("RGB", "RGBA", "L") else value.convert("RGB")
        img.save(buf, format="PNG")
        return {"bytes": buf.getvalue(), "path": ""}
    return _media_value(value, where)


def to_quality_reference(row: Mapping) -> dict:
    """A builder row (or any dict with the reference keys) projected onto the ``av_edit_quality`` references
    (:func:`..features.project_row`): absent media become the "not provided" marker, an empty ``edit_window_s``
    becomes ``None``; a row without one of the keys raises :class:`PredictionError` naming them."""
    media = {"video": _media_value, "audio": _media_value, "mask_video": _media_value, "ref_image": _image_value}
    return project_row(row, reference_schema(), media, "av_edit_quality")


__all__ = ["reference_schema", "to_quality_reference"]
