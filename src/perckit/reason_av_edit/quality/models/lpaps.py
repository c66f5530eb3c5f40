"""LPAPS with SpecVQGAN's VGGish-ish network: the network half (the formula and the spectrogram are
:mod:`..formulas`).

:func:`lpaps_module` builds our own torch module with the state-dict layout of SpecVQGAN's ``LPAPS``
(``specvqgan/modules/losses/lpaps.py``): ``scaling_layer.shift`` / ``scaling_layer.scale`` (the per-mel-band
mean and std, ``(1, 1, 80, 1)``), ``net.slice1 .. net.slice5`` (the 13 3 x 3 convolutions of the VGG16-like
``VGGishish`` features, keys ``net.slice1.0.weight`` .. ``net.slice5.28.bias``, the indices of
``VGGishish.features``), and ``lin0 .. lin4`` (``linK.model.1.weight``, the 1 x 1 convolutions after a
dropout). SpecVQGAN's ``lpaps.pt`` (the full trained LPAPS, published with commit 3894458 of Feb 2022 for
issue #13, md5 ``f8d4e7dba2b870222fe2bee26f85e7c9``) loads into it with ``strict=True``.

**Which checkpoint.** At SpecVQGAN's current HEAD, ``LPAPS`` loads ``vggishish16.pt`` (the VGGSound
classifier, whose weights sit under a ``"model"`` key) with ``strict=False`` into both the network and
the ``LPAPS`` module, so *nothing* loads: the features and the ``lin`` layers stay randomly initialised
(the README's erratum and issue #13 say so for training). A "LPAPS" computed with that code is a random
network's distance; perckit refuses that and needs ``lpaps.pt``. ``vggishish16.pt`` alone is not enough
(it has no ``lin`` weights); passing it gives an error that says so.

:class:`LPAPSMetric` scores each sample's **edited audio against its source audio**: both resampled to
22050 Hz, cut to the shorter of the two (SpecVQGAN pads / trims to 10 s; the ReasonAVEdit clips are shorter
and are not padded, so silence added to both does not dilute the distance), the :func:`..formulas.specvqgan_mel`
spectrogram (at most 860 frames = 10 s), ``2 x - 1``, the network, :func:`..formulas.lpaps_distance`.
A sample without audio on either side, or shorter than 16 spectrogram frames (0.17 s), gets ``None``.
LPAPS is a distance: 0 for identical audio, lower is closer to the source.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ....errors import OptionError
from ...metric import resample
from .. import formulas as perceptual
from .base import (QUALITY_EXTRA, MeanOfKeys, ModelOptions, QualitySample, local_weights, require, load_strict, read_checkpoint,
                   weights_in)

WEIGHTS_HELP = (" (SpecVQGAN's lpaps.pt, the trained LPAPS of commit 3894458: https://a3s.fi/swift/v1/"
                "AUTH_a235c0f452d648828f745589cde1219a/specvqgan_public/lpaps.pt; a folder holding it also works)")
#: the VGGishish feature layers: output channels per 3 x 3 convolution, ``"MP"`` a 2 x 2 max-pool
VGGISHISH16 = (64, 64, "MP", 128, 128, "MP", 256, 256, 256, "MP", 512, 512, 512, "MP", 512, 512, 512)
#: ``VGGishish.features`` indices of each slice (a conv and its ReLU take two indices, a pool one)
SLICES = ((0, 4), (4, 9), (9, 16), (16, 23), (23, 30))
#: channels of the five compared layers (relu1_2, relu2_2, relu3_3, relu4_3, relu5_3)
CHANNELS = (64, 128, 256, 512, 512)
CHECKPOINT = "lpaps.pt"


@functools.lru_cache(maxsize=1)
def _module_class() -> type:
    """The torch class, defined on first use (importing this module does not import torch)."""
    import torch
    from torch import nn

    class VGGishishSlices(nn.Module):
        """``VGGishish.features`` cut into the five LPIPS slices, each keeping its layers' original indices."""

        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = []
            c_in = 1
            for v in VGGISHISH16:
                if v == "MP":
                    layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
                else:
                    layers += [nn.Conv2d(c_in, int(v), kernel_size=3, padding=1), nn.ReLU()]
                    c_in = int(v)
            for k, (lo, hi) in enumerate(SLICES, 1):
                setattr(self, f"slice{k}", nn.Sequential(OrderedDict((str(i), layers[i]) for i in range(lo, hi))))

        def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
            """``(B, 1, 80, T)`` scaled spectrograms -> the five slices' outputs."""
            outs = []
            for k in range(1, len(SLICES) + 1):
                x = getattr(self, f"slice{k}")(x)
                outs.append(x)
            return outs

    class LPAPSNet(nn.Module):
        """The state-dict layout of SpecVQGAN's ``LPAPS`` (``use_dropout=True``)."""

        def __init__(self) -> None:
            super().__init__()
            self.scaling_layer = nn.Module()
            self.scaling_layer.register_buffer("shift", torch.zeros(1, 1, perceptual.MEL_BANDS, 1))
            self.scaling_layer.register_buffer("scale", torch.ones(1, 1, perceptual.MEL_BANDS, 1))
            self.net = VGGishishSlices()
            for k, c in enumerate(CHANNELS):
                lin = nn.Module()
                lin.model = nn.Sequential(nn.Dropout(), nn.Conv2d(c, 1, kernel_size=1, bias=False))
                setattr(self, f"lin{k}", lin)

    return LPAPSNet


