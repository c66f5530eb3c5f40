"""Convert a benchmark to the Parquet layout ``push_to_hub`` writes, with a dataset card generated from the builder.

Layout of an export folder::

    README.md                                   card: YAML ``configs`` + ``dataset_info`` for every converted config
    data/<split>-00000-of-00002.parquet         the builder's default config
    <config>/<split>-00000-of-00001.parquet     every other config

Converting another config into the same folder adds it to the card and keeps the others. The new
export is assembled in a temporary folder beside the target and moved into place only when complete,
so an interrupted conversion leaves the previous export (or none), never a half export.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import datasets

from .entrypoints import builder_class
from .errors import InputNotFoundError, OptionError

#: benchmark -> (builder name, its metrics, a one-line description for the card)
BENCHMARKS: dict[str, dict[str, Any]] = {
    "r4d_bench": {"metrics": {"mask_temporal": "all_queries/subset_36", "track_id": "all_queries/subset_36"}},
    "syn4d": {"metrics": {"syn4d": "tracking (config tracking); depth and pose (config challenge)"}},
    "refcoco_m": {"metrics": {"refer_iou": "expressions"}},
    "m4seg": {"metrics": {"m4seg": "default (test split)"}},
    "reason_av_edit": {"metrics": {"av_reasoning": "default"}},
}
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
    metrics = BENCHMARKS.get(benchmark, {}).get("metrics", {})
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


def _read_state(output: Path) -> dict:
    """The configs already exported into ``output`` (from ``.perckit_export.json``)."""
    state = output / ".perckit_export.json"
    return json.loads(state.read_text(encoding="utf-8")) if state.is_file() else {"configs": {}}


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
    """Build ``config`` of ``benchmark`` and write it into the export folder ``output`` (atomically)."""
    if benchmark not in BENCHMARKS:
        raise OptionError(f"unknown benchmark {benchmark!r}: expected one of {sorted(BENCHMARKS)}")
    if data_dir is not None and not Path(data_dir).is_dir():
        raise InputNotFoundError(f"--data-dir {str(data_dir)!r} does not exist (expected the {benchmark} release root)")
    cls = builder_class(benchmark)
    names = [c.name for c in cls.BUILDER_CONFIGS]
    config = config or cls.DEFAULT_CONFIG_NAME
    if config not in names:
        raise OptionError(f"unknown config {config!r} of {benchmark}: expected one of {names}")
    builder = cls(config_name=config, data_dir=str(data_dir) if data_dir else None, cache_dir=str(cache_dir) if cache_dir else None, **builder_kwargs)
    builder.download_and_prepare()
    default = config == cls.DEFAULT_CONFIG_NAME
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{output.name}.tmp-", dir=output.parent))
    try:
        state = _read_state(output)
        if output.is_dir():  # keep the other configs' files
            for name, c in state["configs"].items():
                if name != config and (output / c["dir"]).is_dir():
                    shutil.copytree(output / c["dir"], tmp / c["dir"])
        folder = tmp / config_dir(config, default)
        splits = []
        for split in builder.info.splits:
            ds = builder.as_dataset(split)
            splits.append(write_split(ds, folder, split, max_shard_size, progress))
        state["benchmark"] = benchmark
        state["configs"][config] = {
            "default": default, "dir": config_dir(config, default), "features": builder.info.features.to_dict(),
            "splits": [s.__dict__ for s in splits],
        }
        write_card(tmp, benchmark, builder.info, state)
        (tmp / ".perckit_export.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")  # keep feature order
        _swap_into_place(tmp, output)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    summary = ConfigExport(benchmark, config, default, splits, output)
    for s in splits:
        log(f"{benchmark}/{config}: {s.name} {s.num_examples} rows in {len(s.files)} shard(s) -> {output / config_dir(config, default)}")
    return summary


def _swap_into_place(tmp: Path, output: Path) -> None:
    """Replace ``output`` by the complete ``tmp`` folder (two renames; the old export is removed last)."""
    old = None
    if output.exists():
        old = output.with_name(f".{output.name}.old-{os.getpid()}")
        os.replace(output, old)
    os.replace(tmp, output)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
