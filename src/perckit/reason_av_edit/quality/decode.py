"""Decoding one ``av_edit_quality`` sample: the edited and source clips, the target region, the reference image.

- **Video** (edited and source): PyAV, every frame as 8-bit RGB (``rgb24``), ``fps`` from the stream's average
  rate. The container header is checked first against :mod:`..layout` (``MAX_VIDEO_PIXELS`` per frame,
  ``MAX_VIDEO_FRAMES`` frames, ``MAX_VIDEO_DURATION_S`` seconds), then decoding stops past those caps or past
  :data:`MAX_DECODED_BYTES` of decoded frames (a header may lie). Media are read by
  :func:`..features.media_bytes` (``bytes`` wins, else a capped read of ``path``).
- **Audio**, mono float32 at 16 kHz (:data:`SAMPLE_RATE`): the edited side from ``edited_audio`` (WAV, decoded
  and resampled by :func:`..metric.decode_wav`), else the edited video's own audio track (PyAV, resampled to mono
  16 kHz by libswresample); the source side from the reference ``audio`` (WAV), else the source video's track.
  A side with neither has ``audio=None``.
- **Target region**: the reference ``mask_video`` decoded the same way, gray
  (``(299 R + 587 G + 114 B + 500) // 1000``, ITU-R BT.601 luma) ``> mask_threshold`` (127). For the
  instance-addition sub-tracks (:data:`ADDITION_CODES`: C4, R3) the region is the placement box: per frame, the
  bounding box of that frame's foreground (``addition_region="box"``, the default; ``"mask"`` keeps the
  thresholded mask). A mask video with another frame count than the source is padded with empty frames or cut;
  another frame size is an error. No mask video, or one with no foreground pixel at all, gives ``region=None``
  (the whole frame is background).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ...errors import PredictionError
from ..features import is_media_provided, media_bytes
from .. import layout
from ...io import media as video_caps
from ...io.media import check_video_header
from .models.base import Clip, QualitySample

#: The analysis rate of every audio side.
SAMPLE_RATE = 16000
#: Most bytes of decoded RGB frames one video may produce (2 GiB: 4 000 frames of 1280 x 720 x 3).
MAX_DECODED_BYTES = 1 << 31
#: The instance-addition sub-track codes, whose visual ground truth is the placement box.
ADDITION_CODES = ("C4", "R3")


def _label(value: Mapping | None) -> str:
    return (value.get("path") if isinstance(value, Mapping) else None) or "<bytes>"


def decode_video(data: bytes, label: str, where: str) -> tuple[np.ndarray, float]:
    """``(frames uint8 (T, H, W, 3), fps)`` of a video (see the module docstring for the caps). A container PyAV
    cannot open or decode, or one with no frame, raises :class:`PredictionError` naming ``where`` and ``label``."""
    import av

    def bad(e: BaseException) -> PredictionError:
        return PredictionError(f"{where}: the video {label!r} cannot be decoded (expected an mp4 or another container "
                               f"PyAV reads): {type(e).__name__}: {e}")

    try:
        container = av.open(io.BytesIO(data), mode="r")
    except Exception as e:  # av.error.* (InvalidDataError, ...) on anything that is not a container
        raise bad(e) from None
    frames: list[np.ndarray] = []
    with container:
        stream = check_video_header(container, label, where)
        rate = stream.average_rate or stream.guessed_rate or stream.base_rate
        fps = float(rate) if rate else 0.0
        total = 0
        try:
            for frame in container.decode(stream):
                if len(frames) >= video_caps.MAX_VIDEO_FRAMES:
                    raise PredictionError(f"{where}: the video {label!r} has more than {video_caps.MAX_VIDEO_FRAMES} frames "
                                          "(perckit.io.media.MAX_VIDEO_FRAMES)")
                if frame.width * frame.height > video_caps.MAX_VIDEO_PIXELS:
                    raise PredictionError(f"{where}: the video {label!r} has a frame of {frame.width} x {frame.height}, more "
                                          f"than the limit of {video_caps.MAX_VIDEO_PIXELS} pixels")
                total += frame.width * frame.height * 3
                if total > MAX_DECODED_BYTES:
                    raise PredictionError(f"{where}: the video {label!r} decodes to more than {MAX_DECODED_BYTES} bytes of RGB "
                                          "frames (perckit.reason_av_edit.quality.decode.MAX_DECODED_BYTES)")
                frames.append(frame.to_ndarray(format="rgb24"))
        except PredictionError:
            raise
        except Exception as e:  # av.error.* while decoding a corrupt stream
            raise bad(e) from None
    if not frames:
        raise PredictionError(f"{where}: the video {label!r} has no decodable frame")
    if len({f.shape for f in frames}) > 1:
        raise PredictionError(f"{where}: the video {label!r} changes its frame size mid-stream ({sorted({f.shape for f in frames})})")
    return np.stack(frames), fps


def decode_track_audio(data: bytes, label: str, where: str, sample_rate: int = SAMPLE_RATE) -> np.ndarray | None:
    """The first audio track of a video as mono float32 at ``sample_rate`` (libswresample); ``None`` when the
    container has no audio stream. Past ``layout.MAX_DURATION_S`` seconds it raises."""
    import av

    try:
        container = av.open(io.BytesIO(data), mode="r")
    except Exception as e:
        raise PredictionError(f"{where}: the video {label!r} cannot be opened for its audio track: {type(e).__name__}: {e}") from None
    chunks: list[np.ndarray] = []
    limit = int(layout.MAX_DURATION_S * sample_rate)
    with container:
        if not container.streams.audio:
            return None
        resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
        n = 0
        try:
            for frame in container.decode(container.streams.audio[0]):
                frame.pts = None  # the resampler's own clock: no gaps or drops from timestamps
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1))
                    n += chunks[-1].shape[0]
                if n > limit:
                    raise PredictionError(f"{where}: the audio track of {label!r} lasts more than the limit of {layout.MAX_DURATION_S:g} s "
                                          "(perckit.reason_av_edit.layout.MAX_DURATION_S)")
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
        except PredictionError:
            raise
        except Exception as e:
            raise PredictionError(f"{where}: the audio track of {label!r} cannot be decoded: {type(e).__name__}: {e}") from None
    if not chunks:
        return None
    x = np.concatenate(chunks).astype(np.float32)
    if not np.isfinite(x).all():
        raise PredictionError(f"{where}: the audio track of {label!r} decodes to NaN or infinite samples")
    return np.ascontiguousarray(np.clip(x, -1.0, 1.0))


def has_audio_stream(data: bytes) -> bool:
    """Whether a container PyAV opens has an audio stream (nothing decoded)."""
    import av

    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            return bool(container.streams.audio)
    except Exception:  # not a container: decode_video has already refused it
        return False


def decode_wav_value(value: Mapping, where: str, sample_rate: int = SAMPLE_RATE) -> np.ndarray | None:
    """A WAV media value (``edited_audio``, the reference ``audio``) as mono float32 at ``sample_rate``; ``None``
    when not provided."""
    from ..metric import AudioOptions, decode_wav

    data = media_bytes(value, where)
    if data is None:
        return None
    return decode_wav(data, f"{where} ({_label(value)})", AudioOptions(sample_rate=sample_rate)).astype(np.float32)


def gray_above(frames: np.ndarray, threshold: int) -> np.ndarray:
    """Where the BT.601 luma of RGB uint8 frames, integer-rounded, ``(299 R + 587 G + 114 B + 500) // 1000``, is above
    ``threshold``: bool ``(T, H, W)``; exactly ``299 R + 587 G + 114 B >= 1000 threshold + 500`` (compiled)."""
    from ._kernels import luma_above

    return luma_above(np.ascontiguousarray(frames).reshape(-1, 3), 1000 * threshold + 500).reshape(frames.shape[:-1])


def bounding_boxes(mask: np.ndarray) -> np.ndarray:
    """Each frame's foreground replaced by its bounding box (an empty frame stays empty); bool ``(T, H, W)``."""
    out = np.zeros_like(mask, dtype=bool)
    for j in range(mask.shape[0]):
        rows, cols = np.flatnonzero(mask[j].any(axis=1)), np.flatnonzero(mask[j].any(axis=0))
        if rows.size:
            out[j, rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1] = True
    return out


