"""RefCOCO-M (referring expression segmentation on the cleaned RefCOCO validation split).

The builder (``builder.py``) reads the Parquet release through ``read.py``, which also adapts other tools'
prediction formats; ``metric.py`` is the ``refer_iou`` metric over :mod:`perckit.core.segmentation`.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "flatten_image_predictions",
    "gt_as_predictions",
    "load_predictions_jsonl",
    "to_metric_prediction",
    "to_metric_reference",
]


def __getattr__(name: str) -> Any:
    """The public helpers, imported on first use (``import perckit.refcoco_m`` stays free of ``datasets``)."""
    if name in ("to_metric_prediction", "to_metric_reference"):
        from . import features as module
    elif name in ("flatten_image_predictions", "gt_as_predictions", "load_predictions_jsonl"):
        from . import read as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
