"""The ``preview`` column of an export: one small picture per row, for the Hub's Dataset Viewer.

Each benchmark names in its descriptor (:attr:`perckit.hf.benchmark.Benchmark.preview`) a
``make_previewer(builder, config)`` returning a :class:`Previewer` (or None for a config without one). A previewer
turns a row in Arrow storage form (media as ``{bytes, path}`` dicts, masks as COCO RLE dicts) into encoded image
bytes; it reads only :attr:`Previewer.columns`, so a large column (Syn4D depth frames) is never converted.

The pictures follow one rule: at most :data:`MAX_SIDE` pixels on the long side; masks sampled straight from their
RLE runs onto the small canvas (:func:`small_mask`: no full-size decode), each charged to the row's pixel budget
(:func:`row_budget`: the canvas pixels of every mask drawn, :data:`perckit.rle.PIXEL_BUDGET` in all, so a row of
thousands of masks is an :class:`~perckit.errors.RLEError` naming the mask, not minutes of sampling); a light fill
plus an outline per mask, one Okabe–Ito colour per object. The format follows from what the picture is, which the
previewer knows, and each picture is encoded once (:func:`encode`): drawn over a photograph or a video frame, JPEG at
:data:`JPEG_QUALITY` (baseline, 4:2:0, no optimisation pass); drawn on a flat canvas (no image; a plot; the blank
picture), PNG at zlib level :data:`PNG_COMPRESS_LEVEL`. Neither carries a timestamp: the same row gives the same
bytes. A row with nothing to draw ("not provided" markers, null fields) gives the canvas alone; a previewer raises
only for a real error (an unreadable release file, a row past its budget), a perckit error naming it.

Work is not repeated (a 600-image RefCOCO-M ``expressions`` conversion has 2,880 rows, 1,169 distinct pictures and 600
images): a row equal to the row before on its previewer's :attr:`Previewer.same` columns (the expressions of one
RefCOCO-M sample) gets that row's bytes; the last canvas decoded is kept (:func:`canvas`), so consecutive rows over
one image (the samples of a RefCOCO-M image, the R4D-Bench queries of one frame) decode it once, a JPEG at a reduced
DCT scale where the preview is at most half its size; a mask is sampled from its runs by a compiled walk and painted
within its bounding box; OpenCV draws on one thread (:func:`perckit.draw.figures.one_opencv_thread`: its pool's
workers would spin between the small calls); :func:`add_preview` writes the preview column alone and joins it to the
rows. What is left is the pictures themselves: decoding each image (with its bilinear resize) and encoding each
distinct picture.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Callable, Sequence

import numpy as np
from PIL import Image

from ..errors import OptionError
from ..hf.descriptor import Benchmark
from ..rle import PixelBudget, resized_mask
from . import figures

#: The column :func:`add_preview` appends.
PREVIEW_COLUMN = "preview"
#: The long side of a preview, at most.
MAX_SIDE = 512
#: The JPEG quality of a picture drawn over a photograph or a video frame.
JPEG_QUALITY = 80
#: zlib level of the PNG (fast: a preview is written for every row of a 743k-row split)
PNG_COMPRESS_LEVEL = 1
#: Rows per ``ds.map`` batch and per Arrow record batch written (images: keep batches small).
BATCH_ROWS = 100

Colour = tuple[int, int, int]


@dataclass
class Previewer:
    """``draw(row) -> bytes`` with the row columns it reads (None: all); ``legend(row)``, what the colours of its picture
    mean as ``(label, colour)`` pairs (colour None: a note), printed beside a default config's preview in the demo report.
    ``same``: the columns the picture depends on (None: it may depend on any): a row equal to the row before on these
    gets the bytes drawn for that one."""

    draw: Callable[[Mapping[str, Any]], bytes]
    columns: Sequence[str] | None = None
    name: str = ""
    legend: Callable[[Mapping[str, Any]], Sequence[tuple[str, Colour | None]]] = lambda row: ()
    same: Sequence[str] | None = None
    _last: tuple = field(default=(None, b""), repr=False, compare=False)

    def __call__(self, row: Mapping[str, Any]) -> bytes:
        if self.same is None:
            return self.draw(row)
        key = [row.get(c) for c in self.same]
        if self._last[0] != key:
            self._last = (key, self.draw(row))
        return self._last[1]


# ---------------------------------------------------------------- drawing primitives


def fit_size(h: int, w: int, max_side: int = MAX_SIDE) -> tuple[int, int]:
    """``(h, w)`` scaled to at most ``max_side`` on the long side (small frames are enlarged to it, by an integer
    factor when that fits, so synthetic frames stay crisp); never below 1."""
    h, w = max(int(h), 1), max(int(w), 1)
    long = max(h, w)
    if long <= max_side:
        k = max(max_side // long, 1)
        return h * k, w * k
    s = max_side / long
    return max(int(round(h * s)), 1), max(int(round(w * s)), 1)


def is_rle(value: Any) -> bool:
    """True for a COCO RLE dict with a 2-int ``size`` of positive sides and a string ``counts`` (a "not provided"
    marker, an empty size or a null is not one)."""
    if not isinstance(value, Mapping):
        return False
    size, counts = value.get("size"), value.get("counts")
    return (isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(v, int) and v > 0 for v in size)
            and isinstance(counts, (str, bytes)) and len(counts) > 0)


def small_mask(mask: Mapping[str, Any], out_h: int, out_w: int, where: str = "mask") -> np.ndarray:
    """The RLE ``mask`` at ``out_h`` × ``out_w``, resized as PIL's ``Image.NEAREST`` resizes the picture beside it
    (pixel centres), read from its run lengths without decoding the full-size mask: :func:`perckit.rle.resized_mask`."""
    return resized_mask(mask, (out_h, out_w), "pil", where)


#: The last canvas :func:`canvas` decoded: ``[(image bytes, height, width), RGB array]``.
_last_canvas: list = [None, None]


def canvas(image: Any, out_h: int, out_w: int, where: str) -> np.ndarray | None:
    """:func:`perckit.draw.figures.open_canvas`; the same image bytes at the same size as the call before give that
    call's array without decoding again."""
    data = image.get("bytes") if isinstance(image, Mapping) else image
    key = (data, out_h, out_w) if isinstance(data, bytes) else None
    if key is None or _last_canvas[0] != key:
        arr = figures.open_canvas(image, out_h, out_w, where)
        if arr is not None:
            arr.setflags(write=False)  # shared by the rows over this image: drawn on copies only
        _last_canvas[:] = [key, arr]
    return _last_canvas[1]


