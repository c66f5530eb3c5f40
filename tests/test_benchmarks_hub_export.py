"""Issue 18's acceptance: ``perckit convert`` of every sample release gives a Hub dataset the Dataset Viewer can show.

The rules are checked by ``helpers.viewer_rules`` (written from the dataset-viewer source, reading the export with
pyarrow and the card's YAML only, not perckit's writer): the card's metadata and licence, the Parquet
``huggingface`` metadata equal to the card's features, row groups and 100-row pages within the Viewer's budget, a
page index on every column chunk, at most 30 splits, and an ``Image`` column in the default config.
"""

from __future__ import annotations

import json

import datasets
import pyarrow.parquet as pq
import pytest
from helpers.viewer_rules import check_sample_export, split_card, viewer_problems

from perckit.hf import benchmark as benchmarks
from perckit.hf.entrypoints import builder_class

NAMES = list(benchmarks.NAMES)


@pytest.mark.parametrize("benchmark", NAMES)
def test_the_sample_export_follows_the_viewer_rules(benchmark, tmp_path):
    out = check_sample_export(benchmark, tmp_path)
    meta, body = split_card((out / "README.md").read_text(encoding="utf-8"))
    default = builder_class(benchmark).DEFAULT_CONFIG_NAME
    (entry,) = [c for c in meta["configs"] if c.get("default")]
    assert entry["config_name"] == default and entry["data_files"][0]["path"].startswith("data/")
    infos = meta["dataset_info"] if isinstance(meta["dataset_info"], list) else [meta["dataset_info"]]
    features = {i.get("config_name", "default"): datasets.Features._from_yaml_list(i["features"]) for i in infos}
    assert features[default]["preview"] == datasets.Image()  # a picture in the default config
    shard = sorted((out / "data").glob("*.parquet"))[0]
    cells = pq.read_table(shard, columns=["preview"]).column("preview").to_pylist()
    assert all(c["bytes"] and len(c["bytes"]) <= 80_000 for c in cells)  # small pictures, one per row
    record = json.loads((out / ".perckit_export.json").read_text())
    assert {n for n, c in record["configs"].items() if c.get("parent") is None} == {c.name for c in builder_class(benchmark).BUILDER_CONFIGS}
    assert all(c["viewer"]["viewable"] for c in record["configs"].values())  # sample rows are small
    assert "## Dataset Viewer" not in body
    assert "load_dataset(" in body and "perckit" in body


def test_reason_av_edit_plays_its_audio_and_video(tmp_path):
    out = check_sample_export("reason_av_edit", tmp_path)
    meta, _ = split_card((out / "README.md").read_text(encoding="utf-8"))
    infos = {i["config_name"]: datasets.Features._from_yaml_list(i["features"]) for i in meta["dataset_info"]}
    assert infos["default"]["audio"] == datasets.Audio() and infos["default"]["reason_audio"] == datasets.Audio()
    assert "video" not in infos["default"] and "mask_video" not in infos["default"]
    assert isinstance(infos["videos"]["video"], datasets.Video) and isinstance(infos["videos"]["mask_video"], datasets.Video)
    videos = datasets.load_dataset(str(out), "videos", split="test", cache_dir=str(tmp_path / "c"))
    videos = videos.cast_column("video", datasets.Video(decode=False))
    assert all(v is None or v["bytes"] for v in videos["video"])  # the bytes are in the Parquet: the Viewer plays them


@pytest.mark.slow
def test_a_full_size_syn4d_challenge_is_marked_not_viewable(tmp_path):
    """A real ``challenge`` row holds 32 depth frames of 1280x720 float32 (118 MB): no 100-row page fits the Viewer's
    300 MB budget, so the export marks the config not viewable and the card says so; the default config stays viewable."""
    from perckit.export import convert
    from perckit.samples import write_release

    release = write_release("syn4d", tmp_path / "release", variants=("og",), scenes=("antiquity",), cameras=(0,),
                            depth_hw=(720, 1280), video_hw=(72, 128))
    out = tmp_path / "export"
    for config in ("tracking", "challenge"):
        convert("syn4d", release.root, config, out, cache_dir=tmp_path / "c", progress=False, log=lambda m: None)
    record = json.loads((out / ".perckit_export.json").read_text())
    challenge = record["configs"]["challenge"]
    assert challenge["viewer"]["viewable"] is False and "MB" in challenge["viewer"]["reason"]
    assert challenge["splits"][0]["max_row_bytes"] > 100_000_000
    assert record["configs"]["tracking"]["viewer"]["viewable"] is True
    _, body = split_card((out / "README.md").read_text(encoding="utf-8"))
    section = body.split("## Dataset Viewer", 1)[1]
    assert "`challenge`" in section.split("\n## ", 1)[0]
    assert viewer_problems(out) == []  # exempt from the budgets only because record and card both say so


def test_a_hub_copy_without_the_record_loads_back(tmp_path):
    """What ``snapshot_download`` gives (``perckit push`` uploads the card and the shards, not the local record):
    ``load_export(..., benchmark=...)`` still joins ReasonAVEdit's videos back into the builder's rows."""
    import shutil

    from perckit.export import load_export

    out = check_sample_export("reason_av_edit", tmp_path)
    copy = tmp_path / "hub_copy"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns(".perckit_export.json"))
    local = load_export(out, "default", split="test", cache_dir=tmp_path / "c1")
    hub = load_export(copy, "default", split="test", cache_dir=tmp_path / "c2", benchmark="reason_av_edit")
    assert hub.features == local.features and "video" in hub.features
    assert hub.to_list() == local.to_list()
