"""av_edit_quality, the exact model-free metrics on arrays: PSNR and SSIM golden values on hand-made 2x2 / 4x4 frames,
scikit-image agreement, background preservation, and the frame-alignment rules."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.edit_quality import box_region, clip, edit_box
from skimage.metrics import structural_similarity

from perckit.errors import PredictionError
from perckit.reason_av_edit.quality import pixel

C1 = (0.01 * 255) ** 2


def test_psnr_golden_on_2x2_frames():
    a = np.zeros((2, 2, 3), np.uint8)
    b = a.copy()
    b[0, 0, 0] = 10  # one of 12 values off by 10: MSE = 100 / 12
    assert pixel.frame_mse(a, b) == 100 / 12
    assert pixel.psnr_from_mse(100 / 12, 100.0) == 10 * math.log10(255 ** 2 * 12 / 100)
    assert pixel.psnr_from_mse(0.0, 100.0) == 100.0  # identical frames: the cap
    assert pixel.psnr_from_mse(1e-20, 100.0) == 100.0  # above the cap: the cap
    keep = np.array([[False, True], [True, True]])  # the differing pixel left out: MSE 0 over 9 values
    assert pixel.frame_mse(a, b, keep) == 0.0
    assert pixel.frame_mse(a, b, np.zeros((2, 2), bool)) is None


def test_ssim_golden_on_constant_4x4_frames():
    a = np.full((1, 4, 4, 3), 100, np.uint8)
    b = np.full((1, 4, 4, 3), 110, np.uint8)
    want = (2 * 100 * 110 + C1) / (100 ** 2 + 110 ** 2 + C1)  # zero variance: the luminance term alone
    out = pixel.clip_scores(a, b, None, win_size=3)
    assert out["ssim"] == pytest.approx(want, rel=1e-12) and out["bg_ssim"] == pytest.approx(want, rel=1e-12)
    assert out["psnr"] == 10 * math.log10(255 ** 2 / 100) and out["bg_psnr"] == out["psnr"]
    same = pixel.clip_scores(a, a, None, win_size=3)
    assert (same["ssim"], same["psnr"], same["bg_ssim"], same["bg_psnr"]) == (1.0, 100.0, 1.0, 100.0)


def test_ssim_is_scikit_image_per_frame_then_the_mean():
    src = clip(t=3, h=16, w=20, seed=1)
    ed = clip(t=3, h=16, w=20, seed=2)
    per = [structural_similarity(ed[j], src[j], data_range=255, channel_axis=-1) for j in range(3)]
    exact = pixel.clip_scores(ed, src, None, ssim_impl="skimage")
    assert exact["ssim"] == math.fsum(per) / 3
    out = pixel.clip_scores(ed, src, None)  # the default: the same definition from exact window sums
    assert out["ssim"] == pytest.approx(exact["ssim"], abs=1e-14) and out["ssim"] != pytest.approx(exact["ssim"] + 1e-12, abs=1e-14)
    assert out["bg_ssim"] == pytest.approx(out["ssim"], abs=1e-12)  # no region: bg is the whole interior
    mse = [np.mean((ed[j].astype(float) - src[j].astype(float)) ** 2) for j in range(3)]
    assert out["psnr"] == pytest.approx(math.fsum(10 * math.log10(255 ** 2 / m) for m in mse) / 3, rel=1e-15)
    assert (out["num_frames"], out["num_bg_frames"]) == (3, 3)


def test_an_edit_inside_the_region_keeps_bg_perfect():
    src = clip(t=4, h=32, w=32)
    box = (8, 8, 20, 20)
    ed = edit_box(src, box, 0)
    out = pixel.clip_scores(ed, src, box_region(4, 32, 32, box))
    assert out["bg_psnr"] == 100.0 and out["bg_ssim"] == 1.0
    assert out["psnr"] < 30 and out["ssim"] < 0.95


def test_a_background_edit_is_caught_by_bg():
    src = clip(t=4, h=32, w=32)
    ed = edit_box(src, (24, 0, 32, 8), 0)  # outside the region
    out = pixel.clip_scores(ed, src, box_region(4, 32, 32, (8, 8, 20, 20)))
    assert out["bg_psnr"] < 30 and out["bg_ssim"] < 0.99
    # the background MSE is over the background pixels only: the same squared error over fewer pixels
    bg = ~box_region(4, 32, 32, (8, 8, 20, 20))[0]
    mse = [np.sum((ed[j].astype(float) - src[j].astype(float)) ** 2) / (bg.sum() * 3) for j in range(4)]
    assert out["bg_psnr"] == pytest.approx(math.fsum(10 * math.log10(255 ** 2 / m) for m in mse) / 4, rel=1e-12)


def test_a_region_covering_the_frame_leaves_bg_undefined():
    src = clip(t=2, h=8, w=8)
    out = pixel.clip_scores(src, src, np.ones((2, 8, 8), bool))
    assert out["bg_psnr"] is None and out["bg_ssim"] is None and out["num_bg_frames"] == 0 and out["ssim"] == 1.0
    # only the frames with a background enter the bg means
    region = np.zeros((2, 8, 8), bool)
    region[0] = True
    out = pixel.clip_scores(src, src, region)
    assert out["bg_psnr"] == 100.0 and out["num_bg_frames"] == 1


def test_frames_smaller_than_the_ssim_window_are_refused():
    a = np.zeros((1, 4, 4, 3), np.uint8)
    with pytest.raises(PredictionError, match=r"sample: frames of 4 x 4 are smaller than the SSIM window ssim_win_size=7"):
        pixel.clip_scores(a, a, None)
    with pytest.raises(PredictionError, match=r"expected uint8 RGB frames"):
        pixel.clip_scores(a.astype(np.float32), a, None, win_size=3)


def test_resample_index_is_the_nearest_frame():
    assert pixel.resample_index(3, 6).tolist() == [0, 0, 1, 1, 2, 2]
    assert pixel.resample_index(6, 3).tolist() == [1, 3, 5]
    assert pixel.resample_index(4, 4).tolist() == [0, 1, 2, 3]


def test_conform_refuses_or_aligns():
    src = clip(t=4, h=8, w=8)
    region = box_region(4, 8, 8, (2, 2, 4, 4))
    longer = clip(t=6, h=8, w=8, seed=3)
    with pytest.raises(PredictionError, match=r"sample 's': the edited video has 6 frames, the source 4 .*frame_mismatch='truncate'.*'resample'"):
        pixel.conform(longer, src, region, None, None, "sample 's'")
    e, s, r = pixel.conform(longer, src, region, "truncate", None, "x")
    assert e.shape == s.shape == (4, 8, 8, 3) and (e == longer[:4]).all() and r.shape == (4, 8, 8)
    short = longer[:2]
    e, s, r = pixel.conform(short, src, region, "truncate", None, "x")
    assert e.shape[0] == s.shape[0] == r.shape[0] == 2
    e, s, r = pixel.conform(short, src, region, "resample", None, "x")
    assert e.shape == src.shape and (e == short[[0, 0, 1, 1]]).all() and s is src
    wide = clip(t=4, h=8, w=16, seed=4)
    with pytest.raises(PredictionError, match=r"the edited video has 4 frames of 16 x 8, the source 4 frames of 8 x 8 .*resize_edited='bilinear'"):
        pixel.conform(wide, src, region, None, None, "x")
    cv2 = pytest.importorskip("cv2", reason="resize_edited='bilinear' needs OpenCV")
    e, _, _ = pixel.conform(wide, src, region, None, "bilinear", "x")
    assert e.shape == src.shape and (e[0] == cv2.resize(wide[0], (8, 8), interpolation=cv2.INTER_LINEAR)).all()


@settings(max_examples=60, deadline=None)
@given(h=st.integers(3, 40), w=st.integers(3, 40), win=st.sampled_from([3, 5, 7, 11, 15, 17, 21]),
       seed=st.integers(0, 2 ** 31), flat=st.booleans())
def test_boxsum_ssim_is_scikit_image_to_rounding(h, w, win, seed, flat):
    """The default SSIM (exact window sums; float32 sums up to a 15 x 15 window, float64 above) equals scikit-image's
    structural_similarity, its full map and the bg map on every frame shape, window and value range (flat frames
    at the extremes 0 / 255, where the variance terms cancel)."""
    if min(h, w) < win:
        h, w = max(h, win), max(w, win)
    rng = np.random.default_rng(seed)
    if flat:
        a = np.full((h, w, 3), rng.choice([0, 255]), np.uint8)
        b = rng.choice([0, 255], size=(h, w, 3)).astype(np.uint8)
    else:
        a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        b = np.clip(a.astype(int) + rng.integers(-40, 41, (h, w, 3)), 0, 255).astype(np.uint8)
    want, full = structural_similarity(a, b, data_range=255, channel_axis=-1, win_size=win, full=True)
    got, smap = pixel.ssim_frame(a, b, win)
    p = (win - 1) // 2
    assert got == pytest.approx(want, abs=1e-12)
    np.testing.assert_allclose(smap, full[p : h - p, p : w - p].mean(axis=-1), rtol=0, atol=1e-12)
    region = np.zeros((h, w), bool)
    region[: h // 2, : w // 2] = True
    fast = pixel.frame_scores(a, b, region, win_size=win)
    slow = pixel.frame_scores(a, b, region, win_size=win, ssim_impl="skimage")
    for k in ("ssim", "bg_ssim"):
        assert (fast[k] is None) == (slow[k] is None)
        if fast[k] is not None:
            assert fast[k] == pytest.approx(slow[k], abs=1e-12)
    assert (fast["psnr"], fast["bg_psnr"]) == (slow["psnr"], slow["bg_psnr"])
