"""The formulas of the model-based ``av_edit_quality`` metrics: their numpy half, one section per metric with its
definition and the reference implementation it follows. The networks that give the features are :mod:`.models`
(one module per model, imported only when it runs); the model-free metrics are :mod:`.pixel`.

Fréchet distance (FVD, FAD)
---------------------------

Each set of feature rows (``(n, d)``: I3D features of video clips for FVD, VGGish frame embeddings for
FAD) is summarised by its mean and covariance; the distance of the two Gaussians is (Dowson & Landau, 1982)

    FD = |mu1 - mu2|^2 + Tr(S1 + S2 - 2 (S1 S2)^(1/2))

The conventions follow the reference implementations:

- the covariance is the unbiased one (``ddof=1``): Google's Fréchet Audio Distance divides by ``n - 1``
  (``create_embeddings_beam.ComputeMeanAndCovariance``), TF-GAN's
  ``frechet_classifier_distance_from_activations`` (which the original FVD code calls) scales to the
  unbiased covariance, gudgud96's ``frechet_audio_distance`` uses ``np.cov(rowvar=False)``. (StyleGAN-V's
  ``FeatureStats.get_mean_cov`` divides by ``n``; the two differ by the factor ``n / (n - 1)``, which only
  matters for small sets.)
- ``(S1 S2)^(1/2)`` is ``scipy.linalg.sqrtm`` of the product; if it is not finite (a singular product),
  ``eps`` is added to both diagonals and it is computed again (1e-6 as pytorch-fid and gudgud96's FAD;
  Google's FAD uses 1e-7); a small imaginary part is numerical noise and dropped (the references accept
  ``|imag| <= 1e-3`` on the diagonal).

Two departures, both where the references' computation is unreliable, never where it is sound: when either
covariance is singular (fewer rows than feature dimensions, as in every per-category FVD over fewer than 400
clips, or repeated rows), the product ``S1 S2`` can be defective and ``sqrtm`` of it loses up to half the
digits (a relative error of 2e-6 on a 3-dimensional example, and asymmetric in the two sets); the trace is then
taken from the symmetric form ``Tr((S1^(1/2) S2 S1^(1/2))^(1/2))`` (equal in exact arithmetic, as TF-GAN
computes it, real by construction, with the rounding noise of the zero eigenvalues set to 0). The same form replaces the
references' error on a large imaginary part. With both covariances positive definite (the main ranking's
1,100 clips for FVD, the thousands of 0.96 s frames for FAD) the value is the references' computation.

The rows are sorted before the statistics are computed, so the value does not depend on the order in which
the records arrive (evaluate's distributed mode gathers them in process order). With fewer rows than
feature dimensions the covariance is singular and the estimate is biased upwards (FVD and FAD are meant for
hundreds of samples or more); the value is still reported, and a set of fewer than two rows has no
covariance at all: :func:`fd_of_features` returns ``None`` for it.

Cosine scores (TV-A, TC, TA-A, AV-A)
------------------------------------

Every score here compares L2-normalised embeddings by their dot product (the cosine similarity). A row
of zeros has no direction: it is left as zeros by :func:`l2_normalize`, so its cosine with anything is
0 (as ``torch.nn.functional.cosine_similarity`` with its ``eps``), never ``nan``.

- :func:`clip_scores` / :func:`clip_score` (TV-A): CLIPScore of Hessel et al. (2021), ``w * max(cos, 0)``
  per frame, then the mean over frames. The default ``w = 100`` is torchmetrics' ``CLIPScore``
  (``max(100 * cos, 0)``, scores in [0, 100], the scale video-editing papers report); Hessel et al.'s
  own ``w = 2.5`` is a parameter away. The clamp is per frame (Hessel's definition and torchmetrics'
  stated formula); torchmetrics' code clamps the batch mean instead, which differs only when some
  frame's cosine is negative (not seen with trained CLIP models on real frames).
- :func:`temporal_consistency` (TC): the mean cosine of consecutive frames' CLIP image features (the
  frame-to-frame CLIP consistency of video-editing papers; VBench's background consistency, also on
  CLIP features, averages this consecutive-frame term with a first-frame term and clamps at 0, which
  TC does not).
- :func:`cosine` (TA-A, AV-A): the cosine of two embeddings, as MMAudio's av-benchmark reports its
  LAION-CLAP score (text against audio) and its ImageBind score (video against audio), unscaled.

Sync-C / Sync-D (SyncNet)
-------------------------

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

DeSync (Synchformer)
--------------------

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

LPAPS (SpecVQGAN)
-----------------

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
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import OptionError, PredictionError, check_choice
from ...core.stats import fmean


# ================================================================ Fréchet distance (FVD, FAD)

#: added to both covariance diagonals when the square root of their product is not finite
SINGULAR_EPS = 1e-6
#: the largest imaginary part on the diagonal of sqrtm(S1 S2) dropped as numerical noise
IMAG_ATOL = 1e-3


def _rows(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` as a finite float64 ``(n, d)`` array (a 1-D array is ``n`` rows of one feature)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{name}: expected feature rows of shape (n, d), got an array of shape {np.shape(x)}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: the features are not all finite ({int((~np.isfinite(a)).sum())} NaN / inf values)")
    return a


def feature_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean ``(d,)`` and unbiased covariance ``(d, d)`` (``ddof=1``) of the feature rows ``x`` ``(n, d)``.

    Needs at least two rows (:class:`ValueError` otherwise: one row has no covariance)."""
    a = _rows(x, "feature_stats")
    if a.shape[0] < 2:
        raise ValueError(f"feature_stats: a covariance needs at least 2 feature rows, got {a.shape[0]}")
    if a.shape[1]:  # the rows in lexicographic order: the statistics then do not depend on the row order
        a = a[np.lexsort(a.T[::-1])]
    return a.mean(axis=0), np.atleast_2d(np.cov(a, rowvar=False, ddof=1))


