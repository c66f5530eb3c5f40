"""The descriptor of this benchmark (see :mod:`perckit.benchmarks`): the one record the core reads."""

from ..benchmarks import Benchmark, MetricSpec

BENCHMARK = Benchmark(
    name="m4seg",
    pretty_name="M⁴Seg (multi-image pixel-grounded reasoning segmentation)",
    label="M4Seg",
    splits=("train", "test"),
    hub_repo="kanguyen-vn/M4Seg",
    builder="perckit.m4seg.builder:M4SegBuilder",
    hub_patterns="perckit.m4seg.builder:hub_patterns",
    sample_release="perckit.sample_releases.m4seg:write_release",
    preview="perckit.m4seg.preview:make_previewer",
    metrics=(
        MetricSpec("m4seg", "perckit.m4seg.features:to_metric_reference", scores="default (test split)",
                   gt_prediction="perckit.m4seg.features:gt_as_prediction"),
    ),
)
