"""FAD: the Fréchet distance of VGGish embeddings of the edited audio against the source audio.

VGGish (Hershey et al., 2017, the AudioSet model) through the ``torchvggish`` package (harritaylor's
PyTorch port; ``torchvggish.VGG(torchvggish.make_layers(), postprocess=False)``, whose weights file is
``vggish-10086976.pth``). The conventions are those of the reference FAD implementations (Google's
``frechet_audio_distance`` and gudgud96's ``frechet_audio_distance`` package):

- 16 kHz mono audio in [-1, 1] cut into non-overlapping 0.96 s examples of 96 x 64 log-mel frames by
  ``torchvggish.vggish_input.waveform_to_examples`` (audio at another rate is resampled by it, with
  resampy); a trailing part shorter than one example is dropped, as there. No loudness normalisation
  (gudgud96's default; Google's pipeline scales each clip by its peak);
- the embedding is the 128-d output of the last fully connected layer *before* its ReLU, without the
  AudioSet PCA / quantisation post-processing (gudgud96's defaults ``use_pca=False``,
  ``use_activation=False``; Google's FAD reads the ``vggish/embedding`` tensor, which the TensorFlow
  VGGish computes with no activation);
- every 0.96 s embedding is one row: the rows of all the clips of a set are pooled into one Gaussian,
  the edited set against the reference set of the source audio of the same samples.

A clip shorter than one example (0.975 s = 15,600 samples at 16 kHz, the 25 ms window plus 95 hops of
10 ms) is padded with silence to one example rather than dropped, so a short edit still counts. A sample
contributes rows only when both its edited and its source side have audio (``"no_audio"`` in the
record otherwise), so the two sets stay the same samples.

Nothing downloads: with ``models={"fad": None}`` (the default) the weights are looked up where torch.hub
would have saved them (``<torch hub dir>/checkpoints/vggish-10086976.pth``); otherwise pass the path of
that state dict. ``torchvggish.Postprocessor`` (which downloads the PCA parameters) is never built.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ....errors import OptionError, check_option_type
from ..formulas import pooled_fd
from .base import (ModelOptions, ModelUnavailable, QualitySample, local_weights, positive_int, require, load_strict,
                   read_checkpoint, weights_in)

#: the sample rate VGGish expects
SAMPLE_RATE = 16000
#: the fewest samples at 16 kHz that make one 0.96 s example (25 ms window + 95 hops of 10 ms)
MIN_SAMPLES = 400 + 95 * 160
#: the state dict torchvggish publishes (and torch.hub saves under <hub dir>/checkpoints)
WEIGHTS_FILE = "vggish-10086976.pth"
#: where it comes from
WEIGHTS_URL = "https://github.com/harritaylor/torchvggish/releases/download/v0.1/vggish-10086976.pth"

_INSTALL = "pip install 'perckit[quality]' (torchvggish and resampy; a CPU torch first: pip install torch==2.13.0)"
_WHERE = f" (torchvggish's VGGish state dict {WEIGHTS_FILE}, from {WEIGHTS_URL}; download it once and pass its local path)"


def padded(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """``audio`` (mono float) padded at the end with zeros to at least one VGGish example
    (:data:`MIN_SAMPLES` at 16 kHz, proportionally more or fewer at ``sample_rate``, plus one sample of
    margin for the resampling); longer audio unchanged."""
    a = np.asarray(audio, dtype=np.float64).reshape(-1)
    need = MIN_SAMPLES if sample_rate == SAMPLE_RATE else math.ceil(MIN_SAMPLES * sample_rate / SAMPLE_RATE) + 1
    return np.pad(a, (0, max(0, need - a.shape[0])))


class FADMetric:
    """FAD with a ready VGGish network: a module with torchvggish's ``features`` (the convolutions) and
    ``embeddings`` (the fully connected layers) children, e.g. ``torchvggish.VGG(make_layers(),
    postprocess=False)`` with the published weights, or randomly initialised in the tests."""

    keys: tuple[str, ...] = ("fad",)

    def __init__(self, model: Any, device: str = "cpu", batch_size: int = 16, activation: bool = False) -> None:
        if not hasattr(model, "features") or not hasattr(model, "embeddings"):
            raise OptionError(f"models['fad']: expected a torchvggish VGGish module (with .features and .embeddings), got "
                              f"{type(model).__name__}")
        self.batch_size = positive_int("batch_size", batch_size)
        self.activation = check_option_type("fad activation", activation, "bool")
        self.model = model.eval().to(device)
        self.device = device

    def _embed(self, examples: Any) -> Any:
        """The embeddings of a batch of log-mel examples ``(B, 1, 96, 64)``: the convolutions, the
        channels-last flatten the TensorFlow VGGish uses, the fully connected layers without the last
        ReLU (unless ``activation``)."""
        import torch

        h = self.model.features(examples)
        h = h.permute(0, 2, 3, 1).reshape(h.shape[0], -1)
        layers = list(self.model.embeddings.children())
        if not self.activation and layers and isinstance(layers[-1], torch.nn.ReLU):
            layers = layers[:-1]
        for layer in layers:
            h = layer(h)
        return h

    def embeddings(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        """The ``(n, 128)`` VGGish embeddings of one mono clip, one row per 0.96 s example (a clip shorter
        than one example is padded with silence to one)."""
        import torch
        from torchvggish import vggish_input

        examples = vggish_input.waveform_to_examples(padded(audio, sample_rate), sample_rate, return_tensor=False)
        x = torch.from_numpy(np.ascontiguousarray(examples, dtype=np.float32))[:, None, :, :]
        rows = []
        with torch.inference_mode():
            for start in range(0, x.shape[0], self.batch_size):
                rows.append(self._embed(x[start:start + self.batch_size].to(self.device)).to("cpu", torch.float32).numpy())
        return np.concatenate(rows, axis=0)

    def measure(self, sample: QualitySample) -> dict[str, Any]:
        """``{"edited": rows, "source": rows}``: the VGGish embeddings of the edited and of the source
        audio. A sample whose edited or source side has no audio adds no rows on either side
        (``"no_audio": True``)."""
        e, s = sample.edited, sample.source
        if e.audio is None or s.audio is None or not np.size(e.audio) or not np.size(s.audio):
            empty = np.zeros((0, 0), dtype=np.float32)
            return {"edited": empty, "source": empty, "no_audio": True}
        return {"edited": self.embeddings(e.audio, e.sample_rate), "source": self.embeddings(s.audio, s.sample_rate), "no_audio": False}

    def reduce(self, records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
        """``{"fad": FD(edited embeddings, source embeddings)}`` pooled over ``records``; ``None`` with
        fewer than 2 embeddings (0.96 s frames) on a side."""
        return {"fad": pooled_fd(records, "edited", "source")}


def build_fad(weights: Any, options: ModelOptions) -> FADMetric:
    """The FAD metric from ``weights``: the local path of torchvggish's state dict (or of a folder holding
    ``vggish-10086976.pth``), a ready torchvggish module, or ``None`` for where torch.hub would have saved it
    (``<torch.hub.get_dir()>/checkpoints/vggish-10086976.pth``, the hub dir ``$TORCH_HOME/hub`` or ``~/.cache/torch/hub``).
    Absent weights or package raise :class:`ModelUnavailable`; a path that does not exist is an ``InputNotFoundError``;
    a file that is not a VGGish state dict an ``OptionError``."""
    torch = require("torch", _INSTALL)
    tv = require("torchvggish", _INSTALL)
    activation = (options.extra or {}).get("fad_activation", False)
    if isinstance(weights, torch.nn.Module):
        return FADMetric(weights, device=options.device, batch_size=options.batch_size, activation=activation)
    if not hasattr(tv, "VGG") or not hasattr(tv, "make_layers"):
        raise ModelUnavailable(f"this torchvggish has no VGG / make_layers (expected the PyPI torchvggish 0.2); {_INSTALL}")
    path = local_weights(weights, "fad", default=os.path.join(torch.hub.get_dir(), "checkpoints", WEIGHTS_FILE), pass_as=_WHERE)
    path = weights_in(path, "fad", [WEIGHTS_FILE], f"models['fad']: the folder {path!r} has no {WEIGHTS_FILE}{_WHERE}")
    state = read_checkpoint(path, "fad", "VGGish's state dict", _WHERE)
    model = load_strict(tv.VGG(tv.make_layers(), postprocess=False), state, path, "fad", "VGGish's state dict", _WHERE)
    return FADMetric(model, device=options.device, batch_size=options.batch_size, activation=activation)