def tile(canvas: Image.Image | np.ndarray | None, masks: Sequence[tuple[np.ndarray, Colour]], out_h: int, out_w: int,
         alpha: float = figures.FILL_ALPHA) -> np.ndarray:
    """An ``out_h`` × ``out_w`` RGB array: ``canvas`` (neutral grey when None) with every ``(small mask, colour)``
    filled and outlined (:func:`perckit.draw.figures.paint_masks`)."""
    base = np.full((out_h, out_w, 3), figures.NEUTRAL, dtype=np.uint8) if canvas is None else np.asarray(canvas, dtype=np.uint8)
    line = 2 if min(out_h, out_w) >= 128 else 1
    return figures.paint_masks(base, masks, alpha, line) if masks else base


def row_budget() -> Any:
    """The pixel budget of one row's preview (:class:`perckit.rle.PixelBudget`): each mask drawn costs its tile's
    pixels."""
    return PixelBudget(unit="preview row")


def masks_tile(image: Any, masks: Sequence[Any], size_hw: Sequence[int] | None, where: str,
               max_side: int = MAX_SIDE, colours: Sequence[Colour] | None = None, budget: Any = None) -> np.ndarray | None:
    """One tile: ``image`` (or a neutral canvas) at :func:`fit_size` of ``size_hw`` (else of the first mask's
    size) with every valid RLE of ``masks`` drawn in its object colour (skipped: nulls, markers, masks of
    another size). None when there is no size to draw at. Each mask drawn charges ``budget`` (the row's
    :func:`row_budget`, shared by its tiles; None: one of its own) with the tile's pixels before it is sampled."""
    valid = [(i, m) for i, m in enumerate(masks) if is_rle(m)]
    if size_hw is None or len(size_hw) != 2 or not all(isinstance(v, int) and v > 0 for v in size_hw):
        size_hw = valid[0][1]["size"] if valid else None
    if size_hw is None:  # the image alone, if any
        return canvas(image, max_side, max_side, where)
    h, w = int(size_hw[0]), int(size_hw[1])
    out_h, out_w = fit_size(h, w, max_side)
    base = canvas(image, out_h, out_w, where)
    budget = budget if budget is not None else row_budget()
    drawn = []
    for i, m in valid:
        if list(m["size"]) == [h, w]:
            budget.charge(out_h * out_w, f"{where}: mask {i}")
            drawn.append((small_mask(m, out_h, out_w, f"{where}: mask {i}"), colours[i % len(colours)] if colours else object_colour(i)))
    return tile(base, drawn, out_h, out_w)


#: The legend entry of a tile drawn without its image.
NO_IMAGE = ("no image in the row: a canvas of the image's size", figures.NEUTRAL)


def mask_legend(labels: Sequence[str], image: Any = True) -> list[tuple[str, Colour | None]]:
    """The legend of masks drawn in :func:`object_colour` order, ``labels[i]`` the i-th; :data:`NO_IMAGE` too when
    ``image`` is empty (the tiles are canvases)."""
    return [(label, object_colour(i)) for i, label in enumerate(labels)] + [NO_IMAGE] * (not image)


