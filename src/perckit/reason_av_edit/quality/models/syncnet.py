"""Sync-C / Sync-D with SyncNet: the network half (the math is :mod:`..formulas`).

:func:`syncnet_module` builds our own torch module with the layer layout of ``S`` in
joonson/syncnet_python's ``SyncNetModel.py``, so that the published ``syncnet_v2.model`` (a state dict with
the keys of ``S``: ``netcnnaud.*``, ``netfcaud.*``, ``netfclip.*``, ``netcnnlip.*``) loads with
``strict=True``. :class:`SyncNetMetric` measures the **edited** clip (its frames and its audio): the
``offset`` / Sync-D / Sync-C of each sample, Wav2Lip's means over the samples.

**Deviation from the official pipeline: no face detection.** syncnet_python's ``run_pipeline.py`` finds
faces with S3FD, tracks them, and crops a square around each face track (median-smoothed boxes, 40 %
margin) before SyncNet sees the frames; perckit has no face detector. By default (``crop="full"``) the
whole frame is resized to 224 x 224, which is what Wav2Lip's ``calculate_scores_LRS.py`` does for its
already face-cropped LRS2 videos; ``"center_square"`` takes the largest centred square first, and a
``(x0, y0, x1, y1)`` tuple of fractions of the width / height takes that box (e.g. a known face region).
On ReasonAVEdit's scenes a face usually fills a small part of the frame, so Sync-C / Sync-D measure how
well SyncNet's lip features of the whole frame follow the audio; the numbers are not comparable with
lip-sync papers' tables and are meaningful mostly for talking-face samples. The other differences: frames
are not JPEG-compressed on the way (the pipeline extracts JPEGs with ffmpeg), the 25 fps conversion takes
the nearest frame (:func:`..formulas.resample_indices`), the bilinear resize is torch's (cv2's INTER_LINEAR
rule, up to its fixed-point rounding), and the MFCC is our numpy transcription of
``python_speech_features.mfcc`` (:func:`..formulas.speech_mfcc`, equal to it to 1e-12 on the test signals).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ....errors import OptionError
from ...metric import resample
from .. import formulas as sync
from .base import (QUALITY_EXTRA, MeanOfKeys, ModelOptions, QualitySample, local_weights, load_strict, positive_int,
                   read_checkpoint, require)

WEIGHTS_HELP = (" (syncnet_v2.model from joonson/syncnet_python's download_model.sh: "
                "http://www.robots.ox.ac.uk/~vgg/software/lipsync/data/syncnet_v2.model)")
CROPS = ("full", "center_square")

# (kind, arguments) per layer of the two convolutional stacks, in state-dict order: conv = (in, out, kernel,
# stride, padding), bn = (channels,), pool = (kernel, stride, padding), relu = ().
_AUDIO_STACK: tuple[tuple[str, tuple], ...] = (
    ("conv", (1, 64, (3, 3), (1, 1), (1, 1))), ("bn", (64,)), ("relu", ()), ("pool", ((1, 1), (1, 1), 0)),
    ("conv", (64, 192, (3, 3), (1, 1), (1, 1))), ("bn", (192,)), ("relu", ()), ("pool", ((3, 3), (1, 2), 0)),
    ("conv", (192, 384, (3, 3), (1, 1), (1, 1))), ("bn", (384,)), ("relu", ()),
    ("conv", (384, 256, (3, 3), (1, 1), (1, 1))), ("bn", (256,)), ("relu", ()),
    ("conv", (256, 256, (3, 3), (1, 1), (1, 1))), ("bn", (256,)), ("relu", ()), ("pool", ((3, 3), (2, 2), 0)),
    ("conv", (256, 512, (5, 4), (1, 1), (0, 0))), ("bn", (512,)), ("relu", ()),
)
_LIP_STACK: tuple[tuple[str, tuple], ...] = (
    ("conv", (3, 96, (5, 7, 7), (1, 2, 2), 0)), ("bn", (96,)), ("relu", ()), ("pool", ((1, 3, 3), (1, 2, 2), 0)),
    ("conv", (96, 256, (1, 5, 5), (1, 2, 2), (0, 1, 1))), ("bn", (256,)), ("relu", ()),
    ("pool", ((1, 3, 3), (1, 2, 2), (0, 1, 1))),
    ("conv", (256, 256, (1, 3, 3), (1, 1, 1), (0, 1, 1))), ("bn", (256,)), ("relu", ()),
    ("conv", (256, 256, (1, 3, 3), (1, 1, 1), (0, 1, 1))), ("bn", (256,)), ("relu", ()),
    ("conv", (256, 256, (1, 3, 3), (1, 1, 1), (0, 1, 1))), ("bn", (256,)), ("relu", ()),
    ("pool", ((1, 3, 3), (1, 2, 2), 0)),
    ("conv", (256, 512, (1, 6, 6), (1, 1, 1), 0)), ("bn", (512,)), ("relu", ()),
)


@functools.lru_cache(maxsize=1)
def _module_class() -> type:
    """The torch class, defined on first use (importing this module does not import torch)."""
    import torch
    from torch import nn

    def stack(spec: Sequence[tuple[str, tuple]], dims: int) -> nn.Sequential:
        conv, bn, pool = (nn.Conv2d, nn.BatchNorm2d, nn.MaxPool2d) if dims == 2 else (nn.Conv3d, nn.BatchNorm3d, nn.MaxPool3d)
        make = {"conv": conv, "bn": bn, "pool": pool, "relu": nn.ReLU}  # a layer's arguments: its class's first parameters
        return nn.Sequential(*(make[kind](*args) for kind, args in spec))

    def head(embed_dim: int) -> nn.Sequential:
        return nn.Sequential(nn.Linear(512, 512), nn.BatchNorm1d(512), nn.ReLU(), nn.Linear(512, embed_dim))

    class SyncNet(nn.Module):
        """SyncNet's two towers in the layout of syncnet_python's ``S`` (attribute order = key order)."""

        def __init__(self, embed_dim: int = 1024) -> None:
            super().__init__()
            self.netcnnaud = stack(_AUDIO_STACK, 2)
            self.netfcaud = head(embed_dim)
            self.netfclip = head(embed_dim)
            self.netcnnlip = stack(_LIP_STACK, 3)

        def forward_aud(self, x: torch.Tensor) -> torch.Tensor:
            """``(B, 1, 13, 20)`` MFCC windows -> ``(B, embed_dim)``."""
            return self.netfcaud(self.netcnnaud(x).flatten(1))

        def forward_lip(self, x: torch.Tensor) -> torch.Tensor:
            """``(B, 3, 5, 224, 224)`` BGR 0..255 frame windows -> ``(B, embed_dim)``."""
            return self.netfclip(self.netcnnlip(x).flatten(1))

    return SyncNet


def syncnet_module(embed_dim: int = 1024) -> Any:
    """A randomly initialised SyncNet (torch ``nn.Module``) whose ``state_dict`` keys and shapes are those
    of syncnet_python's ``S(num_layers_in_fc_layers=embed_dim)``."""
    return _module_class()(embed_dim)


