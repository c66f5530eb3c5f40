"""Sync-C / Sync-D (SyncNet) and LPAPS (SpecVQGAN) for metrics/av_edit_quality.

The numpy math has golden values worked out by hand: SyncNet's offset table, min distance and confidence,
the MFCC definition of python_speech_features, the 25 fps frame pick; LPAPS' formula, the Slaney mel
filters, the STFT and SpecVQGAN's spectrogram scaling. The torch glue runs end to end with randomly
initialised networks of the real architectures (our modules written to the published state-dict layouts;
the expected key lists are written out here from syncnet_python's ``S`` and SpecVQGAN's ``LPAPS``), and the
factories load a saved state dict with ``strict=True`` or say what is missing.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from perckit.errors import InputNotFoundError, OptionError
from perckit.reason_av_edit.quality import formulas as P
from perckit.reason_av_edit.quality import formulas as sync
from perckit.reason_av_edit.quality.models import BY_KEY, ModelMetric, ModelOptions, ModelUnavailable
from perckit.reason_av_edit.quality.models import lpaps as lp
from perckit.reason_av_edit.quality.models import syncnet as sn
from perckit.reason_av_edit.quality.models.base import Clip, QualitySample

SR = 16000


def sample(edited: Clip, source: Clip | None = None, sid: str = "s") -> QualitySample:
    return QualitySample(sid, "where_only", "W1_same_class_pair", "do it", "do it", edited, source or edited)


def frames(t: int = 16, h: int = 48, w: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(t, h, w, 3), dtype=np.uint8)


def noise(n: int, seed: int = 0, scale: float = 0.1) -> np.ndarray:
    return (np.random.default_rng(seed).normal(0.0, scale, n)).astype(np.float32)


# ================================================================ SyncNet: the numpy math


def test_offset_distances_by_hand():
    v = np.array([[1.0], [2.0], [3.0]])
    a = np.array([[1.0], [2.0], [3.0]])
    # vshift 1: row i pairs v_i with a_(i-1), a_i, a_(i+1), a zero vector outside the track
    want = np.array([[1.0, 0.0, 1.0],   # v0=1 vs pad 0, a0=1, a1=2
                     [1.0, 0.0, 1.0],   # v1=2 vs a0=1, a1=2, a2=3
                     [1.0, 0.0, 3.0]])  # v2=3 vs a1=2, a2=3, pad 0
    np.testing.assert_allclose(sync.offset_distances(v, a, vshift=1, eps=0.0), want)
    # torch.pairwise_distance's eps is added to the difference: |0 + 1e-6| on the matched column
    got = sync.offset_distances(v, a, vshift=1)
    np.testing.assert_allclose(got[:, 1], 1e-6, rtol=1e-9)
    assert got[0, 0] == pytest.approx(1.0 + 1e-6, abs=1e-15)
    v2 = np.array([[3.0, 0.0], [0.0, 0.0]])
    a2 = np.array([[0.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(sync.offset_distances(v2, a2, vshift=0, eps=0.0), [[5.0], [0.0]])
    with pytest.raises(ValueError, match="same shape"):
        sync.offset_distances(v, a[:2], vshift=1)


def test_sync_scores_by_hand():
    table = np.array([[1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [1.0, 0.0, 3.0]])
    offset, dist, conf = sync.sync_scores(table)
    # mdist = [1, 0, 5/3]: min 0 at column 1 = the zero offset; median 1
    assert (offset, dist, conf) == (0, 0.0, 1.0)
    offset, dist, conf = sync.sync_scores([[4.0, 2.0, 3.0, 9.0, 1.5]])  # vshift 2; min at column 4
    assert offset == 2 - 4 and dist == 1.5 and conf == pytest.approx(3.0 - 1.5)
    assert sync.sync_scores([[1.0, 1.0, 2.0]])[0] == 1  # a tie: the first column, as torch.min
    with pytest.raises(ValueError, match="distance table"):
        sync.sync_scores(np.zeros((2, 4)))


def test_a_known_shift_gives_that_offset():
    rng = np.random.default_rng(3)
    n, d, lag = 30, 8, 3
    v = rng.normal(size=(n, d))
    a = np.zeros((n, d))
    a[lag:] = v[:-lag]  # the audio lags: audio window i + 3 carries video window i
    t = sync.offset_distances(v, a, vshift=15)
    offset, dist, conf = sync.sync_scores(t)
    assert offset == -lag  # offset = vshift - minidx, minidx = vshift + lag
    eps = 1e-6
    tail = sum(np.linalg.norm(v[i] + eps) for i in range(n - lag, n))  # paired with the zero padding
    assert dist == pytest.approx(((n - lag) * math.sqrt(d) * eps + tail) / n, rel=1e-9)
    mdist = t.mean(axis=0)
    assert conf == pytest.approx(np.sort(mdist)[15] - dist) and conf > 1.0
    rec = sync.sync_record(v, a)
    assert rec == {"sync_c": conf, "sync_d": dist, "offset": -lag, "windows": n}
    b = np.zeros((n, d))
    b[:-2] = v[2:]  # the audio leads by 2
    assert sync.sync_scores(sync.offset_distances(v, b))[0] == 2


def test_reduce_sync_means_over_the_clips_with_a_value():
    recs = [{"sync_c": 2.0, "sync_d": 7.0}, {"sync_c": 4.0, "sync_d": 8.0}, {"sync_c": None, "sync_d": None}]
    reduce = sn.SyncNetMetric.reduce  # MeanOfKeys' reduce reads only the class's keys: no network needed
    assert reduce(sn.SyncNetMetric, recs) == {"sync_c": 3.0, "sync_d": 7.5}
    assert reduce(sn.SyncNetMetric, recs[2:]) == {"sync_c": None, "sync_d": None}
    assert reduce(sn.SyncNetMetric, []) == {"sync_c": None, "sync_d": None}


def test_triangle_filterbank_by_hand():
    # one filter, n_fft 8 at 16 Hz: mel points of 0, ~3.99 and 8 Hz -> bins floor(9 f / 16) = 0, 2, 4
    np.testing.assert_allclose(sync.triangle_filterbank(1, 8, 16), [[0.0, 0.5, 1.0, 0.5, 0.0]])
    fb = sync.triangle_filterbank()
    assert fb.shape == (26, 257) and fb.max() == 1.0 and (fb >= 0).all()


def _mfcc_by_the_rules(x: np.ndarray) -> np.ndarray:
    """python_speech_features.mfcc's defaults at 16 kHz, one frame at a time (an independent transcription)."""
    y = np.empty_like(x)
    y[0] = x[0]
    y[1:] = x[1:] - 0.97 * x[:-1]
    n = 1 if len(y) <= 400 else 1 + math.ceil((len(y) - 400) / 160)
    y = np.concatenate([y, np.zeros((n - 1) * 160 + 400 - len(y))])
    fb = sync.triangle_filterbank(26, 512, 16000)
    out = []
    for i in range(n):
        p = np.abs(np.fft.rfft(y[160 * i:160 * i + 400], 512)) ** 2 / 512
        e = max(p.sum(), np.finfo(float).eps)
        logf = np.log(np.maximum(fb @ p, np.finfo(float).eps))
        c = [sum(logf[j] * math.cos(math.pi * k * (2 * j + 1) / 52) for j in range(26)) * math.sqrt((1 if k == 0 else 2) / 26)
             for k in range(13)]
        c = [ck * (1 + 11 * math.sin(math.pi * k / 22)) for k, ck in enumerate(c)]
        c[0] = math.log(e)
        out.append(c)
    return np.array(out)