def blank(text: str, max_side: int = 256) -> bytes:
    """The preview of a row with nothing to draw: a neutral canvas with ``text``."""
    im = Image.new("RGB", (max_side, max_side // 2), figures.NEUTRAL)
    return encode(with_note(im, text), photo=False)


def object_colour(i: int) -> Colour:
    return figures.OBJECT_COLOURS[i % len(figures.OBJECT_COLOURS)]


def row_of_tiles(tiles: Sequence[np.ndarray], gap: int = 4, max_side: int = MAX_SIDE) -> Image.Image:
    """Tiles (RGB arrays) side by side on white, top-aligned (:func:`perckit.draw.figures.side_by_side`), shrunk to
    at most ``max_side`` wide."""
    im = figures.side_by_side([Image.fromarray(t) for t in tiles], gap)
    if im.width > max_side:
        im = figures.resized(im, max(int(round(im.height * max_side / im.width)), 1), max_side)
    return im


def encode(image: Image.Image, photo: bool) -> bytes:
    """The preview's bytes, encoded once: JPEG at :data:`JPEG_QUALITY` for a picture drawn over a photograph or a
    video frame (``photo``), else PNG (fixed compression, no metadata). Deterministic for the same picture."""
    buf = io.BytesIO()
    if photo:
        image = image if image.mode == "RGB" else image.convert("RGB")
        image.save(buf, format="JPEG", quality=JPEG_QUALITY, optimize=False, progressive=False, subsampling=2)
    else:
        image.save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buf.getvalue()


def encode_tile(t: np.ndarray | None, image: Any, nothing: str) -> bytes:
    """The preview of a :func:`masks_tile` tile over the row's ``image`` (:func:`encode`: JPEG when ``image`` has a
    picture, :func:`perckit.draw.figures.has_image`), or :func:`blank` saying ``nothing`` when there is no tile."""
    return blank(nothing) if t is None else encode(Image.fromarray(t), figures.has_image(image))


def with_note(image: Image.Image, text: str) -> Image.Image:
    """``image`` with a caption strip under it (for a row whose region is missing), still within :data:`MAX_SIDE`."""
    out = figures.side_by_side([image, figures.caption_strip(text, image.width)], 0, vertical=True)
    if out.height > MAX_SIDE:
        s = MAX_SIDE / out.height
        out = figures.resized(out, MAX_SIDE, max(int(out.width * s), 1))
    return out


# ---------------------------------------------------------------- the column


#: a split of at least this many rows draws its previews in several processes (M4Seg's 743k-row train split)
PARALLEL_ROWS = 20_000
#: at most this many processes draw previews
MAX_PROCESSES = 8


def preview_processes(num_rows: int, fn: Callable) -> int | None:
    """How many processes ``datasets.map`` draws the previews of a split with: one (None) below
    :data:`PARALLEL_ROWS` rows, else the machine's cores (at most :data:`MAX_PROCESSES`), when the drawing function
    can be sent to another process (a previewer holding an open file cannot: it then runs in this one)."""
    cores = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1), MAX_PROCESSES)
    if num_rows < PARALLEL_ROWS or cores < 2:
        return None
    try:  # datasets.map sends the function with the same dill-based pickler its fingerprint hashing uses
        from datasets.fingerprint import Hasher

        Hasher.hash(fn)
    except Exception:  # any pickling failure (dill raises many types): draw in this process
        return None
    return cores


def add_preview(ds: Any, benchmark: Benchmark, builder: Any, config: str) -> Any:
    """``ds`` with an ``Image()`` column :data:`PREVIEW_COLUMN` appended last (bytes, path null); every other column
    and its features unchanged. ``ds`` itself when the config has no previewer. Reads only the previewer's columns
    (in Arrow storage form: no media decoded by ``datasets``) and writes only the new column, joined to ``ds``
    (``concatenate_datasets(axis=1)``)."""
    import datasets
    import pyarrow as pa

    previewer = benchmark.preview(builder, config) if benchmark.preview is not None else None
    if previewer is None:
        return ds
    if PREVIEW_COLUMN in ds.column_names:
        raise OptionError(f"{benchmark}/{config}: the rows already have a column {PREVIEW_COLUMN!r}; a preview cannot be added")
    columns = [c for c in (previewer.columns or ds.column_names) if c in ds.column_names]
    features = datasets.Features({PREVIEW_COLUMN: datasets.Image()})
    preview_type = features.arrow_schema.field(PREVIEW_COLUMN).type

    def add(table: pa.Table) -> pa.Table:
        with figures.one_opencv_thread():  # in each worker process too
            cells = [{"bytes": previewer(r), "path": None} for r in table.to_pylist()]
        return pa.table({PREVIEW_COLUMN: pa.array(cells, type=preview_type)})

    from datasets.fingerprint import Hasher

    fingerprint = Hasher.hash([ds._fingerprint, benchmark, config, str(getattr(builder, "config_id", "")), PREVIEW_COLUMN, MAX_SIDE,
                               JPEG_QUALITY, PNG_COMPRESS_LEVEL, "format by picture"])
    column = ds.select_columns(columns).with_format("arrow").map(
        add, batched=True, batch_size=BATCH_ROWS, writer_batch_size=BATCH_ROWS, remove_columns=columns, features=features,
        new_fingerprint=fingerprint, desc=f"preview {config}", num_proc=preview_processes(ds.num_rows, add))
    out = datasets.concatenate_datasets([ds, column], axis=1)
    fmt = ds.format
    return out.with_format(fmt["type"], columns=fmt["columns"], output_all_columns=fmt["output_all_columns"], **fmt["format_kwargs"])
