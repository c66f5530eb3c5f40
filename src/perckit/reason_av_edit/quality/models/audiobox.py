"""PQ: the production-quality axis of Meta's Audiobox Aesthetics for the edited audio.

Audiobox Aesthetics (Tjandra et al., 2025, ``facebookresearch/audiobox-aesthetics``, the
``audiobox_aesthetics`` package) predicts four axes (CE, CU, PC, PQ) from a WavLM encoder; PQ is the
"production quality" one, on its 1-10 scale. The package's model class
``audiobox_aesthetics.model.aes.AesMultiOutput`` needs only torch (and huggingface_hub): its predictor
(``audiobox_aesthetics.infer.AesPredictor``) imports torchaudio for reading and resampling only, so
the predictor's steps are done here without it, as there:

- the edited audio, mono, resampled to 16 kHz (scipy's ``resample_poly`` where the package uses
  torchaudio's sinc resampler: the values can differ slightly when the rate is not already 16 kHz;
  the decoded benchmark audio is 16 kHz);
- cut into 10 s windows every 10 s, each zero-padded to 10 s with a mask of its real samples;
- the model's PQ output of each window mapped back to the rating scale by the checkpoint's
  ``target_transform`` (``pred * std + mean``), and the windows averaged weighted by their real
  lengths (the benchmark's clips are under 5 s: one window);
- ``pq`` of a sample is that value (``None`` without edited audio); a table's value is the mean over
  its samples that have one.

Weights, never downloaded: ``None`` reads ``facebook/audiobox-aesthetics`` from the Hugging Face cache
(its ``config.json`` + ``model.safetensors``, loaded by the class's ``from_pretrained`` as the
package's predictor does, once every file of the folder is checked; a folder without ``model.safetensors``
is not handed over, so no ``pytorch_model.bin`` pickle is read); a string is a local folder of that layout, a cached repo id, or the
package's ``checkpoint.pt`` (``state_dict`` + ``model_cfg`` + ``target_transform``, read with
``weights_only=True``). A :class:`PQMetric` built from any ``AesMultiOutput`` (the tests use the real
class with a tiny WavLM configuration, randomly initialised) can be passed instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from ....errors import OptionError
from ....io.model_files import folder_file
from .base import MeanOfKeys, ModelOptions, ModelUnavailable, QualitySample, require, load_strict, positive_int, read_checkpoint
from .clap import has_audio, resampled
from .clip import hf_folder, load_pretrained

INSTALL = ("pip install --no-deps audiobox_aesthetics (its torchaudio requirement would replace the CPU torch; "
           "torch and huggingface_hub are what its model needs)")
DEFAULT_REPO = "facebook/audiobox-aesthetics"
#: the predictor's constants: its rate, its window and hop (s)
SAMPLE_RATE = 16000
WINDOW_S = 10
HOP_S = 10
#: the model_cfg fields the package's predictor passes to AesMultiOutput
_CFG_FIELDS = ("proj_num_layer", "proj_ln", "proj_act_fn", "proj_dropout", "nth_layer", "use_weighted_layer_sum",
               "precision", "normalize_embed", "output_dim")
_WHERE = (f" (the Hugging Face folder of {DEFAULT_REPO}: `huggingface-cli download {DEFAULT_REPO}`, or its "
          "checkpoint.pt)")


def windows(audio: np.ndarray, window: int, hop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The predictor's inference windows of mono ``audio``: ``(wavs (n, window), masks (n, window) bool,
    weights (n,))``, a window every ``hop`` samples, zero-padded to ``window`` with its real samples
    masked True, weighted by ``real length / window``; ``n = 0`` for empty audio."""
    a = np.asarray(audio, dtype=np.float32).reshape(-1)
    starts = range(0, a.shape[0], hop)
    wavs = np.zeros((len(starts), window), dtype=np.float32)
    masks = np.zeros((len(starts), window), dtype=bool)
    weights = np.zeros(len(starts), dtype=np.float64)
    for i, s in enumerate(starts):
        part = a[s:s + window]
        wavs[i, :part.shape[0]] = part
        masks[i, :part.shape[0]] = True
        weights[i] = part.shape[0] / window
    return wavs, masks, weights


def weighted_rating(preds: np.ndarray, weights: np.ndarray, mean: float, std: float) -> float:
    """The predictor's per-clip rating: the windows' predictions mapped back (``pred * std + mean``) and
    averaged with ``weights``."""
    p = np.asarray(preds, dtype=np.float64) * std + mean
    w = np.asarray(weights, dtype=np.float64)
    return float(np.sum(p * w) / np.sum(w))


