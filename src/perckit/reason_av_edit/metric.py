"""``av_reasoning``: the ReasonAVEdit-Bench reasoning diagnostics [proposal]: the formulas, the per-sample score and
the reduce.

The benchmark's own evaluator (``bigfacing/h3eval``) is not readable, so every definition here is a proposal
(spec section 4), one function each, every constant an option of :class:`AVReasoningOptions` (the audio ones of
:class:`AudioOptions`). Notation: P the prediction, G the reference (ground truth), ``|.|`` a count.

Where (the anchor mask; exact integer pixel counts of :mod:`perckit.core.segmentation`, the one mask-pair core)::

    visual_iou           = |P ∩ G| / |P ∪ G|                     (G not empty)
    visual_ciou          = sum |P ∩ G| / sum |P ∪ G|             (over the samples with a visual_iou)
    bg_leak              = (|P| - |P ∩ G|) / (H W - |G|)         (0 when G fills the frame)
    visual_null_correct  = |P| / (H W) < null_area_frac          (G empty: "no visual target")
    visual_iou_with_null = visual_iou, or 1 / 0 for a correct / wrong null sample

When (intervals ``[start, end)`` in seconds, or per-frame vectors)::

    interval_tiou(A, B)  = |A ∩ B| / |A ∪ B|; 1 when both are empty, 0 when exactly one is
    vector_tiou(a, b)    = the same over two boolean frame vectors (frame counts)
    audio_tiou           = vector_tiou(G support, P support) on the audio frame grid
    audio_tiou_hull      = interval_tiou(G hull, P hull); audio_tiou_r@t = [audio_tiou_hull >= t]
    audio_tf_iou         = |TF(P) ∩ TF(G)| / |TF(P) ∪ TF(G)|     (time-frequency masks of the two waveforms)
    video_tiou           = vector_tiou over the mask videos' active frames; video_tiou_hull on their hulls
    av_onset_offset_abs_s = |a0 - v0|;  av_support_offset_s = (|a0 - v0| + |a1 - v1|) / 2;
    av_support_tiou       = interval_tiou([a0, a1), [v0, v1))   (the prediction's audio and video supports)

The audio conventions (defaults from spec 4.2): decode with ``soundfile``, average channels to mono (float64),
resample with ``scipy.signal.resample_poly`` when the rate differs (``resample=False`` raises); frame grid: window
``n_fft`` (1024), hop ``hop`` (256), centred with ``n_fft // 2`` zeros on both sides, ``1 + N // hop`` frames; frame
i covers samples ``[hop*i - n_fft/2, hop*i + n_fft/2)`` and sits at ``t_i = hop*i / sample_rate`` seconds; frame RMS
``r_i = sqrt(mean(x^2))`` over the window (``librosa.feature.rms``); activity: ``r_i >= rms_floor`` and
``20 log10 r_i >= 20 log10 max r - rel_db``, then gaps of at most ``round(gap_close_s * sr / hop)`` frames closed,
then runs shorter than ``round(min_run_s * sr / hop)`` frames dropped; a waveform with no active frame is silent
(the audio-null rule); the hull of an activity vector is ``[t_first, t_last + hop / sample_rate)``. TF mask: STFT
magnitude with the periodic Hann window ``scipy.signal.get_window("hann", n_fft)`` (``librosa.stft``, centred, zero
padding), ``D = 20 log10 max(S, 1e-10)``; a bin is on when ``D >= max D - rel_db`` and its frame has
``r_i >= rms_floor``. A mask video frame is active when its gray foreground (``> mask_video_threshold``) covers
``>= null_area_frac`` of the frame; its hull is ``[j_first / fps, (j_last + 1) / fps)``.

Which (:func:`which_correct`): the first applicable rule decides: ``discrete`` (both instance indices given: equal),
``visual`` (a non-null visual G with a predicted mask: IoU >= threshold), ``audio`` (a visual-null G:
``audio_tf_iou``, else ``audio_tiou``, >= threshold); otherwise unscored.

Accumulate: :func:`score_sample` turns one (prediction, reference) pair into a :class:`SampleScore`. Reduce:
:func:`reduce_scores` macro-averages the records (:func:`perckit.core.stats.fmean`, on ``math.fsum``: independent of the
order, so evaluate's distributed mode gives the same numbers), per category, sub-track, language and orientation, with
``restrict_to_suggested``. :func:`av_reasoning` pairs predictions with references by ``sample_id``
(:func:`perckit.core.matching.pair_by_id`) and runs both. Every input value is decoded and checked by the readers of
the "inputs" section below (masks, windows, instance indices, audio, mask videos; each raises a
:class:`~perckit.errors.PredictionError`, an :class:`~perckit.errors.RLEError` for masks, naming the side, the sample
and the field); the scoring never parses a row itself. Media values are read by :func:`.features.media_bytes`
(``bytes`` wins, else a capped read of ``path``).

Learned-model metrics (FVD, FAD, CLAP, Synchformer DeSync, LPAPS, ...) are out of scope here (they are
:mod:`.quality`): no key of theirs is ever emitted.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .. import rle as rle_ops
from ..core import segmentation as seg
from ..errors import InputNotFoundError, OptionError, PredictionError, RLEError, check_choice, make_options
from ..core.matching import pair_by_id
from ..io.paths import read_regular_file
from ..core.stats import fmean
from .features import is_media_provided, is_not_provided_rle, media_bytes
from . import layout
from ..io import media as video_caps
from ..io.media import check_video_header
from .read.metadata import CARD_AUDIO_NULL, CARD_VISUAL_NULL, CATEGORIES

logger = logging.getLogger(__name__)

GT_TEMPORAL_SOURCES = ("annotation", "reason_audio")
RESIZE_MODES = seg.RESIZE_MODES
#: The rule ``resize_predictions="nearest"`` resizes an anchor mask with: OpenCV's ``INTER_NEAREST`` (no official
#: evaluator is public; ``"pil"`` on request).
NEAREST_RULE = "opencv"

VISUAL_KEYS = ("visual_iou", "visual_ciou", "visual_null_acc", "visual_iou_with_null", "bg_leak")
AUDIO_TEMPORAL_KEYS = ("audio_tiou", "audio_tiou_hull")  # + audio_tiou_r@<t> + audio_null_acc
VIDEO_KEYS = ("video_tiou", "video_tiou_hull", "video_null_acc")
AV_KEYS = ("av_onset_offset_abs_s", "av_support_offset_s", "av_support_tiou")
#: The categories whose main (non-reference) samples feed each top-level key when
#: ``restrict_to_suggested`` (after the card's "Suggested metrics").
SUGGESTED = {
    "visual": ("where_only", "combined"),
    "which": ("which_only", "combined"),
    "temporal": ("when_only", "combined"),
}
RULES = ("discrete", "visual", "audio", "unscored")
#: What a missing prediction's message suggests instead: a row that provides nothing.
EMPTY_PREDICTION = "a sample without output is make_prediction(sample_id), every field 'not provided'"


def recall_key(t: float) -> str:
    return f"audio_tiou_r@{t:g}"


# ---------------------------------------------------------------- audio conventions

#: Smallest STFT magnitude in the dB conversion (spec: ``max(S, 1e-10)``).
MAG_FLOOR = 1e-10


@dataclass(frozen=True)
class AudioOptions:
    """The audio constants of the conventions in the module docstring, with their defaults."""

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
    decoded: at most :data:`~.layout.MAX_DURATION_S` seconds, :data:`~.layout.MAX_AUDIO_CHANNELS` channels and
    :data:`~.layout.MAX_AUDIO_SAMPLES` samples in all; decoding then stops one frame past those limits, so a
    header that understates its length is caught too. Raises ``error`` naming ``where`` for those, when the
    bytes cannot be decoded, or when the rate differs and ``options.resample`` is False.
    """
    import soundfile as sf

    try:
        f = sf.SoundFile(io.BytesIO(data))
    except Exception as e:  # soundfile raises LibsndfileError / RuntimeError / TypeError on bad input
        raise error(f"{where}: expected a decodable WAV file, got: {type(e).__name__}: {e}") from None
    with f:
        sr, channels, frames = int(f.samplerate), int(f.channels), int(f.frames)
        if sr <= 0:
            raise error(f"{where}: expected a sample rate > 0 in the header, got {sr}")
        if not 1 <= channels <= layout.MAX_AUDIO_CHANNELS:
            raise error(f"{where}: the header declares {channels} channels; expected 1 to {layout.MAX_AUDIO_CHANNELS} "
                        "(perckit.reason_av_edit.layout.MAX_AUDIO_CHANNELS)")
        limit = min(int(layout.MAX_DURATION_S * sr), layout.MAX_AUDIO_SAMPLES // channels)
        unknown = frames >= 1 << 62  # libsndfile's "unknown length" (a FLAC whose STREAMINFO says 0 samples): read up to the limit
        if not unknown and frames > layout.MAX_DURATION_S * sr:
            raise error(f"{where}: {frames} samples at {sr} Hz last {frames / sr:.6g} s, more than the limit of "
                        f"{layout.MAX_DURATION_S:g} s (perckit.reason_av_edit.layout.MAX_DURATION_S)")
        if not unknown and frames > limit:
            raise error(f"{where}: the header declares {frames} x {channels} samples, more than the limit of "
                        f"{layout.MAX_AUDIO_SAMPLES} (perckit.reason_av_edit.layout.MAX_AUDIO_SAMPLES)")
        try:
            x = f.read(frames=limit + 1, dtype="float64", always_2d=True)
        except Exception as e:
            raise error(f"{where}: expected a decodable WAV file, got: {type(e).__name__}: {e}") from None
    if x.shape[0] > limit:  # the header declared no length (or less than the data holds)
        raise error(f"{where}: decoding gave more than {limit} samples at {sr} Hz x {channels} channel(s), more than the limit "
                    f"of {layout.MAX_DURATION_S:g} s (perckit.reason_av_edit.layout.MAX_DURATION_S) or {layout.MAX_AUDIO_SAMPLES} samples "
                    "(perckit.reason_av_edit.layout.MAX_AUDIO_SAMPLES)")
    x = x.mean(axis=1) if x.shape[1] > 1 else x[:, 0]
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x))[0])
        raise error(f"{where}: expected finite samples, got NaN or infinity (first at sample {bad})")
    if sr != options.sample_rate:
        if not options.resample:
            raise error(f"{where}: sample rate is {sr} Hz, expected {options.sample_rate} Hz (pass resample=True to resample)")
        x = resample(x, sr, options.sample_rate)
    return np.ascontiguousarray(x, dtype=np.float64)


