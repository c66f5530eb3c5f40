"""Tests of perckit.rle: COCO RLE helpers on pycocotools.

Golden values on hand-checkable masks, hypothesis properties against plain
numpy, error paths (every message must name the ``where`` it was given) and
fuzzing of the counts parser.

pycocotools loops forever (merge, iou) on counts that do not sum to H*W, so
only RLEs that went through ``validate`` / ``to_rle`` (or came from
``encode``) are handed to pycocotools here; the one exception is
``pycocotools.mask.area``, which only sums the odd runs and never loops.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pyarrow as pa
import pytest
from helpers.fuzz import reaches, record
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from oracles import masks as oracle
from oracles.counts import fr_string
from pycocotools import mask as _coco

from perckit import rle as R
from perckit.errors import RLEError

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WHERE = "pred[3].segmentation (frame 7)"  # has regex metacharacters: checked with `in`, not `match`


# --------------------------------------------------------------------------- helpers


def G(*bits: int) -> np.ndarray:
    """A 1xN mask from 0/1 values."""
    return np.array([bits], dtype=bool)


def cm_runs(mask: np.ndarray) -> list[int]:
    """Column-major run lengths, the first run being background (possibly 0)."""
    flat = np.asarray(mask, dtype=bool).ravel(order="F")
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    runs = np.diff(np.concatenate(([0], change, [flat.size]))).tolist()
    return ([0] + runs) if flat[0] else runs


def min_chars(v: int) -> int:
    """Characters pycocotools' rleToString uses for the number v (5 bits each, two's complement)."""
    n = 1
    while not (-(1 << (5 * n - 1)) <= v < (1 << (5 * n - 1))):
        n += 1
    return n


def enc_num(v: int, nchars: int) -> str:
    """v in exactly nchars characters (non-minimal when nchars > min_chars(v))."""
    assert nchars >= min_chars(v)
    out = []
    for i in range(nchars):
        c = (v >> (5 * i)) & 0x1F
        if i < nchars - 1:
            c |= 0x20
        out.append(chr(48 + c))
    return "".join(out)


def deltas(runs: list[int]) -> list[int]:
    """The numbers pycocotools writes for runs: a delta against the run two before from the 4th on."""
    return [r - runs[i - 2] if i > 2 else r for i, r in enumerate(runs)]


def np_iou(a: np.ndarray, b: np.ndarray, empty_iou: float = 1.0) -> float:
    inter = int(np.logical_and(a, b).sum())
    uni = int(np.logical_or(a, b).sum())
    return inter / uni if uni else float(empty_iou)


shapes = hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=12)
masks = hnp.arrays(np.bool_, shapes)


@st.composite
def mask_lists(draw, min_k: int = 2, max_k: int = 2):
    shape = draw(shapes)
    k = draw(st.integers(min_k, max_k))
    return [draw(hnp.arrays(np.bool_, shape)) for _ in range(k)]


@st.composite
def mask_and_box(draw):
    h, w = draw(shapes)
    x0 = draw(st.integers(0, w - 1))
    x1 = draw(st.integers(x0 + 1, w))
    y0 = draw(st.integers(0, h - 1))
    y1 = draw(st.integers(y0 + 1, h))
    return h, w, (x0, y0, x1, y1)


# Numbers of the COCO alphabet: 0..6 continuation chars ('P'..'o') then one terminator ('0'..'O').
cont_char = st.integers(80, 111).map(chr)
term_char = st.integers(48, 79).map(chr)


def numbers(max_chars: int):
    return st.tuples(st.lists(cont_char, max_size=max_chars - 1), term_char).map(lambda t: "".join(t[0]) + t[1])


def count_strings(max_chars: int = 7, max_numbers: int = 12):
    return st.lists(numbers(max_chars), min_size=1, max_size=max_numbers).map("".join)


def raises_naming(name: str, fn, /, *args, **kwargs) -> RLEError:
    """fn(*args, **kwargs) raises RLEError (a ValueError) whose message names ``name``."""
    with pytest.raises(RLEError) as info:
        fn(*args, **kwargs)
    assert isinstance(info.value, ValueError)
    assert name in str(info.value), str(info.value)
    return info.value


# --------------------------------------------------------------------------- 1. golden values


@pytest.mark.parametrize(
    "mask, counts",
    [
        (G(1, 1, 0, 0), "022"),
        (G(1, 0, 0, 0), "013"),
        (G(0, 0, 1, 1), "22"),
        (G(0, 0, 0, 0), "4"),
        (G(1, 1, 1, 1), "04"),
        (G(0, 1, 0, 1, 1, 0, 0, 0, 1, 1), "111120"),  # runs 1,1,1,2,3,2 -> deltas 1,1,1,1,2,0
        (np.array([[1, 0], [1, 0]], bool), "022"),  # column-major: first column is foreground
        (np.array([[1, 1], [0, 0]], bool), "01100"),  # runs 0,1,1,1,1
        (np.zeros((1, 40), bool), "X1"),  # 40 = 8 + 1*32: two characters
    ],
)
def test_golden_encode_decode(mask, counts):
    rle = R.encode(mask)
    assert rle == {"size": list(mask.shape), "counts": counts}
    assert isinstance(rle["counts"], str)
    assert R.validate(rle) == rle
    np.testing.assert_array_equal(R.decode(rle), mask)
    assert R.decode(rle).dtype == bool
    assert R.area(rle) == int(mask.sum())


def test_golden_empty():
    assert R.empty(1, 4) == {"size": [1, 4], "counts": "4"}
    assert R.empty(1, 40) == {"size": [1, 40], "counts": "X1"}
    assert R.area(R.empty(3, 5)) == 0


def test_golden_iou_and_counts():
    a = {"size": [1, 4], "counts": "022"}  # 1100
    b = {"size": [1, 4], "counts": "013"}  # 1000
    c = {"size": [1, 4], "counts": "22"}  # 0011
    e = {"size": [1, 4], "counts": "4"}  # 0000
    assert R.iou(a, b) == 0.5
    assert R.iou(b, a) == 0.5
    assert R.iou(a, a) == 1.0
    assert R.iou(a, c) == 0.0
    assert R.iou(a, e) == 0.0
    assert R.iou(e, e) == 1.0
    assert R.iou(e, e, empty_iou=0.0) == 0.0
    assert R.iou(e, e, empty_iou=0.25) == 0.25
    assert R.iou(a, e, empty_iou=0.25) == 0.0  # the empty rule is for U == 0 only

    iu = R.intersection_union(a, b)
    assert iu == (1, 2) and all(type(v) is int for v in iu)
    assert R.intersection_union(a, c) == (0, 4)
    assert R.intersection_union(e, e) == (0, 0)
    assert R.intersection_union(a, a) == (2, 2)
    assert R.intersection_area(a, b) == 1 and type(R.intersection_area(a, b)) is int
    assert type(R.area(a)) is int and R.area(a) == 2

    assert R.union([a, c]) == {"size": [1, 4], "counts": "04"}
    assert R.union([b, c]) == R.encode(G(1, 0, 1, 1))
    assert R.union([a]) == a
    assert R.union([], size=[1, 4]) == e
    assert R.areas([a, b, c, e]) == [2, 1, 2, 0]


def test_golden_to_bbox():
    m = np.array([[0, 0, 0], [0, 1, 1]], bool)
    assert R.to_bbox(R.encode(m)) == [1.0, 1.0, 2.0, 1.0]


@pytest.mark.parametrize("size", [[1, (1 << 29) - 1], [16384, 32767], [23170, 23170]])
def test_large_masks_validate_without_decoding(size):
    # Runs below 2**29 fit in 6 characters; validate and area must not decode (allocate) the mask.
    big = R.empty(*size)
    tracemalloc.start()
    try:
        assert R.validate(big) == big
        assert R.area(big) == 0
        assert R.decode_counts(big["counts"]).tolist() == [size[0] * size[1]]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


@pytest.mark.parametrize("size", [[1, 1 << 29], [1, R.MAX_PIXELS], [1 << 15, 1 << 15]])
def test_masks_up_to_max_pixels_validate(size):
    big = R.empty(*size)
    assert len(big["counts"]) == 7 and big["counts"][-1] in "01"  # e.g. 2**29 -> "PPPPP`0"
    assert R.area(big) == 0  # pycocotools reads it right (its area sums the odd runs)
    assert R.validate(big) == big


# --------------------------------------------------------------------------- 2. properties vs numpy


@FAST
@given(masks)
def test_encode_decode_round_trip(m):
    rle = R.encode(m)
    assert rle["size"] == list(m.shape)
    assert isinstance(rle["counts"], str)
    assert R.validate(rle) == rle
    out = R.decode(rle)
    assert out.dtype == bool and out.shape == m.shape
    np.testing.assert_array_equal(out, m)
    # any dtype, nonzero = foreground
    assert R.encode(m.astype(np.uint8) * 7) == rle
    assert R.encode(np.where(m, -2.5, 0.0)) == rle
    assert R.encode(np.ascontiguousarray(m)) == R.encode(np.asfortranarray(m))


@FAST
@given(masks)
def test_area_is_mask_sum(m):
    rle = R.encode(m)
    assert R.area(rle) == int(m.sum())
    assert type(R.area(rle)) is int


@FAST
@given(mask_lists(2, 2))
def test_intersection_union_and_iou_match_numpy(pair):
    a, b = pair
    ra, rb = R.encode(a), R.encode(b)
    inter = int(np.logical_and(a, b).sum())
    uni = int(np.logical_or(a, b).sum())
    assert R.intersection_union(ra, rb) == (inter, uni)
    assert R.intersection_area(ra, rb) == inter
    assert R.iou(ra, rb) == np_iou(a, b)
    assert R.iou(ra, rb, empty_iou=0.0) == np_iou(a, b, 0.0)
    assert R.iou(ra, rb) == R.iou(rb, ra)


@FAST
@given(mask_lists(0, 5))
def test_union_is_logical_or(ms):
    size = list(ms[0].shape) if ms else [3, 4]
    out = R.union([R.encode(m) for m in ms], size=size)
    expected = np.logical_or.reduce(ms) if ms else np.zeros(size, bool)
    assert R.validate(out) == out
    np.testing.assert_array_equal(R.decode(out), expected)
    assert out == R.encode(expected)
    if ms:
        assert R.union([R.encode(m) for m in ms]) == out


@FAST
@given(masks)
def test_decode_counts_gives_column_major_runs(m):
    runs = cm_runs(m)
    assert sum(runs) == m.size
    counts = R.encode(m)["counts"]
    got = R.decode_counts(counts)
    assert got.dtype == np.int64
    assert got.tolist() == runs
    assert int(got.sum()) == m.shape[0] * m.shape[1]
    assert R.decode_counts(counts.encode("ascii")).tolist() == runs
    assert R.decode_counts(bytearray(counts, "ascii")).tolist() == runs


@FAST
@given(masks)
def test_from_uncompressed_of_runs_is_encode(m):
    runs = cm_runs(m)
    size = list(m.shape)
    assert R.from_uncompressed({"size": size, "counts": runs}) == R.encode(m)
    assert R.from_uncompressed({"size": tuple(size), "counts": tuple(runs)}) == R.encode(m)


@FAST
@given(masks)
def test_to_rle_accepts_every_form(m):
    want = R.encode(m)
    c = want["counts"]
    size = list(m.shape)
    forms = [
        m,
        m.astype(np.uint8),
        m.astype(np.int64) * 3,
        {"size": size, "counts": c},
        {"size": tuple(size), "counts": c.encode("ascii")},
        {"size": size, "counts": cm_runs(m)},
    ]
    for obj in forms:
        got = R.to_rle(obj)
        assert got == want
        assert isinstance(got["counts"], str)
        assert R.to_rle(obj, size=size) == want


@FAST
@given(masks)
def test_resize_nearest_identity_and_double(m):
    h, w = m.shape
    rle = R.encode(m)
    for rule in R.RESIZE_RULES:
        assert R.resize_nearest(rle, [h, w], rule=rule) == rle
        np.testing.assert_array_equal(R.decode(R.resize_nearest(rle, (h, w), rule=rule)), m)
    doubled = R.resize_nearest(rle, [2 * h, 2 * w], rule="pil")
    assert doubled == R.resize_nearest(rle, [2 * h, 2 * w], rule="opencv")
    assert doubled["size"] == [2 * h, 2 * w]
    np.testing.assert_array_equal(R.decode(doubled), np.repeat(np.repeat(m, 2, 0), 2, 1))


@FAST
@given(masks, st.integers(1, 25), st.integers(1, 25))
def test_resize_nearest_any_size_matches_opencv(m, h2, w2):
    expected = oracle.library_resize(m, (h2, w2), "opencv")
    np.testing.assert_array_equal(R.decode(R.resize_nearest(R.encode(m), [h2, w2], rule="opencv")), expected)


@FAST
@given(masks)
def test_to_bbox_matches_numpy(m):
    ys, xs = np.nonzero(m)
    expected = [0.0, 0.0, 0.0, 0.0] if xs.size == 0 else [
        float(xs.min()), float(ys.min()), float(xs.max() - xs.min() + 1), float(ys.max() - ys.min() + 1)
    ]
    assert R.to_bbox(R.encode(m)) == expected


# --------------------------------------------------------------------------- 3. polygons


@FAST
@given(mask_and_box())
def test_rectangle_polygon_is_exact(hwb):
    h, w, (x0, y0, x1, y1) = hwb
    expected = np.zeros((h, w), bool)
    expected[y0:y1, x0:x1] = True
    poly = [x0, y0, x1, y0, x1, y1, x0, y1]
    rle = R.from_polygons([poly], h, w)
    assert rle["size"] == [h, w]
    np.testing.assert_array_equal(R.decode(rle), expected)
    assert rle == R.encode(expected)
    # to_rle: a flat polygon, a list of polygons, float coordinates, a numpy polygon
    assert R.to_rle(poly, size=[h, w]) == rle
    assert R.to_rle([poly], size=(h, w)) == rle
    assert R.to_rle([[float(v) for v in poly]], size=[h, w]) == rle
    assert R.to_rle([np.array(poly)], size=[h, w]) == rle


@FAST
@given(mask_and_box(), st.data())
def test_polygons_are_unioned(hwb, data):
    h, w, (x0, y0, x1, y1) = hwb
    a0 = data.draw(st.integers(0, w - 1))
    a1 = data.draw(st.integers(a0 + 1, w))
    b0 = data.draw(st.integers(0, h - 1))
    b1 = data.draw(st.integers(b0 + 1, h))
    expected = np.zeros((h, w), bool)
    expected[y0:y1, x0:x1] = True
    expected[b0:b1, a0:a1] = True
    polys = [[x0, y0, x1, y0, x1, y1, x0, y1], [a0, b0, a1, b0, a1, b1, a0, b1]]
    np.testing.assert_array_equal(R.decode(R.from_polygons(polys, h, w)), expected)


def test_no_polygons_is_empty():
    assert R.from_polygons([], 3, 4) == R.empty(3, 4)
    assert R.to_rle([], size=[3, 4]) == R.empty(3, 4)


# --------------------------------------------------------------------------- 4. errors


@pytest.mark.parametrize(
    "size",
    [[0, 4], [4, 0], [-1, 4], [4], [1, 2, 3], [], [1.5, 2], [1.0, 4], ["1", "4"], "ab", "14", [True, 2], [True, 4], [4, True], [2, False],
     None, 4, {"h": 1, "w": 4}, np.array([1, 4])],
    ids=repr,
)
def test_bad_size_raises(size):
    # counts "4" sums to 4, so [True, 4] must fail on the size itself (bool is not accepted as an int)
    err = raises_naming(WHERE, R.validate, {"size": size, "counts": "4"}, WHERE)
    assert "size" in str(err)
    raises_naming(WHERE, R.to_rle, {"size": size, "counts": "4"}, where=WHERE)
    raises_naming(WHERE, R.from_uncompressed, {"size": size, "counts": [4]}, WHERE)


@pytest.mark.parametrize("size", [[1 << 16, 1 << 16], [1, R.MAX_PIXELS + 1], [1 << 40, 1 << 40]])
def test_size_over_max_pixels_raises_without_allocating(size):
    h, w = size
    tracemalloc.start()
    try:
        raises_naming(WHERE, R.validate, {"size": size, "counts": "4"}, WHERE)
        raises_naming(WHERE, R.validate, {"size": size, "counts": R.empty(1, R.MAX_PIXELS)["counts"]}, WHERE)
        raises_naming(WHERE, R.from_uncompressed, {"size": size, "counts": [h * w]}, WHERE)
        raises_naming(WHERE, R.from_polygons, [[0, 0, 1, 0, 1, 1]], h, w, WHERE)
        raises_naming(WHERE, R.to_rle, [0, 0, 1, 0, 1, 1], size=size, where=WHERE)
        with pytest.raises(RLEError):
            R.empty(h, w)
        with pytest.raises(RLEError):
            R.resize_nearest(R.encode(G(1, 0)), size, rule="opencv")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak


@pytest.mark.parametrize("counts", ["3", "5", "0", "022" + "0", "0221", "13" + "1", "00"])
def test_counts_not_summing_to_hw_raise(counts):
    err = raises_naming(WHERE, R.validate, {"size": [1, 4], "counts": counts}, WHERE)
    assert "4" in str(err)
    raises_naming(WHERE, R.to_rle, {"size": [1, 4], "counts": counts.encode()}, where=WHERE)


@pytest.mark.parametrize(
    "counts", ["\x00", "4\x00", "~", "4~", "/", "4p", "é", "2é2", " 4", "4\n", b"\xff", b"4\x00", "\u20ac"], ids=repr
)
def test_characters_outside_alphabet_raise(counts):
    raises_naming(WHERE, R.validate, {"size": [1, 4], "counts": counts}, WHERE)
    raises_naming(WHERE, R.decode_counts, counts, WHERE)


# The last character continues a number when (ord(c) - 48) & 0x20, i.e. c in 'P'..'o'.
@pytest.mark.parametrize("counts", ["0`", "P", "4P", "022o", "X", "0X1X"])
def test_truncated_counts_raise(counts):
    assert (ord(counts[-1]) - 48) & 0x20
    err = raises_naming(WHERE, R.validate, {"size": [1, 4], "counts": counts}, WHERE)
    assert "truncated" in str(err)
    raises_naming(WHERE, R.decode_counts, counts, WHERE)


@pytest.mark.parametrize("runs", [[6, -2], [-1, 5], [2, 3, -1], [0, 5, 2, -3], [1, 1, 1, -1, 2]])
def test_negative_runs_raise_even_when_the_sum_is_right(runs):
    counts = "".join(enc_num(d, min_chars(d)) for d in deltas(runs))
    assert R.decode_counts(counts).tolist() == runs
    size = [1, sum(runs)]
    err = raises_naming(WHERE, R.validate, {"size": size, "counts": counts}, WHERE)
    assert "negative" in str(err)
    raises_naming(WHERE, R.from_uncompressed, {"size": size, "counts": runs}, WHERE)


@pytest.mark.parametrize("counts", ["", b"", None, 4, 4.0, [], memoryview(b"4")], ids=["str", "bytes", "None", "int", "float", "list", "memoryview"])
def test_missing_or_wrong_type_counts_raise(counts):
    raises_naming(WHERE, R.validate, {"size": [1, 4], "counts": counts}, WHERE)


def test_run_encoded_in_too_many_characters_raises():
    # 8 characters: 0 padded with seven continuation characters.
    raises_naming(WHERE, R.decode_counts, "P" * 7 + "4", WHERE)
    raises_naming(WHERE, R.validate, {"size": [1, 4], "counts": "P" * 7 + "4"}, WHERE)


@pytest.mark.parametrize("obj", [None, [], "022", b"022", {"size": [1, 4]}, {"counts": "4"}, [[1, 4], "4"]], ids=repr)
def test_validate_needs_an_rle_dict(obj):
    raises_naming(WHERE, R.validate, obj, WHERE)


@pytest.mark.parametrize("counts", [[0, 2, 2], (0, 2, 2), np.array([0, 2, 2])], ids=repr)
def test_validate_rejects_uncompressed_counts(counts):
    err = raises_naming(WHERE, R.validate, {"size": [1, 4], "counts": counts}, WHERE)
    assert "uncompressed" in str(err)


def test_validate_expected_size():
    rle = {"size": [1, 4], "counts": "022"}
    assert R.validate(rle, WHERE, expected_size=[1, 4]) == rle
    assert R.validate(rle, WHERE, expected_size=(np.int64(1), 4)) == rle
    raises_naming(WHERE, R.validate, rle, WHERE, expected_size=[4, 1])
    raises_naming(WHERE, R.to_rle, rle, size=[2, 2], where=WHERE)
    raises_naming(WHERE, R.to_rle, {"size": [1, 4], "counts": [0, 2, 2]}, size=[2, 2], where=WHERE)
    raises_naming(WHERE, R.to_rle, G(1, 1, 0, 0), size=[2, 2], where=WHERE)


@pytest.mark.parametrize(
    "counts", [[0, 2, 3], [5], [0, -1, 5], [], [[0, 2, 2]], "abc", None, [1 << 70], [0, "x", 2]], ids=repr
)
def test_from_uncompressed_bad_counts_raise(counts):
    raises_naming(WHERE, R.from_uncompressed, {"size": [1, 4], "counts": counts}, WHERE)


def test_different_sizes_raise_never_silent_empty():
    a = R.encode(G(1, 1, 0, 0))
    b = R.encode(np.array([[1, 1], [0, 0]], bool))  # 2x2: same pixel count, different size
    c = R.encode(np.ones((4, 1), bool))  # 4x1
    # pycocotools itself silently returns size [0, 0] here
    assert _coco.merge([R._to_c(a), R._to_c(b)])["size"] == [0, 0]
    for fn, args in [
        (R.union, ([a, b],)),
        (R.union, ([a, a, c],)),
        (R.intersection_union, (a, b)),
        (R.intersection_area, (a, c)),
        (R.iou, (a, b)),
    ]:
        raises_naming(WHERE, fn, *args, where=WHERE)
    raises_naming(WHERE, R.union, [a, a], size=[2, 2], where=WHERE)
    raises_naming(WHERE, R.union, [], where=WHERE)


@pytest.mark.parametrize(
    "poly",
    [
        [0, 0, 1, 0, 1],  # odd
        [0, 0, 1, 0, 1, 1, 0],  # odd, >= 6
        [0, 0, 1, 0],  # too few
        [0, 0, 1, float("nan"), 1, 1],
        [0, 0, 1, 0, float("inf"), 1],
        [0, 0, "a", 0, 1, 1],
        [[0, 0], [1, 0, 1]],
    ],
    ids=repr,
)
def test_bad_polygons_raise(poly):
    raises_naming(WHERE, R.from_polygons, [poly], 4, 4, WHERE)
    raises_naming(WHERE, R.from_polygons, [[0, 0, 2, 0, 2, 2], poly], 4, 4, WHERE)


def test_to_rle_polygon_without_size_raises():
    err = raises_naming(WHERE, R.to_rle, [0, 0, 2, 0, 2, 2, 0, 2], where=WHERE)
    assert "size" in str(err)
    raises_naming(WHERE, R.to_rle, [[0, 0, 2, 0, 2, 2, 0, 2]], where=WHERE)


@pytest.mark.parametrize("obj", [None, 3, 2.5, "022", b"022", object()], ids=["None", "int", "float", "str", "bytes", "object"])
def test_to_rle_unknown_types_raise(obj):
    raises_naming(WHERE, R.to_rle, obj, size=[1, 4], where=WHERE)


@pytest.mark.parametrize("arr", [np.zeros(4, bool), np.zeros((2, 2, 2), bool), np.zeros((0, 3), bool), np.zeros((3, 0))])
def test_encode_bad_arrays_raise(arr):
    raises_naming("mask", R.encode, arr)
    with pytest.raises(RLEError):
        R.to_rle(arr, where=WHERE)


# --------------------------------------------------------------------------- 5. areas past 255


@pytest.mark.parametrize("n", [0, 1, 254, 255, 256, 300, 511, 600])
def test_areas_many(n):
    rng = np.random.default_rng(n)
    ms = [rng.random((3, 5)) < rng.random() for _ in range(n)]
    rles = [R.encode(m) for m in ms]
    got = R.areas(rles)
    assert got == [R.area(r) for r in rles] == [int(m.sum()) for m in ms]
    assert all(type(v) is int for v in got)


# --------------------------------------------------------------------------- 6. fuzzing


def _check_validated(out, h: int, w: int, counts) -> None:
    """A dict validate() accepted must be safe and consistent all the way through pycocotools."""
    assert out["size"] == [h, w]
    assert isinstance(out["counts"], str)
    expect_counts = counts.decode("ascii") if isinstance(counts, (bytes, bytearray)) else counts
    assert out["counts"] == expect_counts
    runs = R.decode_counts(out["counts"])
    assert runs.min() >= 0 and int(runs.sum()) == h * w
    fg = int(runs[1::2].sum())
    assert R.area(out) == fg  # pycocotools' own parser reads the same runs
    m = R.decode(out)
    assert m.shape == (h, w) and m.dtype == bool
    assert int(m.sum()) == fg
    again = R.encode(m)
    assert int(R.decode_counts(again["counts"]).sum()) == h * w
    assert R.area(again) == fg
    np.testing.assert_array_equal(R.decode(again), m)
    assert R.validate(again) == again


def _fuzz_validate(counts, h: int, w: int) -> None:
    try:
        out = R.validate({"size": [h, w], "counts": counts}, "fuzz")
    except RLEError as e:
        assert "fuzz" in str(e)
        record("validate", "refused")
        return
    record("validate", "accepted")
    _check_validated(out, h, w, counts)


sides = st.integers(1, 64)


# Random counts almost never sum to H*W: each test also runs one valid and one invalid explicit example, and
# @reaches checks that both branches of _fuzz_validate ran (the accepting one is fuzzed by the sized-to-fit test).
@reaches("validate")
@FUZZ
@given(st.binary(max_size=40), sides, sides)
@example(b"022", 1, 4)
@example(b"02", 1, 4)
def test_fuzz_validate_random_bytes(counts, h, w):
    _fuzz_validate(counts, h, w)


@reaches("validate")
@FUZZ
@given(st.text(max_size=40), sides, sides)
@example("022", 1, 4)
@example("é", 1, 4)
def test_fuzz_validate_random_text(counts, h, w):
    _fuzz_validate(counts, h, w)


@reaches("validate")
@FUZZ
@given(st.text(alphabet=st.characters(min_codepoint=40, max_codepoint=120), max_size=30), sides, sides)
@example("04", 1, 4)
@example("(", 1, 4)
def test_fuzz_validate_near_alphabet_text(counts, h, w):
    _fuzz_validate(counts, h, w)


@FUZZ
@given(count_strings(max_chars=6, max_numbers=10), st.data())
def test_fuzz_validate_alphabet_strings_sized_to_fit(counts, data):
    # Random strings of the COCO alphabet, sized so that the runs often sum to H*W: the accepted branch
    # is exercised far more than with random sizes.
    runs = fr_string(counts)
    total = sum(runs)
    if 0 < total <= 4096:
        divisors = [d for d in range(1, min(total, 64) + 1) if total % d == 0]
        h = data.draw(st.sampled_from(divisors))
        w = total // h
    else:
        h, w = data.draw(sides), data.draw(sides)
    try:
        out = R.validate({"size": [h, w], "counts": counts}, "fuzz")
    except RLEError as e:
        assert "fuzz" in str(e)
        assert min(runs) < 0 or total != h * w
        return
    assert min(runs) >= 0 and total == h * w
    _check_validated(out, h, w, counts)


@reaches("validate")
@FUZZ
@given(
    st.one_of(
        st.none(),
        st.integers(),
        st.floats(),
        st.text(max_size=3),
        st.lists(st.one_of(st.integers(-3, 70), st.floats(), st.booleans(), st.text(max_size=2), st.none()), max_size=3),
        st.tuples(st.integers(-3, 1 << 40), st.integers(-3, 1 << 40)),
        st.sampled_from([[1, 4], [4, 1], [2, 2], (2, 2), [2.0, 2], [1, 3]]),  # the accepted sizes, and near misses
    )
)
@example([2, 2])
@example([2, 3])
def test_fuzz_size(size):
    try:
        out = R.validate({"size": size, "counts": "4"}, "fuzz")
    except RLEError as e:
        assert "fuzz" in str(e)
        record("validate", "refused")
        return
    record("validate", "accepted")
    assert out["counts"] == "4" and out["size"] in ([1, 4], [4, 1], [2, 2])


@FUZZ
@given(count_strings(max_chars=6, max_numbers=15))
def test_fuzz_decode_counts_matches_reference(counts):
    want = fr_string(counts)
    got = R.decode_counts(counts)
    assert got.dtype == np.int64
    assert got.tolist() == want
    assert R.decode_counts(counts.encode("ascii")).tolist() == want


@FUZZ
@given(count_strings(max_chars=6, max_numbers=15))
def test_fuzz_decode_counts_matches_pycocotools_parser(counts):
    # pycocotools.mask.area sums the odd runs of its own parse (as uint32) and never loops, whatever the sum.
    # Up to 6 characters per number its parser and decode_counts must agree.
    runs = R.decode_counts(counts)
    c_area = int(_coco.area({"size": [1, 1], "counts": counts.encode("ascii")}))
    assert c_area == int(runs[1::2].sum()) % (1 << 32)


# One string for each status of the counts scan, in status order (1 to 6, then a valid one): the oracle test
# meets every status whatever hypothesis draws.
_EVERY_STATUS = [b"02~2", b"0P", b"PPPPPPP0", b"PPPPPP20", b"6N", b"", b"022"]
_COCO_TEXT = st.text(alphabet=st.characters(min_codepoint=48, max_codepoint=111), max_size=40)
_ANY_COUNTS = st.one_of(
    count_strings(max_chars=7, max_numbers=12),  # the grammar's numbers, 7-character ones included
    st.lists(numbers(10), min_size=1, max_size=6).map("".join),  # numbers of up to 10 characters
    _COCO_TEXT,  # any alphabet string: truncated, too long, ...
    st.binary(max_size=30),  # bytes outside the alphabet
).map(lambda c: c.encode("ascii") if isinstance(c, str) else c)


@pytest.mark.parametrize("counts, message", [
    (b"02~2", "W: 'counts' has a character outside the COCO alphabet ('0'..'o') at offset 2"),
    ("0P", "W: 'counts' is truncated (its last character continues a number)"),
    (b"PPPPPPP0", "W: 'counts' has a run encoded in more than 7 characters"),
    ("PPPPPP20", "W: 'counts' has a 7-character run that pycocotools would misread (value out of 32-bit range)"),
    (b"6N", "W: 'counts' decodes to a negative run length"),
    ("", "W: 'counts' is empty"),
    (b"023", "W: 'counts' runs sum to 5 pixels, expected H*W = 1*4 = 4"),
    ("é2", "W: 'counts' must be ASCII, got non-ASCII characters"),
    (memoryview(b"4"), "W: 'counts' must be a str or bytes, got memoryview"),
    ("P0~P", "W: 'counts' has a character outside the COCO alphabet ('0'..'o') at offset 2"),  # the first rule broken
    ("PPPPPPPP0P", "W: 'counts' is truncated (its last character continues a number)"),
    ("PPPPPP20PPPPPPP0", "W: 'counts' has a run encoded in more than 7 characters"),
], ids=lambda v: f"memoryview({bytes(v)!r})" if isinstance(v, memoryview) else repr(v))  # stable ids: xdist workers compare them
def test_golden_counts_messages(counts, message):
    """Each rule of the counts grammar has its message, built from the scan's status; a string that breaks
    several gets the first rule's (alphabet, truncation, length, the 7th character, negative run)."""
    with pytest.raises(RLEError) as info:
        R.validate({"size": [1, 4], "counts": counts}, "W")
    assert str(info.value) == message
    if "sum to" not in message and "negative" not in message:
        with pytest.raises(RLEError) as info:
            R.decode_counts(counts, "W")
        assert str(info.value) == message


