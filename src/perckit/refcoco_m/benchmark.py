"""The descriptor of RefCOCO-M (:class:`perckit.hf.descriptor.Benchmark`): the one record the core reads. Each
function below imports its module directly when it is first called, so that listing the benchmarks (and an
accumulator of one metric) imports neither ``datasets`` nor the other benchmarks' code."""

from __future__ import annotations

from typing import Any

from ..hf.descriptor import Benchmark, MetricSpec


def refer_iou_core(config: str | None = None) -> Any:
    from .accumulate import refer_iou_core

    return refer_iou_core(config)


def to_metric_prediction(row: Any) -> Any:
    from .features import to_metric_prediction

    return to_metric_prediction(row)


def to_metric_reference(row: Any) -> Any:
    from .features import to_metric_reference

    return to_metric_reference(row)


def _previewer(builder: Any, config: str) -> Any:
    from .preview import make_previewer

    return make_previewer(builder, config)


BENCHMARK = Benchmark(
    name="refcoco_m",
    pretty_name="RefCOCO-M (referring expression segmentation)",
    label="RefCOCO-M",
    splits=("validation",),
    hub_repo="moondream/refcoco-m",
    preview=_previewer,
    metrics=(MetricSpec("refer_iou", to_metric_reference, refer_iou_core, scores="expressions", gt_prediction=to_metric_prediction),),
)
