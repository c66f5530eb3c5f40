"""perckit.draw.figures: outlines, palette, legend, captions, time axis, on hand-made masks (golden pixels)."""

import re

import numpy as np

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
