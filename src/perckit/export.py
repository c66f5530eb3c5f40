"""Convert a benchmark to the Parquet layout ``push_to_hub`` writes, with a dataset card generated from the builder.

Layout of an export folder::

    README.md                                   card: YAML ``configs`` + ``dataset_info`` for every converted config
    data/<split>-00000-of-00002.parquet         the builder's default config
    <config>/<split>-00000-of-00001.parquet     every other config

Converting another config into the same folder adds it to the card and keeps the others, and every
file the user added inside the export. ``.perckit_export.json`` (:mod:`perckit.export_state`) marks the
folder as a perckit export; convert writes only into such a folder, an empty one or a new one. The new
export is assembled in a staging folder beside the target and swapped into place in one step
(:mod:`perckit.export_swap`), so an interrupted conversion leaves the previous export (or none), never a
half export, and the next run cleans up what the interrupted one left.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import datasets

from . import benchmarks
from .entrypoints import builder_class
from .errors import InputNotFoundError, OptionError
from .export_state import STATE_FILE, dump_state, has_state, new_state, owned_files, read_state

DEFAULT_MAX_SHARD_SIZE = "500MB"


@dataclass
class SplitExport:
    name: str
    num_examples: int
    num_bytes: int
    files: list[str] = field(default_factory=list)


@dataclass
class ConfigExport:
    benchmark: str
    config: str
    default: bool
    splits: list[SplitExport]
    output: Path


def config_dir(config: str, default: bool) -> str:
    return "data" if default else config


def _shards(ds: datasets.Dataset, max_shard_size: int | str) -> int:
    nbytes = ds._estimate_nbytes()
    limit = datasets.utils.py_utils.convert_file_size_to_int(max_shard_size)
    return max(int(nbytes / limit) + 1, 1)


def _needs_embedding(ds: datasets.Dataset, require_decoding) -> bool:
    """True when a media column references files by path only (bytes null): those must be embedded.

    Rows whose media already carry their bytes are written unchanged (embedding would also rewrite
    each ``path`` to its basename, so the export would no longer equal the builder's rows)."""
    import pyarrow.compute as pc

    for name, feature in ds.features.items():
        if not require_decoding(feature, ignore_decode_attribute=True):
            continue
        column = ds.data.column(name)
        if not hasattr(column.type, "get_field_index") or column.type.get_field_index("bytes") < 0:
            return True  # nested media: let embed_table_storage handle it
        for chunk in column.chunks:
            present = pc.is_valid(chunk)
            missing = pc.and_(present, pc.is_null(pc.struct_field(chunk, "bytes")))
            if pc.any(missing).as_py():
                return True
    return False


def _is_media_struct(ds: datasets.Dataset, name: str) -> bool:
    t = ds.data.column(name).type
    return hasattr(t, "get_field_index") and t.get_field_index("bytes") >= 0 and t.get_field_index("path") >= 0


def _embed_top_level_media(columns: list[str]):
    """Batch function: read the file of every ``{bytes: null, path}`` media value into ``bytes`` (path becomes
    its basename, as ``push_to_hub`` does). Works for every media type, on both datasets lines (datasets 3.6
    does not embed ``Video``)."""
    import pyarrow as pa

    def embed(table: pa.Table) -> pa.Table:
        for name in columns:
            values = table.column(name).to_pylist()
            out = []
            for v in values:
                if v is not None and v.get("bytes") is None and v.get("path"):
                    with open(v["path"], "rb") as f:
                        v = {"bytes": f.read(), "path": os.path.basename(v["path"])}
                out.append(v)
            idx = table.schema.get_field_index(name)
            table = table.set_column(idx, table.schema.field(idx), pa.array(out, type=table.schema.field(idx).type))
        return table

    return embed


def write_split(ds: datasets.Dataset, folder: Path, split: str, max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE, progress: bool = True) -> SplitExport:
    """``<folder>/<split>-XXXXX-of-YYYYY.parquet``, each shard under ``max_shard_size`` (estimated), external
    files (images, videos referenced by path) embedded as ``push_to_hub`` does."""
    from datasets.features.features import require_decoding
    from datasets.table import embed_table_storage

    folder.mkdir(parents=True, exist_ok=True)
    num_shards = _shards(ds, max_shard_size)
    embed = _needs_embedding(ds, require_decoding)
    files = []
    iterator = range(num_shards)
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, desc=f"writing {folder.name}/{split}", unit="shard", leave=False)
    for index in iterator:
        shard = ds.shard(num_shards=num_shards, index=index, contiguous=True)
        if embed:
            columns = [n for n, f in ds.features.items() if require_decoding(f, ignore_decode_attribute=True)]
            fn = _embed_top_level_media(columns) if all(_is_media_struct(ds, n) for n in columns) else embed_table_storage
            shard = shard.with_format("arrow").map(fn, batched=True, keep_in_memory=True).with_format()
        name = f"{split}-{index:05d}-of-{num_shards:05d}.parquet"
        shard.to_parquet(str(folder / name))
        files.append(f"{folder.name}/{name}")
    return SplitExport(split, ds.num_rows, ds._estimate_nbytes(), files)


