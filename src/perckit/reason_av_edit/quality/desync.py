"""DeSync: the numpy half of the Synchformer audio-visual offset metric, as MMAudio's av-benchmark.

The definition (hkchengrex/av-benchmark, ``av_bench/evaluate.py``, ``extract_video.py``,
``av_bench/extract.py``; Synchformer by Iashin et al., 2024):

- the video is read at **25 fps**, its shorter side resized to 224 (bicubic), centre-cropped to 224 x 224,
  scaled to [0, 1] and normalised with mean 0.5 / std 0.5 (so [-1, 1]); it is cut into **segments of 16
  frames with a stride of 8**;
- the audio is mono at **16 kHz**, cut into segments of 10240 samples (0.64 s, the 16 frames) with a stride
  of 5120 (8 frames); each segment becomes a log mel spectrogram (``n_fft`` 1024, window 400 (periodic
  Hann), hop 160, 128 HTK mel bands from 0 to 8 kHz, no band normalisation, power 2, centred with reflect
  padding; ``log(mel + 1e-6)``), padded on the right with 0 to 66 frames, then ``(x - (-4.2677393)) /
  (2 * 4.5689974)``;
- Synchformer compares **14 segments** at a time (4.8 s: ``(120 - 16) / 8 + 1``): av-benchmark takes the
  first 14 and the last 14 segments of the clip, i.e. the **first and last 4.8 s windows**, the last one on
  the 8-frame segment grid (it starts at frame ``8 * ((T - 120) // 8)`` of the ``T`` frames at 25 fps);
- the 21 logits of each window are the offset classes ``linspace(-2, 2, 21)`` s (0.2 s apart); the
  predicted offset is the class of the largest logit (the first on a tie, as ``torch.argmax``), the
  sample's score the mean of ``|offset|`` over its two windows and DeSync the mean over samples (equal to
  av-benchmark's mean over all windows, since every sample has two).

**Clips shorter than 4.8 s.** av-benchmark does not pad: its video loader raises "Sync video too short"
and the sample is dropped from the batch (its audio loader silently moves on to the next file). The
ReasonAVEdit clips last 2.6 - 4.84 s, so :func:`fit_short_clip` offers both: ``"skip"`` (av-benchmark: the
sample gets no DeSync and is not counted) and ``"pad"`` (the default here, a documented deviation: the
video is extended by repeating its last frame and the audio by zeros up to 4.8 s, and the one window is
used as both the first and the last). A padded window holds still frames and silence, which the network
never saw in training; results on padded clips are not comparable with MMAudio's tables.

When the video and the audio differ in length, the shorter of the two sets the windows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import OptionError, PredictionError
from ...core.stats import fmean
from .models.base import mean_of
from .sync import hz_to_mel, mel_to_hz
from .sync import resample_indices as sync_frames

#: video rate, frames per second, and crop size of Synchformer's input
VIDEO_FPS = 25.0
VIDEO_SIZE = 224
#: audio rate of Synchformer's input (Hz) and audio samples per video frame
AUDIO_SR = 16000
SAMPLES_PER_FRAME = 640
#: video segment length and stride (frames); audio segment length and stride (samples)
SEGMENT_FRAMES = 16
STEP_FRAMES = 8
SEGMENT_SAMPLES = SEGMENT_FRAMES * SAMPLES_PER_FRAME
STEP_SAMPLES = STEP_FRAMES * SAMPLES_PER_FRAME
#: segments per compared window, and the window in frames / samples / seconds (4.8 s)
WINDOW_SEGMENTS = 14
WINDOW_FRAMES = SEGMENT_FRAMES + (WINDOW_SEGMENTS - 1) * STEP_FRAMES
WINDOW_SAMPLES = WINDOW_FRAMES * SAMPLES_PER_FRAME
WINDOW_S = WINDOW_FRAMES / VIDEO_FPS
#: the mel spectrogram of one audio segment
N_FFT = 1024
WIN_LENGTH = 400
HOP = 160
N_MELS = 128
MEL_FRAMES = 66
MEL_MEAN = -4.2677393
MEL_STD = 4.5689974
#: the short-clip policies of :func:`fit_short_clip`
SHORT_CLIP = ("pad", "skip")

# a clip's duration is floored to whole frames; this absorbs float noise such as 4.84 * 25 = 121.000...01
_EPS = 1e-6


def offset_grid(left: float = -2.0, right: float = 2.0, n: int = 21) -> np.ndarray:
    """The offset classes in seconds: ``np.linspace(left, right, n)`` (av-benchmark's
    ``make_class_grid(-2, 2, 21)``: -2.0, -1.8, ..., 2.0)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 3:
        raise OptionError(f"offset_grid: expected n >= 3 classes, got {n!r}")
    return np.linspace(float(left), float(right), n)


