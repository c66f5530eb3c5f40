"""av_edit_quality, the exact model-free metrics on arrays: PSNR and SSIM golden values on hand-made 2x2 / 4x4 frames,
scikit-image agreement, background preservation, and the frame-alignment rules."""

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.edit_quality import box_region, clip, edit_box
from oracles import av_edit_pixel as old_pixel
from skimage.metrics import structural_similarity

from perckit.errors import OptionError, PredictionError
from perckit.reason_av_edit.quality import pixel

C1 = (0.01 * 255) ** 2


def test_psnr_golden_on_3x3_frames():
    a = np.zeros((3, 3, 3), np.uint8)
    b = a.copy()
    b[0, 0, 0] = 10  # one of 27 values off by 10: MSE = 100 / 27
    everywhere, centre = np.ones((3, 3), bool), np.ones((1, 1), bool)
    assert pixel.frame_sums(a, b, everywhere, centre, 3)[:2] == [100, 100]
    assert pixel.frame_scores(a, b, None, win_size=3)["psnr"] == 10 * math.log10(255 ** 2 * 27 / 100)
    assert pixel.psnr_from_mse(100 / 27, 100.0) == 10 * math.log10(255 ** 2 * 27 / 100)
    assert pixel.psnr_from_mse(0.0, 100.0) == 100.0  # identical frames: the cap
    assert pixel.psnr_from_mse(1e-20, 100.0) == 100.0  # above the cap: the cap
    region = np.zeros((3, 3), bool)
    region[0, 0] = True  # the differing pixel left out: background MSE 0 over 24 values
    assert pixel.frame_sums(a, b, ~region, centre, 3)[:2] == [100, 0]
    assert pixel.frame_scores(a, b, region, win_size=3)["bg_psnr"] == 100.0
    full = pixel.frame_scores(a, b, np.ones((3, 3), bool), win_size=3)
    assert full["bg_psnr"] is None and full["bg_ssim"] is None


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
    assert exact["ssim"] == pytest.approx(math.fsum(per) / 3, abs=1e-15)  # the map's sum over 3 x interior pixels
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


def skimage_scores(a, b, region, win, cap=100.0):
    """The four numbers straight from the definition: scikit-image's structural_similarity (its value, and the full map
    of the frame with the region pasted back from the source) and numpy's mean of the squared differences."""
    h, w = a.shape[:2]
    p = (win - 1) // 2
    bg = np.ones((h, w), bool) if region is None or not region.any() else ~region
    pasted = a if region is None else np.where(region[..., None], b, a)
    ssim = structural_similarity(a, b, data_range=255, channel_axis=-1, win_size=win)
    bg_map = structural_similarity(pasted, b, data_range=255, channel_axis=-1, win_size=win, full=True)[1][p : h - p, p : w - p].mean(-1)
    se = ((a.astype(float) - b.astype(float)) ** 2).sum(-1)
    keep = bg[p : h - p, p : w - p]
    return {"psnr": pixel.psnr_from_mse(se.sum() / (3 * se.size), cap), "ssim": ssim,
            "bg_psnr": pixel.psnr_from_mse(se[bg].sum() / (3 * bg.sum()), cap) if bg.any() else None,
            "bg_ssim": bg_map[keep].mean() if keep.any() else None}


