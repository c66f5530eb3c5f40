"""Export hooks: what a benchmark changes in its rows on the way to the Hub, and how it reads them back.

Most benchmarks export their builder rows to Parquet as they are. A benchmark whose rows the Hub shows better
in another layout declares a hook module in its descriptor (``Benchmark.export_hook``, e.g.
``"perckit.reason_av_edit.export"``). The module defines

- ``export_split(ds, config, split, root) -> ExportParts``: the rows to write as Parquet (``ExportParts.dataset``)
  and the ``files`` configs it wrote under the export folder ``root`` (``ExportParts.files_configs``: plain files
  plus ``<dir>/<split>/metadata.jsonl``, the layout the Hub documents for video and audio datasets);
- ``load_back(ds, export_root) -> Dataset``: rows read back from an export with plain ``datasets.load_dataset``
  made equal to the builder's rows (so perckit's metrics score them).

:func:`apply` and :func:`load_back` dispatch on the descriptor and are the identity without a hook. A
:class:`FilesConfig` becomes a ``kind: "files"`` entry of the record (:mod:`perckit.export_state`) through
:meth:`FilesConfig.to_record`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any

import datasets

from .errors import ReleaseFormatError


@dataclass
class FilesConfig:
    """A ``files`` config written by a hook: ``files`` are export-relative POSIX paths ``<dir>/<split>/<name>``,
    ``<dir>/<split>/metadata.jsonl`` among them; ``num_examples`` counts the metadata rows, ``num_bytes`` the
    bytes of every file; ``features`` is ``datasets.Features.to_dict()`` of what ``load_dataset(export, name)`` gives."""

    name: str
    dir: str
    split: str
    files: list[str]
    num_examples: int
    num_bytes: int
    features: dict = field(default_factory=dict)

    def split_entry(self) -> dict:
        """The split entry of the record."""
        return {"name": self.split, "num_examples": int(self.num_examples), "num_bytes": int(self.num_bytes), "files": list(self.files)}

    def to_record(self, parent: str, description: str = "", viewer: dict | None = None) -> dict:
        """The record entry (version 2, ``kind: "files"``) of this config alone; :func:`merge_files_configs`
        joins the splits of one config written split by split."""
        entry: dict[str, Any] = {"default": False, "dir": self.dir, "features": self.features, "splits": [self.split_entry()],
                                 "kind": "files", "parent": parent}
        if description:
            entry["description"] = description
        if viewer is not None:
            entry["viewer"] = dict(viewer)
        return entry


@dataclass
class ExportParts:
    """What a hook gives for one split: the rows to write as Parquet and the files configs it wrote."""

    dataset: datasets.Dataset
    files_configs: list[FilesConfig] = field(default_factory=list)


def merge_files_configs(configs: list[FilesConfig], parent: str, descriptions: dict[str, str] | None = None) -> dict[str, dict]:
    """``{name: record entry}`` for the files configs of every split of ``parent`` (one entry per name, its splits
    in the order given); a name given twice for one split, or with two folders, is a :class:`ReleaseFormatError`."""
    out: dict[str, dict] = {}
    for fc in configs:
        entry = out.get(fc.name)
        if entry is None:
            out[fc.name] = fc.to_record(parent, (descriptions or {}).get(fc.name, ""))
            continue
        if entry["dir"] != fc.dir or any(s["name"] == fc.split for s in entry["splits"]):
            raise ReleaseFormatError(f"export hook: files config {fc.name!r}: expected one folder and one entry per split, "
                                     f"got split {fc.split!r} in folder {fc.dir!r} twice or in another folder than {entry['dir']!r}")
        entry["splits"].append(fc.split_entry())
    return out


def hook_module(benchmark: str) -> ModuleType | None:
    """The hook module of ``benchmark`` (None when its descriptor declares none)."""
    from . import benchmarks

    spec = benchmarks.get(benchmark).export_hook
    return import_module(spec) if spec else None


def apply(benchmark: str, ds: datasets.Dataset, config: str, split: str, root: Path) -> ExportParts:
    """The Parquet rows and the files configs of ``split`` of ``config``, the hook writing its files under the
    export folder ``root``; ``ExportParts(ds, [])`` without a hook."""
    module = hook_module(benchmark)
    if module is None:
        return ExportParts(ds, [])
    parts = module.export_split(ds, config, split, Path(root))
    if not isinstance(parts, ExportParts):
        raise TypeError(f"{module.__name__}.export_split: expected ExportParts, got {type(parts).__name__}")
    return parts


def load_back(benchmark: str, ds: datasets.Dataset, export_root: str | Path) -> datasets.Dataset:
    """Rows read from an export (``datasets.load_dataset(export_root, config)[split]``) made equal to the builder's
    rows by the hook (media files read under ``export_root`` only); ``ds`` itself without a hook."""
    module = hook_module(benchmark)
    if module is None:
        return ds
    return module.load_back(ds, Path(export_root))


__all__ = ["ExportParts", "FilesConfig", "apply", "hook_module", "load_back", "merge_files_configs"]
