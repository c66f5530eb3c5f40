"""R4D-Bench (referring segmentation in dynamic 4D scenes): the builder, the ``mask_temporal`` and ``track_id``
metrics and their drop-in command lines. The helpers users call most are importable from here."""

from __future__ import annotations

from typing import Any

__all__ = [
    "load_mask_predictions", "load_track_predictions", "to_metric_prediction", "to_metric_reference",
    "to_track_prediction", "to_track_reference",
]


def __getattr__(name: str) -> Any:
    """The public helpers, imported on first use (``import perckit.r4d_bench`` stays free of ``datasets``)."""
    if name in ("to_metric_prediction", "to_metric_reference", "to_track_prediction", "to_track_reference"):
        from . import features as module
    elif name in ("load_mask_predictions", "load_track_predictions"):
        from . import read as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