def check_crop(crop: Any) -> Any:
    """``crop`` is ``"full"``, ``"center_square"`` or ``(x0, y0, x1, y1)`` fractions with ``0 <= x0 < x1 <= 1``
    and ``0 <= y0 < y1 <= 1``; :class:`~perckit.errors.OptionError` otherwise."""
    if isinstance(crop, str) and crop in CROPS:
        return crop
    if isinstance(crop, (tuple, list)) and len(crop) == 4 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in crop):
        x0, y0, x1, y1 = (float(v) for v in crop)
        if 0.0 <= x0 < x1 <= 1.0 and 0.0 <= y0 < y1 <= 1.0:
            return (x0, y0, x1, y1)
    raise OptionError(f"option 'sync_crop': expected 'full', 'center_square' or (x0, y0, x1, y1) fractions of the frame "
                      f"with x0 < x1 and y0 < y1 in [0, 1], got {crop!r}")


def crop_box(height: int, width: int, crop: Any) -> tuple[int, int, int, int]:
    """``(top, bottom, left, right)`` pixel bounds of ``crop`` (see :func:`check_crop`) in a frame of
    ``height`` x ``width``: the whole frame; the largest centred square (offsets ``(h - s) // 2``,
    ``(w - s) // 2``); or the fraction box, rounded outwards, at least one pixel."""
    crop = check_crop(crop)
    if crop == "full":
        return 0, height, 0, width
    if crop == "center_square":
        s = min(height, width)
        top, left = (height - s) // 2, (width - s) // 2
        return top, top + s, left, left + s
    x0, y0, x1, y1 = crop
    top, left = int(np.floor(y0 * height)), int(np.floor(x0 * width))
    bottom, right = max(top + 1, int(np.ceil(y1 * height))), max(left + 1, int(np.ceil(x1 * width)))
    return top, min(bottom, height), left, min(right, width)