def test_speech_mfcc_follows_python_speech_features_rules():
    x = np.rint(np.random.default_rng(1).normal(0, 3000, 3211))
    got = sync.speech_mfcc(x)
    assert got.shape == (1 + math.ceil((3211 - 400) / 160), 13) == (19, 13)
    np.testing.assert_allclose(got, _mfcc_by_the_rules(x), rtol=1e-9, atol=1e-9)
    # silence: every band is eps, so the DCT of the constant leaves only c0, which is replaced by log(eps)
    z = sync.speech_mfcc(np.zeros(400))
    assert z.shape == (1, 13) and z[0, 0] == math.log(np.finfo(float).eps)
    np.testing.assert_allclose(z[0, 1:], 0.0, atol=1e-10)
    assert sync.speech_mfcc(np.zeros(16000)).shape == (99, 13)  # 1 + ceil(15600 / 160)


def test_speech_mfcc_equals_python_speech_features_where_installed():
    psf = pytest.importorskip("python_speech_features", reason="python_speech_features is not installed (not a dependency)")
    x = np.rint(np.random.default_rng(2).normal(0, 3000, 16000)).astype(np.int16)
    np.testing.assert_allclose(sync.speech_mfcc(x), psf.mfcc(x, 16000), rtol=1e-9, atol=1e-9)


