"""The descriptor of R4D-Bench (:class:`perckit.hf.descriptor.Benchmark`): the one record the core reads. Each
function below imports its module directly when it is first called, so that listing the benchmarks (and an
accumulator of one metric) imports neither ``datasets`` nor the other benchmarks' code."""

from __future__ import annotations

from typing import Any

from ..hf.descriptor import Benchmark, MetricSpec


def mask_temporal_core(config: str | None = None) -> Any:
    from .accumulate import mask_temporal_core

    return mask_temporal_core(config)


def track_id_core(config: str | None = None) -> Any:
    from .accumulate import track_id_core

    return track_id_core(config)


def to_metric_prediction(row: Any) -> Any:
    from .features import to_metric_prediction

    return to_metric_prediction(row)


def to_metric_reference(row: Any) -> Any:
    from .features import to_metric_reference

    return to_metric_reference(row)


def to_track_prediction(row: Any) -> Any:
    from .features import to_track_prediction

    return to_track_prediction(row)


def to_track_reference(row: Any) -> Any:
    from .features import to_track_reference

    return to_track_reference(row)


def _previewer(builder: Any, config: str) -> Any:
    from .preview import make_previewer

    return make_previewer(builder, config)


BENCHMARK = Benchmark(
    name="r4d_bench",
    pretty_name="R4D-Bench (referring segmentation in dynamic 4D scenes)",
    label="R4D-Bench",
    splits=("test",),
    hub_repo="LiYacheng/r4d-bench-qa",
    preview=_previewer,
    metrics=(
        MetricSpec("mask_temporal", to_metric_reference, mask_temporal_core, scores="all_queries / subset_36", gt_prediction=to_metric_prediction),
        MetricSpec("track_id", to_track_reference, track_id_core, scores="all_queries / subset_36", gt_prediction=to_track_prediction),
    ),
)
