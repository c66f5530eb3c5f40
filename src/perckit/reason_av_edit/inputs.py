"""The inputs of ``av_reasoning``, decoded and checked: every prediction and reference value the metric reads.

Scoring (:mod:`.metrics`) never parses a value itself; it calls these, which turn one field of a row into
what the formulas use and raise :class:`~perckit.errors.PredictionError` (an :class:`~perckit.errors.RLEError`
for masks) naming the side, the sample and the field (``where``):

- :func:`optional_rle`: ``anchor_mask`` as a validated RLE, or ``None`` for "not provided";
- :func:`optional_window`: ``edit_window_s`` / ``edit_window_frames`` as a ``(start, end)`` pair, or ``None``;
- :func:`instance_index`: ``selected_instance_index`` as an int, or ``None``;
- :func:`waveform`: ``reason_audio`` decoded (:func:`.audio.decode_wav`) into an :class:`.audio.Waveform`;
- :func:`reference_samples`: a reference clip's length in audio samples from its ``fps`` and ``num_frames``;
- :func:`mask_video_activity`: ``mask_video`` decoded into one active flag per frame
  (:func:`probe_video` checks the header against :mod:`.limits` first, :func:`decode_mask_video` decodes).

Media values are read by :func:`.features.media_bytes` (``bytes`` wins, else a capped read of ``path``).
"""

from __future__ import annotations

import io
import math
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import rle as rle_ops
from ..errors import PredictionError, RLEError
from . import audio as au
from .features import is_not_provided_rle, media_bytes


def optional_rle(value: Any, where: str) -> dict | None:
    """A validated RLE, or ``None`` for the "not provided" marker (``size: []``, ``counts: ""``) or ``None``.

    An RLE whose ``size`` is not two positive ints raises naming ``where``.
    """
    if value is None:
        return None
    if isinstance(value, Mapping):
        size = value.get("size")
        if is_not_provided_rle(value):
            return None
        if not isinstance(size, (list, tuple)) or len(size) != 2:
            raise RLEError(f"{where}: expected 'size' = [H, W] (length 2) or the 'not provided' marker (size [] and counts ''), got {size!r}")
    return rle_ops.to_rle(value, where=where)


