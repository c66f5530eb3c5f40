"""perckit.draw.figures: outlines, palette, legend, captions, time axis, on hand-made masks (golden pixels)."""

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


def test_legend_and_caption_present_and_deterministic():
    fig = figures.annotated(figures.mask_overlay(None, rle.encode(square()), None, scale=4), "prediction: frame 3 dropped")
    assert fig.width >= figures.MIN_WIDTH
    a = np.asarray(fig)
    strip = a[36 * (fig.width // 36):]  # below the upscaled figure
    for colour in (figures.PRED_COLOUR, figures.GT_COLOUR, figures.OVERLAP_COLOUR):
        assert (strip.reshape(-1, 3) == colour).all(1).any(), colour
    import io

    b1, b2 = io.BytesIO(), io.BytesIO()
    fig.save(b1, "PNG")
    figures.annotated(figures.mask_overlay(None, rle.encode(square()), None, scale=4), "prediction: frame 3 dropped").save(b2, "PNG")
    assert b1.getvalue() == b2.getvalue()


def test_waveform_has_time_axis_and_both_windows():
    wave = np.sin(np.linspace(0, 60, 16000)).astype(np.float32)
    im = figures.waveform_plot(wave, 16000, (0.2, 0.4), (0.3, 0.5), width=800)
    a = np.asarray(im)
    assert im.height > 140 and (a[140, :] == 0).all()  # the axis line
    row = a[5]
    assert (row == figures.GT_COLOUR).all(1).any() and (a[135] == figures.PRED_COLOUR).all(1).any()