@reaches("scan_counts")
@FUZZ
@given(st.lists(_ANY_COUNTS, min_size=1, max_size=8), st.integers(0, 2))
@example(_EVERY_STATUS, 0)
@example([b"PPPPPP20PPPPPPP0", b"P0~P", b"PPPPPPPP0P", b"PPPPPP10"], 1)  # several rules broken; a 7th '1' is read
@example([b"022"], 2)
@example([b"PPPPPPP"], 0)  # a 7th character that continues at the string's end: truncated (found by hypothesis)
def test_counts_scan_equals_the_reference_grammar(strings, start):
    """The compiled counts scan (``perckit.core.counts.scan_counts``, over an Arrow string column: sliced, and
    binary, int32 offsets; and ``scan_one``, the n = 1 column) gives each string the status, total, runs and
    offset of the reference grammar (``oracles.counts.scan``), and ``decode_counts`` / ``validate`` raise its
    message (every status is met: ``_EVERY_STATUS``)."""
    from perckit.core import counts as K
    from oracles import counts as oracle

    col = pa.array([b"0"] * start + strings, pa.binary()).slice(start)
    off = np.frombuffer(col.buffers()[1], dtype=np.int32)[col.offset : col.offset + len(col) + 1]
    data = np.frombuffer(col.buffers()[2], dtype=np.uint8)
    runs = np.zeros(len(data), dtype=np.int64)
    rows = K.scan_counts(off, data, runs)
    assert rows.shape == (len(strings), 4) and rows.dtype == np.int64
    assert (K.scan_counts(off, data) == rows).all()  # the runs asked for or not
    for i, raw in enumerate(strings):
        status, total, want_runs, offset = oracle.scan(raw)
        record("scan_counts", "accepted" if status == K.OK else "refused", str(status))
        got = rows[i].tolist()
        assert got[K.STATUS] == status, raw
        one_runs = np.zeros(len(raw), dtype=np.int64)
        assert K.scan_one(raw, one_runs) == tuple(got) == K.scan_one(raw)
        if status in (K.OK, K.NEGATIVE):
            n = got[K.RUNS]
            assert (got[K.TOTAL], n) == (total, len(want_runs))
            assert runs[off[i] : off[i] + n].tolist() == one_runs[:n].tolist() == want_runs
            assert R.decode_counts(raw, "fuzz").tolist() == want_runs
        else:
            if status == K.ALPHABET:
                assert got[K.OFFSET] == offset
            raises_naming("fuzz", R.decode_counts, raw, "fuzz")
        if status != K.OK:
            err = raises_naming("fuzz", R.validate, {"size": [1, 1], "counts": raw}, "fuzz")
            assert str(err) == str(R.counts_error(status, offset, "fuzz"))


