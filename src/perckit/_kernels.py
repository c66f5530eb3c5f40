"""Compiled kernels (numba, which librosa already brings) for the hot loops, with pure-numpy fallbacks.

Each kernel is compiled lazily on first use and cached on disk; when numba is not importable the
callers use their numpy path, so results never depend on it being present.
"""

from __future__ import annotations

import sys
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


#: Masks a process checks with its numpy paths before :func:`compiled_scan_pays` says loading numba pays.
NUMPY_FIRST = 64
_numpy_checks = 0


def compiled_scan_pays(n: int = 1) -> bool:
    """Whether to check the next ``n`` masks with a compiled counts scan: yes when numba is already imported or
    when these masks take the process past its first :data:`NUMPY_FIRST`; otherwise no, and they are counted
    (the caller uses its numpy path, which gives the same verdicts). Importing numba and loading a cached
    kernel costs about 0.4 s in a fresh process, a numpy check about 15 us: a process that checks a handful
    of masks (a command-line call, the first rows a builder reads to check a release before its ``num_proc``
    workers start) never loads it, and one that checks thousands pays the numpy path at most 64 times."""
    global _numpy_checks
    if "numba" in sys.modules or _numpy_checks + n > NUMPY_FIRST:
        return True
    _numpy_checks += n
    return False


def scan_counts_for_one():
    """:func:`scan_counts` for a caller that checks one mask at a time, once :func:`compiled_scan_pays`; None
    before (the caller uses its numpy path)."""
    return scan_counts() if compiled_scan_pays() else None


def _scan_counts_column(offsets, data):
    """Per counts string ``data[offsets[i]:offsets[i + 1]]``: ``(status int8, total int64)`` arrays.

    The statuses are those of :func:`scan_counts` (0 valid, 1 alphabet, 2 truncated, 3 too long, 4 a 7th
    character pycocotools misreads, 5 negative run, 6 empty); ``total`` is the sum of the runs read so far.
    Plain Python over numpy arrays: compiled by :func:`scan_counts_column`, interpreted as its fallback.
    """
    n = offsets.shape[0] - 1
    status = np.zeros(n, dtype=np.int8)
    totals = np.zeros(n, dtype=np.int64)
    for i in range(n):
        p = np.int64(offsets[i])
        end = np.int64(offsets[i + 1])
        m = 0
        total = np.int64(0)
        prev1 = np.int64(0)
        prev2 = np.int64(0)
        st = 0
        while p < end and st == 0:
            x = np.int64(0)
            k = 0
            more = True
            c = np.int64(0)
            while more:
                if p >= end:
                    st = 2
                    break
                c = np.int64(data[p]) - 48
                if c < 0 or c > 63:
                    st = 1
                    break
                x |= (c & 0x1F) << (5 * k)
                more = (c & 0x20) != 0
                p += 1
                k += 1
                if k > 7:
                    st = 3
                    break
            if st != 0:
                break
            if k == 7 and c > 1:
                st = 4
                break
            if c & 0x10:
                x -= np.int64(1) << (5 * k)
            if m > 2:
                x += prev2
            if x < 0:
                st = 5
                break
            total += x
            prev2 = prev1
            prev1 = x
            m += 1
        if st == 0 and m == 0:
            st = 6
        status[i] = st
        totals[i] = total
    return status, totals


@lru_cache(maxsize=1)
def scan_counts_column():
    """``scan(offsets, data) -> (status, total)`` over a whole column of COCO counts strings.

    ``offsets`` (int32 or int64, n + 1 values) and ``data`` (uint8) are an Arrow string or binary column's
    buffers, read without a copy. Compiled with numba when it is importable; otherwise the same function
    interpreted (correct, slow: callers with a faster reference path may prefer it then, see
    :func:`have_numba`). A status other than 0 means: re-check that mask with the precise path.
    """
    numba = _numba()
    if numba is None:
        return _scan_counts_column
    return numba.njit(cache=True, nogil=True)(_scan_counts_column)


def have_numba() -> bool:
    """True when the kernels are compiled (numba importable)."""
    return _numba() is not None
