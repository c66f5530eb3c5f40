"""ReasonAVEdit edit quality: FVD with the real I3D architecture (models/i3d_net.py, the state-dict path of
models/i3d.py's build_fvd).

The expected state-dict layout below is written from piergiaj/pytorch-i3d's ``InceptionI3d`` (copied into
VideoGPT, whose ``i3d_pretrained_400.pt`` is that class's state dict), not derived from perckit's tables:
an endpoint per TF block, a unit = ``conv3d.weight`` + ``bn.*``, an Inception block = units ``b0``, ``b1a``,
``b1b``, ``b2a``, ``b2b``, ``b3b``, the ``logits`` convolution with a bias. The network used end to end is a
randomly initialised (seeded) network of that architecture, saved to a file and loaded through
``build_fvd`` strictly; it is the full-size I3D (frames are always resized to 224: its final 7 x 7 average
pool needs at least 193 pixels), about 1.5 s per 16-frame clip on two CPU cores, so the FVD through
``av_edit_quality`` runs 8 clips of 10 frames. Nothing downloads.
"""

from __future__ import annotations

import numpy as np
import pytest

from perckit.errors import OptionError
from perckit.reason_av_edit.quality.models import BY_KEY
from perckit.reason_av_edit.quality.models import i3d_net
from perckit.reason_av_edit.quality.models.base import ModelOptions

#: the TorchScript file of the weights_kind test is written with torch.jit.script, deprecated from torch 2.13 on
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")

# ---------------------------------------------------------------- the layout, written from the reference

#: the stem units: name -> (in, out, kernel)
STEM = {"Conv3d_1a_7x7": (3, 64, 7), "Conv3d_2b_1x1": (64, 64, 1), "Conv3d_2c_3x3": (64, 192, 3)}
#: Inception blocks: name -> (in channels, [b0, b1a, b1b, b2a, b2b, b3b] widths), as in pytorch_i3d.py
BLOCKS = {
    "Mixed_3b": (192, [64, 96, 128, 16, 32, 32]),
    "Mixed_3c": (256, [128, 128, 192, 32, 96, 64]),
    "Mixed_4b": (128 + 192 + 96 + 64, [192, 96, 208, 16, 48, 64]),
    "Mixed_4c": (192 + 208 + 48 + 64, [160, 112, 224, 24, 64, 64]),
    "Mixed_4d": (160 + 224 + 64 + 64, [128, 128, 256, 24, 64, 64]),
    "Mixed_4e": (128 + 256 + 64 + 64, [112, 144, 288, 32, 64, 64]),
    "Mixed_4f": (112 + 288 + 64 + 64, [256, 160, 320, 32, 128, 128]),
    "Mixed_5b": (256 + 320 + 128 + 128, [256, 160, 320, 32, 128, 128]),
    "Mixed_5c": (256 + 320 + 128 + 128, [384, 192, 384, 48, 128, 128]),
}


def _unit(prefix: str, c_in: int, c_out: int, k: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}.conv3d.weight": (c_out, c_in, k, k, k),
        **{f"{prefix}.bn.{n}": (c_out,) for n in ("weight", "bias", "running_mean", "running_var")},
        f"{prefix}.bn.num_batches_tracked": (),
    }


def expected_layout() -> dict[str, tuple[int, ...]]:
    """Every state-dict key of InceptionI3d(400, in_channels=3) and its shape."""
    want: dict[str, tuple[int, ...]] = {}
    for name, (c_in, c_out, k) in STEM.items():
        want.update(_unit(name, c_in, c_out, k))
    for name, (c_in, (w0, w1a, w1b, w2a, w2b, w3)) in BLOCKS.items():
        for branch, (i, o, k) in {"b0": (c_in, w0, 1), "b1a": (c_in, w1a, 1), "b1b": (w1a, w1b, 3), "b2a": (c_in, w2a, 1),
                                  "b2b": (w2a, w2b, 3), "b3b": (c_in, w3, 1)}.items():
            want.update(_unit(f"{name}.{branch}", i, o, k))
    want["logits.conv3d.weight"] = (400, 384 + 384 + 128 + 128, 1, 1, 1)
    want["logits.conv3d.bias"] = (400,)
    return want


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="torch is not installed (pip install 'perckit[quality]'); the FVD glue needs it")


@pytest.fixture(scope="module")
def net(torch):
    """The real I3D architecture, randomly initialised with a seed. torch's default convolution init shrinks
    the activations layer by layer (the features of different clips then differ by ~1e-8), so the weights
    are He-normal and the batch-norm statistics random: features of order 1 that differ between clips."""
    torch.manual_seed(0)
    model = i3d_net.inception_i3d()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Conv3d):
                torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                if m.bias is not None:
                    m.bias.normal_(0.0, 0.1)
            elif isinstance(m, torch.nn.BatchNorm3d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 2.0)
    return model.eval()