@st.composite
def padded_counts(draw):
    """Valid runs written with non-minimal (padded) numbers: what another encoder may produce."""
    runs = draw(st.lists(st.integers(0, 40), min_size=1, max_size=10))
    if sum(runs) == 0:
        runs[-1] = 1
    chars = [draw(st.integers(min_chars(d), 7)) for d in deltas(runs)]
    return runs, chars, "".join(enc_num(d, n) for d, n in zip(deltas(runs), chars))


@FUZZ
@given(padded_counts())
def test_padded_numbers_are_read_like_pycocotools(rcs):
    runs, chars, counts = rcs
    assert fr_string(counts) == runs
    size = [1, sum(runs)]
    seven = [d for d, n in zip(deltas(runs), chars) if n == 7]
    try:
        out = R.validate({"size": size, "counts": counts}, "fuzz")
    except RLEError:
        # Only 7-character numbers, where pycocotools' 32-bit int arithmetic breaks, may be refused.
        assert seven
        return
    assert R.decode_counts(counts).tolist() == runs
    # pycocotools misreads a negative 7-character number: accepting one would let iou/merge loop forever
    assert all(d >= 0 for d in seven)
    expected = np.repeat(np.arange(len(runs)) % 2 == 1, runs)[None, :]
    assert R.area(out) == int(expected.sum())
    np.testing.assert_array_equal(R.decode(out), expected)
    assert R.encode(expected) == R.validate(R.encode(expected))