def fit_length(x: np.ndarray, n: int) -> np.ndarray:
    """Zero-pad (zeros of ``x``'s dtype: False for a frame vector) or trim to ``n`` samples or frames."""
    if x.shape[0] >= n:
        return x[:n]
    return np.concatenate([x, np.zeros(n - x.shape[0], dtype=x.dtype)])


# ---------------------------------------------------------------- frame grid


def num_frames(n_samples: int, options: AudioOptions = AudioOptions()) -> int:
    return 1 + int(n_samples) // options.hop


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


def window_vector(window: tuple[float, float] | None, n: int, options: AudioOptions = AudioOptions()) -> np.ndarray:
    """``1[a <= t_i < b]`` over ``n`` frames, ``t_i = hop * i / sample_rate`` (all False for ``None`` or ``b <= a``)."""
    if window is None:
        return np.zeros(n, dtype=bool)
    t = (np.arange(n, dtype=np.float64) * options.hop) / options.sample_rate
    return (t >= window[0]) & (t < window[1])


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
    return rle_ops.pair_iou(counts.intersection, counts.union)


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
        """``[t_first, t_last + hop / sample_rate)`` of the activity; ``None`` when nothing is active."""
        return video_hull(self.active, self.options.sample_rate, self.options.hop)

    def tf(self) -> np.ndarray:
        return tf_mask(self.samples, self.options, self.rms)


