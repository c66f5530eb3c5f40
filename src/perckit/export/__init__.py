"""Convert a benchmark to a Hub dataset the Dataset Viewer shows well: Parquet plus a card for a Hub reader.

Layout of an export folder::

    README.md                                   card (:mod:`perckit.export.card`): the builder card's metadata,
                                                YAML ``configs`` + ``dataset_info`` of every converted config
    data/<split>-00000-of-00002.parquet         the builder's default config
    <config>/<split>-00000-of-00001.parquet     every other config (and ReasonAVEdit's ``videos``)

The shards (:mod:`perckit.export.parquet`) carry datasets' ``huggingface`` schema metadata, a page index and
row groups of at most 100 MB; a config whose rows are too large for the Viewer's page budget is marked not
viewable in the record and the card. Each config with a previewer gets a last ``preview`` ``Image`` column
(:mod:`perckit.draw.previews`).

Converting another config into the same folder adds it to the card and keeps the others, and every
file the user added inside the export. ``.perckit_export.json`` (:mod:`perckit.export.state`) marks the
folder as a perckit export; convert writes only into such a folder, an empty one or a new one. The new
export is assembled in a staging folder beside the target and swapped into place in one step
(:mod:`perckit.export.swap`), so an interrupted conversion leaves the previous export (or none), never a
half export, and the next run cleans up what the interrupted one left.

Reading an export back (:func:`load_export`, :func:`load_files`) reads only the export: its shards are the ones
:func:`perckit.export.state.export_layout` lists (the record's, else the card's ``data_files``, every path inside
the folder, every shard past the Parquet size guard before anything decodes it), loaded with the packaged
``parquet`` builder and those files, never with ``datasets.load_dataset(folder)``, which follows the card's
``data_files`` wherever they point.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import datasets
import pyarrow as pa

from ..hf import benchmark as benchmarks
from ..hf.entrypoints import builder_class
from ..errors import InputNotFoundError, OptionError, PerckitError, ReleaseFormatError
from .card import write_card
from . import hooks as export_hooks, swap as sw
from .parquet import SplitExport, check_media_table, viewer_verdict, write_split
from ..io.paths import write_atomic
from .state import (MAX_TEXT_CHARS, STATE_FILE, drop_config, dump_state, export_layout, has_state, literal_data_files,
                    new_state, owned_files, read_state)

DEFAULT_MAX_SHARD_SIZE = "500MB"


@dataclass
class ConfigExport:
    benchmark: str
    config: str
    default: bool
    splits: list[SplitExport]
    output: Path
    #: the configs this conversion wrote beside ``config`` (ReasonAVEdit's ``videos``)
    children: list[str] = field(default_factory=list)


def parse_shard_size(value: int | str) -> int:
    """``--max-shard-size`` as a positive number of bytes (``500MB``, ``1GB``, ``10KiB`` or a plain integer of
    bytes), else :class:`~perckit.errors.OptionError`."""
    size = None
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit() and len(text) <= 30:
            size = int(text)
        elif text and len(text) <= 30:
            try:
                size = datasets.utils.py_utils.convert_file_size_to_int(text)
            except (ValueError, TypeError):
                size = None
    if not isinstance(size, int) or size <= 0:
        raise OptionError(f"--max-shard-size: expected a positive size such as 500MB, 1GB or 10KiB, got {value!r}")
    return size


def check_options(benchmark: str, data_dir: str | Path | None, configs: list[str | None], output: str | Path,
                  max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE, cache_dir: str | Path | None = None) -> tuple[type, list[str], int, Path]:
    """Every check ``convert`` makes before a build, for all of ``configs`` at once (the CLI calls it before the
    first build): the benchmark, the config names, the shard size, the release folder and ``output`` (see
    :func:`perckit.export.swap.check_output`, which also reads an existing export's record). Returns the
    builder class, the config names, the shard size in bytes and the real export path."""
    benchmarks.get(benchmark)  # an OptionError naming the known benchmarks
    limit = parse_shard_size(max_shard_size)
    if data_dir is not None:
        if not Path(data_dir).exists():
            raise InputNotFoundError(f"--data-dir {str(data_dir)!r} does not exist (expected the {benchmark} release root)")
        if not Path(data_dir).is_dir():
            raise InputNotFoundError(f"--data-dir {str(data_dir)!r}: expected the {benchmark} release root folder, got a file")
    cls = builder_class(benchmark)
    names = [c.name for c in cls.BUILDER_CONFIGS]
    chosen = [c or cls.DEFAULT_CONFIG_NAME for c in configs]
    for config in chosen:
        if config not in names:
            raise OptionError(f"unknown config {config!r} of {benchmark}: expected one of {names}")
    real = sw.check_output(output, data_dir, cache_dir)
    _read_own_state(real, benchmark)
    return cls, chosen, limit, real


def _read_own_state(output: Path, benchmark: str) -> dict | None:
    """The record of the export ``output`` (None: it has none), which must be an export of ``benchmark``."""
    if not has_state(output):
        return None
    state = read_state(output)
    if state["benchmark"] != benchmark:
        raise OptionError(f"--output {str(output)!r}: expected an export of {benchmark} (or a new folder), got an export of "
                          f"{state['benchmark']} (its {STATE_FILE}); choose another folder")
    return state


def convert(
    benchmark: str,
    data_dir: str | Path | None,
    config: str | None,
    output: str | Path,
    max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE,
    cache_dir: str | Path | None = None,
    progress: bool | None = None,
    log: Callable[[str], None] = print,
    preview: bool = True,
    **builder_kwargs: Any,
) -> ConfigExport:
    """Build ``config`` of ``benchmark`` and write it into the export folder ``output`` (atomically).

    Before the build, :func:`check_options` refuses anything but a new or empty folder or an export of this
    benchmark. Each split gets the ``preview`` picture column (:mod:`perckit.draw.previews`; ``preview=False`` leaves it
    out), goes through the benchmark's export hook (:mod:`perckit.export.hooks`: ReasonAVEdit's ``Audio`` columns and
    its ``videos`` config) and is written as Parquet the Dataset Viewer can page (:mod:`perckit.export.parquet`)
    into a staging folder beside ``output``; then, holding the export's lock, the record is re-read, merged, and the
    staging folder (holding links to the other configs and to every file the user added) trades places with the
    export (see :mod:`perckit.export.swap`). ``progress``: a bar per split written (None: while ``perckit`` runs
    without ``--quiet``, :func:`perckit.hf.cli.progress`)."""
    cls, (config,), limit, real = check_options(benchmark, data_dir, [config], output, max_shard_size, cache_dir)
    sw.create_parent(real, str(output))
    with sw.export_lock(real):
        sw.recover(real, log)
        _read_own_state(real, benchmark)  # re-read after the recovery, which may have brought the export back
        staging = sw.start_staging(real, str(output))
    try:
        builder = cls(config_name=config, data_dir=str(data_dir) if data_dir else None, cache_dir=str(cache_dir) if cache_dir else None, **builder_kwargs)
        builder.download_and_prepare()
        default = config == cls.DEFAULT_CONFIG_NAME
        entries = _write_config(benchmark, builder, config, default, staging.path, limit, progress, preview)
        with sw.export_lock(real):
            sw.recover(real, log)
            _commit(staging, real, str(output), benchmark, config, entries, builder, log)
    except BaseException:
        staging.discard()
        raise
    summary = ConfigExport(benchmark, config, default, entries[config][1], Path(output), [n for n in entries if n != config])
    for name, (entry, written) in entries.items():
        for s in written:
            log(f"{benchmark}/{name}: {s.name} {s.num_examples} rows in {len(s.files)} shard(s) -> {Path(output) / entry['dir']}")
        if not entry["viewer"]["viewable"]:
            log(f"{benchmark}/{name}: not viewable in the Hub's Dataset Viewer ({entry['viewer']['reason']}); the card says so")
    return summary


def _entry(features: datasets.Features, default: bool, folder: str, splits: list[SplitExport], description: str,
           parent: str | None = None) -> dict:
    """The record entry (version 2) of one written config."""
    from ..draw.previews import PREVIEW_COLUMN

    viewable, reason = viewer_verdict(splits, len(splits))
    entry = {
        "default": default, "dir": folder, "features": features.to_dict(),
        "splits": [{k: int(v) if k.startswith(("num_", "max_")) else v for k, v in asdict(s).items()} for s in splits],
        "kind": "parquet",
        "preview": PREVIEW_COLUMN if PREVIEW_COLUMN in features else None,
        "viewer": {"viewable": bool(viewable), "reason": reason},
        "description": (description or "")[:MAX_TEXT_CHARS]  # the record's limit,
    }
    if parent is not None:
        entry["parent"] = parent
    return entry


def _write_config(benchmark: str, builder, config: str, default: bool, root: Path, limit: int, progress: bool | None,
                  preview: bool) -> dict[str, tuple[dict, list[SplitExport]]]:
    """Write every split of the built ``config`` (and the child configs its export hook makes) under ``root``;
    ``{config name: (record entry, splits written)}``, ``config`` first."""
    from ..draw.previews import add_preview

    folder = "data" if default else config  # the folder the record expects (perckit.export.state)
    splits: list[SplitExport] = []
    features = None
    children: dict[str, tuple[list[SplitExport], datasets.Features, str]] = {}
    for split in builder.info.splits:
        ds = builder.as_dataset(split)
        if preview:
            ds = add_preview(ds, benchmarks.get(benchmark), builder, config)
        parts = export_hooks.apply(hook_module(benchmark), ds, config, split, root)
        splits.append(write_split(parts.dataset, root / folder, split, limit, progress))
        features = parts.dataset.features
        for child in parts.children:
            written, _, _ = children.setdefault(child.name, ([], child.dataset.features, child.description))
            written.append(write_split(child.dataset, root / child.name, split, limit, progress))
    description = getattr(builder.config, "description", None) or ""
    entries = {config: (_entry(features, default, folder, splits, description), splits)}
    for name, (written, child_features, child_description) in children.items():
        if name in entries or name == "data":
            raise OptionError(f"{benchmark}/{config}: the export hook made a config named {name!r}, which this export already uses")
        entries[name] = (_entry(child_features, False, name, written, child_description, parent=config), written)
    return entries


def _commit(staging, real: Path, given: str, benchmark: str, config: str, entries: dict, builder, log) -> None:
    """Under the export lock: merge the record, link what the new export keeps, write card and record, swap."""
    state = _read_own_state(real, benchmark)  # None: no export there (yet)
    if state is None and real.is_dir() and any(real.iterdir()):
        raise OptionError(f"--output {given!r}: expected a new or empty folder or a perckit export, got a folder that "
                          f"files were added to while the export was built (no {STATE_FILE}); choose another folder")
    # what the previous export owns (an empty folder: nothing; no folder: None, the new one is renamed into place)
    old_owned = owned_files(state) if state is not None else set() if real.is_dir() else None
    state = state if state is not None else new_state(benchmark)
    drop_config(state, config)  # the config and the child configs its last conversion wrote
    for name in entries:
        if name in state["configs"]:
            raise OptionError(f"--output {given!r}: converting {config!r} writes the config {name!r}, which the export "
                              f"already has from another conversion; choose another folder")
    keep = owned_files(state) - {"README.md", STATE_FILE}
    for name, (entry, _) in entries.items():
        state["configs"][name] = entry
    if old_owned:
        sw.link_entries(real, staging.path, skip=old_owned - keep)
    sw._do("write card", write_card, staging.path, benchmark, builder.info, state)
    sw._do("write record", write_atomic, staging.path / STATE_FILE, dump_state(state))
    staging.drop_marker()
    sw.install(staging, real, old_owned, owned_files(state), log)


def split_names(split: Any) -> list[str]:
    """The split names a ``datasets`` split argument refers to: ``"test"``, ``"test[:10]"``, ``"train+test[50%:]"``
    (a ``datasets.ReadInstruction`` or ``NamedSplit`` too); :class:`~perckit.errors.OptionError` for anything else."""
    import re

    spec = split.to_spec() if hasattr(split, "to_spec") else str(split) if isinstance(split, (str, datasets.NamedSplit)) else None
    parts = [re.fullmatch(r"\s*(\w+(?:\.\w+)*)\s*(?:\[[^\[\]]*\])?\s*", p, re.ASCII) for p in spec.split("+")] if spec else [None]
    if not all(parts):
        raise OptionError(f"split: expected a split name such as 'test' (or 'test[:10]', 'train+test'), got {split!r}")
    return list(dict.fromkeys(m.group(1) for m in parts))


def load_files(layout, config: str | None = None, split: Any = None,
               cache_dir: str | Path | None = None) -> datasets.Dataset | datasets.DatasetDict:
    """The rows of ``config`` (default: the export's default) of an export (``layout``:
    :func:`perckit.export.state.export_layout`), ``split`` a ``datasets`` split argument (``None``: every split, a
    ``DatasetDict``). Only the shards the record (else the card) names are read, each checked first
    (:meth:`perckit.export.state.ExportLayout.files`); they are loaded by the packaged ``parquet`` builder with those
    files and nothing else (never the folder's own card), which takes the features from the shards' ``huggingface``
    schema metadata (the features perckit wrote). Before the rows are given back, no media value may name a file by
    path alone (:func:`perckit.export.parquet.check_media_table`, on the loaded table: datasets would read that file
    from this machine on decode)."""
    name = layout.config_name(config)
    files = layout.files(name, None if split is None else split_names(split), media=False)
    data_files = literal_data_files(files)  # escaped: datasets takes every entry as a glob pattern
    try:
        ds = datasets.load_dataset("parquet", name=name, data_files=data_files, split=split,
                                   cache_dir=str(cache_dir) if cache_dir else None)
    except (datasets.exceptions.DatasetGenerationError, pa.ArrowException) as e:
        cause = (e.__cause__ or e.__context__ or e) if isinstance(e, datasets.exceptions.DatasetGenerationError) else e
        if isinstance(cause, PerckitError):
            raise cause from None
        raise ReleaseFormatError(f"export {str(layout.root)!r}, config {name!r}: expected shards that load as Parquet rows, "
                                 f"got {type(cause).__name__}: {str(cause)[:300]}") from e
    for s, part in (ds.items() if isinstance(ds, datasets.DatasetDict) else [(split, ds)]):
        check_media_table(part.data, f"export {str(layout.root)!r}, config {name!r}, split {str(s)!r}: ")
    return ds


def hook_module(benchmark: str) -> ModuleType | None:
    """The export hook module of ``benchmark`` (:mod:`perckit.export.hooks`; None when its descriptor declares none)."""
    hook = benchmarks.get(benchmark).export_hook
    return hook() if hook is not None else None


def load_export(export_dir: str | Path, config: str | None = None, split: Any = None,
                cache_dir: str | Path | None = None, benchmark: str | None = None) -> datasets.Dataset | datasets.DatasetDict:
    """A config of a perckit export as the builder's rows: the export's own shards (:func:`load_files`: the ones its
    record names, or for a copy without a record its card; every path inside the folder, every shard past the Parquet
    size guard before anything decodes it), given back the builder's row schema
    (:func:`perckit.export.hooks.load_back`: ReasonAVEdit's videos joined back from its ``videos`` config, its audio
    as the builder's media storage), ready for the metrics' reference projectors. The ``preview`` column, when
    present, stays as the last column. ``export_dir`` is a local export (its record names the benchmark) or a local
    copy of a pushed one (``huggingface_hub.snapshot_download``: pass ``benchmark``)."""
    export_dir = Path(export_dir)
    if benchmark is None and not has_state(export_dir):
        read_state(export_dir)  # its InputNotFoundError: no record names the benchmark (pass it for a Hub copy)
    layout = export_layout(export_dir)
    if benchmark is None:
        benchmark = layout.benchmark
    elif layout.benchmark is not None and layout.benchmark != benchmark:
        raise OptionError(f"benchmark {benchmark!r}: expected the benchmark of the export {str(export_dir)!r}, which its "
                          f"{STATE_FILE} says is {layout.benchmark!r}")
    benchmarks.get(benchmark)  # an OptionError naming the known ones
    ds = load_files(layout, config, split, cache_dir)
    hook = hook_module(benchmark)
    if isinstance(ds, datasets.DatasetDict):
        return datasets.DatasetDict({k: export_hooks.load_back(hook, v, layout) for k, v in ds.items()})
    return export_hooks.load_back(hook, ds, layout)
