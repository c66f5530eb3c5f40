"""ReasonAVEdit-Bench (instruction-guided joint audio-video editing, with reasoning ground truth).

``builder.py`` turns the release (``metadata.csv``, ``annotations/``, and the media tars under ``archives/`` or
their extracted folders; where they are and the size caps: ``layout.py``) into typed Arrow rows with the readers of
``read/`` (``metadata.py``, ``archives.py`` with the safe extractor, ``media.py``) and ``rows.py``; ``features.py``
is the Features contract and the prediction helpers; ``metric.py`` is the ``av_reasoning`` metric [proposal] (its
formulas, the audio conventions, the input decoding, the score and the reduce), ``accumulate.py`` its accumulator;
``read/predictions.py`` reads predictions from a folder. ``quality/`` is the ``av_edit_quality`` metric (the final
edit quality of edited clips: ``to_quality_reference``, ``make_quality_prediction``, ``load_quality_predictions_dir``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "gt_as_prediction",
    "gt_as_predictions",
    "load_predictions_dir",
    "load_quality_predictions_dir",
    "make_prediction",
    "make_quality_prediction",
    "to_metric_reference",
    "to_quality_reference",
]


def __getattr__(name: str) -> Any:
    """The public helpers, imported on first use (``import perckit.reason_av_edit`` stays free of ``datasets``)."""
    if name in ("gt_as_prediction", "make_prediction", "to_metric_reference"):
        from . import features as module
    elif name in ("gt_as_predictions", "load_predictions_dir"):
        from .read import predictions as module
    elif name in ("load_quality_predictions_dir", "make_quality_prediction", "to_quality_reference"):
        from . import quality as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
