"""The two nearest-neighbour rules of ``perckit.rle.resize_nearest`` equal their libraries: PIL's
``Image.NEAREST`` (``rule="pil"``) and OpenCV's ``INTER_NEAREST`` (``rule="opencv"``).

The index rule is checked against the library itself on every (source length, target length) pair up to 512,
on both axes; the resize of whole masks against the library's resize of the decoded mask. The integer rule
perckit used before (``i * src // dst``) is shown to differ from both, so these tests can fail.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from perckit import rle
from perckit.errors import OptionError

from oracles import masks as oracle

cv2 = pytest.importorskip("cv2", reason="opencv-python-headless is a perckit dependency; install it to check the OpenCV rule")
from PIL import Image  # noqa: E402  (Pillow is a hard dependency)

N = 512


def _library_index(rule: str, line: np.ndarray, dst: int, axis: int) -> np.ndarray:
    """The source index of each of ``dst`` target pixels along ``axis`` (1: a 1 x src row, 0: a src x 1 column)
    as the library resizes ``line`` (every pixel holds its own index + 1; 0 would be a pixel left empty)."""
    size = (dst, 1) if axis == 1 else (1, dst)  # (width, height)
    if rule == "opencv":
        out = cv2.resize(line, size, interpolation=cv2.INTER_NEAREST).astype(np.int64)
    else:
        out = np.asarray(line.resize(size, Image.NEAREST)).astype(np.int64)
    return out.ravel() - 1  # -1: a pixel the library left empty (perckit's index says where it reads instead)


def _line(rule: str, src: int, axis: int):
    idx = np.arange(1, src + 1, dtype=np.int32)
    a = idx[None, :] if axis == 1 else idx[:, None]
    return a.astype(np.float32) if rule == "opencv" else Image.fromarray(a, mode="I")


@pytest.mark.parametrize("rule", rle.RESIZE_RULES)
def test_each_rule_is_its_library_on_every_length_pair_up_to_512(rule):
    """Every (src, dst) pair up to 512 along the columns, every seventh along the rows."""
    old_differs = 0
    for src in range(1, N + 1):
        row, column = _line(rule, src, 1), _line(rule, src, 0)
        for dst in range(1, N + 1):
            ours = rle.nearest_index(src, dst, rule)
            lib = _library_index(rule, row, dst, 1)
            if not np.array_equal(ours, lib):
                pytest.fail(f"{rule}: {src} -> {dst} columns: perckit {ours.tolist()}, library {lib.tolist()}")
            if (src + dst) % 7 == 0 and not np.array_equal(ours, _library_index(rule, column, dst, 0)):
                pytest.fail(f"{rule}: {src} -> {dst} rows differ from the library")
            old_differs += not np.array_equal(np.minimum(np.arange(dst) * src // dst, src - 1), lib)
    # the integer rule perckit used before equals neither library (14,209 and 258,663 of the 262,144 pairs)
    assert old_differs == {"opencv": 14_209, "pil": 258_663}[rule]


masks = st.integers(1, 40).flatmap(lambda h: st.integers(1, 40).flatmap(
    lambda w: st.lists(st.booleans(), min_size=h * w, max_size=h * w).map(lambda b: np.array(b).reshape(h, w))))


@settings(max_examples=150, deadline=None)
@given(masks, st.integers(1, 90), st.integers(1, 90), st.sampled_from(rle.RESIZE_RULES))
def test_resize_nearest_is_the_library_resize_of_the_decoded_mask(m, h, w, rule):
    r = rle.encode(m)
    assert rle.resize_nearest(r, [h, w], rule=rule) == oracle.resize_nearest(r, [h, w], rule)


@pytest.mark.parametrize("rule", rle.RESIZE_RULES)
def test_resize_rules_on_release_sized_masks(rule):
    """A 536 x 960 R4D-Bench frame mask to a model's 480 x 854 output and back, and a 427 x 640 COCO mask to
    1024 x 1024: still the library's resize."""
    rng = np.random.default_rng(0)
    for (sh, sw), (dh, dw) in [((536, 960), (480, 854)), ((480, 854), (536, 960)), ((427, 640), (1024, 1024))]:
        m = np.zeros((sh, sw), dtype=bool)
        y, x = rng.integers(0, sh // 2), rng.integers(0, sw // 2)
        m[y:y + sh // 3, x:x + sw // 3] = True
        m ^= rng.random((sh, sw)) < 0.01
        r = rle.encode(m)
        assert rle.resize_nearest(r, [dh, dw], rule=rule) == oracle.resize_nearest(r, [dh, dw], rule)


def test_an_unknown_rule_is_an_option_error():
    with pytest.raises(OptionError, match=r"nearest-neighbour rule 'nearest': expected one of \['pil', 'opencv'\]"):
        rle.resize_nearest(rle.encode(np.ones((2, 2), bool)), [3, 3], rule="nearest")
    with pytest.raises(TypeError):
        rle.resize_nearest(rle.encode(np.ones((2, 2), bool)), [3, 3])  # the rule is named, never implied


def test_the_rules_differ_where_the_libraries_do():
    """3 -> 2 columns: OpenCV reads source columns 0 and 1, PIL the pixels under the centres, 0 and 2."""
    m = np.array([[True, False, True]])
    assert rle.decode(rle.resize_nearest(rle.encode(m), [1, 2], rule="opencv")).tolist() == [[1, 0]]
    assert rle.decode(rle.resize_nearest(rle.encode(m), [1, 2], rule="pil")).tolist() == [[1, 1]]
