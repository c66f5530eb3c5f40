"""AV-A: the ImageBind cosine similarity of the edited clip's audio and its video.

What AV-A means is not settled in the literature: "AV-Align" (Yariv et al., 2024) is a model-free
score of matching audio-energy and optical-flow peaks, while MMAudio's av-benchmark reports an
"IB-score", the cosine of ImageBind's video and audio embeddings. The ReasonAVEdit card names AV-A
next to TV-A / TA-A, the embedding alignments, so AV-A here is the ImageBind cosine (the entry's
definition): ``torch.cosine_similarity`` of the two embeddings as in av-benchmark, but both from the
*edited* clip (av-benchmark pairs a ground-truth video with generated audio; an edit has both sides).

ImageBind (Girdhar et al., 2023, ``facebookresearch/ImageBind``, ``imagebind_huge``) is called through its
public API, ``model({ModalityType.VISION: v})`` / ``model({ModalityType.AUDIO: a})``; the inputs follow its
own loaders (``imagebind.data.load_and_transform_video_data`` / ``load_and_transform_audio_data``, which
read files; here the decoded clip is transformed in memory the same way):

- video: 5 clips of 2 s evenly spread over the clip (pytorchvideo's ``ConstantClipsPerVideoSampler``:
  clip ``i`` starts at ``i * max(duration - 2, 0) / 5`` s), from each the first and the last of its frames
  (``UniformTemporalSubsample(2)`` of the frames whose time ``k / fps`` lies in ``[start, start + 2)``),
  scaled to [0, 1], shortest side resized to 224 (bilinear), normalised with CLIP's mean / std, and 3
  spatial 224 x 224 crops (left / centre / right, or top / centre / bottom for portrait): ``(1, 15, 3, 2,
  224, 224)``; the model averages the 15 clip embeddings. A 2 s window without a frame (a clip under
  one frame period) uses the frame nearest its start;
- audio: mono, resampled to 16 kHz (scipy), 3 clips of 2 s spread the same way, each a 128-bin Kaldi
  log-mel spectrogram by ImageBind's own ``imagebind.data.waveform2melspec`` (204 frames), normalised
  with mean -4.268 / std 9.138: ``(1, 3, 1, 128, 204)``. ``waveform2melspec`` subtracts each clip's mean
  in place and ImageBind's loader hands it views of one waveform, so overlapping clips see the earlier
  clips' mean removal; the clips are passed the same way here, to give the same inputs;
- ``av_a`` of a sample = :func:`..formulas.cosine` of the audio and the vision embedding, in [-1, 1];
  ``None`` when the edited side has no audio or no frames. A table's value is the mean over its samples.

ImageBind is not on PyPI: ``pip install git+https://github.com/facebookresearch/ImageBind`` (which brings
torchaudio, torchvision and pytorchvideo, needed by ``imagebind.data``). Nothing downloads: pass the path
of ``imagebind_huge.pth``; by default the file ImageBind's own ``imagebind_huge(pretrained=True)`` saves,
``.checkpoints/imagebind_huge.pth`` under the working directory, is used when it exists.
"""

from __future__ import annotations

import math
from fractions import Fraction
from collections.abc import Callable
from typing import Any

import numpy as np

from ....errors import OptionError
from ..formulas import cosine
from .base import MeanOfKeys, ModelOptions, ModelUnavailable, QualitySample, local_weights, require, load_strict, read_checkpoint
from .clap import has_audio, resampled

INSTALL = ("pip install git+https://github.com/facebookresearch/ImageBind (not on PyPI; it needs torchaudio, "
           "torchvision and pytorchvideo)")
#: where ImageBind's imagebind_huge(pretrained=True) saves its weights (relative to the working directory)
DEFAULT_WEIGHTS = ".checkpoints/imagebind_huge.pth"
WEIGHTS_URL = "https://dl.fbaipublicfiles.com/imagebind/imagebind_huge.pth"
_WHERE = f" (ImageBind's imagebind_huge.pth, from {WEIGHTS_URL}; download it once and pass its local path)"

