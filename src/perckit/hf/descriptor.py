"""The benchmark descriptor: one record per benchmark, all declared in :mod:`perckit.hf.benchmark`.

A :class:`Benchmark` says what the core needs to know about a benchmark: its name, splits and Hub repository,
its metrics (:class:`MetricSpec`: the metric's :class:`~perckit.hf.contract.MetricCore` factory, the function
projecting a builder row onto its references, the reader and writer of a :class:`PredictionFolder`), its previewer
and its export hook. Every field holding code is
the function itself, imported directly from the benchmark's package (inside the function where the import is
heavy: ``datasets`` for the features and the export hook), so a reader follows each one. The builder class
names its descriptor (``BENCHMARK``), never the other way round, so a descriptor stays free of ``datasets``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import OptionError
from .contract import MetricCore


@dataclass(frozen=True)
class PredictionFolder:
    """Predictions that are a folder of files, read and written by the benchmark's own functions:
    ``read(folder, ids)`` gives the prediction of each reference id (the benchmark's folder reader, with its path
    and size guards); ``write_gt(rows, folder)`` writes the ground truth of builder rows as those files (each
    atomically, to a new path) and returns how many predictions it wrote."""

    #: the references' id key (the ``ids`` given to ``read``)
    key: str
    read: Callable[[str, list[str]], list[dict]]
    write_gt: Callable[[Iterable[Mapping], Path], int]


@dataclass(frozen=True)
class MetricSpec:
    """A metric of a benchmark: the ``evaluate`` module ``metrics/<name>``, its core, the function that projects a
    builder row onto its references, its configs (None when it has none) and which dataset config it scores."""

    name: str
    #: ``fn(row)``, or ``fn(row, config)`` for a metric with configs: a builder row as the metric's reference
    reference: Callable[..., dict]
    #: ``fn(config) -> MetricCore``: the metric as accumulators run it (None: scored by :attr:`compute` alone,
    #: ``av_edit_quality``'s set-level model metrics)
    core: Callable[[str | None], MetricCore] | None = None
    configs: tuple[str, ...] | None = None
    scores: str = ""
    #: a builder row as the prediction that copies its ground truth, for ``perckit gt-predictions`` (None where
    #: predictions are a :attr:`folder` of files)
    gt_prediction: Callable[[Mapping], dict] | None = None
    #: where the prediction format is described when it is not JSON Lines
    file_format: str = "JSON Lines, one prediction object a line"
    #: predictions as a folder of files (Syn4D's NPZs, ReasonAVEdit's per-sample files; None: JSON rows only)
    folder: PredictionFolder | None = None
    #: ``fn(predictions, references, **options) -> dict`` of a metric without a :attr:`core`: the function its
    #: ``evaluate`` module calls
    compute: Callable[..., dict] | None = None

    def metric_core(self, config: str | None = None) -> MetricCore:
        """The :class:`MetricCore` of config ``config``; an :class:`OptionError` for a metric scored otherwise."""
        if self.core is None:
            raise OptionError(f"metric {self.name!r} has no streaming accumulator: it scores whole sets of predictions; "
                              f"use perckit.load_metric({self.name!r}) or `perckit evaluate {self.name}`")
        return self.core(config)

    def projector(self, config: str | None = None) -> Callable[[Mapping], dict]:
        """:attr:`reference` (given ``config`` for a metric with configs)."""
        fn = self.reference
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
    #: the texts of the builders' ``DatasetInfo`` (the homepage is the Hub repository's page)
    description: str = ""
    citation: str = ""
    license: str = ""
    metrics: tuple[MetricSpec, ...] = field(default_factory=tuple)
    #: ``fn(builder, config)``, the previewer factory (:mod:`perckit.draw.previews`): the picture of each row
    #: in the export's ``preview`` column (None for none)
    preview: Callable[[Any, Any], Any] | None = None
    #: ``fn() -> module``, the export hook (:mod:`perckit.export.hooks`): a module defining ``export_split(ds,
    #: config, split, root, release_root) -> ExportParts`` and ``load_back(ds, export_root) -> Dataset`` (None for
    #: none: the rows go to Parquet as they are)
    export_hook: Callable[[], ModuleType] | None = None

    @property
    def homepage(self) -> str:
        return f"https://huggingface.co/datasets/{self.hub_repo}"
