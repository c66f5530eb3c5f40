"""A checker of an export folder against the Hugging Face Dataset Viewer's rules, written from the Viewer's own
source (huggingface/dataset-viewer), independently of perckit's writer: it reads the folder with pyarrow and the
card's YAML only.

Where each rule comes from (dataset-viewer paths):

- a dataset with a loading script is refused (``DatasetWithScriptNotSupportedError``:
  ``libs/libcommon/src/libcommon/exceptions.py``, raised in
  ``services/worker/src/worker/job_runners/config/parquet_and_info.py``): no ``.py`` file at the export root;
- a data-only Parquet config is used as it is; its types come from the files' ``huggingface`` schema metadata
  (``Features.from_arrow_schema`` in ``parquet_and_info.py``); it must equal the card's ``dataset_info``;
- row groups: the Viewer copied Parquet files as they were only when their row groups were at most 100,000,000
  bytes uncompressed (``PARQUET_AND_INFO_MAX_ROW_GROUP_BYTE_SIZE_FOR_COPY``, ``services/worker/src/worker/config.py``
  before dataset-viewer commit deb21e4c5), which is also datasets' ``MAX_ROW_GROUP_SIZE`` since 4.1;
- a page: the rows endpoint reads at most ``MAX_NUM_ROWS_PER_PAGE`` = 100 rows
  (``libs/libcommon/src/libcommon/constants.py``) and may scan at most ``ROWS_INDEX_MAX_ARROW_DATA_IN_MEMORY`` =
  300,000,000 bytes (``libs/libcommon/src/libcommon/config.py``), else ``TooBigRows``
  (``libs/libcommon/src/libcommon/parquet_utils.py``, which asks for a page index or smaller row groups). The
  scan reads pages through the offset index (``libs/libviewer/src/parquet.rs``: offset index optional, column
  index skipped); checked conservatively here as the uncompressed bytes of every row group a 100-row window
  overlaps, the split's files taken in filename order;
- page index: every column chunk has an offset index; a column index wherever the chunk's statistics carry a
  min/max (pyarrow writes none for a chunk whose values are too long for statistics, such as image bytes; the
  Viewer does not read column indexes);
- at most ``SPLIT_NAMES_MAX_NUMBER`` = 30 splits per config (``services/worker/src/worker/config.py``,
  ``DatasetWithTooManySplitsError``);
- image, audio and video cells become assets only when they carry bytes (``libs/libcommon/src/libcommon/
  viewer_utils/features.py``: a local path alone gives no asset); the default config shows a picture, so it has an
  ``Image`` column.

A config the record (``.perckit_export.json``) declares ``viewer.viewable: false`` and the card's body lists in its
"Dataset Viewer" section is exempt from the row-group and page budgets (the Viewer is told not to show it), not from
the other rules.
"""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path
from typing import Any

import datasets
import pyarrow.parquet as pq
import yaml

MAX_ROW_GROUP_BYTES = 100_000_000
PAGE_ROWS = 100
MAX_PAGE_BYTES = 300_000_000
MAX_SPLITS = 30
REQUIRED_KEYS = ("license", "pretty_name", "task_categories", "tags", "size_categories")


def split_card(text: str) -> tuple[dict, str]:
    """(YAML front matter, body) of a card."""
    match = re.match(r"\A---\r?\n(.*?)\r?\n---\r?\n?(.*)\Z", text, re.S)
    if not match:
        return {}, text
    return yaml.safe_load(match.group(1)) or {}, match.group(2)


def _builder_card(benchmark: str) -> dict:
    from helpers.common import REPO

    path = REPO / "builders" / benchmark / "README.md"
    return split_card(path.read_text(encoding="utf-8"))[0] if path.is_file() else {}


def _card_infos(meta: dict) -> dict[str, Any]:
    raw = meta.get("dataset_info")
    entries = raw if isinstance(raw, list) else [raw] if isinstance(raw, dict) else []
    return {e.get("config_name", "default"): e for e in entries if isinstance(e, dict)}


def _viewer_section(body: str) -> str:
    """The text of the body's "Dataset Viewer" section (up to the next heading of the same or a higher level)."""
    match = re.search(r"^(#+)[ \t]+[^\n]*Dataset Viewer[^\n]*$", body, re.M | re.I)
    if not match:
        return ""
    level = len(match.group(1))
    rest = body[match.end():]
    end = re.search(rf"^#{{1,{level}}}[ \t]", rest, re.M)
    return rest[:end.start()] if end else rest


