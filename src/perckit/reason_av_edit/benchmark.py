"""ReasonAVEdit-Bench's descriptor: av_reasoning and av_edit_quality, the previewer and the export hook. The core
reads it (:class:`perckit.hf.descriptor.Benchmark`)."""

from __future__ import annotations

from typing import Any

from ..hf.descriptor import Benchmark, MetricSpec
from .accumulate import av_reasoning_core
from .features import to_metric_reference
from .preview import make_previewer
from .quality.references import to_quality_reference


def _export_hook() -> Any:
    from . import export

    return export


BENCHMARK = Benchmark(
    name="reason_av_edit",
    pretty_name="ReasonAVEdit-Bench (audio-video edit reasoning)",
    label="ReasonAVEdit-Bench",
    splits=("test",),
    hub_repo="bigfacing/ReasonAVEdit-Bench",
    preview=make_previewer,
    export_hook=_export_hook,
    metrics=(
        MetricSpec("av_reasoning", to_metric_reference, av_reasoning_core, scores="default",
                   file_format="a folder of <sample_id>.json, <sample_id>_anchor_mask.png, _reason_audio.wav and _mask.mp4 files (perckit.reason_av_edit.load_predictions_dir)"),
        MetricSpec("av_edit_quality", to_quality_reference, scores="default",
                   file_format="a folder of edited clips <sample_id>.mp4 with optional <sample_id>.wav (perckit.reason_av_edit.load_quality_predictions_dir)"),
    ),
)
