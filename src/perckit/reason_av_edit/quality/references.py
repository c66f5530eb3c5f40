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

from ...errors import PredictionError
from ...core.schema import project
from ..features import NOT_PROVIDED_MEDIA, _media_value, media_feature

MEDIA_KEYS = ("video", "audio", "mask_video", "ref_image")


def reference_schema() -> dict:
    """``av_edit_quality`` references: builder rows projected with :func:`to_quality_reference`."""
    import datasets
    from datasets import Value

    return {
        "sample_id": Value("string"),
        "category": Value("string"),
        "sub_track": Value("string"),
        "instruction": Value("string"),
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
    """A builder row (or any dict with the reference keys) projected onto the ``av_edit_quality`` references.

    Absent media become the "not provided" marker, an empty ``edit_window_s`` becomes ``None``; a row without
    one of the keys raises :class:`PredictionError` naming them.
    """
    schema = reference_schema()
    missing = [k for k in schema if k not in row]
    if missing:
        raise PredictionError(f"row is missing the key(s) {missing} needed by the av_edit_quality references")
    sid = row.get("sample_id")
    plain = {k: v for k, v in schema.items() if k not in MEDIA_KEYS}
    out = dict(project({k: row[k] for k in plain}, plain))
    for k in ("video", "audio", "mask_video"):
        out[k] = _media_value(row[k], f"reference {sid!r}: {k}")
    out["ref_image"] = _image_value(row["ref_image"], f"reference {sid!r}: ref_image")
    if out["edit_window_s"] == []:
        out["edit_window_s"] = None
    return {k: out[k] for k in schema}


__all__ = ["reference_schema", "to_quality_reference"]
