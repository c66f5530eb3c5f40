"""DeSync (Synchformer, as av-benchmark) and PEAVS for metrics/av_edit_quality.

The numpy math (offset grid, windows, logits -> offsets, the mean, the Synchformer input preparation) has
golden values worked out by hand. The torch glue runs with a *stand-in* of Synchformer: a small module with
the same three calls (``extract_vfeats``, ``extract_afeats``, ``compare_v_a``) and shapes, not the real
architecture (av-benchmark, which holds it, is not on PyPI and not installed here); it records its inputs
so the tests check what Synchformer would be fed. PEAVS is read from the official results CSV.
"""

from __future__ import annotations

import math
import sys
import types

import numpy as np
import pytest

from perckit.errors import InputNotFoundError, OptionError, PredictionError
from perckit.reason_av_edit.quality import formulas as ds
from perckit.reason_av_edit.quality.models import BY_KEY, ModelMetric, ModelOptions, ModelUnavailable
from perckit.reason_av_edit.quality.models.base import Clip, QualitySample, mean_of
from perckit.reason_av_edit.quality.models import peavs as pv

# ---------------------------------------------------------------------------------------------- math


def test_offset_grid_is_21_classes_from_minus_2_to_2_s():
    g = ds.offset_grid()
    assert g.shape == (21,)
    assert g[0] == -2.0 and g[10] == 0.0 and g[20] == 2.0
    np.testing.assert_allclose(np.diff(g), 0.2)
    with pytest.raises(OptionError):
        ds.offset_grid(n=2)


def test_frame_count_floors_whole_frames_at_25_fps():
    assert ds.frame_count(4.84) == 121  # 4.84 * 25 = 121.00000000000001
    assert ds.frame_count(2.6) == 65
    assert ds.frame_count(4.8) == 120
    assert ds.frame_count(4.79) == 119
    with pytest.raises(OptionError):
        ds.frame_count(float("nan"))


def test_window_constants_are_4_8_s_of_14_segments():
    assert ds.DESYNC_WINDOW_FRAMES == 120 and ds.DESYNC_WINDOW_SAMPLES == 76800
    assert math.isclose(ds.DESYNC_WINDOW_S, 4.8)
    assert ds.SEGMENT_SAMPLES == 10240 and ds.STEP_SAMPLES == 5120


@pytest.mark.parametrize(
    "duration, starts",
    [
        (4.8, (0.0, 0.0)),
        (4.84, (0.0, 0.0)),  # 121 frames: the last start on the 8-frame grid is still 0
        (5.12, (0.0, 0.32)),  # 128 frames: one stride later
        (6.0, (0.0, 0.96)),  # 150 frames: (150 - 120) // 8 = 3 strides
        (8.0, (0.0, 3.2)),  # 200 frames: 10 strides = 80 frames
        (4.79, ()),  # shorter than the window
        (2.6, ()),
    ],
)
def test_window_starts_first_and_last_on_the_segment_grid(duration, starts):
    got = ds.window_starts(duration)
    assert len(got) == len(starts)
    np.testing.assert_allclose(got, starts)


def test_last_window_is_av_benchmarks_last_14_segments():
    # av-benchmark: S = (T - 16) // 8 + 1 segments, compares segments [S - 14, S): first frame 8 (S - 14)
    for t in range(120, 400):
        s = (t - 16) // 8 + 1
        assert ds.window_starts(t / 25.0)[1] * 25.0 == pytest.approx(8 * (s - 14))


def test_window_must_be_whole_segments():
    with pytest.raises(OptionError, match="16 \\+ 8k frames"):
        ds.window_starts(6.0, window=5.0)  # 125 frames


def test_offsets_from_logits_argmax_on_the_grid_first_on_ties():
    logits = np.zeros((3, 21))
    logits[0, 0] = 1.0  # -2.0 s
    logits[1, 20] = 5.0  # +2.0 s
    logits[2, [7, 13]] = 3.0  # tie: the first, -0.6 s
    np.testing.assert_allclose(ds.offsets_from_logits(logits), [-2.0, 2.0, -0.6])
    with pytest.raises(PredictionError, match="21 offset classes"):
        ds.offsets_from_logits(np.zeros((2, 20)))
    bad = np.zeros((1, 21))
    bad[0, 3] = np.nan
    with pytest.raises(PredictionError, match="finite"):
        ds.offsets_from_logits(bad)


