"""Compiled (numba) kernels of the Syn4D depth and tracking metrics: the one implementation of the
per-pixel / per-sample passes of :func:`perckit.syn4d.metric.depth_metrics` and
:func:`perckit.syn4d.metric.tracking_metrics` (numba is a dependency).

:mod:`perckit.syn4d.metric` imports this module on first use (so importing the metrics does not import numba); the
kernels compile on their first call (``cache=True``: later processes load the machine code from disk). They are
module-level functions, not closures, so that a kernel calling another one still hits the cache. The tests compare
them with the straightforward numpy formulas (``tests/oracles/syn4d.py``): tracking bit for bit; depth differs only
in the order of the float sums (fixed, so every result is deterministic run to run; ~1e-16 relative).

Exactness rules the kernels follow (no ``fastmath``, so LLVM neither reassociates nor contracts into
FMAs; ``error_model="numpy"`` only drops the Python zero-division checks, which is what lets LLVM
vectorise the elementwise loops):

* every per-element value (validity, clipping, ``|d|/g``, ``d²/g``, ``d²``, ``max(g/p, p/g)``, the
  tracking distances) is computed with the same float64 operations as numpy, so threshold decisions
  (``delta*``, ``acc_*``) are bit-identical;
* medians are exact, by radix select on the bit patterns (non-negative floats order like their bits):
  two 16-bit levels on the float32 depths, 12-bit digits on the float64 tracking norms; even counts
  average the two middle values in float64, as ``np.median``;
* the logarithms of the depth metric stay numpy's (called on in-cache blocks), so ``log p' - log g'``
  is the official value element for element.
"""

from __future__ import annotations

import math

import numba
import numpy as np

#: Pixels per pass-3 block: five float64 block buffers of this length stay in the L2 cache.
DEPTH_BLOCK = 1 << 15
_HALF = 1 << 16  # radix select: 16 high bits, then 16 low bits

jit = numba.njit(cache=True, nogil=True, error_model="numpy")


@jit
def histogram_high(g, p, lo, hi, hist_g, hist_p):
    """Valid-pixel count; ``hist_*[bits >> 16] += 1`` over the valid pixels."""
    gb = g.view(np.uint32)
    pb = p.view(np.uint32)
    n = 0
    for i in range(g.size):
        gv = np.float64(g[i])
        pv = np.float64(p[i])
        if (gv > lo) & (gv <= hi) & (pv > 0.0) & (pv < np.inf):
            n += 1
            hist_g[gb[i] >> 16] += 1
            hist_p[pb[i] >> 16] += 1
    return n


@jit
def histogram_low(g, p, lo, hi, bins_g, bins_p, low_g, low_p):
    """``low_*[j, bits & 0xFFFF] += 1`` over the valid pixels whose high 16 bits are ``bins_*[j]``
    (row 1 only when ``bins_*[1]`` differs from ``bins_*[0]``). The bin test comes first: it is rare."""
    gb = g.view(np.uint32)
    pb = p.view(np.uint32)
    g0, g1 = np.uint32(bins_g[0]), np.uint32(bins_g[1])
    p0, p1 = np.uint32(bins_p[0]), np.uint32(bins_p[1])
    mask = np.uint32(0xFFFF)
    s16 = np.uint32(16)
    for i in range(g.size):
        x = gb[i]
        y = pb[i]
        a = x >> s16
        b = y >> s16
        if (a == g0) | (a == g1) | (b == p0) | (b == p1):
            gv = np.float64(g[i])
            pv = np.float64(p[i])
            if (gv > lo) & (gv <= hi) & (pv > 0.0) & (pv < np.inf):
                if a == g0:
                    low_g[0, x & mask] += 1
                elif a == g1:
                    low_g[1, x & mask] += 1
                if b == p0:
                    low_p[0, y & mask] += 1
                elif b == p1:
                    low_p[1, y & mask] += 1


@jit
def block_terms(g, p, start, lo, hi, scale, shift, gbuf, pbuf, t_abs, t_sqrel, t_sq):
    """Pixels ``start .. start+len(gbuf)`` (clamped): clipped ``g'``, ``p'`` (1.0 where invalid) into
    ``gbuf``/``pbuf``, the per-pixel ``|d|/g'``, ``d²/g'``, ``d²`` (0 where invalid) into ``t_*``.

    Returns (pixels written, valid pixels, then the counts of ``max(g'/p', p'/g') < 1.25**k``). Branch-free, so LLVM
    vectorises it. ``max(g/p, p/g)`` is computed as ``max(g,p)/min(g,p)``: for positive g, p the larger quotient is
    the one at least 1, so the rounded values are the same."""
    m = min(gbuf.size, g.size - start)
    n_valid = 0
    c1 = 0
    c2 = 0
    c3 = 0
    for j in range(m):
        gv = np.float64(g[start + j])
        pv = np.float64(p[start + j])
        valid = (gv > lo) & (gv <= hi) & (pv > 0.0) & (pv < np.inf)
        gg = min(max(gv, lo), hi)
        pp = min(max(scale * pv + shift, lo), hi)
        gg = gg if valid else 1.0
        pp = pp if valid else 1.0
        d = pp - gg
        sq = d * d
        gbuf[j] = gg
        pbuf[j] = pp
        t_abs[j] = abs(d) / gg
        t_sqrel[j] = sq / gg
        t_sq[j] = sq
        r = max(gg, pp) / min(gg, pp)
        n_valid += valid
        c1 += valid & (r < 1.25)
        c2 += valid & (r < 1.5625)
        c3 += valid & (r < 1.953125)
    return m, n_valid, c1, c2, c3


