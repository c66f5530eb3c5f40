"""TA-A: the CLAP cosine similarity of the target text and the edited audio.

CLAP (Wu et al., 2023, LAION's HTSAT + RoBERTa model) through transformers (``ClapModel`` +
``ClapProcessor``; default ``laion/clap-htsat-unfused``). As MMAudio's av-benchmark computes its
LAION-CLAP score (``torch.cosine_similarity`` of the text and the audio embedding, averaged over
samples, unscaled):

- the edited audio (mono) is resampled to the feature extractor's rate (48 kHz for LAION CLAP; scipy's
  ``resample_poly``, so a 16 kHz track carries nothing above 8 kHz) and cut to the extractor's
  ``max_length_s`` (10 s; the benchmark's clips are under 5 s, so this never applies to them) from the
  start, which keeps the extractor off its random crop; shorter audio is padded the extractor's way
  (``repeatpad``: repeated, then zero-padded, to 10 s). The unfused model gets single-channel
  ``rand_trunc`` features, a fused one ``fusion`` features (its ``enable_fusion`` decides);
- the target text is tokenised by the model's tokenizer, cut to what the text model's positions allow;
- ``ta_a`` of a sample = :func:`..formulas.cosine` of the two projected, L2-normalised embeddings, in
  [-1, 1]; ``None`` when the edited side has no audio or the target text is empty. A table's value is
  the mean over its samples that have one.

Nothing downloads: ``models={"ta_a": None}`` reads ``laion/clap-htsat-unfused`` from the Hugging Face
cache; a string is a local model folder or a cached repo id; a :class:`CLAPMetric` built from any
``ClapModel`` (the tests use a tiny randomly initialised one) can be passed instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import OptionError
from ...metric import resample
from ..formulas import cosine
from .base import MeanOfKeys, ModelOptions, QualitySample, positive_int, require
from .clip import HF_MODEL, HF_NO_CODE, INSTALL, hf_folder, load_pretrained, pooled, text_features, to_numpy

#: LAION's unfused CLAP on the Hub
DEFAULT_REPO = "laion/clap-htsat-unfused"


def resampled(audio: Any, sample_rate: int, target_rate: int) -> np.ndarray:
    """Mono ``audio`` as float32 at ``target_rate`` (scipy's polyphase ``resample_poly`` when the rates
    differ; the array unchanged in value otherwise)."""
    return resample(audio, sample_rate, target_rate).astype(np.float32)


def has_audio(clip: Any) -> bool:
    """Whether a :class:`~.base.Clip` has a non-empty audio track."""
    return clip.audio is not None and np.size(clip.audio) > 0


class CLAPMetric(MeanOfKeys):
    """TA-A with a ready CLAP: ``model`` a transformers ``ClapModel`` (or any module with its
    ``get_audio_features`` / ``get_text_features``), ``processor`` a ``ClapProcessor`` (anything with a
    ``feature_extractor`` and a ``tokenizer``)."""

    keys: tuple[str, ...] = ("ta_a",)

    def __init__(self, model: Any, processor: Any, device: str = "cpu") -> None:
        if not hasattr(model, "get_audio_features") or not hasattr(model, "get_text_features"):
            raise OptionError(f"models['ta_a']: expected a ClapModel (with get_audio_features / get_text_features), got {type(model).__name__}")
        if not hasattr(processor, "feature_extractor") or not hasattr(processor, "tokenizer"):
            raise OptionError(f"models['ta_a']: expected a ClapProcessor (with feature_extractor and tokenizer), got {type(processor).__name__}")
        self.model = model.eval().to(device)
        self.device = device
        self.processor = processor
        fe = processor.feature_extractor
        self.sample_rate = positive_int("CLAP sampling_rate", int(getattr(fe, "sampling_rate", 48000)))
        self.max_samples = positive_int("CLAP max length", int(getattr(fe, "nb_max_samples", 10 * self.sample_rate)))
        config = getattr(model, "config", None)
        self.fusion = bool(getattr(getattr(config, "audio_config", None), "enable_fusion", False))
        # RoBERTa positions start after the padding index: two fewer tokens than position embeddings
        tokens = int(getattr(getattr(config, "text_config", None), "max_position_embeddings", 514)) - 2
        limit = getattr(processor.tokenizer, "model_max_length", None)
        if isinstance(limit, int) and 0 < limit < tokens:  # a tokenizer without a limit says ~1e30
            tokens = limit
        self.max_tokens = max(1, tokens)

    def audio_features(self, audio: Any, sample_rate: int) -> np.ndarray:
        """The CLAP audio embedding of one mono clip, float32 ``(dim,)``."""
        import torch

        a = resampled(audio, sample_rate, self.sample_rate)[: self.max_samples]
        fe = self.processor.feature_extractor
        feats = fe(a, sampling_rate=self.sample_rate, truncation="fusion" if self.fusion else "rand_trunc", return_tensors="pt")
        inputs = {"input_features": feats["input_features"].to(self.device)}
        if "is_longer" in feats:
            inputs["is_longer"] = feats["is_longer"].to(self.device)
        with torch.inference_mode():
            return to_numpy(pooled(self.model.get_audio_features(**inputs)))[0]

    def text_features(self, text: str) -> np.ndarray:
        """The CLAP text embedding of ``text``, float32 ``(dim,)``."""
        return text_features(self.model, self.processor.tokenizer, text, self.max_tokens, self.device)

    def measure(self, sample: QualitySample) -> dict[str, Any]:
        """``{"ta_a": cosine of the target text and the edited audio}`` (``None`` without edited audio or
        with an empty target text)."""
        text = sample.target_text.strip() if isinstance(sample.target_text, str) else ""
        if not text or not has_audio(sample.edited):
            return {"ta_a": None}
        return {"ta_a": cosine(self.text_features(text), self.audio_features(sample.edited.audio, sample.edited.sample_rate), "ta_a")}


def build_clap(weights: Any, options: ModelOptions) -> CLAPMetric:
    """The TA-A metric from ``weights``: ``None`` (``laion/clap-htsat-unfused`` from the Hugging Face
    cache), a local CLAP folder or a cached repo id. No transformers / torch or an uncached repo:
    :class:`~.base.ModelUnavailable`."""
    require("torch", INSTALL)
    transformers = require("transformers", INSTALL)
    folder = hf_folder(weights, "ta_a", DEFAULT_REPO)
    model = load_pretrained(transformers.ClapModel, folder, "ta_a", weights is not None, **HF_MODEL)
    processor = load_pretrained(transformers.ClapProcessor, folder, "ta_a", weights is not None, **HF_NO_CODE)
    return CLAPMetric(model, processor, device=options.device)