def lpaps_module() -> Any:
    """A randomly initialised torch module with the keys and shapes of SpecVQGAN's ``LPAPS`` (shift 0,
    scale 1, random features and ``lin`` weights)."""
    return _module_class()()


def _lin_vector(w: Any) -> np.ndarray:
    """A layer's 1 x 1 weights as a ``(C,)`` array: from a ``NetLinLayer``-like module (``.model[-1]``), a
    ``Conv2d`` (``.weight``), a tensor or an array."""
    if hasattr(w, "model"):
        w = w.model[-1]
    if hasattr(w, "weight"):
        w = w.weight
    if hasattr(w, "detach"):
        w = w.detach().cpu().numpy()
    return np.asarray(w, dtype=np.float64).reshape(-1)


class LPAPSMetric(MeanOfKeys):
    """LPAPS of the edited against the source audio with a ready network: ``net`` maps ``(B, 1, 80, T)``
    scaled spectrograms to the five feature maps (as an :func:`lpaps_module`'s ``net``), ``lins`` are the five
    layers' 1 x 1 weights (modules or arrays), ``shift`` / ``scale`` the per-band scaling (``(80,)`` or the
    ``(1, 1, 80, 1)`` buffers; default 0 / 1)."""

    keys = ("lpaps",)

    def __init__(self, net: Any, lins: Sequence[Any], shift: Any = None, scale: Any = None, *, device: str = "cpu",
                 max_frames: int = perceptual.MEL_MAX_FRAMES) -> None:
        if len(lins) != len(CHANNELS):
            raise OptionError(f"LPAPSMetric: expected {len(CHANNELS)} lin layers (one per compared layer), got {len(lins)}")
        if not (isinstance(max_frames, int) and not isinstance(max_frames, bool) and max_frames >= perceptual.MIN_FRAMES):
            raise OptionError(f"option 'lpaps_max_frames': expected an int >= {perceptual.MIN_FRAMES}, got {max_frames!r}")
        self.lins = [_lin_vector(x) for x in lins]
        self.shift = np.zeros(perceptual.MEL_BANDS) if shift is None else _lin_vector(shift)
        self.scale = np.ones(perceptual.MEL_BANDS) if scale is None else _lin_vector(scale)
        if self.shift.size != perceptual.MEL_BANDS or self.scale.size != perceptual.MEL_BANDS:
            raise OptionError(f"LPAPSMetric: expected {perceptual.MEL_BANDS} shift and scale values (one per mel band), "
                              f"got {self.shift.size} and {self.scale.size}")
        self.device, self.max_frames = device, max_frames
        self.net = net.to(device).eval()

    @classmethod
    def from_module(cls, module: Any, **kwargs: Any) -> "LPAPSMetric":
        """From an :func:`lpaps_module` (e.g. with ``lpaps.pt`` loaded)."""
        lins = [getattr(module, f"lin{k}") for k in range(len(CHANNELS))]
        return cls(module.net, lins, module.scaling_layer.shift, module.scaling_layer.scale, **kwargs)

    def spectrogram(self, y: np.ndarray) -> np.ndarray:
        """The scaled network input ``(80, T)`` of 22050 Hz samples ``y``."""
        x = 2.0 * perceptual.specvqgan_mel(y, self.max_frames) - 1.0
        return (x - self.shift[:, None]) / self.scale[:, None]

    def distance(self, edited: np.ndarray, edited_sr: int, source: np.ndarray, source_sr: int) -> float | None:
        """LPAPS of two mono tracks (resampled to 22050 Hz, cut to the shorter); ``None`` when that is under
        16 spectrogram frames."""
        import torch

        a = resample(edited, edited_sr, perceptual.MEL_SR)
        b = resample(source, source_sr, perceptual.MEL_SR)
        n = min(a.size, b.size)
        if 1 + n // perceptual.MEL_HOP < perceptual.MIN_FRAMES:
            return None
        pair = np.stack([self.spectrogram(a[:n]), self.spectrogram(b[:n])])
        with torch.no_grad():
            x = torch.from_numpy(pair[:, None].astype(np.float32)).to(self.device)
            feats = [f.float().cpu().numpy().astype(np.float64) for f in self.net(x)]
        return perceptual.lpaps_distance([f[0] for f in feats], [f[1] for f in feats], self.lins)

    def measure(self, sample: QualitySample) -> Mapping[str, Any]:
        ed, src = sample.edited, sample.source
        if ed.audio is None or src.audio is None:
            return {"lpaps": None}
        return {"lpaps": self.distance(ed.audio, ed.sample_rate, src.audio, src.sample_rate)}


