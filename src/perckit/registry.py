"""Which metric belongs to which benchmark, and how a builder row becomes that metric's reference."""

from __future__ import annotations

from importlib import import_module
from collections.abc import Callable, Mapping
from typing import Any

from .errors import OptionError

#: metric -> (benchmark, "module:function" projecting a builder row onto the metric's references, configs)
METRICS: dict[str, dict[str, Any]] = {
    "mask_temporal": {"benchmark": "r4d_bench", "reference": "perckit.r4d_bench.features:to_metric_reference", "configs": None},
    "track_id": {"benchmark": "r4d_bench", "reference": "perckit.r4d_bench.features:to_track_reference", "configs": None},
    "m4seg": {"benchmark": "m4seg", "reference": "perckit.m4seg.features:to_metric_reference", "configs": None},
    "refer_iou": {"benchmark": "refcoco_m", "reference": "perckit.refcoco_m.features:to_metric_reference", "configs": None},
    "av_reasoning": {"benchmark": "reason_av_edit", "reference": "perckit.reason_av_edit.features:to_metric_reference", "configs": None},
    "syn4d": {"benchmark": "syn4d", "reference": "perckit.syn4d.features:to_metric_reference", "configs": ("tracking", "depth", "pose")},
}


def reference_projector(metric: str, config: str | None = None) -> Callable[[Mapping], dict]:
    """The function turning a builder row into a reference of ``metric`` (``config`` for multi-config metrics)."""
    if metric not in METRICS:
        raise OptionError(f"unknown metric {metric!r}: expected one of {sorted(METRICS)}")
    entry = METRICS[metric]
    module, name = entry["reference"].split(":")
    fn = getattr(import_module(module), name)
    if entry["configs"]:
        if config not in entry["configs"]:
            raise OptionError(f"metric {metric!r} needs --config, one of {list(entry['configs'])}; got {config!r}")
        return lambda row: fn(row, config)
    return fn
