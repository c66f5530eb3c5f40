"""perckit.export.card: the export's README carries the builder card's metadata, configs and dataset_info that
datasets reads back, and a body for a Hub reader (issue 18). Records are built by hand (v1 and v2 shapes)."""

from __future__ import annotations

import io
import importlib
import re

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from helpers.common import REPO

from perckit.hf import benchmark as benchmarks
from perckit.export import card as export_card
from perckit.hf.entrypoints import builder_class
from perckit.errors import InputNotFoundError, ReleaseFormatError

NAMES = list(benchmarks.NAMES)
OTHER = ["r4d_bench", "syn4d", "reason_av_edit"]


def _front_matter(text: str) -> tuple[dict, str]:
    m = re.match(r"\A---\n(.*?)\n---\n(.*)\Z", text, re.S)
    assert m, text[:200]
    return yaml.safe_load(m.group(1)), m.group(2)


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


def _features(preview: bool) -> datasets.Features:
    f = {"id": datasets.Value("string"), "mask": {"size": [datasets.Value("int32")], "counts": datasets.Value("string")},
         "frames": [{"frame_id": datasets.Value("int32"), "mask": {"size": [datasets.Value("int32")], "counts": datasets.Value("string")}}]}
    if preview:
        f["preview"] = datasets.Image()
    return datasets.Features(f)


def _record(benchmark: str, version: int = 2, hidden: str | None = None, description: str | None = None) -> dict:
    """A record of every builder config of ``benchmark``: one split each, float num_bytes in version 1."""
    cls = builder_class(benchmark)
    split = benchmarks.get(benchmark).splits[-1]
    configs = {}
    for c in cls.BUILDER_CONFIGS:
        default = c.name == cls.DEFAULT_CONFIG_NAME
        entry = {"default": default, "dir": "data" if default else c.name,
                 "features": _features(default and version == 2).to_dict(),
                 "splits": [{"name": split, "num_examples": 2, "num_bytes": 1234.7 if version == 1 else 1234,
                             "files": [f"{'data' if default else c.name}/{split}-00000-of-00001.parquet"]}]}
        if version == 2:
            entry["kind"] = "parquet"
            entry["preview"] = "preview" if default else None
            entry["viewer"] = {"viewable": c.name != hidden, "reason": "" if c.name != hidden else "a row holds 32 depth frames (400 MB)"}
            entry["description"] = description if description is not None and default else c.description
        configs[c.name] = entry
    state = {"benchmark": benchmark, "configs": configs}
    if version == 2:
        state.update(format="perckit-export", version=2)
    return state


def _info(benchmark: str) -> datasets.DatasetInfo:
    return datasets.DatasetInfo(description=f"{benchmark} rows", citation="@misc{x}", license="see the card")


def _write(tmp_path, benchmark, state) -> tuple[dict, str]:
    export_card.write_card(tmp_path, benchmark, _info(benchmark), state)
    return _front_matter((tmp_path / "README.md").read_text(encoding="utf-8"))


def _builder_yaml(benchmark: str) -> dict:
    text = (REPO / "builders" / benchmark / "README.md").read_text(encoding="utf-8")
    return _front_matter(text)[0]


@pytest.mark.parametrize("benchmark", NAMES)
def test_builder_card_metadata_keeps_the_listed_keys(benchmark):
    meta = export_card.builder_card_metadata(benchmark)
    raw = _builder_yaml(benchmark)
    assert list(meta) == [k for k in export_card.CARD_KEYS if k in raw]
    assert meta == {k: raw[k] for k in meta}
    for key in ("pretty_name", "license", "task_categories", "tags", "size_categories"):
        assert meta[key], key
    if meta["license"] == "other":
        assert meta["license_name"] and meta["license_link"].startswith("https://huggingface.co/datasets/")
    assert (meta["license"] == "other") == (benchmark in OTHER)


def test_builder_card_licence_facts():
    assert export_card.builder_card_metadata("reason_av_edit")["license_name"] == "research-only"
    assert export_card.builder_card_metadata("reason_av_edit")["license_link"] == \
        "https://huggingface.co/datasets/bigfacing/ReasonAVEdit-Bench/blob/main/LICENSE"
    for name, repo in (("r4d_bench", "LiYacheng/r4d-bench-qa"), ("syn4d", "Syn4D/Syn4D_Benchmark")):  # no licence file
        assert export_card.builder_card_metadata(name)["license_link"] == f"https://huggingface.co/datasets/{repo}"


