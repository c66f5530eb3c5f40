"""convert -> Parquet export with a card; load it back with no script (push: tests/test_core_push.py)."""

import json
import math
import warnings
from pathlib import Path

import datasets
import pytest

from perckit.hf.entrypoints import builder_class
from perckit.export import convert

CASES = [
    ("r4d_bench", "all_queries"), ("r4d_bench", "subset_36"), ("r4d_bench", "frames"),
    ("syn4d", "tracking"), ("syn4d", "challenge"),
    ("refcoco_m", "expressions"), ("refcoco_m", "images"),
    ("reason_av_edit", "default"),
    ("m4seg", "default"),
]


@pytest.fixture(scope="module")
def releases(r4d_release, syn4d_release, refcoco_release, reason_av_edit_release, tmp_path_factory):
    from perckit.samples import write_release

    m4seg = write_release("m4seg", tmp_path_factory.mktemp("m4seg_release"))
    return {"r4d_bench": r4d_release.root, "syn4d": syn4d_release.root, "refcoco_m": refcoco_release.root,
            "reason_av_edit": reason_av_edit_release.root, "m4seg": m4seg.root}


def _equal(a, b):
    """Row equality with NaN == NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b


@pytest.fixture(scope="module")
def exports(releases, tmp_path_factory):
    out = tmp_path_factory.mktemp("exports")
    cache = tmp_path_factory.mktemp("cache")
    for name, config in CASES:
        convert(name, releases[name], config, out / name, cache_dir=cache, progress=False, log=lambda m: None)
    return out, cache


@pytest.mark.parametrize("name, config", CASES)
def test_round_trip_same_features_and_rows(exports, releases, name, config, tmp_path):
    """The export read back (perckit.export.load_export: plain load_dataset, then the benchmark's load_back) has the
    builder's features and rows, plus the ``preview`` Image column as the last column."""
    from perckit.export import load_export

    out, cache = exports
    builder = builder_class(name)(config_name=config, data_dir=str(releases[name]), cache_dir=str(cache))
    builder.download_and_prepare()
    splits = list(builder.info.splits)
    split = splits[-1]
    ref = builder.as_dataset(split)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = load_export(out / name, config, split=split, cache_dir=tmp_path)
        for other in splits[:-1]:  # every split of the config is exported
            assert datasets.load_dataset(str(out / name), config, split=other, cache_dir=str(tmp_path)).num_rows == builder.info.splits[other].num_examples
    assert list(got.features)[-1] == "preview" and got.features["preview"] == datasets.Image()
    assert got[0]["preview"].size[0] > 0  # a picture
    got = got.remove_columns("preview")
    assert got.features == ref.features and list(got.features) == list(ref.features)
    assert [str(t) for t in got.data.schema.types] == [str(t) for t in ref.data.schema.types]
    assert got.num_rows == ref.num_rows
    if "image" in ref.features:
        assert got[0]["image"].size == ref[0]["image"].size  # images are still images
    for x, y in zip(got.to_list(), ref.to_list()):
        for column in ("video", "mask_video"):
            if y.get(column) is not None and y[column]["bytes"] is None and y[column]["path"]:
                vx, vy = x.pop(column), y.pop(column)
                assert vx["bytes"] == Path(vy["path"]).read_bytes()  # the path-only mp4 is embedded in the export
        assert _equal(x, y)


def test_no_preview_leaves_the_picture_out(r4d_release, tmp_path):
    convert("r4d_bench", r4d_release.root, "all_queries", tmp_path / "e", cache_dir=tmp_path / "c", progress=False,
            log=lambda m: None, preview=False)
    ds = datasets.load_dataset(str(tmp_path / "e"), "all_queries", split="test", cache_dir=str(tmp_path / "c2"))
    assert "preview" not in ds.features
    assert json.loads((tmp_path / "e" / ".perckit_export.json").read_text())["configs"]["all_queries"]["preview"] is None


def test_card_lists_every_config_and_keeps_the_first(exports):
    out, _ = exports
    card = (out / "r4d_bench" / "README.md").read_text()
    import yaml

    meta = yaml.safe_load(card.split("---")[1])
    assert {c["config_name"] for c in meta["configs"]} == {"all_queries", "subset_36", "frames"}
    default = [c for c in meta["configs"] if c.get("default")]
    assert default[0]["config_name"] == "all_queries" and default[0]["data_files"][0]["path"] == "data/test-*"
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert infos["all_queries"]["splits"][0]["num_examples"] == 89 and infos["all_queries"]["splits"][0]["num_bytes"] > 0
    assert "mask_temporal" in card and "R4D-Bench" in card  # generated from the builder's information
    assert sorted(p.name for p in (out / "r4d_bench").iterdir() if p.is_dir()) == ["data", "frames", "subset_36"]


def test_shards_respect_the_size_limit(r4d_release, tmp_path):
    convert("r4d_bench", r4d_release.root, "frames", tmp_path / "e", max_shard_size="20KB", cache_dir=tmp_path / "c", progress=False, log=lambda m: None)
    shards = sorted((tmp_path / "e" / "frames").glob("test-*.parquet"))
    assert len(shards) > 1 and shards[0].name.endswith(f"-of-{len(shards):05d}.parquet")
    ds = datasets.load_dataset(str(tmp_path / "e"), "frames", split="test", cache_dir=str(tmp_path / "c2"))
    assert ds.num_rows == 48


def test_interrupted_convert_keeps_the_previous_export(r4d_release, tmp_path, monkeypatch):
    from perckit import export

    out = tmp_path / "e"
    convert("r4d_bench", r4d_release.root, "all_queries", out, cache_dir=tmp_path / "c", progress=False, log=lambda m: None)
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))

    def boom(*a, **k):
        raise KeyboardInterrupt("simulated interruption")

    monkeypatch.setattr(export, "write_card", boom)
    with pytest.raises(KeyboardInterrupt):
        convert("r4d_bench", r4d_release.root, "frames", out, cache_dir=tmp_path / "c", progress=False, log=lambda m: None)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".e.")] == []  # no leftovers
    monkeypatch.undo()
    convert("r4d_bench", r4d_release.root, "frames", out, cache_dir=tmp_path / "c", progress=False, log=lambda m: None)
    assert (out / "frames").is_dir() and (out / "data").is_dir()


def test_cli_convert_and_evaluate_from_files(r4d_release, tmp_path, capsys):
    from perckit.__main__ import main

    out = tmp_path / "export"
    assert main(["convert", "r4d_bench", "--data-dir", str(r4d_release.root), "--config", "all_queries", "--output", str(out), "--cache-dir", str(tmp_path / "c")]) == 0
    rows = datasets.load_dataset(str(out), "all_queries", split="test", cache_dir=str(tmp_path / "c2"))
    preds = tmp_path / "preds.jsonl"
    preds.write_text("\n".join(json.dumps({"query_id": r["query_id"], "frames": [{"frame_id": f["frame_id"], "mask": f["mask"]} for f in r["frames"]]}) for r in rows) + "\n")
    report = tmp_path / "report.json"
    assert main(["evaluate", "mask_temporal", "--predictions", str(preds), "--references", str(out), "--dataset-config", "all_queries",
                 "--option", "iou_threshold=0.7", "--output", str(report)]) == 0
    assert json.loads(report.read_text())["miou"] == 1.0
    assert main(["evaluate", "nope", "--predictions", str(preds), "--references", str(out)]) == 2
    assert "unknown metric" in capsys.readouterr().err
