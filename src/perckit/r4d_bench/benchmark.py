"""The descriptor of this benchmark (see :mod:`perckit.benchmarks`): the one record the core reads."""

from ..benchmarks import Benchmark, MetricSpec

BENCHMARK = Benchmark(
    name="r4d_bench",
    pretty_name="R4D-Bench (referring segmentation in dynamic 4D scenes)",
    splits=("test",),
    hub_repo="LiYacheng/r4d-bench-qa",
    metrics=(
        MetricSpec("mask_temporal", "perckit.r4d_bench.features:to_metric_reference", scores="all_queries / subset_36",
                   gt_prediction="perckit.r4d_bench.features:to_metric_prediction"),
        MetricSpec("track_id", "perckit.r4d_bench.features:to_track_reference", scores="all_queries / subset_36",
                   gt_prediction="perckit.r4d_bench.features:to_track_prediction"),
    ),
)
