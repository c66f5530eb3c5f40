"""COCO RLE helpers on pycocotools.

Masks travel through perckit as compressed COCO RLE dicts ``{"size": [H, W],
"counts": str}``. Everything here works in the RLE domain; dense arrays appear
only in :func:`encode`, :func:`decode` and :func:`resize_nearest`.

pycocotools loops forever on counts that do not sum to H*W and silently
returns an empty mask when merging masks of different sizes, so every RLE from
outside goes through :func:`validate` (vectorised over the counts string)
before it reaches pycocotools.

The pixel counts of a mask pair (I, U) and the IoU rules live in :mod:`perckit.segmentation`;
:func:`intersection_union` and :func:`iou` here are thin aliases of it.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pycocotools import mask as _mask

from . import _kernels
from .errors import RLEError
from .errors import short_repr as _short

RLE = dict  # {"size": [H, W], "counts": str}

#: Largest mask (H * W pixels) accepted from outside. A decoded mask of this
#: size takes 1 GiB; anything larger is almost certainly a corrupt header.
MAX_PIXELS = 1 << 30
#: Longest encoding accepted per count. pycocotools' rleFrString shifts in 32-bit ``int``: a 7th
#: character is read correctly only when it is '0' or '1' ((c & 0x1f) << 30 fits, no sign bit);
#: otherwise it reads another value than the one encoded, and iou/merge then loop on runs that no
#: longer sum to H*W. Longer encodings are refused outright.
_MAX_CHARS_PER_COUNT = 7
#: pycocotools' area() of a list overflows a uint8 index past 255 items.
_AREA_CHUNK = 255


def _check_size(size: Any, where: str) -> tuple[int, int]:
    if not isinstance(size, (list, tuple)) or len(size) != 2:
        raise RLEError(f"{where}: expected 'size' = [H, W] (two positive ints), got {size!r}")
    out = []
    for v in size:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
            raise RLEError(f"{where}: expected 'size' = [H, W] (two positive ints), got {size!r}")
        out.append(int(v))
    h, w = out
    if h * w > MAX_PIXELS:
        raise RLEError(
            f"{where}: size {h}x{w} = {h * w} pixels exceeds the limit of {MAX_PIXELS} "
            "(a decoded mask would need gigabytes)"
        )
    return h, w


def decode_counts(counts: bytes | str, where: str = "mask") -> np.ndarray:
    """Decode a compressed COCO counts string to its run lengths (int64), vectorised.

    Mirrors pycocotools' ``rleFrString``: 5 data bits per character offset by 48,
    bit 0x20 continues a number, bit 0x10 of the last character is the sign, and
    from the fourth run on each value is a delta against the run two before.
    """
    if isinstance(counts, str):
        try:
            counts = counts.encode("ascii")
        except UnicodeEncodeError:
            raise RLEError(f"{where}: 'counts' must be ASCII, got non-ASCII characters") from None
    if not isinstance(counts, (bytes, bytearray)):
        raise RLEError(f"{where}: 'counts' must be a str or bytes, got {type(counts).__name__}")
    if len(counts) == 0:
        raise RLEError(f"{where}: 'counts' is empty")
    c = np.frombuffer(bytes(counts), dtype=np.uint8).astype(np.int64) - 48
    if c.min() < 0 or c.max() > 63:
        bad = int(np.flatnonzero((c < 0) | (c > 63))[0])
        raise RLEError(
            f"{where}: 'counts' has a character outside the COCO alphabet ('0'..'o') at offset {bad}"
        )
    more = (c & 0x20) != 0
    if more[-1]:
        raise RLEError(f"{where}: 'counts' is truncated (its last character continues a number)")
    ends = np.flatnonzero(~more)
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts + 1
    if lengths.max() > _MAX_CHARS_PER_COUNT:
        raise RLEError(f"{where}: 'counts' has a run encoded in more than {_MAX_CHARS_PER_COUNT} characters")
    if ((lengths == _MAX_CHARS_PER_COUNT) & (c[ends] > 1)).any():
        raise RLEError(f"{where}: 'counts' has a 7-character run that pycocotools would misread (value out of 32-bit range)")
    pos = np.arange(c.size) - np.repeat(starts, lengths)
    vals = np.add.reduceat((c & 0x1F) << (5 * pos), starts)
    sign = (c[ends] & 0x10) != 0
    vals = np.where(sign, vals - (np.int64(1) << (5 * lengths)), vals)
    if vals.size > 3:
        # cnts[i] += cnts[i-2] for i > 2: two interleaved cumulative sums.
        odd = vals[1::2].cumsum()
        even = vals[2::2].cumsum()
        vals = vals.copy()
        vals[1::2] = odd
        vals[2::2] = even
    return vals


def validate(rle: Any, where: str = "mask", expected_size: Sequence[int] | None = None) -> RLE:
    """Check a compressed RLE and return it as ``{"size": [H, W], "counts": str}``.

    Raises :class:`RLEError` naming ``where`` when the size is not two positive
    ints, the counts are not valid COCO characters, a run is negative, or the
    runs do not sum to H*W (pycocotools would loop forever on it), or when the
    size differs from ``expected_size``.
    """
    if not isinstance(rle, Mapping) or "size" not in rle or "counts" not in rle:
        raise RLEError(f"{where}: expected a COCO RLE dict with 'size' and 'counts', got {_short(rle)}")
    h, w = _check_size(rle["size"], where)
    counts = rle["counts"]
    if isinstance(counts, (list, tuple, np.ndarray)):
        raise RLEError(
            f"{where}: expected compressed counts (str), got an uncompressed list (convert it with perckit.rle.to_rle)"
        )
    scan = _kernels.scan_counts_for_one()
    if scan is not None and counts and (isinstance(counts, bytes) or (isinstance(counts, str) and counts.isascii())):
        raw = counts.encode("ascii") if isinstance(counts, str) else counts
        status, total, _ = scan(np.frombuffer(raw, dtype=np.uint8))
        if status == 0 and total == h * w:  # the compiled fast path; anything else gets the precise error below
            return _finish(counts, h, w, expected_size, where)
    runs = decode_counts(counts, where)
    if runs.min() < 0:
        raise RLEError(f"{where}: 'counts' decodes to a negative run length")
    total = int(runs.sum())
    if total != h * w:
        raise RLEError(f"{where}: 'counts' runs sum to {total} pixels, expected H*W = {h}*{w} = {h * w}")
    return _finish(counts, h, w, expected_size, where)


def valid_many(rles: Sequence[Any]) -> list[bool]:
    """For each item: True when it is a ``dict`` with ``str`` counts that :func:`validate` accepts (a ``size``
    of two positive ints within :data:`MAX_PIXELS`, counts that scan clean and sum to H*W), decided for all
    of them by one call of the compiled column scan (:func:`perckit._kernels.scan_counts_column`).

    False says only "not decided here": the caller validates that one with :func:`validate`, which gives
    the verdict and the error. Every item is False without numba, and while checking them one by one is
    cheaper than loading it (:func:`perckit._kernels.compiled_scan_pays`: a handful of masks in a fresh process)."""
    out = [False] * len(rles)
    if not rles or not _kernels.compiled_scan_pays(len(rles)) or not _kernels.have_numba():
        return out
    expected = np.full(len(rles), -1, dtype=np.int64)
    counts: list[str] = []
    for i, r in enumerate(rles):
        c = r.get("counts") if type(r) is dict else None
        if type(c) is not str or not c.isascii():
            counts.append("")  # scans as empty (status 6): left to validate
            continue
        counts.append(c)
        sz = r.get("size")
        if type(sz) is list and len(sz) == 2 and type(sz[0]) is int and type(sz[1]) is int and sz[0] > 0 and sz[1] > 0:
            if sz[0] * sz[1] <= MAX_PIXELS:
                expected[i] = sz[0] * sz[1]
    joined = "".join(counts)
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum([len(c) for c in counts], out=offsets[1:])
    status, total = _kernels.scan_counts_column()(offsets, np.frombuffer(joined.encode("ascii"), dtype=np.uint8))
    return ((status == 0) & (total == expected)).tolist()


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
    """Decode a validated RLE to a boolean (H, W) array."""
    with warnings.catch_warnings():
        # pycocotools 2.0.x + numpy 2: "__array__ implementation doesn't accept a copy keyword"
        warnings.simplefilter("ignore", DeprecationWarning)
        return _mask.decode(_to_c(rle)).astype(bool)


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


def _plain_polygon_ok(poly: Any, h: int, w: int) -> bool:
    """True for a flat list of finite floats / ints (not bools), even-sized, >= 6 long, every vertex within
    the bounds :func:`from_polygons` allows; anything else takes the numpy path and its precise errors."""
    if type(poly) is not list or len(poly) < 6 or len(poly) % 2 or not set(map(type, poly)) <= _PLAIN_NUMBERS:
        return False
    if not all(map(math.isfinite, poly)):
        return False
    xs, ys = poly[0::2], poly[1::2]
    return min(xs) >= -w and max(xs) <= 2 * w and min(ys) >= -h and max(ys) <= 2 * h


_PLAIN_NUMBERS = frozenset((float, int))


def from_polygons(polygons: Sequence[Sequence[float]], height: int, width: int, where: str = "mask") -> RLE:
    """COCO polygons (a list of flat ``[x0, y0, x1, y1, ...]`` lists) to one RLE (their union)."""
    h, w = _check_size([height, width], where)
    polys = []
    for i, poly in enumerate(polygons):
        if _plain_polygon_ok(poly, h, w):  # the common case, checked without numpy's per-call overhead
            polys.append(poly)
            continue
        try:
            arr = np.asarray(poly, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise RLEError(f"{where}: polygon {i} is not a list of numbers: {_short(poly)}") from None
        if arr.size < 6 or arr.size % 2:
            raise RLEError(f"{where}: polygon {i} needs an even number (>= 6) of coordinates, got {arr.size}")
        if not np.isfinite(arr).all():
            raise RLEError(f"{where}: polygon {i} has a NaN or infinite coordinate")
        # pycocotools rasterises the outline point by point (memory grows with the perimeter): a vertex far
        # outside the image would allocate without bound, so only vertices within one image size of it are taken.
        xs, ys = arr[0::2], arr[1::2]
        if xs.min() < -w or xs.max() > 2 * w or ys.min() < -h or ys.max() > 2 * h:
            raise RLEError(
                f"{where}: polygon {i} has a vertex far outside the {h}x{w} image: expected x in [-{w}, {2 * w}] "
                f"and y in [-{h}, {2 * h}], got x in [{xs.min():g}, {xs.max():g}], y in [{ys.min():g}, {ys.max():g}]"
            )
        polys.append(arr)  # pycocotools copies each polygon to a float64 array itself
    if not polys:
        return empty(h, w)
    return _from_c(polygon_unions([polys], h, w)[0])


def polygon_unions(groups: Sequence[Sequence[Any]], h: int, w: int) -> list[dict]:
    """The union of each group of polygons, in pycocotools form (``bytes`` counts): every polygon of every
    group rasterised by one ``frPyObjects`` call (each polygon is rasterised on its own, so one call for many
    groups gives what one call per group would), a group of several merged as :func:`from_polygons` merges
    them. Each group holds at least one polygon, every one checked as :func:`from_polygons` checks them."""
    flat = [p for g in groups for p in g]
    raster = iter(_mask.frPyObjects(flat, h, w) if flat else [])
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
        if size is not None and rle["size"] != [int(size[0]), int(size[1])]:
            raise RLEError(f"{where}: expected size {list(size)}, got {rle['size']}")
        return rle
    if isinstance(obj, Mapping):
        if isinstance(obj.get("counts"), (list, tuple, np.ndarray)):
            rle = from_uncompressed(obj, where)
            if size is not None and rle["size"] != [int(size[0]), int(size[1])]:
                raise RLEError(f"{where}: expected size {list(size)}, got {rle['size']}")
            return rle
        return validate(obj, where, expected_size=size)
    if isinstance(obj, (list, tuple)):
        if size is None:
            raise RLEError(f"{where}: a polygon segmentation has no size; the frame size [H, W] is needed")
        if obj and not isinstance(obj[0], (list, tuple, np.ndarray)):
            obj = [obj]  # a single flat polygon
        return from_polygons(obj, size[0], size[1], where)
    raise RLEError(f"{where}: expected an RLE dict, polygons or a 2-D array, got {type(obj).__name__}")


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


def intersection_union(a: RLE, b: RLE, where: str = "masks") -> tuple[int, int]:
    """Exact (|A ∩ B|, |A ∪ B|) of two validated RLEs of one size.

    A thin alias of :func:`perckit.segmentation.rle_pair_counts`, the one place that turns a mask pair
    into (I, U).
    """
    from .segmentation import rle_pair_counts  # segmentation imports this module

    counts = rle_pair_counts(a, b, where)
    return counts.intersection, counts.union


def iou(a: RLE, b: RLE, empty_iou: float = 1.0, where: str = "masks") -> float:
    """|A ∩ B| / |A ∪ B|, and ``empty_iou`` when both masks are empty (:func:`perckit.segmentation.pair_iou`)."""
    from .segmentation import pair_iou

    return pair_iou(*intersection_union(a, b, where), empty_union_iou=empty_iou)


def to_bbox(rle: RLE) -> list[float]:
    """``[x, y, w, h]`` of the foreground of a validated RLE."""
    return [float(v) for v in _mask.toBbox(_to_c(rle))]


def resize_nearest(rle: RLE, size: Sequence[int]) -> RLE:
    """Nearest-neighbour resize (OpenCV INTER_NEAREST convention: src = floor(dst * src_len / dst_len))."""
    h, w = _check_size(list(size), "resize target")
    src = decode(rle)
    sh, sw = src.shape
    rows = np.minimum((np.arange(h) * sh) // h, sh - 1)
    cols = np.minimum((np.arange(w) * sw) // w, sw - 1)
    return encode(src[np.ix_(rows, cols)])


def _is_torch_tensor(obj: Any) -> bool:
    """True for a ``torch.Tensor`` (or subclass), told without importing torch."""
    return any(c.__module__ == "torch" and c.__name__ == "Tensor" for c in type(obj).__mro__)


def _mask_batch(masks: Any, where: str) -> np.ndarray:
    """``masks`` (a torch tensor on any device or a numpy array) as a numpy bool array, refusing what is not binary."""
    if _is_torch_tensor(masks):
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
    encoded = _mask.encode(np.asfortranarray(arr.transpose(1, 2, 0), dtype=np.uint8))
    return [_from_c(r) for r in encoded]
