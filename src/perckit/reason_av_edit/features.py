"""Features of the ReasonAVEdit-Bench builder, the ``av_reasoning`` input schemas, and the row helpers.

"Not provided" markers (evaluate 0.4 needs every key at every level, and a str for string features):

- an RLE with ``size: []`` and ``counts: ""``;
- media ``{"bytes": None, "path": ""}``;
- ``None`` for the window and the instance index.

:func:`make_prediction` fills them (:func:`encode_wav` writes a waveform as WAV bytes); :func:`to_metric_reference`
projects a builder row.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import rle as rle_ops
from ..errors import PredictionError
from ..core.schema import project, rle_feature

if TYPE_CHECKING:  # the functions that build features import datasets; importing this module does not
    import datasets

NOT_PROVIDED_RLE = {"size": [], "counts": ""}
NOT_PROVIDED_MEDIA = {"bytes": None, "path": ""}
#: The text fields both ReasonAVEdit reference schemas open with (the id, then what the metrics group by).
REFERENCE_TEXT = ("sample_id", "category", "sub_track", "language", "orientation")


def media_feature() -> dict:
    """``{bytes, path}``: the same Arrow storage as ``Audio`` / ``Video(decode=False)`` / ``Image``."""
    from datasets import Value

    return {"bytes": Value("binary"), "path": Value("string")}


def builder_features() -> datasets.Features:
    """The ``test`` split's features (spec section 3). Media are never decoded by the builder."""
    import datasets
    from datasets import Value

    return datasets.Features({
        "sample_id": Value("string"),
        "category": Value("string"),
        "sub_track": Value("string"),
        "instruction": Value("string"),
        "language": Value("string"),
        "orientation": Value("string"),
        "video": datasets.Video(decode=False),
        "audio": media_feature(),
        "mask_video": datasets.Video(decode=False),
        "reason_visual": datasets.Image(),
        "reason_visual_mask": datasets.Image(),
        "anchor_mask": rle_feature(),
        "reason_audio": media_feature(),
        "ref_image": datasets.Image(),
        "edit_window_s": [Value("float64")],
        "edit_window_frames": [Value("int32")],
        "anchor_frame": Value("int32"),
        "selected_instance_index": Value("int32"),
        "fps": Value("float64"),
        "num_frames": Value("int32"),
        "annotation_json": Value("string"),
    })


def prediction_schema() -> dict:
    """``av_reasoning`` predictions: the reasoning fields of a row."""
    import datasets
    from datasets import Value

    return {
        "sample_id": Value("string"),
        "anchor_mask": rle_feature(),
        "reason_audio": media_feature(),
        "edit_window_s": datasets.Sequence(Value("float64")),
        "mask_video": media_feature(),
        "selected_instance_index": Value("int32"),
    }


def reference_schema() -> dict:
    """``av_reasoning`` references: builder rows projected with :func:`to_metric_reference`."""
    import datasets
    from datasets import Value

    return {
        **{k: Value("string") for k in REFERENCE_TEXT},
        "anchor_mask": rle_feature(),
        "reason_audio": media_feature(),
        "mask_video": media_feature(),
        "edit_window_s": datasets.Sequence(Value("float64")),
        "edit_window_frames": datasets.Sequence(Value("int32")),
        "fps": Value("float64"),
        "num_frames": Value("int32"),
        "selected_instance_index": Value("int32"),
    }


def _media_value(value: Any, where: str) -> dict:
    """Any media input as ``{bytes, path}``; ``None`` is the "not provided" marker."""
    if value is None:
        return dict(NOT_PROVIDED_MEDIA)
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": bytes(value), "path": ""}
    if isinstance(value, (str, os.PathLike)):
        return {"bytes": None, "path": str(value)}
    if isinstance(value, Mapping):
        data, path = value.get("bytes"), value.get("path")
        if data is not None and not isinstance(data, (bytes, bytearray)):
            raise PredictionError(f"{where}: 'bytes' must be bytes or None, got {type(data).__name__}")
        if path is not None and not isinstance(path, str):
            raise PredictionError(f"{where}: 'path' must be a str or None, got {type(path).__name__}")
        return {"bytes": bytes(data) if data is not None else None, "path": path or ""}
    raise PredictionError(f"{where}: expected bytes, a path or {{'bytes', 'path'}}, got {type(value).__name__}")


