"""The benchmarks perckit knows: their descriptors (:mod:`perckit.hf.descriptor`), imported directly, and their
builder classes. ``perckit list``, ``perckit convert``, ``perckit evaluate``, ``perckit.load_dataset``, the
accumulators and the sample releases read them from here; nothing else keeps a list of benchmarks or metrics.
"""

from __future__ import annotations

from typing import Any

from ..errors import OptionError
from ..m4seg.benchmark import BENCHMARK as M4SEG
from ..r4d_bench.benchmark import BENCHMARK as R4D_BENCH
from ..reason_av_edit.benchmark import BENCHMARK as REASON_AV_EDIT
from ..refcoco_m.benchmark import BENCHMARK as REFCOCO_M
from ..syn4d.benchmark import BENCHMARK as SYN4D
from .descriptor import Benchmark, MetricSpec

#: Every benchmark, in the order they are shown.
BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in (R4D_BENCH, SYN4D, REFCOCO_M, M4SEG, REASON_AV_EDIT)}
NAMES = tuple(BENCHMARKS)


def get(name: str) -> Benchmark:
    """The descriptor of benchmark ``name``; an unknown name is an :class:`OptionError` listing the known ones."""
    if name not in BENCHMARKS:
        raise OptionError(f"unknown benchmark {name!r}: expected one of {sorted(NAMES)}")
    return BENCHMARKS[name]


def builder_class(name: str) -> type:
    """The builder class of benchmark ``name`` (a :mod:`perckit.hf.builder` builder; imports ``datasets``).
    ``builders/<name>/<name>.py`` subclasses it."""
    get(name)
    if name == "r4d_bench":
        from ..r4d_bench.builder import R4DBenchBuilder as cls
    elif name == "syn4d":
        from ..syn4d.builder import Syn4DBuilder as cls
    elif name == "refcoco_m":
        from ..refcoco_m.builder import RefCocoMBuilder as cls
    elif name == "m4seg":
        from ..m4seg.builder import M4SegBuilder as cls
    else:
        from ..reason_av_edit.builder import ReasonAVEditBuilder as cls
    return cls


def configs(name: str) -> list[str]:
    """The config names of benchmark ``name``'s builder, default first."""
    cls = builder_class(name)
    return sorted((c.name for c in cls.BUILDER_CONFIGS), key=lambda n: n != cls.DEFAULT_CONFIG_NAME)


def metrics() -> dict[str, tuple[Benchmark, MetricSpec]]:
    """Every metric name -> (its benchmark, its spec)."""
    return {m.name: (b, m) for b in BENCHMARKS.values() for m in b.metrics}


def metric(name: str) -> tuple[Benchmark, MetricSpec]:
    table = metrics()
    if name not in table:
        raise OptionError(f"unknown metric {name!r}: expected one of {sorted(table)}")
    return table[name]


def listing() -> list[dict[str, Any]]:
    """What ``perckit list`` prints: every benchmark with its configs, splits and metrics (with their configs)."""
    return [
        {"benchmark": b.name, "name": b.pretty_name, "configs": configs(b.name), "splits": list(b.splits), "hub_repo": b.hub_repo,
         "metrics": [{"metric": m.name, "configs": list(m.configs or []), "scores": m.scores} for m in b.metrics]}
        for b in BENCHMARKS.values()
    ]