def optional_window(value: Any, where: str, error: type[Exception] = PredictionError, strict_order: bool = False) -> tuple[float, float] | None:
    """A ``[start, end)`` pair as floats, or ``None`` when not provided (``None`` or ``[]``)."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise error(f"{where}: expected a [start, end) pair (a list of two numbers) or null, got {value!r}")
    seq = list(value)
    if not seq:
        return None
    if len(seq) != 2:
        raise error(f"{where}: expected a [start, end) pair, got {seq!r}")
    try:
        a, b = float(seq[0]), float(seq[1])
    except (TypeError, ValueError):
        raise error(f"{where}: expected two numbers, got {seq!r}") from None
    if not (math.isfinite(a) and math.isfinite(b)):
        raise error(f"{where}: expected finite numbers, got {seq!r}")
    if strict_order and b < a:
        raise error(f"{where}: window has end < start ({a!r} > {b!r})")
    return a, b


def cv2_or_none() -> Any:
    """The ``cv2`` module, or ``None`` when OpenCV is not installed (the video keys are then skipped)."""
    try:
        import cv2
    except ImportError:
        return None
    return cv2


def check_video_header(container: Any, label: str, where: str, kind: str = "video") -> Any:
    """The first video stream of an open PyAV container, after its declared size, length and duration are checked
    against the caps of :mod:`.limits` (``MAX_VIDEO_PIXELS`` per frame, ``MAX_VIDEO_FRAMES`` frames,
    ``MAX_VIDEO_DURATION_S`` seconds); ``kind`` names the file in the messages ("video", "mask video")."""
    import av

    from .limits import MAX_VIDEO_DURATION_S, MAX_VIDEO_FRAMES, MAX_VIDEO_PIXELS

    if not container.streams.video:
        raise PredictionError(f"{where}: the {kind} {label!r} has no video stream (expected an mp4 with one)")
    s = container.streams.video[0]
    w, h = int(s.codec_context.width or 0), int(s.codec_context.height or 0)
    frames = int(s.frames or 0)
    duration = float(s.duration * s.time_base) if s.duration and s.time_base else (
        container.duration / av.time_base if container.duration else None)
    if w * h > MAX_VIDEO_PIXELS:
        raise PredictionError(f"{where}: the {kind} {label!r} declares {w} x {h} frames, more than the limit of "
                              f"{MAX_VIDEO_PIXELS} pixels (perckit.reason_av_edit.limits.MAX_VIDEO_PIXELS)")
    if frames > MAX_VIDEO_FRAMES:
        raise PredictionError(f"{where}: the {kind} {label!r} declares {frames} frames, more than the limit of "
                              f"{MAX_VIDEO_FRAMES} (perckit.reason_av_edit.limits.MAX_VIDEO_FRAMES)")
    if duration is not None and duration > MAX_VIDEO_DURATION_S:
        raise PredictionError(f"{where}: the {kind} {label!r} declares {duration:.6g} s, more than the limit of "
                              f"{MAX_VIDEO_DURATION_S:g} s (perckit.reason_av_edit.limits.MAX_VIDEO_DURATION_S)")
    return s


def probe_video(data: bytes, path: str, where: str) -> None:
    """Check a mask video's container header (PyAV stream metadata) with :func:`check_video_header` before
    anything is decoded. A container PyAV cannot open is left to OpenCV (which then reports it)."""
    try:
        import av
    except ImportError:  # the decoding loop still enforces the caps
        return
    label = path or "<bytes>"
    try:
        container = av.open(io.BytesIO(data), mode="r")
    except Exception:  # av.error.* on anything that is not a container: OpenCV gives the documented error
        return
    with container:
        check_video_header(container, label, where, "mask video")


def decode_mask_video(data: bytes | None, path: str, where: str, threshold: int, null_area_frac: float) -> tuple[np.ndarray, float]:
    """``(active per frame, fps)`` of a mask video, decoded with OpenCV.

    Frames are converted to gray and thresholded at ``> threshold``; a frame is active when its
    foreground covers ``>= null_area_frac`` of the frame. Without ``data``, ``path`` is read as a regular
    file of at most ``limits.MAX_MEDIA_FILE_BYTES``. The header is checked first (:func:`probe_video`), and
    decoding stops with an error past ``MAX_VIDEO_FRAMES`` frames or a frame over ``MAX_VIDEO_PIXELS``. A
    video that cannot be opened or has no frame raises :class:`PredictionError` naming ``where``.
    """
    from ..errors import InputNotFoundError
    from ..io.paths import read_regular_file
    from .limits import MAX_MEDIA_FILE_BYTES, MAX_VIDEO_FRAMES, MAX_VIDEO_PIXELS

    if data is None:
        data = read_regular_file(path, where, MAX_MEDIA_FILE_BYTES, PredictionError, InputNotFoundError)
    if len(data) > MAX_MEDIA_FILE_BYTES:
        raise PredictionError(f"{where}: the mask video {path or '<bytes>'!r} holds {len(data)} bytes, more than the limit of "
                              f"{MAX_MEDIA_FILE_BYTES} (perckit.reason_av_edit.limits.MAX_MEDIA_FILE_BYTES)")
    probe_video(data, path, where)
    cv2 = cv2_or_none()
    fd, tmp = tempfile.mkstemp(suffix=".mp4", prefix="perckit-mask-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        cap = cv2.VideoCapture(tmp)
        try:
            if not cap.isOpened():
                raise PredictionError(f"{where}: the mask video {path or '<bytes>'!r} cannot be opened (expected an mp4 readable by OpenCV)")
            fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
            active = []
            while True:
                ok, frame = cap.read()
                if not ok:
                    break
                if len(active) >= MAX_VIDEO_FRAMES:
                    raise PredictionError(f"{where}: the mask video {path or '<bytes>'!r} has more than {MAX_VIDEO_FRAMES} frames "
                                          "(perckit.reason_av_edit.limits.MAX_VIDEO_FRAMES)")
                gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) if frame.ndim == 3 else frame
                if gray.size > MAX_VIDEO_PIXELS:
                    raise PredictionError(f"{where}: the mask video {path or '<bytes>'!r} has a frame of {gray.shape[1]} x {gray.shape[0]}, "
                                          f"more than the limit of {MAX_VIDEO_PIXELS} pixels")
                fg = int(np.count_nonzero(gray > threshold))
                active.append(fg >= null_area_frac * gray.size and fg > 0)
        finally:
            cap.release()
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    if not active:
        raise PredictionError(f"{where}: the mask video {path or '<bytes>'!r} cannot be opened or has no decodable frame")
    return np.asarray(active, dtype=bool), fps


def mask_video_activity(value: Mapping, where: str, threshold: int, null_area_frac: float) -> tuple[np.ndarray, float]:
    """``(active per frame, fps)`` of a provided ``mask_video`` media value (:func:`.features.media_bytes`, then
    :func:`decode_mask_video`)."""
    data = media_bytes(value, where)
    return decode_mask_video(data, value.get("path") or "", where, threshold, null_area_frac)


def waveform(value: Mapping | None, where: str, o: au.AudioOptions, n: int | None = None) -> au.Waveform | None:
    """``reason_audio`` decoded (:func:`.audio.decode_wav`) and, given ``n``, padded or cut to ``n`` samples;
    ``None`` when not provided."""
    data = media_bytes(value, where)
    if data is None:
        return None
    x = au.decode_wav(data, f"{where} ({value.get('path') or '<bytes>'})", o)
    if n is not None:
        x = au.fit_length(x, n)
    return au.Waveform(x, o)


def is_real(value: Any) -> bool:
    """A finite int or float (numpy scalars included), not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)) and math.isfinite(value)


def reference_samples(ref: Mapping, where: str, sample_rate: int) -> int | None:
    """How many audio samples a reference clip lasts, ``num_frames / fps`` seconds at ``sample_rate``; ``None``
    when ``fps`` or ``num_frames`` is missing or 0. Values that are not finite numbers > 0, or a clip longer
    than :data:`.audio.MAX_DURATION_S`, raise :class:`PredictionError` naming ``where``."""
    fps, nf = ref.get("fps"), ref.get("num_frames")
    if not (fps and nf):
        return None
    if not (is_real(fps) and fps > 0 and is_real(nf) and nf > 0):
        raise PredictionError(f"{where}: expected a finite fps > 0 and num_frames > 0, got fps={fps!r}, num_frames={nf!r}")
    if nf / fps > au.MAX_DURATION_S:
        raise PredictionError(
            f"{where}: num_frames / fps = {nf / fps:.6g} s is more than the limit of {au.MAX_DURATION_S:g} s"
        )
    return int(round(nf / fps * sample_rate))


def instance_index(value: Any, where: str) -> int | None:
    """An instance index (an int) or ``None``; anything else raises :class:`PredictionError` naming ``where``."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise PredictionError(f"{where}: expected an integer or null, got {value!r}")
    return int(value)


__all__ = [
    "cv2_or_none", "decode_mask_video", "instance_index", "is_real", "mask_video_activity", "optional_rle",
    "optional_window", "probe_video", "reference_samples", "waveform",
]