def target_region(value: Mapping | None, shape: tuple[int, int, int], threshold: int, box: bool, where: str) -> np.ndarray | None:
    """The target region on the source grid ``shape`` = ``(T, H, W)`` from a ``mask_video`` media value (see the
    module docstring); ``None`` when not provided or with no foreground pixel."""
    if not is_media_provided(value):
        return None
    data = media_bytes(value, where)
    frames, _ = decode_video(data, _label(value), where)
    t, h, w = shape
    if frames.shape[1:3] != (h, w):
        raise PredictionError(f"{where}: the mask video {_label(value)!r} has frames of {frames.shape[2]} x {frames.shape[1]}, "
                              f"the source video {w} x {h} (W x H); the mask must be on the source grid")
    region = gray_above(frames, threshold)
    if region.shape[0] < t:
        region = np.concatenate([region, np.zeros((t - region.shape[0], h, w), dtype=bool)])
    region = region[:t]
    return (bounding_boxes(region) if box else region) if region.any() else None


def reference_image(value: Mapping | None, where: str) -> np.ndarray | None:
    """The reference image as RGB uint8 ``(H, W, 3)`` (Pillow); ``None`` when not provided."""
    if not is_media_provided(value):
        return None
    from PIL import Image

    data = media_bytes(value, where)
    try:
        with Image.open(io.BytesIO(data)) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8)
    except Exception as e:  # PIL.UnidentifiedImageError, OSError, DecompressionBombError
        raise PredictionError(f"{where}: the image {_label(value)!r} cannot be decoded: {type(e).__name__}: {e}") from None


