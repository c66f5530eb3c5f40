"""Syn4D's descriptor: the tracking / depth / pose metric (configs), its reference projection, the previewer. The
core reads it (:class:`perckit.hf.descriptor.Benchmark`)."""

from __future__ import annotations

from ..hf.descriptor import Benchmark, MetricSpec
from .accumulate import syn4d_core
from .features import to_metric_reference
from .preview import make_previewer

BENCHMARK = Benchmark(
    name="syn4d",
    pretty_name="Syn4D (3D point tracking, video depth and camera pose on synthetic dynamic scenes)",
    label="Syn4D",
    splits=("test",),
    hub_repo="Syn4D/Syn4D_Benchmark",
    preview=make_previewer,
    metrics=(
        MetricSpec("syn4d", to_metric_reference, syn4d_core, ("tracking", "depth", "pose"),
                   scores="tracking (config tracking); depth and pose (config challenge)",
                   file_format="the official per-sequence NPZ files, one <variant>/<scene>/<sequence_id>.npz each (python -m perckit.syn4d.evaluate)"),
    ),
)