#: ImageBind's video loader: clips per video, clip length (s), frames per clip, crop size, CLIP mean / std
VIDEO_CLIPS = 5
CLIP_DURATION = 2
FRAMES_PER_CLIP = 2
CROP = 224
VISION_MEAN = (0.48145466, 0.4578275, 0.40821073)
VISION_STD = (0.26862954, 0.26130258, 0.27577711)
#: ImageBind's audio loader: clips per audio, rate, mel bins, frames, normalisation
AUDIO_CLIPS = 3
AUDIO_RATE = 16000
MEL_BINS = 128
MEL_FRAMES = 204
AUDIO_MEAN = -4.268
AUDIO_STD = 9.138


def clip_windows(duration: float, n: int, clip_duration: int = CLIP_DURATION) -> list[tuple[Fraction, Fraction]]:
    """pytorchvideo's ``ConstantClipsPerVideoSampler``: ``n`` windows ``[start, start + clip_duration)``
    with ``start = i * max(duration - clip_duration, 0) / n``, ``i = 0 .. n-1`` (all at 0 for a clip
    shorter than one window), in its exact arithmetic (``Fraction`` of the float difference), so
    ``int(start * rate)`` picks the same sample as ImageBind's loader."""
    step = Fraction(max(float(duration) - clip_duration, 0)) / n
    return [(i * step, i * step + clip_duration) for i in range(n)]


def window_frames(num_frames: int, fps: float, start: Fraction, end: Fraction) -> np.ndarray:
    """The indices of the frames whose time ``k / fps`` lies in ``[start, end)``, as pytorchvideo's
    decoders cut a clip (``ceil(fps * start) <= k < ceil(fps * end)``); the frame nearest ``start`` when
    none does."""
    rate = Fraction(fps)
    first, stop = math.ceil(rate * Fraction(start)), min(math.ceil(rate * Fraction(end)), num_frames)
    return np.arange(first, stop) if first < stop else np.array([min(num_frames - 1, max(0, round(rate * Fraction(start))))])


def crop_offsets(height: int, width: int, size: int = CROP) -> list[tuple[int, int]]:
    """The ``(y, x)`` corners of ImageBind's 3 spatial crops (``SpatialCrop(224, 3)``, ``uniform_crop``
    with indices 0, 1, 2): along the longer side the start, the centre (``ceil``) and the end; centred
    along the other."""
    y, x = math.ceil((height - size) / 2), math.ceil((width - size) / 2)
    return [(0, x), (y, x), (height - size, x)] if height > width else [(y, 0), (y, x), (y, width - size)]


def vision_input(frames: np.ndarray, fps: float) -> Any:
    """The ImageBind vision input of uint8 RGB ``frames`` ``(T, H, W, 3)``: a float32 tensor
    ``(1, 15, 3, 2, 224, 224)`` (5 clips x 3 crops, channels, 2 frames, crop)."""
    import torch
    import torch.nn.functional as F

    t, h, w = frames.shape[:3]
    size = (CROP, int(math.floor(w / h * CROP))) if h < w else (int(math.floor(h / w * CROP)), CROP)
    mean, std = (torch.tensor(v, dtype=torch.float32)[:, None, None, None] for v in (VISION_MEAN, VISION_STD))
    crops = []
    for start, end in clip_windows(t / float(fps), VIDEO_CLIPS):
        idx = window_frames(t, fps, start, end)
        pick = torch.linspace(0, idx.size - 1, FRAMES_PER_CLIP).clamp(0, idx.size - 1).long().numpy()
        clip = torch.from_numpy(np.ascontiguousarray(frames[idx[pick]])).permute(3, 0, 1, 2).float() / 255.0  # C, T, H, W
        clip = F.interpolate(clip, size=size, mode="bilinear", align_corners=False)
        clip = (clip - mean) / std
        for y, x in crop_offsets(size[0], size[1]):
            crops.append(clip[:, :, y:y + CROP, x:x + CROP])
    return torch.stack(crops)[None]


