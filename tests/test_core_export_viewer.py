"""The Viewer-rules checker (tests/helpers/viewer_rules.py) on exports crafted by hand with pyarrow and a YAML card:
the good one passes, and each bad one fails on its own rule (the rules and where the Viewer states them are in the
helper's docstring)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from helpers import viewer_rules
from helpers.viewer_rules import page_bytes, viewer_problems
from PIL import Image

FEATURES = datasets.Features({"id": datasets.Value("string"), "n": datasets.Value("int64"), "preview": datasets.Image()})


def _png(value: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((4, 4, 3), value, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def _table(rows: int, features: datasets.Features = FEATURES) -> pa.Table:
    data = {"id": [f"r{i}" for i in range(rows)], "n": list(range(rows)), "preview": [{"bytes": _png(i % 250), "path": None} for i in range(rows)]}
    return pa.table({k: data[k] for k in features}, schema=features.arrow_schema)


def _write(path: Path, table: pa.Table, row_group_size: int = 10, page_index: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(str(path), table.schema, write_page_index=page_index) as w:
        w.write_table(table, row_group_size=row_group_size)


def _card(root: Path, configs: dict[str, dict], meta: dict | None = None, body: str = "# An export\n",
          sizes: dict | None = None) -> None:
    """README.md: ``configs`` {name: {"dir", "splits": {split: rows}, "features", "default"}}."""
    yml = {"pretty_name": "A benchmark", "license": "cc-by-4.0", "language": ["en", "zh"], "task_categories": ["image-segmentation"],
           "tags": ["coco-rle"], "size_categories": ["n<1K"], "configs": [], "dataset_info": []}
    for name, c in configs.items():
        entry = {"config_name": name, "data_files": [{"split": s, "path": f"{c['dir']}/{s}-*"} for s in c["splits"]]}
        if c.get("default"):
            entry["default"] = True
        yml["configs"].append(entry)
        info = datasets.DatasetInfo(features=c.get("features", FEATURES), config_name=name)._to_yaml_dict()
        info["splits"] = [{"name": s, "num_bytes": (sizes or {}).get(s, 1000), "num_examples": r} for s, r in c["splits"].items()]
        info["dataset_size"] = 1000 * len(c["splits"])
        yml["dataset_info"].append(info)
    yml.update(meta or {})
    yml = {k: v for k, v in yml.items() if v is not None}
    (root / "README.md").write_text("---\n" + yaml.safe_dump(yml, sort_keys=False) + "---\n\n" + body, encoding="utf-8")


def _record(root: Path, viewer: dict[str, dict] | None = None) -> None:
    configs = {name: {"viewer": v} for name, v in (viewer or {}).items()}
    (root / ".perckit_export.json").write_text(json.dumps({"benchmark": "r4d_bench", "configs": configs}), encoding="utf-8")


def good_export(root: Path) -> Path:
    """A default config (two splits, two shards in one) and a second config without a picture."""
    _write(root / "data" / "test-00000-of-00002.parquet", _table(30))
    _write(root / "data" / "test-00001-of-00002.parquet", _table(25))
    _write(root / "data" / "train-00000-of-00001.parquet", _table(12))
    plain = datasets.Features({"id": datasets.Value("string"), "n": datasets.Value("int64")})
    _write(root / "frames" / "test-00000-of-00001.parquet", _table(5, plain))
    _card(root, {"default": {"dir": "data", "splits": {"test": 55, "train": 12}, "default": True},
                 "frames": {"dir": "frames", "splits": {"test": 5}, "features": plain}})
    _record(root)
    return root


def _only(problems: list[str], *words: str) -> None:
    """There are problems, and every one of them mentions all of ``words``."""
    assert problems, "the bad export passed the checker"
    for p in problems:
        assert all(w in p for w in words), f"unexpected problem: {p!r} (expected {words})"


def test_a_good_export_passes(tmp_path):
    assert viewer_problems(good_export(tmp_path)) == []


def test_page_bytes_by_hand():
    """Groups of 50, 100, 30, 200 rows and 10, 20, 5, 7 bytes: rows 149-248 overlap the last three, 32 bytes."""
    assert page_bytes([(50, 10), (100, 20), (30, 5), (200, 7)]) == 32
    assert page_bytes([(1, 3)] * 250) == 300


def test_a_script_at_the_root_is_refused(tmp_path):
    (good_export(tmp_path) / "bench.py").write_text("import datasets\n")
    _only(viewer_problems(tmp_path), "bench.py", "script")


def test_parquet_without_huggingface_metadata(tmp_path):
    good_export(tmp_path)
    table = _table(12)
    _write(tmp_path / "data" / "train-00000-of-00001.parquet", table.replace_schema_metadata(None))
    _only(viewer_problems(tmp_path), "data/train-00000-of-00001.parquet", "huggingface")


def test_parquet_features_that_differ_from_the_card(tmp_path):
    good_export(tmp_path)
    other = datasets.Features({"id": datasets.Value("string"), "n": datasets.Value("int32"), "preview": datasets.Image()})
    _write(tmp_path / "data" / "train-00000-of-00001.parquet", _table(12, other))
    _only(viewer_problems(tmp_path), "data/train-00000-of-00001.parquet", "differ", "`default`")


def test_no_page_index(tmp_path):
    good_export(tmp_path)
    _write(tmp_path / "frames" / "test-00000-of-00001.parquet", _table(5, datasets.Features({"id": datasets.Value("string"), "n": datasets.Value("int64")})), page_index=False)
    _only(viewer_problems(tmp_path), "frames/test-00000-of-00001.parquet", "index")


def test_a_row_group_over_the_limit(tmp_path, monkeypatch):
    good_export(tmp_path)
    monkeypatch.setattr(viewer_rules, "MAX_PAGE_BYTES", 10**12)
    size = pq.read_metadata(str(tmp_path / "data" / "train-00000-of-00001.parquet")).row_group(0).total_byte_size
    monkeypatch.setattr(viewer_rules, "MAX_ROW_GROUP_BYTES", size - 1)
    _only(viewer_problems(tmp_path), "row group", "more than")


def test_a_page_over_the_budget_across_shards(tmp_path, monkeypatch):
    """Split `test` of the default config: 30 + 25 rows in row groups of 10 (the last of each shard shorter): a page
    reads up to eleven row groups; the budget is one byte under what the worst page reads."""
    good_export(tmp_path)
    groups = []
    for f in ("test-00000-of-00002.parquet", "test-00001-of-00002.parquet"):
        md = pq.read_metadata(str(tmp_path / "data" / f))
        groups += [(md.row_group(i).num_rows, md.row_group(i).total_byte_size) for i in range(md.num_row_groups)]
    assert [r for r, _ in groups] == [10, 10, 10, 10, 10, 5]
    worst = page_bytes(groups)
    assert worst == sum(b for _, b in groups)  # 55 rows: one page reads them all
    monkeypatch.setattr(viewer_rules, "MAX_PAGE_BYTES", worst - 1)
    _only(viewer_problems(tmp_path), "`default` split `test`", "page of 100 rows")


def test_a_config_declared_not_viewable_is_exempt_from_the_budgets_only_when_the_card_says_so(tmp_path, monkeypatch):
    good_export(tmp_path)
    monkeypatch.setattr(viewer_rules, "MAX_ROW_GROUP_BYTES", 1)
    monkeypatch.setattr(viewer_rules, "MAX_PAGE_BYTES", 1)
    plain = datasets.Features({"id": datasets.Value("string"), "n": datasets.Value("int64")})
    configs = {"default": {"dir": "data", "splits": {"test": 55, "train": 12}, "default": True},
               "frames": {"dir": "frames", "splits": {"test": 5}, "features": plain}}
    _record(tmp_path, {"frames": {"viewable": False, "reason": "rows of 100 MB"}, "default": {"viewable": False, "reason": "x"}})
    said = "# An export\n\n## Dataset Viewer\n\n- `frames` and `default`: rows too large to page.\n\n## Next\n"
    _card(tmp_path, configs, body=said)
    assert viewer_problems(tmp_path) == []
    _card(tmp_path, configs, body="# An export\n\n## Dataset Viewer\n\n- `default`: too large.\n\n## Next\n\n`frames` ...\n")
    problems = viewer_problems(tmp_path)
    assert problems and all("frames" in p for p in problems)
    assert any("does not say so" in p for p in problems) and any("row group" in p for p in problems)


def test_more_than_30_splits(tmp_path):
    good_export(tmp_path)
    splits = {f"s{i}": 3 for i in range(31)}
    for s in splits:
        _write(tmp_path / "many" / f"{s}-00000-of-00001.parquet", _table(3))
    _card(tmp_path, {"default": {"dir": "data", "splits": {"test": 55, "train": 12}, "default": True},
                     "many": {"dir": "many", "splits": splits}})
    _only(viewer_problems(tmp_path), "`many`", "31 splits")


@pytest.mark.parametrize("key", ["license", "pretty_name", "task_categories", "tags", "size_categories", "language"])
def test_a_missing_card_key(tmp_path, key):
    good_export(tmp_path)
    _card(tmp_path, {"default": {"dir": "data", "splits": {"test": 55, "train": 12}, "default": True}}, meta={key: None})
    _only(viewer_problems(tmp_path), "README.md", f"`{key}`")


def test_language_is_required_only_where_the_builder_card_has_one(tmp_path):
    good_export(tmp_path)
    _card(tmp_path, {"default": {"dir": "data", "splits": {"test": 55, "train": 12}, "default": True}}, meta={"language": None})
    (tmp_path / ".perckit_export.json").write_text(json.dumps({"benchmark": "no_such_benchmark", "configs": {}}))
    assert viewer_problems(tmp_path) == []


@pytest.mark.parametrize("missing", ["license_name", "license_link"])
def test_licence_other_needs_its_name_and_link(tmp_path, missing):
    good_export(tmp_path)
    meta = {"license": "other", "license_name": "ask-the-maintainers", "license_link": "https://example.org/licence"}
    meta[missing] = None
    _card(tmp_path, {"default": {"dir": "data", "splits": {"test": 55, "train": 12}, "default": True}}, meta=meta)
    _only(viewer_problems(tmp_path), "license: other", f"`{missing}`")


def test_num_bytes_must_be_integers(tmp_path):
    good_export(tmp_path)
    _card(tmp_path, {"default": {"dir": "data", "splits": {"test": 55, "train": 12}, "default": True}}, sizes={"test": 1234.5})
    _only(viewer_problems(tmp_path), "`default` split `test`", "num_bytes")


def test_the_default_config_needs_an_image_column(tmp_path):
    plain = datasets.Features({"id": datasets.Value("string"), "n": datasets.Value("int64")})
    _write(tmp_path / "data" / "test-00000-of-00001.parquet", _table(5, plain))
    _card(tmp_path, {"default": {"dir": "data", "splits": {"test": 5}, "default": True, "features": plain}})
    _record(tmp_path)
    _only(viewer_problems(tmp_path), "`default`", "Image")


def test_a_files_config_is_not_read_as_parquet(tmp_path):
    """ReasonAVEdit's videos: files plus metadata.jsonl, the Hub's video-dataset layout; only the split count applies."""
    good_export(tmp_path)
    (tmp_path / "videos" / "test").mkdir(parents=True)
    (tmp_path / "videos" / "test" / "metadata.jsonl").write_text('{"file_name": "a.mp4"}\n')
    (tmp_path / "videos" / "test" / "a.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
    text = (tmp_path / "README.md").read_text()
    meta, body = viewer_rules.split_card(text)
    meta["configs"].append({"config_name": "videos", "data_files": [{"split": "test", "path": "videos/test/*"}]})
    (tmp_path / "README.md").write_text("---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n\n" + body)
    assert viewer_problems(tmp_path) == []