def is_not_provided_rle(value: Mapping) -> bool:
    """``True`` for the "not provided" RLE marker (``size`` None or empty, ``counts`` None or "")."""
    size, counts = value.get("size"), value.get("counts")
    return (size is None or (isinstance(size, (list, tuple)) and len(size) == 0)) and (counts is None or (isinstance(counts, str) and counts == ""))


def _mask_value(value: Any, where: str) -> dict:
    if value is None:
        return dict(NOT_PROVIDED_RLE)
    if isinstance(value, Mapping) and is_not_provided_rle(value):
        return dict(NOT_PROVIDED_RLE)
    return rle_ops.to_rle(value, where=where)


def _window_value(value: Any, where: str) -> list[float] | None:
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise PredictionError(f"{where}: expected a [start, end) pair in seconds or None, got {value!r}")
    try:
        return [float(value[0]), float(value[1])]
    except (TypeError, ValueError):
        raise PredictionError(f"{where}: expected two numbers, got {value!r}") from None


def encode_wav(x: Any, sample_rate: int = 16000, subtype: str = "PCM_16") -> bytes:
    """A mono waveform (floats in [-1, 1]) as WAV bytes."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.asarray(x, dtype=np.float64), int(sample_rate), format="WAV", subtype=subtype)
    return buf.getvalue()


def make_prediction(
    sample_id: str,
    *,
    anchor_mask: Any = None,
    reason_audio: Any = None,
    edit_window_s: Sequence[float] | None = None,
    mask_video: Any = None,
    selected_instance_index: int | None = None,
    sample_rate: int = 16000,
) -> dict:
    """One ``av_reasoning`` prediction row, with the "not provided" marker for every ``None``.

    - ``anchor_mask``: a COCO RLE dict, an uncompressed RLE, or a 2-D binary array;
    - ``reason_audio``: WAV bytes, a WAV path, ``{bytes, path}``, or a 1-D float waveform at ``sample_rate``;
    - ``edit_window_s``: ``[start, end)`` in seconds (``end <= start`` means "no edit");
    - ``mask_video``: mask-video bytes, a path, or ``{bytes, path}``;
    - ``selected_instance_index``: an int.
    """
    where = f"prediction {sample_id!r}"
    if not isinstance(sample_id, str) or not sample_id:
        raise PredictionError(f"make_prediction: sample_id must be a non-empty str, got {sample_id!r}")
    if isinstance(reason_audio, np.ndarray):
        reason_audio = encode_wav(reason_audio, sample_rate)
    if selected_instance_index is not None and (isinstance(selected_instance_index, bool) or not isinstance(selected_instance_index, (int, np.integer))):
        raise PredictionError(f"{where}: selected_instance_index must be an int or None, got {selected_instance_index!r}")
    return {
        "sample_id": sample_id,
        "anchor_mask": _mask_value(anchor_mask, f"{where}: anchor_mask"),
        "reason_audio": _media_value(reason_audio, f"{where}: reason_audio"),
        "edit_window_s": _window_value(edit_window_s, f"{where}: edit_window_s"),
        "mask_video": _media_value(mask_video, f"{where}: mask_video"),
        "selected_instance_index": None if selected_instance_index is None else int(selected_instance_index),
    }


def project_row(row: Mapping, schema: dict, media: Mapping[str, Any], metric: str) -> dict:
    """``row`` projected onto the ``schema`` of ``metric``'s references: the keys of ``media`` by their value function
    (``(value, where) -> value``), the others by :func:`perckit.core.schema.project`, an empty ``edit_window_s`` /
    ``edit_window_frames`` as ``None``; a row without one of the keys raises :class:`PredictionError` naming them."""
    missing = [k for k in schema if k not in row]
    if missing:
        raise PredictionError(f"row is missing the key(s) {missing} needed by the {metric} references")
    plain = {k: v for k, v in schema.items() if k not in media}
    out = dict(project({k: row[k] for k in plain}, plain))
    out.update({k: value(row[k], f"reference {row.get('sample_id')!r}: {k}") for k, value in media.items()})
    for k in ("edit_window_s", "edit_window_frames"):
        if out.get(k) == []:
            out[k] = None
    return {k: out[k] for k in schema}


def to_metric_reference(row: Mapping) -> dict:
    """A builder row (or any dict with the reference keys) projected onto the ``av_reasoning`` references
    (:func:`project_row`): absent media and masks become the "not provided" markers."""
    media = {"anchor_mask": _mask_value, "reason_audio": _media_value, "mask_video": _media_value}
    return project_row(row, reference_schema(), media, "av_reasoning")


def gt_as_prediction(row: Mapping) -> dict:
    """A builder row (or a reference) as the prediction that copies its ground truth."""
    return make_prediction(
        row["sample_id"],
        anchor_mask=row.get("anchor_mask"),
        reason_audio=row.get("reason_audio"),
        edit_window_s=row.get("edit_window_s") or None,
        mask_video=row.get("mask_video"),
        selected_instance_index=row.get("selected_instance_index"),
    )


def media_bytes(value: Mapping | None, where: str, base: str | os.PathLike | None = None) -> bytes | None:
    """The bytes of a media value; ``None`` for the "not provided" marker.

    ``bytes`` wins; otherwise ``path`` is read, as a regular file of at most
    ``layout.MAX_MEDIA_FILE_BYTES`` (a FIFO, a device or a folder is refused before reading). With ``base``,
    the path must be relative and stay inside ``base`` (:func:`perckit.io.paths.resolve_under`); without it,
    it is taken as given (a row built in Python). A path that does not exist raises
    :class:`~perckit.errors.InputNotFoundError` naming ``where`` and the path.
    """
    from ..errors import InputNotFoundError
    from ..io.paths import read_regular_file, resolve_under
    from .layout import MAX_MEDIA_FILE_BYTES

    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise PredictionError(f"{where}: expected a media value {{'bytes', 'path'}} or null, got {type(value).__name__}")
    data, path = value.get("bytes"), value.get("path")
    if data is not None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise PredictionError(f"{where}: expected 'bytes' to be bytes or null, got {type(data).__name__}")
        return bytes(data)
    if not path:
        return None
    if not isinstance(path, (str, os.PathLike)):
        raise PredictionError(f"{where}: expected 'path' to be a string, got {type(path).__name__}")
    p = resolve_under(base, os.fspath(path), f"{where}: path", PredictionError) if base is not None else Path(path)
    if not os.path.lexists(p):
        raise InputNotFoundError(f"{where}: file {str(p)!r} not found (expected the media bytes or an existing path)")
    return read_regular_file(p, where, MAX_MEDIA_FILE_BYTES, PredictionError, InputNotFoundError)


def is_media_provided(value: Mapping | None) -> bool:
    """``False`` for ``None`` and the "not provided" marker; a value that is not a dict counts as provided
    (so that :func:`media_bytes` reports it)."""
    if value is None:
        return False
    if not isinstance(value, Mapping):
        return True
    return value.get("bytes") is not None or bool(value.get("path"))


__all__ = [
    "NOT_PROVIDED_MEDIA", "NOT_PROVIDED_RLE", "builder_features", "gt_as_prediction", "make_prediction", "media_bytes",
    "media_feature", "prediction_schema", "reference_schema", "to_metric_reference",
]