def test_sample_and_set_desync_are_means_of_absolute_offsets():
    assert ds.sample_desync([-0.4, 0.2]) == pytest.approx(0.3)
    # the set's DeSync is the reduce of the per-sample values (base.mean_of): (0.3 + 0 + 2.0) / 3; equal to the mean
    # over all six windows, as av-benchmark averages
    records = [{"desync": ds.sample_desync(o)} for o in ([-0.4, 0.2], [0.0, 0.0], [2.0, -2.0])]
    assert mean_of(records, "desync") == pytest.approx(2.3 / 3)
    assert mean_of([], "desync") is None
    with pytest.raises(PredictionError):
        ds.sample_desync([])
    from perckit.reason_av_edit.quality.models.synchformer import DeSyncMetric

    reduce = DeSyncMetric.reduce  # MeanOfKeys' reduce reads only the class's keys: no network needed
    recs = [{"desync": 0.2}, {"desync": None}, {"desync": 0.6}]
    assert reduce(DeSyncMetric, recs)["desync"] == pytest.approx(0.4)
    assert reduce(DeSyncMetric, [{"desync": None}]) == {"desync": None}


def test_fit_short_clip_pads_or_skips_and_cuts_to_the_common_length():
    frames = np.arange(65, dtype=np.uint8)[:, None]  # 2.6 s at 25 fps
    audio = np.ones(65 * 640, dtype=np.float32)
    f, a, padded = ds.fit_short_clip(frames, audio, "pad")
    assert padded and f.shape == (120, 1) and a.shape == (76800,)
    assert (f[65:] == 64).all() and (f[:65, 0] == np.arange(65)).all()
    assert (a[: 65 * 640] == 1).all() and (a[65 * 640 :] == 0).all()
    assert ds.fit_short_clip(frames, audio, "skip") is None
    # long enough: both cut to the shorter (the audio covers 125 frames of 130)
    f, a, padded = ds.fit_short_clip(np.zeros((130, 1)), np.zeros(125 * 640 + 17, dtype=np.float32), "skip")
    assert not padded and f.shape[0] == 125 and a.shape[0] == 125 * 640
    with pytest.raises(OptionError, match="short_clip"):
        ds.fit_short_clip(frames, audio, "loop")


def test_resample_indices_nearest_frame_at_25_fps():
    np.testing.assert_array_equal(ds.desync_frame_indices(50, 25.0), np.arange(50))
    idx = ds.desync_frame_indices(90, 30.0)  # 3 s -> 75 frames; frame k at k * 1.2 source frames
    assert idx.shape == (75,)
    np.testing.assert_array_equal(idx[:6], [0, 1, 2, 4, 5, 6])  # 0, 1.2, 2.4, 3.6, 4.8, 6.0 rounded
    idx = ds.desync_frame_indices(24, 24.0)  # 1 s -> 25 frames; the last clipped to frame 23
    assert idx.shape == (25,) and idx[-1] == 23


def test_resize_and_crop_follow_torchvision():
    assert ds.resize_shape(480, 640) == (224, 298)
    assert ds.resize_shape(640, 480) == (298, 224)
    assert ds.resize_shape(224, 224) == (224, 224)
    assert ds.crop_offsets(224, 298) == (0, 37)
    assert ds.crop_offsets(225, 224) == (0, 0)  # round(0.5) = 0 (Python rounds half to even)
    np.testing.assert_allclose(ds.normalize_frames(np.array([0, 255, 51], dtype=np.uint8)), [-1.0, 1.0, -0.6], rtol=1e-6)


def test_segments_are_16_frames_stride_8_from_the_start():
    frames = np.arange(200)
    seg = ds.video_segments(frames, 24)
    assert seg.shape == (14, 16)
    np.testing.assert_array_equal(seg[:, 0], 24 + 8 * np.arange(14))
    np.testing.assert_array_equal(seg[0], np.arange(24, 40))
    with pytest.raises(PredictionError):
        ds.video_segments(frames, 81)  # needs frames up to 200
    aud = ds.audio_segments(np.arange(76800), 0)
    assert aud.shape == (14, 10240)
    np.testing.assert_array_equal(aud[:, 0], 5120 * np.arange(14))
    assert aud[-1, -1] == 76799


def test_log_mel_of_silence_is_the_floor_and_the_pad_column_is_zero():
    out = ds.log_mel_segments(np.zeros((2, 10240), dtype=np.float32))
    assert out.shape == (2, 128, 66) and out.dtype == np.float32
    floor = (math.log(1e-6) - ds.MEL_MEAN) / (2 * ds.MEL_STD)  # -0.2448...
    pad = (0.0 - ds.MEL_MEAN) / (2 * ds.MEL_STD)  # 0.4670...
    np.testing.assert_allclose(out[:, :, :65], floor, rtol=1e-6)
    np.testing.assert_allclose(out[:, :, 65], pad, rtol=1e-6)


