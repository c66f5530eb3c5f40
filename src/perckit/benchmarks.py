"""The benchmark descriptor: one record per benchmark, declared by its own subpackage (``perckit.<name>.benchmark``).

A :class:`Benchmark` says everything the core needs to know about a benchmark without importing its code:
its name, splits, Hub repository, its builder class and the function giving a config's Hub file patterns,
its sample-release writer, and its metrics with the function that projects a builder row onto each metric's
references. Code is named by ``"module:attribute"`` strings, imported on first use. ``perckit list``,
``perckit convert``, ``perckit evaluate``, ``perckit.load_dataset``, the builders' Hub download and the
sample releases read it from here; nothing else keeps a list of benchmarks, builders or metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module
from typing import Any

from .errors import OptionError


def load_object(spec: str) -> Any:
    """The object a ``"module:attribute"`` string names (``"perckit.r4d_bench.builder:R4DBenchBuilder"``)."""
    module, attr = spec.split(":")
    return getattr(import_module(module), attr)

#: The benchmarks, in the order they are shown; each is a subpackage ``perckit.<name>`` with a ``benchmark`` module.
NAMES = ("r4d_bench", "syn4d", "refcoco_m", "m4seg", "reason_av_edit")


@dataclass(frozen=True)
class MetricSpec:
    """A metric of a benchmark: the ``evaluate`` module ``metrics/<name>``, the ``module:function`` that projects a
    builder row onto its references, its configs (None when it has none) and which dataset config it scores."""

    name: str
    reference: str
    configs: tuple[str, ...] | None = None
    scores: str = ""
    #: ``module:function`` turning a builder row into the prediction that copies its ground truth, for
    #: ``perckit gt-predictions`` ("" where predictions are not JSON rows: Syn4D's NPZ files, ReasonAVEdit's folders)
    gt_prediction: str = ""
    #: where the prediction format is described when it is not JSON Lines
    file_format: str = "JSON Lines, one prediction object a line"

    def gt_predictor(self) -> Callable[[Mapping], dict]:
        """The function of :attr:`gt_prediction`; an :class:`OptionError` saying the file format where there is none."""
        if not self.gt_prediction:
            raise OptionError(f"metric {self.name!r}: predictions are not JSON rows ({self.file_format}); gt-predictions writes JSON Lines only")
        return load_object(self.gt_prediction)

    def projector(self, config: str | None = None) -> Callable[[Mapping], dict]:
        """The function of :attr:`reference` (given ``config`` for a metric with configs)."""
        fn = load_object(self.reference)
        if self.configs:
            if config not in self.configs:
                raise OptionError(f"metric {self.name!r} needs --config, one of {list(self.configs)}; got {config!r}")
            return lambda row: fn(row, config)
        return fn


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: what the core knows of it (see the module docstring)."""

    name: str
    pretty_name: str
    #: the short name messages use ("R4D-Bench")
    label: str
    splits: tuple[str, ...]
    #: the Hub dataset repository of the release (the builders' default ``repo_id``)
    hub_repo: str
    #: ``module:Class`` of the builder (a ``perckit.builder_base`` builder); ``builders/<name>/<name>.py`` subclasses it
    builder: str
    #: ``module:function`` giving the release files a builder config needs from the Hub: ``fn(config) -> [pattern]``
    hub_patterns: str
    #: ``module:function`` writing the sample release: ``fn(root, seed=0, **scale)`` returning a summary with ``files``
    sample_release: str
    metrics: tuple[MetricSpec, ...] = field(default_factory=tuple)
    #: the module of the export hook (:mod:`perckit.export_hooks`): it defines ``export_split(ds, config, split,
    #: root, release_root) -> ExportParts`` and ``load_back(ds, export_root) -> Dataset`` ("" for none: the rows go to Parquet as they are)
    export_hook: str = ""
    #: ``module:function`` of the previewer factory ``make_previewer(builder, config)`` (:mod:`perckit.previews`):
    #: the picture of each row in the export's ``preview`` column ("" for none)
    preview: str = ""

    def builder_class(self) -> type:
        """The builder class of :attr:`builder` (imported from the package: no source checkout needed)."""
        return load_object(self.builder)

    def patterns(self, config: Any) -> list[str]:
        """The Hub file patterns builder config ``config`` needs (:attr:`hub_patterns`)."""
        return list(load_object(self.hub_patterns)(config))

    def sample_release_writer(self) -> Callable[..., Any]:
        """The sample-release writer of :attr:`sample_release`."""
        return load_object(self.sample_release)

    def configs(self) -> list[str]:
        """The builder's config names, default first."""
        cls = self.builder_class()
        names = [c.name for c in cls.BUILDER_CONFIGS]
        return sorted(names, key=lambda n: n != cls.DEFAULT_CONFIG_NAME)


@lru_cache(maxsize=None)
def get(name: str) -> Benchmark:
    """The record of benchmark ``name``; an unknown name is an :class:`OptionError` listing the known ones."""
    if name not in NAMES:
        raise OptionError(f"unknown benchmark {name!r}: expected one of {sorted(NAMES)}")
    record = import_module(f"perckit.{name}.benchmark").BENCHMARK
    if not isinstance(record, Benchmark) or record.name != name:
        raise TypeError(f"perckit.{name}.benchmark.BENCHMARK: expected the Benchmark record of {name!r}, got {record!r}")
    return record


def all_benchmarks() -> list[Benchmark]:
    return [get(n) for n in NAMES]


def metrics() -> dict[str, tuple[Benchmark, MetricSpec]]:
    """Every metric name -> (its benchmark, its spec)."""
    return {m.name: (b, m) for b in all_benchmarks() for m in b.metrics}


def metric(name: str) -> tuple[Benchmark, MetricSpec]:
    table = metrics()
    if name not in table:
        raise OptionError(f"unknown metric {name!r}: expected one of {sorted(table)}")
    return table[name]


def listing() -> list[dict[str, Any]]:
    """What ``perckit list`` prints: every benchmark with its configs, splits and metrics (with their configs)."""
    return [
        {"benchmark": b.name, "name": b.pretty_name, "configs": b.configs(), "splits": list(b.splits), "hub_repo": b.hub_repo,
         "metrics": [{"metric": m.name, "configs": list(m.configs or []), "scores": m.scores} for m in b.metrics]}
        for b in all_benchmarks()
    ]
