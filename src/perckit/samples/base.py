"""What every sample-release writer shares: :func:`write_release` (the writer a benchmark's descriptor
names), the :class:`ReleaseWriter` that records every file it writes, the mask shapes, and the media
encoders (JPEG, PNG, H.264 mp4) more than one benchmark's release needs.

A writer is deterministic for a seed: listings are sorted and all randomness comes from the one seeded
``numpy.random.Generator`` of its :class:`ReleaseWriter`."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Sequence

import numpy as np
from PIL import Image

from .. import rle as rle_ops
from ..io.paths import atomic_file, write_atomic


@dataclass
class SampleRelease:
    """What a writer's ``write_release`` wrote: the root, every file (``files``, release-relative) and, in the
    benchmark's subclass, the content facts tests check."""

    root: Path
    files: list[str] = field(default_factory=list, kw_only=True)


class ReleaseWriter:
    """Writes files under a release root and remembers what it wrote."""

    def __init__(self, root: str | Path, seed: int = 0) -> None:
        self.root = Path(root)
        self.rng = np.random.default_rng(seed)
        self.files: list[str] = []

    def path(self, rel: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        self.files.append(rel)
        return p

    @contextmanager
    def open(self, rel: str) -> Iterator[BinaryIO]:
        """A binary file that becomes ``rel`` when the block ends (:func:`perckit.io.paths.atomic_file`)."""
        with atomic_file(self.path(rel)) as f:
            yield f

    def json(self, rel: str, obj: Any, indent: int | None = 2) -> Path:
        return write_atomic(self.path(rel), json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")

    def text(self, rel: str, text: str) -> Path:
        return write_atomic(self.path(rel), text)

    def bytes(self, rel: str, data: bytes) -> Path:
        return write_atomic(self.path(rel), data)

    def csv(self, rel: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
        return self.text(rel, buf.getvalue())

    def png(self, rel: str, array: np.ndarray) -> Path:
        """A mask (bool -> 0/255 grayscale) or an image array as PNG."""
        arr = np.asarray(array)
        return self.bytes(rel, png_bytes(arr.astype(np.uint8) * 255 if arr.dtype == bool else arr))

    def jpeg(self, rel: str, array: np.ndarray, quality: int = 85) -> Path:
        return self.bytes(rel, jpeg_bytes(array, quality))


def png_bytes(array: np.ndarray) -> bytes:
    """An image array (H, W) or (H, W, 3) of uint8 as PNG bytes."""
    buf = io.BytesIO()
    Image.fromarray(np.asarray(array, dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def jpeg_bytes(array: np.ndarray, quality: int = 85) -> bytes:
    """An image array (H, W, 3) of uint8 as JPEG bytes of ``quality``."""
    buf = io.BytesIO()
    Image.fromarray(np.asarray(array, dtype=np.uint8)).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def x264_options(lossless: bool = False, preset: str | None = None) -> dict[str, str]:
    """The libx264 options of :func:`encode_mp4`: ``mbtree`` off always (x264's AVX-512 MB-tree code reads past the
    end of an allocation, so with MB-tree on a clip's bytes depend on the process's heap: a 64x96 clip gave 2 to 4
    encodes in 100 of other bytes; ``qp=0`` turns MB-tree off anyway), ``qp=0`` with ``lossless``, ``preset``."""
    return {"mbtree": "0", **({"qp": "0"} if lossless else {}), **({"preset": preset} if preset else {})}


def encode_mp4(frames: np.ndarray, fps: int = 25, audio: np.ndarray | None = None, sample_rate: int = 16000,
               lossless: bool = False, preset: str | None = None, rgb: bool = False) -> bytes:
    """An H.264 (yuv420p) mp4 of ``frames`` (T, H, W, 3 uint8), with a mono AAC track of ``audio`` (floats in
    [-1, 1] at ``sample_rate``) when given; ``lossless``: x264 ``qp=0``; ``preset``: an x264 preset; ``rgb``:
    libx264rgb in RGB (no chroma subsampling: with ``lossless`` the very same pixels decode back)."""
    import av

    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4") as container:
        vs = container.add_stream("libx264rgb" if rgb else "libx264", rate=fps)
        vs.height, vs.width = frames.shape[1:3]
        vs.pix_fmt = "rgb24" if rgb else "yuv420p"
        vs.thread_count = 1  # x264's threads give other bytes when the machine is busy: one thread, the same bytes
        vs.options = x264_options(lossless, preset)
        astream = None
        if audio is not None:
            astream = container.add_stream("aac", rate=sample_rate)
            astream.layout = "mono"
        for f in frames:
            for packet in vs.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")):
                container.mux(packet)
        for packet in vs.encode():
            container.mux(packet)
        if astream is not None:
            x = np.asarray(audio, dtype=np.float32)[None, :]
            for i in range(0, x.shape[1], 1024):  # chunks of 1024 samples, each stamped with its first sample
                frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(x[:, i : i + 1024]), format="fltp", layout="mono")
                frame.sample_rate = sample_rate
                frame.pts = i
                frame.time_base = Fraction(1, sample_rate)
                for packet in astream.encode(frame):
                    container.mux(packet)
            for packet in astream.encode():
                container.mux(packet)
    return buf.getvalue()


def rect_mask(height: int, width: int, box: Sequence[int]) -> np.ndarray:
    """Boolean mask of the pixel-aligned box ``[x0, y0, x1, y1)``."""
    x0, y0, x1, y1 = box
    m = np.zeros((height, width), dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


def ellipse_mask(height: int, width: int, box: Sequence[int]) -> np.ndarray:
    """Boolean mask of the ellipse inscribed in ``[x0, y0, x1, y1)``."""
    x0, y0, x1, y1 = box
    cy, cx = (y0 + y1 - 1) / 2, (x0 + x1 - 1) / 2
    ry, rx = max((y1 - y0) / 2, 0.5), max((x1 - x0) / 2, 0.5)
    yy, xx = np.mgrid[0:height, 0:width]
    return ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0


def rect_polygon(box: Sequence[int]) -> list[float]:
    """The COCO polygon of a pixel-aligned box; pycocotools rasterises it to exactly ``m[y0:y1, x0:x1]``."""
    x0, y0, x1, y1 = box
    return [float(v) for v in (x0, y0, x1, y0, x1, y1, x0, y1)]


def uncompressed_rle(rle: dict) -> dict:
    """A compressed COCO RLE as uncompressed RLE (``counts`` a list of run lengths, background first)."""
    return {"size": list(rle["size"]), "counts": [int(c) for c in rle_ops.decode_counts(rle["counts"])]}
