"""COCO RLE helpers on pycocotools.

Format: a mask travels through perckit as a compressed COCO RLE ``{"size": [H, W], "counts": str}``. The H x W
pixels are read column by column (Fortran order: pixel (y, x) is number ``x * H + y``) and cut into runs that
alternate background, foreground, background, ..., the first run background (0 when pixel 0 is foreground);
the runs sum to H * W. Everything here works in the RLE domain; dense arrays appear only in :func:`encode`,
:func:`decode`, :func:`encode_masks` and :func:`sample_nearest`.

Counts grammar (pycocotools' ``rleToString`` writes it, ``rleFrString`` reads it): the runs r_0, r_1, ... become
numbers v_i = r_i, except v_i = r_i - r_(i-2) from the fourth run on (i > 2). Each number is written in
two's complement, 5 bits at a time, least significant group first, each group as one character ``chr(48 +
c)``: bit 0x20 of c says another group follows, and bit 0x10 of the last group is the sign (a negative number's
high bits are ones). So the alphabet is ``'0'`` .. ``'o'`` (48 .. 111), and a number ends at the first
character below ``'P'``. perckit reads it with one compiled scan (:func:`perckit.core.counts.scan_counts`, for one
string or a column of them) and refuses, in this order, with an :class:`RLEError` naming the field:

- a character outside the alphabet (the message gives its offset);
- a truncated string (its last character continues a number);
- a number of more than 7 characters;
- a number of 7 characters whose last is not ``'0'`` or ``'1'``: ``rleFrString`` shifts in a 32-bit ``int`` and
  would read another value than the one written, and ``iou`` / ``merge`` would then loop on runs that no
  longer sum to H*W;
- a negative run, and (in :func:`validate`) runs that do not sum to H*W: pycocotools' ``merge`` and ``iou``
  loop forever on them;
- an empty string.

pycocotools also returns an empty mask, silently, when merging masks of different sizes: every RLE from outside
goes through :func:`validate` (or :func:`valid_many` for many at once) before it reaches pycocotools, and
:func:`check_same_size` before any merge.

IoU: the pixel counts of a mask pair are exact integers, I = ``area(merge([a, b], intersect=True))`` and U =
``area(a) + area(b) - I`` (never pycocotools' ``iou()``, which gives 0 for two empty masks); IoU = I / U, with
no epsilon. Empty union: when U = 0 (both masks empty) the IoU is the option ``empty_union_iou`` (1.0 by
default). These rules live here and nowhere else: :func:`rle_pair_counts` (I, U and the two areas of a validated
pair) and :func:`pair_iou` (the empty-union rule); :mod:`perckit.core.segmentation` builds every metric's pair scores,
count matrices and means on them.

Polygons: pycocotools' ``rleFrPoly`` upsamples every vertex by 5 into C ``int``s and ``malloc``s, unchecked,
about 20 bytes per point of the upsampled outline (the sum over the edges of ``max(|dx|, |dy|) + 1``), so a
polygon with far-apart vertices kills the interpreter. Every polygon reaches pycocotools through
:func:`polygon_unions`, the one caller of ``frPyObjects`` with polygons, and its guard :func:`check_polygons`
refuses, naming the field, before pycocotools sees anything:

- a polygon of fewer than 3 vertices or an odd number of coordinates, a coordinate that is not a finite number;
- a vertex outside x in [-W, 2W], y in [-H, 2H], or farther than :data:`MAX_POLYGON_COORD` (2^27) from 0
  (``5 * x`` and the edge lengths stay inside a 32-bit ``int`` whatever the image size);
- more than :data:`MAX_POLYGON_VERTICES` (2^18) vertices in the polygons of one mask;
- polygons of one mask whose outline (the sum over their edges, closing ones included, of ``max(|dx|, |dy|)``,
  what pycocotools allocates for, over 5) is longer than :func:`polygon_outline_limit`: 64 x (H + W) (32 image
  perimeters), at least 2^16 and at most 2^20 pixels. At that cap ``frPyObjects`` grows the peak RSS by about
  55 MiB in 0.1 to 0.25 s per mask, and runs under a 400 MiB address-space limit (a 16384 x 16384 and a
  1 x 2^30 image, 2^18 vertices).

Resizing: :func:`resize_nearest` offers two named nearest-neighbour rules (:data:`RESIZE_RULES`), each equal to
its library on every (source length, target length) pair up to 512 (``tests/test_core_resize_rules.py`` checks
them against the libraries themselves):

- ``"pil"``: PIL's ``Image.resize(..., Image.NEAREST)``. Target pixel i reads the source pixel under its centre,
  ``(i + 0.5) * src / dst``, as Pillow's affine scaling computes it: a position starting at ``a / 2`` and growing by
  ``a = src / dst`` per pixel in float64, truncated. ReferGaussian's evaluator (so R4D-Bench's) resizes this way;
  so do the previews.
- ``"opencv"``: OpenCV's ``cv2.resize(..., interpolation=cv2.INTER_NEAREST)``: ``floor(i * (1 / (dst / src)))`` in
  float64 (the scale OpenCV's ``resizeNN`` inverts), at most ``src - 1``.

The integer rule ``i * src // dst`` equals neither library (it differs from OpenCV on 14,209 and from PIL on
258,663 of the 262,144 length pairs up to 512). :func:`sample_nearest` is the one sampler under both rules: it
reads a mask at a grid of source rows and columns from its run ends (a compiled walk, a binary search per target
column), never decoding the full-size mask: O(target pixels) memory and O(target pixels + columns x log(runs) +
runs) time.

Pixel budget: one :class:`PixelBudget` per answer, prediction row, batch or picture is charged with the pixels
of every mask decoded or resized for it, before the work: :data:`PIXEL_BUDGET` (2^30: a GiB of decoded masks)
pixels in all unless the caller passes ``max_pixels``. Its users: ``perckit.torch.collate`` / ``masks_transform``
(per batch) and ``decode_masks`` (per call), summed from the declared sizes before anything is decoded;
:func:`perckit.core.segmentation.fit_prediction` (the resize targets of one prediction row, so of one lmms-eval
answer); the previews (each mask's tile) and ``perckit.draw.figures.mask_overlay`` (its canvas). The charge that
would pass it raises the caller's error type (:class:`RLEError` or :class:`~perckit.errors.PredictionError`)
naming the field, the running total and the budget. Legitimate rows stay far inside it (an R4D-Bench query with
a mask on each of 300 frames of 536 x 960: 0.14 of it); a batch of eight such rows (1.2 G pixels) passes
``max_pixels``.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from pycocotools import mask as _mask

from .core import counts as _kernels
from .errors import OptionError, RLEError
from .errors import short_repr as _short

RLE = dict  # {"size": [H, W], "counts": str}

#: Largest mask (H * W pixels) accepted from outside. A decoded mask of this
#: size takes 1 GiB; anything larger is almost certainly a corrupt header.
MAX_PIXELS = 1 << 30
#: pycocotools' area() of a list overflows a uint8 index past 255 items.
_AREA_CHUNK = 255

#: Most vertices in the polygons of one mask (so in one polygon too). A COCO polygon has tens to hundreds.
MAX_POLYGON_VERTICES = 1 << 18
#: The outline of one mask's polygons may be this many times (H + W) long (a convex polygon inside the image: at
#: most 2 x (H + W)) ...
POLYGON_OUTLINE_FACTOR = 64
#: ... but at least this long whatever the image (small images) ...
MIN_POLYGON_OUTLINE = 1 << 16
#: ... and at most this long (pycocotools allocates up to 100 bytes per pixel of outline: 20 per upsampled point).
MAX_POLYGON_OUTLINE = 1 << 20
#: Largest |x| or |y| of a polygon vertex: pycocotools computes ``(int)(5 * x + .5)`` and vertex differences in
#: 32-bit ``int`` (10 x 2^27 < 2^31).
MAX_POLYGON_COORD = 1 << 27

#: The default pixel budget of one answer, prediction row, batch or picture (:class:`PixelBudget`): the pixels
#: of all the masks decoded or resized for it, decoded as 1 byte each.
PIXEL_BUDGET = 1 << 30


def _check_size(size: Any, where: str) -> tuple[int, int]:
    if not isinstance(size, (list, tuple)) or len(size) != 2 or not all(
            not isinstance(v, bool) and isinstance(v, (int, np.integer)) and v > 0 for v in size):
        raise RLEError(f"{where}: expected 'size' = [H, W] (two positive ints), got {size!r}")
    h, w = int(size[0]), int(size[1])
    if h * w > MAX_PIXELS:
        raise RLEError(f"{where}: size {h}x{w} = {h * w} pixels exceeds the limit of {MAX_PIXELS} "
                       "(a decoded mask would need gigabytes)")
    return h, w


def mask_pixels(mask: Mapping[str, Any], where: str = "mask") -> int:
    """H * W of a mask's declared ``size`` (checked as :func:`validate` checks it, nothing else read): what a
    :class:`PixelBudget` is charged with before the mask is decoded."""
    size = mask.get("size") if isinstance(mask, Mapping) else None
    h, w = _check_size(size.tolist() if isinstance(size, np.ndarray) else size, where)
    return h * w


def _counts_bytes(counts: Any, where: str) -> bytes:
    """The counts string as ASCII bytes; :class:`RLEError` naming ``where`` for another type or a non-ASCII str."""
    if isinstance(counts, str):
        try:
            return counts.encode("ascii")
        except UnicodeEncodeError:
            raise RLEError(f"{where}: 'counts' must be ASCII, got non-ASCII characters") from None
    if isinstance(counts, (bytes, bytearray)):
        return bytes(counts)
    raise RLEError(f"{where}: 'counts' must be a str or bytes, got {type(counts).__name__}")


def counts_error(status: int, offset: int, where: str) -> RLEError:
    """The :class:`RLEError` of a counts string the scan (:func:`perckit.core.counts.scan_counts`) gave ``status``
    (not 0) and ``offset``, naming ``where``."""
    k = _kernels
    message = {
        k.ALPHABET: f"'counts' has a character outside the COCO alphabet ('0'..'o') at offset {offset}",
        k.TRUNCATED: "'counts' is truncated (its last character continues a number)",
        k.TOO_LONG: f"'counts' has a run encoded in more than {k.MAX_CHARS_PER_COUNT} characters",
        k.MISREAD: f"'counts' has a {k.MAX_CHARS_PER_COUNT}-character run that pycocotools would misread (value out of 32-bit range)",
        k.NEGATIVE: "'counts' decodes to a negative run length",
        k.EMPTY: "'counts' is empty",
    }[status]
    return RLEError(f"{where}: {message}")


def decode_counts(counts: bytes | str, where: str = "mask") -> np.ndarray:
    """The run lengths (int64) a compressed COCO counts string encodes, as pycocotools' ``rleFrString`` reads them
    (the grammar of the module docstring), by the compiled counts scan. A run may be negative (:func:`validate`
    refuses it); any other break of the grammar is an :class:`RLEError` naming ``where``."""
    raw = _counts_bytes(counts, where)
    runs = np.empty(len(raw), dtype=np.int64)
    status, _, n, offset = _kernels.scan_one(raw, runs)
    if status not in (_kernels.OK, _kernels.NEGATIVE):
        raise counts_error(status, offset, where)
    return runs[:n]


def validate(rle: Any, where: str = "mask", expected_size: Sequence[int] | None = None) -> RLE:
    """Check a compressed RLE and return it as ``{"size": [H, W], "counts": str}``.

    Raises :class:`RLEError` naming ``where`` when the size is not two positive
    ints, the counts are not valid COCO characters, a run is negative, or the
    runs do not sum to H*W (pycocotools would loop forever on it), or when the
    size differs from ``expected_size``. The counts are read by one call of the compiled counts scan.
    """
    if not isinstance(rle, Mapping) or "size" not in rle or "counts" not in rle:
        raise RLEError(f"{where}: expected a COCO RLE dict with 'size' and 'counts', got {_short(rle)}")
    h, w = _check_size(rle["size"], where)
    counts = rle["counts"]
    if isinstance(counts, (list, tuple, np.ndarray)):
        raise RLEError(
            f"{where}: expected compressed counts (str), got an uncompressed list (convert it with perckit.rle.to_rle)"
        )
    status, total, _, offset = _kernels.scan_one(_counts_bytes(counts, where))
    if status != _kernels.OK:
        raise counts_error(status, offset, where)
    if total != h * w:
        raise RLEError(f"{where}: 'counts' runs sum to {total} pixels, expected H*W = {h}*{w} = {h * w}")
    return _finish(counts, h, w, expected_size, where)


def valid_many(rles: Sequence[Any]) -> list[bool]:
    """For each item: True when it is a ``dict`` with ``str`` counts that :func:`validate` accepts (a ``size``
    of two positive ints within :data:`MAX_PIXELS`, counts that scan clean and sum to H*W), decided for all
    of them by one call of the compiled counts scan (:func:`perckit.core.counts.scan_counts`).

    False says only "not decided here" (bytes counts, a tuple size, ...): the caller validates that one with
    :func:`validate`, which gives the verdict and the error."""
    if not rles:
        return []
    expected = np.full(len(rles), -1, dtype=np.int64)
    counts: list[str] = []
    for i, r in enumerate(rles):
        c = r.get("counts") if type(r) is dict else None
        if type(c) is not str or not c.isascii():
            counts.append("")  # scans as empty: left to validate
            continue
        counts.append(c)
        sz = r.get("size")
        if type(sz) is list and len(sz) == 2 and type(sz[0]) is int and type(sz[1]) is int and sz[0] > 0 and sz[1] > 0:
            if sz[0] * sz[1] <= MAX_PIXELS:
                expected[i] = sz[0] * sz[1]
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in counts], out=offsets[1:])
    rows = _kernels.scan_counts(offsets, np.frombuffer("".join(counts).encode("ascii"), dtype=np.uint8))
    return ((rows[:, _kernels.STATUS] == _kernels.OK) & (rows[:, _kernels.TOTAL] == expected)).tolist()


def _finish(counts: str | bytes, h: int, w: int, expected_size: Sequence[int] | None, where: str) -> RLE:
    if expected_size is not None and [h, w] != [int(expected_size[0]), int(expected_size[1])]:
        raise RLEError(f"{where}: expected size {list(expected_size)}, got {[h, w]}")
    if isinstance(counts, (bytes, bytearray)):
        counts = bytes(counts).decode("ascii")
    return {"size": [h, w], "counts": counts}


def _to_c(rle: RLE) -> dict:
    """The pycocotools form (bytes counts) of an already-validated RLE."""
    counts = rle["counts"]
    return {"size": [int(rle["size"][0]), int(rle["size"][1])], "counts": counts.encode("ascii") if isinstance(counts, str) else counts}


def _from_c(rle: Mapping) -> RLE:
    counts = rle["counts"]
    return {"size": [int(rle["size"][0]), int(rle["size"][1])], "counts": counts.decode("ascii") if isinstance(counts, bytes) else counts}


def encode(mask: np.ndarray, where: str = "mask") -> RLE:
    """Encode a 2-D binary mask (any dtype; nonzero = foreground)."""
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise RLEError(f"{where}: expected a 2-D array (H, W), got shape {mask.shape}")
    if mask.shape[0] == 0 or mask.shape[1] == 0:
        raise RLEError(f"{where}: expected a non-empty array, got shape {mask.shape}")
    if mask.shape[0] * mask.shape[1] > MAX_PIXELS:
        raise RLEError(f"{where}: a {mask.shape[0]}x{mask.shape[1]} mask exceeds the limit of {MAX_PIXELS} pixels")
    return _from_c(_mask.encode(np.asfortranarray(mask != 0, dtype=np.uint8)))


def decode(rle: RLE) -> np.ndarray:
    """Decode a validated RLE to a boolean (H, W) array (Fortran-ordered, as pycocotools writes it).

    pycocotools returns uint8 0 / 1, viewed as bool here rather than copied. Whoever decodes data from outside
    charges a :class:`PixelBudget` with its H * W first."""
    with warnings.catch_warnings():
        # pycocotools 2.0.x + numpy 2: "__array__ implementation doesn't accept a copy keyword"
        warnings.simplefilter("ignore", DeprecationWarning)
        return _mask.decode(_to_c(rle)).view(bool)


def empty(height: int, width: int) -> RLE:
    """The all-background mask of the given size."""
    h, w = _check_size([height, width], "empty mask")
    return _from_c(_mask.frPyObjects({"counts": [h * w], "size": [h, w]}, h, w))


def from_uncompressed(rle: Mapping, where: str = "mask") -> RLE:
    """Uncompressed COCO RLE (``counts`` a list of ints) to compressed RLE."""
    h, w = _check_size(rle.get("size"), where)
    counts = rle.get("counts")
    # One C-level pass over the element types (bool is a subclass of int: refused by exact type).
    if isinstance(counts, np.ndarray):
        ok = counts.dtype.kind in "iu"
    else:
        ok = isinstance(counts, (list, tuple)) and all(t is int or (t is not np.bool_ and issubclass(t, np.integer)) for t in set(map(type, counts)))
    if not ok:
        raise RLEError(f"{where}: uncompressed 'counts' must be a list of ints, got {_short(counts)}")
    try:
        runs = np.asarray(counts, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise RLEError(f"{where}: uncompressed 'counts' must be a list of ints, got {_short(counts)}") from None
    if runs.ndim != 1 or runs.size == 0:
        raise RLEError(f"{where}: uncompressed 'counts' must be a non-empty list of ints, got {_short(counts)}")
    if runs.min() < 0:
        raise RLEError(f"{where}: uncompressed 'counts' has a negative run")
    if int(runs.sum()) != h * w:
        raise RLEError(f"{where}: uncompressed 'counts' sum to {int(runs.sum())}, expected H*W = {h * w}")
    # pycocotools reads the counts as uint32: every run is non-negative and at most H*W <= MAX_PIXELS here.
    return _from_c(_mask.frPyObjects({"counts": runs.astype(np.uint32), "size": [h, w]}, h, w))


def polygon_outline_limit(h: int, w: int) -> int:
    """The longest outline (in pixels, see :func:`check_polygons`) the polygons of one H x W mask may have:
    :data:`POLYGON_OUTLINE_FACTOR` x (H + W), at least :data:`MIN_POLYGON_OUTLINE`, at most :data:`MAX_POLYGON_OUTLINE`."""
    return min(max(POLYGON_OUTLINE_FACTOR * (int(h) + int(w)), MIN_POLYGON_OUTLINE), MAX_POLYGON_OUTLINE)


def _polygon_coords(flat: Sequence[Any]) -> tuple[list[np.ndarray], int | None]:
    """Each polygon as a flat float64 array, as ``np.asarray(poly, dtype=np.float64).ravel()`` makes it, and the
    index of the first polygon that does not convert (None when all do). Polygons that are all lists are
    converted in one pass over their chained values (the same values: lists of numbers, the common case)."""
    if all(type(p) is list for p in flat):
        lens = list(map(len, flat))
        try:
            coords = np.fromiter(itertools.chain.from_iterable(flat), np.float64, count=sum(lens))
        except (TypeError, ValueError, OverflowError):
            pass  # a value that does not convert: found polygon by polygon below
        else:
            return np.split(coords, np.cumsum(lens)[:-1].tolist()) if len(flat) > 1 else [coords], None
    out: list[np.ndarray] = []
    for i, poly in enumerate(flat):
        try:
            out.append(np.asarray(poly, dtype=np.float64).ravel())
        except (TypeError, ValueError, OverflowError):
            return out, i
    return out, None


def _coordinate_bounds(h: int, w: int) -> tuple[int, int, int, int]:
    """(lo_x, hi_x, lo_y, hi_y): a vertex within one image size of the image and within 2^27 of 0."""
    return -min(w, MAX_POLYGON_COORD), min(2 * w, MAX_POLYGON_COORD), -min(h, MAX_POLYGON_COORD), min(2 * h, MAX_POLYGON_COORD)


def check_polygons(groups: Sequence[Sequence[Any]], h: int, w: int, where: str = "polygons") -> list[np.ndarray]:
    """The polygon guard: every polygon of ``groups`` (each group the polygons of one H x W mask, at least one)
    as a flat float64 array ``[x0, y0, x1, y1, ...]``, in order, once each passes the rules of the module
    docstring; else :class:`RLEError` naming ``where`` (``where: polygon i``; with several groups ``where: mask g:
    polygon i``), what was expected and what was found.

    Called by :func:`polygon_unions` before pycocotools sees a polygon (so by :func:`from_polygons` and every
    builder's polygon path). All the polygons of a call are converted in one pass and checked by
    :func:`_polygon_refusal`, which reports the first polygon that breaks a rule, its rules checked in this order:
    it converts to numbers, has an even number (>= 6) of coordinates, at most :data:`MAX_POLYGON_VERTICES`
    vertices, finite coordinates, vertices within the bounds; then each mask: its vertex count, its outline."""
    h, w = int(h), int(w)
    sizes = [len(g) for g in groups]
    if 0 in sizes:
        g = sizes.index(0)
        raise RLEError(f"{where}: mask {g}: expected at least one polygon, got none" if len(groups) > 1 else
                       f"{where}: expected at least one polygon, got none")
    flat = [p for g in groups for p in g]
    if not flat:
        return []
    arrays, unconverted = _polygon_coords(flat)
    _polygon_refusal(arrays, unconverted, flat, sizes, h, w, where)
    return arrays


def _polygon_refusal(arrays: list[np.ndarray], unconverted: int | None, flat: list, sizes: list[int], h: int, w: int,
                     where: str) -> None:
    """Raise the :class:`RLEError` of the first polygon, then the first mask, that breaks a rule of
    :func:`check_polygons` (``arrays``: the polygons converted before ``unconverted``, the first that did not);
    return when every rule holds.

    Each rule is decided once over all the polygons by whole-array operations (the common case: a few
    microseconds), and polygon by polygon (or mask by mask) only when it fails, to name the first culprit: every
    vertex finite and inside the bounds holds exactly when the smallest and largest x and y do; a mask's outline
    is at most its vertex count times the longest side of the polygons' bounding box (no edge is longer), summed
    edge by edge only when that bound passes the limit."""
    several = len(sizes) > 1

    def name(i: int) -> str:
        if not several:
            return f"{where}: polygon {i}"
        g = int(np.searchsorted(np.cumsum(sizes), i, side="right"))
        return f"{where}: mask {g}: polygon {i - sum(sizes[:g])}"

    def mask_name(g: int) -> str:
        return f"{where}: mask {g}" if several else where

    lens = np.fromiter(map(len, arrays), np.int64, count=len(arrays))
    bad_size = np.flatnonzero((lens < 6) | (lens % 2 == 1))
    # Polygons before the first one that does not convert or has a bad size are aligned (x, y) pairs: check them.
    stop = min([len(arrays)] + ([unconverted] if unconverted is not None else []) + bad_size[:1].tolist())
    lo_x, hi_x, lo_y, hi_y = _coordinate_bounds(h, w)
    if stop:
        coords = np.concatenate(arrays[:stop]) if stop > 1 else arrays[0]
        nv = lens[:stop] // 2
        xs, ys = coords[0::2], coords[1::2]
        low_x, high_x, low_y, high_y = xs.min(), xs.max(), ys.min(), ys.max()
        fits = low_x >= lo_x and low_y >= lo_y and high_x <= hi_x and high_y <= hi_y  # NaN fails here too
        starts = np.zeros(stop, dtype=np.int64)  # each polygon's first vertex
        np.cumsum(nv[:-1], out=starts[1:])
        if not fits or int(nv.max()) > MAX_POLYGON_VERTICES:
            finite = np.logical_and.reduceat(np.isfinite(xs) & np.isfinite(ys), starts)
            with np.errstate(invalid="ignore"):
                min_x, max_x = np.minimum.reduceat(xs, starts), np.maximum.reduceat(xs, starts)
                min_y, max_y = np.minimum.reduceat(ys, starts), np.maximum.reduceat(ys, starts)
            inside = (min_x >= lo_x) & (max_x <= hi_x) & (min_y >= lo_y) & (max_y <= hi_y)
            i = int(np.flatnonzero((nv > MAX_POLYGON_VERTICES) | ~finite | ~inside)[0])
            if nv[i] > MAX_POLYGON_VERTICES:
                raise RLEError(f"{name(i)}: expected at most {MAX_POLYGON_VERTICES} vertices, got {int(nv[i])}")
            if not finite[i]:
                raise RLEError(f"{name(i)} has a NaN or infinite coordinate")
            # pycocotools rasterises the outline point by point (memory grows with the perimeter) in 32-bit ints:
            # only vertices within one image size of the image, and of bounded magnitude, are taken.
            raise RLEError(
                f"{name(i)} has a vertex far outside the {h}x{w} image: expected x in [{lo_x}, {hi_x}] "
                f"and y in [{lo_y}, {hi_y}], got x in [{min_x[i]:.12g}, {max_x[i]:.12g}], y in [{min_y[i]:.12g}, {max_y[i]:.12g}]"
            )
    if bad_size.size:  # (before any polygon that does not convert: those are not in arrays)
        i = int(bad_size[0])
        raise RLEError(f"{name(i)} needs an even number (>= 6) of coordinates, got {int(lens[i])}")
    if unconverted is not None:
        raise RLEError(f"{name(unconverted)} is not a list of numbers: {_short(flat[unconverted])}")
    # Each mask: its vertex count, then its outline, the sum over every edge (closing ones too) of max(|dx|, |dy|).
    group_starts = np.zeros(len(sizes), dtype=np.int64)  # each mask's first polygon
    np.cumsum(sizes[:-1], out=group_starts[1:])
    vertices = np.add.reduceat(nv, group_starts)
    over = np.flatnonzero(vertices > MAX_POLYGON_VERTICES)
    if over.size:
        g = int(over[0])
        raise RLEError(f"{mask_name(g)}: expected at most {MAX_POLYGON_VERTICES} polygon vertices per mask, got {int(vertices[g])}")
    limit = polygon_outline_limit(h, w)
    if int(vertices.max()) * max(high_x - low_x, high_y - low_y) <= limit:
        return
    nxt = np.arange(1, xs.size + 1)
    nxt[starts[1:] - 1] = starts[:-1]
    nxt[-1] = starts[-1]
    edges = np.maximum(np.abs(xs[nxt] - xs), np.abs(ys[nxt] - ys))
    outline = np.add.reduceat(np.add.reduceat(edges, starts), group_starts)
    over = np.flatnonzero(outline > limit)
    if over.size:
        g = int(over[0])
        raise RLEError(
            f"{mask_name(g)}: expected polygons whose outline (the sum over the edges of max(|dx|, |dy|)) is at most "
            f"{limit} pixels long for a {h}x{w} image ({POLYGON_OUTLINE_FACTOR} x (H + W), at least {MIN_POLYGON_OUTLINE}, "
            f"at most {MAX_POLYGON_OUTLINE}: pycocotools allocates memory in proportion to it), got {math.ceil(outline[g])}"
        )


def from_polygons(polygons: Sequence[Sequence[float]], height: int, width: int, where: str = "mask") -> RLE:
    """COCO polygons (a list of flat ``[x0, y0, x1, y1, ...]`` lists) to one RLE (their union); every polygon
    checked by :func:`check_polygons` (the messages name ``where: polygon i``)."""
    h, w = _check_size([height, width], where)
    polys = list(polygons)
    if not polys:
        return empty(h, w)
    return _from_c(polygon_unions([polys], h, w, where)[0])


def polygon_unions(groups: Sequence[Sequence[Any]], h: int, w: int, where: str = "polygons") -> list[dict]:
    """The union of each group of polygons, in pycocotools form (``bytes`` counts): every polygon of every
    group rasterised by one ``frPyObjects`` call (each polygon is rasterised on its own, so one call for many
    groups gives what one call per group would), a group of several merged as :func:`from_polygons` merges
    them. Each group holds at least one polygon.

    The one place polygons reach pycocotools: :func:`check_polygons` guards them first (an :class:`RLEError`
    naming ``where``, nothing rasterised). A fast path that hands over to its reference path on any doubt
    catches that error and lets the reference path raise it with the field's name."""
    arrays = check_polygons(groups, h, w, where)
    raster = iter(_mask.frPyObjects(arrays, h, w) if arrays else [])  # arrays of >= 6 coordinates: never read as boxes
    out = []
    for g in groups:
        parts = [next(raster) for _ in range(len(g))]
        out.append(parts[0] if len(parts) == 1 else _mask.merge(parts, intersect=False))
    return out


def to_rle(obj: Any, size: Sequence[int] | None = None, where: str = "mask") -> RLE:
    """Turn any mask representation into a validated compressed RLE.

    Accepts a compressed RLE dict (str or bytes counts), an uncompressed RLE
    dict (list counts), COCO polygons (needs ``size`` = [H, W]), or a 2-D
    array (bool or numeric). ``size``, when given, is also checked against RLEs.
    """
    if isinstance(obj, np.ndarray):
        rle = encode(obj, where)
    elif isinstance(obj, Mapping) and isinstance(obj.get("counts"), (list, tuple, np.ndarray)):
        rle = from_uncompressed(obj, where)
    elif isinstance(obj, Mapping):
        return validate(obj, where, expected_size=size)
    elif isinstance(obj, (list, tuple)):
        if size is None:
            raise RLEError(f"{where}: a polygon segmentation has no size; the frame size [H, W] is needed")
        if obj and not isinstance(obj[0], (list, tuple, np.ndarray)):
            obj = [obj]  # a single flat polygon
        return from_polygons(obj, size[0], size[1], where)
    else:
        raise RLEError(f"{where}: expected an RLE dict, polygons or a 2-D array, got {type(obj).__name__}")
    return _finish(rle["counts"], *rle["size"], size, where)


def to_rles(objs: Sequence[Any], sizes: Sequence[list[int]]) -> list[RLE | None]:
    """:func:`to_rle` of many masks at once, mask j with its image's ``sizes[j]`` (``[H, W]``, two ints already
    checked): the same RLE, or None where it is not decided here (the caller calls :func:`to_rle`, which gives the
    mask or the error). Decided here: a dict whose ``size`` is exactly its image's, with ``str`` counts (one
    :func:`valid_many` scan for all) or a non-empty list of ints as counts (:func:`from_uncompressed`'s checks on all
    of them together), and a non-empty list of polygon lists (one :func:`polygon_unions` per image size; a size
    whose polygons it refuses is left to :func:`to_rle`)."""
    out: list[RLE | None] = [None] * len(objs)
    compressed, uncompressed, polygons = [], [], {}
    for j, (obj, hw) in enumerate(zip(objs, sizes)):
        if type(obj) is list:
            if obj and all(type(p) is list for p in obj):
                polygons.setdefault(tuple(hw), []).append(j)
        elif isinstance(obj, dict) and obj.get("size") == hw and type(obj["size"]) is list and type(obj["size"][0]) is type(obj["size"][1]) is int:
            counts = obj.get("counts")
            if type(counts) is str or (type(counts) is list and counts):
                (compressed if type(counts) is str else uncompressed).append(j)
    for j, ok in zip(compressed, valid_many([objs[j] for j in compressed])):
        if ok:
            out[j] = {"size": list(sizes[j]), "counts": objs[j]["counts"]}
    for (h, w), js in polygons.items():
        try:
            rles = polygon_unions([objs[j] for j in js], h, w)
        except RLEError:
            continue
        for j, r in zip(js, rles):
            out[j] = _from_c(r)
    if set(map(type, itertools.chain.from_iterable(objs[j]["counts"] for j in uncompressed))) - {int}:  # (bool is not int)
        uncompressed = [j for j in uncompressed if set(map(type, objs[j]["counts"])) == {int}]
    lens = np.fromiter((len(objs[j]["counts"]) for j in uncompressed), np.int64, len(uncompressed))
    try:
        runs = np.fromiter(itertools.chain.from_iterable(objs[j]["counts"] for j in uncompressed), np.int64, int(lens.sum()))
    except OverflowError:  # a run beyond int64: every uncompressed mask is left to to_rle
        return out
    starts = np.cumsum(lens) - lens
    total = np.asarray([sizes[j][0] * sizes[j][1] for j in uncompressed], dtype=np.int64)
    good = (np.minimum.reduceat(runs, starts) >= 0) & (np.add.reduceat(runs, starts) == total) if uncompressed else lens > 0  # (none)
    for j, a, n in zip(np.asarray(uncompressed, dtype=np.int64)[good].tolist(), starts[good].tolist(), lens[good].tolist()):
        h, w = sizes[j]
        out[j] = _from_c(_mask.frPyObjects({"counts": runs[a:a + n].astype(np.uint32), "size": [h, w]}, h, w))
    return out


def check_same_size(rles: Sequence[RLE], where: str) -> list[int]:
    """The common ``[H, W]`` of validated RLEs; a mask of another size raises :class:`RLEError` naming ``where``
    (pycocotools silently returns an empty mask when merging masks of different sizes)."""
    size = [int(rles[0]["size"][0]), int(rles[0]["size"][1])]
    for i, r in enumerate(rles[1:], 1):
        if [int(r["size"][0]), int(r["size"][1])] != size:
            raise RLEError(f"{where}: mask {i} has size {list(r['size'])}, expected {size} like mask 0")
    return size


def union(rles: Sequence[RLE], size: Sequence[int] | None = None, where: str = "masks") -> RLE:
    """Union of validated RLEs of one size; the empty mask of ``size`` for no RLEs."""
    if not rles:
        if size is None:
            raise RLEError(f"{where}: the union of no masks needs a size")
        return empty(size[0], size[1])
    s = check_same_size(rles, where)
    if size is not None and s != [int(size[0]), int(size[1])]:
        raise RLEError(f"{where}: expected size {list(size)}, got {s}")
    if len(rles) == 1:
        return dict(rles[0])
    return _from_c(_mask.merge([_to_c(r) for r in rles], intersect=False))


def area(rle: RLE) -> int:
    """Foreground pixel count of a validated RLE, as a Python int."""
    return int(_mask.area(_to_c(rle)))


def areas(rles: Sequence[RLE]) -> list[int]:
    """Foreground pixel counts of many validated RLEs (chunked: pycocotools overflows past 255)."""
    out: list[int] = []
    for i in range(0, len(rles), _AREA_CHUNK):
        chunk = [_to_c(r) for r in rles[i : i + _AREA_CHUNK]]
        out.extend(int(a) for a in np.atleast_1d(_mask.area(chunk)))
    return out


def intersection_area(a: RLE, b: RLE, where: str = "masks") -> int:
    """|A ∩ B| of two validated RLEs of one size."""
    check_same_size([a, b], where)
    return int(_mask.area(_mask.merge([_to_c(a), _to_c(b)], intersect=True)))


class MaskCounts(NamedTuple):
    """The exact pixel counts of one mask pair, as Python ints."""

    intersection: int
    union: int
    pred_area: int
    gt_area: int


def rle_pair_counts(pred: RLE | None, gt: RLE | None, where: str = "masks") -> MaskCounts:
    """Exact ``(I, U, |P|, |G|)`` of two already validated RLEs (the fast path: no validation).

    ``None`` stands for the empty mask. Two masks of different sizes raise :class:`~perckit.errors.RLEError`
    naming ``where`` (fit the prediction first, :func:`perckit.core.segmentation.fit_prediction`); pycocotools' intersection is
    taken only when both masks have foreground.
    """
    if pred is not None and gt is not None and pred["size"] != gt["size"]:
        check_same_size([pred, gt], where)  # raises unless the sizes differ only in type ([1, 4] vs (1, 4))
    a_p = area(pred) if pred is not None else 0
    a_g = area(gt) if gt is not None else 0
    inter = intersection_area(pred, gt, where) if a_p and a_g else 0
    return MaskCounts(inter, a_p + a_g - inter, a_p, a_g)


def pair_iou(intersection: int, union: int, empty_union_iou: float = 1.0) -> float:
    """The empty-union rule: I / U, and ``empty_union_iou`` when U == 0 (both masks empty). No epsilon."""
    return intersection / union if union else float(empty_union_iou)


def intersection_union(a: RLE, b: RLE, where: str = "masks") -> tuple[int, int]:
    """Exact (|A ∩ B|, |A ∪ B|) of two validated RLEs of one size (:func:`rle_pair_counts`)."""
    counts = rle_pair_counts(a, b, where)
    return counts.intersection, counts.union


def iou(a: RLE, b: RLE, empty_iou: float = 1.0, where: str = "masks") -> float:
    """|A ∩ B| / |A ∪ B|, and ``empty_iou`` when both masks are empty (:func:`pair_iou`)."""
    return pair_iou(*intersection_union(a, b, where), empty_union_iou=empty_iou)


def to_bbox(rle: RLE) -> list[float]:
    """``[x, y, w, h]`` of the foreground of a validated RLE."""
    return [float(v) for v in _mask.toBbox(_to_c(rle))]


#: The nearest-neighbour rules :func:`resize_nearest` offers, by the library each one equals (module header).
RESIZE_RULES = ("pil", "opencv")


def nearest_index(src: int, dst: int, rule: str) -> np.ndarray:
    """The source row (or column) each of ``dst`` target rows reads under ``rule`` (:data:`RESIZE_RULES`, the
    module header states both). A ``"pil"`` position at or past ``src`` (Pillow leaves that pixel empty; float64
    accumulation needs tens of millions of pixels to get there) is ``src``: :func:`resize_nearest` clears it."""
    if rule == "opencv":
        scale = 1.0 / (int(dst) / int(src))
        return np.minimum(np.floor(np.arange(int(dst)) * scale).astype(np.int64), int(src) - 1)
    if rule == "pil":
        a = int(src) / int(dst)
        steps = np.full(int(dst), a)
        steps[0] = a * 0.5
        return np.minimum(np.cumsum(steps).astype(np.int64), int(src))  # np.cumsum adds in order, as Pillow does
    raise OptionError(f"nearest-neighbour rule {rule!r}: expected one of {list(RESIZE_RULES)}")


def sample_nearest(mask: Mapping[str, Any], rows: np.ndarray, cols: np.ndarray, where: str = "mask") -> np.ndarray:
    """The mask sampled at source ``rows`` x ``cols`` (two non-decreasing index arrays, from an index rule such
    as :func:`nearest_index`): a bool array ``[len(rows), len(cols)]`` whose pixel (i, j) is the mask's pixel
    (rows[i], cols[j]). Fortran-ordered, as pycocotools' ``encode`` takes it.

    The one nearest-neighbour sampler: read from the run ends of the counts (column-major: a pixel is foreground
    when an odd number of run ends lie at or before it), never from a full-size decode, by the compiled walk
    :func:`perckit.core.counts.sample_runs` (a binary search per target column, then forward over the run ends),
    only in the columns between the first and the last foreground pixel: memory is the target, time
    O(target pixels + columns x log(runs) + the runs passed). ``mask`` has a ``size`` [H, W] and ``counts`` that
    :func:`decode_counts` reads (errors name ``where``)."""
    h = int(mask["size"][0])
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    runs = decode_counts(mask["counts"], where)
    out_t = np.zeros((cols.size, rows.size), dtype=bool)  # column by column: out_t.T is the Fortran-ordered mask
    ends = np.cumsum(runs)
    if len(runs) < 2 or ends[-1] == 0 or rows.size == 0:
        return out_t.T
    # only the columns between the first and the last foreground pixel are read
    first, last = int(ends[0]) // h, int(ends[-1] - (runs[-1] if len(runs) % 2 else 0) - 1) // h
    inside = np.flatnonzero((cols >= first) & (cols <= last))
    if inside.size:
        band = slice(int(inside[0]), int(inside[-1]) + 1)
        _kernels.sample_runs(ends, h, rows, cols[band], out_t[band])
    return out_t.T


def resized_mask(mask: Mapping[str, Any], size: Sequence[int], rule: str, where: str = "mask") -> np.ndarray:
    """``mask`` (a ``size`` / ``counts`` mapping) sampled at ``size`` ([H, W]) under the nearest-neighbour ``rule``
    (:func:`nearest_index`): a Fortran-ordered bool array, by :func:`sample_nearest` (no full-size decode)."""
    h, w = int(size[0]), int(size[1])
    sh, sw = int(mask["size"][0]), int(mask["size"][1])
    rows, cols = nearest_index(sh, h, rule), nearest_index(sw, w, rule)
    target = sample_nearest(mask, np.minimum(rows, sh - 1), np.minimum(cols, sw - 1), where)
    target[rows >= sh] = False
    target[:, cols >= sw] = False
    return target


def resize_nearest(rle: RLE, size: Sequence[int], *, rule: str) -> RLE:
    """A validated RLE resized to ``size`` ([H, W]) with nearest neighbour under ``rule``: ``"pil"`` (PIL
    ``Image.NEAREST``) or ``"opencv"`` (cv2 ``INTER_NEAREST``), equal to that library (module header), by
    :func:`resized_mask`: the full-size source is never decoded (memory: the target; the caller charges its
    :class:`PixelBudget` with the target's pixels)."""
    size = _check_size(list(size), "resize target")
    return _from_c(_mask.encode(resized_mask(rle, size, rule, "resize source").view(np.uint8)))


def check_max_pixels(value: Any, name: str = "max_pixels") -> int:
    """A pixel budget given by a user: None is :data:`PIXEL_BUDGET`; a positive int is itself; anything else
    is an :class:`~perckit.errors.OptionError` naming ``name``."""
    if value is None:
        return PIXEL_BUDGET
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise OptionError(f"option {name!r}: expected a positive integer (a number of mask pixels), got {_short(value)}")
    return int(value)


class PixelBudget:
    """The pixels one answer, prediction row, batch or picture may decode or resize masks to, charged before the
    work (the one budget of the module docstring).

    ``PixelBudget(max_pixels, unit=..., hint=..., error=...)``: at most ``max_pixels`` (None:
    :data:`PIXEL_BUDGET`) pixels in all; ``unit`` says what it is for ("batch", "prediction row"), ``hint`` how
    to raise it where there is a knob ("pass max_pixels=..."), ``error`` the error type of the caller
    (:class:`RLEError` by default, :class:`~perckit.errors.PredictionError` for predictions).
    :meth:`charge` adds a mask's pixels, or raises naming the field, the running total and the budget."""

    __slots__ = ("limit", "used", "unit", "hint", "error")

    def __init__(self, max_pixels: int | None = None, *, unit: str = "row", hint: str = "",
                 error: Callable[[str], Exception] = RLEError) -> None:
        self.limit = check_max_pixels(max_pixels)
        self.used, self.unit, self.hint, self.error = 0, unit, hint, error

    def charge(self, pixels: int, where: str) -> None:
        """Add ``pixels`` (a mask's H * W, or a target's) charged for ``where``; past the budget raise ``error``
        ("<where>: expected at most N mask pixels decoded or resized per <unit>, got T with this mask's P") and
        charge nothing."""
        total = self.used + int(pixels)
        if total > self.limit:
            hint = f" ({self.hint})" if self.hint else ""
            raise self.error(f"{where}: expected at most {self.limit} mask pixels decoded or resized per {self.unit}, "
                             f"got {total} with this mask's {int(pixels)}{hint}")
        self.used = total

    def __repr__(self) -> str:
        return f"PixelBudget({self.used}/{self.limit} per {self.unit})"


def _mask_batch(masks: Any, where: str) -> np.ndarray:
    """``masks`` (a torch tensor on any device or a numpy array) as a numpy bool array, refusing what is not binary."""
    if any(c.__module__ == "torch" and c.__name__ == "Tensor" for c in type(masks).__mro__):  # told without importing torch
        if masks.dtype.is_floating_point or masks.dtype.is_complex:
            raise RLEError(f"{where}: expected a bool or 0/1 integer tensor, got dtype {masks.dtype}: threshold the scores "
                           "first (for example masks > 0.5, or logits > 0)")
        masks = masks.detach().cpu().numpy()
    elif not isinstance(masks, np.ndarray):
        raise RLEError(f"{where}: expected a torch tensor or a numpy array [N, H, W] or [H, W] (or a list of 2-D masks), "
                       f"got {type(masks).__name__}")
    if masks.dtype == bool:
        return masks
    if masks.dtype.kind not in "iu":
        raise RLEError(f"{where}: expected a bool or 0/1 integer array, got dtype {masks.dtype}"
                       + (": threshold the scores first (for example masks > 0.5)" if masks.dtype.kind in "fc" else ""))
    if masks.size and (masks.min() < 0 or masks.max() > 1):
        raise RLEError(f"{where}: expected a bool or 0/1 integer array, got values in [{masks.min()}, {masks.max()}] "
                       "(a 0/255 mask image: pass masks > 0)")
    return masks != 0


def encode_masks(masks: Any, where: str = "masks") -> list[RLE]:
    """A batch of binary masks to compressed COCO RLE dicts ``{"size": [H, W], "counts": str}``, one per mask.

    ``masks`` is a torch tensor (any device: it is copied to the CPU; torch is never imported here) or a numpy array
    of shape ``[N, H, W]`` (N masks, N may be 0) or ``[H, W]`` (one mask: a list of one RLE), or a list / tuple of
    2-D masks of any sizes. The values must be binary: ``bool``, or integers that are all 0 or 1. Floats (scores,
    probabilities, logits) are refused with an :class:`RLEError`: the threshold is the caller's choice (``masks >
    0.5``), and so is a 0/255 image (``masks > 0``). Each mask is at most :data:`MAX_PIXELS` pixels, H and W at
    least 1. The N masks of an array go to pycocotools in one call (a Fortran-ordered uint8 [H, W, N] array).
    """
    if isinstance(masks, (list, tuple)):
        out: list[RLE] = []
        for i, m in enumerate(masks):
            one = _mask_batch(m, f"{where}[{i}]")
            if one.ndim != 2:
                raise RLEError(f"{where}[{i}]: expected a 2-D mask [H, W], got shape {tuple(one.shape)}")
            out.extend(encode_masks(one, f"{where}[{i}]"))
        return out
    arr = _mask_batch(masks, where)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3:
        raise RLEError(f"{where}: expected shape [N, H, W] or [H, W], got {tuple(arr.shape)}")
    n, h, w = arr.shape
    if h == 0 or w == 0:
        raise RLEError(f"{where}: expected masks of at least 1x1 pixels, got shape {tuple(arr.shape)}")
    if h * w > MAX_PIXELS:
        raise RLEError(f"{where}: a {h}x{w} mask exceeds the limit of {MAX_PIXELS} pixels")
    if n == 0:
        return []
    return [_from_c(r) for r in _mask.encode(np.asfortranarray(arr.transpose(1, 2, 0), dtype=np.uint8))]