def make_region(kind, h, w, rng):
    """A target region of one of the shapes the tests cover (None: no region)."""
    r = np.zeros((h, w), bool)
    if kind == "none":
        return None
    if kind == "full":
        r[:] = True
    elif kind == "pixel":
        r[rng.integers(h), rng.integers(w)] = True
    elif kind in ("box", "two boxes"):
        for _ in range(1 if kind == "box" else 2):
            y0, x0 = rng.integers(h), rng.integers(w)
            r[y0 : y0 + rng.integers(1, h + 1), x0 : x0 + rng.integers(1, w + 1)] = True
    elif kind == "edge":  # a band along one side of the frame
        side = rng.integers(4)
        k = int(rng.integers(1, max(2, min(h, w) // 2)))
        r[[slice(0, k), slice(h - k, h), slice(None), slice(None)][side], [slice(None), slice(None), slice(0, k), slice(w - k, w)][side]] = True
    elif kind == "scattered":
        r = rng.random((h, w)) < 0.1
    return r  # "empty": no pixel


REGION_KINDS = ["none", "empty", "full", "pixel", "box", "two boxes", "edge", "scattered"]


def assert_scores(got, want, tol):
    for k in pixel.PIXEL_KEYS:
        assert (got[k] is None) == (want[k] is None), k
        if k.endswith("psnr") and want[k] is not None:
            assert got[k] == want[k], k  # exact integer sums of squares: the same division
        elif want[k] is not None:
            assert got[k] == pytest.approx(want[k], abs=tol), k


@settings(max_examples=120, deadline=None)
@given(h=st.integers(3, 48), w=st.integers(3, 48), win=st.sampled_from([3, 5, 7, 9, 11, 15, 17, 21]),
       seed=st.integers(0, 2 ** 31), flat=st.booleans(), kind=st.sampled_from(REGION_KINDS))
def test_frame_scores_are_scikit_image_and_the_previous_output(h, w, win, seed, flat, kind):
    """The compiled path equals scikit-image's structural_similarity and numpy's MSE (within 1e-12; the PSNRs exactly)
    and the output of the previous implementation (tests/oracles/av_edit_pixel.py, whole-frame maps), on every frame
    shape, window and region shape: none, empty, full, one pixel, boxes touching the edges or not, two boxes apart,
    a band along an edge, scattered pixels; flat frames at the extremes 0 / 255, where the variance terms cancel."""
    h, w = max(h, win), max(w, win)
    rng = np.random.default_rng(seed)
    if flat:
        a = np.full((h, w, 3), rng.choice([0, 255]), np.uint8)
        b = rng.choice([0, 255], size=(h, w, 3)).astype(np.uint8)
    else:
        a = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        b = np.clip(a.astype(int) + rng.integers(-40, 41, (h, w, 3)), 0, 255).astype(np.uint8)
    region = make_region(kind, h, w, rng)
    got = pixel.frame_scores(a, b, region, win_size=win)
    assert_scores(got, skimage_scores(a, b, region, win), 1e-12)
    assert_scores(got, old_pixel.frame_scores(a, b, region, win_size=win), 1e-12)
    assert_scores(pixel.frame_scores(a, b, region, win_size=win, ssim_impl="skimage"), skimage_scores(a, b, region, win), 1e-12)


def real_frames(seed=0, h=480, w=832):
    """A 480 x 832 source (smooth texture) and an edit: noise everywhere, the region redrawn."""
    import cv2

    rng = np.random.default_rng(seed)
    b = cv2.GaussianBlur(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), (0, 0), 3)
    b = np.clip(b.astype(int) * 3 - 256, 0, 255).astype(np.uint8)
    a = np.clip(b.astype(int) + rng.integers(-12, 13, b.shape), 0, 255).astype(np.uint8)
    return a, b


@pytest.mark.parametrize("kind, win", [("ellipse", 7), ("edge box", 7), ("two boxes", 7), ("full", 7), ("none", 7), ("ellipse", 11),
                                       ("edge box", 21)])
def test_real_size_frames_are_scikit_image(kind, win):
    """At the release's frame size (480 x 832): scikit-image within 1e-9 (the issue asks 1e-6), the previous output
    within 1e-12."""
    a, b = real_frames()
    h, w = a.shape[:2]
    yy, xx = np.mgrid[:h, :w]
    region = {"ellipse": ((xx - 0.55 * w) / (0.2 * w)) ** 2 + ((yy - 0.5 * h) / (0.25 * h)) ** 2 <= 1,
              "edge box": (yy < 100) & (xx > w - 300), "two boxes": ((yy > 40) & (yy < 90) & (xx < 60)) | ((yy > 300) & (xx > 700)),
              "full": np.ones((h, w), bool), "none": None}[kind]
    if region is not None:
        a[region] = 255 - a[region]
    got = pixel.frame_scores(a, b, region, win_size=win)
    assert_scores(got, skimage_scores(a, b, region, win), 1e-9)
    assert_scores(got, old_pixel.frame_scores(a, b, region, win_size=win), 1e-12)


def test_the_torch_path_equals_the_compiled_path():
    """pixel_device: the same four numbers on a torch device (CPU torch here) within 1e-10 (the issue asks 1e-5), with
    and without a region, window 3 to 21."""
    pytest.importorskip("torch", reason="the pixel_device path needs torch (pip install torch)")
    rng = np.random.default_rng(5)
    src = clip(t=3, h=40, w=56, seed=1)
    ed = np.clip(src.astype(int) + rng.integers(-30, 31, src.shape), 0, 255).astype(np.uint8)
    region = box_region(3, 40, 56, (0, 10, 20, 40))  # touches the left and bottom edges
    region[1] = False  # a frame without region
    region[2, :, :] = True  # a frame without background
    for win in (3, 7, 21):
        for r in (None, region):
            want = pixel.clip_scores(ed, src, r, win_size=win)
            got = pixel.clip_scores(ed, src, r, win_size=win, device="cpu")
            assert got.keys() == want.keys() and all(got[k] == pytest.approx(want[k], abs=1e-10) for k in want)
    with pytest.raises(OptionError, match=r"option 'pixel_device': expected a torch device this machine has .*got 'nope'"):
        pixel.clip_scores(ed, src, None, device="nope")
    with pytest.raises(OptionError, match=r"option 'pixel_device': 'cpu' computes ssim_impl='boxsum'; got ssim_impl='skimage'"):
        pixel.clip_scores(ed, src, None, device="cpu", ssim_impl="skimage")


def test_without_torch_a_pixel_device_is_an_option_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    pixel.torch_device.cache_clear()
    try:
        with pytest.raises(OptionError, match=r"option 'pixel_device': 'cuda' needs torch \(pip install torch\); pixel_device=None"):
            pixel.torch_device("cuda")
    finally:
        pixel.torch_device.cache_clear()
    src = clip(t=1, h=8, w=8)
    assert pixel.clip_scores(src, src, None)["ssim"] == 1.0  # the default path needs no torch


def test_the_default_path_does_not_import_torch():
    code = ("import sys, numpy as np; from perckit.reason_av_edit.quality import metric, pixel; "
            "f = np.random.default_rng(0).integers(0, 256, (2, 16, 16, 3), dtype=np.uint8); "
            "r = np.zeros((2, 16, 16), bool); r[:, 4:9, 4:9] = True; pixel.clip_scores(f, f[::-1].copy(), r); "
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "False", done.stderr


def test_the_region_threshold_is_the_rounded_bt601_luma_on_every_colour():
    """decode.gray_above (compiled, no division) is ``(299 R + 587 G + 114 B + 500) // 1000 > threshold`` on all 2^24
    RGB colours, for the thresholds at the ends and around the default 127."""
    from perckit.reason_av_edit.quality.decode import gray_above

    v = np.arange(256, dtype=np.int32)
    luma = (299 * v[:, None, None] + 587 * v[None, :, None] + 114 * v[None, None, :] + 500) // 1000  # [R, G, B]
    frames = np.empty((256, 256, 256, 3), np.uint8)  # (T, H, W, 3): frame R, row G, column B
    frames[..., 0], frames[..., 1], frames[..., 2] = v[:, None, None], v[None, :, None], v[None, None, :]
    for threshold in (0, 1, 126, 127, 128, 254, 255):
        assert np.array_equal(gray_above(frames, threshold), luma > threshold)
