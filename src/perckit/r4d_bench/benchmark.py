"""The descriptor of R4D-Bench (:class:`perckit.hf.descriptor.Benchmark`): the one record the core reads. Its
functions are imported directly (none of these modules imports ``datasets`` until a function builds features);
the previewer, which draws with Pillow, when a preview is made."""

from __future__ import annotations

from typing import Any

from ..hf.descriptor import Benchmark, MetricSpec
from .accumulate import mask_temporal_core, track_id_core
from .features import to_metric_prediction, to_metric_reference, to_track_prediction, to_track_reference


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
