"""M⁴Seg (multi-image pixel-grounded reasoning, PRIMA): builder, readers, entity codes and the seven metrics.

The helpers users call most are re-exported here: :func:`to_metric_reference`, :func:`gt_as_prediction`,
:func:`parse_grounded_answer`, :func:`load_predictions_jsonl` and :func:`resolve_answer`."""

from __future__ import annotations

from typing import Any

__all__ = [
    "gt_as_prediction", "load_predictions_jsonl", "parse_grounded_answer", "resolve_answer", "to_metric_prediction",
    "to_metric_reference",
]


def __getattr__(name: str) -> Any:
    """The public helpers, imported on first use (``import perckit.m4seg`` stays free of ``datasets``)."""
    if name in ("resolve_answer",):
        from .metric import codes as module
    elif name in ("gt_as_prediction", "to_metric_prediction", "to_metric_reference"):
        from . import features as module
    elif name in ("load_predictions_jsonl", "parse_grounded_answer"):
        from .read import predictions as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