def build_lpaps(weights: Any, options: ModelOptions) -> LPAPSMetric:
    """The ``lpaps`` entry's factory: ``weights`` is the path of ``lpaps.pt`` or of a folder holding it (no
    default location: :class:`~.base.ModelUnavailable` saying where it comes from), loaded into :func:`lpaps_module`
    ``strict=True`` (``torch.load`` with ``weights_only=True``); :class:`~perckit.errors.OptionError` naming the
    file otherwise, with a hint when it is the classifier checkpoint ``vggishish16.pt``."""
    require("torch", QUALITY_EXTRA)
    require("scipy", "pip install scipy")
    path = local_weights(weights, "lpaps", pass_as=WEIGHTS_HELP)
    path = weights_in(path, "lpaps", [CHECKPOINT], f"models['lpaps']: the folder {path!r} has no {CHECKPOINT}; "
                      f"expected SpecVQGAN's {CHECKPOINT}", OptionError)
    state = read_checkpoint(path, "lpaps", f"SpecVQGAN's {CHECKPOINT} (a state dict)")
    if "model" in state and not any(str(k).startswith("lin") for k in state):
        raise OptionError(f"models['lpaps']: {path!r} looks like vggishish16.pt (the VGGSound classifier under 'model'), which "
                          f"has no LPAPS lin weights; expected SpecVQGAN's {CHECKPOINT}")
    module = load_strict(lpaps_module(), state, path, "lpaps", f"the keys and shapes of SpecVQGAN's LPAPS ({CHECKPOINT})")
    return LPAPSMetric.from_module(module, device=options.device)
