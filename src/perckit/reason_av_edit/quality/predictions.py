"""The ``av_edit_quality`` predictions: one edited clip per sample, built in Python or read from a folder.

A prediction is ``{"sample_id", "edited_video": {bytes, path}, "edited_audio": {bytes, path}}``; the edited audio
is optional (the "not provided" marker ``{"bytes": None, "path": ""}``) when the edited video carries the track.

:func:`load_quality_predictions_dir` reads a folder of method outputs named by sample id: ``<id>.mp4`` (required)
and ``<id>.wav`` (optional). Each file name is built from a checked sample id (a plain file-name stem,
:func:`..read.metadata.check_sample_id`), resolved inside the folder (:func:`perckit.io.paths.resolve_under`: a symbolic
link out of it is refused) and checked to be a regular file of at most ``limits.MAX_MEDIA_FILE_BYTES`` (a FIFO, a
device or a folder in its place is refused, never waited on). The rows keep the paths, not the bytes (the folder
of a full run is gigabytes); the metric reads each file, capped again, when it scores that sample.
:func:`write_gt_quality_predictions` writes the identity edit of builder rows (each source clip as its edited clip).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputNotFoundError, PredictionError
from ...io.paths import open_regular_file, resolve_under
from ..features import NOT_PROVIDED_MEDIA, _media_value, encode_wav, media_bytes, media_feature
from ..layout import MAX_MEDIA_FILE_BYTES
from ..read.metadata import check_sample_id
from ..read.predictions import folder_ids, write_files

#: The file of each media field in a predictions folder, after the sample id.
SUFFIXES = {"edited_video": ".mp4", "edited_audio": ".wav"}


def prediction_schema() -> dict:
    """``av_edit_quality`` predictions: the edited video and (optionally) the edited audio."""
    from datasets import Value

    return {"sample_id": Value("string"), "edited_video": media_feature(), "edited_audio": media_feature()}


def make_quality_prediction(sample_id: str, edited_video: Any, edited_audio: Any = None, sample_rate: int = 16000) -> dict:
    """One ``av_edit_quality`` prediction row.

    - ``edited_video``: the edited clip as video bytes (mp4 or any container PyAV reads), a path, or ``{bytes, path}``;
      required;
    - ``edited_audio``: WAV bytes, a WAV path, ``{bytes, path}``, a 1-D float waveform at ``sample_rate``, or ``None``
      (then the edited video's own audio track is used, if it has one).
    """
    if not isinstance(sample_id, str) or not sample_id:
        raise PredictionError(f"make_quality_prediction: sample_id must be a non-empty str, got {sample_id!r}")
    where = f"prediction {sample_id!r}"
    video = _media_value(edited_video, f"{where}: edited_video")
    if video["bytes"] is None and not video["path"]:
        raise PredictionError(f"{where}: edited_video is required (video bytes, a path or {{'bytes', 'path'}}), got {edited_video!r}")
    if isinstance(edited_audio, np.ndarray):
        edited_audio = encode_wav(edited_audio, sample_rate, subtype="FLOAT")
    return {"sample_id": sample_id, "edited_video": video, "edited_audio": _media_value(edited_audio, f"{where}: edited_audio")}


def _checked_path(root: Path, sample_id: str, key: str) -> Path | None:
    """The file of ``key`` for ``sample_id`` under ``root`` once it is known to be a regular file under the cap;
    ``None`` when nothing is there."""
    rel = f"{sample_id}{SUFFIXES[key]}"
    path = resolve_under(root, rel, f"{str(root / rel)!r}", PredictionError)
    if not os.path.lexists(path):
        return None
    with open_regular_file(path, repr(str(path)), MAX_MEDIA_FILE_BYTES, PredictionError, InputNotFoundError):
        pass
    return path


def load_quality_prediction(root: str | os.PathLike, sample_id: str) -> dict | None:
    """The prediction of ``sample_id`` from ``root`` (``<id>.mp4`` and optional ``<id>.wav``); ``None`` when the
    folder has neither. A ``.wav`` without its ``.mp4`` raises: a prediction needs the edited video."""
    root = Path(root)
    check_sample_id(sample_id, f"{str(root)!r}: sample id", PredictionError)
    video, audio = (_checked_path(root, sample_id, key) for key in ("edited_video", "edited_audio"))
    if video is None:
        if audio is not None:
            raise PredictionError(f"{str(audio)!r}: no {sample_id}{SUFFIXES['edited_video']} beside it; a prediction needs the edited video")
        return None
    return make_quality_prediction(sample_id, {"bytes": None, "path": str(video)},
                                   {"bytes": None, "path": str(audio)} if audio is not None else dict(NOT_PROVIDED_MEDIA))


def load_quality_predictions_dir(root: str | os.PathLike, sample_ids: Iterable[str] | None = None) -> list[dict]:
    """Prediction rows from a folder of edited clips named by sample id (see the module docstring).

    ``sample_ids`` (e.g. the reference ids): one row per id that has an ``<id>.mp4``; ids without one are left out
    (the metric then reports them missing: an error, or counted with ``missing="skip"``). Without it, the ids
    come from the file names (sorted).
    """
    root, ids = folder_ids(root, sample_ids, SUFFIXES.values())
    # a discovered id is never empty here (an entry named just ".mp4" is not a prediction); a given one is checked
    rows = [load_quality_prediction(root, sid) for sid in ids if sid or sample_ids is not None]
    return [r for r in rows if r is not None]


def write_gt_quality_predictions(rows: Iterable[Mapping], root: str | os.PathLike) -> int:
    """The identity edit of builder rows as a predictions folder: ``<id>.mp4`` the source video and ``<id>.wav`` the
    source audio (when the row has it), the unedited clip that every model-free key scores as perfect (``ssim`` 1,
    ``psnr`` at its cap); returns how many samples were written."""
    count = 0
    for count, row in enumerate(rows, 1):
        files = {key: media_bytes(row.get(field), f"sample {row['sample_id']!r}: {field}")
                 for key, field in (("edited_video", "video"), ("edited_audio", "audio"))}
        write_files(Path(root), row["sample_id"], files, SUFFIXES)
    return count


__all__ = ["load_quality_prediction", "load_quality_predictions_dir", "make_quality_prediction", "prediction_schema",
           "write_gt_quality_predictions"]
