"""TV-A and TC: CLIP image features of the edited frames, against the target text and frame to frame.

CLIP (Radford et al., 2021) through transformers (``CLIPModel`` + ``CLIPProcessor``; default
``openai/clip-vit-large-patch14``, the model torchmetrics' ``CLIPScore`` defaults to):

- the edited video's frames, all of them or every ``k``-th (``models`` option ``clip_frame_stride``,
  default 1: all frames; frames 0, k, 2k, ...), each preprocessed by the model's own image processor
  (shortest side resized, centre crop, CLIP mean / std) and embedded by ``get_image_features``;
- the sample's ``target_text`` tokenised by the model's tokenizer with ``truncation=True`` and ``max_length`` =
  the text model's ``max_position_embeddings`` (77 for OpenAI CLIP), so a longer instruction keeps
  start-of-text, its first 75 tokens and end-of-text; embedded by ``get_text_features``. This is not what
  torchmetrics' ``CLIPScore`` does: it tokenises without truncation, then keeps the first 77 ids, i.e.
  start-of-text and 76 text tokens, and drops end-of-text, the token CLIP reads its text feature at
  (transformers then pools at another position). Texts of up to 75 tokens get the same feature both ways,
  longer ones do not;
- ``tv_a`` of a sample = :func:`..formulas.clip_score`: the mean over frames of
  ``100 * max(cos(frame, text), 0)`` (torchmetrics' CLIPScore scale, in [0, 100]); ``tc`` of a sample =
  :func:`..formulas.temporal_consistency`: the mean cosine of consecutive sampled frames' features
  (with a stride ``k`` the pairs are ``k`` frames apart), in [-1, 1], ``None`` for a one-frame clip;
- a table's value is the mean over its samples (samples with an empty target text have no ``tv_a``).

Nothing downloads: ``models={"clip": None}`` reads the default repo id from the Hugging Face cache
(``local_files_only``); a string is a local model folder or a cached repo id. The folder is checked file by
file before ``from_pretrained`` reads it, which runs no code from it and reads the weights from
``model.safetensors`` only (:func:`load_pretrained`). A :class:`CLIPMetric`
built from any ``CLIPModel`` (the tests use a tiny randomly initialised one) can be passed instead.

The Hugging Face glue the CLAP and Audiobox modules share lives here too: :func:`hf_folder` (a local
folder, a cached repo id, never a download), :func:`load_pretrained`, :func:`pooled`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ....errors import InputNotFoundError, OptionError
from ....io.model_files import check_model_folder
from ..formulas import check_weight, clip_score, temporal_consistency
from .base import REPO_ID, ModelOptions, ModelUnavailable, QualitySample, cached_repo, positive_int, require, MeanOfKeys

#: the CLIP torchmetrics' CLIPScore defaults to
DEFAULT_REPO = "openai/clip-vit-large-patch14"
#: TV-A's CLIPScore weight: torchmetrics' 100 (Hessel et al. use 2.5)
CLIP_SCORE_WEIGHT = 100.0

INSTALL = "pip install 'perckit[quality]' (transformers; a CPU torch first: pip install torch==2.13.0)"


def hf_folder(weights: Any, what: str, default_repo: str) -> str:
    """The local folder of a Hugging Face model: ``weights`` when it is an existing path; the cached
    snapshot of ``weights`` when it is a repo id (``owner/name``) that is not a local path; the cached
    snapshot of ``default_repo`` for ``None``. Never downloads: a repo that is not cached raises
    :class:`ModelUnavailable` with the ``huggingface-cli download`` command; a string that is neither an
    existing path nor a repo id raises :class:`~perckit.errors.InputNotFoundError`."""
    if weights is None:
        return cached_repo(default_repo, what)
    if not isinstance(weights, (str, os.PathLike)):
        raise OptionError(f"models[{what!r}]: expected a local folder, a Hugging Face repo id or a ModelMetric, got {type(weights).__name__}")
    p = Path(weights).expanduser()
    if p.exists():
        return str(p)
    text = os.fspath(weights)
    if isinstance(text, str) and REPO_ID.match(text):
        return cached_repo(text, what)
    raise InputNotFoundError(f"models[{what!r}]: {text!r} is neither an existing local folder nor a Hugging Face repo id (owner/name)")


def text_features(model: Any, tokenizer: Any, text: str, max_tokens: int, device: str) -> np.ndarray:
    """The projected text embedding (``model.get_text_features``) of ``text`` cut to ``max_tokens`` tokens, float32
    ``(dim,)``: one function for CLIP and CLAP, whose transformers text towers take the same call."""
    import torch

    tok = tokenizer([text], padding=True, truncation=True, max_length=max_tokens, return_tensors="pt")
    with torch.inference_mode():
        out = model.get_text_features(input_ids=tok["input_ids"].to(device), attention_mask=tok["attention_mask"].to(device))
    return to_numpy(pooled(out))[0]


def pooled(out: Any) -> Any:
    """The projected embedding tensor of a transformers ``get_*_features`` call: the tensor itself
    (transformers 4.x) or its ``pooler_output`` (transformers 5.x returns a model output)."""
    return out if hasattr(out, "ndim") else out.pooler_output


def to_numpy(t: Any) -> np.ndarray:
    """A torch tensor as float32 numpy on the CPU."""
    import torch

    return t.detach().to("cpu", torch.float32).numpy()


class CLIPMetric(MeanOfKeys):
    """TV-A and TC with a ready CLIP: ``model`` a transformers ``CLIPModel`` (or any module with its
    ``get_image_features`` / ``get_text_features``), ``processor`` a ``CLIPProcessor`` (anything with an
    ``image_processor`` and a ``tokenizer``)."""

    keys: tuple[str, ...] = ("tv_a", "tc")

    def __init__(self, model: Any, processor: Any, frame_stride: int = 1, device: str = "cpu", batch_size: int = 16,
                 w: float = CLIP_SCORE_WEIGHT) -> None:
        if not hasattr(model, "get_image_features") or not hasattr(model, "get_text_features"):
            raise OptionError(f"models['clip']: expected a CLIPModel (with get_image_features / get_text_features), got {type(model).__name__}")
        if not hasattr(processor, "image_processor") or not hasattr(processor, "tokenizer"):
            raise OptionError(f"models['clip']: expected a CLIPProcessor (with image_processor and tokenizer), got {type(processor).__name__}")
        self.frame_stride = positive_int("clip_frame_stride", frame_stride)
        self.batch_size = positive_int("batch_size", batch_size)
        self.w = check_weight(w)
        self.model = model.eval().to(device)
        self.device = device
        self.processor = processor
        text_config = getattr(getattr(model, "config", None), "text_config", None)
        self.max_tokens = int(getattr(text_config, "max_position_embeddings", 77))

    def text_features(self, text: str) -> np.ndarray:
        """The CLIP text embedding of ``text`` (cut to :attr:`max_tokens` tokens), float32 ``(dim,)``."""
        return text_features(self.model, self.processor.tokenizer, text, self.max_tokens, self.device)

    def image_features(self, frames: np.ndarray) -> np.ndarray:
        """The CLIP image embeddings of uint8 RGB ``frames`` ``(T, H, W, 3)``, float32 ``(T, dim)``, in
        batches of :attr:`batch_size` frames."""
        import torch

        rows = []
        for start in range(0, frames.shape[0], self.batch_size):
            batch = [np.ascontiguousarray(f) for f in frames[start:start + self.batch_size]]
            pixels = self.processor.image_processor(images=batch, return_tensors="pt")["pixel_values"]
            with torch.inference_mode():
                rows.append(to_numpy(pooled(self.model.get_image_features(pixel_values=pixels.to(self.device)))))
        return np.concatenate(rows, axis=0)

    def measure(self, sample: QualitySample) -> dict[str, Any]:
        """``{"tv_a": CLIPScore of the sampled edited frames against the target text (None for an empty
        text), "tc": their consecutive-frame consistency (None for fewer than two sampled frames),
        "frames": how many frames were embedded}``."""
        frames = np.asarray(sample.edited.frames)[::self.frame_stride]
        if frames.shape[0] == 0:
            return {"tv_a": None, "tc": None, "frames": 0}
        feats = self.image_features(frames)
        text = sample.target_text.strip() if isinstance(sample.target_text, str) else ""
        tv_a = clip_score(feats, self.text_features(text), self.w) if text else None
        return {"tv_a": tv_a, "tc": temporal_consistency(feats), "frames": int(frames.shape[0])}


#: what every ``transformers`` ``from_pretrained`` call here passes: no code from the folder runs
#: (``trust_remote_code=False``: an ``auto_map`` in its config is not imported, and no prompt asks)
HF_NO_CODE: dict[str, Any] = {"trust_remote_code": False}
#: ... and a model's weights are read from ``model.safetensors`` only (``use_safetensors=True``: a
#: ``pytorch_model.bin`` pickle in the folder is never read, whatever the transformers version)
HF_MODEL: dict[str, Any] = {**HF_NO_CODE, "use_safetensors": True}


def load_pretrained(cls: Any, folder: str, what: str, explicit: bool, **kwargs: Any) -> Any:
    """``cls.from_pretrained(folder, local_files_only=True, **kwargs)`` once every file of ``folder`` has
    passed :func:`perckit.io.model_files.check_model_folder` (a link out of the folder, a FIFO, a device, an
    oversize file: :class:`OptionError` naming ``models[what]`` and the entry). ``from_pretrained`` reads the
    folder itself and takes no file objects, which is why the folder is handed over, checked; callers pass
    :data:`HF_NO_CODE` / :data:`HF_MODEL` for ``transformers`` classes. A folder that does not hold what
    ``cls`` needs is an :class:`OptionError` when the user named it, :class:`ModelUnavailable` when it is the
    default cached repo (an incomplete snapshot)."""
    if os.path.isdir(folder):
        check_model_folder(folder, f"models[{what!r}]")
    try:
        return cls.from_pretrained(folder, local_files_only=True, **kwargs)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        msg = f"models[{what!r}]: cannot load a {cls.__name__} from {folder!r} ({e.__class__.__name__}: {first})"
        raise (OptionError if explicit else ModelUnavailable)(msg) from None


def build_clip(weights: Any, options: ModelOptions) -> CLIPMetric:
    """The TV-A / TC metric from ``weights``: ``None`` (``openai/clip-vit-large-patch14`` from the Hugging
    Face cache), a local CLIP folder or a cached repo id. ``options.extra["clip_frame_stride"]`` (default
    1) embeds every k-th frame. No transformers / torch or an uncached repo: :class:`ModelUnavailable`."""
    require("torch", INSTALL)
    transformers = require("transformers", INSTALL)
    stride = (options.extra or {}).get("clip_frame_stride", 1)
    positive_int("clip_frame_stride", stride)
    folder = hf_folder(weights, "clip", DEFAULT_REPO)
    model = load_pretrained(transformers.CLIPModel, folder, "clip", weights is not None, **HF_MODEL)
    processor = load_pretrained(transformers.CLIPProcessor, folder, "clip", weights is not None, **HF_NO_CODE)
    return CLIPMetric(model, processor, frame_stride=stride, device=options.device, batch_size=options.batch_size)