def test_int16_scale_windows_and_frame_pick():
    np.testing.assert_array_equal(sync.to_int16_scale([0.5, -1.0, 1.0, 1e-5]), [16384.0, -32768.0, 32767.0, 0.0])
    assert sync.window_count(10, 6400) == 5 and sync.window_count(10, 4000) == 1 and sync.window_count(5, 99999) == 0
    m = np.arange(13 * 28, dtype=float).reshape(28, 13)  # (frames, coefficients)
    w = sync.mfcc_windows(m, 3)
    assert w.shape == (3, 1, 13, 20)
    np.testing.assert_array_equal(w[2, 0], m[8:28].T)  # window i: MFCC frames 4i .. 4i + 19
    with pytest.raises(ValueError, match="need 24 MFCC frames"):
        sync.mfcc_windows(m[:23], 2)
    np.testing.assert_array_equal(sync.resample_indices(6, 30.0), [0, 1, 2, 4, 5])  # floor(k 30 / 25 + 0.5)
    np.testing.assert_array_equal(sync.resample_indices(6, 50.0), [0, 2, 4])
    np.testing.assert_array_equal(sync.resample_indices(7, 25.0), np.arange(7))


# ================================================================ LPAPS: the numpy math


def test_lpaps_distance_by_hand():
    f0 = [np.array([[[3.0, 0.0]], [[4.0, 1.0]]]), np.array([[[2.0]]])]  # (C, H, W) = (2, 1, 2) and (1, 1, 1)
    f1 = [np.array([[[4.0, 1.0]], [[3.0, 0.0]]]), np.array([[[-1.0]]])]
    w = [np.array([1.0, 2.0]), np.array([[[[0.5]]]])]
    # layer 0: unit vectors (.6, .8) vs (.8, .6) -> 0.04 + 2 * 0.04 = 0.12; (0, 1) vs (1, 0) -> 1 + 2 = 3; mean 1.56
    # layer 1: 1 vs -1 -> 0.5 * 4 = 2
    assert P.lpaps_distance(f0, f1, w, eps=0.0) == pytest.approx(3.56, abs=1e-12)
    assert P.lpaps_distance(f0, f1, w) == pytest.approx(3.56, abs=1e-8)
    assert P.lpaps_distance(f0, f0, w) == 0.0
    np.testing.assert_allclose(P.unit_normalize(f0[0], eps=0.0)[:, 0, 0], [0.6, 0.8])
    with pytest.raises(ValueError, match="as many layers"):
        P.lpaps_distance(f0, f1[:1], w)
    with pytest.raises(ValueError, match="layer 0"):
        P.lpaps_distance(f0, f1, [np.ones(3), w[1]])
    assert lp.LPAPSMetric.reduce(lp.LPAPSMetric, [{"lpaps": 1.0}, {"lpaps": None}, {"lpaps": 2.0}]) == {"lpaps": 1.5}
    assert lp.LPAPSMetric.reduce(lp.LPAPSMetric, [{"lpaps": None}]) == {"lpaps": None}


def test_slaney_mel_scale_and_filters():
    np.testing.assert_allclose(P._slaney_hz_to_mel(np.array([500.0, 1000.0, 6400.0])), [7.5, 15.0, 42.0])
    np.testing.assert_allclose(P._slaney_mel_to_hz(np.array([7.5, 15.0, 42.0])), [500.0, 1000.0, 6400.0])
    fb = P.slaney_mel_filters()
    assert fb.shape == (80, 513) and (fb >= 0).all()
    assert fb[:, :3].sum() == 0.0  # below 125 Hz (bin 3 is 64.6 Hz, bin 2 is 43 Hz)
    assert fb[:, 353:].sum() == 0.0  # above 7600 Hz (bin 353 is 7601 Hz)


