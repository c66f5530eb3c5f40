"""Export hooks: what a benchmark changes in its rows on the way to the Hub, and how it reads them back.

Most benchmarks export their builder rows to Parquet as they are. A benchmark whose rows the Hub shows better
in another layout declares a hook module in its descriptor (``Benchmark.export_hook``, a function returning e.g.
:mod:`perckit.reason_av_edit.export`). The module defines

- ``export_split(ds, config, split, root, release_root=None) -> ExportParts``: the rows of the config itself
  (``ExportParts.dataset``) and the rows of the child configs it splits off (``ExportParts.children``: one
  :class:`ChildConfig` per child, e.g. ReasonAVEdit's ``videos``). ``root`` is the export folder being written,
  ``release_root`` the release folder the builder read (where a media value that names a file by ``path``
  alone is read; None when unknown).
- ``load_back(ds, layout) -> Dataset``: rows read back from an export (:func:`perckit.export.load_files`)
  made equal to the builder's rows (so perckit's metrics score them); any other file of the export it reads comes
  from ``layout``, the export's :func:`perckit.export.state.export_layout` (inside the export, checked before it
  is decoded).

Every config, children included, is plain Parquet: a card that lists a Parquet config and a config of files
cannot load the latter (datasets, and so the Dataset Viewer, infers one builder module per repository, from the
first config). The integrator (:mod:`perckit.export`) writes each child with
:func:`perckit.export.parquet.write_split` into ``<root>/<child.name>/`` and records it as a Parquet config with
``"parent": <config>`` (:mod:`perckit.export.state`; re-converting the parent drops its children).

:func:`apply` and :func:`load_back` run the hook module the caller takes from the descriptor
(:func:`perckit.export.hook_module`) and are the identity without one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import datasets

#: a child config's name: a record config name (:mod:`perckit.export.state`) that is not the default's folder
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


def apply(module: ModuleType | None, ds: datasets.Dataset, config: str, split: str, root: Path,
          release_root: str | Path | None = None) -> ExportParts:
    """The rows of ``split`` of ``config`` and of its child configs, as the benchmark's hook gives them;
    ``ExportParts(ds, [])`` without a hook. A hook that gives anything but :class:`ExportParts` of
    :class:`ChildConfig` with names of letters, digits, ``_``, ``.``, ``-`` (not ``data``), each once, is a
    ``TypeError`` / ``ValueError`` (a bug of the hook, not of the data). ``module``: the benchmark's hook
    (``Benchmark.export_hook()``), or None."""
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


def load_back(module: ModuleType | None, ds: datasets.Dataset, layout: Any) -> datasets.Dataset:
    """Rows read from an export (:func:`perckit.export.load_files`) made equal to the builder's rows by the hook
    (reading only the export's own files, as ``layout``, its :func:`perckit.export.state.export_layout`, lists them);
    ``ds`` itself without a hook (``module`` None)."""
    return ds if module is None else module.load_back(ds, layout)


__all__ = ["ChildConfig", "ExportParts", "apply", "load_back"]
