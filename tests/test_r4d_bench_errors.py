"""Bad release input gets an error naming the file and what was expected; the Hub path, offline and mocked."""

import json
import shutil

import pytest
from helpers.fake_hub import fake_snapshot_download

from perckit.hf import hub
from perckit.hf.entrypoints import build_split
from perckit.errors import OptionError, ReleaseFormatError, ReleaseNotFoundError, RLEError
from perckit.r4d_bench import builder as r4d_builder
from perckit.r4d_bench import layout as r4d_layout
from perckit.r4d_bench import read as r4d_read
from perckit.r4d_bench import rows as r4d_rows

GT = "scripts/new_predictions_ground_truth_all_queries.json"


@pytest.fixture
def rel(r4d_release, tmp_path):
    root = tmp_path / "release"
    shutil.copytree(r4d_release.root, root)
    return root


def _edit_gt(root, fn, name=GT):
    data = json.loads((root / name).read_text())
    fn(data)
    (root / name).write_text(json.dumps(data))


def test_missing_release_folder(tmp_path):
    with pytest.raises(ReleaseNotFoundError, match="does not exist.*data_dir"):
        build_split("r4d_bench", "all_queries", tmp_path / "nope", tmp_path / "c")


def test_missing_required_folder_and_file(rel, tmp_path):
    (rel / GT).unlink()
    with pytest.raises(ReleaseNotFoundError, match="new_predictions_ground_truth_all_queries.json"):
        build_split("r4d_bench", "all_queries", rel, tmp_path / "c")
    shutil.rmtree(rel / "evaluation")
    with pytest.raises(ValueError, match="evaluation/"):  # a ValueError too, as the spec asks
        build_split("r4d_bench", "all_queries", rel, tmp_path / "c")


def test_malformed_json(rel, tmp_path):
    (rel / GT).write_text('[{"query_id": "x", ')
    with pytest.raises(ReleaseFormatError, match="new_predictions_ground_truth_all_queries.json.*valid JSON"):
        r4d_read.open_query_release(rel)


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda d: d[0].pop("ground_truth"), "americano_q1.*'ground_truth'"),
        (lambda d: d[0]["ground_truth"]["frames"][0].update(frame_id="frame-one"), "frame_id: expected an integer.*'frame-one'"),
        (lambda d: d.append(dict(d[0])), "duplicate query_id 'americano_q1'"),
        (lambda d: d[0]["ground_truth"]["frames"].append(dict(d[0]["ground_truth"]["frames"][0])), "duplicate frame_id"),
        (lambda d: d if d[0].__setitem__("query_id", 5) else d, "string 'query_id'"),
    ],
)
def test_bad_dense_gt_entries(rel, edit, match):
    _edit_gt(rel, edit)
    with pytest.raises(ReleaseFormatError, match=match):
        r4d_read.open_query_release(rel)


def test_string_frame_ids_of_digits_are_accepted(rel):
    _edit_gt(rel, lambda d: d[0]["ground_truth"]["frames"][0].update(frame_id=str(d[0]["ground_truth"]["frames"][0]["frame_id"])))
    assert r4d_read.open_query_release(rel).entries[0]["ground_truth"]["frames"][0]["frame_id"] == 0


def test_object_containers_are_accepted(rel):
    meta = json.loads((rel / r4d_layout.QUERIES_META).read_text())
    (rel / r4d_layout.QUERIES_META).write_text(json.dumps({"queries": meta}))
    gt = json.loads((rel / GT).read_text())
    (rel / GT).write_text(json.dumps({e["query_id"]: {k: v for k, v in e.items() if k != "query_id"} for e in gt}))
    r = r4d_read.open_query_release(rel)
    assert [e["query_id"] for e in r.entries][:2] == ["americano_q1", "americano_q2"]
    assert len(r.meta) == 89


def test_bad_rle_in_gt_names_query_and_frame(rel):
    def edit(d):
        d[1]["ground_truth"]["frames"][-1]["masks"][1]["segmentation"] = {"size": [24, 32], "counts": "5"}

    _edit_gt(rel, edit)
    r = r4d_read.open_query_release(rel)
    with pytest.raises(RLEError, match=r"americano_q2.*frame 3.*masks\[1\].*sum to 5"):
        dict(r4d_rows.query_rows(r))


