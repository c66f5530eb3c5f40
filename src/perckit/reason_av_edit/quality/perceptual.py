"""LPAPS: the numpy half of SpecVQGAN's learned perceptual audio patch similarity.

LPAPS (Iashin & Rahtu, "Taming Visually Guided Sound Generation", BMVC 2021; v-iashin/SpecVQGAN,
``specvqgan/modules/losses/lpaps.py``) is LPIPS (Zhang et al., 2018) on mel spectrograms, with a VGG16-like
network trained on VGGSound ("VGGish-ish") in place of the ImageNet VGG16. For two spectrograms it is

    LPAPS = sum over the 5 layers l of  mean over (f, t) of  sum over channels c of  w_lc (n0_lc - n1_lc)^2

where ``n_l`` is the layer's ``relu1_2 / relu2_2 / relu3_3 / relu4_3 / relu5_3`` feature map unit-normalised
over the channels at every (f, t) position (``x / (sqrt(sum_c x^2) + 1e-10)``) and ``w_l`` the weights of
the layer's 1 x 1 convolution (``lin0 .. lin4``, no bias; non-negative once trained, as LPIPS clamps them). :func:`lpaps_distance` is this formula;
the network half (the features, the checkpoint) is :mod:`.models.lpaps`.

**The spectrogram** is the one SpecVQGAN is trained on (``feature_extraction/extract_mel_spectrogram.py``,
``TRANSFORMS``; ``specvqgan/data/vggsound.py``): audio at **22050 Hz**; ``|STFT|`` (power 1) with
``n_fft = 1024``, hop 256, a periodic Hann window of 1024, centred frames with **reflect** padding (the
default of the librosa 0.8 it pins; librosa >= 0.10 pads with zeros by default); an **80-band Slaney mel**
filterbank from 125 to 7600 Hz (librosa's ``filters.mel`` defaults: Slaney scale and area normalisation,
rounded to float32 as librosa returns it); then ``clip((20 log10(max(mel, 1e-5)) - 20 + 100) / 100, 0, 1)``,
at most 860 frames (10 s), and finally ``2 x - 1`` (the model's input range). :func:`specvqgan_mel` computes it
in numpy (no librosa needed; the tests compare it with librosa where installed). The network's first step,
``ScalingLayer``, subtracts a per-mel-band mean and divides by a per-band std (stored in the checkpoint).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .models.base import mean_of
from ..metric import resample

#: SpecVQGAN's spectrogram parameters
MEL_SR = 22050
MEL_N_FFT = 1024
MEL_HOP = 256
MEL_BANDS = 80
MEL_FMIN = 125.0
MEL_FMAX = 7600.0
#: TrimSpec(860): the 10 s the model is trained on
MEL_MAX_FRAMES = 860
#: the smallest spectrogram the network accepts: four 2 x 2 max-pools need 16 frames
MIN_FRAMES = 16
#: LPIPS' ``normalize_tensor`` epsilon
NORM_EPS = 1e-10


# ---------------------------------------------------------------- the spectrogram


def _slaney_hz_to_mel(hz: np.ndarray) -> np.ndarray:
    f = np.asarray(hz, dtype=np.float64)
    logstep = math.log(6.4) / 27.0
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-300) / 1000.0) / logstep, f * 3.0 / 200.0)


def _slaney_mel_to_hz(mel: np.ndarray) -> np.ndarray:
    m = np.asarray(mel, dtype=np.float64)
    logstep = math.log(6.4) / 27.0
    return np.where(m >= 15.0, 1000.0 * np.exp(logstep * (m - 15.0)), m * 200.0 / 3.0)


def slaney_mel_filters(sample_rate: int = MEL_SR, n_fft: int = MEL_N_FFT, n_mels: int = MEL_BANDS,
                       fmin: float = MEL_FMIN, fmax: float = MEL_FMAX) -> np.ndarray:
    """``(n_mels, n_fft // 2 + 1)`` mel filters as ``librosa.filters.mel`` (``htk=False``, ``norm='slaney'``):
    ``n_mels + 2`` edges equally spaced on the Slaney mel scale (linear below 1 kHz, logarithmic above);
    filter ``i`` is the triangle over edges ``i, i + 1, i + 2`` evaluated at the FFT bin frequencies
    ``k sr / n_fft``, scaled by ``2 / (edge[i + 2] - edge[i])``; rounded to float32 (librosa's dtype)."""
    freqs = np.linspace(0.0, sample_rate / 2.0, n_fft // 2 + 1)
    edges = _slaney_mel_to_hz(np.linspace(_slaney_hz_to_mel(fmin), _slaney_hz_to_mel(fmax), n_mels + 2))
    width = np.diff(edges)
    ramps = edges[:, None] - freqs[None, :]
    lower = -ramps[:-2] / width[:-1, None]
    upper = ramps[2:] / width[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper)) * (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return weights.astype(np.float32).astype(np.float64)


def stft_magnitude(y: Any, n_fft: int = MEL_N_FFT, hop: int = MEL_HOP) -> np.ndarray:
    """``(n_fft // 2 + 1, frames)`` ``|STFT|`` as ``librosa.stft(center=True, pad_mode='reflect')``: the
    signal reflect-padded by ``n_fft // 2`` at both ends, ``1 + len // hop`` frames (for ``len >= n_fft //
    2 + 1``), each times a periodic Hann window of ``n_fft``, real FFT."""
    x = np.asarray(y, dtype=np.float64).reshape(-1)
    half = n_fft // 2
    if x.size <= half:
        raise ValueError(f"stft_magnitude: reflect padding needs more than {half} samples, got {x.size}")
    x = np.pad(x, half, mode="reflect")
    n_frames = 1 + (x.size - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(n_frames)[:, None]
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n_fft) / n_fft)
    return np.abs(np.fft.rfft(x[idx] * window, axis=1)).T


def specvqgan_mel(y: Any, max_frames: int | None = MEL_MAX_FRAMES) -> np.ndarray:
    """``(80, frames)`` SpecVQGAN spectrogram in [0, 1] of 22050 Hz samples ``y`` (see the module text):
    mel of ``|STFT|``, ``clip((20 log10(max(mel, 1e-5)) + 80) / 100, 0, 1)``, the first ``max_frames``
    frames (``None``: all). The model input is ``2 * this - 1``."""
    mel = slaney_mel_filters() @ stft_magnitude(y)
    spec = np.clip((20.0 * np.log10(np.maximum(mel, 1e-5)) - 20.0 + 100.0) / 100.0, 0.0, 1.0)
    return spec if max_frames is None else spec[:, :max_frames]


def resample_to_mel_rate(audio: Any, sample_rate: int) -> np.ndarray:
    """Mono samples at ``sample_rate`` resampled to 22050 Hz with ``scipy.signal.resample_poly`` (the
    project's resampler; SpecVQGAN's data was resampled by ffmpeg). Audio decoded at 16 kHz has no content
    above 8 kHz, which the 7600 Hz mel ceiling does not use anyway."""
    return resample(audio, sample_rate, MEL_SR)


# ---------------------------------------------------------------- the distance


def unit_normalize(feat: Any, eps: float = NORM_EPS) -> np.ndarray:
    """A ``(C, H, W)`` feature map divided at every position by its channel norm plus ``eps``
    (LPIPS' ``normalize_tensor``)."""
    x = np.asarray(feat, dtype=np.float64)
    return x / (np.sqrt((x * x).sum(axis=0, keepdims=True)) + eps)


def lpaps_distance(feats0: Sequence[Any], feats1: Sequence[Any], lin_weights: Sequence[Any], eps: float = NORM_EPS) -> float:
    """LPAPS of two inputs from their per-layer feature maps (``(C_l, H_l, W_l)`` each, the same shapes in
    both) and the layers' 1 x 1 weights (``(C_l,)``, or the conv weight ``(1, C_l, 1, 1)``): the sum over
    layers of the spatial mean of ``sum_c w_c (n0 - n1)^2`` with ``n`` the :func:`unit_normalize` d maps."""
    if not (len(feats0) == len(feats1) == len(lin_weights)) or not feats0:
        raise ValueError(f"lpaps_distance: expected as many layers in both feature lists and the weights, got "
                         f"{len(feats0)}, {len(feats1)} and {len(lin_weights)}")
    parts = []
    for layer, (f0, f1, w) in enumerate(zip(feats0, feats1, lin_weights)):
        a, b = unit_normalize(f0, eps), unit_normalize(f1, eps)
        wv = np.asarray(w, dtype=np.float64).reshape(-1)
        if a.ndim != 3 or a.shape != b.shape or wv.size != a.shape[0]:
            raise ValueError(f"lpaps_distance: layer {layer}: expected two (C, H, W) maps of one shape and C weights, got "
                             f"{list(a.shape)}, {list(b.shape)} and {wv.size} weights")
        parts.append(float(np.tensordot(wv, (a - b) ** 2, axes=1).mean()))
    return math.fsum(parts)


def reduce_lpaps(records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """``lpaps``: the mean over the samples that have a value (``None`` when none has)."""
    return {"lpaps": mean_of(records, "lpaps")}
