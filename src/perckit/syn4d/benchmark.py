"""The descriptor of this benchmark (see :mod:`perckit.benchmarks`): the one record the core reads."""

from ..benchmarks import Benchmark, MetricSpec

BENCHMARK = Benchmark(
    name="syn4d",
    pretty_name="Syn4D (3D point tracking, video depth and camera pose on synthetic dynamic scenes)",
    label="Syn4D",
    splits=("test",),
    hub_repo="Syn4D/Syn4D_Benchmark",
    builder="perckit.syn4d.builder:Syn4DBuilder",
    hub_patterns="perckit.syn4d.builder:hub_patterns",
    sample_release="perckit.sample_releases.syn4d:write_release",
    preview="perckit.syn4d.preview:make_previewer",
    metrics=(
        MetricSpec("syn4d", "perckit.syn4d.features:to_metric_reference", ("tracking", "depth", "pose"),
                   scores="tracking (config tracking); depth and pose (config challenge)",
                   file_format="the official per-sequence NPZ files, one <variant>/<scene>/<sequence_id>.npz each (python -m perckit.syn4d.evaluate)"),
    ),
)