# ---------------------------------------------------------------- inputs, decoded and checked


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


def _cv2() -> Any:
    """The ``cv2`` module, or ``None`` when OpenCV is not installed (the video keys are then skipped). Looked up at
    every call, so that a test can stand in for a missing OpenCV."""
    try:
        import cv2
    except ImportError:
        return None
    return cv2


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
    file of at most ``layout.MAX_MEDIA_FILE_BYTES``. The header is checked first (:func:`probe_video`), and
    decoding stops with an error past ``MAX_VIDEO_FRAMES`` frames or a frame over ``MAX_VIDEO_PIXELS``. A
    video that cannot be opened or has no frame raises :class:`PredictionError` naming ``where``.
    """
    if data is None:
        data = read_regular_file(path, where, layout.MAX_MEDIA_FILE_BYTES, PredictionError, InputNotFoundError)
    if len(data) > layout.MAX_MEDIA_FILE_BYTES:
        raise PredictionError(f"{where}: the mask video {path or '<bytes>'!r} holds {len(data)} bytes, more than the limit of "
                              f"{layout.MAX_MEDIA_FILE_BYTES} (perckit.reason_av_edit.layout.MAX_MEDIA_FILE_BYTES)")
    probe_video(data, path, where)
    cv2 = _cv2()
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
                if len(active) >= video_caps.MAX_VIDEO_FRAMES:
                    raise PredictionError(f"{where}: the mask video {path or '<bytes>'!r} has more than {video_caps.MAX_VIDEO_FRAMES} frames "
                                          "(perckit.io.media.MAX_VIDEO_FRAMES)")
                gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) if frame.ndim == 3 else frame
                if gray.size > video_caps.MAX_VIDEO_PIXELS:
                    raise PredictionError(f"{where}: the mask video {path or '<bytes>'!r} has a frame of {gray.shape[1]} x {gray.shape[0]}, "
                                          f"more than the limit of {video_caps.MAX_VIDEO_PIXELS} pixels")
                fg = int(np.count_nonzero(gray > threshold))
                active.append(fg >= null_area_frac * gray.size and fg > 0)
        finally:
            cap.release()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    if not active:
        raise PredictionError(f"{where}: the mask video {path or '<bytes>'!r} cannot be opened or has no decodable frame")
    return np.asarray(active, dtype=bool), fps


def mask_video_activity(value: Mapping, where: str, threshold: int, null_area_frac: float) -> tuple[np.ndarray, float]:
    """``(active per frame, fps)`` of a provided ``mask_video`` media value (:func:`.features.media_bytes`, then
    :func:`decode_mask_video`)."""
    data = media_bytes(value, where)
    return decode_mask_video(data, value.get("path") or "", where, threshold, null_area_frac)


def waveform(value: Mapping | None, where: str, o: AudioOptions, n: int | None = None) -> Waveform | None:
    """``reason_audio`` decoded (:func:`decode_wav`) and, given ``n``, padded or cut to ``n`` samples;
    ``None`` when not provided."""
    data = media_bytes(value, where)
    if data is None:
        return None
    x = decode_wav(data, f"{where} ({value.get('path') or '<bytes>'})", o)
    if n is not None:
        x = fit_length(x, n)
    return Waveform(x, o)


def is_real(value: Any) -> bool:
    """A finite int or float (numpy scalars included), not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)) and math.isfinite(value)


