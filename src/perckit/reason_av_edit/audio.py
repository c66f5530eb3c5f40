"""Audio conventions of ``av_reasoning`` [proposal]: WAV decoding, the frame grid, activity and TF masks.

Every constant is a field of :class:`AudioOptions` (defaults from the spec, section 4.2):

- decode with ``soundfile``, average channels to mono (float64), resample with
  ``scipy.signal.resample_poly`` when the rate differs (``resample=False`` raises);
- frame grid: window ``n_fft`` (1024), hop ``hop`` (256), centred with ``n_fft // 2`` zeros on both
  sides, ``1 + N // hop`` frames; frame i covers samples ``[hop*i - n_fft/2, hop*i + n_fft/2)`` and sits
  at ``t_i = hop*i / sample_rate`` seconds;
- frame RMS ``r_i = sqrt(mean(x^2))`` over the window (``librosa.feature.rms``);
- activity: ``r_i >= rms_floor`` and ``20 log10 r_i >= 20 log10 max r - rel_db``, then gaps of at most
  ``round(gap_close_s * sr / hop)`` frames closed, then runs shorter than ``round(min_run_s * sr / hop)``
  frames dropped; a waveform with no active frame is silent;
- TF mask: STFT magnitude with the periodic Hann window ``scipy.signal.get_window("hann", n_fft)``
  (``librosa.stft``, centred, zero padding), ``D = 20 log10 max(S, 1e-10)``; a bin is on when
  ``D >= max D - rel_db`` and its frame has ``r_i >= rms_floor``.
"""

from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import segmentation as seg
from ..errors import OptionError, PredictionError

#: Smallest STFT magnitude in the dB conversion (spec: ``max(S, 1e-10)``).
MAG_FLOOR = 1e-10
#: Longest waveform :func:`decode_wav` accepts (seconds). The benchmark's clips last seconds; a tiny WAV
#: file declaring a 1 Hz rate would otherwise resample to gigabytes (and its STFT to more).
MAX_DURATION_S = 600.0


