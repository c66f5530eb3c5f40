"""The descriptor of this benchmark (see :mod:`perckit.benchmarks`): the one record the core reads."""

from ..benchmarks import Benchmark, MetricSpec

BENCHMARK = Benchmark(
    name="refcoco_m",
    pretty_name="RefCOCO-M (referring expression segmentation)",
    label="RefCOCO-M",
    splits=("validation",),
    hub_repo="moondream/refcoco-m",
    builder="perckit.refcoco_m.builder:RefCocoMBuilder",
    hub_patterns="perckit.refcoco_m.builder:hub_patterns",
    sample_release="perckit.sample_releases.refcoco_m:write_release",
    preview="perckit.refcoco_m.preview:make_previewer",
    metrics=(
        MetricSpec("refer_iou", "perckit.refcoco_m.features:to_metric_reference", scores="expressions",
                   gt_prediction="perckit.refcoco_m.features:to_metric_prediction"),
    ),
)
