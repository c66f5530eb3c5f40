"""The caps on every prediction or reference file and media stream ``av_reasoning`` reads (one place, documented
in ``docs/errors.md``). Sizes are checked before reading, durations, channels and frame counts on the header
(``soundfile.info`` / the container's stream metadata) before decoding, and the decoding itself stops past them
(a header may lie). The release-side caps live in :mod:`.archives` (``MAX_MEMBER_BYTES``) and :mod:`.release`."""

#: ``<id>.json`` of a prediction folder (two numbers and an index; 1 MiB is generous).
MAX_PREDICTION_JSON_BYTES = 1 << 20
#: An anchor-mask PNG read from a file (Pillow's decompression-bomb check then bounds its pixels).
MAX_MASK_PNG_BYTES = 64 << 20
#: A WAV or mask video read from a file (a prediction folder, or a media value's ``path``).
MAX_MEDIA_FILE_BYTES = 512 << 20
#: Audio: most channels a waveform may declare, and most samples (frames x channels) decoded (512 MiB of
#: float64); the duration limit is ``audio.MAX_DURATION_S``.
MAX_AUDIO_CHANNELS = 16
MAX_AUDIO_SAMPLES = 1 << 26
#: Mask videos: most frames (10 min at 25 fps), pixels per frame (4K UHD) and seconds, from the header, then
#: enforced while decoding.
MAX_VIDEO_FRAMES = 15_000
MAX_VIDEO_PIXELS = 3840 * 2160
MAX_VIDEO_DURATION_S = 600.0
