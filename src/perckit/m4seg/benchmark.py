"""The descriptor of M4Seg (:class:`perckit.hf.descriptor.Benchmark`): the one record the core reads. Each
function below imports its module directly when it is first called, so that listing the benchmarks (and an
accumulator of one metric) imports neither ``datasets`` nor the other benchmarks' code."""

from __future__ import annotations

from typing import Any

from ..hf.descriptor import Benchmark, MetricSpec


def m4seg_core(config: str | None = None) -> Any:
    from .accumulate import m4seg_core

    return m4seg_core(config)


def gt_as_prediction(row: Any) -> Any:
    from .features import gt_as_prediction

    return gt_as_prediction(row)


def to_metric_reference(row: Any) -> Any:
    from .features import to_metric_reference

    return to_metric_reference(row)


def _previewer(builder: Any, config: str) -> Any:
    from .preview import make_previewer

    return make_previewer(builder, config)


BENCHMARK = Benchmark(
    name="m4seg",
    pretty_name="M⁴Seg (multi-image pixel-grounded reasoning segmentation)",
    label="M4Seg",
    splits=("train", "test"),
    hub_repo="kanguyen-vn/M4Seg",
    preview=_previewer,
    metrics=(MetricSpec("m4seg", to_metric_reference, m4seg_core, scores="default (test split)", gt_prediction=gt_as_prediction),),
)