def page_bytes(groups: list[tuple[int, int]], page_rows: int = PAGE_ROWS) -> int:
    """Most bytes of row groups (``(rows, bytes)`` in order) any ``page_rows``-row window overlaps (brute force
    over every start row that begins or ends a row group's overlap: each group's first and last row)."""
    bounds = []
    pos = 0
    for rows, nbytes in groups:
        if rows > 0:
            bounds.append((pos, pos + rows, nbytes))
            pos += rows
    best = 0
    for start in sorted({b[0] for b in bounds} | {b[1] - 1 for b in bounds}):
        best = max(best, sum(n for a, z, n in bounds if a < start + page_rows and z > start))
    return best


def _has_image(features: datasets.Features) -> bool:
    return any(isinstance(f, datasets.Image) for f in features.values())


def _check_meta(meta: dict, benchmark: str | None, problems: list[str]) -> None:
    for key in REQUIRED_KEYS:
        if not meta.get(key):
            problems.append(f"README.md: the YAML has no `{key}` (the Hub shows it on the dataset page)")
    if meta.get("license") == "other":
        for key in ("license_name", "license_link"):
            if not meta.get(key):
                problems.append(f"README.md: `license: other` needs `{key}` in the YAML")
    if benchmark and _builder_card(benchmark).get("language") and not meta.get("language"):
        problems.append(f"README.md: the builder card of {benchmark} has a `language`, the export's YAML has none")


def _parquet_files(export_dir: Path, config: str, data_files: Any, problems: list[str]) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    entries = data_files if isinstance(data_files, list) else []
    if not entries:
        problems.append(f"README.md: config `{config}` has no `data_files`")
    for entry in entries:
        if not isinstance(entry, dict) or "split" not in entry or "path" not in entry:
            problems.append(f"README.md: config `{config}`: a `data_files` entry is not {{split, path}}: {entry!r}")
            continue
        patterns = entry["path"] if isinstance(entry["path"], list) else [entry["path"]]
        found = sorted({Path(p) for pat in patterns for p in glob.glob(str(export_dir / pat))}, key=lambda p: p.name)
        if not found:
            problems.append(f"README.md: config `{config}` split `{entry['split']}`: no file matches {patterns}")
        out.setdefault(str(entry["split"]), []).extend(found)
    return out


