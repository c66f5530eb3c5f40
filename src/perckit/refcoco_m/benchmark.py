"""The descriptor of RefCOCO-M (:class:`perckit.hf.descriptor.Benchmark`): the one record the core reads. Its
functions are imported directly (none of these modules imports ``datasets`` until a function builds features);
the previewer, which draws with Pillow, when a preview is made."""

from __future__ import annotations

from typing import Any

from ..hf.descriptor import Benchmark, MetricSpec
from .accumulate import refer_iou_core
from .features import to_metric_prediction, to_metric_reference


def _previewer(builder: Any, config: str) -> Any:
    from .preview import make_previewer

    return make_previewer(builder, config)


BENCHMARK = Benchmark(
    name="refcoco_m",
    pretty_name="RefCOCO-M (referring expression segmentation)",
    label="RefCOCO-M",
    splits=("validation",),
    hub_repo="moondream/refcoco-m",
    preview=_previewer,
    metrics=(MetricSpec("refer_iou", to_metric_reference, refer_iou_core, scores="expressions", gt_prediction=to_metric_prediction),),
)
