"""Compiled kernels (numba, a dependency) for the hot loops: the COCO counts scan and the nearest-neighbour walk over
run ends (:func:`sample_runs`).

numba is imported on the first call of a kernel (:func:`_numba`, also the Syn4D and M4Seg kernels' import), not
with perckit: importing it and loading a cached kernel costs a fresh process about 0.5 to 1 s. Each kernel is
compiled with ``cache=True``: the first process compiles it (1 to 3 s per argument types) and writes the machine
code next to this file, in ``__pycache__`` (when that folder is read-only, numba writes it to the user's cache
folder, ``~/.cache/numba``, instead); later processes load it.

The counts scan (:func:`scan_counts`) is the one reader of the COCO counts grammar (the format is the
:mod:`perckit.rle` module header): one compiled loop over the strings ``data[offsets[i]:offsets[i + 1]]`` of a
column (an Arrow string column's buffers, or one string: the n = 1 case, :func:`scan_one`), which returns for
each string a status, the sum of its runs, its number of runs and, for a character outside the alphabet, its
offset; and fills the runs when asked. The callers build the messages from the status
(:func:`perckit.rle.counts_error`). When a string breaks several rules the status is the first of:

====== ===================================================================================================
status the string ...
====== ===================================================================================================
1      has a byte outside the alphabet ``'0'`` .. ``'o'`` (48 .. 111); ``offset`` is the first one
2      is truncated: its last character continues a number (bit 0x20)
3      has a number of more than 7 characters
4      has a number of 7 characters whose last is not ``'0'`` or ``'1'`` (pycocotools' 32-bit ``int`` misreads it)
5      decodes to a negative run
6      is empty
0      none of these: the runs are what pycocotools reads, ``total`` is their sum
====== ===================================================================================================
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

#: The statuses of :func:`scan_counts` (see the module docstring).
OK, ALPHABET, TRUNCATED, TOO_LONG, MISREAD, NEGATIVE, EMPTY = range(7)
#: The columns of :func:`scan_counts`' answer.
STATUS, TOTAL, RUNS, OFFSET = range(4)
#: The longest number the scan reads (pycocotools' ``rleFrString`` shifts in a 32-bit ``int``).
MAX_CHARS_PER_COUNT = 7

_NO_RUNS = np.zeros(0, dtype=np.int64)


@lru_cache(maxsize=1)
def _numba():
    """The numba module, imported on first use (a dependency: never None)."""
    import numba

    return numba


def _scan_counts(offsets, data, runs):
    """The compiled body of :func:`scan_counts` (plain Python over numpy arrays, compiled by :func:`_compiled`)."""
    n = offsets.shape[0] - 1
    out = np.zeros((n, 4), dtype=np.int64)
    fill = runs.shape[0] > 0
    for i in range(n):
        start = np.int64(offsets[i])
        end = np.int64(offsets[i + 1])
        p = start
        m = status = 0
        total = prev1 = prev2 = np.int64(0)  # prev1, prev2: runs[m - 1], runs[m - 2]
        too_long = misread = negative = False
        while p < end:
            x = np.int64(0)
            k = 0
            c = np.int64(0)
            more = True
            while more:
                if p >= end:
                    status = TRUNCATED
                    break
                c = np.int64(data[p]) - 48
                if c < 0 or c > 63:
                    status = ALPHABET
                    break
                x |= (c & 0x1F) << (5 * k)
                more = (c & 0x20) != 0
                p += 1
                k += 1
                if k == MAX_CHARS_PER_COUNT and more:
                    too_long = True  # (read on to the string's end: a bad byte or a truncation comes first)
                    if p >= end:  # the string's last character continues: a truncation
                        status = TRUNCATED
                    break
            if status != 0:
                break
            if too_long:
                continue
            if k == MAX_CHARS_PER_COUNT and c > 1:
                misread = True
            if c & 0x10:
                x -= np.int64(1) << (5 * k)
            if m > 2:
                x += prev2
            if x < 0:
                negative = True
            if fill:
                runs[start + m] = x
            total += x
            prev2 = prev1
            prev1 = x
            m += 1
        if status == 0:
            if too_long:
                status = TOO_LONG
            elif misread:
                status = MISREAD
            elif negative:
                status = NEGATIVE
            elif m == 0:
                status = EMPTY
        out[i, STATUS] = status
        out[i, TOTAL] = total
        out[i, RUNS] = m
        out[i, OFFSET] = p - start
    return out


@lru_cache(maxsize=None)
def _compiled(body):
    """A kernel's body compiled once per process (its machine code cached on disk)."""
    return _numba().njit(cache=True, nogil=True)(body)


def scan_counts(offsets: np.ndarray, data: np.ndarray, runs: np.ndarray = _NO_RUNS) -> np.ndarray:
    """Scan the COCO counts strings ``data[offsets[i]:offsets[i + 1]]``: an int64 array ``[n, 4]`` whose row i is
    (status, total, runs, offset) of string i (columns :data:`STATUS`, :data:`TOTAL`, :data:`RUNS`,
    :data:`OFFSET`; statuses in the module docstring). For status 0 and 5, ``runs`` is the number of runs and
    ``total`` their sum; for status 1, ``offset`` is the offset of the bad byte in the string (otherwise where
    the scan stopped).

    ``offsets``: n + 1 non-decreasing int32 or int64 values; ``data``: uint8 (an Arrow string or binary column's
    buffers, read without a copy). ``runs``: an int64 array as long as ``data`` to receive the runs of string i
    at ``runs[offsets[i]:offsets[i] + rows[i, RUNS]]`` (for status 0 and 5), or empty (the default) for none."""
    return _compiled(_scan_counts)(offsets, data, runs)


def _sample_runs(ends, h, rows, cols, out):
    """The compiled body of :func:`sample_runs`."""
    n = ends.shape[0]
    for j in range(cols.shape[0]):
        base = cols[j] * h
        k = 0
        for i in range(rows.shape[0]):
            pos = base + rows[i]
            if i == 0 or rows[i] < rows[i - 1]:  # a column's first sample (or a step back): search
                k = np.searchsorted(ends, pos, side="right")
            while k < n and ends[k] <= pos:
                k += 1
            out[j, i] = (k & 1) == 1


def sample_runs(ends: np.ndarray, h: int, rows: np.ndarray, cols: np.ndarray, out: np.ndarray) -> None:
    """Fill ``out[j, i]`` (bool, ``[len(cols), len(rows)]``) with pixel (``rows[i]``, ``cols[j]``) of the column-major
    mask of height ``h`` whose run ends (the cumulative sums of its runs) are ``ends``: foreground when an odd number
    of run ends lie at or before the pixel. One binary search per column, then a walk forward over the run ends while
    ``rows`` rise (int64 arrays)."""
    _compiled(_sample_runs)(ends, np.int64(h), rows, cols, out)


def scan_one(counts: bytes, runs: np.ndarray = _NO_RUNS) -> tuple[int, int, int, int]:
    """:func:`scan_counts` of one counts string (the n = 1 column): ``(status, total, runs, offset)``; ``runs``
    (as long as ``counts``, or empty) receives its runs from index 0."""
    row = _compiled(_scan_counts)(np.array([0, len(counts)], dtype=np.int64), np.frombuffer(counts, dtype=np.uint8), runs)[0]
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])