@dataclass(frozen=True)
class Decoded:
    """One decoded sample: the :class:`QualitySample` (edited frames already on the source grid) and whether the
    edited side has audio."""

    sample: QualitySample
    has_edited_audio: bool
    has_source_audio: bool


def is_addition(sub_track: str) -> bool:
    """An instance-addition sub-track (C4, R3): its visual ground truth is the placement box."""
    return sub_track.split("_", 1)[0].upper() in ADDITION_CODES


def decode_sample(prediction: Mapping, reference: Mapping, *, mask_threshold: int = 127, addition_region: str = "box",
                  frame_mismatch: str | None = None, resize_edited: str | None = None, decode_audio: bool = True) -> Decoded:
    """Decode one (prediction, reference) pair into a :class:`QualitySample` (see the module docstring);
    ``decode_audio=False`` skips every audio side (no model metric needs it)."""
    from .pixel import conform

    sid = str(reference["sample_id"])
    sub_track = str(reference.get("sub_track") or "")
    pw, rw = f"prediction sample {sid!r}", f"reference sample {sid!r}"
    ev, sv = prediction.get("edited_video"), reference.get("video")
    if not is_media_provided(ev):
        raise PredictionError(f"{pw}: edited_video: not provided (expected the edited clip as video bytes or a path)")
    if not is_media_provided(sv):
        raise PredictionError(f"{rw}: video: not provided (expected the source clip)")
    ev_data, sv_data = media_bytes(ev, f"{pw}: edited_video"), media_bytes(sv, f"{rw}: video")
    edited, e_fps = decode_video(ev_data, _label(ev), f"{pw}: edited_video")
    source, s_fps = decode_video(sv_data, _label(sv), f"{rw}: video")
    fps = float(reference.get("fps") or 0.0) or s_fps
    region = target_region(reference.get("mask_video"), source.shape[:3], mask_threshold,
                           addition_region == "box" and is_addition(sub_track), f"{rw}: mask_video")
    edited, source, region = conform(edited, source, region, frame_mismatch, resize_edited, f"sample {sid!r}")
    e_audio = s_audio = None
    if decode_audio:
        e_audio = decode_wav_value(prediction.get("edited_audio"), f"{pw}: edited_audio")
        if e_audio is None:
            e_audio = decode_track_audio(ev_data, _label(ev), f"{pw}: edited_video")
        s_audio = decode_wav_value(reference.get("audio"), f"{rw}: audio")
        if s_audio is None:
            s_audio = decode_track_audio(sv_data, _label(sv), f"{rw}: video")
        has_e, has_s = e_audio is not None, s_audio is not None
    else:  # no model needs the audio: only whether the edited side has one (for the counts)
        has_e = is_media_provided(prediction.get("edited_audio")) or has_audio_stream(ev_data)
        has_s = is_media_provided(reference.get("audio")) or has_audio_stream(sv_data)
    window = reference.get("edit_window_s")
    return Decoded(QualitySample(
        sample_id=sid, category=str(reference.get("category") or ""), sub_track=sub_track,
        instruction=str(reference.get("instruction") or ""), target_text=str(reference.get("instruction") or ""),
        edited=Clip(edited, e_fps or fps, e_audio, SAMPLE_RATE), source=Clip(source, fps, s_audio, SAMPLE_RATE),
        region=region, ref_image=reference_image(reference.get("ref_image"), f"{rw}: ref_image"),
        edit_window_s=(float(window[0]), float(window[1])) if window is not None and len(window) == 2 else None,
    ), has_e, has_s)


__all__ = ["ADDITION_CODES", "Decoded", "MAX_DECODED_BYTES", "SAMPLE_RATE", "bounding_boxes", "decode_sample",
           "decode_track_audio", "decode_video", "decode_wav_value", "gray_above", "is_addition", "reference_image", "target_region"]
