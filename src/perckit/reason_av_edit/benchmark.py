"""The descriptor of this benchmark (see :mod:`perckit.benchmarks`): the one record the core reads."""

from ..benchmarks import Benchmark, MetricSpec

BENCHMARK = Benchmark(
    name="reason_av_edit",
    pretty_name="ReasonAVEdit-Bench (audio-video edit reasoning)",
    label="ReasonAVEdit-Bench",
    splits=("test",),
    hub_repo="bigfacing/ReasonAVEdit-Bench",
    builder="perckit.reason_av_edit.builder:ReasonAVEditBuilder",
    hub_patterns="perckit.reason_av_edit.builder:hub_patterns",
    sample_release="perckit.sample_releases.reason_av_edit:write_release",
    preview="perckit.reason_av_edit.preview:make_previewer",
    export_hook="perckit.reason_av_edit.export",
    metrics=(
        MetricSpec("av_reasoning", "perckit.reason_av_edit.features:to_metric_reference", scores="default",
                   file_format="a folder of <sample_id>.json, <sample_id>_anchor_mask.png, _reason_audio.wav and _mask.mp4 files (perckit.reason_av_edit.load_predictions_dir)"),
        MetricSpec("av_edit_quality", "perckit.reason_av_edit.quality.references:to_quality_reference", scores="default",
                   file_format="a folder of edited clips <sample_id>.mp4 with optional <sample_id>.wav (perckit.reason_av_edit.load_quality_predictions_dir)"),
    ),
)
