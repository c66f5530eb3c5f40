"""Compiled kernels (numba, which librosa already brings) for the hot loops, with pure-numpy fallbacks.

Each kernel is compiled lazily on first use and cached on disk; when numba is not importable the
callers use their numpy path, so results never depend on it being present.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=1)
def _numba():
    try:
        import numba
    except Exception:  # not installed, or broken on this platform: use the numpy paths
        return None
    return numba


@lru_cache(maxsize=1)
def scan_counts():
    """A compiled ``scan(buf) -> (status, total, runs)`` over a COCO counts string (uint8), or None.

    status 0 means valid as far as pycocotools is concerned (alphabet, no truncation, at most 7
    characters per run with a 7th of '0' or '1', no negative run); ``total`` is the sum of the runs.
    Any other status: the caller re-checks with the numpy path, which raises the precise error.
    """
    numba = _numba()
    if numba is None:
        return None

    @numba.njit(cache=True, nogil=True)
    def scan(buf):
        n = buf.shape[0]
        p = 0
        m = 0
        total = 0
        prev1 = 0  # runs[m-1]
        prev2 = 0  # runs[m-2]
        while p < n:
            x = 0
            k = 0
            more = True
            c = 0
            while more:
                if p >= n:
                    return 2, total, m  # truncated
                c = np.int64(buf[p]) - 48
                if c < 0 or c > 63:
                    return 1, total, m  # outside the alphabet
                x |= (c & 0x1F) << (5 * k)
                more = (c & 0x20) != 0
                p += 1
                k += 1
                if k > 7:
                    return 3, total, m  # too long
            if k == 7 and c > 1:
                return 4, total, m  # pycocotools would misread it
            if c & 0x10:
                x -= np.int64(1) << (5 * k)
            if m > 2:
                x += prev2
            if x < 0:
                return 5, total, m  # negative run
            total += x
            prev2 = prev1
            prev1 = x
            m += 1
        if m == 0:
            return 6, total, m  # empty
        return 0, total, m

    return scan
