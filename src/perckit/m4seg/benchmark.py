"""M4Seg's descriptor: the seven-metric m4seg scorer, its projections and the previewer. The core reads it
(:class:`perckit.hf.descriptor.Benchmark`)."""

from __future__ import annotations

from ..hf.descriptor import Benchmark, MetricSpec
from .accumulate import m4seg_core
from .features import gt_as_prediction, to_metric_reference
from .preview import make_previewer

BENCHMARK = Benchmark(
    name="m4seg",
    pretty_name="M⁴Seg (multi-image pixel-grounded reasoning segmentation)",
    label="M4Seg",
    splits=("train", "test"),
    hub_repo="kanguyen-vn/M4Seg",
    preview=make_previewer,
    metrics=(MetricSpec("m4seg", to_metric_reference, m4seg_core, scores="default (test split)", gt_prediction=gt_as_prediction),),
)
