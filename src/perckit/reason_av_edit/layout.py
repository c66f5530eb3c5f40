"""Where the files of a ReasonAVEdit-Bench release are: the one place each name of the layout is written.

The Hub release keeps ``metadata.csv``, ``annotations/`` and ``README.md`` loose and ships the seven
media folders as one tar each under ``archives/`` (members carry the folder prefix, e.g.
``videos/<file>``). Unpacked next to ``metadata.csv`` they give the same seven folders.

The caps on every prediction or reference file and media stream ReasonAVEdit reads are here too (one place,
documented in ``docs/errors.md``). Sizes are checked before reading, durations, channels and frame counts on the
header (``soundfile.info`` / the container's stream metadata) before decoding, and the decoding itself stops past
them (a header may lie). A video's header is checked by :func:`perckit.io.media.check_video_header`, whose caps
(``MAX_VIDEO_FRAMES``, ``MAX_VIDEO_PIXELS``, ``MAX_VIDEO_DURATION_S``) every benchmark's video reader shares. The release-side caps
live in :mod:`.read.archives` (``MAX_MEMBER_BYTES``) and :mod:`.read.metadata`.
"""

from __future__ import annotations

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