def test_slaney_filters_and_stft_equal_librosa_where_installed():
    librosa = pytest.importorskip("librosa", reason="librosa is not installed (not a dependency; the numpy code is the definition)")
    np.testing.assert_allclose(P.slaney_mel_filters(), librosa.filters.mel(sr=22050, n_fft=1024, n_mels=80, fmin=125, fmax=7600),
                               rtol=1e-6, atol=1e-8)
    y = noise(5000, seed=4).astype(np.float64)
    np.testing.assert_allclose(P.stft_magnitude(y), np.abs(librosa.stft(y, n_fft=1024, hop_length=256, pad_mode="reflect")),
                               rtol=1e-9, atol=1e-9)


def test_stft_of_a_bin_frequency_cosine_by_hand():
    n = np.arange(8192)
    y = np.cos(2 * np.pi * 64 * n / 1024)  # exactly FFT bin 64
    m = P.stft_magnitude(y)
    assert m.shape == (513, 1 + 8192 // 256)
    # an interior frame: the periodic Hann window sums to 512, and the cosine puts half of it in bin 64
    assert m[64, 10] == pytest.approx(256.0, rel=1e-9)
    assert m[62, 10] == pytest.approx(0.0, abs=1e-9) and m[63, 10] == pytest.approx(128.0, rel=1e-9)
    with pytest.raises(ValueError, match="more than 512 samples"):
        P.stft_magnitude(np.zeros(512))


def test_specvqgan_mel_scaling_by_hand():
    assert (P.specvqgan_mel(np.zeros(4000)) == 0.0).all()  # 20 log10(1e-5) = -100 -> (-100 - 20 + 100) / 100 < 0 -> 0
    n = np.arange(22050 * 11)
    spec = P.specvqgan_mel(np.cos(2 * np.pi * 1000 * n / 22050))
    assert spec.shape == (80, 860)  # 11 s -> 948 frames, cut to SpecVQGAN's 860
    mel = P.slaney_mel_filters() @ P.stft_magnitude(np.cos(2 * np.pi * 1000 * n[:22050] / 22050))
    band = int(np.argmax(mel[:, 40]))
    want = min(1.0, max(0.0, (20 * math.log10(mel[band, 40]) + 80) / 100))
    assert spec[band, 40] == pytest.approx(want, rel=1e-9)
    assert P.specvqgan_mel(np.zeros(4000), max_frames=None).shape == (80, 16)


# ================================================================ the torch glue


# syncnet_python's S: indices of the convolutions and batch norms in netcnnaud / netcnnlip (ReLUs and pools
# hold no parameters), and of the two linears and the batch norm of netfcaud / netfclip
_CONV, _BN = (0, 4, 8, 11, 14, 18), (1, 5, 9, 12, 15, 19)
_BN_KEYS = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")


def syncnet_keys() -> list[str]:
    keys = []
    for tower in ("netcnnaud", "netfcaud", "netfclip", "netcnnlip"):
        conv, bn = ((0, 3), (1,)) if tower.startswith("netfc") else (_CONV, _BN)
        for i in sorted(conv + bn):
            keys += [f"{tower}.{i}.{k}" for k in (("weight", "bias") if i in conv else _BN_KEYS)]
    return keys


LPAPS_KEYS = (["scaling_layer.shift", "scaling_layer.scale"]
              + [f"net.slice{s}.{i}.{k}" for s, idx in ((1, (0, 2)), (2, (5, 7)), (3, (10, 12, 14)), (4, (17, 19, 21)), (5, (24, 26, 28)))
                 for i in idx for k in ("weight", "bias")]
              + [f"lin{k}.model.1.weight" for k in range(5)])


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="torch is not installed: the SyncNet / LPAPS glue needs it (pip install 'perckit[quality]')")


@pytest.fixture(scope="module")
def tiny_syncnet(torch):
    torch.manual_seed(0)
    return sn.syncnet_module()


@pytest.fixture(scope="module")
def tiny_lpaps(torch):
    torch.manual_seed(0)
    m = lp.lpaps_module()
    with torch.no_grad():
        for k in range(5):
            getattr(m, f"lin{k}").model[1].weight.abs_()  # trained LPIPS weights are non-negative
    return m


