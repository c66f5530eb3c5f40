"""Where the files of a ReasonAVEdit-Bench release are: the one place each name of the layout is written.

The Hub release keeps ``metadata.csv``, ``annotations/`` and ``README.md`` loose and ships the seven
media folders as one tar each under ``archives/`` (members carry the folder prefix, e.g.
``videos/<file>``). Unpacked next to ``metadata.csv`` they give the same seven folders.

The caps on every prediction or reference file and media stream ReasonAVEdit reads are here too (one place,
documented in ``docs/errors.md``). Sizes are checked before reading, durations, channels and frame counts on the
header (``soundfile.info`` / the container's stream metadata) before decoding, and the decoding itself stops past
them (a header may lie). :func:`check_video_header` checks a video's header against them. The release-side caps
live in :mod:`.read.archives` (``MAX_MEMBER_BYTES``) and :mod:`.read.metadata`.
"""

from __future__ import annotations

from typing import Any

from ..errors import PredictionError

METADATA = "metadata.csv"
ANNOTATIONS_DIR = "annotations"
ARCHIVES_DIR = "archives"
ARCHIVE_PATTERN = f"{ARCHIVES_DIR}/*.tar"
#: [card] the seven media folders (one tar each on the Hub).
MEDIA_FOLDERS = ("videos", "audios", "masks", "reason_visual", "reason_visual_mask", "reason_audio", "ref_images")

# ---------------------------------------------------------------- limits

#: ``<id>.json`` of a prediction folder (two numbers and an index; 1 MiB is generous).
MAX_PREDICTION_JSON_BYTES = 1 << 20
#: An anchor-mask PNG read from a file (Pillow's decompression-bomb check then bounds its pixels).
MAX_MASK_PNG_BYTES = 64 << 20
#: A WAV or mask video read from a file (a prediction folder, or a media value's ``path``).
MAX_MEDIA_FILE_BYTES = 512 << 20
#: Longest waveform :func:`.metric.decode_wav` accepts (seconds). The benchmark's clips last seconds; a tiny WAV
#: file declaring a 1 Hz rate would otherwise resample to gigabytes (and its STFT to more).
MAX_DURATION_S = 600.0
#: Audio: most channels a waveform may declare, and most samples (frames x channels) decoded (512 MiB of
#: float64).
MAX_AUDIO_CHANNELS = 16
MAX_AUDIO_SAMPLES = 1 << 26
#: Mask videos: most frames (10 min at 25 fps), pixels per frame (4K UHD) and seconds, from the header, then
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
                              f"{MAX_VIDEO_PIXELS} pixels (perckit.reason_av_edit.layout.MAX_VIDEO_PIXELS)")
    if frames > MAX_VIDEO_FRAMES:
        raise PredictionError(f"{where}: the {kind} {label!r} declares {frames} frames, more than the limit of "
                              f"{MAX_VIDEO_FRAMES} (perckit.reason_av_edit.layout.MAX_VIDEO_FRAMES)")
    if duration is not None and duration > MAX_VIDEO_DURATION_S:
        raise PredictionError(f"{where}: the {kind} {label!r} declares {duration:.6g} s, more than the limit of "
                              f"{MAX_VIDEO_DURATION_S:g} s (perckit.reason_av_edit.layout.MAX_VIDEO_DURATION_S)")
    return s
