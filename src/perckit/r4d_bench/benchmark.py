"""R4D-Bench's descriptor: its splits, Hub repository, the mask_temporal and track_id metrics, the previewer. The
core reads it (:class:`perckit.hf.descriptor.Benchmark`)."""

from __future__ import annotations

from ..hf.descriptor import Benchmark, MetricSpec
from .accumulate import mask_temporal_core, track_id_core
from .features import to_metric_prediction, to_metric_reference, to_track_prediction, to_track_reference
from .preview import make_previewer

BENCHMARK = Benchmark(
    name="r4d_bench",
    pretty_name="R4D-Bench (referring segmentation in dynamic 4D scenes)",
    label="R4D-Bench",
    splits=("test",),
    hub_repo="LiYacheng/r4d-bench-qa",
    preview=make_previewer,
    metrics=(
        MetricSpec("mask_temporal", to_metric_reference, mask_temporal_core, scores="all_queries / subset_36", gt_prediction=to_metric_prediction),
        MetricSpec("track_id", to_track_reference, track_id_core, scores="all_queries / subset_36", gt_prediction=to_track_prediction),
    ),
)
