"""The options of ``metrics/m4seg`` (:class:`M4SegOptions`) and the metric's names: the seven, the extra rates,
the choice sets and the group breakdowns. See the metric card for what each option does."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ...core import segmentation as seg
from ...errors import OptionError, check_choice, check_option_type, short_repr as _short
from . import text as textmod
from .codes import NAME_STYLES

SEVEN = ("miou", "recall", "i_ss", "i_siou", "ss", "siou", "meteor")
EXTRA_RATES = ("giou", "ciou", "miou_strict")
RATE_KEYS = SEVEN + EXTRA_RATES
MIOU_UNITS = ("sample", "image")
MATCHINGS = ("greedy", "hungarian")
RECALL_ENCODERS = ("minilm", "bert-base-uncased-meanpool")
SS_LEVELS = ("answer", "phrase")
I_MODES = ("image", "mask")
RESIZE_MODES = seg.RESIZE_MODES
#: The rule ``resize_predictions="nearest"`` resizes with: OpenCV's ``INTER_NEAREST``. PRIMA / GLaMM's evaluation
#: scores masks at the image size and resizes none (``"pil"`` on request).
NEAREST_RULE = "opencv"
#: gIoU of a sample, and cIoU of a set, whose pooled union is empty (GT masks all empty, no predicted pixel):
#: 1.0, the rule of ``refer_iou`` (``perckit.rle.pair_iou`` / ``perckit.core.segmentation.reduce_iou``): nothing to find, nothing found.
EMPTY_UNION_IOU = 1.0
GROUPS = {"per_question_type": "type", "per_dataset_name": "dataset_name", "per_granularity": "granularity"}


@dataclass(frozen=True)
class M4SegOptions:
    """Keyword options of ``compute`` (see the metric card)."""

    as_percent: bool = False
    miou_unit: str = "sample"
    matching: str = "greedy"
    recall_iou_threshold: float = 0.5
    recall_text_threshold: float = 0.5
    recall_text_encoder: str = "minilm"
    ss_level: str = "answer"
    siou_threshold: float = 0.5
    siou_soft: bool = False
    i_mode: str = "image"
    resolved_name_style: str = "name"
    resize_predictions: str | None = None
    #: callable ``list[str] -> [n, d]`` or a registered name ("minilm", "stub"); None = MiniLM
    embed_fn: Any = None
    #: encoder of ``recall`` only (callable or name); None = per ``recall_text_encoder``
    recall_embed_fn: Any = None
    #: callable ``(candidates, references) -> corpus METEOR``; None = pycocoevalcap + Java
    meteor_fn: Any = None
    text_model_path: str | None = None
    bert_model_path: str | None = None
    skip_unavailable: bool = False
    #: which of the seven to compute (None = all); the others are None and listed in ``skipped``
    metrics: tuple | None = None
    per_sample: bool = True
    #: a reference without a prediction raises (True, the spec's rule) or is scored as an empty prediction
    #: (``answer=""``, ``groundings=[]``) and counted in ``num_missing_predictions`` (False)
    strict: bool = True

    def __post_init__(self) -> None:
        for name, choices in (("miou_unit", MIOU_UNITS), ("matching", MATCHINGS), ("recall_text_encoder", RECALL_ENCODERS),
                              ("ss_level", SS_LEVELS), ("i_mode", I_MODES), ("resolved_name_style", NAME_STYLES)):
            check_choice(name, getattr(self, name), choices)
        object.__setattr__(self, "resize_predictions", seg.resize_rule(self.resize_predictions, NEAREST_RULE))
        for name in ("recall_iou_threshold", "recall_text_threshold", "siou_threshold"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not -1.0 <= float(v) <= 1.0:
                raise OptionError(f"option {name!r}: expected a number in [-1, 1], got {v!r}")
        for name in ("as_percent", "siou_soft", "skip_unavailable", "per_sample", "strict"):
            if not isinstance(getattr(self, name), bool):
                raise OptionError(f"option {name!r}: expected True or False, got {getattr(self, name)!r}")
        for name in ("embed_fn", "recall_embed_fn"):
            v = getattr(self, name)
            if v is not None and not callable(v) and v not in textmod.ENCODERS:
                raise OptionError(f"option {name!r}: expected a callable or one of {list(textmod.ENCODERS)}, got {v!r}")
        for name in ("text_model_path", "bert_model_path"):
            check_option_type(name, getattr(self, name), "path | None")
        if self.meteor_fn is not None and not callable(self.meteor_fn):
            raise OptionError(f"option 'meteor_fn': expected a callable, got {self.meteor_fn!r}")
        if self.metrics is not None:
            if not isinstance(self.metrics, (str, list, tuple)):
                raise OptionError(f"option 'metrics': expected a list of some of {list(SEVEN)}, got {_short(self.metrics)}")
            ms = (self.metrics,) if isinstance(self.metrics, str) else tuple(self.metrics)
            for m in ms:
                check_choice("metrics", m, SEVEN)
            object.__setattr__(self, "metrics", ms)

    def wants(self, metric: str) -> bool:
        return self.metrics is None or metric in self.metrics

    def summary(self) -> dict:
        """The options as plain values (callables by name; never copied: an encoder may hold a model)."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if callable(v):
                v = getattr(v, "__name__", type(v).__name__)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out