@jit
def select_bits(work, m, rank):
    """The ``rank``-th smallest (0-based) of ``work[:m]`` (uint64, overwritten): MSD radix select on
    12-bit digits below the highest bit where the candidates differ; histogram and compaction loops
    are branch-free, unlike a quickselect's data-dependent branches (the cost on fresh data)."""
    hist = np.empty(4096, dtype=np.int64)
    while True:
        low = work[0]
        high = work[0]
        for i in range(1, m):
            x = work[i]
            low = min(low, x)
            high = max(high, x)
        if low == high:
            return low
        diff = low ^ high
        top = 0
        while top < 63 and diff >> np.uint64(top + 1):
            top += 1
        shift = np.uint64(max(top - 11, 0))
        base = low >> shift
        hist[:] = 0
        for i in range(m):
            hist[np.int64((work[i] >> shift) - base)] += 1
        b = 0
        while rank >= hist[b]:
            rank -= hist[b]
            b += 1
        target = base + np.uint64(b)
        kept = 0
        for i in range(m):
            x = work[i]
            work[kept] = x
            kept += (x >> shift) == target
        m = kept


@jit
def median_nonnegative(values):
    """``np.median(values)`` for float64 values >= 0 (+0.0, no NaN), whose bit patterns order like them."""
    n = values.size
    if n == 0:
        return np.nan
    k = n // 2
    bits = np.empty(1, dtype=np.uint64)
    bits[0] = select_bits(values.copy().view(np.uint64), n, k)
    upper = bits.view(np.float64)[0]
    if n % 2:
        return upper
    below = 0  # values < upper; when there are k of them, the (k-1)-th is their maximum
    lower = -1.0
    for i in range(n):
        x = values[i]
        lt = x < upper
        below += lt
        lower = max(lower, x) if lt else lower
    if below < k:
        lower = upper
    return (lower + upper) / 2


@jit
def tracking(gt, pred, valid, dynamic, thresholds, counts):
    """gt/pred float64 [T,Q,3] (C order), valid bool [T,Q], dynamic bool [Q], thresholds float64 [K].

    Fills ``counts[0, k]`` / ``counts[1, k]`` with the number of scored (resp. scored dynamic) samples at distance
    <= thresholds[k]; returns (scale, distances of the scored samples, those of the scored dynamic samples), in (t,
    q) order like numpy's boolean indexing, so that the caller's ``np.add.reduce`` gives ``np.mean``'s sums. The
    scored samples are compacted once; norms and distances are numpy's ``sqrt(x*x + y*y + z*z)`` (same operations,
    same order)."""
    n_t, n_q = valid.shape
    size = n_t * n_q
    g = gt.reshape(size, 3)
    p = pred.reshape(size, 3)
    v = valid.reshape(size)
    coords = np.empty((6, size))
    dyn = np.empty(size, dtype=np.bool_)
    m = 0
    for i in range(size):
        gx, gy, gz = g[i, 0], g[i, 1], g[i, 2]
        px, py, pz = p[i, 0], p[i, 1], p[i, 2]
        # branch-free compaction: always write slot m (m <= i), keep it when the sample is scored
        coords[0, m] = gx
        coords[1, m] = gy
        coords[2, m] = gz
        coords[3, m] = px
        coords[4, m] = py
        coords[5, m] = pz
        dyn[m] = dynamic[i % n_q]
        m += (v[i] & np.isfinite(gx) & np.isfinite(gy) & np.isfinite(gz)
              & np.isfinite(px) & np.isfinite(py) & np.isfinite(pz))
    if m == 0:
        return 0.0, np.empty(0), np.empty(0)
    norm_g = np.empty(m)
    dist = np.empty(m)  # the prediction norms first, then the distances
    for j in range(m):
        gx, gy, gz = coords[0, j], coords[1, j], coords[2, j]
        px, py, pz = coords[3, j], coords[4, j], coords[5, j]
        norm_g[j] = np.sqrt(gx * gx + gy * gy + gz * gz)
        dist[j] = np.sqrt(px * px + py * py + pz * pz)
    pred_median = median_nonnegative(dist)
    scale = median_nonnegative(norm_g) / pred_median if pred_median > 1e-12 else 0.0
    for j in range(m):
        dx = coords[0, j] - scale * coords[3, j]
        dy = coords[1, j] - scale * coords[4, j]
        dz = coords[2, j] - scale * coords[5, j]
        dist[j] = np.sqrt(dx * dx + dy * dy + dz * dz)
    dist_dyn = np.empty(m)  # the dynamic samples' distances, in order (branch-free compaction)
    m_dyn = 0
    for j in range(m):
        dist_dyn[m_dyn] = dist[j]
        m_dyn += dyn[j]
    for k in range(thresholds.size):
        limit = thresholds[k]
        c_all = 0
        c_dyn = 0
        for j in range(m):
            below = dist[j] <= limit
            c_all += below
            c_dyn += below & dyn[j]
        counts[0, k] = c_all
        counts[1, k] = c_dyn
    return scale, dist, dist_dyn[:m_dyn]