def frame_count(duration: float, fps: float = VIDEO_FPS) -> int:
    """Whole frames of a ``duration`` s clip at ``fps``: ``floor(duration * fps)`` (av-benchmark's
    ``int(fps * duration)``), float noise of 1e-6 frame absorbed."""
    if not math.isfinite(duration) or duration < 0:
        raise OptionError(f"clip duration: expected a finite non-negative number of seconds, got {duration!r}")
    return int(math.floor(duration * fps + _EPS))


def window_starts(duration: float, window: float = WINDOW_S) -> tuple[float, ...]:
    """Start times (s) of the first and the last ``window`` s windows of a ``duration`` s clip.

    The first starts at 0; the last at the last start on the 8-frame (0.32 s) segment grid that still
    fits, ``8 * ((T - W) // 8) / 25`` with ``T`` the clip's and ``W`` the window's frames at 25 fps (so a
    4.84 s clip gives ``(0.0, 0.0)`` and a 6 s clip ``(0.0, 0.96)``). A clip shorter than the window gives
    ``()`` (see :func:`fit_short_clip`). ``window`` must be a whole number of segments: 16 + 8k frames."""
    w = frame_count(window)
    if w < SEGMENT_FRAMES or (w - SEGMENT_FRAMES) % STEP_FRAMES:
        raise OptionError(f"window: expected 16 + 8k frames at 25 fps (e.g. 4.8 s), got {window!r} s ({w} frames)")
    t = frame_count(duration)
    if t < w:
        return ()
    last = STEP_FRAMES * ((t - w) // STEP_FRAMES)
    return (0.0, last / VIDEO_FPS)


def offsets_from_logits(logits: Any, grid: np.ndarray | None = None) -> np.ndarray:
    """The predicted offset (s) of each row of ``logits`` (``(..., n_classes)``): ``grid[argmax]``, the
    first maximum on a tie. ``grid`` defaults to :func:`offset_grid`; its length must be the last axis."""
    x = np.asarray(logits, dtype=np.float64)
    g = offset_grid() if grid is None else np.asarray(grid, dtype=np.float64)
    if x.ndim < 1 or x.shape[-1] != g.shape[0]:
        raise PredictionError(f"DeSync logits: expected a last axis of {g.shape[0]} offset classes, got shape {x.shape}")
    if not np.isfinite(x).all():
        raise PredictionError("DeSync logits: expected finite values, got NaN or infinity")
    return g[np.argmax(x, axis=-1)]


def sample_desync(offsets: Any) -> float:
    """One sample's DeSync: the mean of ``|offset|`` (s) over its windows (two in av-benchmark)."""
    o = np.asarray(offsets, dtype=np.float64).ravel()
    if o.size == 0:
        raise PredictionError("DeSync: expected at least one window offset, got none")
    return float(math.fsum(abs(float(v)) for v in o) / o.size)


def desync_seconds(per_sample: Sequence[Any]) -> float | None:
    """DeSync over samples: the mean of :func:`sample_desync` of each sample's window offsets; ``None``
    for no samples. Every sample having two windows, this is av-benchmark's mean over all windows."""
    return fmean(sample_desync(o) for o in per_sample)


def reduce_desync(records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """``{"desync": mean}`` over the records of :class:`~.models.synchformer.DeSyncMetric` whose
    ``"desync"`` is not ``None`` (a skipped short clip or a clip without audio has ``None``)."""
    return {"desync": mean_of(records, "desync")}


def fit_short_clip(frames: np.ndarray, audio: np.ndarray, short_clip: str = "pad") -> tuple[np.ndarray, np.ndarray, bool] | None:
    """Frames at 25 fps ``(T, ...)`` and 16 kHz audio cut to a common length, and extended to one 4.8 s
    window when shorter: ``(frames, audio, padded)``, or ``None`` for a short clip under ``"skip"``.

    The common length is the shorter of ``T / 25`` and ``len(audio) / 16000`` on the frame grid (whole
    frames, ``640 * T`` samples). ``"pad"`` repeats the last frame and appends zeros (see the module
    docstring for why this deviates from av-benchmark)."""
    if short_clip not in SHORT_CLIP:
        raise OptionError(f"option 'short_clip': expected one of {SHORT_CLIP}, got {short_clip!r}")
    if frames.shape[0] == 0:
        raise PredictionError("DeSync: the edited video has no frame")
    t = min(int(frames.shape[0]), int(audio.shape[0]) // SAMPLES_PER_FRAME)
    if t >= WINDOW_FRAMES:
        return frames[:t], audio[: t * SAMPLES_PER_FRAME], False
    if short_clip == "skip":
        return None
    # keep every frame the audio covers (at least one), then pad both to the window
    t = max(t, 1)
    frames = frames[: min(t, frames.shape[0])]
    audio = audio[: t * SAMPLES_PER_FRAME]
    reps = np.repeat(frames[-1:], WINDOW_FRAMES - frames.shape[0], axis=0)
    frames = np.concatenate([frames, reps], axis=0)
    audio = np.concatenate([audio, np.zeros(WINDOW_SAMPLES - audio.shape[0], dtype=audio.dtype)])
    return frames, audio, True


def resample_indices(n_frames: int, fps: float, target_fps: float = VIDEO_FPS) -> np.ndarray:
    """Source frame of each output frame when ``n_frames`` frames at ``fps`` are read at ``target_fps``:
    ``floor(n_frames / fps * target_fps)`` output frames, frame ``k`` taking the source frame nearest to
    ``k / target_fps`` (``floor(k * fps / target_fps + 0.5)``, the rounding of ffmpeg's ``fps`` filter that
    av-benchmark's decoder uses), clipped to the last frame."""
    if not (math.isfinite(fps) and fps > 0):
        raise PredictionError(f"DeSync: expected a positive frame rate, got {fps!r}")
    return sync_frames(n_frames, fps, target_fps)  # SyncNet's 25 fps reading: the same rule


def resize_shape(height: int, width: int, size: int = VIDEO_SIZE) -> tuple[int, int]:
    """``(h, w)`` after resizing the shorter side to ``size`` (torchvision's ``Resize(size)``: the longer
    side becomes ``int(size * long / short)``)."""
    if height <= width:
        return size, int(size * width / height)
    return int(size * height / width), size


def crop_offsets(height: int, width: int, size: int = VIDEO_SIZE) -> tuple[int, int]:
    """Top and left of the centred ``size`` crop (torchvision's ``center_crop``: ``int(round((h - size) /
    2))``, Python's round)."""
    return int(round((height - size) / 2.0)), int(round((width - size) / 2.0))


def normalize_frames(frames: np.ndarray) -> np.ndarray:
    """uint8-valued frames to float32 in [-1, 1]: ``(x / 255 - 0.5) / 0.5``."""
    return ((frames.astype(np.float32) / 255.0) - 0.5) / 0.5


def video_segments(frames: np.ndarray, start_frame: int) -> np.ndarray:
    """The 14 segments of 16 frames (stride 8) of the window that starts at ``start_frame``:
    ``(14, 16, ...)`` from ``(T, ...)`` frames."""
    idx = start_frame + np.arange(WINDOW_SEGMENTS)[:, None] * STEP_FRAMES + np.arange(SEGMENT_FRAMES)[None, :]
    if start_frame < 0 or idx[-1, -1] >= frames.shape[0]:
        raise PredictionError(f"DeSync: a window from frame {start_frame} needs {WINDOW_FRAMES} frames, the clip has {frames.shape[0]}")
    return frames[idx]


def audio_segments(audio: np.ndarray, start_sample: int) -> np.ndarray:
    """The 14 segments of 10240 samples (stride 5120) of the window that starts at ``start_sample``:
    ``(14, 10240)``."""
    idx = start_sample + np.arange(WINDOW_SEGMENTS)[:, None] * STEP_SAMPLES + np.arange(SEGMENT_SAMPLES)[None, :]
    if start_sample < 0 or idx[-1, -1] >= audio.shape[0]:
        raise PredictionError(f"DeSync: a window from sample {start_sample} needs {WINDOW_SAMPLES} samples, the clip has {audio.shape[0]}")
    return audio[idx]


def mel_filterbank(sample_rate: int = AUDIO_SR, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    """Triangular HTK mel filters ``(n_fft // 2 + 1, n_mels)`` from 0 Hz to ``sample_rate / 2``, not
    normalised: the bins sit at ``linspace(0, sample_rate // 2, n_fft // 2 + 1)``, the band edges at
    ``n_mels + 2`` points equally spaced in ``2595 log10(1 + f / 700)``, and a bin's weight in band ``i``
    is ``max(0, min(rise, fall))`` of the two slopes."""
    freqs = np.linspace(0.0, sample_rate // 2, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(hz_to_mel(np.float64(0.0)), hz_to_mel(np.float64(sample_rate / 2.0)), n_mels + 2))
    diff = np.diff(edges)
    slopes = edges[None, :] - freqs[:, None]
    down = -slopes[:, :-2] / diff[:-1]
    up = slopes[:, 2:] / diff[1:]
    return np.maximum(0.0, np.minimum(down, up))


def log_mel_segments(segments: np.ndarray) -> np.ndarray:
    """Synchformer's normalised log mel input of audio segments ``(S, 10240)`` -> ``(S, 128, 66)``
    float32: power spectrogram (periodic Hann of 400 samples centred in 1024, hop 160, reflect-padded by
    512 on both sides, 65 frames), HTK mel, ``log(x + 1e-6)``, right-padded with 0 to 66 frames,
    ``(x - MEL_MEAN) / (2 * MEL_STD)``."""
    x = np.asarray(segments, dtype=np.float64)
    pad = N_FFT // 2
    x = np.pad(x, ((0, 0), (pad, pad)), mode="reflect")
    n_frames = 1 + (x.shape[1] - N_FFT) // HOP
    hann = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(WIN_LENGTH) / WIN_LENGTH)
    window = np.zeros(N_FFT)
    left = (N_FFT - WIN_LENGTH) // 2
    window[left : left + WIN_LENGTH] = hann
    idx = np.arange(n_frames)[:, None] * HOP + np.arange(N_FFT)[None, :]
    spec = np.abs(np.fft.rfft(x[:, idx] * window, axis=-1)) ** 2  # (S, frames, 513)
    mel = np.einsum("sfk,km->smf", spec, mel_filterbank())
    out = np.log(mel + 1e-6)
    if out.shape[-1] < MEL_FRAMES:
        out = np.pad(out, ((0, 0), (0, 0), (0, MEL_FRAMES - out.shape[-1])), constant_values=0.0)
    out = out[..., :MEL_FRAMES]
    return ((out - MEL_MEAN) / (2.0 * MEL_STD)).astype(np.float32)
