"""The reconstructed text definitions of ``metrics/m4seg`` [recon]: SS, SIoU, I-SS and I-SIoU.

The PRIMA evaluator was not available: each definition lives in one function behind its option (see the
metric card). They take cosine matrices of L2-normalised embeddings and the mIoU pairing of each image.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..core.stats import fmean
from .pairing import greedy_text_matches


@dataclass
class ImageText:
    """The text side of one image: cosine matrix P x G of its names and its mIoU pairing (prediction, GT, IoU)."""

    cos_pg: np.ndarray
    pairs: list[tuple[int, int, float]]



def semantic_similarity(pred_answer: np.ndarray, gt_answer: np.ndarray, cos_pg: np.ndarray, n_gt: int, level: str = "answer") -> float:
    """[recon] SS of one sample. ``level="answer"``: cos(clean predicted answer, resolved GT answer).
    ``level="phrase"``: mean over GT groundings of the best cos against any predicted name (0 without
    predictions; a sample with no GT grounding scores 1 when it has no prediction either, else 0)."""
    if level == "answer":
        return float(np.dot(pred_answer, gt_answer))
    if n_gt == 0:
        return 1.0 if cos_pg.shape[0] == 0 else 0.0
    if cos_pg.shape[0] == 0:
        return 0.0
    return fmean((float(x) for x in cos_pg.max(axis=0)), n_gt)


def semantic_iou(cos_pg: np.ndarray, threshold: float = 0.5, soft: bool = False) -> float:
    """[recon] SIoU of one sample over its name lists P and G (images ignored): greedy one-to-one matching on
    cos (global max while >= threshold); M = number of matches (``soft``: sum of matched cosines);
    SIoU = M / (|P| + |G| - M). Both empty gives 1, exactly one empty gives 0."""
    n_p, n_g = cos_pg.shape
    if n_p == 0 and n_g == 0:
        return 1.0
    if n_p == 0 or n_g == 0:
        return 0.0
    matches = greedy_text_matches(cos_pg, threshold)
    m = math.fsum(c for _, _, c in matches) if soft else float(len(matches))
    den = n_p + n_g - m
    return m / den if den > 0 else 1.0


def image_semantic_similarity(per_image: Sequence[ImageText], n_gt: int, mode: str = "image") -> float | None:
    """[recon] I-SS of one sample: for each GT grounding g of image k, the best cos(name g, name p) over the
    predictions p of image k (0 when there is none); ``mode="mask"``: the cos with the prediction paired to g
    by the mIoU pairing (0 when g is unpaired). Mean over the sample's GT groundings; None without any."""
    if n_gt == 0:
        return None
    vals: list[float] = []
    for im in per_image:
        n_p, n_g = im.cos_pg.shape
        if n_g == 0:
            continue
        if mode == "mask":
            paired = {g: p for p, g, _ in im.pairs}
            vals.extend(float(im.cos_pg[paired[g], g]) if g in paired else 0.0 for g in range(n_g))
        elif n_p == 0:
            vals.extend([0.0] * n_g)
        else:
            vals.extend(float(x) for x in im.cos_pg.max(axis=0))
    return fmean(vals, n_gt)


def image_semantic_iou(per_image: Sequence[ImageText], threshold: float = 0.5, soft: bool = False, mode: str = "image") -> float:
    """[recon] I-SIoU of one sample: sum_k M_k / sum_k (|P_k| + |G_k| - M_k), M_k the SIoU matching inside
    image k (``soft``: sum of matched cosines); 1 when the denominator is 0. ``mode="mask"``: a match also
    requires the pair to be mask-paired by the mIoU pairing."""
    num, den = [], []
    for im in per_image:
        n_p, n_g = im.cos_pg.shape
        cos = im.cos_pg
        if mode == "mask":
            allowed = np.full(cos.shape, -np.inf)
            for p, g, _ in im.pairs:
                allowed[p, g] = cos[p, g]
            cos = allowed
        matches = greedy_text_matches(cos, threshold) if n_p and n_g else []
        m = math.fsum(c for _, _, c in matches) if soft else float(len(matches))
        num.append(m)
        den.append(n_p + n_g - m)
    d = math.fsum(den)
    return math.fsum(num) / d if d > 0 else 1.0