def test_polygon_without_frame_size():
    with pytest.raises(ReleaseFormatError, match="polygon and the frame size is unknown"):
        r4d_read.frame_mask_from_segmentations([{"segmentation": [[0, 0, 2, 0, 2, 2, 0, 2]]}], None, "q frame 3")


def test_unreadable_png_in_mask_image_mode(rel, tmp_path):
    name = "scripts/new_predictions_ground_truth_all_queries_with_paths.json"
    entry = json.loads((rel / name).read_text())[0]
    png = rel / entry["ground_truth"]["frames"][0]["masks"][0]["mask_image"]
    png.write_bytes(b"not a png")
    r = r4d_read.open_query_release(rel, mask_source="mask_image")
    with pytest.raises(ReleaseFormatError, match="cannot open mask PNG.*" + png.name):
        dict(r4d_rows.query_rows(r, "mask_image"))


def test_ambiguous_coco_json(rel):
    shutil.copy(rel / "data/scenes/americano/_annotations.coco.json", rel / "data/scenes/americano/_annotations.valid.coco.json")
    with pytest.raises(ReleaseNotFoundError, match="exactly one.*coco_json_name"):
        r4d_read.open_query_release(rel)
    assert r4d_read.open_query_release(rel, coco_json_name="_annotations.coco.json").scenes["americano"]


def test_unknown_option_value(rel, tmp_path):
    with pytest.raises(OptionError, match="mask_source.*'segmentation', 'mask_image'"):
        build_split("r4d_bench", "all_queries", rel, tmp_path / "c", mask_source="pixels")


# ---------------------------------------------------------------- Hub path


@pytest.mark.parametrize("config, kwargs", [("all_queries", {}), ("subset_36", {"mask_source": "mask_image"}), ("frames", {})])
def test_hub_download_fetches_only_needed_files(r4d_release, tmp_path, monkeypatch, config, kwargs):
    from perckit.hf.entrypoints import builder_class

    source = tmp_path / "hub_repo"
    shutil.copytree(r4d_release.root, source)
    calls = []
    monkeypatch.setattr(hub, "snapshot_download", fake_snapshot_download(source, calls))
    b = builder_class("r4d_bench")(config_name=config, cache_dir=str(tmp_path / "c"), **kwargs)
    b.download_and_prepare()
    ds = b.as_dataset("test")
    assert calls[0]["repo_id"] == "LiYacheng/r4d-bench-qa" and calls[0]["repo_type"] == "dataset"
    fetched = sorted(p.relative_to(tmp_path / "snapshot_1").as_posix() for p in (tmp_path / "snapshot_1").rglob("*") if p.is_file())
    expected_rows = {"all_queries": 89, "subset_36": 36, "frames": 48}[config]
    assert ds.num_rows == expected_rows
    assert not any(f.endswith(".py") or f.endswith(".csv") for f in fetched)
    has_images = any("/images/" in f for f in fetched)
    has_masks = any("/query_masks" in f for f in fetched)
    assert has_images == (config == "frames")
    assert has_masks == (kwargs.get("mask_source") == "mask_image")
    if has_masks:
        assert not any("/query_masks/" in f for f in fetched)  # the subset reads query_masks_36 only


def test_hub_offline_error_says_how_to_pass_data_dir(tmp_path):
    from perckit.hf.entrypoints import builder_class

    b = builder_class("r4d_bench")(config_name="all_queries", cache_dir=str(tmp_path), repo_id="someone/not-here")
    with pytest.raises(ReleaseNotFoundError, match="someone/not-here.*data_dir="):
        b.download_and_prepare()


def test_hub_patterns_follow_config():
    cfg = r4d_builder.R4DBenchConfig(name="all_queries")
    assert r4d_layout.dense_gt_file("all_queries", "segmentation") in r4d_builder.hub_patterns(cfg)


def test_unreadable_frame_image_names_the_file(r4d_release, monkeypatch):
    """An image that exists but cannot be read (an I/O error, no permission; root reads anything, so the
    read is replaced) is a ReleaseFormatError naming the COCO image and the file."""
    import errno

    def failing(paths, depth=16):
        for p in paths:
            yield p, OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(r4d_read, "read_ahead", failing)  # where frame_tables looks it up
    scene = r4d_read.read_scene(r4d_release.root, r4d_layout.scene_names(r4d_release.root)[0])
    with pytest.raises(ReleaseFormatError, match=r"image \d+ \(frame \d+\): image file '.*' cannot be read: \[Errno 5\] Input/output error"):
        next(r4d_rows.frame_tables(scene))
