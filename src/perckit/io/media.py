"""Video headers checked before anything is decoded: the one check every video reader of perckit runs (ReasonAVEdit's
mask videos and edited clips, the previews of ReasonAVEdit and Syn4D), with its caps.

A container's declared frame size, frame count and duration are checked against the caps below (PyAV stream
metadata, nothing decoded); the decoders then stop past the same caps, since a header may lie.
"""

from __future__ import annotations

from typing import Any

from ..errors import PredictionError

#: Videos: most frames (10 min at 25 fps), pixels per frame (4K UHD) and seconds, from the header, then
#: enforced while decoding.
MAX_VIDEO_FRAMES = 15_000
MAX_VIDEO_PIXELS = 3840 * 2160
MAX_VIDEO_DURATION_S = 600.0


def check_video_header(container: Any, label: str, where: str, kind: str = "video") -> Any:
    """The first video stream of an open PyAV container, after its declared size, length and duration are checked
    against the caps above (``MAX_VIDEO_PIXELS`` per frame, ``MAX_VIDEO_FRAMES`` frames, ``MAX_VIDEO_DURATION_S``
    seconds); ``kind`` names the file in the messages ("video", "mask video")."""
    import av

    if not container.streams.video:
        raise PredictionError(f"{where}: the {kind} {label!r} has no video stream (expected an mp4 with one)")
    s = container.streams.video[0]
    w, h = int(s.codec_context.width or 0), int(s.codec_context.height or 0)
    frames = int(s.frames or 0)
    duration = float(s.duration * s.time_base) if s.duration and s.time_base else (
        container.duration / av.time_base if container.duration else None)
    if w * h > MAX_VIDEO_PIXELS:
        raise PredictionError(f"{where}: the {kind} {label!r} declares {w} x {h} frames, more than the limit of "
                              f"{MAX_VIDEO_PIXELS} pixels (perckit.io.media.MAX_VIDEO_PIXELS)")
    if frames > MAX_VIDEO_FRAMES:
        raise PredictionError(f"{where}: the {kind} {label!r} declares {frames} frames, more than the limit of "
                              f"{MAX_VIDEO_FRAMES} (perckit.io.media.MAX_VIDEO_FRAMES)")
    if duration is not None and duration > MAX_VIDEO_DURATION_S:
        raise PredictionError(f"{where}: the {kind} {label!r} declares {duration:.6g} s, more than the limit of "
                              f"{MAX_VIDEO_DURATION_S:g} s (perckit.io.media.MAX_VIDEO_DURATION_S)")
    return s