def test_syncnet_state_dict_is_syncnet_python_s(tiny_syncnet, torch):
    sd = tiny_syncnet.state_dict()
    assert list(sd) == syncnet_keys() and len(sd) == 102
    shapes = {"netcnnaud.0.weight": (64, 1, 3, 3), "netcnnaud.18.weight": (512, 256, 5, 4), "netcnnlip.0.weight": (96, 3, 5, 7, 7),
              "netcnnlip.4.weight": (256, 96, 1, 5, 5), "netcnnlip.18.weight": (512, 256, 1, 6, 6), "netfcaud.0.weight": (512, 512),
              "netfclip.3.weight": (1024, 512), "netfcaud.1.running_var": (512,)}
    assert {k: tuple(sd[k].shape) for k in shapes} == shapes
    with torch.no_grad():  # the towers end in 1 x 1 maps: (13, 20) MFCC windows, (5, 224, 224) frame windows
        assert tiny_syncnet.eval().forward_aud(torch.zeros(2, 1, 13, 20)).shape == (2, 1024)
        assert tiny_syncnet.netcnnlip(torch.zeros(1, 3, 5, 224, 224)).shape == (1, 512, 1, 1, 1)


def test_lpaps_state_dict_is_specvqgan_lpaps(tiny_lpaps, torch):
    sd = tiny_lpaps.state_dict()
    assert list(sd) == LPAPS_KEYS and len(sd) == 33
    assert tuple(sd["scaling_layer.shift"].shape) == (1, 1, 80, 1) and tuple(sd["net.slice1.0.weight"].shape) == (64, 1, 3, 3)
    assert tuple(sd["net.slice5.28.weight"].shape) == (512, 512, 3, 3) and tuple(sd["lin2.model.1.weight"].shape) == (1, 256, 1, 1)
    with torch.no_grad():
        outs = tiny_lpaps.net(torch.zeros(1, 1, 80, 32))
    assert [tuple(o.shape[1:]) for o in outs] == [(64, 80, 32), (128, 40, 16), (256, 20, 8), (512, 10, 4), (512, 5, 2)]


def test_crop_and_lip_frames(torch):
    assert sn.crop_box(48, 64, "full") == (0, 48, 0, 64)
    assert sn.crop_box(48, 64, "center_square") == (0, 48, 8, 56)
    assert sn.crop_box(100, 200, (0.25, 0.5, 0.75, 1.0)) == (50, 100, 50, 150)
    for bad in ("mouth", (0.5, 0.0, 0.4, 1.0), (0, 0, 1), (0, 0, 1, 2), True):
        with pytest.raises(OptionError, match="sync_crop"):
            sn.check_crop(bad)
    f = frames(7, 224, 224)
    x = sn.lip_frames(f, 25.0)
    assert x.dtype == torch.uint8 and tuple(x.shape) == (7, 3, 224, 224)
    np.testing.assert_array_equal(x.numpy().transpose(0, 2, 3, 1), f[..., ::-1])  # 224 x 224 passes unchanged, as BGR
    assert tuple(sn.lip_frames(frames(6, 48, 64), 30.0).shape) == (5, 3, 224, 224)  # 6 frames at 30 fps -> 5 at 25


def test_syncnet_end_to_end_random_init(tiny_syncnet, torch):
    clip = Clip(frames(10), 25.0, noise(10 * 640), SR)
    metric = sn.SyncNetMetric(tiny_syncnet)
    assert isinstance(metric, ModelMetric) and metric.keys == BY_KEY["sync_c"].keys
    rec = metric.measure(sample(clip))
    assert rec["windows"] == 5 and -15 <= rec["offset"] <= 15  # min(10, 6400 // 640) - 5
    assert math.isfinite(rec["sync_c"]) and rec["sync_c"] >= 0 and math.isfinite(rec["sync_d"]) and rec["sync_d"] > 0
    torch.manual_seed(0)
    again = sn.SyncNetMetric(sn.syncnet_module(), batch_size=4).measure(sample(clip))  # same seed, other batching
    assert again["offset"] == rec["offset"] and again["sync_d"] == pytest.approx(rec["sync_d"], rel=1e-5)
    assert again["sync_c"] == pytest.approx(rec["sync_c"], rel=1e-4, abs=1e-6)
    assert metric.reduce([rec, {"sync_c": None, "sync_d": None}]) == {"sync_c": rec["sync_c"], "sync_d": rec["sync_d"]}
    # no audio, or under 6 frames at 25 fps: no value
    empty = {"sync_c": None, "sync_d": None, "offset": None, "windows": 0}
    assert metric.measure(sample(Clip(frames(10), 25.0, None, SR))) == empty
    assert metric.measure(sample(Clip(frames(5), 25.0, noise(16000), SR))) == empty
    # 8 kHz audio is resampled to 16 kHz, 30 fps video read at 25 fps: 9 frames -> 7, 2560 samples -> 5120 -> 8 frames
    rec30 = metric.measure(sample(Clip(frames(9), 30.0, noise(2560), 8000)))
    assert rec30["windows"] == 2 and math.isfinite(rec30["sync_d"])
    with pytest.raises(OptionError, match="sync_vshift"):
        sn.SyncNetMetric(tiny_syncnet, vshift=0)