# pycocotools' rleFrString computes (c & 0x1f) << 30 in a 32-bit int and then -1 << 35 (undefined; x86
# gives -8) for a 7th character, so it reads a negative 7-character number as another value: runs that
# perckit sums to H*W no longer do in pycocotools, and iou/merge loop forever. validate must refuse them.
@pytest.mark.parametrize("runs, delta", [([0, 30, 0, 10], -20), ([0, 30, 0, 21], -9), ([0, 2000, 5, 1], -1999)])
def test_validate_refuses_counts_pycocotools_misreads(runs, delta):
    d = deltas(runs)
    assert d[3] == delta and min_chars(delta) < 7
    counts = "".join(enc_num(v, 7 if i == 3 else min_chars(v)) for i, v in enumerate(d))
    assert fr_string(counts) == runs
    size = [1, sum(runs)]
    # Safe probe (no loop): pycocotools reads a different foreground area from the same string.
    c_area = int(_coco.area({"size": size, "counts": counts.encode("ascii")}))
    assert c_area != runs[1] + runs[3]
    # What should happen: validate refuses what pycocotools would misread.
    raises_naming(WHERE, R.validate, {"size": size, "counts": counts}, WHERE)


@pytest.mark.parametrize("counts", [["1", "3"], [True, True, True, True], [1.5, 2.5]], ids=["str", "bool", "float"])
def test_uncompressed_counts_must_be_ints(counts):
    raises_naming(WHERE, R.from_uncompressed, {"size": [1, 4], "counts": counts}, WHERE)


