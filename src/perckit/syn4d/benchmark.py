"""The descriptor of Syn4D (:class:`perckit.hf.descriptor.Benchmark`): the one record the core reads. Each
function below imports its module directly when it is first called, so that listing the benchmarks (and an
accumulator of one metric) imports neither ``datasets`` nor the other benchmarks' code."""

from __future__ import annotations

from typing import Any

from ..hf.descriptor import Benchmark, MetricSpec


def syn4d_core(config: str | None = None) -> Any:
    from .accumulate import syn4d_core

    return syn4d_core(config)


def to_metric_reference(row: Any, task: str) -> Any:
    from .features import to_metric_reference

    return to_metric_reference(row, task)


def _previewer(builder: Any, config: str) -> Any:
    from .preview import make_previewer

    return make_previewer(builder, config)


BENCHMARK = Benchmark(
    name="syn4d",
    pretty_name="Syn4D (3D point tracking, video depth and camera pose on synthetic dynamic scenes)",
    label="Syn4D",
    splits=("test",),
    hub_repo="Syn4D/Syn4D_Benchmark",
    preview=_previewer,
    metrics=(
        MetricSpec("syn4d", to_metric_reference, syn4d_core, ("tracking", "depth", "pose"),
                   scores="tracking (config tracking); depth and pose (config challenge)",
                   file_format="the official per-sequence NPZ files, one <variant>/<scene>/<sequence_id>.npz each (python -m perckit.syn4d.evaluate)"),
    ),
)
