"""DeSync with Synchformer, through av-benchmark's model class (the torch half; the math is in
:mod:`..formulas`).

Synchformer (Iashin et al., 2024) is not on PyPI; av-benchmark (hkchengrex/av-benchmark, installable from
git only) ships its model class ``av_bench.synchformer.synchformer.Synchformer`` and loads MMAudio's
``synchformer_state_dict.pth`` into it with ``strict=True``. :func:`build_desync` does the same; it needs
that package (and what it imports: einops, timm, omegaconf, transformers) and the state dict, from a
path or from the Hugging Face cache (``hkchengrex/MMAudio``, ``ext_weights/synchformer_state_dict.pth``),
never downloaded.

:class:`DeSyncMetric` takes any module with Synchformer's three calls, as av-benchmark uses them:

- ``extract_vfeats(x)``: ``x`` float ``(B, 14, 16, 3, 224, 224)`` in [-1, 1] -> ``(B, 14, tv, D)``;
- ``extract_afeats(x)``: ``x`` float ``(B, 14, 1, 128, 66)`` (the normalised log mels) -> ``(B, 14, ta, D)``;
- ``compare_v_a(v, a)`` -> logits ``(B, 21)`` over :func:`..formulas.offset_grid`.

The clip scored is the **edited** one (its frames and its audio track); a clip without audio has no
DeSync (record ``None``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np

from ....errors import OptionError, PredictionError, check_choice
from .. import formulas as ds
from .base import (REPO_ID, MeanOfKeys, ModelOptions, ModelUnavailable, QualitySample, cached_repo, local_weights, load_strict,
                   read_checkpoint, require, weights_in)
from .clap import resampled

#: where the model class lives and how to get it
MODULE = "av_bench.synchformer.synchformer"
INSTALL = "pip install git+https://github.com/hkchengrex/av-benchmark (not on PyPI; it also needs einops, timm, omegaconf)"
#: MMAudio's Synchformer state dict in the Hugging Face cache
HF_REPO = "hkchengrex/MMAudio"
HF_FILE = "ext_weights/synchformer_state_dict.pth"
WEIGHTS_NAME = "synchformer_state_dict.pth"


class DeSyncMetric(MeanOfKeys):
    """DeSync of the edited clips (see :mod:`..formulas` for the definition) with a ready Synchformer-like
    ``model`` (see the module docstring for the three calls). ``short_clip`` is ``"pad"`` (default) or
    ``"skip"`` (:func:`..formulas.fit_short_clip`)."""

    keys: tuple[str, ...] = ("desync",)

    def __init__(self, model: Any, device: str = "cpu", short_clip: str = "pad") -> None:
        for name in ("extract_vfeats", "extract_afeats", "compare_v_a"):
            if not callable(getattr(model, name, None)):
                raise OptionError(f"DeSyncMetric: expected a Synchformer-like model with a {name}() method, got {type(model).__name__}")
        check_choice("short_clip", short_clip, ds.SHORT_CLIP)
        self.model = model
        self.device = device
        self.short_clip = short_clip
        self.grid = ds.offset_grid()

    def measure(self, sample: QualitySample) -> dict[str, Any]:
        """``{"desync": mean |offset| of the two windows (s) | None, "offsets": (2,) s, "padded": bool}``;
        ``None`` (with an empty ``offsets``) when the edited clip has no audio or is short under
        ``"skip"``."""
        clip = sample.edited
        if clip.audio is None:
            return {"desync": None, "offsets": np.zeros(0), "padded": False, "reason": "no audio"}
        frames = clip.frames[ds.desync_frame_indices(clip.frames.shape[0], clip.fps)]
        audio, rate = np.asarray(clip.audio, dtype=np.float32), clip.sample_rate
        if audio.ndim != 1:
            raise PredictionError(f"sample {sample.sample_id!r}: DeSync expects mono audio, got shape {audio.shape}")
        if rate != ds.AUDIO_SR and not (isinstance(rate, int) and rate > 0):
            raise PredictionError(f"sample {sample.sample_id!r}: expected a positive integer sample rate, got {rate!r}")
        audio = resampled(audio, rate, ds.AUDIO_SR)  # mono float32 at 16 kHz
        fitted = ds.fit_short_clip(frames, audio, self.short_clip)
        if fitted is None:
            return {"desync": None, "offsets": np.zeros(0), "padded": False, "reason": f"shorter than {ds.DESYNC_WINDOW_S} s"}
        frames, audio, padded = fitted
        starts = ds.window_starts(frames.shape[0] / ds.VIDEO_FPS)
        logits = self._logits(frames, audio, starts)
        offsets = ds.offsets_from_logits(logits, self.grid)
        return {"desync": ds.sample_desync(offsets), "offsets": offsets, "padded": padded}

    def _logits(self, frames: np.ndarray, audio: np.ndarray, starts: tuple[float, ...]) -> np.ndarray:
        """Logits ``(len(starts), 21)``; a window shared by both starts runs once."""
        import torch
        import torch.nn.functional as F

        first = [int(round(s * ds.VIDEO_FPS)) for s in starts]
        unique = sorted(set(first))
        # uint8 (T, H, W, 3) -> float32 (T, 3, 224, 224) in [-1, 1]: shorter side to 224 (bicubic with antialias,
        # rounded back to 8 bits as torchvision does on uint8), centre crop, (x/255 - 0.5) / 0.5
        h, w = frames.shape[1:3]
        nh, nw = ds.resize_shape(h, w)
        x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)
        if (nh, nw) != (h, w):
            x = F.interpolate(x.float(), size=(nh, nw), mode="bicubic", antialias=True, align_corners=False).round().clamp(0, 255)
        top, left = ds.crop_offsets(nh, nw)
        video = ds.normalize_frames(x[:, :, top : top + ds.VIDEO_SIZE, left : left + ds.VIDEO_SIZE].numpy())
        vis = np.stack([ds.video_segments(video, f) for f in unique])  # (W, 14, 16, 3, 224, 224)
        aud = np.stack([ds.log_mel_segments(ds.audio_segments(audio, f * ds.SAMPLES_PER_FRAME)) for f in unique])
        with torch.inference_mode():
            v = self.model.extract_vfeats(torch.from_numpy(vis).to(self.device))
            a = self.model.extract_afeats(torch.from_numpy(aud[:, :, None]).to(self.device))
            out = self.model.compare_v_a(v, a)
        out = out.detach().float().cpu().numpy()
        if out.shape != (len(unique), self.grid.shape[0]):
            raise PredictionError(f"DeSync: the model returned logits of shape {out.shape}, expected {(len(unique), self.grid.shape[0])}")
        return out[[unique.index(f) for f in first]]


def weights_file(weights: Any) -> str:
    """The state-dict file: ``weights`` as a file, a folder holding ``synchformer_state_dict.pth`` (or
    ``ext_weights/synchformer_state_dict.pth``), a cached Hugging Face repo id with that file, or (``None``)
    ``hkchengrex/MMAudio`` from the cache."""
    if weights is None:
        return cached_repo(HF_REPO, "desync", HF_FILE)
    if isinstance(weights, str) and not Path(weights).expanduser().exists() and REPO_ID.match(weights):
        return cached_repo(weights, "desync", HF_FILE)
    path = local_weights(weights, "desync")
    return weights_in(path, "desync", (WEIGHTS_NAME, HF_FILE),
                      f"models['desync']: folder {path!r} has no {WEIGHTS_NAME} (nor {HF_FILE})")


def build_desync(weights: Any, options: ModelOptions) -> DeSyncMetric:
    """DeSync with av-benchmark's ``Synchformer`` and MMAudio's state dict (``strict=True``).

    :class:`ModelUnavailable` when av-benchmark (or torch) is not importable or the weights are not found;
    ``options.extra["desync_short_clip"]`` sets the short-clip policy."""
    require("torch", INSTALL)
    try:
        module = importlib.import_module(MODULE)
    except Exception as e:  # av_bench imports many libraries; any failure means it cannot run here
        raise ModelUnavailable(f"{MODULE} cannot be imported ({e.__class__.__name__}: {e}); {INSTALL}") from None
    path = weights_file(weights)
    state = read_checkpoint(path, "desync", "a Synchformer state dict")
    model = load_strict(module.Synchformer(), state, path, "desync", "Synchformer's layout")
    return DeSyncMetric(model.to(options.device).eval(), device=options.device, short_clip=options.extra.get("desync_short_clip", "pad"))


__all__ = ["DeSyncMetric", "build_desync", "weights_file"]