def _sqrtm(m: np.ndarray) -> np.ndarray:
    """``scipy.linalg.sqrtm`` without its warning on singular input (expected here: a covariance of fewer
    rows than dimensions is singular; the caller checks the result)."""
    from scipy import linalg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", linalg.LinAlgWarning)
        with np.errstate(all="ignore"):
            return np.asarray(linalg.sqrtm(m))


def _clipped_eigenvalues(w: np.ndarray, d: int) -> np.ndarray:
    """Eigenvalues of a symmetric positive semi-definite matrix with the rounding noise around 0 (below ``d *
    machine epsilon`` times the largest, numpy's ``matrix_rank`` tolerance, or negative) set to 0: the square
    root would turn that noise of order 1e-16 into errors of order 1e-8."""
    top = float(w.max(initial=0.0))
    return np.where(w > top * d * np.finfo(np.float64).eps, w, 0.0)


def _positive_definite(s: np.ndarray) -> bool:
    """Whether the symmetric matrix ``s`` is numerically positive definite: no eigenvalue clipped to 0 by
    :func:`_clipped_eigenvalues` (the largest positive, the smallest above its tolerance)."""
    return bool((_clipped_eigenvalues(np.linalg.eigvalsh((s + s.T) / 2.0), s.shape[0]) > 0).all())


def _trace_sqrt_symmetric(s1: np.ndarray, s2: np.ndarray) -> float:
    """``Tr((S1^(1/2) S2 S1^(1/2))^(1/2))``, which equals ``Tr((S1 S2)^(1/2))`` for covariances."""
    w, v = np.linalg.eigh((s1 + s1.T) / 2.0)
    r = (v * np.sqrt(_clipped_eigenvalues(w, s1.shape[0]))) @ v.T  # the symmetric square root of S1
    m = r @ s2 @ r
    w = np.linalg.eigvalsh((m + m.T) / 2.0)
    return float(np.sqrt(_clipped_eigenvalues(w, m.shape[0])).sum())


def trace_sqrt_product(s1: np.ndarray, s2: np.ndarray, eps: float = SINGULAR_EPS) -> float:
    """``Tr((S1 S2)^(1/2))`` (see the module docstring): with both covariances positive definite as the
    references compute it (``sqrtm`` of the product, ``eps`` on both diagonals when that is not finite, the
    real part when the imaginary part on the diagonal is at most :data:`IMAG_ATOL`); the symmetric form when
    either is singular or the imaginary part is larger."""
    if not (_positive_definite(s1) and _positive_definite(s2)):
        return _trace_sqrt_symmetric(s1, s2)
    covmean = _sqrtm(s1 @ s2)
    if not np.isfinite(covmean).all():
        offset = np.eye(s1.shape[0]) * eps
        covmean = _sqrtm((s1 + offset) @ (s2 + offset))
    if not np.isfinite(covmean).all():
        return _trace_sqrt_symmetric(s1, s2)
    if np.iscomplexobj(covmean):
        if not np.allclose(np.diagonal(covmean).imag, 0.0, atol=IMAG_ATOL):
            return _trace_sqrt_symmetric(s1, s2)
        covmean = covmean.real
    return float(np.trace(covmean))


