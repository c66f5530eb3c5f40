"""The pairing algorithms of ``metrics/m4seg``: GLaMM's greedy mask pairing, the Hungarian alternative
(option ``matching``), GLaMM's recall loop and the greedy one-to-one text matching of SIoU / I-SIoU.

Every function takes a precomputed matrix (IoU from :mod:`perckit.core.segmentation`, cosine from the text
embeddings) and is deterministic: ties go to the first cell in row-major order.
"""

from __future__ import annotations

import numpy as np


def greedy_pairs(iou: np.ndarray) -> list[tuple[int, int, float]]:
    """GLaMM's mIoU pairing: repeatedly take the global maximum while it is > 0 (first in row-major order on
    ties), record it and delete its row and column. Returns (row, col, IoU)."""
    m = np.array(iou, dtype=np.float64)
    out = []
    while m.size and m.max() > 0:
        i, j = np.unravel_index(int(np.argmax(m)), m.shape)
        out.append((int(i), int(j), float(iou[i, j])))
        m[i, :] = -1.0
        m[:, j] = -1.0
    return out


def linear_assignment(cost: np.ndarray) -> list[tuple[int, int]]:
    """Minimum-cost one-to-one assignment of a rectangular matrix (Hungarian algorithm with potentials).

    Assigns min(rows, cols) pairs; returns (row, col) sorted by row. Pure numpy: scipy is not a dependency.
    """
    c = np.asarray(cost, dtype=np.float64)
    if c.size == 0:
        return []
    transposed = c.shape[0] > c.shape[1]
    a = c.T if transposed else c
    n, m = a.shape
    u = np.zeros(n + 1)
    v = np.zeros(m + 1)
    p = np.zeros(m + 1, dtype=np.int64)  # p[j]: row (1-based) assigned to column j
    way = np.zeros(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        p[0] = i
        j0 = 0
        minv = np.full(m + 1, np.inf)
        used = np.zeros(m + 1, dtype=bool)
        while True:
            used[j0] = True
            i0 = p[j0]
            free = ~used[1:]
            cur = a[i0 - 1] - u[i0] - v[1:]
            better = free & (cur < minv[1:])
            minv[1:][better] = cur[better]
            way[1:][better] = j0
            cand = np.where(free, minv[1:], np.inf)
            j1 = int(np.argmin(cand)) + 1
            delta = cand[j1 - 1]
            u[p[used]] += delta
            v[used] -= delta
            minv[~used] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    pairs = [(int(p[j]) - 1, j - 1) for j in range(1, m + 1) if p[j]]
    if transposed:
        pairs = [(b, a_) for a_, b in pairs]
    return sorted(pairs)


def hungarian_pairs(iou: np.ndarray) -> list[tuple[int, int, float]]:
    """Linear assignment on -IoU, keeping the pairs with IoU > 0 (option ``matching="hungarian"``)."""
    iou = np.asarray(iou, dtype=np.float64)
    return [(i, j, float(iou[i, j])) for i, j in linear_assignment(-iou) if iou[i, j] > 0]


def pair_masks(iou: np.ndarray, matching: str = "greedy") -> list[tuple[int, int, float]]:
    """The mask pairing of one image (prediction row, GT column, IoU)."""
    return hungarian_pairs(iou) if matching == "hungarian" else greedy_pairs(iou)


def recall_true_positives(iou_gp: np.ndarray, text_gp: np.ndarray, iou_threshold: float = 0.5, text_threshold: float = 0.5) -> int:
    """GLaMM's recall loop on one image (G x P matrices): take the global max IoU; if it is below the IoU
    threshold **or** its text similarity is below the text threshold, stop (lower pairs are never tried);
    otherwise count a TP and zero that row and column."""
    ious = np.array(iou_gp, dtype=np.float64)
    sims = np.array(text_gp, dtype=np.float64)
    tp = 0
    while ious.size > 0:
        i, j = np.unravel_index(int(np.argmax(ious)), ious.shape)
        if ious[i, j] < iou_threshold or sims[i, j] < text_threshold:
            break
        tp += 1
        ious[i, :] = 0
        ious[:, j] = 0
        sims[i, :] = 0
        sims[:, j] = 0
    return tp


def greedy_text_matches(cos: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """Greedy one-to-one matching on cosine: take the global max while it is >= threshold (row-major ties)."""
    m = np.array(cos, dtype=np.float64)
    out = []
    while m.size:
        i, j = np.unravel_index(int(np.argmax(m)), m.shape)
        if not m[i, j] >= threshold:
            break
        out.append((int(i), int(j), float(m[i, j])))
        m[i, :] = -np.inf
        m[:, j] = -np.inf
    return out