@pytest.fixture(scope="module")
def state_file(tmp_path_factory, torch, net):
    path = tmp_path_factory.mktemp("i3d") / "i3d_pretrained_400.pt"
    torch.save(net.state_dict(), path)
    return path


def _same_weights(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(bool((sa[k] == sb[k]).all()) for k in sa)


def test_the_state_dict_has_the_inception_i3d_layout(torch):
    state = i3d_net.inception_i3d().state_dict()
    want = expected_layout()
    assert len(want) == 344 and set(state) == set(want)
    assert {k: tuple(v.shape) for k, v in state.items()} == want
    assert sum(v.numel() for k, v in state.items() if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))) == 12_697_264
    assert not any(k.startswith(("MaxPool3d", "avg_pool", "dropout")) or ".b3a." in k for k in state)  # the pools hold no weights
    eps = {m.eps for m in i3d_net.inception_i3d().modules() if isinstance(m, torch.nn.BatchNorm3d)}
    assert eps == {1e-5}  # VideoGPT's copy; piergiaj's own class: bn_eps=1e-3
    assert {m.eps for m in i3d_net.inception_i3d(bn_eps=1e-3).modules() if isinstance(m, torch.nn.BatchNorm3d)} == {1e-3}


# ---------------------------------------------------------------- the forward pass, by hand


def output_size(size: int, kernel: int, stride: int) -> int:
    """The length of an axis of ``size`` after a "SAME"-padded layer (``ceil(size / stride)`` when padded)."""
    front, back = i3d_net.same_padding(size, kernel, stride)
    return (size + front + back - kernel) // stride + 1


def final_size(size: int, axis: int) -> int:
    """The length of ``axis`` (0 time, 1 height, 2 width) of a ``size``-long input after ``Mixed_5c``."""
    for _, spec in i3d_net.LAYERS:
        if spec[0] in ("unit", "pool"):
            kernel, stride = (spec[3], spec[4]) if spec[0] == "unit" else (spec[1], spec[2])
            size = output_size(size, kernel[axis], stride[axis])
    return size


def test_same_padding_and_sizes_by_hand():
    assert i3d_net.same_padding(224, 7, 2) == (2, 3)  # a multiple of the stride: 7 - 2 = 5, the smaller half in front
    assert i3d_net.same_padding(7, 3, 2) == (1, 1)  # 7 % 2 = 1: 3 - 1 = 2
    assert i3d_net.same_padding(8, 3, 2) == (0, 1)
    assert i3d_net.same_padding(5, 1, 1) == (0, 0)
    assert output_size(7, 3, 2) == 4 and output_size(224, 7, 2) == 112
    # time: 16 -> 8 (Conv3d_1a) -> 4 (MaxPool3d_4a) -> 2 (MaxPool3d_5a); the (2, 7, 7) pool needs 2 steps and 7 x 7
    assert [final_size(t, 0) for t in (8, 9, 10, 16, 32)] == [1, 2, 2, 2, 4]
    assert (final_size(224, 1), final_size(193, 2), final_size(192, 1)) == (7, 7, 6)
    assert (i3d_net.MIN_FRAMES, i3d_net.MIN_SIZE) == (9, 193)


