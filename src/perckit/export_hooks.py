"""Export hooks: what a benchmark changes in its rows on the way to the Hub, and how it reads them back.

Most benchmarks export their builder rows to Parquet as they are. A benchmark whose rows the Hub shows better
in another layout declares a hook module in its descriptor (``Benchmark.export_hook``, e.g.
``"perckit.reason_av_edit.export"``). The module defines

- ``export_split(ds, config, split, root, release_root=None) -> ExportParts``: the rows of the config itself
  (``ExportParts.dataset``) and the rows of the child configs it splits off (``ExportParts.children``: one
  :class:`ChildConfig` per child, e.g. ReasonAVEdit's ``videos``). ``root`` is the export folder being written,
  ``release_root`` the release folder the builder read (where a media value that names a file by ``path``
  alone is read; None when unknown).
- ``load_back(ds, export_root) -> Dataset``: rows read back from an export (:func:`perckit.export.load_files`)
  made equal to the builder's rows (so perckit's metrics score them); any other file of the export it reads comes
  from :func:`perckit.export_state.export_layout` (inside the export, checked before it is decoded).

Every config, children included, is plain Parquet: a card that lists a Parquet config and a config of files
cannot load the latter (datasets, and so the Dataset Viewer, infers one builder module per repository, from the
first config). The integrator (:mod:`perckit.export`) writes each child with
:func:`perckit.export_parquet.write_split` into ``<root>/<child.name>/`` and records it as a Parquet config with
``"parent": <config>`` (:mod:`perckit.export_state`; re-converting the parent drops its children).

:func:`apply` and :func:`load_back` dispatch on the descriptor and are the identity without a hook.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from types import ModuleType

import datasets

#: a child config's name: a record config name (:mod:`perckit.export_state`) that is not the default's folder
_CHILD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass
class ChildConfig:
    """One split of a config a hook splits off its parent: written as Parquet into ``<export>/<name>/``."""

    name: str                   # e.g. "videos"
    dataset: datasets.Dataset   # this split's rows of the child config
    description: str = ""       # for the record and the card


@dataclass
class ExportParts:
    """What a hook gives for one split: the parent config's rows and the rows of its child configs."""

    dataset: datasets.Dataset
    children: list[ChildConfig] = field(default_factory=list)


def hook_module(benchmark: str) -> ModuleType | None:
    """The hook module of ``benchmark`` (None when its descriptor declares none)."""
    from . import benchmarks

    spec = benchmarks.get(benchmark).export_hook
    return import_module(spec) if spec else None


def apply(benchmark: str, ds: datasets.Dataset, config: str, split: str, root: Path,
          release_root: str | Path | None = None) -> ExportParts:
    """The rows of ``split`` of ``config`` and of its child configs, as the benchmark's hook gives them;
    ``ExportParts(ds, [])`` without a hook. A hook that gives anything but :class:`ExportParts` of
    :class:`ChildConfig` with names of letters, digits, ``_``, ``.``, ``-`` (not ``data``), each once, is a
    ``TypeError`` / ``ValueError`` (a bug of the hook, not of the data)."""
    module = hook_module(benchmark)
    if module is None:
        return ExportParts(ds, [])
    parts = module.export_split(ds, config, split, Path(root), Path(release_root) if release_root is not None else None)
    if not isinstance(parts, ExportParts) or not all(isinstance(c, ChildConfig) for c in parts.children):
        raise TypeError(f"{module.__name__}.export_split: expected ExportParts of ChildConfig, got {type(parts).__name__}")
    names = [c.name for c in parts.children]
    bad = [n for n in names if not isinstance(n, str) or not _CHILD_NAME.match(n) or n in ("data", config)]
    if bad or len(set(names)) != len(names):
        raise ValueError(f"{module.__name__}.export_split: expected child config names of letters, digits, '_', '.', '-' "
                         f"(not 'data' nor {config!r}), each once, got {names!r}")
    return parts


def load_back(benchmark: str, ds: datasets.Dataset, export_root: str | Path) -> datasets.Dataset:
    """Rows read from an export (:func:`perckit.export.load_files`) made equal to the builder's rows by the hook
    (reading only the export's own files, as :func:`perckit.export_state.export_layout` lists and checks them);
    ``ds`` itself without a hook."""
    module = hook_module(benchmark)
    if module is None:
        return ds
    return module.load_back(ds, Path(export_root))


__all__ = ["ChildConfig", "ExportParts", "apply", "hook_module", "load_back"]