def viewer_problems(export_dir: str | Path) -> list[str]:
    """Every way the export at ``export_dir`` breaks a Viewer rule (see the module docstring), as messages naming
    the file or config and the rule; empty when it passes."""
    export_dir = Path(export_dir)
    problems: list[str] = []
    for script in sorted(export_dir.glob("*.py")):
        problems.append(f"{script.name}: a Python file at the root makes a script dataset, which the Viewer refuses")
    card = export_dir / "README.md"
    if not card.is_file():
        return problems + ["README.md: missing (no configs, no dataset_info)"]
    meta, body = split_card(card.read_text(encoding="utf-8"))
    record_path = export_dir / ".perckit_export.json"
    record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else {}
    benchmark = record.get("benchmark")
    _check_meta(meta, benchmark, problems)
    infos = _card_infos(meta)
    configs = meta.get("configs") or []
    if not configs:
        problems.append("README.md: the YAML has no `configs`")
    section = _viewer_section(body)
    has_default = False
    for entry in configs:
        name = entry.get("config_name", "default")
        default = bool(entry.get("default")) or name == "default"
        rec = (record.get("configs") or {}).get(name, {})
        declared = rec.get("viewer", {}).get("viewable") is False
        listed = bool(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", section))
        if declared and not listed:
            problems.append(f"README.md: config `{name}` is not viewable in the record but the card's "
                            f"\"Dataset Viewer\" section does not say so")
        exempt = declared and listed
        files = _parquet_files(export_dir, name, entry.get("data_files"), problems)
        if len(files) > MAX_SPLITS:
            problems.append(f"config `{name}`: {len(files)} splits, more than the Viewer's {MAX_SPLITS}")
        parquet = {s: [p for p in fs if p.suffix == ".parquet"] for s, fs in files.items()}
        if not any(parquet.values()):
            continue  # a files config (e.g. videos + metadata.jsonl): nothing Parquet to check
        info = infos.get(name)
        card_features = None
        if info is None:
            problems.append(f"README.md: config `{name}` has no `dataset_info` entry")
        else:
            card_features = datasets.DatasetInfo._from_yaml_dict(dict(info)).features
            _check_sizes(name, info, problems)
        if default:
            has_default = True
            if card_features is None or not _has_image(card_features):
                problems.append(f"config `{name}` (default): no `Image` column, so the Viewer shows no picture")
        for split, paths in parquet.items():
            groups: list[tuple[int, int]] = []
            for path in paths:
                groups += _check_file(export_dir, path, name, card_features, exempt, problems)
            worst = page_bytes(groups)
            if worst > MAX_PAGE_BYTES and not exempt:
                problems.append(f"config `{name}` split `{split}`: a page of {PAGE_ROWS} rows reads {worst} bytes of "
                                f"row groups, more than the Viewer's {MAX_PAGE_BYTES}")
    if configs and not has_default:
        problems.append("README.md: no config is the default (`default: true`)")
    return problems


def _check_sizes(name: str, info: dict, problems: list[str]) -> None:
    for s in info.get("splits") or []:
        if not isinstance(s.get("num_bytes"), int) or isinstance(s.get("num_bytes"), bool):
            problems.append(f"README.md: config `{name}` split `{s.get('name')}`: `num_bytes` is not an integer "
                            f"({s.get('num_bytes')!r})")
    for key in ("dataset_size",):
        if key in info and (not isinstance(info[key], int) or isinstance(info[key], bool)):
            problems.append(f"README.md: config `{name}`: `{key}` is not an integer ({info[key]!r})")


def _check_file(export_dir: Path, path: Path, config: str, card_features, exempt: bool, problems: list[str]) -> list[tuple[int, int]]:
    rel = path.relative_to(export_dir).as_posix()
    pf = pq.ParquetFile(path)
    md = pf.metadata
    raw = (pf.schema_arrow.metadata or {}).get(b"huggingface")
    if raw is None:
        problems.append(f"{rel}: no `huggingface` schema metadata (the Viewer would guess the types)")
    else:
        features = datasets.Features.from_dict(json.loads(raw)["info"]["features"])
        if card_features is not None and features != card_features:
            problems.append(f"{rel}: the `huggingface` metadata features differ from the card's dataset_info of `{config}`")
    groups = []
    no_offset, no_column = [], []
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        groups.append((rg.num_rows, rg.total_byte_size))
        if rg.total_byte_size > MAX_ROW_GROUP_BYTES and not exempt:
            problems.append(f"{rel}: row group {i} is {rg.total_byte_size} bytes uncompressed, more than "
                            f"{MAX_ROW_GROUP_BYTES}")
        for j in range(rg.num_columns):
            col = rg.column(j)
            if not col.has_offset_index:
                no_offset.append(f"row group {i} `{col.path_in_schema}`")
            stats = col.statistics
            if stats is not None and stats.has_min_max and not col.has_column_index:
                no_column.append(f"row group {i} `{col.path_in_schema}`")
    for kind, chunks in (("offset", no_offset), ("column", no_column)):
        if chunks:
            problems.append(f"{rel}: {len(chunks)} column chunk(s) have no {kind} index (page index): "
                            + ", ".join(chunks[:5]) + (" ..." if len(chunks) > 5 else ""))
    return groups


def check_sample_export(benchmark: str, tmp_path: Path) -> Path:
    """Convert every config of ``benchmark``'s sample release with ``perckit convert`` into one export and fail
    (AssertionError listing the problems) unless it passes :func:`viewer_problems`. Returns the export folder."""
    from perckit.__main__ import main
    from perckit.hf.entrypoints import builder_class
    from perckit.samples import write_release

    release = write_release(benchmark, tmp_path / "release")
    out = tmp_path / "export"
    argv = ["convert", benchmark, "--data-dir", str(release.root), "--output", str(out), "--cache-dir", str(tmp_path / "cache")]
    for config in builder_class(benchmark).BUILDER_CONFIGS:
        argv += ["--config", config.name]
    code = main(argv)
    assert code == 0, f"perckit convert {benchmark} returned {code}"
    problems = viewer_problems(out)
    assert not problems, f"{benchmark}: the export breaks the Viewer's rules:\n" + "\n".join(problems)
    return out