def test_lpaps_end_to_end_random_init(tiny_lpaps, torch):
    metric = lp.LPAPSMetric.from_module(tiny_lpaps)
    assert isinstance(metric, ModelMetric) and metric.keys == BY_KEY["lpaps"].keys
    src = Clip(frames(2, 8, 8), 25.0, noise(SR // 2), SR)
    same = metric.measure(sample(src, src))
    assert same == {"lpaps": 0.0}
    other = Clip(src.frames, 25.0, noise(SR // 2, seed=1), SR)
    d = metric.measure(sample(other, src))["lpaps"]
    assert d > 0 and math.isfinite(d)
    assert lp.LPAPSMetric.from_module(tiny_lpaps).measure(sample(other, src))["lpaps"] == d  # deterministic
    louder = Clip(src.frames, 25.0, (src.audio * 0.5).astype(np.float32), SR)
    assert metric.measure(sample(louder, src))["lpaps"] > 0
    # the edited track cut short: compared over the common length (the same audio there -> 0)
    cut = Clip(src.frames, 25.0, src.audio[: SR // 4], SR)
    assert 0.0 <= metric.measure(sample(cut, src))["lpaps"] < 1e-6  # up to the resampler's edge at the cut
    # no audio on either side, or under 16 spectrogram frames: no value
    assert metric.measure(sample(Clip(src.frames, 25.0, None, SR), src)) == {"lpaps": None}
    assert metric.measure(sample(Clip(src.frames, 25.0, src.audio[:2000], SR), src)) == {"lpaps": None}
    assert metric.reduce([{"lpaps": d}, {"lpaps": 0.0}, {"lpaps": None}]) == {"lpaps": d / 2}
    # the scaling layer of the checkpoint is applied per band
    y = lp.resample(src.audio, SR, P.MEL_SR)
    assert y.size == 11025
    x = metric.spectrogram(y)
    shifted = lp.LPAPSMetric(tiny_lpaps.net, [getattr(tiny_lpaps, f"lin{k}") for k in range(5)], np.full(80, 0.5), np.full(80, 2.0))
    np.testing.assert_allclose(shifted.spectrogram(y), (x - 0.5) / 2.0)
    with pytest.raises(OptionError, match="5 lin layers"):
        lp.LPAPSMetric(tiny_lpaps.net, [])


# ---------------------------------------------------------------- the factories


def test_factories_without_weights_or_torch_are_unavailable(monkeypatch, tmp_path, torch):
    with pytest.raises(ModelUnavailable, match="syncnet_v2.model"):
        sn.build_syncnet(None, ModelOptions())
    with pytest.raises(ModelUnavailable, match="lpaps.pt"):
        lp.build_lpaps(None, ModelOptions())
    with pytest.raises(InputNotFoundError, match="do not exist"):
        sn.build_syncnet(str(tmp_path / "nope.model"), ModelOptions())
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    for build in (sn.build_syncnet, lp.build_lpaps):
        with pytest.raises(ModelUnavailable, match="torch is not installed"):
            build(str(tmp_path), ModelOptions())


def test_build_syncnet_loads_a_state_dict_strictly(tmp_path, tiny_syncnet, torch):
    sd = tiny_syncnet.state_dict()
    # the 2017 checkpoint predates num_batches_tracked: a plain dict without it loads with strict=True
    old = {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}
    torch.save(old, tmp_path / "syncnet_v2.model")
    metric = sn.build_syncnet(str(tmp_path / "syncnet_v2.model"), ModelOptions(extra={"sync_crop": "center_square", "sync_vshift": 10}))
    assert metric.crop == "center_square" and metric.vshift == 10
    assert torch.equal(metric.model.state_dict()["netcnnlip.18.weight"], sd["netcnnlip.18.weight"])
    del old["netfclip.3.bias"]
    torch.save(old, tmp_path / "broken.model")
    with pytest.raises(OptionError, match="netfclip.3.bias"):
        sn.build_syncnet(str(tmp_path / "broken.model"), ModelOptions())
    (tmp_path / "junk.model").write_bytes(b"not a checkpoint")
    with pytest.raises(OptionError, match="cannot be read as a torch checkpoint"):
        sn.build_syncnet(str(tmp_path / "junk.model"), ModelOptions())
    with pytest.raises(OptionError, match="sync_crop"):
        sn.build_syncnet(str(tmp_path / "syncnet_v2.model"), ModelOptions(extra={"sync_crop": "face"}))


def test_build_lpaps_loads_lpaps_pt_strictly(tmp_path, tiny_lpaps, torch):
    sd = tiny_lpaps.state_dict()
    torch.save(sd, tmp_path / "lpaps.pt")
    metric = lp.build_lpaps(str(tmp_path), ModelOptions())  # a folder holding lpaps.pt
    src = Clip(frames(2, 8, 8), 25.0, noise(SR // 2), SR)
    other = Clip(src.frames, 25.0, noise(SR // 2, seed=1), SR)
    assert metric.measure(sample(other, src)) == lp.LPAPSMetric.from_module(tiny_lpaps).measure(sample(other, src))
    torch.save({"model": {"features.0.weight": sd["net.slice1.0.weight"]}}, tmp_path / "vggishish16.pt")
    with pytest.raises(OptionError, match="no LPAPS lin weights"):
        lp.build_lpaps(str(tmp_path / "vggishish16.pt"), ModelOptions())
    torch.save({k: v for k, v in sd.items() if k != "lin4.model.1.weight"}, tmp_path / "partial.pt")
    with pytest.raises(OptionError, match="lin4.model.1.weight"):
        lp.build_lpaps(str(tmp_path / "partial.pt"), ModelOptions())
    (tmp_path / "empty").mkdir()
    with pytest.raises(OptionError, match="has no lpaps.pt"):
        lp.build_lpaps(str(tmp_path / "empty"), ModelOptions())


# ---------------------------------------------------------------- through av_edit_quality


def test_sync_and_lpaps_through_av_edit_quality(tiny_syncnet, tiny_lpaps, torch):
    from helpers.edit_quality import clip, reference

    from perckit.reason_av_edit import make_quality_prediction
    from perckit.reason_av_edit.features import encode_wav
    from perckit.reason_av_edit.quality import metric as core

    video = clip(t=10, h=32, w=32)
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(10 * 640) / SR)).astype(np.float32)
    ref = reference("w", video, audio=encode_wav(tone, SR))
    keys = ["sync_c", "sync_d", "lpaps"]

    def run(audio):
        # 5 windows: vshift 2 (with the default 15, offsets beyond the clip compare with the zero padding only)
        models = {"sync": sn.SyncNetMetric(tiny_syncnet, vshift=2), "lpaps": lp.LPAPSMetric.from_module(tiny_lpaps)}
        pred = make_quality_prediction("w", ref["video"]["bytes"], encode_wav(audio, SR))
        return core.av_edit_quality([pred], [ref], metrics=keys, models=models)

    same = run(tone)
    assert same["lpaps"] == 0.0 and same["n_lpaps"] == 1  # the source audio as the edit
    assert math.isfinite(same["sync_c"]) and same["sync_d"] > 0 and same["n_sync_c"] == same["n_sync_d"] == 1
    assert not set(keys) & set(same["skipped"])
    edited = run(noise(10 * 640, seed=5))
    assert edited["lpaps"] > 0 and edited["sync_d"] != same["sync_d"]
    assert run(tone) == same  # deterministic
