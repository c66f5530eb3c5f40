"""The cosine scores of the embedding-based edit-quality metrics (TV-A, TC, TA-A, AV-A), in numpy.

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
"""

from __future__ import annotations

import numpy as np

from ...errors import OptionError
from ...core.stats import fmean

#: Below this norm a row counts as zero (float32 resolution of a unit vector).
_EPS = 1e-8


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
    return np.divide(a, norm, out=np.zeros_like(a), where=norm > _EPS)


def cosine_rows(a: object, b: object, where: str = "features") -> np.ndarray:
    """Row-wise cosine similarity of ``a`` and ``b`` (same ``(rows, dim)`` shape; a single vector on
    either side is compared with every row of the other), float64 ``(rows,)``."""
    na = l2_normalize(a, f"{where} (first)")
    nb = l2_normalize(b, f"{where} (second)")
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
    if f.shape[0] < 2:
        return None
    return fmean(cosine_rows(f[:-1], f[1:], "temporal_consistency"))
