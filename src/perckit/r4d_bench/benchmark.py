"""The descriptor of this benchmark (see :mod:`perckit.benchmarks`): the one record the core reads."""

from ..benchmarks import Benchmark, MetricSpec

BENCHMARK = Benchmark(
    name="r4d_bench",
    pretty_name="R4D-Bench (referring segmentation in dynamic 4D scenes)",
    label="R4D-Bench",
    splits=("test",),
    hub_repo="LiYacheng/r4d-bench-qa",
    builder="perckit.r4d_bench.builder:R4DBenchBuilder",
    hub_patterns="perckit.r4d_bench.builder:hub_patterns",
    sample_release="perckit.sample_releases.r4d_bench:write_release",
    preview="perckit.r4d_bench.preview:make_previewer",
    metrics=(
        MetricSpec("mask_temporal", "perckit.r4d_bench.features:to_metric_reference", scores="all_queries / subset_36",
                   gt_prediction="perckit.r4d_bench.features:to_metric_prediction"),
        MetricSpec("track_id", "perckit.r4d_bench.features:to_track_reference", scores="all_queries / subset_36",
                   gt_prediction="perckit.r4d_bench.features:to_track_prediction"),
    ),
)