def _card_body(benchmark: str, info: datasets.DatasetInfo, configs: dict[str, dict]) -> str:
    lines = [f"# {benchmark} (converted by perckit)", ""]
    if info.description:
        lines += [info.description.strip(), ""]
    lines += ["## Configs", "", "| config | split | examples | folder |", "|---|---|---|---|"]
    for name, c in sorted(configs.items()):
        for s in c["splits"]:
            lines.append(f"| `{name}`{' (default)' if c['default'] else ''} | {s['name']} | {s['num_examples']} | `{c['dir']}/` |")
    lines += ["", "Load a config with no script, on any datasets version that reads Parquet:", "", "```python",
              "from datasets import load_dataset", "", f'ds = load_dataset("<this folder or repo>", "{next(iter(sorted(configs)))}")', "```", ""]
    for name, c in sorted(configs.items()):
        lines += [f"### Features of `{name}`", "", "```", json.dumps(c["features"], indent=1)[:6000], "```", ""]
    metrics = {m.name: m.scores for m in benchmarks.get(benchmark).metrics}
    if metrics:
        lines += ["## Evaluate", "", "The matching `evaluate` metrics of perckit score predictions against these rows:", ""]
        for m, note in metrics.items():
            lines.append(f'- `evaluate.load("metrics/{m}")`: {note}')
        lines.append("")
    if info.citation:
        lines += ["## Citation", "", info.citation.strip(), ""]
    if info.license:
        lines += ["## Licence", "", info.license.strip(), ""]
    lines += ["Generated from the builder's own information (`builders/" + benchmark + "`) by `perckit convert`.", ""]
    return "\n".join(lines)


def write_card(folder: Path, benchmark: str, info: datasets.DatasetInfo, state: dict) -> None:
    """README.md with YAML ``configs`` (data_files per split) and ``dataset_info`` for every config."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard, DatasetCardData

    card_data = DatasetCardData(license=None, pretty_name=benchmark)
    metadata = {}
    infos = {}
    for name, c in sorted(state["configs"].items()):
        entry: dict = {"data_files": [{"split": s["name"], "path": f"{c['dir']}/{s['name']}-*"} for s in c["splits"]]}
        if c["default"]:
            entry["default"] = True
        metadata[name] = entry
        split_dict = datasets.SplitDict()
        for s in c["splits"]:
            split_dict.add(datasets.SplitInfo(name=s["name"], num_bytes=s["num_bytes"], num_examples=s["num_examples"]))
        infos[name] = datasets.DatasetInfo(
            features=datasets.Features.from_dict(c["features"]), splits=split_dict, config_name=name,
            dataset_size=sum(s["num_bytes"] for s in c["splits"]),
        )
    MetadataConfigs(metadata).to_dataset_card_data(card_data)
    DatasetInfosDict(infos).to_dataset_card_data(card_data)
    card = DatasetCard(f"---\n{card_data.to_yaml()}\n---\n\n" + _card_body(benchmark, info, state["configs"]))
    (folder / "README.md").write_text(str(card), encoding="utf-8")


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
    :func:`perckit.export_swap.check_output`, which also reads an existing export's record). Returns the
    builder class, the config names, the shard size in bytes and the real export path."""
    from .export_swap import check_output

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
    real = check_output(output, data_dir, cache_dir)
    if has_state(real):
        _check_benchmark(read_state(real), benchmark, real)
    return cls, chosen, limit, real


