"""Reference readers of the COCO counts grammar, in plain Python and numpy.

``fr_string`` is pycocotools' ``rleFrString`` copied line by line (Python ints: no 32-bit wrap). ``scan`` is what
``perckit.rle.decode_counts`` and ``validate`` computed before issue 29 made the compiled scan
(``perckit.core.counts.scan_counts``) the one reader: the rules decided one after the other over the whole string,
vectorised, giving the same (status, total, runs, offset) the compiled scan must give. Small inputs only.
"""

from __future__ import annotations

import numpy as np

# The statuses of perckit.core.counts (its module docstring), written out here so that the oracle does not read them
# from the code it checks.
OK, ALPHABET, TRUNCATED, TOO_LONG, MISREAD, NEGATIVE, EMPTY = range(7)


def fr_string(s: str) -> list[int]:
    """pycocotools' rleFrString of an alphabet string whose numbers all end (Python ints, no uint wrap)."""
    cnts: list[int] = []
    p = 0
    while p < len(s):
        x, k, more = 0, 0, 1
        while more:
            c = ord(s[p]) - 48
            x |= (c & 0x1F) << (5 * k)
            more = c & 0x20
            p += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(cnts) > 2:
            x += cnts[-2]
        cnts.append(x)
    return cnts


def scan(counts: bytes) -> tuple[int, int, list[int], int]:
    """``(status, total, runs, offset)`` of one counts string: the first rule it breaks, in the order alphabet (and
    ``offset``, the first byte outside '0'..'o'), truncation (the last character continues), a number of more
    than 7 characters, a 7-character number whose last character is not '0' or '1', a negative run, empty; 0
    when none. ``runs`` and ``total`` (their sum) are given for status 0 and 5 (else ``[]`` and 0), ``offset``
    for status 1 (else 0)."""
    if len(counts) == 0:
        return EMPTY, 0, [], 0
    c = np.frombuffer(bytes(counts), dtype=np.uint8).astype(np.int64) - 48
    bad = np.flatnonzero((c < 0) | (c > 63))
    if bad.size:
        return ALPHABET, 0, [], int(bad[0])
    more = (c & 0x20) != 0
    if more[-1]:
        return TRUNCATED, 0, [], 0
    ends = np.flatnonzero(~more)
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if lengths.max() > 7:
        return TOO_LONG, 0, [], 0
    if ((lengths == 7) & (c[ends] > 1)).any():
        return MISREAD, 0, [], 0
    pos = np.arange(c.size) - np.repeat(starts, lengths)
    vals = np.add.reduceat((c & 0x1F) << (5 * pos), starts)
    sign = (c[ends] & 0x10) != 0
    vals = np.where(sign, vals - (np.int64(1) << (5 * lengths)), vals)
    if vals.size > 3:  # cnts[i] += cnts[i-2] for i > 2: two interleaved cumulative sums
        vals = vals.copy()
        vals[1::2] = vals[1::2].cumsum()
        vals[2::2] = vals[2::2].cumsum()
    runs = vals.tolist()
    return (NEGATIVE if min(runs) < 0 else OK), sum(runs), runs, 0