def test_to_rle_accepts_array_counts():
    assert R.to_rle({"size": [1, 4], "counts": np.array([0, 2, 2])}) == {"size": [1, 4], "counts": "022"}


_coord = st.one_of(
    st.floats(min_value=-150, max_value=250),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
    st.integers(min_value=-150, max_value=250),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 60), st.integers(1, 60), st.lists(st.lists(_coord, min_size=0, max_size=12), min_size=1, max_size=3))
def test_plain_list_fast_path_equals_numpy_path(h, w, polys):
    """Flat Python lists take a numpy-free check; it must accept, rasterise and refuse exactly like the
    array path (which the other polygon tests pin down)."""

    def run(ps):
        try:
            return R.from_polygons(ps, h, w)
        except RLEError as e:
            return str(e)

    as_arrays = [np.asarray(p, dtype=np.float64) for p in polys]
    assert run(polys) == run(as_arrays)


def test_valid_many_agrees_with_validate():
    """``valid_many`` says True only for what ``validate`` accepts unchanged, on valid masks and on each way a
    mask can be wrong (its False means "validate it yourself")."""
    rng = np.random.default_rng(7)
    good = [R.encode(rng.random((h, w)) < p) for h, w, p in [(5, 7, 0.5), (1, 1, 1.0), (40, 30, 0.1), (3, 3, 0.0)]]
    cases = list(good) + [
        {"size": [5, 7], "counts": good[0]["counts"]},          # valid again (same counts, same size)
        {"size": [7, 5], "counts": good[0]["counts"]},          # sums to 35 too: valid for validate as well
        {"size": [5, 8], "counts": good[0]["counts"]},          # runs sum to 35, not 40
        {"size": [5, 7], "counts": good[0]["counts"][:-1]},     # truncated or short
        {"size": [5, 7], "counts": "é" + good[0]["counts"]},    # non-ASCII
        {"size": [5, 7], "counts": "~~"},                       # outside the alphabet
        {"size": [5, 7], "counts": ""},                         # empty
        {"size": [5, 7], "counts": good[0]["counts"].encode()},  # bytes: not taken here
        {"size": (5, 7), "counts": good[0]["counts"]},          # a tuple size: not taken here
        {"size": [0, 7], "counts": good[0]["counts"]},
        {"size": [True, 35], "counts": good[0]["counts"]},
        {"size": [5, 7]},
        [1, 2, 3],
        None,
    ]
    got = R.valid_many(cases)
    assert len(got) == len(cases)
    for case, ok in zip(cases, got):
        if ok:
            assert R.validate(case) == {"size": list(case["size"]), "counts": case["counts"]}
    expected_true = [True] * 6 + [False] * (len(cases) - 6)
    assert got == expected_true
    assert R.valid_many([]) == []


