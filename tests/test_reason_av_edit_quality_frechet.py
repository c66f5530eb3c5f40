"""ReasonAVEdit edit quality: the Fréchet distance (quality/formulas.py) and its two metrics, FVD (I3D,
models/i3d.py) and FAD (VGGish, models/vggish.py).

The math has golden values worked out by hand. The model glue runs end to end on small networks: for FAD
the real VGGish architecture (torchvggish's ``VGG(make_layers())``) randomly initialised; for FVD a small
scripted module with the call signature and output of StyleGAN-V's ``i3d_torchscript.pt``
(``detector(uint8 (B, 3, T, H, W), rescale=, resize=, return_features=) -> (B, D)``). That FVD test checks
the glue (frame choice, layout, the keyword arguments, pooling, the loading of a TorchScript file), not the
I3D network, which is whatever the user's archive holds. The other FVD path, a state dict of the real
``InceptionI3d`` architecture (VideoGPT's ``i3d_pretrained_400.pt``), is tested in
``test_reason_av_edit_quality_i3d.py`` with a randomly initialised network of that architecture. Nothing downloads.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from perckit.errors import InputNotFoundError, OptionError
from perckit.reason_av_edit.quality import formulas as F
from perckit.reason_av_edit.quality.models import BY_KEY
from perckit.reason_av_edit.quality.models.base import Clip, ModelOptions, ModelUnavailable, QualitySample

#: the test builds its small I3D stand-in with torch.jit.script, deprecated from torch 2.13 on (the reference
#: I3D is a TorchScript archive, so the test needs one)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")

TORCH_REASON = "torch is not installed (pip install 'perckit[quality]'); the FVD / FAD glue needs it"


# ---------------------------------------------------------------- the Fréchet distance, by hand


def test_fd_of_identical_sets_is_zero():
    a = np.random.default_rng(0).normal(size=(40, 3))
    assert F.fd_of_features(a, a) == 0.0
    assert F.fd_of_features(a, a[::-1].copy()) == 0.0  # the row order does not matter


def test_fd_of_one_dimensional_gaussians_by_hand():
    # FD of N(m1, s1^2) and N(m2, s2^2) is (m1 - m2)^2 + (s1 - s2)^2
    assert F.frechet_distance(1.0, 2.0**2, 4.0, 5.0**2) == pytest.approx(3.0**2 + 3.0**2, abs=1e-12)
    assert F.frechet_distance([0.0], [[1.0]], [0.0], [[9.0]]) == pytest.approx(4.0, abs=1e-12)


def test_fd_of_diagonal_covariances_by_hand():
    # |(0,0) - (1,2)|^2 = 5; Tr = 1 + 4 + 9 + 16 - 2 (sqrt(1*9) + sqrt(4*16)) = 30 - 22 = 8
    fd = F.frechet_distance(np.zeros(2), np.diag([1.0, 4.0]), np.array([1.0, 2.0]), np.diag([9.0, 16.0]))
    assert fd == pytest.approx(13.0, abs=1e-12)
    # the same covariances in a rotated basis (they still commute): the same value
    c, s = math.cos(0.3), math.sin(0.3)
    r = np.array([[c, -s], [s, c]])
    fd = F.frechet_distance(np.zeros(2), r @ np.diag([1.0, 4.0]) @ r.T, np.array([1.0, 2.0]), r @ np.diag([9.0, 16.0]) @ r.T)
    assert fd == pytest.approx(13.0, abs=1e-10)


def test_fd_against_the_identity_by_hand():
    # S1 = I: Tr(I + S2 - 2 S2^(1/2)) = sum (1 - sqrt(l))^2 over S2's eigenvalues l; [[2, 1], [1, 2]] has 3 and 1
    fd = F.frechet_distance(np.zeros(2), np.eye(2), np.zeros(2), np.array([[2.0, 1.0], [1.0, 2.0]]))
    assert fd == pytest.approx((1 - math.sqrt(3.0)) ** 2, abs=1e-12)


def test_feature_stats_is_the_unbiased_covariance():
    mu, sigma = F.feature_stats(np.array([[0.0, 1.0], [2.0, 1.0], [4.0, 4.0]]))
    np.testing.assert_allclose(mu, [2.0, 2.0])
    # deviations (-2, -1), (0, -1), (2, 2); sums of products / (n - 1) = 2
    np.testing.assert_allclose(sigma, [[8.0 / 2, 6.0 / 2], [6.0 / 2, 6.0 / 2]])
    with pytest.raises(ValueError, match="at least 2 feature rows"):
        F.feature_stats(np.zeros((1, 2)))


def test_fd_of_features_uses_ddof_1_by_hand():
    # {0, 2}: mean 1, variance 2; {0, 3, 6}: mean 3, variance 9 (with ddof=0 they would be 1 and 6)
    fd = F.fd_of_features(np.array([[0.0], [2.0]]), np.array([[0.0], [3.0], [6.0]]))
    assert fd == pytest.approx((1 - 3) ** 2 + (math.sqrt(2.0) - 3.0) ** 2, abs=1e-12)


def test_fd_of_features_is_none_below_two_rows_per_side():
    many = np.random.default_rng(1).normal(size=(5, 2))
    assert F.fd_of_features(many[:1], many) is None
    assert F.fd_of_features(many, many[:1]) is None
    assert F.fd_of_features(np.zeros((0, 2)), many) is None
    assert F.pooled_fd([{"edited": many, "source": np.zeros((0, 0))}]) is None


def test_fd_is_symmetric():
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(30, 4)), rng.normal(1.0, 2.0, size=(25, 4))
    assert F.fd_of_features(a, b) == pytest.approx(F.fd_of_features(b, a), rel=1e-10)
    assert F.fd_of_features(a, b) > 1.0


def test_pooled_fd_does_not_depend_on_the_record_order():
    rng = np.random.default_rng(3)
    records = [{"edited": rng.normal(size=(3, 3)), "source": rng.normal(0.5, 1.0, size=(3, 3))} for _ in range(6)]
    assert F.pooled_fd(records) == F.pooled_fd(records[::-1])  # bit for bit: the rows are sorted first


def test_fd_refuses_mismatched_or_non_finite_features():
    with pytest.raises(ValueError, match="3 and 2 feature dimensions"):
        F.fd_of_features(np.zeros((3, 3)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="not all finite"):
        F.fd_of_features(np.array([[0.0], [np.nan]]), np.zeros((2, 1)))
    with pytest.raises(ValueError, match="covariances"):
        F.frechet_distance(np.zeros(2), np.eye(3), np.zeros(2), np.eye(2))


def test_a_singular_product_gets_the_eps_offset(monkeypatch):
    seen = []
    real = F._sqrtm

    def flaky(m):
        seen.append(m.copy())
        return np.full_like(m, np.nan) if len(seen) == 1 else real(m)

    monkeypatch.setattr(F, "_sqrtm", flaky)
    s1, s2 = np.diag([1.0, 4.0]), np.diag([9.0, 16.0])
    tr = F.trace_sqrt_product(s1, s2)
    np.testing.assert_allclose(seen[1], (s1 + 1e-6 * np.eye(2)) @ (s2 + 1e-6 * np.eye(2)))
    assert tr == pytest.approx(11.0, abs=1e-5)


def test_a_large_imaginary_part_falls_back_to_the_symmetric_form(monkeypatch):
    monkeypatch.setattr(F, "_sqrtm", lambda m: np.eye(m.shape[0]) * (1.0 + 0.5j))
    # where the references raise, the trace comes from (S1^(1/2) S2 S1^(1/2))^(1/2): here sqrt(9) + sqrt(64)
    assert F.trace_sqrt_product(np.diag([1.0, 4.0]), np.diag([9.0, 16.0])) == pytest.approx(11.0, abs=1e-12)


def test_singular_covariances_by_hand():
    # two rank-1 covariances: S1 = u u^T / 2 (u = (1, 1, 0)), S2 = v v^T / 3 (v = (3, 1, 1)); S1 S2 = (2/3) u v^T has
    # the one eigenvalue (2/3) u.v = 8/3, so Tr (S1 S2)^(1/2) = sqrt(8/3); |mu1 - mu2|^2 = 7/18, Tr S1 = 1, Tr S2 = 11/3.
    # sqrtm of this defective product is off by 2e-6 (and differently for S2 S1); the symmetric form is not
    a = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    b = np.array([[3.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    want = 7 / 18 + 1 + 11 / 3 - 2 * math.sqrt(8 / 3)
    assert F.fd_of_features(a, b) == pytest.approx(want, abs=1e-12)
    assert F.fd_of_features(b, a) == pytest.approx(want, abs=1e-12)


_rows = st.integers(1, 4).flatmap(
    lambda d: st.tuples(
        hnp.arrays(np.float64, st.tuples(st.integers(2, 12), st.just(d)), elements=st.floats(-100, 100, width=32)),
        hnp.arrays(np.float64, st.tuples(st.integers(2, 12), st.just(d)), elements=st.floats(-100, 100, width=32)),
    )
)


@settings(max_examples=150, deadline=None)
@given(_rows)
def test_fd_is_non_negative_and_zero_on_itself(pair):
    """FD >= 0 and symmetric up to rounding, FD(a, a) == 0. The rounding scales with the covariances: for a
    singular covariance (fewer rows than dimensions, equal rows) the square root turns eigenvalues of order
    1e-16 * |S|^2 into 1e-8 * |S|, so the tolerance is 1e-9 plus 1e-7 times the traces."""
    a, b = pair
    fd = F.fd_of_features(a, b)
    scale = np.trace(F.feature_stats(a)[1]) + np.trace(F.feature_stats(b)[1])
    assert fd >= -(1e-9 + 1e-7 * scale)
    assert F.fd_of_features(a, a) == 0.0
    assert F.fd_of_features(a, b) == pytest.approx(F.fd_of_features(b, a), rel=1e-6, abs=1e-9 + 1e-7 * scale)


# ---------------------------------------------------------------- samples for the model glue


def _sample(sid: str, edited_frames: np.ndarray, source_frames: np.ndarray, edited_audio=None, source_audio=None, sr: int = 16000) -> QualitySample:
    return QualitySample(
        sample_id=sid, category="C1", sub_track="pure_instruction", instruction="make it red", target_text="a red car",
        edited=Clip(frames=edited_frames, fps=8.0, audio=edited_audio, sample_rate=sr),
        source=Clip(frames=source_frames, fps=8.0, audio=source_audio, sample_rate=sr),
    )


def _video(seed: int, t: int = 16, h: int = 24, w: int = 32) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(t, h, w, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason=TORCH_REASON)


# ---------------------------------------------------------------- FVD


@pytest.fixture(scope="module")
def tiny_i3d(torch):
    """A small scripted module called like StyleGAN-V's detector: uint8 (B, 3, T, H, W);
    ``rescale`` maps 0..255 to [-1, 1], ``resize`` resizes the frames (to 32 here, 224 in the real one),
    ``return_features`` returns the features, else their softmax."""
    import torch.nn.functional as tF
    from torch import nn

    class TinyI3D(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv3d(3, 6, kernel_size=3, stride=(2, 4, 4))
            self.fc = nn.Linear(6, 4)

        def forward(self, x: torch.Tensor, rescale: bool = False, resize: bool = False, return_features: bool = False) -> torch.Tensor:
            v = x.float()
            if rescale:
                v = v / 255.0 * 2.0 - 1.0
            if resize:
                v = tF.interpolate(v, size=[int(v.shape[2]), 32, 32], mode="trilinear", align_corners=False)
            h = torch.relu(self.conv(v)).mean(dim=[2, 3, 4])
            f = self.fc(h)
            if return_features:
                return f
            return torch.softmax(f, dim=-1)

    torch.manual_seed(0)
    return torch.jit.script(TinyI3D().eval())


def test_fvd_feeds_the_detector_as_stylegan_v_does(torch, tiny_i3d):
    from perckit.reason_av_edit.quality.models.i3d import FVDMetric

    video = _video(0, t=20)
    rows = FVDMetric(tiny_i3d).features(video)
    x = torch.from_numpy(video[:16]).permute(3, 0, 1, 2)[None]  # (1, 3, 16, H, W) uint8: the first 16 frames
    with torch.no_grad():
        want = tiny_i3d(x, rescale=True, resize=True, return_features=True).numpy()
        other = tiny_i3d(x, rescale=False, resize=True, return_features=True).numpy()
    np.testing.assert_allclose(rows, want, rtol=1e-6, atol=1e-6)
    assert not np.allclose(rows, other)


def test_clip_windows():
    from perckit.reason_av_edit.quality.models.i3d import clip_windows

    np.testing.assert_array_equal(clip_windows(40)[0], np.arange(16))
    assert [w[0] for w in clip_windows(40, sampling="windows")] == [0, 16]
    np.testing.assert_array_equal(clip_windows(31, sampling="uniform")[0], np.arange(0, 31, 2))
    assert clip_windows(15) == []
    with pytest.raises(OptionError, match="sampling"):
        clip_windows(40, sampling="random")


def test_fvd_end_to_end_with_a_small_detector(tiny_i3d):
    from perckit.reason_av_edit.quality.models.i3d import FVDMetric

    fvd = FVDMetric(tiny_i3d)
    sources = [_video(10 + i) for i in range(8)]
    same = [fvd.measure(_sample(f"s{i}", v, v)) for i, v in enumerate(sources)]
    assert fvd.reduce(same) == {"fvd": 0.0}
    brighter = [fvd.measure(_sample(f"s{i}", np.clip(v.astype(int) + 90, 0, 255).astype(np.uint8), v)) for i, v in enumerate(sources)]
    assert fvd.reduce(brighter)["fvd"] > 1e-3
    assert fvd.reduce(brighter[:1]) == {"fvd": None}  # one clip has no covariance
    assert fvd.reduce([]) == {"fvd": None}
    short = fvd.measure(_sample("short", _video(1, t=8), _video(2, t=30)))
    assert short["short"] and not np.size(short["edited"]) and not np.size(short["source"])
    assert fvd.reduce(brighter[:3] + [short]) == fvd.reduce(brighter[:3])


def test_fvd_windows_sampling_adds_a_row_per_window(monkeypatch, tiny_i3d):
    from perckit.reason_av_edit.quality.models import i3d

    rec = i3d.FVDMetric(tiny_i3d, sampling="windows", batch_size=2).measure(_sample("w", _video(3, t=50), _video(4, t=33)))
    assert rec["edited"].shape == (3, 4) and rec["source"].shape == (2, 4)
    monkeypatch.setattr(i3d, "MAX_BATCH_BYTES", 1)  # large frames: one clip per call, the same rows
    one = i3d.FVDMetric(tiny_i3d, sampling="windows", batch_size=2).measure(_sample("w", _video(3, t=50), _video(4, t=33)))
    np.testing.assert_allclose(one["edited"], rec["edited"], rtol=1e-5, atol=1e-6)


def test_fvd_refuses_a_detector_with_the_wrong_output(torch):
    from perckit.reason_av_edit.quality.models.i3d import FVDMetric

    class Flat(torch.nn.Module):
        def forward(self, x, rescale=False, resize=False, return_features=False):
            return x.float().mean()

    with pytest.raises(OptionError, match="expected a \\(clips, features\\) tensor"):
        FVDMetric(Flat()).features(_video(5))


def test_build_fvd_refuses_a_torchscript_file_and_takes_a_ready_module(tmp_path, torch, tiny_i3d):
    from perckit.reason_av_edit.quality.models.i3d import build_fvd

    path = tmp_path / "i3d_torchscript.pt"
    tiny_i3d.save(str(path))
    with pytest.raises(OptionError, match=r"got a TorchScript archive .*never loads TorchScript.*a state dict of the "
                                          r"PyTorch InceptionI3d: VideoGPT's i3d_pretrained_400.pt"):
        build_fvd(str(path), ModelOptions())
    with pytest.raises(OptionError, match="got a TorchScript archive"):
        build_fvd(tmp_path, ModelOptions())  # a folder holding only the archive: refused, not "no weights"
    (tmp_path / "folder").mkdir()
    path.rename(tmp_path / "folder" / "i3d_pretrained_400.pt")  # told apart by content, not by name
    with pytest.raises(OptionError, match="got a TorchScript archive"):
        build_fvd(tmp_path / "folder", ModelOptions())
    video = _video(6)
    rows = build_fvd(tiny_i3d, ModelOptions()).features(video)  # a module the caller built is theirs to run
    assert rows.shape == (1, 4) and np.isfinite(rows).all()


def test_build_fvd_without_weights_says_where_they_come_from(tmp_path, torch):
    with pytest.raises(ModelUnavailable, match="i3d_pretrained_400.pt of VideoGPT"):
        BY_KEY["fvd"].build(None, ModelOptions())
    with pytest.raises(InputNotFoundError, match="do not exist"):
        BY_KEY["fvd"].build(str(tmp_path / "missing.pt"), ModelOptions())
    with pytest.raises(ModelUnavailable, match="has no i3d_pretrained_400.pt or rgb_imagenet.pt"):
        BY_KEY["fvd"].build(str(tmp_path), ModelOptions())
    bad = tmp_path / "i3d.pt"
    bad.write_bytes(b"not a checkpoint")  # the checkpoint reader names the one format perckit loads
    with pytest.raises(OptionError, match="cannot be read as a torch checkpoint.*expected a state dict of the PyTorch InceptionI3d"):
        BY_KEY["fvd"].build(str(bad), ModelOptions())
    import zipfile

    fake = tmp_path / "fake_torchscript.pt"  # TorchScript's records (code/, constants.pkl) but no program: refused by content
    with zipfile.ZipFile(fake, "w") as z:
        z.writestr("fake/code/__torch__/m.py", "x")
        z.writestr("fake/constants.pkl", b"")
    with pytest.raises(OptionError, match="got a TorchScript archive"):
        BY_KEY["fvd"].build(str(fake), ModelOptions())


# ---------------------------------------------------------------- FAD


@pytest.fixture(scope="module")
def tiny_vggish(torch):
    """The real VGGish architecture (torchvggish 0.2's VGG(make_layers())), randomly initialised."""
    tv = pytest.importorskip("torchvggish", reason="torchvggish is not installed (pip install 'perckit[quality]')")
    torch.manual_seed(0)
    return tv.VGG(tv.make_layers(), postprocess=False).eval()


@pytest.fixture(scope="module")
def vggish_state_file(tmp_path_factory, torch, tiny_vggish):
    path = tmp_path_factory.mktemp("vggish") / "vggish-10086976.pth"
    torch.save(tiny_vggish.state_dict(), path)
    return path


def _tone(freq: float, seconds: float, seed: int, sr: int = 16000) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    noise = np.random.default_rng(seed).normal(0.0, 0.05, size=t.shape)
    return (0.5 * np.sin(2 * np.pi * freq * t) + noise).astype(np.float32)


def test_fad_embeddings_are_vggish_before_its_last_relu(torch, tiny_vggish):
    from torchvggish import vggish_input

    from perckit.reason_av_edit.quality.models.vggish import FADMetric

    audio = _tone(440.0, 2.5, 0)
    rows = FADMetric(tiny_vggish).embeddings(audio, 16000)
    assert rows.shape == (2, 128)  # two whole 0.96 s examples; the rest is dropped
    with torch.no_grad():
        full = tiny_vggish(vggish_input.waveform_to_examples(audio.astype(np.float64), 16000)).numpy()
    np.testing.assert_allclose(np.maximum(rows, 0.0), full, rtol=1e-5, atol=1e-6)  # torchvggish's forward ends with the ReLU
    assert (rows < 0).any()
    with_relu = FADMetric(tiny_vggish, activation=True).embeddings(audio[:16000], 16000)
    np.testing.assert_allclose(with_relu, full[:1], rtol=1e-5, atol=1e-6)


def test_fad_pads_a_short_clip_to_one_example(tiny_vggish):
    from perckit.reason_av_edit.quality.models.vggish import FADMetric, padded

    assert padded(np.ones(100), 16000).shape == (15600,) and padded(np.ones(100), 16000)[100:].max() == 0.0
    assert padded(np.ones(100), 8000).shape == (7801,)  # at another rate: 15,600 * 8000 / 16000 + 1 of margin
    assert padded(np.ones(20000), 16000).shape == (20000,)
    assert FADMetric(tiny_vggish).embeddings(_tone(300.0, 0.5, 1), 16000).shape == (1, 128)


def test_fad_end_to_end_with_the_vggish_architecture(tiny_vggish):
    from perckit.reason_av_edit.quality.models.vggish import FADMetric

    fad = FADMetric(tiny_vggish)
    video = _video(0, t=2)
    sources = [_tone(200.0 + 150.0 * i, 1.0, i) for i in range(2)]
    same = [fad.measure(_sample(f"s{i}", video, video, a, a)) for i, a in enumerate(sources)]
    assert same[0]["edited"].shape == (1, 128)
    assert fad.reduce(same) == {"fad": 0.0}
    # other tones in the edited audio: a shifted set (a random network embeds on a small scale: FAD ~ 1e-5)
    shifted = [{**r, "edited": fad.embeddings(_tone(3000.0 + 100.0 * i, 1.0, 10 + i), 16000)} for i, r in enumerate(same)]
    assert fad.reduce(shifted)["fad"] > 1e-7
    silent = fad.measure(_sample("silent", video, video, None, sources[0]))
    assert silent["no_audio"] and fad.reduce(shifted + [silent]) == fad.reduce(shifted)
    assert fad.reduce([silent]) == {"fad": None}
    assert fad.reduce(shifted[:1]) == {"fad": None}  # one 1 s clip a side: one embedding, no covariance


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(bool((sa[k] == sb[k]).all()) for k in sa)


def test_build_fad_loads_a_state_dict_and_the_torch_hub_default(tmp_path, monkeypatch, tiny_vggish, vggish_state_file):
    from perckit.reason_av_edit.quality.models.vggish import FADMetric, build_fad

    built = build_fad(str(vggish_state_file), ModelOptions())
    assert isinstance(built, FADMetric) and _same_weights(built.model, tiny_vggish)
    assert build_fad(tiny_vggish, ModelOptions()).model is tiny_vggish
    # None: where torch.hub saves torchvggish's weights, never downloaded
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(ModelUnavailable, match="vggish-10086976.pth"):
        BY_KEY["fad"].build(None, ModelOptions())
    with pytest.raises(ModelUnavailable, match="has no vggish-10086976.pth"):
        BY_KEY["fad"].build(str(tmp_path), ModelOptions())
    (tmp_path / "hub" / "checkpoints").mkdir(parents=True)
    (tmp_path / "hub" / "checkpoints" / "vggish-10086976.pth").symlink_to(vggish_state_file)
    assert _same_weights(BY_KEY["fad"].build(None, ModelOptions()).model, tiny_vggish)


def test_build_fad_refuses_files_that_are_not_vggish(tmp_path, torch, tiny_vggish):
    garbage = tmp_path / "g.pth"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(OptionError, match="cannot be read as a torch checkpoint"):
        BY_KEY["fad"].build(str(garbage), ModelOptions())
    other = tmp_path / "o.pth"
    torch.save({"fc.weight": torch.zeros(2, 2)}, other)
    with pytest.raises(OptionError, match="does not match VGGish's state dict"):
        BY_KEY["fad"].build(str(other), ModelOptions())
    with pytest.raises(OptionError, match="torchvggish VGGish module"):
        BY_KEY["fad"].build(torch.nn.Linear(2, 2), ModelOptions())


# ---------------------------------------------------------------- without the libraries


@pytest.mark.parametrize("missing", ["torch", "torchvggish"])
def test_missing_libraries_are_model_unavailable_not_import_errors(monkeypatch, missing):
    if missing == "torchvggish":
        pytest.importorskip("torch", reason=TORCH_REASON + " (this case: torch present, torchvggish absent)")
    monkeypatch.setitem(sys.modules, missing, None)  # an import of it now fails
    names = ["fad"] if missing == "torchvggish" else ["fvd", "fad"]
    for name in names:
        with pytest.raises(ModelUnavailable, match=f"{missing} is not installed.*perckit\\[quality\\]"):
            BY_KEY[name].build(None, ModelOptions())


# ---------------------------------------------------------------- through av_edit_quality


def test_fvd_and_fad_through_av_edit_quality(tiny_i3d, tiny_vggish):
    pytest.importorskip("av", reason="the edited clips are mp4s (PyAV)")
    from helpers.edit_quality import clip, reference, rgb_mp4

    from perckit.reason_av_edit import make_quality_prediction
    from perckit.reason_av_edit.features import encode_wav
    from perckit.reason_av_edit.quality.metric import av_edit_quality
    from perckit.reason_av_edit.quality.models.i3d import FVDMetric
    from perckit.reason_av_edit.quality.models.vggish import FADMetric

    refs, same, shifted = [], [], []
    for i in range(2):
        frames = clip(t=16, h=32, w=32, seed=20 + i)
        audio = encode_wav(_tone(250.0 + 200.0 * i, 1.0, i))
        ref = reference(f"s{i}", frames, audio=audio)
        refs.append(ref)
        same.append(make_quality_prediction(ref["sample_id"], ref["video"]["bytes"], audio))
        brighter = np.clip(frames.astype(int) + 90, 0, 255).astype(np.uint8)
        shifted.append(make_quality_prediction(ref["sample_id"], rgb_mp4(brighter), encode_wav(_tone(3000.0 + 100.0 * i, 1.0, 10 + i))))
    models = {"fvd": FVDMetric(tiny_i3d), "fad": FADMetric(tiny_vggish)}
    out = av_edit_quality(shifted, refs, metrics=["fvd", "fad"], models=models)
    assert out["fvd"] > 1e-3 and out["fad"] > 1e-7
    assert out["n_fvd"] == out["n_fad"] == 2 and not {"fvd", "fad"} & set(out["skipped"])
    assert out["per_category"]["where_only"]["fvd"] == out["fvd"]
    assert av_edit_quality(same, refs, metrics=["fvd"], models=models)["fvd"] == 0.0  # the source as the edit
    bare = av_edit_quality(same, refs, metrics=["fvd"])  # no weights: None, and where they come from
    assert bare["fvd"] is None and "i3d_pretrained_400.pt" in bare["skipped"]["fvd"]