def test_builder_card_errors_name_the_file(tmp_path, monkeypatch):
    card = tmp_path / "README.md"
    monkeypatch.setattr(export_card, "builder_card_path", lambda b: card)
    with pytest.raises(InputNotFoundError, match=re.escape(str(card))):
        export_card.builder_card_metadata("syn4d")
    for text, what in [("# no front matter\n", "front matter"), ("---\nlicense: [unclosed\n---\n", "YAML error"),
                       ("---\n- a list\n---\n", "mapping"), ("---\npretty_name: x\n---\n", "missing"),
                       ("---\npretty_name: x\nlicense: other\ntask_categories: [a]\ntags: [b]\nsize_categories: [n<1K]\n---\n", "license_name"),
                       ("---\npretty_name: x\nlicense: other\nlicense_name: y\nlicense_link: LICENSE\ntask_categories: [a]\n"
                        "tags: [b]\nsize_categories: [n<1K]\n---\n", "absolute")]:
        card.write_text(text, encoding="utf-8")
        with pytest.raises(ReleaseFormatError, match=re.escape(str(card))) as e:
            export_card.builder_card_metadata("syn4d")
        assert what in str(e.value)


@pytest.mark.parametrize("benchmark", NAMES)
@pytest.mark.parametrize("version", [1, 2])
def test_card_yaml(benchmark, version, tmp_path):
    state = _record(benchmark, version)
    meta, _ = _write(tmp_path, benchmark, state)
    builder = export_card.builder_card_metadata(benchmark)
    for key, value in builder.items():
        assert meta[key] == value, key
    if benchmark in OTHER:
        assert meta["license"] == "other" and meta["license_name"] and meta["license_link"].startswith("https://")
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert set(configs) == set(state["configs"])
    for name, c in state["configs"].items():
        split = c["splits"][0]["name"]
        assert configs[name]["data_files"] == [{"split": split, "path": f"{c['dir']}/{split}-*"}]
        assert configs[name].get("default", False) is c["default"]
    infos = meta["dataset_info"] if isinstance(meta["dataset_info"], list) else [meta["dataset_info"]]
    assert {i.get("config_name", "default") for i in infos} == set(state["configs"])
    for i in infos:
        assert type(i["dataset_size"]) is int and i["dataset_size"] == 1234 + (version == 1)  # 1234.7 rounds to 1235
        assert all(type(s["num_bytes"]) is int and type(s["num_examples"]) is int for s in i["splits"])
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCardData

    back = DatasetInfosDict.from_dataset_card_data(DatasetCardData(**meta))
    for name, c in state["configs"].items():
        assert back[name].features == datasets.Features.from_dict(c["features"])


@pytest.mark.parametrize("benchmark", NAMES)
def test_datasets_loads_the_folder_with_the_card_features(benchmark, tmp_path):
    """Parquet written without the huggingface schema metadata: the types come from the card alone."""
    cls = builder_class(benchmark)
    state = _record(benchmark)
    split = benchmarks.get(benchmark).splits[-1]
    rle = {"size": [1, 4], "counts": "022"}
    png = _png()
    for name, c in state["configs"].items():
        features = datasets.Features.from_dict(c["features"])
        rows = {"id": ["a", "b"], "mask": [rle, rle], "frames": [[{"frame_id": 1, "mask": rle}], []]}
        if "preview" in features:
            rows["preview"] = [{"bytes": png, "path": None}] * 2
        table = datasets.Dataset.from_dict(rows, features=features).data.table.replace_schema_metadata(None)
        (tmp_path / c["dir"]).mkdir()
        pq.write_table(table, tmp_path / c["splits"][0]["files"][0])
    export_card.write_card(tmp_path, benchmark, _info(benchmark), state)
    for name, c in state["configs"].items():
        ds = datasets.load_dataset(str(tmp_path), name, split=split, cache_dir=str(tmp_path / ".cache"))
        assert ds.features == datasets.Features.from_dict(c["features"]), name
        assert ds.num_rows == 2 and ds[0]["mask"] == rle
        if "preview" in ds.features:
            assert ds[0]["preview"].size == (4, 3)  # an Image, decoded
    got = datasets.load_dataset(str(tmp_path), split=split, cache_dir=str(tmp_path / ".cache"))  # no name: the default
    assert got.features == datasets.Features.from_dict(state["configs"][cls.DEFAULT_CONFIG_NAME]["features"])


