"""The descriptor of M4Seg (:class:`perckit.hf.descriptor.Benchmark`): the one record the core reads. Its
functions are imported directly (none of these modules imports ``datasets`` until a function builds features);
the previewer, which draws with Pillow, when a preview is made."""

from __future__ import annotations

from typing import Any

from ..hf.descriptor import Benchmark, MetricSpec
from .accumulate import m4seg_core
from .features import gt_as_prediction, to_metric_reference


def _previewer(builder: Any, config: str) -> Any:
    from .preview import make_previewer

    return make_previewer(builder, config)


BENCHMARK = Benchmark(
    name="m4seg",
    pretty_name="M⁴Seg (multi-image pixel-grounded reasoning segmentation)",
    label="M4Seg",
    splits=("train", "test"),
    hub_repo="kanguyen-vn/M4Seg",
    preview=_previewer,
    metrics=(MetricSpec("m4seg", to_metric_reference, m4seg_core, scores="default (test split)", gt_prediction=gt_as_prediction),),
)