def audio_input(audio: Any, sample_rate: int, melspec: Callable[..., Any]) -> Any:
    """The ImageBind audio input of mono ``audio``: a float32 tensor ``(1, 3, 1, 128, 204)``; ``melspec``
    is ``imagebind.data.waveform2melspec`` (or a stand-in with its signature)."""
    import torch

    a = resampled(audio, sample_rate, AUDIO_RATE)
    waveform = torch.tensor(a, dtype=torch.float32)[None]  # a copy: melspec edits its input in place
    clips = []
    for start, end in clip_windows(waveform.shape[1] / AUDIO_RATE, AUDIO_CLIPS):
        view = waveform[:, int(start * AUDIO_RATE):int(end * AUDIO_RATE)]  # a view, as ImageBind's loader
        clips.append((melspec(view, AUDIO_RATE, MEL_BINS, MEL_FRAMES) - AUDIO_MEAN) / AUDIO_STD)
    return torch.stack(clips)[None]


def _package_melspec() -> Callable[..., Any]:
    return require("imagebind.data", INSTALL).waveform2melspec


class ImageBindMetric(MeanOfKeys):
    """AV-A with a ready ImageBind: ``model`` maps ``{modality: input}`` to ``{modality: embeddings}`` as
    ``imagebind_model.ImageBindModel`` does (the tests use a small stand-in with that API);
    ``melspec`` is ``imagebind.data.waveform2melspec`` unless given."""

    keys: tuple[str, ...] = ("av_a",)

    def __init__(self, model: Any, melspec: Callable[..., Any] | None = None, device: str = "cpu",
                 vision_key: str = "vision", audio_key: str = "audio") -> None:
        if not callable(model):
            raise OptionError(f"models['av_a']: expected an ImageBind model (callable on {{modality: tensor}}), got {type(model).__name__}")
        if melspec is not None and not callable(melspec):
            raise OptionError(f"models['av_a']: melspec must be callable, got {type(melspec).__name__}")
        self.model = model.eval().to(device) if hasattr(model, "eval") else model
        self.melspec = melspec if melspec is not None else _package_melspec()
        self.device = device
        self.vision_key = vision_key
        self.audio_key = audio_key

    def _embed(self, key: str, x: Any) -> np.ndarray:
        import torch

        with torch.inference_mode():
            out = self.model({key: x.to(self.device)})
        return out[key].detach().to("cpu", torch.float32).numpy()[0]

    def measure(self, sample: QualitySample) -> dict[str, Any]:
        """``{"av_a": cosine of the ImageBind audio and vision embeddings of the edited clip}`` (``None``
        without edited audio or frames)."""
        e = sample.edited
        frames = np.asarray(e.frames)
        if not has_audio(e) or frames.ndim != 4 or frames.shape[0] == 0:
            return {"av_a": None}
        vision = self._embed(self.vision_key, vision_input(frames, e.fps))
        audio = self._embed(self.audio_key, audio_input(e.audio, e.sample_rate, self.melspec))
        return {"av_a": cosine(audio, vision, "av_a")}


def build_imagebind(weights: Any, options: ModelOptions) -> ImageBindMetric:
    """The AV-A metric from ``weights``: the local path of ``imagebind_huge.pth`` (``None``: ImageBind's
    own ``.checkpoints/imagebind_huge.pth`` under the working directory if it exists). Without the
    ``imagebind`` package (or its torchaudio / pytorchvideo) or the weights: :class:`ModelUnavailable`;
    a path that does not exist: ``InputNotFoundError``; a file that is not the state dict: ``OptionError``."""
    require("torch", INSTALL)
    ib = require("imagebind.models.imagebind_model", INSTALL)
    melspec = _package_melspec()
    if not hasattr(ib, "imagebind_huge") or not hasattr(ib, "ModalityType"):
        raise ModelUnavailable(f"this imagebind has no imagebind_huge / ModalityType; {INSTALL}")
    path = local_weights(weights, "av_a", default=DEFAULT_WEIGHTS, pass_as=_WHERE)
    state = read_checkpoint(path, "av_a", "imagebind_huge's state dict", _WHERE)
    model = load_strict(ib.imagebind_huge(pretrained=False), state, path, "av_a", "imagebind_huge's state dict", _WHERE)
    return ImageBindMetric(model, melspec=melspec, device=options.device,
                           vision_key=ib.ModalityType.VISION, audio_key=ib.ModalityType.AUDIO)
