"""The descriptor of Syn4D (:class:`perckit.hf.descriptor.Benchmark`): the one record the core reads. Its
functions are imported directly (none of these modules imports ``datasets`` until a function builds features);
the previewer, which draws with Pillow, when a preview is made."""

from __future__ import annotations

from typing import Any

from ..hf.descriptor import Benchmark, MetricSpec
from .accumulate import syn4d_core
from .features import to_metric_reference


def _previewer(builder: Any, config: str) -> Any:
    from .preview import make_previewer

    return make_previewer(builder, config)


BENCHMARK = Benchmark(
    name="syn4d",
    pretty_name="Syn4D (3D point tracking, video depth and camera pose on synthetic dynamic scenes)",
    label="Syn4D",
    splits=("test",),
    hub_repo="Syn4D/Syn4D_Benchmark",
    preview=_previewer,
    metrics=(
        MetricSpec("syn4d", to_metric_reference, syn4d_core, ("tracking", "depth", "pose"),
                   scores="tracking (config tracking); depth and pose (config challenge)",
                   file_format="the official per-sequence NPZ files, one <variant>/<scene>/<sequence_id>.npz each (python -m perckit.syn4d.evaluate)"),
    ),
)