@dataclass(frozen=True)
class AudioOptions:
    sample_rate: int = 16000
    n_fft: int = 1024
    hop: int = 256
    rms_floor: float = 1e-4
    rel_db: float = 40.0
    gap_close_s: float = 0.10
    min_run_s: float = 0.05
    resample: bool = True

    def __post_init__(self) -> None:
        for name in ("sample_rate", "n_fft", "hop"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise OptionError(f"option {name!r}: expected a positive int, got {v!r}")
        if self.n_fft % 2:
            raise OptionError(f"option 'n_fft': expected an even window length, got {self.n_fft!r}")
        for name in ("rms_floor", "rel_db", "gap_close_s", "min_run_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise OptionError(f"option {name!r}: expected a non-negative number, got {v!r}")
        if not isinstance(self.resample, bool):
            raise OptionError(f"option 'resample': expected True or False, got {self.resample!r}")

    def frames_of(self, seconds: float) -> int:
        """``round(seconds * sample_rate / hop)``: a duration as a frame count."""
        return int(round(seconds * self.sample_rate / self.hop))


# ---------------------------------------------------------------- WAV I/O


def resample(x: Any, sample_rate: int, target_rate: int) -> np.ndarray:
    """Mono samples at ``sample_rate`` as float64 at ``target_rate``: ``scipy.signal.resample_poly`` with the rates
    reduced by their gcd when they differ (and there are samples); the values unchanged otherwise. The one
    resampler of ReasonAVEdit's audio (the WAV decoder, and every edit-quality model's input rate)."""
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    if int(sample_rate) == int(target_rate) or not a.size:
        return a
    from scipy.signal import resample_poly

    g = math.gcd(int(sample_rate), int(target_rate))
    return resample_poly(a, int(target_rate) // g, int(sample_rate) // g)


def decode_wav(data: bytes, where: str, options: AudioOptions = AudioOptions(), error: type[Exception] = PredictionError) -> np.ndarray:
    """Mono float64 samples at ``options.sample_rate`` from WAV (or any libsndfile format: FLAC, OGG, ...) bytes.

    The header (frames, rate, channels, as ``soundfile.info`` reports them) is checked before anything is
    decoded: at most :data:`MAX_DURATION_S` seconds, :data:`~.limits.MAX_AUDIO_CHANNELS` channels and
    :data:`~.limits.MAX_AUDIO_SAMPLES` samples in all; decoding then stops one frame past those limits, so a
    header that understates its length is caught too. Raises ``error`` naming ``where`` for those, when the
    bytes cannot be decoded, or when the rate differs and ``options.resample`` is False.
    """
    import soundfile as sf

    from .limits import MAX_AUDIO_CHANNELS, MAX_AUDIO_SAMPLES

    def too_long(frames: int, sr: int) -> Exception:
        return error(
            f"{where}: {frames} samples at {sr} Hz last {frames / sr:.6g} s, more than the limit of "
            f"{MAX_DURATION_S:g} s (perckit.reason_av_edit.audio.MAX_DURATION_S)"
        )

    try:
        f = sf.SoundFile(io.BytesIO(data))
    except Exception as e:  # soundfile raises LibsndfileError / RuntimeError / TypeError on bad input
        raise error(f"{where}: expected a decodable WAV file, got: {type(e).__name__}: {e}") from None
    with f:
        sr, channels, frames = int(f.samplerate), int(f.channels), int(f.frames)
        if sr <= 0:
            raise error(f"{where}: expected a sample rate > 0 in the header, got {sr}")
        if not 1 <= channels <= MAX_AUDIO_CHANNELS:
            raise error(f"{where}: the header declares {channels} channels; expected 1 to {MAX_AUDIO_CHANNELS} "
                        "(perckit.reason_av_edit.limits.MAX_AUDIO_CHANNELS)")
        limit = min(int(MAX_DURATION_S * sr), MAX_AUDIO_SAMPLES // channels)
        unknown = frames >= 1 << 62  # libsndfile's "unknown length" (a FLAC whose STREAMINFO says 0 samples): read up to the limit
        if not unknown and frames > MAX_DURATION_S * sr:
            raise too_long(frames, sr)
        if not unknown and frames > limit:
            raise error(f"{where}: the header declares {frames} x {channels} samples, more than the limit of "
                        f"{MAX_AUDIO_SAMPLES} (perckit.reason_av_edit.limits.MAX_AUDIO_SAMPLES)")
        try:
            x = f.read(frames=limit + 1, dtype="float64", always_2d=True)
        except Exception as e:
            raise error(f"{where}: expected a decodable WAV file, got: {type(e).__name__}: {e}") from None
    if x.shape[0] > limit:  # the header declared no length (or less than the data holds)
        raise error(f"{where}: decoding gave more than {limit} samples at {sr} Hz x {channels} channel(s), more than the limit "
                    f"of {MAX_DURATION_S:g} s (perckit.reason_av_edit.audio.MAX_DURATION_S) or {MAX_AUDIO_SAMPLES} samples "
                    "(perckit.reason_av_edit.limits.MAX_AUDIO_SAMPLES)")
    x = x.mean(axis=1) if x.shape[1] > 1 else x[:, 0]
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x))[0])
        raise error(f"{where}: expected finite samples, got NaN or infinity (first at sample {bad})")
    if sr != options.sample_rate:
        if not options.resample:
            raise error(f"{where}: sample rate is {sr} Hz, expected {options.sample_rate} Hz (pass resample=True to resample)")
        x = resample(x, sr, options.sample_rate)
    return np.ascontiguousarray(x, dtype=np.float64)


def encode_wav(x: Any, sample_rate: int = 16000, subtype: str = "PCM_16") -> bytes:
    """A mono waveform (floats in [-1, 1]) as WAV bytes."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.asarray(x, dtype=np.float64), int(sample_rate), format="WAV", subtype=subtype)
    return buf.getvalue()


def fit_length(x: np.ndarray, n: int) -> np.ndarray:
    """Zero-pad or trim to ``n`` samples."""
    if x.shape[0] >= n:
        return x[:n]
    return np.concatenate([x, np.zeros(n - x.shape[0], dtype=x.dtype)])


# ---------------------------------------------------------------- frame grid


def num_frames(n_samples: int, options: AudioOptions = AudioOptions()) -> int:
    return 1 + int(n_samples) // options.hop


def frame_times(n: int, options: AudioOptions = AudioOptions()) -> np.ndarray:
    """``t_i = hop * i / sample_rate`` for i < n."""
    return (np.arange(n, dtype=np.float64) * options.hop) / options.sample_rate


def frame_rms(x: np.ndarray, options: AudioOptions = AudioOptions()) -> np.ndarray:
    """``r_i`` of every frame of the centred, zero-padded grid (float64)."""
    if x.shape[0] == 0:
        return np.zeros(1, dtype=np.float64)
    import librosa

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = librosa.feature.rms(y=x, frame_length=options.n_fft, hop_length=options.hop, center=True, pad_mode="constant", dtype=np.float64)
    return np.asarray(r[0], dtype=np.float64)


def _runs(active: np.ndarray, value: bool) -> list[tuple[int, int]]:
    """``[start, end)`` of every maximal run of ``value``."""
    a = np.asarray(active, dtype=bool) == value
    if not a.any():
        return []
    d = np.diff(np.concatenate(([0], a.astype(np.int8), [0])))
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))


def close_gaps(active: np.ndarray, max_gap: int) -> np.ndarray:
    """Fill inactive runs of at most ``max_gap`` frames that lie between two active frames."""
    out = np.asarray(active, dtype=bool).copy()
    if max_gap <= 0 or not out.any():
        return out
    first, last = int(np.argmax(out)), len(out) - 1 - int(np.argmax(out[::-1]))
    for s, e in _runs(out, False):
        if s > first and e <= last and e - s <= max_gap:
            out[s:e] = True
    return out


def drop_short_runs(active: np.ndarray, min_run: int) -> np.ndarray:
    """Clear active runs shorter than ``min_run`` frames."""
    out = np.asarray(active, dtype=bool).copy()
    for s, e in _runs(out, True):
        if e - s < min_run:
            out[s:e] = False
    return out


def _db(values: np.ndarray, floor: float) -> np.ndarray:
    return 20.0 * np.log10(np.maximum(values, floor))


def activity_from_rms(r: np.ndarray, options: AudioOptions = AudioOptions()) -> np.ndarray:
    """The activity vector of a frame-RMS vector (floor, relative dB, gap closing, minimum run)."""
    peak = float(r.max()) if r.size else 0.0
    if peak <= 0.0:
        return np.zeros(r.shape[0], dtype=bool)
    active = (r >= options.rms_floor) & (_db(r, 1e-300) >= _db(np.array(peak), 1e-300) - options.rel_db)
    active = close_gaps(active, options.frames_of(options.gap_close_s))
    return drop_short_runs(active, options.frames_of(options.min_run_s))


def activity(x: np.ndarray, options: AudioOptions = AudioOptions()) -> np.ndarray:
    return activity_from_rms(frame_rms(x, options), options)


def window_vector(window: tuple[float, float] | None, n: int, options: AudioOptions = AudioOptions()) -> np.ndarray:
    """``1[a <= t_i < b]`` over ``n`` frames (all False for ``None`` or ``b <= a``)."""
    if window is None:
        return np.zeros(n, dtype=bool)
    t = frame_times(n, options)
    return (t >= window[0]) & (t < window[1])


def activity_hull(active: np.ndarray, options: AudioOptions = AudioOptions()) -> tuple[float, float] | None:
    """``[t_first, t_last + hop / sample_rate)`` of an activity vector; ``None`` when nothing is active."""
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return None
    return (int(idx[0]) * options.hop / options.sample_rate, (int(idx[-1]) + 1) * options.hop / options.sample_rate)


def tf_mask(x: np.ndarray, options: AudioOptions = AudioOptions(), rms: np.ndarray | None = None) -> np.ndarray:
    """The on-bins (freq x frame, bool) of a waveform's STFT (see the module docstring)."""
    if x.shape[0] == 0:
        return np.zeros((options.n_fft // 2 + 1, 1), dtype=bool)
    import librosa
    from scipy.signal import get_window

    window = get_window("hann", options.n_fft)  # periodic (fftbins=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        S = np.abs(librosa.stft(x, n_fft=options.n_fft, hop_length=options.hop, window=window, center=True, pad_mode="constant"))
    D = _db(S, MAG_FLOOR)
    r = frame_rms(x, options) if rms is None else rms
    frames_ok = r[: S.shape[1]] >= options.rms_floor
    return (D >= D.max() - options.rel_db) & frames_ok[None, :]


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    """|A ∩ B| / |A ∪ B| of two boolean arrays of one shape; 1 when both are empty (the counts and the
    empty-union rule of :mod:`perckit.core.segmentation`, the one mask-pair core)."""
    counts = seg.dense_pair_counts(a, b, "audio masks")
    return seg.pair_iou(counts.intersection, counts.union)


@dataclass
class Waveform:
    """A decoded waveform with its frame RMS and activity, computed once."""

    samples: np.ndarray
    options: AudioOptions

    def __post_init__(self) -> None:
        self.rms = frame_rms(self.samples, self.options)
        self.active = activity_from_rms(self.rms, self.options)

    @property
    def silent(self) -> bool:
        return not bool(self.active.any())

    def hull(self) -> tuple[float, float] | None:
        return activity_hull(self.active, self.options)

    def tf(self) -> np.ndarray:
        return tf_mask(self.samples, self.options, self.rms)
