"""Video headers checked before anything is decoded: the one check every video reader of perckit runs (ReasonAVEdit's
mask videos and edited clips, the previews of ReasonAVEdit and Syn4D, Syn4D's model inputs), with its caps; and
:func:`video_frames`, the one reader of a ``{bytes, path}`` video value's frames.

A container's declared frame size, frame count and duration are checked against the caps below (PyAV stream
metadata, nothing decoded); the decoders then stop past the same caps, since a header may lie.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import PredictionError, ReleaseFormatError
from .paths import open_media

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


@contextlib.contextmanager
def video_frames(value: Any, where: str, limit: int, error: type[Exception] = ReleaseFormatError) -> Iterator[Iterator | None]:
    """The frames of a ``{bytes, path}`` video value in decoding order as PyAV frames (``None``: the value holds no
    video), opened by :func:`perckit.io.paths.open_media` (its bytes, else a checked regular file of at most ``limit``
    bytes), the header checked by :func:`check_video_header`; what PyAV cannot open or decode raises ``error``."""
    import av

    label = str((value.get("path") if isinstance(value, Mapping) else None) or "video bytes")
    with open_media(value, where, limit, error) as source:
        if source is None:
            yield None
            return
        try:
            with av.open(source) as container:
                yield container.decode(check_video_header(container, label, where))
        except (av.error.FFmpegError, OSError) as e:
            raise error(f"{where}: the video {label!r} cannot be decoded ({type(e).__name__}: {e})") from None
