"""Sync-C / Sync-D: the numpy half of the SyncNet lip-sync metric (LSE-C / LSE-D).

The definition follows joonson/syncnet_python (``SyncNetInstance.evaluate``, ``calc_pdist``) as Wav2Lip's
evaluation runs it (Rudrabha/Wav2Lip, ``evaluation/scores_LSE/SyncNetInstance_calc_scores.py`` and
``calculate_scores_LRS.py``):

- the video is read at **25 fps**; each frame is resized to 224 x 224 (``cv2.resize``, bilinear) and kept
  as BGR values in 0..255 (no other normalisation); the audio is mono **16 kHz** 16-bit PCM, given to
  ``python_speech_features.mfcc`` with its defaults (:func:`speech_mfcc` here): 13 coefficients at 100 Hz,
  i.e. 4 MFCC frames per video frame;
- with ``n = min(video frames, floor(audio samples / 640))``, window ``i`` for ``i = 0 .. n - 6`` is the
  video frames ``i .. i + 4`` (a ``(3, 5, 224, 224)`` block) and the MFCC columns ``4i .. 4i + 19`` (a
  ``(1, 13, 20)`` block); SyncNet embeds each into a 1024-d vector (the last possible window, ``n - 5``,
  is not used, as in the official loop ``range(0, n - 5)``);
- :func:`offset_distances`: for every window ``i`` and every offset ``j - vshift`` (``j = 0 .. 2 vshift``,
  ``vshift = 15``) the Euclidean distance between video feature ``i`` and audio feature
  ``i + j - vshift``, the audio track padded with zero vectors at both ends; ``torch.pairwise_distance``
  adds ``eps = 1e-6`` to the difference before the norm, and so does this function;
- :func:`sync_scores`: the mean over windows of each column (``mdist``); ``minval = min(mdist)`` at column
  ``minidx``, ``offset = vshift - minidx``, ``conf = median(mdist) - minval``;
- **Sync-D** (LSE-D) is ``minval`` and **Sync-C** (LSE-C) is ``conf``, each averaged over the videos
  (Wav2Lip's "Average Minimum Distance" and "Average Confidence"). Lower Sync-D and higher Sync-C are better.

A clip with fewer windows than ``vshift`` has offsets whose every pair falls on the zero padding; their
column mean is the mean norm of the video features, whatever the audio, and it may be the minimum (then
``conf`` is 0 and the offset is +-``vshift``). The official code behaves the same; the ReasonAVEdit clips
(2.6 - 4.84 s, 60 - 116 windows) are long enough.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .models.base import mean_of

#: SyncNet's input rates: video frames per second, audio samples per second, MFCC frames per second
VIDEO_FPS = 25.0
AUDIO_SR = 16000
MFCC_RATE = 100
#: audio samples per video frame (16000 / 25) and MFCC frames per video frame (100 / 25)
SAMPLES_PER_FRAME = 640
MFCC_PER_FRAME = 4
#: frames per SyncNet window, MFCC frames per window, the crop size and the offset range
WINDOW_FRAMES = 5
WINDOW_MFCC = 20
CROP_SIZE = 224
VSHIFT = 15
#: ``torch.nn.functional.pairwise_distance``'s default ``eps``
PAIRWISE_EPS = 1e-6
#: keys of one :func:`sync_record`
RECORD_KEYS = ("sync_c", "sync_d", "offset", "windows")


# ---------------------------------------------------------------- the MFCC input


def hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """The HTK mel scale, ``2595 log10(1 + f / 700)`` (SyncNet's MFCC and Synchformer's log-mel filterbanks)."""
    return 2595.0 * np.log10(1.0 + np.asarray(hz, dtype=np.float64) / 700.0)


def mel_to_hz(mel: np.ndarray) -> np.ndarray:
    """The inverse of :func:`hz_to_mel`."""
    return 700.0 * (10.0 ** (np.asarray(mel, dtype=np.float64) / 2595.0) - 1.0)


def triangle_filterbank(n_filters: int = 26, n_fft: int = 512, sample_rate: int = AUDIO_SR,
                        low_hz: float = 0.0, high_hz: float | None = None) -> np.ndarray:
    """``(n_filters, n_fft // 2 + 1)`` triangular mel filters, python_speech_features' ``get_filterbanks``
    rule: ``n_filters + 2`` points equally spaced on the mel scale ``2595 log10(1 + f / 700)`` between
    ``low_hz`` and ``high_hz`` (default ``sample_rate / 2``), each snapped to the FFT bin
    ``floor((n_fft + 1) f / sample_rate)``; filter ``j`` rises linearly from 0 at bin ``b[j]`` to 1 at
    ``b[j + 1]`` and falls to 0 at ``b[j + 2]`` (the peak bin belongs to the falling half; no area
    normalisation)."""
    high = sample_rate / 2 if high_hz is None else high_hz
    points = np.linspace(hz_to_mel(low_hz), hz_to_mel(high), n_filters + 2)
    bins = np.floor((n_fft + 1) * mel_to_hz(points) / sample_rate)
    k = np.arange(n_fft // 2 + 1, dtype=np.float64)[None, :]
    lo, mid, hi = bins[:-2, None], bins[1:-1, None], bins[2:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        rise = np.where((k >= lo) & (k < mid), (k - lo) / (mid - lo), 0.0)
        fall = np.where((k >= mid) & (k < hi), (hi - k) / (hi - mid), 0.0)
    return rise + fall


def _dct2_ortho(n: int) -> np.ndarray:
    """The orthonormal DCT-II matrix (``scipy.fftpack.dct(type=2, norm='ortho')`` as a matrix)."""
    k = np.arange(n, dtype=np.float64)[:, None]
    i = np.arange(n, dtype=np.float64)[None, :]
    m = np.cos(np.pi * k * (2 * i + 1) / (2 * n)) * math.sqrt(2.0 / n)
    m[0] /= math.sqrt(2.0)
    return m


def _half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def speech_mfcc(signal: Any, sample_rate: int = AUDIO_SR, win_s: float = 0.025, step_s: float = 0.01,
                n_ceps: int = 13, n_filters: int = 26, pre_emphasis: float = 0.97, lifter: int = 22) -> np.ndarray:
    """``(frames, n_ceps)`` MFCCs by the definition of ``python_speech_features.mfcc`` with its defaults
    (the SyncNet input; that package is not a dependency, this is the same rule written out):

    - pre-emphasis ``y[0] = x[0]``, ``y[t] = x[t] - 0.97 x[t - 1]``;
    - frames of ``round(0.025 sr)`` samples every ``round(0.01 sr)`` (400 / 160 at 16 kHz), rectangular
      window, ``1 + ceil((len - 400) / 160)`` frames (one if the signal is shorter), the last zero-padded;
    - power spectrum ``|rfft(frame, n_fft)|^2 / n_fft`` with ``n_fft`` the smallest power of two >= the
      frame length (512); frame energy = its sum;
    - 26 :func:`triangle_filterbank` energies, zeros replaced by the float64 ``eps``; ``log``; orthonormal
      DCT-II, the first 13 kept; lifter ``1 + 11 sin(pi n / 22)``; coefficient 0 replaced by ``log`` of the
      frame energy (``eps`` where it is 0).

    The scale of ``signal`` matters for coefficient 0 only; SyncNet reads 16-bit integer samples, so pass
    ``samples * 32768`` for float samples in [-1, 1] (:func:`to_int16_scale`)."""
    x = np.asarray(signal, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("speech_mfcc: expected at least one sample, got none")
    x = np.concatenate([x[:1], x[1:] - pre_emphasis * x[:-1]])
    flen, fstep = _half_up(win_s * sample_rate), _half_up(step_s * sample_rate)
    n_frames = 1 if x.size <= flen else 1 + int(math.ceil((x.size - flen) / fstep))
    padded = np.concatenate([x, np.zeros((n_frames - 1) * fstep + flen - x.size)])
    idx = np.arange(flen)[None, :] + fstep * np.arange(n_frames)[:, None]
    frames = padded[idx]
    n_fft = 1
    while n_fft < win_s * sample_rate:
        n_fft *= 2
    power = np.abs(np.fft.rfft(frames, n_fft)) ** 2 / n_fft
    eps = np.finfo(np.float64).eps
    energy = power.sum(axis=1)
    energy = np.where(energy == 0, eps, energy)
    feat = power @ triangle_filterbank(n_filters, n_fft, sample_rate).T
    feat = np.where(feat == 0, eps, feat)
    ceps = (np.log(feat) @ _dct2_ortho(n_filters).T)[:, :n_ceps]
    if lifter > 0:
        ceps = ceps * (1.0 + (lifter / 2.0) * np.sin(np.pi * np.arange(n_ceps) / lifter))
    ceps[:, 0] = np.log(energy)
    return ceps


def to_int16_scale(audio: Any) -> np.ndarray:
    """Float samples in [-1, 1] as the 16-bit integer values SyncNet reads (``scipy.io.wavfile`` of the
    ``pcm_s16le`` file ffmpeg writes): ``rint(x * 32768)`` clipped to ``[-32768, 32767]``, as float64."""
    x = np.asarray(audio, dtype=np.float64).reshape(-1)
    return np.clip(np.rint(x * 32768.0), -32768.0, 32767.0)


# ---------------------------------------------------------------- windows


def resample_indices(n_frames: int, fps: float, target_fps: float = VIDEO_FPS) -> np.ndarray:
    """Source frame of each output frame when ``n_frames`` frames at ``fps`` are read at ``target_fps``
    (SyncNet's pipeline re-encodes with ``ffmpeg -r 25``): ``floor(n_frames * target_fps / fps)`` output
    frames (float noise of 1e-6 frame absorbed), frame ``k`` taking the source frame nearest to its time,
    ``floor(k * fps / target_fps + 0.5)``. The identity when the rates are equal."""
    if not (math.isfinite(fps) and fps > 0):
        raise ValueError(f"resample_indices: expected a positive frame rate, got {fps!r}")
    n_out = int(math.floor(n_frames * target_fps / fps + 1e-6))
    k = np.arange(n_out, dtype=np.float64)
    return np.minimum(np.floor(k * fps / target_fps + 0.5).astype(np.int64), n_frames - 1)


def window_count(n_video_frames: int, n_audio_samples: int) -> int:
    """SyncNet windows of a clip: ``min(video frames, floor(samples / 640)) - 5`` (at least 0), the
    official ``lastframe``."""
    return max(0, min(int(n_video_frames), int(n_audio_samples) // SAMPLES_PER_FRAME) - WINDOW_FRAMES)


def mfcc_windows(mfcc: np.ndarray, n_windows: int) -> np.ndarray:
    """``(n_windows, 1, 13, 20)``: window ``i`` is the MFCC columns ``4i .. 4i + 19`` of ``mfcc``
    ``(frames, 13)`` (time on the last axis, as ``cct[:, :, :, 4i:4i + 20]``)."""
    m = np.asarray(mfcc, dtype=np.float32).T
    need = MFCC_PER_FRAME * (n_windows - 1) + WINDOW_MFCC if n_windows else 0
    if m.shape[1] < need:
        raise ValueError(f"mfcc_windows: {n_windows} windows need {need} MFCC frames, got {m.shape[1]}")
    return np.stack([m[None, :, MFCC_PER_FRAME * i:MFCC_PER_FRAME * i + WINDOW_MFCC] for i in range(n_windows)]) if n_windows \
        else np.zeros((0, 1, m.shape[0], WINDOW_MFCC), np.float32)


# ---------------------------------------------------------------- distances and scores


def offset_distances(video_feats: Any, audio_feats: Any, vshift: int = VSHIFT, eps: float = PAIRWISE_EPS) -> np.ndarray:
    """``(N, 2 vshift + 1)``: row ``i``, column ``j`` is ``|| v_i - a_(i + j - vshift) + eps ||_2`` for the
    ``N`` video features ``v`` and ``N`` audio features ``a`` (``(N, d)`` each), with ``a`` a zero vector
    outside ``0 .. N - 1`` (``calc_pdist``: the audio track zero-padded by ``vshift`` at both ends).
    Column ``vshift`` is the zero offset; a column right of it pairs a video window with later audio."""
    v = np.asarray(video_feats, dtype=np.float64)
    a = np.asarray(audio_feats, dtype=np.float64)
    if v.ndim != 2 or a.shape != v.shape:
        raise ValueError(f"offset_distances: expected two (N, d) arrays of the same shape, got {list(v.shape)} and {list(a.shape)}")
    if not (isinstance(vshift, (int, np.integer)) and vshift >= 0):
        raise ValueError(f"offset_distances: expected a non-negative int vshift, got {vshift!r}")
    n, d = v.shape
    padded = np.concatenate([np.zeros((vshift, d)), a, np.zeros((vshift, d))])
    win = 2 * vshift + 1
    idx = np.arange(n)[:, None] + np.arange(win)[None, :]
    diff = v[:, None, :] - padded[idx] + eps
    return np.sqrt((diff * diff).sum(axis=-1))


def sync_scores(dists: Any) -> tuple[int, float, float]:
    """``(offset, min_dist, conf)`` of one clip's :func:`offset_distances` table, as ``SyncNetInstance``:
    ``mdist`` = the mean of each column over the windows, ``min_dist = min(mdist)`` at column ``minidx``
    (the first on a tie), ``offset = vshift - minidx`` with ``vshift = (columns - 1) // 2``, and
    ``conf = median(mdist) - min_dist`` (the median as ``torch.median``: the lower middle value).
    ``min_dist`` is the clip's Sync-D, ``conf`` its Sync-C."""
    t = np.asarray(dists, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] == 0 or t.shape[1] % 2 != 1:
        raise ValueError(f"sync_scores: expected an (N >= 1, 2 vshift + 1) distance table, got shape {list(t.shape)}")
    mdist = t.mean(axis=0)
    minidx = int(np.argmin(mdist))
    minval = float(mdist[minidx])
    median = float(np.sort(mdist)[(mdist.size - 1) // 2])
    return (t.shape[1] - 1) // 2 - minidx, minval, median - minval


def sync_record(video_feats: Any, audio_feats: Any, vshift: int = VSHIFT) -> dict[str, Any]:
    """One clip's record: ``sync_c`` / ``sync_d`` / ``offset`` from its window features and the window
    count; all ``None`` (``windows`` 0) for a clip with no window (shorter than 6 frames at 25 fps)."""
    v = np.asarray(video_feats)
    if v.shape[0] == 0:
        return {"sync_c": None, "sync_d": None, "offset": None, "windows": 0}
    offset, dist, conf = sync_scores(offset_distances(v, audio_feats, vshift))
    return {"sync_c": conf, "sync_d": dist, "offset": offset, "windows": int(v.shape[0])}


def reduce_sync(records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """``sync_c`` / ``sync_d``: the mean over the clips that have a value (``None`` when none has), as
    Wav2Lip's averages over the videos."""
    return {
        "sync_c": mean_of(records, "sync_c"),
        "sync_d": mean_of(records, "sync_d"),
    }