def _rank_bins(hist: np.ndarray, ranks: tuple[int, int]) -> tuple[list[int], list[int]]:
    """For each rank (0-based, among the histogrammed values): its bin, and its rank inside that bin."""
    cum = np.cumsum(hist)
    bins = [int(np.searchsorted(cum, r, side="right")) for r in ranks]
    inside = [r - int(cum[b] - hist[b]) for r, b in zip(ranks, bins)]
    return bins, inside


def _radix_median(low: np.ndarray, bins: list[int], inside: list[int], odd: bool) -> float:
    """The median from the high bins and the low histograms (row 0: ``bins[0]``, row 1: ``bins[1]`` if it
    differs), as ``np.median`` of the float64 values: the middle value, or the float64 mean of the two."""
    values = []
    for b, r in zip(bins, inside):
        row = low[0] if b == bins[0] else low[1]
        bits = (b << 16) | int(np.searchsorted(np.cumsum(row), r, side="right"))
        values.append(np.float64(np.array([bits], dtype=np.uint32).view(np.float32)[0]))
    return float(values[1]) if odd else float((values[0] + values[1]) / 2.0)


def depth_medians(g: np.ndarray, p: np.ndarray, lo: float, hi: float) -> tuple[int, float, float]:
    """``(valid pixels, median g, median p)`` over the valid pixels of flat float32 ``g``/``p``, exactly.

    Valid values are positive (``lo >= 0`` is the caller's condition), so their float32 bit patterns sort like the
    values: pass 1 histograms the high 16 bits, pass 2 the low 16 bits of the values in the bins holding the middle
    ranks. Two sequential passes, no copy of the values, no sort."""
    hist_g, hist_p = np.zeros(_HALF, np.int64), np.zeros(_HALF, np.int64)
    n = int(histogram_high(g, p, lo, hi, hist_g, hist_p))
    if n == 0:
        return 0, float("nan"), float("nan")
    odd = bool(n % 2)
    ranks = (n // 2, n // 2) if odd else (n // 2 - 1, n // 2)
    bins_g, in_g = _rank_bins(hist_g, ranks)
    bins_p, in_p = _rank_bins(hist_p, ranks)
    low_g, low_p = np.zeros((2, _HALF), np.int64), np.zeros((2, _HALF), np.int64)
    histogram_low(g, p, lo, hi, np.asarray(bins_g, np.int64), np.asarray(bins_p, np.int64), low_g, low_p)
    return n, _radix_median(low_g, bins_g, in_g, odd), _radix_median(low_p, bins_p, in_p, odd)


def depth_sums(g: np.ndarray, p: np.ndarray, lo: float, hi: float, scale: float,
               shift: float) -> tuple[int, list[float], list[int]]:
    """``(valid pixels, [Σ|d|/g', Σd²/g', Σd², Σℓ², Σℓ], [#ratio < 1.25**k for k = 1, 2, 3])``.

    Per block of :data:`DEPTH_BLOCK` pixels: the compiled kernel writes ``g'``, ``p'`` and the three ratio terms;
    numpy takes the logarithms (``ℓ = log p' − log g'``, 0 for invalid pixels, whose ``g' = p' = 1``) and the
    pairwise block sums, which ``math.fsum`` adds up."""
    size = g.size
    block = min(DEPTH_BLOCK, max(size, 1))
    gbuf, pbuf, t_abs, t_sqrel, t_sq = (np.empty(block) for _ in range(5))
    partials: list[list[float]] = [[], [], [], [], []]
    below = [0, 0, 0]
    n = 0
    for start in range(0, size, block):
        m, valid, *counts = block_terms(g, p, start, lo, hi, scale, shift, gbuf, pbuf, t_abs, t_sqrel, t_sq)
        n += valid
        below = [b + c for b, c in zip(below, counts)]
        if m < block:
            gbuf, pbuf, t_abs, t_sqrel, t_sq = gbuf[:m], pbuf[:m], t_abs[:m], t_sqrel[:m], t_sq[:m]
        log_p = np.log(pbuf, out=pbuf)
        np.subtract(log_p, np.log(gbuf, out=gbuf), out=log_p)
        partials[4].append(float(np.add.reduce(log_p)))  # before log_p is squared in place for partials[3]
        for total, terms in zip(partials, (t_abs, t_sqrel, t_sq, np.multiply(log_p, log_p, out=log_p))):
            total.append(float(np.add.reduce(terms)))
    # The block sums are pairwise (numpy); adding them exactly rounded keeps the total as accurate as one
    # pairwise sum over all pixels, and independent of the block order.
    return int(n), [math.fsum(values) for values in partials], [int(c) for c in below]