def frechet_distance(mu1: np.ndarray, s1: np.ndarray, mu2: np.ndarray, s2: np.ndarray, eps: float = SINGULAR_EPS) -> float:
    """The Fréchet distance ``|mu1 - mu2|^2 + Tr(S1 + S2 - 2 (S1 S2)^(1/2))`` of two Gaussians.

    ``mu`` are ``(d,)`` means, ``s`` ``(d, d)`` covariances (a scalar mean / variance is one dimension);
    the two must have the same ``d`` (:class:`ValueError` otherwise). Symmetric in its two Gaussians;
    exactly 0 for two identical Gaussians."""
    m1, m2 = (np.atleast_1d(np.asarray(m, dtype=np.float64)) for m in (mu1, mu2))
    c1, c2 = (np.atleast_2d(np.asarray(c, dtype=np.float64)) for c in (s1, s2))
    if m1.ndim != 1 or m1.shape != m2.shape:
        raise ValueError(f"frechet_distance: the means must be vectors of one length, got shapes {m1.shape} and {m2.shape}")
    d = m1.shape[0]
    if c1.shape != (d, d) or c2.shape != (d, d):
        raise ValueError(f"frechet_distance: expected ({d}, {d}) covariances for {d}-dimensional means, got {c1.shape} and {c2.shape}")
    if np.array_equal(m1, m2) and np.array_equal(c1, c2):
        return 0.0  # exact; the numerical square root of a singular S @ S would leave rounding of order 1e-8
    diff = m1 - m2
    return float(diff @ diff + np.trace(c1) + np.trace(c2) - 2.0 * trace_sqrt_product(c1, c2, eps))


def fd_of_features(a: np.ndarray, b: np.ndarray) -> float | None:
    """The Fréchet distance between Gaussians fitted (:func:`feature_stats`) to the feature rows ``a`` and
    ``b`` (``(n_a, d)`` and ``(n_b, d)``, the same ``d``).

    ``None`` when either side has fewer than 2 rows: a Gaussian needs a covariance, and one row (or none)
    has none. For FVD a row is one clip, for FAD one 0.96 s audio frame."""
    ra = _rows(a, "fd_of_features (first set)") if np.size(a) else np.zeros((0, 0))
    rb = _rows(b, "fd_of_features (second set)") if np.size(b) else np.zeros((0, 0))
    if ra.shape[0] < 2 or rb.shape[0] < 2:
        return None
    if ra.shape[1] != rb.shape[1]:
        raise ValueError(f"fd_of_features: the two sets have {ra.shape[1]} and {rb.shape[1]} feature dimensions")
    return frechet_distance(*feature_stats(ra), *feature_stats(rb))


def pooled_rows(records: Sequence[Mapping[str, Any]], side: str) -> np.ndarray:
    """The feature rows ``record[side]`` of every record, stacked (records without rows add none), as the
    references pool every clip's / every frame's features of a set into one Gaussian."""
    parts = [np.asarray(r[side], dtype=np.float64) for r in records if r.get(side) is not None and np.size(r[side])]
    return np.concatenate([p if p.ndim == 2 else p[None, :] for p in parts], axis=0) if parts else np.zeros((0, 0))


def pooled_fd(records: Sequence[Mapping[str, Any]], a: str = "edited", b: str = "source") -> float | None:
    """:func:`fd_of_features` of the pooled rows ``a`` against the pooled rows ``b`` of ``records``
    (``None`` when either side pools fewer than 2 rows)."""
    return fd_of_features(pooled_rows(records, a), pooled_rows(records, b))


# ================================================================ Cosine scores (TV-A, TC, TA-A, AV-A)

#: Below this norm a row counts as zero (float32 resolution of a unit vector).
_COSINE_EPS = 1e-8