def lip_frames(frames: np.ndarray, fps: float, crop: Any = "full", device: str = "cpu") -> Any:
    """The lip-tower input frames of a clip, a ``(T', 3, 224, 224)`` uint8 torch tensor of BGR values
    (the network reads them as floats in 0..255): read at 25 fps (:func:`..formulas.resample_indices`), cropped (:func:`crop_box`), resized
    bilinearly to 224 x 224 (half-pixel centres, no antialiasing, as ``cv2.resize``'s default), rounded
    to integers as cv2's uint8 output, RGB -> BGR (cv2 reads BGR)."""
    import torch
    import torch.nn.functional as F

    f = np.asarray(frames)
    idx = sync.resample_indices(f.shape[0], fps)
    top, bottom, left, right = crop_box(f.shape[1], f.shape[2], crop)
    out = []
    for start in range(0, idx.size, 64):
        chunk = f[idx[start:start + 64], top:bottom, left:right, ::-1]
        x = torch.from_numpy(np.ascontiguousarray(chunk)).to(device).permute(0, 3, 1, 2).float()
        x = F.interpolate(x, size=(sync.CROP_SIZE, sync.CROP_SIZE), mode="bilinear", align_corners=False)
        out.append(x.round().clamp(0, 255).to(torch.uint8))
    return torch.cat(out) if out else torch.zeros((0, 3, sync.CROP_SIZE, sync.CROP_SIZE), dtype=torch.uint8, device=device)


class SyncNetMetric(MeanOfKeys):
    """Sync-C / Sync-D of the edited clips with a ready SyncNet (:func:`syncnet_module` layout, loaded or
    random). ``measure`` embeds the clip's windows and returns its :func:`..formulas.sync_record`; a clip
    without audio, or shorter than 6 frames at 25 fps, gets ``None`` values (not counted)."""

    keys = ("sync_c", "sync_d")

    def __init__(self, model: Any, *, vshift: int = sync.VSHIFT, crop: Any = "full", batch_size: int = 20, device: str = "cpu") -> None:
        self.vshift, self.batch_size = positive_int("sync_vshift", vshift), positive_int("batch_size", batch_size)
        self.crop = check_crop(crop)
        self.device = device
        self.model = model.to(device).eval()

    def features(self, frames: np.ndarray, fps: float, audio: np.ndarray, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
        """``(video_feats, audio_feats)``, ``(N, d)`` float32 each, for the ``N`` windows of the clip."""
        import torch

        video = lip_frames(frames, fps, self.crop, self.device)
        pcm = sync.to_int16_scale(resample(audio, sample_rate, sync.AUDIO_SR))  # 16 kHz
        n = sync.window_count(video.shape[0], pcm.size)
        if n == 0:
            return np.zeros((0, 0), np.float32), np.zeros((0, 0), np.float32)
        mfcc = sync.mfcc_windows(sync.speech_mfcc(pcm, sync.AUDIO_SR), n)
        vf, af = [], []
        with torch.no_grad():
            for start in range(0, n, self.batch_size):
                stop = min(n, start + self.batch_size)
                clips = torch.stack([video[i:i + sync.WINDOW_FRAMES] for i in range(start, stop)]).float()  # (B, 5, 3, H, W)
                vf.append(self.model.forward_lip(clips.permute(0, 2, 1, 3, 4)).float().cpu().numpy())
                a = torch.from_numpy(mfcc[start:stop]).to(self.device)
                af.append(self.model.forward_aud(a).float().cpu().numpy())
        return np.concatenate(vf), np.concatenate(af)

    def measure(self, sample: QualitySample) -> Mapping[str, Any]:
        clip = sample.edited
        if clip.audio is None or clip.frames.shape[0] == 0:
            return {"sync_c": None, "sync_d": None, "offset": None, "windows": 0}
        vf, af = self.features(clip.frames, clip.fps, clip.audio, clip.sample_rate)
        return sync.sync_record(vf, af, self.vshift)


def build_syncnet(weights: Any, options: ModelOptions) -> SyncNetMetric:
    """The ``sync`` entry's factory: ``weights`` is the path of ``syncnet_v2.model`` (no default location:
    :class:`~.base.ModelUnavailable` saying where it comes from), loaded into :func:`syncnet_module` ``strict=True``
    (``torch.load`` with ``weights_only=True``; a file that is not such a state dict is an
    :class:`~perckit.errors.OptionError` naming it). ``options.extra`` may set ``sync_vshift`` (default 15) and
    ``sync_crop`` (default ``"full"``, see :func:`check_crop`)."""
    require("torch", QUALITY_EXTRA)
    path = local_weights(weights, "sync", pass_as=WEIGHTS_HELP)
    extra = options.extra or {}
    crop = check_crop(extra.get("sync_crop", "full"))
    state = read_checkpoint(path, "sync", "a SyncNet state dict (syncnet_v2.model)")
    model = load_strict(syncnet_module(), state, path, "sync", "the keys and shapes of syncnet_python's S (syncnet_v2.model)")
    return SyncNetMetric(model, vshift=extra.get("sync_vshift", sync.VSHIFT), crop=crop, batch_size=options.batch_size,
                         device=options.device)