def test_mel_filterbank_shape_and_band_peaks():
    fb = ds.mel_filterbank()
    assert fb.shape == (513, 128)
    assert (fb >= 0).all() and fb.max() <= 1.0
    assert fb[0].sum() == 0.0  # 0 Hz is a band edge
    assert (fb.sum(axis=0) > 0).all()  # every band has a bin


def test_log_mel_matches_librosa_htk_mel():
    librosa = pytest.importorskip("librosa", reason="needs librosa for the cross-check")
    x = np.random.default_rng(0).standard_normal((2, 10240)) * 0.1
    ours = ds.log_mel_segments(x)
    mel = librosa.feature.melspectrogram(
        y=x, sr=16000, n_fft=1024, hop_length=160, win_length=400, window="hann", center=True,
        pad_mode="reflect", power=2.0, n_mels=128, fmin=0.0, fmax=8000.0, htk=True, norm=None,
    )
    ref = np.pad(np.log(mel + 1e-6), ((0, 0), (0, 0), (0, 1)))
    np.testing.assert_allclose(ours, (ref - ds.MEL_MEAN) / (2 * ds.MEL_STD), atol=1e-5)


# ---------------------------------------------------------------------------------------------- glue


def _torch():
    return pytest.importorskip("torch", reason="needs torch (the quality extra) for the Synchformer glue")


def _standin_class():
    """A stand-in with Synchformer's three calls and shapes (NOT its architecture): vfeats (B, S, 8, 4),
    afeats (B, S, 6, 4), logits (B, 21) one-hot at ``classes[row]``; it keeps its inputs."""
    torch = _torch()

    class StandIn(torch.nn.Module):
        def __init__(self, classes=(10, 10)):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)
            self.classes = list(classes)
            self.seen = {}

        def extract_vfeats(self, x):
            self.seen["vis_shape"], self.seen["vis_dtype"] = tuple(x.shape), x.dtype
            self.seen["vis"] = x[..., ::56, ::56].clone()  # a 4 x 4 subsample of the 224 x 224 frames
            b, s = x.shape[:2]
            return x.mean(dim=(2, 3, 4, 5))[:, :, None, None].expand(b, s, 8, 4)

        def extract_afeats(self, x):
            self.seen["aud"] = x.clone()
            b, s = x.shape[:2]
            return x.mean(dim=(2, 3, 4))[:, :, None, None].expand(b, s, 6, 4)

        def compare_v_a(self, v, a):
            out = torch.zeros(v.shape[0], 21)
            for i in range(v.shape[0]):
                out[i, self.classes[i]] = 1.0
            return out

    return StandIn


def _sample(seconds: float, fps: float = 25.0, sr: int = 16000, audio: bool = True, size=(32, 48)) -> QualitySample:
    n = int(round(seconds * fps))
    frames = np.broadcast_to(np.arange(n, dtype=np.uint8)[:, None, None, None], (n, *size, 3)).copy()
    wav = np.zeros(int(round(seconds * sr)), dtype=np.float32) if audio else None
    clip = Clip(frames=frames, fps=fps, audio=wav, sample_rate=sr)
    return QualitySample(sample_id="s1", category="C1", sub_track="pure", instruction="i", target_text="t", edited=clip, source=clip)


def test_desync_metric_feeds_both_windows_and_averages_their_offsets():
    torch = _torch()
    from perckit.reason_av_edit.quality.models.synchformer import DeSyncMetric

    model = _standin_class()(classes=(5, 12))  # -1.0 s and +0.4 s
    metric = DeSyncMetric(model)
    assert isinstance(metric, ModelMetric) and metric.keys == ("desync",)
    rec = metric.measure(_sample(6.0))
    np.testing.assert_allclose(rec["offsets"], [-1.0, 0.4])
    assert rec["desync"] == pytest.approx(0.7) and rec["padded"] is False
    vis, aud = model.seen["vis"].numpy(), model.seen["aud"].numpy()
    assert model.seen["vis_shape"] == (2, 14, 16, 3, 224, 224) and model.seen["vis_dtype"] == torch.float32
    assert aud.shape == (2, 14, 1, 128, 66)
    # frame k has value k everywhere; the resize keeps a flat image flat: window 2 starts at frame 24
    assert vis[0, 0, 0, 0, 0, 0] == pytest.approx(-1.0)
    assert vis[1, 0, 0, :, 2, 3] == pytest.approx(np.full(3, 24 / 255 * 2 - 1), rel=1e-6)
    assert vis[1, 13, 15, 0, 0, 0] == pytest.approx((24 + 104 + 15) / 255 * 2 - 1, rel=1e-6)
    assert metric.reduce([rec, {"desync": 0.1}]) == {"desync": pytest.approx(0.4)}