def _check_benchmark(state: dict, benchmark: str, output: Path) -> None:
    if state["benchmark"] != benchmark:
        raise OptionError(f"--output {str(output)!r}: expected an export of {benchmark} (or a new folder), got an export of "
                          f"{state['benchmark']} (its {STATE_FILE}); choose another folder")


def convert(
    benchmark: str,
    data_dir: str | Path | None,
    config: str | None,
    output: str | Path,
    max_shard_size: int | str = DEFAULT_MAX_SHARD_SIZE,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    **builder_kwargs: Any,
) -> ConfigExport:
    """Build ``config`` of ``benchmark`` and write it into the export folder ``output`` (atomically).

    Before the build, :func:`check_options` refuses anything but a new or empty folder or an export of this
    benchmark. The shards are written into a staging folder beside ``output``; then, holding the export's lock,
    the record is re-read, merged, and the staging folder (holding links to the other configs and to every
    file the user added) trades places with the export (see :mod:`perckit.export_swap`)."""
    from . import export_swap as sw

    cls, (config,), limit, real = check_options(benchmark, data_dir, [config], output, max_shard_size, cache_dir)
    sw.create_parent(real, str(output))
    with sw.export_lock(real):
        sw.recover(real, log)
        if has_state(real):  # re-read after the recovery, which may have brought the export back
            _check_benchmark(read_state(real), benchmark, real)
        staging = sw.start_staging(real, str(output))
    try:
        builder = cls(config_name=config, data_dir=str(data_dir) if data_dir else None, cache_dir=str(cache_dir) if cache_dir else None, **builder_kwargs)
        builder.download_and_prepare()
        default = config == cls.DEFAULT_CONFIG_NAME
        folder = staging.path / config_dir(config, default)
        splits = []
        for split in builder.info.splits:
            ds = builder.as_dataset(split)
            splits.append(write_split(ds, folder, split, limit, progress))
        with sw.export_lock(real):
            sw.recover(real, log)
            _commit(staging, real, str(output), benchmark, config, default, builder, splits, log)
    except BaseException:
        staging.discard()
        raise
    summary = ConfigExport(benchmark, config, default, splits, Path(output))
    for s in splits:
        log(f"{benchmark}/{config}: {s.name} {s.num_examples} rows in {len(s.files)} shard(s) -> {Path(output) / config_dir(config, default)}")
    return summary


def _commit(staging, real: Path, given: str, benchmark: str, config: str, default: bool, builder, splits: list[SplitExport], log) -> None:
    """Under the export lock: merge the record, link what the new export keeps, write card and record, swap."""
    from . import export_swap as sw

    old_owned = None
    if real.is_dir():
        if has_state(real):
            state = read_state(real)
            _check_benchmark(state, benchmark, real)
            old_owned = owned_files(state)
        elif any(real.iterdir()):
            raise OptionError(f"--output {given!r}: expected a new or empty folder or a perckit export, got a folder that "
                              f"files were added to while the export was built (no {STATE_FILE}); choose another folder")
        else:
            state, old_owned = new_state(benchmark), set()
    else:
        state = new_state(benchmark)
    state["configs"].pop(config, None)
    keep = owned_files(state) - {"README.md", STATE_FILE}
    state["configs"][config] = {
        "default": default, "dir": config_dir(config, default), "features": builder.info.features.to_dict(),
        "splits": [s.__dict__ for s in splits],
    }
    if old_owned:
        sw.link_entries(real, staging.path, skip=old_owned - keep)
    sw._do("write card", write_card, staging.path, benchmark, builder.info, state)
    sw._do("write record", (staging.path / STATE_FILE).write_text, dump_state(state), encoding="utf-8")
    staging.drop_marker()
    sw.install(staging, real, old_owned, owned_files(state), log)
