"""The M4Seg Parquet record-batch path (``perckit.m4seg.parquet_tables``) against the reference row path
(``parquet_to_row`` + ``features.encode_example``, the builder's previous per-example behaviour), and the
column-wide counts scan (``perckit._kernels.scan_counts_column``) against the per-string one."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from perckit import _kernels
from perckit import rle


def _counts_cases() -> list[str]:
    rng = np.random.default_rng(0)
    out = ["", "0", "1", "a", "`", "PP", "oooooooo", "o1", "3:2", "5ooooo4", "2a1", "ab", "0" * 7]
    for _ in range(200):
        m = rng.random((int(rng.integers(1, 40)), int(rng.integers(1, 40)))) < rng.random()
        out.append(rle.encode(m)["counts"])
    for _ in range(200):
        out.append(bytes(rng.integers(40, 120, size=int(rng.integers(0, 12))).astype(np.uint8)).decode())
    return out


def test_counts_column_scan_equals_the_string_scan():
    cases = _counts_cases()
    for arr in (pa.array(cases), pa.array(cases).slice(7), pa.array([c.encode() for c in cases], pa.binary())):
        off = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
        data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)
        fast = _kernels.scan_counts_column()(off, data)
        slow = _kernels._scan_counts_column(off, data)  # the interpreted fallback: same function
        one = _kernels.scan_counts()
        for i, text in enumerate(arr.to_pylist()):
            raw = text if isinstance(text, bytes) else text.encode()
            if not raw:
                expected = (6, 0)
            elif one is None:
                expected = (int(slow[0][i]), int(slow[1][i]))
            else:
                status, total, _ = one(np.frombuffer(raw, dtype=np.uint8))
                expected = (int(status), int(total))
            assert (int(fast[0][i]), int(fast[1][i])) == expected == (int(slow[0][i]), int(slow[1][i])), text
        # a valid status means pycocotools' reading: the runs sum as rle.decode_counts says
        for i, text in enumerate(arr.to_pylist()):
            if fast[0][i] == 0:
                assert int(rle.decode_counts(text).sum()) == int(fast[1][i])