def test_desync_metric_one_window_for_a_4_84_s_clip():
    from perckit.reason_av_edit.quality.models.synchformer import DeSyncMetric

    model = _standin_class()(classes=(13,))
    rec = DeSyncMetric(model).measure(_sample(4.84))
    assert model.seen["vis_shape"][0] == 1  # the first and the last window coincide: run once
    np.testing.assert_allclose(rec["offsets"], [0.6, 0.6])
    assert rec["desync"] == pytest.approx(0.6)


def test_desync_metric_short_clip_pad_or_skip_and_no_audio():
    from perckit.reason_av_edit.quality.models.synchformer import DeSyncMetric

    StandIn = _standin_class()
    model = StandIn(classes=(10,))
    rec = DeSyncMetric(model).measure(_sample(2.6, fps=30.0))
    assert rec["padded"] is True and rec["desync"] == 0.0
    vis = model.seen["vis"].numpy()
    # 2.6 s at 30 fps -> 65 frames at 25 fps (the last, k = 64, is source frame round(76.8) = 77), then repeated to 120
    assert vis[0, 13, 15, 0, 0, 0] == pytest.approx(77 / 255 * 2 - 1, rel=1e-6)
    rec = DeSyncMetric(StandIn(), short_clip="skip").measure(_sample(2.6))
    assert rec["desync"] is None and rec["offsets"].size == 0
    rec = DeSyncMetric(StandIn()).measure(_sample(6.0, audio=False))
    assert rec["desync"] is None and rec["reason"] == "no audio"
    with pytest.raises(OptionError, match="short_clip"):
        DeSyncMetric(StandIn(), short_clip="loop")
    with pytest.raises(OptionError, match="extract_vfeats"):
        DeSyncMetric(object())


def test_desync_metric_resamples_audio_to_16_khz():
    from perckit.reason_av_edit.quality.models.synchformer import DeSyncMetric

    model = _standin_class()(classes=(10,))
    rec = DeSyncMetric(model).measure(_sample(4.84, sr=8000))
    assert rec["desync"] == 0.0 and model.seen["aud"].shape == (1, 14, 1, 128, 66)


def _fake_av_bench(monkeypatch, cls):
    pkg = "av_bench.synchformer.synchformer"
    for name in ("av_bench", "av_bench.synchformer"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    mod = types.ModuleType(pkg)
    mod.Synchformer = cls
    monkeypatch.setitem(sys.modules, pkg, mod)


def test_build_desync_without_av_bench_is_unavailable_with_the_install_line(monkeypatch):
    _torch()
    monkeypatch.setitem(sys.modules, "av_bench.synchformer.synchformer", None)
    with pytest.raises(ModelUnavailable, match="hkchengrex/av-benchmark"):
        BY_KEY["desync"].build(None, ModelOptions())


def test_build_desync_loads_the_state_dict_strictly(monkeypatch, tmp_path):
    torch = _torch()
    from perckit.reason_av_edit.quality.models.synchformer import DeSyncMetric

    StandIn = _standin_class()
    _fake_av_bench(monkeypatch, StandIn)
    torch.manual_seed(0)
    src = StandIn()
    torch.save(src.state_dict(), tmp_path / "synchformer_state_dict.pth")
    for given in (tmp_path / "synchformer_state_dict.pth", str(tmp_path)):
        metric = BY_KEY["desync"].build(given, ModelOptions(extra={"desync_short_clip": "skip"}))
        assert isinstance(metric, DeSyncMetric) and metric.short_clip == "skip"
        assert torch.equal(metric.model.proj.weight, src.proj.weight)
        assert not metric.model.training
    torch.save({"other.weight": torch.zeros(1)}, tmp_path / "wrong.pth")
    with pytest.raises(OptionError, match="layout"):
        BY_KEY["desync"].build(tmp_path / "wrong.pth", ModelOptions())
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(OptionError, match="state dict"):
        BY_KEY["desync"].build(tmp_path / "junk.pth", ModelOptions())
    with pytest.raises(InputNotFoundError):
        BY_KEY["desync"].build(tmp_path / "absent.pth", ModelOptions())
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailable, match="synchformer_state_dict.pth"):
        BY_KEY["desync"].build(tmp_path / "empty", ModelOptions())