def reference_samples(ref: Mapping, where: str, sample_rate: int) -> int | None:
    """How many audio samples a reference clip lasts, ``num_frames / fps`` seconds at ``sample_rate``; ``None``
    when ``fps`` or ``num_frames`` is missing or 0. Values that are not finite numbers > 0, or a clip longer
    than :data:`.layout.MAX_DURATION_S`, raise :class:`PredictionError` naming ``where``."""
    fps, nf = ref.get("fps"), ref.get("num_frames")
    if not (fps and nf):
        return None
    if not (is_real(fps) and fps > 0 and is_real(nf) and nf > 0):
        raise PredictionError(f"{where}: expected a finite fps > 0 and num_frames > 0, got fps={fps!r}, num_frames={nf!r}")
    if nf / fps > layout.MAX_DURATION_S:
        raise PredictionError(f"{where}: num_frames / fps = {nf / fps:.6g} s, more than the limit of {layout.MAX_DURATION_S:g} s")
    return int(round(nf / fps * sample_rate))


def instance_index(value: Any, where: str) -> int | None:
    """An instance index (an int) or ``None``; anything else raises :class:`PredictionError` naming ``where``."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise PredictionError(f"{where}: expected an integer or null, got {value!r}")
    return int(value)


# ---------------------------------------------------------------- options and the per-sample record

#: The audio constants are :class:`AudioOptions` (the one place their defaults are written).
_AUDIO_DEFAULTS = AudioOptions()
AUDIO_OPTIONS = tuple(AudioOptions.__dataclass_fields__)


@dataclass(frozen=True)
class AVReasoningOptions:
    """Every constant of the proposal (spec 4.4), with its default."""

    rms_floor: float = _AUDIO_DEFAULTS.rms_floor
    rel_db: float = _AUDIO_DEFAULTS.rel_db
    gap_close_s: float = _AUDIO_DEFAULTS.gap_close_s
    min_run_s: float = _AUDIO_DEFAULTS.min_run_s
    n_fft: int = _AUDIO_DEFAULTS.n_fft
    hop: int = _AUDIO_DEFAULTS.hop
    sample_rate: int = _AUDIO_DEFAULTS.sample_rate
    null_area_frac: float = 0.001
    mask_video_threshold: int = 127
    which_iou_threshold: float = 0.5
    tiou_recall_thresholds: tuple = (0.5, 0.7)
    restrict_to_suggested: bool = True
    gt_temporal_source: str = "annotation"
    resample: bool = _AUDIO_DEFAULTS.resample
    resize_predictions: str | None = None
    #: Add ``per_sample`` (records sorted by sample_id) to the output.
    return_per_sample: bool = False

    def __post_init__(self) -> None:
        check_choice("gt_temporal_source", self.gt_temporal_source, GT_TEMPORAL_SOURCES)
        object.__setattr__(self, "resize_predictions", seg.resize_rule(self.resize_predictions, NEAREST_RULE))
        for name in ("restrict_to_suggested", "return_per_sample"):
            if not isinstance(getattr(self, name), bool):
                raise OptionError(f"option {name!r}: expected True or False, got {getattr(self, name)!r}")
        seg.check_threshold("null_area_frac", self.null_area_frac)
        seg.check_threshold("which_iou_threshold", self.which_iou_threshold)
        t = self.mask_video_threshold
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= 255:
            raise OptionError(f"option 'mask_video_threshold': expected an int in [0, 255], got {t!r}")
        object.__setattr__(self, "tiou_recall_thresholds", seg.check_thresholds(self.tiou_recall_thresholds, "tiou_recall_thresholds"))
        self.audio  # validates the audio constants

    @property
    def audio(self) -> AudioOptions:
        """The audio constants of these options (:data:`AUDIO_OPTIONS`), checked by :class:`AudioOptions`."""
        return AudioOptions(**{name: getattr(self, name) for name in AUDIO_OPTIONS})


@dataclass
class SampleScore:
    """The per-sample record (accumulate half). ``None`` = not computed for this sample."""

    sample_id: str
    category: str
    sub_track: str
    language: str | None = None
    orientation: str | None = None
    # visual
    visual_null: bool | None = None
    visual_intersection: int | None = None
    visual_union: int | None = None
    visual_iou: float | None = None
    visual_null_correct: bool | None = None
    visual_iou_with_null: float | None = None
    bg_leak: float | None = None
    # audio
    audio_null: bool | None = None
    audio_tiou: float | None = None
    audio_tiou_hull: float | None = None
    audio_tf_iou: float | None = None
    audio_null_correct: bool | None = None
    # video
    video_null: bool | None = None
    video_tiou: float | None = None
    video_tiou_hull: float | None = None
    video_null_correct: bool | None = None
    # A/V support
    av_onset_offset_abs_s: float | None = None
    av_support_offset_s: float | None = None
    av_support_tiou: float | None = None
    av_undefined: bool = False
    # Which-Acc
    which_rule: str = "unscored"
    which_correct: bool | None = None
    # what the prediction / reference provided (for ``skipped``)
    pred_mask: bool = False
    pred_audio: bool = False
    pred_window: bool = False
    pred_video: bool = False
    ref_mask: bool = False
    ref_audio: bool = False
    ref_video: bool = False
    video_unavailable: bool = False


# ---------------------------------------------------------------- shared pieces


def interval_tiou(a: tuple[float, float] | None, b: tuple[float, float] | None) -> float:
    """|A ∩ B| / |A ∪ B| of two ``[start, end)`` intervals; 1 when both are empty, 0 when exactly one is."""
    a = a if a is not None and a[1] > a[0] else None
    b = b if b is not None and b[1] > b[0] else None
    if a is None and b is None:
        return 1.0
    if a is None or b is None:
        return 0.0
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = (a[1] - a[0]) + (b[1] - b[0]) - inter
    return inter / union


def vector_tiou(a: np.ndarray, b: np.ndarray) -> float:
    """Frame-vector tIoU with the same empty rules (frame counts)."""
    return mask_iou(np.asarray(a, dtype=bool), np.asarray(b, dtype=bool))


def video_hull(active: np.ndarray, fps: float, step: int = 1) -> tuple[float, float] | None:
    """``[j_first * step / fps, (j_last + 1) * step / fps)`` of an activity vector whose frames are ``step`` samples of
    ``fps`` per second apart (a video's: ``step`` 1); ``None`` when nothing is active."""
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return None
    return int(idx[0]) * step / fps, (int(idx[-1]) + 1) * step / fps


def which_correct(pred_index: int | None, ref_index: int | None, visual_null: bool | None, visual_iou: float | None,
                  audio_tf_iou: float | None, audio_tiou: float | None, threshold: float = 0.5) -> tuple[str, bool | None]:
    """[proposal] Which-Acc of one sample: ``(rule, correct)``; the first applicable rule decides.

    1. ``discrete``: both instance indices given; correct if equal;
    2. ``visual``: a non-null visual GT with a predicted mask; correct if IoU >= threshold;
    3. ``audio``: a visual-null GT; correct if ``audio_tf_iou`` (else ``audio_tiou``) >= threshold.

    Otherwise ``("unscored", None)``.
    """
    if pred_index is not None and ref_index is not None:
        return "discrete", int(pred_index) == int(ref_index)
    if visual_null is False and visual_iou is not None:
        return "visual", visual_iou >= threshold
    if visual_null is True:
        value = audio_tf_iou if audio_tf_iou is not None else audio_tiou
        if value is not None:
            return "audio", value >= threshold
    return "unscored", None


# ---------------------------------------------------------------- accumulate


def _visual(s: SampleScore, pred: Mapping, ref: Mapping, o: AVReasoningOptions, where: str) -> None:
    g = optional_rle(ref.get("anchor_mask"), f"reference {where}: anchor_mask")
    p = optional_rle(pred.get("anchor_mask"), f"prediction {where}: anchor_mask")
    s.ref_mask, s.pred_mask = g is not None, p is not None
    if g is None:
        return
    a_g = rle_ops.area(g)
    s.visual_null = a_g == 0
    if p is None:
        return
    inter, union = seg.pair_counts(p, g, resize=o.resize_predictions, where=where)
    hw = int(g["size"][0]) * int(g["size"][1])
    a_p = union - a_g + inter
    s.bg_leak = (a_p - inter) / (hw - a_g) if hw - a_g else 0.0
    if s.visual_null:
        s.visual_null_correct = a_p / hw < o.null_area_frac
        s.visual_iou_with_null = 1.0 if s.visual_null_correct else 0.0
    else:
        s.visual_intersection, s.visual_union = inter, union
        s.visual_iou = inter / union
        s.visual_iou_with_null = s.visual_iou


def _audio(s: SampleScore, pred: Mapping, ref: Mapping, o: AVReasoningOptions, where: str) -> tuple[tuple[float, float] | None, bool]:
    """Fills the audio keys; returns the predicted audio support (hull, in seconds) and whether one was given."""
    ao = o.audio
    gt = waveform(ref.get("reason_audio"), f"reference {where}: reason_audio", ao)
    s.ref_audio = gt is not None
    n_samples = gt.samples.shape[0] if gt is not None else reference_samples(ref, f"reference {where}", ao.sample_rate)
    pw = waveform(pred.get("reason_audio"), f"prediction {where}: reason_audio", ao, n_samples)
    window = optional_window(pred.get("edit_window_s"), f"prediction {where}: edit_window_s")
    s.pred_audio, s.pred_window = pw is not None, window is not None
    if window is not None:
        support: tuple[float, float] | None = window if window[1] > window[0] else None
    elif pw is not None:
        support = pw.hull()
    else:
        support = None
    given = window is not None or pw is not None
    s.audio_null = gt.silent if gt is not None else None
    if s.audio_null:
        if given:
            s.audio_null_correct = bool((pw is not None and pw.silent) or (window is not None and window[1] <= window[0]))
        return support, given
    # the GT temporal support
    ref_window = optional_window(ref.get("edit_window_s"), f"reference {where}: edit_window_s", strict_order=True)
    n = num_frames(n_samples, ao) if n_samples is not None else None
    if o.gt_temporal_source == "annotation" and ref_window is not None:
        gt_hull = ref_window if ref_window[1] > ref_window[0] else None
        gt_vec = window_vector(ref_window, n, ao) if n is not None else None
    elif gt is not None:
        gt_hull, gt_vec = gt.hull(), gt.active
    else:
        return support, given
    if given:
        s.audio_tiou_hull = interval_tiou(gt_hull, support)
        if gt_vec is not None:
            p_vec = window_vector(window, n, ao) if window is not None else pw.active
            s.audio_tiou = vector_tiou(gt_vec, p_vec)
    if pw is not None and gt is not None:
        s.audio_tf_iou = mask_iou(gt.tf(), pw.tf())
    return support, given


def _video(s: SampleScore, pred: Mapping, ref: Mapping, o: AVReasoningOptions, where: str,
           audio_support: tuple[float, float] | None, audio_given: bool) -> None:
    ref_video, pred_video = ref.get("mask_video"), pred.get("mask_video")
    s.ref_video, s.pred_video = is_media_provided(ref_video), is_media_provided(pred_video)
    if _cv2() is None:
        s.video_unavailable = True
        return
    window = optional_window(pred.get("edit_window_s"), f"prediction {where}: edit_window_s")
    p_act = p_fps = None
    if s.pred_video:
        p_act, p_fps = mask_video_activity(pred_video, f"prediction {where}: mask_video", o.mask_video_threshold, o.null_area_frac)
    fps = ref.get("fps")
    if s.ref_video:
        g_act, g_fps = mask_video_activity(ref_video, f"reference {where}: mask_video", o.mask_video_threshold, o.null_area_frac)
        fps = fps or g_fps or None
        n = g_act.shape[0]
        if p_act is not None:
            p_vec = fit_length(p_act, n)
            p_hull = video_hull(p_vec, fps) if fps else None
        elif window is not None and fps:
            p_vec = (np.arange(n) / fps >= window[0]) & (np.arange(n) / fps < window[1])
            p_hull = window if window[1] > window[0] else None
        else:
            p_vec = None
        s.video_null = not bool(g_act.any())
        if p_vec is not None:
            if s.video_null:
                s.video_null_correct = not bool(p_vec.any())
            else:
                s.video_tiou = vector_tiou(g_act, p_vec)
                if fps:
                    frames = optional_window(ref.get("edit_window_frames"), f"reference {where}: edit_window_frames", strict_order=True)
                    g_hull = (frames[0] / fps, frames[1] / fps) if frames is not None else video_hull(g_act, fps)
                    s.video_tiou_hull = interval_tiou(g_hull, p_hull)
    # A/V support: the prediction's own supports
    if p_act is not None and audio_given:
        v_fps = fps or p_fps
        v_support = video_hull(p_act, v_fps) if v_fps else None
        if audio_support is None or v_support is None:
            s.av_undefined = True
        else:
            on = abs(audio_support[0] - v_support[0])
            off = abs(audio_support[1] - v_support[1])
            s.av_onset_offset_abs_s = on
            s.av_support_offset_s = 0.5 * (on + off)
            s.av_support_tiou = interval_tiou(audio_support, v_support)


def score_sample(prediction: Mapping, reference: Mapping, options: AVReasoningOptions = AVReasoningOptions()) -> SampleScore:
    """Accumulate half: every per-sample value of one (prediction, reference) pair."""
    sid = str(reference["sample_id"])
    where = f"sample {sid!r}"
    s = SampleScore(sample_id=sid, category=str(reference.get("category") or ""), sub_track=str(reference.get("sub_track") or ""),
                    **group_values(reference))
    _visual(s, prediction, reference, options, where)
    support, given = _audio(s, prediction, reference, options, where)
    _video(s, prediction, reference, options, where, support, given)
    s.which_rule, s.which_correct = which_correct(
        instance_index(prediction.get("selected_instance_index"), f"prediction {where}: selected_instance_index"),
        instance_index(reference.get("selected_instance_index"), f"reference {where}: selected_instance_index"),
        s.visual_null, s.visual_iou,
        s.audio_tf_iou, s.audio_tiou, options.which_iou_threshold,
    )
    return s


# ---------------------------------------------------------------- reduce


def _collect(scores: Iterable[SampleScore], attr: str) -> list:
    return [getattr(s, attr) for s in scores if getattr(s, attr) is not None]


def block(scores: Sequence[SampleScore], options: AVReasoningOptions = AVReasoningOptions()) -> dict:
    """Every key over ``scores`` (unrestricted): macro means, their counts ``n_<key>``, rule counts."""
    out: dict[str, Any] = {}

    def put(key: str, values: list | None = None) -> None:
        """``key``'s mean over ``values``, by default the samples' values of its field (``x_acc``: ``x_correct``)."""
        values = _collect(scores, key.replace("_acc", "_correct")) if values is None else values
        out[key] = fmean(values)  # math.fsum: independent of the order of the samples
        out[f"n_{key}"] = len(values)

    non_null = [s for s in scores if s.visual_iou is not None]
    put("visual_iou", [s.visual_iou for s in non_null])
    inter = sum(int(s.visual_intersection) for s in non_null)
    union = sum(int(s.visual_union) for s in non_null)
    out["visual_ciou"] = inter / union if union else None
    out["n_visual_ciou"] = len(non_null)
    for key in ("visual_null_acc", "visual_iou_with_null", "bg_leak", "audio_tiou"):
        put(key)
    hulls = _collect(scores, "audio_tiou_hull")
    put("audio_tiou_hull", hulls)
    for t in options.tiou_recall_thresholds:
        put(recall_key(t), [v >= t for v in hulls])
    for key in ("audio_tf_iou", "audio_null_acc", *VIDEO_KEYS, *AV_KEYS):
        put(key)
    out["num_av_undefined"] = sum(1 for s in scores if s.av_undefined)
    put("which_acc")
    out["which_acc_rule_counts"] = {r: sum(1 for s in scores if s.which_rule == r) for r in RULES}
    out["num_samples"] = len(scores)
    return out


def key_groups(options: AVReasoningOptions) -> dict[str, tuple[str, ...]]:
    """The top-level keys of each suggested-category group."""
    recall = tuple(recall_key(t) for t in options.tiou_recall_thresholds)
    return {
        "visual": VISUAL_KEYS,
        "which": ("which_acc", "which_acc_rule_counts", "audio_tf_iou"),
        "temporal": AUDIO_TEMPORAL_KEYS + recall + ("audio_null_acc",) + VIDEO_KEYS + AV_KEYS + ("num_av_undefined",),
    }


def _skip_reason(key: str, group: str, scores: Sequence[SampleScore], restricted: bool) -> str:
    any_ = lambda attr: any(getattr(s, attr) for s in scores)  # noqa: E731
    if group == "visual":
        if not any_("pred_mask"):
            return "no predicted anchor_mask"
        if not any_("ref_mask"):
            return "no reference anchor_mask"
    if key == "which_acc" and all(s.which_rule == "unscored" for s in scores):
        return "no sample matched a Which-Acc rule (no instance-index pair, no predicted anchor_mask on a non-null visual GT, no audio score on a visual-null GT)"
    if key == "audio_tf_iou":
        if not any_("pred_audio"):
            return "no predicted reason_audio"
        if not any_("ref_audio"):
            return "no reference reason_audio"
    if key.startswith("audio_") and key != "audio_tf_iou" and not (any_("pred_window") or any_("pred_audio")):
        return "no predicted edit_window_s or reason_audio"
    if key.startswith("video_") or key.startswith("av_") or key == "num_av_undefined":
        if any_("video_unavailable"):
            return "cv2 not installed (pip install opencv-python-headless)"
        if key.startswith("av_"):
            if not any_("pred_video"):
                return "no predicted mask_video"
            if not (any_("pred_window") or any_("pred_audio")):
                return "no predicted edit_window_s or reason_audio"
            return "every sample with both supports had an empty one (see num_av_undefined)"
        if not any_("ref_video"):
            return "no reference mask_video"
        if not (any_("pred_video") or any_("pred_window")):
            return "no predicted mask_video or edit_window_s"
    where = f"in the categories {list(SUGGESTED[group])} (main samples)" if restricted else "among the samples"
    if key.endswith("_null_acc"):
        return f"no null-GT sample {where}"
    return f"no scorable sample {where}"


def _warn_null_disagreements(scores: Sequence[SampleScore]) -> None:
    def code(s: SampleScore) -> str:
        return s.sub_track.split("_", 1)[0].upper()

    vis = sorted(s.sample_id for s in scores if s.visual_null is not None and s.visual_null != (code(s) in CARD_VISUAL_NULL))
    aud = sorted(s.sample_id for s in scores if s.audio_null is not None and s.audio_null != (code(s) in CARD_AUDIO_NULL))
    if vis:
        logger.warning("av_reasoning: %d sample(s) disagree with the card's visual null anchors (H3 only), e.g. %s", len(vis), vis[:5])
    if aud:
        logger.warning("av_reasoning: %d sample(s) disagree with the card's audio null anchors (C4, R3 only), e.g. %s", len(aud), aud[:5])


#: The per-group blocks of both ReasonAVEdit metrics: output key -> the record field it groups by (``language`` and
#: ``orientation``: the references', from the release's [inferred] columns; a sample without one is in no block).
GROUPS = {"per_category": "category", "per_sub_track": "sub_track", "per_language": "language", "per_orientation": "orientation"}


def group_values(reference: Mapping) -> dict[str, str | None]:
    """A reference's ``language`` and ``orientation``, ``None`` when absent or empty."""
    return {k: str(reference.get(k)) if reference.get(k) else None for k in ("language", "orientation")}


def group_blocks(records: Sequence[Any], block: Callable[[list], dict]) -> dict[str, dict]:
    """``{per_<group>: {value: block(the records of that value)}}`` for every group of :data:`GROUPS` (categories in
    the card's order, other values sorted): the one per-group reduce of both ReasonAVEdit metrics."""
    out: dict[str, dict] = {}
    for key, attr in GROUPS.items():
        values = sorted({getattr(r, attr) for r in records} - {None},
                        key=lambda v: (CATEGORIES.index(v) if v in CATEGORIES else len(CATEGORIES), v))
        out[key] = {v: block([r for r in records if getattr(r, attr) == v]) for v in values}
    return out


def reduce_scores(scores: Sequence[SampleScore], options: AVReasoningOptions = AVReasoningOptions()) -> dict:
    """Reduce half: the top-level keys (restricted when ``restrict_to_suggested``), ``reference``, the per-group blocks
    (:func:`group_blocks`: ``per_category``, ``per_sub_track``, ``per_language``, ``per_orientation``) and ``skipped``."""
    _warn_null_disagreements(scores)
    out: dict[str, Any] = {}
    groups = key_groups(options)
    for group, keys in groups.items():
        subset = ([s for s in scores if s.category in SUGGESTED[group] and s.category != "reference"]
                  if options.restrict_to_suggested else scores)
        b = block(subset, options)
        out.update({name: b[name] for k in keys for name in (k, f"n_{k}") if name in b})
    out["num_samples"] = len(scores)
    out["num_reference_samples"] = sum(1 for s in scores if s.category == "reference")
    out["reference"] = block([s for s in scores if s.category == "reference"], options)
    out.update(group_blocks(scores, lambda subset: block(subset, options)))
    out["skipped"] = dict(sorted((k, _skip_reason(k, group, scores, options.restrict_to_suggested))
                                 for group, keys in groups.items() for k in keys if out[k] is None))
    if options.return_per_sample:
        out["per_sample"] = [asdict(s) for s in sorted(scores, key=lambda s: s.sample_id)]
    return out


def av_reasoning(predictions: Sequence[Mapping], references: Sequence[Mapping], **options: Any) -> dict:
    """Score reasoning predictions against reference rows (see the ``av_reasoning`` metric card).

    Predictions are matched by ``sample_id`` (:func:`perckit.core.matching.pair_by_id`, always strict): a duplicate
    id on either side, an unknown prediction id, or a reference without a prediction raises
    :class:`PredictionError`.
    """
    opts = make_options("av_reasoning", AVReasoningOptions, options)
    pairs = pair_by_id(predictions, references, "sample_id", empty_hint=EMPTY_PREDICTION)
    return reduce_scores([score_sample(p, r, opts) for p, r in pairs], opts)


__all__ = [
    "AVReasoningOptions", "GROUPS", "SampleScore", "av_reasoning", "block", "decode_mask_video", "group_blocks", "interval_tiou",
    "reduce_scores", "score_sample", "vector_tiou", "which_correct",
]
