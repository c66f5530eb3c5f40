"""RefCOCO-M's descriptor: the refer_iou metric, its reference and ground-truth projections, the previewer. The
core reads it (:class:`perckit.hf.descriptor.Benchmark`)."""

from __future__ import annotations

from ..hf.descriptor import Benchmark, MetricSpec
from .accumulate import refer_iou_core
from .features import to_metric_prediction, to_metric_reference
from .preview import make_previewer

BENCHMARK = Benchmark(
    name="refcoco_m",
    pretty_name="RefCOCO-M (referring expression segmentation)",
    label="RefCOCO-M",
    splits=("validation",),
    hub_repo="moondream/refcoco-m",
    preview=make_previewer,
    metrics=(MetricSpec("refer_iou", to_metric_reference, refer_iou_core, scores="expressions", gt_prediction=to_metric_prediction),),
)