def test_a_unit_pads_the_tf_way_and_a_pool_pads_with_zeros(torch, net):
    import torch.nn.functional as tF

    x = torch.randn(1, 3, 4, 6, 5, generator=torch.Generator().manual_seed(1))
    unit = net.Conv3d_1a_7x7
    # 7 x 7 x 7 stride 2: t = 4, h = 6 are multiples of 2 -> (2, 3); w = 5 -> 7 - 1 = 6 -> (3, 3)
    padded = tF.pad(x, (3, 3, 2, 3, 2, 3))
    bn = unit.bn
    want = torch.relu((tF.conv3d(padded, unit.conv3d.weight, stride=2) - bn.running_mean[None, :, None, None, None])
                      / torch.sqrt(bn.running_var + bn.eps)[None, :, None, None, None] * bn.weight[None, :, None, None, None]
                      + bn.bias[None, :, None, None, None])
    with torch.no_grad():
        got = unit(x)
    assert got.shape == (1, 64, 2, 3, 3)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    # 3 x 3 x 3 stride 1 pads (1, 1) on every axis (taken by the convolution itself): the same as padding first
    unit = net.Conv3d_2c_3x3
    y = torch.randn(1, 64, 3, 4, 5, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(unit(y), torch.relu(unit.bn(tF.conv3d(tF.pad(y, (1, 1) * 3), unit.conv3d.weight))), rtol=1e-4, atol=1e-5)
    # MaxPool3d_2a (1 x 3 x 3, stride (1, 2, 2)) on -1 everywhere: h = w = 4 pad (0, 1), the zero column / row wins
    out = net.MaxPool3d_2a_3x3(-torch.ones(1, 1, 1, 4, 4))
    assert out.shape == (1, 1, 1, 2, 2)
    assert out[0, 0, 0].tolist() == [[-1.0, 0.0], [0.0, 0.0]]


def test_the_network_refuses_clips_it_cannot_pool(torch, net):
    with pytest.raises(ValueError, match="at least 9 frames of at least 193 x 193"):
        net(torch.zeros(1, 3, 8, 224, 224))
    with pytest.raises(ValueError, match="at least 9 frames"):
        net(torch.zeros(1, 3, 16, 192, 224))


def test_preprocess_resizes_the_shorter_side_centre_crops_and_scales_to_plus_minus_one(torch):
    # a 32 x 48 frame, left half black, right half white, frame t tinted t: shorter side 32 -> 224 (x 7),
    # width 48 -> 336, centre crop from column (336 - 224) // 2 = 56: the edge (column 168) lands at 112
    video = np.zeros((1, 3, 2, 32, 48), dtype=np.uint8)
    video[..., 24:] = 255
    video[:, :, 1, :, :24] = 51
    v = i3d_net.preprocess(torch.from_numpy(video))
    assert v.dtype == torch.float32 and v.shape == (1, 3, 2, 224, 224)
    torch.testing.assert_close(v[:, :, 0, :, :108], torch.full((1, 3, 224, 108), -1.0))  # bilinear weights: float rounding
    torch.testing.assert_close(v[..., 116:], torch.ones(1, 3, 2, 224, 108))
    torch.testing.assert_close(v[:, :, 1, :, :108], torch.full((1, 3, 224, 108), 51 / 255 * 2 - 1))
    assert bool((v[..., 108:116].diff(dim=-1) >= 0).all())  # the bilinear ramp across the edge
    tall = i3d_net.preprocess(torch.from_numpy(np.ascontiguousarray(video.transpose(0, 1, 2, 4, 3))))
    torch.testing.assert_close(tall, v.transpose(3, 4))  # the same rule on a tall frame
    square = i3d_net.preprocess(torch.full((1, 3, 1, 20, 20), 255, dtype=torch.uint8), rescale=False)
    assert square.shape == (1, 3, 1, 224, 224)
    torch.testing.assert_close(square, torch.full((1, 3, 1, 224, 224), 255.0))  # no rescale: 0..255 kept
    same = i3d_net.preprocess(torch.full((1, 3, 1, 5, 7), 0, dtype=torch.uint8), resize=False)
    assert same.shape == (1, 3, 1, 5, 7) and bool((same == -1.0).all())  # no resize: the size kept


# ---------------------------------------------------------------- loading through build_fvd


def weights_kind(path: str) -> str:
    """``"torchscript"`` when ``path`` is a TorchScript archive (:func:`perckit.io.model_files.is_torchscript` of its
    zip records, read through the checked reader), else ``"state_dict"``."""
    from perckit.io.model_files import is_torchscript, open_weights, zip_records

    with open_weights(path, "models['fvd']") as f:
        records = zip_records(f, f"models['fvd']: {str(path)!r}")
    return "torchscript" if records is not None and is_torchscript(records) else "state_dict"


def test_build_fvd_loads_an_inception_i3d_state_dict_strictly(tmp_path, torch, net, state_file):
    from perckit.reason_av_edit.quality.models.i3d import FVDMetric, build_fvd

    built = BY_KEY["fvd"].build(str(state_file), ModelOptions(batch_size=4))
    assert isinstance(built, FVDMetric) and built.batch_size == 4 and built.num_frames == 16
    assert type(built.detector).__name__ == "I3DFeatures" and _same_weights(built.detector.net, net)
    assert not built.detector.training and not built.detector.net.training
    assert _same_weights(build_fvd(tmp_path.parent / state_file.parent.name, ModelOptions()).detector.net, net)  # its folder
    assert build_fvd(net, ModelOptions()).detector.net is net  # a bare InceptionI3d is wrapped
    # an old-style file: legacy (non-zip) pickle, a plain dict without the num_batches_tracked buffers
    old = tmp_path / "rgb_imagenet.pt"
    torch.save({k: v for k, v in net.state_dict().items() if not k.endswith("num_batches_tracked")}, old, _use_new_zipfile_serialization=False)
    assert weights_kind(str(old)) == "state_dict" and weights_kind(str(state_file)) == "state_dict"
    assert _same_weights(build_fvd(str(old), ModelOptions()).detector.net, net)
    scripted = tmp_path / "i3d_torchscript.pt"
    torch.jit.script(torch.nn.Linear(2, 2)).save(str(scripted))
    assert weights_kind(str(scripted)) == "torchscript"


def test_build_fvd_refuses_other_layouts_and_too_few_frames(tmp_path, torch, net, state_file):
    from perckit.reason_av_edit.quality.models.i3d import build_fvd

    state = dict(net.state_dict())
    missing = tmp_path / "missing_key.pt"
    torch.save({k: v for k, v in state.items() if k != "Mixed_4d.b2b.conv3d.weight"}, missing)
    with pytest.raises(OptionError, match=r"does not match the InceptionI3d state dict .*Missing key.*Mixed_4d\.b2b\.conv3d\.weight"):
        build_fvd(str(missing), ModelOptions())
    other = tmp_path / "kinetics600.pt"  # a 600-class logits layer
    torch.save({**state, "logits.conv3d.weight": torch.zeros(600, 1024, 1, 1, 1), "logits.conv3d.bias": torch.zeros(600)}, other)
    with pytest.raises(OptionError, match=r"does not match the InceptionI3d state dict .*logits\.conv3d\.weight"):
        build_fvd(str(other), ModelOptions())
    listed = tmp_path / "list.pt"
    torch.save([1, 2], listed)
    with pytest.raises(OptionError, match="holds a list, expected a state dict of the PyTorch InceptionI3d"):
        build_fvd(str(listed), ModelOptions())
    with pytest.raises(OptionError, match="'fvd num_frames': the InceptionI3d needs at least 9 frames per clip.*got 8"):
        build_fvd(str(state_file), ModelOptions(extra={"fvd_num_frames": 8}))
    assert build_fvd(str(state_file), ModelOptions(extra={"fvd_num_frames": 10})).num_frames == 10


# ---------------------------------------------------------------- end to end


def test_the_detector_rows_are_the_networks_logits_of_the_preprocessed_clip(torch, net):
    from perckit.reason_av_edit.quality.models.i3d import FVDMetric

    video = np.random.default_rng(0).integers(0, 256, size=(20, 24, 32, 3), dtype=np.uint8)
    rows = FVDMetric(i3d_net.i3d_features(net)).features(video)
    assert rows.shape == (1, 400) and rows.dtype == np.float32 and np.isfinite(rows).all()
    clip = torch.from_numpy(video[:16]).permute(3, 0, 1, 2)[None]  # the first 16 frames, (1, 3, 16, H, W)
    with torch.no_grad():
        want = net(i3d_net.preprocess(clip)).numpy()
    np.testing.assert_allclose(rows, want, rtol=1e-5, atol=1e-5)
    assert np.abs(rows).mean() > 0.1  # the seeded init gives features of order 1


def test_fvd_through_av_edit_quality_with_the_real_i3d_architecture(state_file):
    pytest.importorskip("av", reason="the edited clips are mp4s (PyAV)")
    from helpers.edit_quality import clip, reference, rgb_mp4

    from perckit.reason_av_edit import make_quality_prediction
    from perckit.reason_av_edit.quality.metric import av_edit_quality

    refs, same, brighter = [], [], []
    for i in range(2):
        frames = clip(t=16, h=32, w=32, seed=40 + i)
        ref = reference(f"s{i}", frames)
        refs.append(ref)
        same.append(make_quality_prediction(ref["sample_id"], ref["video"]["bytes"]))
        brighter.append(make_quality_prediction(ref["sample_id"], rgb_mp4(np.clip(frames.astype(int) + 90, 0, 255).astype(np.uint8))))
    # 10-frame clips (the fewest JunyaoHu's FVD takes; the network needs 9): the same path as FVD16 at 5/8 of its
    # cost, which is 8 full-size I3D passes here (the 16-frame default is the test above)
    kwargs = {"metrics": ["fvd"], "models": {"fvd": str(state_file)}, "model_options": {"fvd_num_frames": 10}}
    out = av_edit_quality(brighter, refs, **kwargs)
    assert out["n_fvd"] == 2 and "fvd" not in out["skipped"]
    assert np.isfinite(out["fvd"]) and out["fvd"] > 1e-3
    assert av_edit_quality(same, refs, **kwargs)["fvd"] == pytest.approx(0.0, abs=1e-9)  # the source as the edit

