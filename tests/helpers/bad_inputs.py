"""The bad-input matrix's toolkit (tests/test_benchmarks_bad_inputs.py, tests/test_m4seg_bad_inputs.py and the trust
tests): the strict ``expect``, release edits (functions of the release root that break one file), and the
hostile values every parser is fed (NaN, a 2**40-pixel RLE, deep and huge JSON, bytes that are not UTF-8)."""

from __future__ import annotations

import io
import json
import shutil
import struct
import zlib
from pathlib import Path
from typing import Callable

import numpy as np
from helpers.harness import documented_error
from helpers.harness import expect as harness_expect
from PIL import Image

NAN = float("nan")
HUGE_RLE = {"size": [1 << 20, 1 << 20], "counts": "0"}  # 2**40 pixels: a decoded mask would need a terabyte
DEEP_JSON = "[" * 100_000
HUGE_INT_JSON = '{"n": 1' + "0" * 5000 + "}"
NOT_UTF8 = b"\xff\xfe\x00\x00not text at all \xc3\x28"

Edit = Callable[[Path], None]


def far_apart_polygon(h: int, w: int, vertices: int = 20_000, seed: int = 28) -> list[float]:
    """Issue 28's polygon attack: a flat polygon of ``vertices`` vertices jumping across the H x W image (x
    alternately just inside -W and 2W, y anywhere in [-H, 2H]). Every vertex is within the bounds perckit took
    before, but the outline is about ``vertices`` x 3W pixels, which pycocotools' rleFrPoly upsamples by 5 and
    mallocs unchecked: 20,000 vertices (about 460 KB of JSON for a 480 x 640 image) killed the interpreter."""
    rng = np.random.default_rng(seed)
    xs = np.where(np.arange(vertices) % 2 == 0, -w + 0.876543, 2 * w - 0.345679)
    ys = np.round(rng.uniform(-h + 1, 2 * h - 1, vertices), 4)
    return np.column_stack([xs, ys]).ravel().tolist()


def expect(fn, error: type, *patterns: str) -> BaseException:
    """``fn()`` raises (possibly wrapped by datasets) ``error`` whose message matches every pattern: the error
    itself or the cause of datasets' DatasetGenerationError, nothing else (:func:`helpers.harness.documented_error`)."""
    return harness_expect(fn, error, *patterns, find=documented_error)


def copy_release(src: Path, tmp_path: Path) -> Path:
    """A private copy of the release ``src`` (``tmp_path/release``) for a test to break."""
    root = tmp_path / "release"
    shutil.copytree(src, root)
    return root


def truncate(rel: str, frac: float = 0.5) -> Edit:
    """Edit: keep the first ``frac`` of the file ``rel``."""
    def edit(root: Path) -> None:
        p = root / rel
        data = p.read_bytes()
        p.write_bytes(data[: int(len(data) * frac)])
    return edit


def put(rel: str, data: bytes | str) -> Edit:
    """Edit: write ``data`` to ``rel`` (creating its folder)."""
    def edit(root: Path) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    return edit


def unlink(rel: str) -> Edit:
    """Edit: delete the file ``rel``."""
    return lambda root: (root / rel).unlink()


def edit_json(rel: str, fn) -> Edit:
    """Edit: load the JSON file ``rel``, let ``fn`` change it in place, write it back (NaN as the literal NaN)."""
    def edit(root: Path) -> None:
        p = root / rel
        data = json.loads(p.read_text(encoding="utf-8"))
        fn(data)  # edits in place
        p.write_text(json.dumps(data), encoding="utf-8")  # NaN is written as the literal NaN
    return edit


def chain(*edits: Edit) -> Edit:
    """Edit: apply ``edits`` in order (not :func:`helpers.harness.chain`, the exception walker)."""
    def edit(root: Path) -> None:
        for e in edits:
            e(root)
    return edit


def png_bytes(arr: np.ndarray) -> bytes:
    """``arr`` as an 8-bit PNG file."""
    buf = io.BytesIO()
    Image.fromarray(np.asarray(arr, dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A valid 4x4 PNG whose IHDR declares ``width`` x ``height`` (a decompression bomb header)."""
    b = bytearray(png_bytes(np.zeros((4, 4))))
    b[16:24] = struct.pack(">II", width, height)
    b[29:33] = struct.pack(">I", zlib.crc32(bytes(b[12:29])))
    return bytes(b)


def link_out(path: Path, outside: Path) -> Path:
    """Move the release file ``path`` to ``outside`` and leave a symbolic link to it in its place (a file or a folder) (a link that
    leaves the release root); returns ``path``."""
    shutil.move(str(path), outside)
    path.symlink_to(outside, target_is_directory=outside.is_dir())
    return path
