"""The compiled (numba) kernels of the model-free edit-quality metrics: the SSIM pass of :mod:`.pixel` and the formula
it shares with their torch path; the target region's luma threshold of :mod:`.decode`.

:mod:`.pixel` imports this module on first use (numba is slow to import); the kernel compiles on its first call
(``cache=True``: later processes, the ``num_proc`` workers too, load them from disk). Exactness: every window sum is an
int64, the formula float64 on those integers (every product below 2^53), no ``fastmath``; ``error_model="numpy"``
only drops the zero-division checks (the denominator is never 0), which lets LLVM vectorise the row loops.
"""

from __future__ import annotations

import numba
import numpy as np

jit = numba.njit(cache=True, nogil=True, error_model="numpy")


def ssim_value(sx, sy, sxx, syy, sxy, n, c1, c2):
    """scikit-image's SSIM ``(2 u_x u_y + C1)(2 v_xy + C2) / ((u_x² + u_y² + C1)(v_x + v_y + C2))`` (sample covariance)
    of one window from its sums over ``n`` pixels (``S_x``, ``S_y``, ``S_xx``, ``S_yy``, ``S_xy``), multiplied through
    by ``n² · n (n - 1)``: ``c1 = C1 n²``, ``c2 = C2 n (n - 1)``. Compiled here on int64 sums, called by the torch path
    on float64 tensors holding the same integers: the same operations in the same order."""
    mxy = sx * sy
    m2 = sx * sx + sy * sy
    return (2.0 * mxy + c1) * (2.0 * (n * sxy - mxy) + c2) / ((m2 + c1) * ((n * (sxx + syy) - m2) + c2))


_ssim_value = jit(ssim_value)


@jit
def _add_row(cs, a, b, sign):
    """``cs[:, q] += sign * (x, y, x², y², xy)`` of the row values ``x = a[q]``, ``y = b[q]``."""
    for q in range(a.shape[0]):
        x = np.int64(a[q])
        y = np.int64(b[q])
        cs[0, q] += sign * x
        cs[1, q] += sign * y
        cs[2, q] += sign * x * x
        cs[3, q] += sign * y * y
        cs[4, q] += sign * x * y


@jit
def ssim_sums(a, b, sel, win, c1, c2, out):
    """``out[0]`` = the sum of the SSIM map of ``a`` against ``b`` over every interior pixel and channel,
    ``out[1]`` = over the interior pixels where ``sel`` (bool ``(H - win + 1, W - win + 1)``).
    ``a``, ``b``: uint8 ``(H, 3 W)`` (RGB rows). One pass down the rows: the column sums of ``x``, ``y``, ``x²``,
    ``y²``, ``xy`` over the last ``win`` rows, then their prefix sums along the row, then the formula."""
    h, k = a.shape
    n = win * win
    wo = k // 3 - win + 1
    o = 3 * win
    cs = np.zeros((5, k), np.int64)
    ps = np.zeros((5, k + 3), np.int64)
    row = np.empty(3 * wo, np.float64)
    for i in range(h):
        _add_row(cs, a[i], b[i], 1)
        if i >= win:
            _add_row(cs, a[i - win], b[i - win], -1)
        if i < win - 1:
            continue
        for t in range(5):
            for q in range(k):
                ps[t, q + 3] = ps[t, q] + cs[t, q]
        for q in range(3 * wo):
            row[q] = _ssim_value(ps[0, q + o] - ps[0, q], ps[1, q + o] - ps[1, q], ps[2, q + o] - ps[2, q],
                                 ps[3, q + o] - ps[3, q], ps[4, q + o] - ps[4, q], n, c1, c2)
        r = i - win + 1
        total = chosen = 0.0
        for j in range(wo):
            m = row[3 * j] + row[3 * j + 1] + row[3 * j + 2]
            total += m
            if sel[r, j]:
                chosen += m
        out[0] += total
        out[1] += chosen


@jit
def luma_above(rgb, level):
    """``299 R + 587 G + 114 B >= level`` for each row of uint8 ``(N, 3)``: bool ``(N,)``, in exact integers."""
    out = np.empty(rgb.shape[0], np.bool_)
    for i in range(rgb.shape[0]):
        out[i] = 299 * np.int64(rgb[i, 0]) + 587 * np.int64(rgb[i, 1]) + 114 * np.int64(rgb[i, 2]) >= level
    return out
