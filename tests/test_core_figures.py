"""perckit.draw.figures: outlines, palette, legend, captions, time axis, on hand-made masks (golden pixels)."""

import re

import numpy as np
from hypothesis import given, settings, strategies as st

from perckit.draw import figures
from perckit import rle


def square(h=9, w=9, y=2, x=2, n=5):
    m = np.zeros((h, w), bool)
    m[y:y + n, x:x + n] = True
    return m


def test_outline_is_exactly_the_boundary_of_a_5x5_square():
    m = square()
    out = figures.outline(m)
    expected = m.copy()
    expected[3:6, 3:6] = False  # the 3x3 interior
    assert (out == expected).all() and out.sum() == 16


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_outline_and_paint_equal_the_numpy_rule(h, w, width, seed):
    """OpenCV's erosion and lookup-table fill (issue 32) give the pixels of the numpy rule (``oracles.previews``:
    shifts of the 4-neighbourhood, the blend over the whole picture), masks touching the border included."""
    from oracles import previews as old

    rng = np.random.default_rng(seed)
    masks = [(rng.random((h, w)) < p, figures.OBJECT_COLOURS[i]) for i, p in enumerate((0.3, 0.8, 0.0))]
    assert (figures.outline(masks[0][0], width) == old.outline(masks[0][0], width)).all()
    base = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    assert (figures.paint_masks(base, masks, line=width) == old.paint_masks(base, masks, line=width)).all()


def test_a_shrunk_canvas_is_within_one_level_of_pillows_bilinear_on_a_smooth_picture():
    """The canvas shrink (OpenCV ``INTER_LINEAR_EXACT``, issue 32; was Pillow's ``BILINEAR``): a smooth 640x480 gradient at
    512x384 differs by at most 1 level; at 4x smaller (``INTER_AREA``) by at most 2; enlarged, nearest-neighbour."""
    import io

    from PIL import Image

    y, x = np.mgrid[0:480, 0:640]
    smooth = np.stack([x * 255 / 639, y * 255 / 479, (x + y) * 255 / 1118], -1).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(smooth).save(buf, "PNG")
    for h, w, tol in ((384, 512, 1), (120, 160, 2)):
        pillow = np.asarray(Image.fromarray(smooth).resize((w, h), Image.BILINEAR), dtype=int)
        assert np.abs(figures.open_canvas(buf.getvalue(), h, w).astype(int) - pillow).max() <= tol
    tiny = smooth[:3, :4]
    buf = io.BytesIO()
    Image.fromarray(tiny).save(buf, "PNG")
    assert (figures.open_canvas(buf.getvalue(), 6, 8) == np.repeat(np.repeat(tiny, 2, 0), 2, 1)).all()


def test_overlay_palette_at_known_pixels():
    gt = rle.encode(square())
    pred = rle.encode(square(x=4))
    a = np.asarray(figures.mask_overlay(None, gt, pred))
    assert tuple(a[2, 2]) == figures.GT_COLOUR  # GT outline corner (prediction starts at x=4)
    assert tuple(a[2, 8]) == figures.PRED_COLOUR  # prediction outline corner
    assert tuple(a[0, 0]) == figures.NEUTRAL  # outside both
    inner = a[4, 5].astype(int)  # inside both: neutral blended with bluish green
    want = (1 - figures.FILL_ALPHA) * np.array(figures.NEUTRAL) + figures.FILL_ALPHA * np.array(figures.OVERLAP_COLOUR)
    assert np.abs(inner - want).max() <= 1


def test_legend_html_gives_each_colour_its_swatch():
    from perckit.draw.report import legend_html

    page = legend_html([*figures.WINDOW_LEGEND, ("a note without a colour", None)])
    swatches = re.findall(r"<li><span class=sw style='background:rgb\(([\d, ]+)\);border-color:rgb\(([\d, ]+)\)'></span>([^<]+)</li>", page)
    assert [(label, tuple(map(int, c.split(",")))) for _, c, label in swatches] == list(figures.WINDOW_LEGEND)
    assert [tuple(map(int, f.split(","))) for f, _, _ in swatches] == [figures.light(c) for _, c in figures.WINDOW_LEGEND]
    assert page.endswith("<li>a note without a colour</li></ul>")


def test_enlarged_is_the_figure_alone_scaled_by_an_integer():
    """The demo's figures carry no burned-in caption or legend (issue 33): the picture is the drawing, scaled."""
    fig = figures.mask_overlay(None, rle.encode(square()), None, scale=4)  # 36 x 36
    big = figures.enlarged(fig)
    k = -(-figures.MIN_WIDTH // 36)
    assert big.size == (36 * k, 36 * k) and big.width >= figures.MIN_WIDTH
    assert np.array_equal(np.asarray(big), np.asarray(fig.resize(big.size, 0)))  # nearest-neighbour, nothing added
    wide = figures.waveform_plot(np.zeros(800, np.float32), 16000)
    assert figures.enlarged(wide) is wide  # wide enough already


def test_light_is_the_fill_over_white():
    assert figures.light(figures.BLACK) == (165, 165, 165) and figures.light((255, 255, 255)) == (255, 255, 255)


def test_waveform_has_time_axis_and_both_windows():
    wave = np.sin(np.linspace(0, 60, 16000)).astype(np.float32)
    im = figures.waveform_plot(wave, 16000, (0.2, 0.4), (0.3, 0.5), width=800)
    a = np.asarray(im)
    assert im.height > 140 and (a[140, :] == 0).all()  # the axis line
    row = a[5]
    assert (row == figures.GT_COLOUR).all(1).any() and (a[135] == figures.PRED_COLOUR).all(1).any()