@pytest.mark.parametrize("benchmark", NAMES)
def test_card_body_for_a_hub_reader(benchmark, tmp_path):
    _, body = _write(tmp_path, benchmark, _record(benchmark))
    bench = benchmarks.get(benchmark)
    for heading in ("# " + export_card.builder_card_metadata(benchmark)["pretty_name"], "## What the benchmark is",
                    "## Configs", "## The preview column", "## Load with `datasets`", "## Masks (COCO RLE)",
                    "## Score with perckit", "## Citation", "## Licence"):
        assert f"\n{heading}\n" in f"\n{body}", heading
    about = body.split("## What the benchmark is\n", 1)[1].split("\n## ", 1)[0]
    assert 200 < len(about) < 4000  # one section, not the card
    assert "## Contents" not in body and "## Config options" not in body
    assert "](../" not in body and "](#" not in body  # links into the perckit checkout are dropped
    for c in builder_class(benchmark).BUILDER_CONFIGS:
        assert re.search(rf"^\| `{c.name}`( \(default\))? \| [^|]*{re.escape(c.description)}", body, re.M), c.name
        assert f'load_dataset("<this repo>", "{c.name}", split="{bench.splits[-1]}")' in body
    for m in bench.metrics:
        fn = m.reference.__name__
        assert f"perckit.load_metric(\"{m.name}\"" in body and f'evaluate.load("metrics/{m.name}"' in body
        module = re.search(rf"^from (perckit[\w.]*) import {fn}$", body, re.M).group(1)  # the snippet's import runs
        assert getattr(importlib.import_module(module), fn).__name__ == fn
    assert "mask_utils.decode(" in body and "rle.decode(rle.validate(m))" in body and "`frames[].mask`" in body
    assert '"_type"' not in body and '"dtype"' not in body and "### Features of" not in body  # no features JSON dump
    assert "## Dataset Viewer" not in body  # every config viewable
    assert body.count(bench.hub_repo) >= 1


def test_viewer_section_only_for_hidden_configs(tmp_path):
    _, body = _write(tmp_path, "syn4d", _record("syn4d", hidden="challenge"))
    section = body.split("## Dataset Viewer\n", 1)[1].split("\n## ", 1)[0]
    assert "- `challenge`: a row holds 32 depth frames (400 MB)" in section and "`tracking`" not in section
    _, v1 = _write(tmp_path, "syn4d", _record("syn4d", version=1))
    assert "## Dataset Viewer" not in v1 and "## The preview column" not in v1  # a v1 record has neither


def test_untrusted_description_is_capped_and_escaped(tmp_path):
    text = "rows | with <script>alert(1)</script>\n\n# heading " + "x" * 5000
    _, body = _write(tmp_path, "refcoco_m", _record("refcoco_m", description=text))
    row = next(line for line in body.splitlines() if line.startswith("| `expressions` (default) |"))
    assert len(row) < export_card.MAX_FIELD_CHARS + 200 and "<script>" not in body and "&lt;script&gt;" in row
    assert row.count(" | ") == 3 and "rows \\| with" in row  # the pipe cannot open a new cell
    assert "\n# heading" not in body


def test_a_child_config_is_a_parquet_config_joined_back_by_load_export(tmp_path):
    state = _record("reason_av_edit")
    state["configs"]["videos"] = {
        "default": False, "dir": "videos", "kind": "parquet", "parent": "default",
        "features": {"sample_id": {"dtype": "string", "_type": "Value"}, "video": {"_type": "Video"}},
        "description": "the source and mask videos of each sample",
        "splits": [{"name": "test", "num_examples": 2, "num_bytes": 99, "files": ["videos/test-00000-of-00001.parquet"]}]}
    meta, body = _write(tmp_path, "reason_av_edit", state)
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert configs["videos"]["data_files"] == [{"split": "test", "path": "videos/test-*"}]
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert datasets.Features._from_yaml_list(infos["videos"]["features"])["video"] == datasets.Video()
    assert "| `videos` | the source and mask videos of each sample | test (2) | `videos/` |" in body
    assert 'load_dataset("<this repo>", "videos", split="test")' in body
    assert "`videos` holds media of `default` rows" in body
    assert 'ds = load_export(local, "default", split="test", benchmark="reason_av_edit")' in body


def test_card_text_is_deterministic(tmp_path):
    state = _record("m4seg")
    a = export_card.card_text("m4seg", _info("m4seg"), state)
    b = export_card.card_text("m4seg", _info("m4seg"), _record("m4seg"))
    assert a == b
    export_card.write_card(tmp_path, "m4seg", _info("m4seg"), state)
    assert (tmp_path / "README.md").read_text(encoding="utf-8").strip() == a.strip()


def test_hostile_features_are_a_format_error(tmp_path):
    state = _record("refcoco_m")
    state["configs"]["images"]["features"] = {"x": {"_type": "NoSuchFeature"}}
    with pytest.raises(ReleaseFormatError, match=r"configs\['images'\]: 'features'"):
        export_card.write_card(tmp_path, "refcoco_m", _info("refcoco_m"), state)


def test_rle_columns_and_arrow_types():
    assert export_card.rle_columns(_features(True)) == ["mask", "frames[].mask"]
    table = pa.table({"a": [1]})  # a plain table has no masks
    assert export_card.rle_columns(datasets.Features.from_arrow_schema(table.schema)) == []