def test_build_desync_default_weights_come_from_the_hf_cache_only(monkeypatch, tmp_path):
    _torch()
    import huggingface_hub.constants

    _fake_av_bench(monkeypatch, _standin_class())
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelUnavailable, match="hkchengrex/MMAudio"):
        BY_KEY["desync"].build(None, ModelOptions())


# ---------------------------------------------------------------------------------------------- PEAVS


def test_peavs_without_scores_is_unavailable_saying_why():
    with pytest.raises(ModelUnavailable) as e:
        BY_KEY["peavs"].build(None, ModelOptions())
    msg = str(e.value)
    assert "amazon-science/avgen-eval-toolkit" in msg and "results.csv" in msg and "not an installable package" in msg
    assert msg == pv.REASON


def test_peavs_reads_the_official_results_csv(tmp_path):
    (tmp_path / "results.csv").write_text("filename,score\ns1,4.5\ns2.mp4,1.5\n", encoding="utf-8")
    for given in (tmp_path / "results.csv", tmp_path):
        metric = BY_KEY["peavs"].build(given, ModelOptions())
        assert isinstance(metric, ModelMetric)
        recs = [metric.measure(_sample(1.0)), {"peavs": metric.scores["s2"]}]
        assert recs[0] == {"peavs": 4.5}
        assert metric.reduce(recs) == {"peavs": pytest.approx(3.0)}
    assert metric.reduce([]) == {"peavs": None}
    metric = pv.PEAVSMetric({"other": 3.0}, where="x.csv")
    with pytest.raises(PredictionError, match="'s1' has no PEAVS score in x.csv"):
        metric.measure(_sample(1.0))


@pytest.mark.parametrize(
    "text, match",
    [
        ("name,value\ns1,3\n", "header"),
        ("filename,score\ns1,6.0\n", "in \\[1, 5\\]"),
        ("filename,score\ns1,nan\n", "in \\[1, 5\\]"),
        ("filename,score\ns1,abc\n", "not a number"),
        ("filename,score\ns1,3\ns1.mp4,4\n", "twice"),
        ("filename,score\n,3\n", "empty filename"),
    ],
)
def test_peavs_bad_results_csv_is_refused_naming_the_line(tmp_path, text, match):
    (tmp_path / "r.csv").write_text(text, encoding="utf-8")
    with pytest.raises(PredictionError, match=match):
        pv.load_peavs_csv(tmp_path / "r.csv")


# ---------------------------------------------------------------------------------------------- end to end


def test_av_edit_quality_reports_desync_from_a_given_metric():
    pytest.importorskip("av", reason="needs PyAV to encode the test clips")
    from perckit.reason_av_edit.features import encode_wav
    from perckit.reason_av_edit.quality.metric import av_edit_quality
    from perckit.reason_av_edit.quality.models.synchformer import DeSyncMetric
    from perckit.reason_av_edit.quality.predictions import make_quality_prediction
    from perckit.samples.base import encode_mp4

    frames = np.zeros((125, 32, 48, 3), dtype=np.uint8)  # 5 s at 25 fps: windows at 0 and 0 s (125 frames)
    video = encode_mp4(frames, fps=25)
    wav = encode_wav(np.zeros(5 * 16000, dtype=np.float32))
    none = {"bytes": None, "path": ""}
    ref = {"sample_id": "s1", "category": "when_only", "sub_track": "T1_word_phrase_swap", "instruction": "swap",
           "video": {"bytes": video, "path": ""}, "audio": {"bytes": wav, "path": ""}, "mask_video": dict(none),
           "ref_image": dict(none), "edit_window_s": [1.0, 2.0], "fps": 25.0, "num_frames": 125}
    pred = make_quality_prediction("s1", {"bytes": video, "path": ""}, {"bytes": wav, "path": ""})
    model = _standin_class()(classes=(14,))  # +0.8 s
    out = av_edit_quality([pred], [ref], metrics=["desync"], models={"desync": DeSyncMetric(model)})
    assert out["desync"] == pytest.approx(0.8)
    assert out["per_category"]["when_only"]["desync"] == pytest.approx(0.8)
    assert out["n_desync"] == 1
    assert model.seen["vis_shape"] == (1, 14, 16, 3, 224, 224)
