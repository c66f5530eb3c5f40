"""Syn4D (3D point tracking, video depth and camera pose on synthetic dynamic scenes): the builder, the ``syn4d``
metric and the official evaluator's drop-in (``python -m perckit.syn4d.evaluate``). The helpers users call most
are importable from here."""

from __future__ import annotations

from typing import Any

__all__ = ["load_prediction_rows", "model_inputs", "to_metric_reference", "to_official_summary"]


def __getattr__(name: str) -> Any:
    """The public helpers, imported on first use (``import perckit.syn4d`` stays free of ``datasets``)."""
    if name == "to_metric_reference":
        from . import features as module
    elif name in ("load_prediction_rows", "model_inputs"):
        from . import read as module
    elif name == "to_official_summary":
        from . import metric as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