_MASK_OBJECTS = st.one_of(
    masks.map(lambda m: R.encode(m)),  # compressed (the size is the mask's own)
    masks.map(lambda m: {"size": list(m.shape), "counts": R.decode_counts(R.encode(m)["counts"]).tolist()}),  # uncompressed
    st.lists(st.lists(st.integers(-3, 12) | st.floats(-3, 12) | st.just(float("nan")), max_size=10), max_size=3),  # polygons
    st.fixed_dictionaries({"size": st.sampled_from([[4, 6], [4.0, 6], [True, 6], [6, 4]]),
                           "counts": st.sampled_from(["32c0", "32c", "", [3, 2, 19], [3, 2, 18], [3, -2, 23], [], [True, 2, 21],
                                                      [3, 2.0, 19], [2 ** 70]])}),
)


@reaches("to_rles", refused=False)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_MASK_OBJECTS, st.sampled_from([[4, 6], [6, 4], [1, 1]])), max_size=8))
@example([({"size": [4, 6], "counts": c}, [4, 6]) for c in ([3, 2, 19], [True, 2, 21], [3, 2.0, 19], [3, -2, 23], "32c0")])
@example([({"size": [4, 6], "counts": c}, [4, 6]) for c in ([3, 2, 19], [2 ** 70])])
def test_to_rles_gives_to_rle_or_leaves_the_mask_to_it(jobs):
    """Many masks at once: each is what ``to_rle`` gives it, or None where ``to_rle`` is left to decide (a mask
    it refuses is always left; one refused polygon leaves the others of its size too)."""
    objs, sizes = [o for o, _ in jobs], [list(s) for _, s in jobs]
    got = R.to_rles(objs, sizes)
    for obj, size, rle in zip(objs, sizes, got):
        try:
            want = R.to_rle(obj, size=size)
        except RLEError:
            want = None
        assert rle is None or rle == want
        if rle is not None:
            record("to_rles", "accepted")


def test_to_rles_takes_the_common_masks_at_once():
    jobs = [({"size": [4, 6], "counts": "32c0"}, [4, 6]), ({"size": [4, 6], "counts": [3, 2, 19]}, [4, 6]), ([[0, 0, 3, 0, 3, 3]], [4, 6]),
            ({"size": [6, 4], "counts": "32c0"}, [4, 6]), ({"size": [4, 6], "counts": [3, 2, 18]}, [4, 6])]
    got = R.to_rles([o for o, _ in jobs], [s for _, s in jobs])
    assert got[:3] == [R.to_rle(o, size=s) for o, s in jobs[:3]] and got[3:] == [None, None]