def _matrix(x: object, where: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or a.shape[1] == 0:
        raise ValueError(f"{where}: expected a feature vector or a (rows, dim) matrix, got shape {np.shape(x)}")
    if not np.isfinite(a).all():
        raise ValueError(f"{where}: features must be finite numbers")
    return a


def l2_normalize(x: object, where: str = "features") -> np.ndarray:
    """The rows of ``x`` (a vector or a ``(rows, dim)`` matrix) divided by their L2 norms, as float64
    ``(rows, dim)``; a zero row stays zero."""
    a = _matrix(x, where)
    norm = np.linalg.norm(a, axis=1, keepdims=True)
    return np.divide(a, norm, out=np.zeros_like(a), where=norm > _COSINE_EPS)


def cosine_rows(a: object, b: object, where: str = "features") -> np.ndarray:
    """Row-wise cosine similarity of ``a`` and ``b`` (same ``(rows, dim)`` shape; a single vector on
    either side is compared with every row of the other), float64 ``(rows,)``."""
    na, nb = l2_normalize(a, f"{where} (first)"), l2_normalize(b, f"{where} (second)")
    if na.shape[1] != nb.shape[1]:
        raise ValueError(f"{where}: feature sizes differ ({na.shape[1]} vs {nb.shape[1]})")
    if na.shape[0] != nb.shape[0] and 1 not in (na.shape[0], nb.shape[0]):
        raise ValueError(f"{where}: row counts differ ({na.shape[0]} vs {nb.shape[0]})")
    return np.clip(np.sum(na * nb, axis=1), -1.0, 1.0)


def cosine(a: object, b: object, where: str = "features") -> float:
    """The cosine similarity of two embedding vectors (TA-A: text vs audio; AV-A: audio vs video)."""
    va, vb = np.asarray(a), np.asarray(b)
    if va.ndim != 1 or vb.ndim != 1:
        raise ValueError(f"{where}: expected two vectors, got shapes {va.shape} and {vb.shape}")
    return float(cosine_rows(va, vb, where)[0])


def check_weight(w: object) -> float:
    """The CLIPScore weight ``w`` as a float: a finite positive number, else :class:`OptionError`."""
    if isinstance(w, (bool, np.bool_)) or not isinstance(w, (int, float, np.integer, np.floating)) or not np.isfinite(w) or w <= 0:
        raise OptionError(f"clip_score: expected a positive finite weight w, got {w!r}")
    return float(w)


def clip_scores(image_feats: object, text_feat: object, w: float = 100.0) -> np.ndarray:
    """Per-frame CLIPScore ``w * max(cos(image, text), 0)`` of every row of ``image_feats`` against the
    one ``text_feat`` vector, float64 ``(frames,)``."""
    w = check_weight(w)
    text = np.asarray(text_feat)
    if text.ndim != 1:
        raise ValueError(f"clip_score: expected one text feature vector, got shape {text.shape}")
    return w * np.maximum(cosine_rows(image_feats, text, "clip_score"), 0.0)


def clip_score(image_feats: object, text_feat: object, w: float = 100.0) -> float:
    """TV-A of one clip: the mean over frames of :func:`clip_scores` (``w = 100``: torchmetrics'
    CLIPScore scale, in [0, 100]; ``w = 2.5``: Hessel et al.'s)."""
    return float(fmean(clip_scores(image_feats, text_feat, w)))


def temporal_consistency(frame_feats: object) -> float | None:
    """TC of one clip: the mean cosine similarity of each frame's features with the next frame's, in
    [-1, 1]; ``None`` for fewer than two frames (no consecutive pair)."""
    f = _matrix(frame_feats, "temporal_consistency")
    if np.asarray(frame_feats).ndim != 2:
        raise ValueError(f"temporal_consistency: expected a (frames, dim) matrix, got shape {np.shape(frame_feats)}")
    return fmean(cosine_rows(f[:-1], f[1:], "temporal_consistency")) if f.shape[0] >= 2 else None


# ================================================================ Sync-C / Sync-D (SyncNet)

#: SyncNet's input rates: video frames per second, audio samples per second
VIDEO_FPS = 25.0
AUDIO_SR = 16000
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
    v, a = np.asarray(video_feats, dtype=np.float64), np.asarray(audio_feats, dtype=np.float64)
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


# ================================================================ DeSync (Synchformer)

#: crop size of Synchformer's input (its video rate, audio rate and samples per video frame are SyncNet's:
#: :data:`VIDEO_FPS`, :data:`AUDIO_SR`, :data:`SAMPLES_PER_FRAME`)
VIDEO_SIZE = 224
#: video segment length and stride (frames); audio segment length and stride (samples)
SEGMENT_FRAMES = 16
STEP_FRAMES = 8
SEGMENT_SAMPLES = SEGMENT_FRAMES * SAMPLES_PER_FRAME
STEP_SAMPLES = STEP_FRAMES * SAMPLES_PER_FRAME
#: segments per compared window, and the window in frames / samples / seconds (4.8 s)
DESYNC_WINDOW_SEGMENTS = 14
DESYNC_WINDOW_FRAMES = SEGMENT_FRAMES + (DESYNC_WINDOW_SEGMENTS - 1) * STEP_FRAMES
DESYNC_WINDOW_SAMPLES = DESYNC_WINDOW_FRAMES * SAMPLES_PER_FRAME
DESYNC_WINDOW_S = DESYNC_WINDOW_FRAMES / VIDEO_FPS
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
_FRAME_EPS = 1e-6


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
    return int(math.floor(duration * fps + _FRAME_EPS))


def window_starts(duration: float, window: float = DESYNC_WINDOW_S) -> tuple[float, ...]:
    """Start times (s) of the first and the last ``window`` s windows of a ``duration`` s clip.

    The first starts at 0; the last at the last start on the 8-frame (0.32 s) segment grid that still
    fits, ``8 * ((T - W) // 8) / 25`` with ``T`` the clip's and ``W`` the window's frames at 25 fps (so a
    4.84 s clip gives ``(0.0, 0.0)`` and a 6 s clip ``(0.0, 0.96)``). A clip shorter than the window gives
    ``()`` (see :func:`fit_short_clip`). ``window`` must be a whole number of segments: 16 + 8k frames."""
    w = frame_count(window)
    if w < SEGMENT_FRAMES or (w - SEGMENT_FRAMES) % STEP_FRAMES:
        raise OptionError(f"window: expected 16 + 8k frames at 25 fps (e.g. 4.8 s), got {window!r} s ({w} frames)")
    t = frame_count(duration)
    return (0.0, STEP_FRAMES * ((t - w) // STEP_FRAMES) / VIDEO_FPS) if t >= w else ()


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


def fit_short_clip(frames: np.ndarray, audio: np.ndarray, short_clip: str = "pad") -> tuple[np.ndarray, np.ndarray, bool] | None:
    """Frames at 25 fps ``(T, ...)`` and 16 kHz audio cut to a common length, and extended to one 4.8 s
    window when shorter: ``(frames, audio, padded)``, or ``None`` for a short clip under ``"skip"``.

    The common length is the shorter of ``T / 25`` and ``len(audio) / 16000`` on the frame grid (whole
    frames, ``640 * T`` samples). ``"pad"`` repeats the last frame and appends zeros (see the module
    docstring for why this deviates from av-benchmark)."""
    check_choice("short_clip", short_clip, SHORT_CLIP)
    if frames.shape[0] == 0:
        raise PredictionError("DeSync: the edited video has no frame")
    t = min(int(frames.shape[0]), int(audio.shape[0]) // SAMPLES_PER_FRAME)
    if t >= DESYNC_WINDOW_FRAMES:
        return frames[:t], audio[: t * SAMPLES_PER_FRAME], False
    if short_clip == "skip":
        return None
    # keep every frame the audio covers (at least one), then pad both to the window
    t = max(t, 1)
    frames = frames[: min(t, frames.shape[0])]
    audio = audio[: t * SAMPLES_PER_FRAME]
    reps = np.repeat(frames[-1:], DESYNC_WINDOW_FRAMES - frames.shape[0], axis=0)
    frames = np.concatenate([frames, reps], axis=0)
    audio = np.concatenate([audio, np.zeros(DESYNC_WINDOW_SAMPLES - audio.shape[0], dtype=audio.dtype)])
    return frames, audio, True


def desync_frame_indices(n_frames: int, fps: float, target_fps: float = VIDEO_FPS) -> np.ndarray:
    """Source frame of each output frame when ``n_frames`` frames at ``fps`` are read at ``target_fps``:
    ``floor(n_frames / fps * target_fps)`` output frames, frame ``k`` taking the source frame nearest to
    ``k / target_fps`` (``floor(k * fps / target_fps + 0.5)``, the rounding of ffmpeg's ``fps`` filter that
    av-benchmark's decoder uses), clipped to the last frame."""
    if not (math.isfinite(fps) and fps > 0):
        raise PredictionError(f"DeSync: expected a positive frame rate, got {fps!r}")
    return resample_indices(n_frames, fps, target_fps)  # SyncNet's 25 fps reading: the same rule


def resize_shape(height: int, width: int, size: int = VIDEO_SIZE) -> tuple[int, int]:
    """``(h, w)`` after resizing the shorter side to ``size`` (torchvision's ``Resize(size)``: the longer
    side becomes ``int(size * long / short)``)."""
    return (size, int(size * width / height)) if height <= width else (int(size * height / width), size)


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
    idx = start_frame + np.arange(DESYNC_WINDOW_SEGMENTS)[:, None] * STEP_FRAMES + np.arange(SEGMENT_FRAMES)[None, :]
    if start_frame < 0 or idx[-1, -1] >= frames.shape[0]:
        raise PredictionError(f"DeSync: a window from frame {start_frame} needs {DESYNC_WINDOW_FRAMES} frames, the clip has {frames.shape[0]}")
    return frames[idx]


def audio_segments(audio: np.ndarray, start_sample: int) -> np.ndarray:
    """The 14 segments of 10240 samples (stride 5120) of the window that starts at ``start_sample``:
    ``(14, 10240)``."""
    idx = start_sample + np.arange(DESYNC_WINDOW_SEGMENTS)[:, None] * STEP_SAMPLES + np.arange(SEGMENT_SAMPLES)[None, :]
    if start_sample < 0 or idx[-1, -1] >= audio.shape[0]:
        raise PredictionError(f"DeSync: a window from sample {start_sample} needs {DESYNC_WINDOW_SAMPLES} samples, the clip has {audio.shape[0]}")
    return audio[idx]


def mel_filterbank(sample_rate: int = AUDIO_SR, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    """Triangular HTK mel filters ``(n_fft // 2 + 1, n_mels)`` from 0 Hz to ``sample_rate / 2``, not
    normalised: the bins sit at ``linspace(0, sample_rate // 2, n_fft // 2 + 1)``, the band edges at
    ``n_mels + 2`` points equally spaced in ``2595 log10(1 + f / 700)``, and a bin's weight in band ``i``
    is ``max(0, min(rise, fall))`` of the two slopes."""
    freqs = np.linspace(0.0, sample_rate // 2, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(hz_to_mel(np.float64(0.0)), hz_to_mel(np.float64(sample_rate / 2.0)), n_mels + 2))
    return np.ascontiguousarray(_triangles(edges, freqs).T)


def _triangles(edges: np.ndarray, freqs: np.ndarray) -> np.ndarray:
    """``(len(edges) - 2, len(freqs))``: triangle ``i`` over ``edges[i], edges[i + 1], edges[i + 2]`` at ``freqs``,
    ``max(0, min(rise, fall))`` of its two slopes (the filters of both mel filterbanks here)."""
    width = np.diff(edges)
    ramps = edges[:, None] - freqs[None, :]
    return np.maximum(0.0, np.minimum(-ramps[:-2] / width[:-1, None], ramps[2:] / width[1:, None]))


def log_mel_segments(segments: np.ndarray) -> np.ndarray:
    """Synchformer's normalised log mel input of audio segments ``(S, 10240)`` -> ``(S, 128, 66)``
    float32: power spectrogram (periodic Hann of 400 samples centred in 1024, hop 160, reflect-padded by
    512 on both sides, 65 frames), HTK mel, ``log(x + 1e-6)``, right-padded with 0 to 66 frames,
    ``(x - MEL_MEAN) / (2 * MEL_STD)``."""
    x = np.asarray(segments, dtype=np.float64)
    pad = N_FFT // 2
    x = np.pad(x, ((0, 0), (pad, pad)), mode="reflect")
    n_frames = 1 + (x.shape[1] - N_FFT) // HOP
    left = (N_FFT - WIN_LENGTH) // 2  # the periodic Hann window of WIN_LENGTH, centred in N_FFT
    window = np.pad(0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(WIN_LENGTH) / WIN_LENGTH), (left, N_FFT - WIN_LENGTH - left))
    idx = np.arange(n_frames)[:, None] * HOP + np.arange(N_FFT)[None, :]
    spec = np.abs(np.fft.rfft(x[:, idx] * window, axis=-1)) ** 2  # (S, frames, 513)
    mel = np.einsum("sfk,km->smf", spec, mel_filterbank())
    out = np.log(mel + 1e-6)
    if out.shape[-1] < MEL_FRAMES:
        out = np.pad(out, ((0, 0), (0, 0), (0, MEL_FRAMES - out.shape[-1])), constant_values=0.0)
    out = out[..., :MEL_FRAMES]
    return ((out - MEL_MEAN) / (2.0 * MEL_STD)).astype(np.float32)


# ================================================================ LPAPS (SpecVQGAN)

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
    weights = _triangles(edges, freqs) * (2.0 / (edges[2:] - edges[:-2]))[:, None]
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