class PQMetric(MeanOfKeys):
    """PQ with a ready Audiobox Aesthetics model: ``model`` an ``AesMultiOutput`` (its forward maps
    ``{"wav": (B, 1, T), "mask": (B, 1, T) bool}`` to ``{axis: (B,)}``; its ``target_transform`` gives the
    PQ mean / std)."""

    keys: tuple[str, ...] = ("pq",)

    def __init__(self, model: Any, device: str = "cpu", batch_size: int = 16) -> None:
        tt = getattr(model, "target_transform", None)
        if not callable(model) or not isinstance(tt, Mapping) or not isinstance(tt.get("PQ"), Mapping):
            raise OptionError(f"models['pq']: expected an audiobox_aesthetics AesMultiOutput with a target_transform "
                              f"holding 'PQ', got {type(model).__name__}")
        try:
            self.mean, self.std = float(tt["PQ"]["mean"]), float(tt["PQ"]["std"])
        except (KeyError, TypeError, ValueError):
            raise OptionError(f"models['pq']: target_transform['PQ'] must hold numbers 'mean' and 'std', got {tt['PQ']!r}") from None
        self.batch_size = positive_int("batch_size", batch_size)
        self.model = model.eval().to(device)
        self.device = device

    def rating(self, audio: Any, sample_rate: int) -> float | None:
        """The PQ rating of one mono clip (``None`` for empty audio)."""
        import torch

        wavs, masks, weights = windows(resampled(audio, sample_rate, SAMPLE_RATE), WINDOW_S * SAMPLE_RATE, HOP_S * SAMPLE_RATE)
        if not weights.size:
            return None
        preds = []
        for s in range(0, wavs.shape[0], self.batch_size):
            batch = {"wav": torch.from_numpy(wavs[s:s + self.batch_size])[:, None].to(self.device),
                     "mask": torch.from_numpy(masks[s:s + self.batch_size])[:, None].to(self.device)}
            with torch.inference_mode():
                preds.append(self.model(batch)["PQ"].detach().to("cpu", torch.float64).numpy().reshape(-1))
        return weighted_rating(np.concatenate(preds), weights, self.mean, self.std)

    def measure(self, sample: QualitySample) -> dict[str, Any]:
        """``{"pq": the PQ rating of the edited audio}`` (``None`` without edited audio)."""
        e = sample.edited
        return {"pq": self.rating(e.audio, e.sample_rate) if has_audio(e) else None}


def load_checkpoint(aes: Any, path: str) -> Any:
    """An ``AesMultiOutput`` from the package's ``checkpoint.pt`` as its predictor builds it (the
    ``model_cfg`` fields and ``target_transform``; the state dict with its ``model.`` prefix removed),
    read with ``weights_only=True``; anything else is an :class:`OptionError`."""
    ckpt = read_checkpoint(path, "pq", "an audiobox-aesthetics checkpoint.pt", _WHERE)
    if not all(isinstance(ckpt.get(k), Mapping) for k in ("state_dict", "model_cfg", "target_transform")):
        raise OptionError(f"models['pq']: {path!r} is not an audiobox-aesthetics checkpoint (state_dict, model_cfg, target_transform){_WHERE}")
    cfg = {k: ckpt["model_cfg"][k] for k in _CFG_FIELDS if k in ckpt["model_cfg"]}
    model = aes.AesMultiOutput(**cfg, target_transform=dict(ckpt["target_transform"]))
    state = {re.sub(r"^model\.", "", k): v for k, v in ckpt["state_dict"].items()}
    return load_strict(model, state, path, "pq", "AesMultiOutput", _WHERE)


def build_pq(weights: Any, options: ModelOptions) -> PQMetric:
    """The PQ metric from ``weights`` (see the module docstring). Without torch / audiobox_aesthetics or
    the weights: :class:`ModelUnavailable`; a path that does not exist: ``InputNotFoundError``; a file
    or folder that does not hold the model: ``OptionError``."""
    require("torch", INSTALL)
    aes = require("audiobox_aesthetics.model.aes", INSTALL)
    if not hasattr(aes, "AesMultiOutput"):
        raise ModelUnavailable(f"this audiobox_aesthetics has no model.aes.AesMultiOutput; {INSTALL}")
    explicit = weights is not None
    where = hf_folder(weights, "pq", DEFAULT_REPO)
    if not os.path.isdir(where):
        return PQMetric(load_checkpoint(aes, where), device=options.device, batch_size=options.batch_size)
    label = f"models['pq']: the folder {where!r}"
    config, safetensors, checkpoint = (folder_file(where, name, label) for name in ("config.json", "model.safetensors", "checkpoint.pt"))
    if config is not None and safetensors is not None:
        # huggingface_hub's PyTorchModelHubMixin reads the folder itself (config.json, then model.safetensors, which it
        # prefers to a pytorch_model.bin pickle): load_pretrained checks every file of the folder before handing it over
        model = load_pretrained(aes.AesMultiOutput, where, "pq", explicit, strict=True)
    elif checkpoint is not None:
        model = load_checkpoint(aes, str(checkpoint))
    else:
        msg = f"{label} has neither config.json + model.safetensors nor checkpoint.pt{_WHERE}"
        raise (OptionError if explicit else ModelUnavailable)(msg)
    return PQMetric(model, device=options.device, batch_size=options.batch_size)
