"""The R4D-Bench builder on the synthetic release: rows, features, quirks, both datasets lines, streaming."""

import json
import logging

import numpy as np
from helpers.common import REPO, needs_scripts
from pycocotools import mask as mask_utils

from perckit import rle
from perckit.hf.entrypoints import build_split
from perckit.r4d_bench import features as feats
from perckit.r4d_bench import layout as r4d_layout
from perckit.r4d_bench import read as r4d_read
from perckit.r4d_bench import rows as r4d_rows


def test_query_rows_and_features(r4d_release, r4d_queries):
    assert r4d_queries.num_rows == 89
    assert r4d_queries.features == feats.query_features()
    assert r4d_queries["query_id"] == r4d_release.query_ids
    rows = {r["query_id"]: r for r in r4d_queries}
    cook = rows["cook-spinach_q1"]
    assert cook["scene"] == "cook_spinach"  # hyphen id prefix, underscore folder
    assert rows["split_cookie_q1"]["scene"] == "split_cookie"
    assert set(r4d_queries["scene"]) == set(r4d_layout.SCENES)
    for qid in r4d_release.negative_ids:
        assert rows[qid]["is_negative"] and rows[qid]["target_track_ids"] == []
        assert rows[qid]["distractor"] == "true"  # non-str metadata stored as JSON text
    multi = rows["americano_q2"]
    assert multi["target_track_ids"] == ["1", "2"] and multi["target_count"] == 2
    assert rows["americano_q4"]["extra_metadata_json"] == json.dumps({"difficulty": "hard"})
    assert rows["americano_q5"]["expected_temporal_anchor"] == str(r4d_release.frame_ids["americano"][-1])
    assert any(ord(c) > 0x3000 for c in cook["text_zh"])
    for r in r4d_queries:
        assert [f["frame_id"] for f in r["frames"]] == sorted(f["frame_id"] for f in r["frames"])
        assert r["evaluated_frame_ids"] == sorted({f["frame_id"] for f in r["frames"]} | set(r["existence_frames"]))
        assert r["scene_frame_ids"] == r4d_release.frame_ids[r["scene"]]
        for f in r["frames"]:
            assert f["mask"]["size"] == [24, 32] and isinstance(f["mask"]["counts"], str)
            rle.validate(f["mask"])


def test_negative_sentinel_frames_get_empty_masks(r4d_queries):
    rows = {r["query_id"]: r for r in r4d_queries}
    neg = rows["americano_q3"]
    assert len(neg["existence_frames"]) == 2
    assert all(rle.area(f["mask"]) == 0 and f["num_instance_masks"] == 0 for f in neg["frames"])
    no_entries = rows["americano_q7"]  # sentinel frames without frame entries
    assert no_entries["frames"] == [] and no_entries["evaluated_frame_ids"] == no_entries["existence_frames"]


def _gt_entry(root, qid):
    data = json.loads((root / "scripts/new_predictions_ground_truth_all_queries.json").read_text())
    return next(e for e in data if e["query_id"] == qid)


def test_polygon_and_rle_masks_match_pycocotools(r4d_release, r4d_queries):
    rows = {r["query_id"]: r for r in r4d_queries}
    # americano_q1 targets track 1 (odd: polygon); americano_q2 tracks 1 + 2 (polygon + RLE);
    # espresso_q2 tracks 1 + 2 with uncompressed (list-counts) RLE for track 2.
    for qid in ("americano_q1", "americano_q2", "espresso_q2"):
        entry = _gt_entry(r4d_release.root, qid)
        for fr, row_fr in zip(entry["ground_truth"]["frames"], rows[qid]["frames"]):
            dense = np.zeros((24, 32), dtype=bool)
            for m in fr["masks"]:
                seg = m["segmentation"]
                if isinstance(seg, list):
                    obj = mask_utils.merge(mask_utils.frPyObjects(seg, 24, 32))
                elif isinstance(seg["counts"], list):
                    obj = mask_utils.frPyObjects(seg, 24, 32)
                else:
                    obj = {"size": seg["size"], "counts": seg["counts"].encode()}
                dense |= mask_utils.decode(obj).astype(bool)
            assert (rle.decode(row_fr["mask"]) == dense).all(), (qid, fr["frame_id"])
    kinds = set()
    for e in json.loads((r4d_release.root / "scripts/new_predictions_ground_truth_all_queries.json").read_text()):
        for fr in e["ground_truth"]["frames"]:
            for m in fr["masks"]:
                s = m["segmentation"]
                kinds.add("polygon" if isinstance(s, list) else "list" if isinstance(s["counts"], list) else "rle")
    assert kinds == {"polygon", "list", "rle"}


def test_png_mask_source_agrees_with_segmentation(r4d_release, r4d_queries, tmp_path):
    png = build_split("r4d_bench", "all_queries", r4d_release.root, tmp_path, mask_source="mask_image")
    assert png.num_rows == r4d_queries.num_rows
    for a, b in zip(png, r4d_queries):
        assert a["query_id"] == b["query_id"]
        assert [rle.decode(f["mask"]).tolist() for f in a["frames"]] == [rle.decode(f["mask"]).tolist() for f in b["frames"]]


def test_subset_36(r4d_release, tmp_path):
    ds = build_split("r4d_bench", "subset_36", r4d_release.root, tmp_path)
    assert ds.num_rows == 36 and ds["query_id"] == r4d_release.subset_ids
    png = build_split("r4d_bench", "subset_36", r4d_release.root, tmp_path, mask_source="mask_image")
    assert png["frames"] == ds["frames"]


def test_frames_config(r4d_release, tmp_path):
    ds = build_split("r4d_bench", "frames", r4d_release.root, tmp_path)
    assert ds.features == feats.frame_features()
    assert ds.num_rows == 12 * 4
    row = ds[0]
    assert row["image"].size == (32, 24)
    assert "_png.rf." in row["file_name"] and "/" not in row["file_name"]  # COCO's file_name as written (under images/)
    cook = [r for r in ds if r["scene"] == "cook_spinach"]
    assert [r["frame_id"] for r in cook] == r4d_release.frame_ids["cook_spinach"]
    tracks = {a["track_id"] for r in ds for a in r["annotations"]}
    assert {"1", "2", "3"} <= tracks  # from track_id and attributes.track_id
    empties = [a for r in ds for a in r["annotations"] if a["segmentation"] is None]
    assert len(empties) == 1  # the empty segmentation stays null, never a bbox
    keyboard = [r for r in ds if r["scene"] == "keyboard"]  # its COCO file is _annotations.test.coco.json
    assert len(keyboard) == 4


@needs_scripts
def test_frames_keys_and_streaming(r4d_release):
    import datasets

    path = str(REPO / "builders" / "r4d_bench")
    it = datasets.load_dataset(path, "all_queries", data_dir=str(r4d_release.root), trust_remote_code=True, streaming=True)["test"]
    first = next(iter(it))
    assert first["query_id"] == r4d_release.query_ids[0]
    assert first["frames"][0]["mask"]["size"] == [24, 32]


def test_streaming_plain_class(r4d_release, r4d_queries):
    from perckit.hf.entrypoints import builder_class

    b = builder_class("r4d_bench")(config_name="all_queries", data_dir=str(r4d_release.root))
    rows = list(b.as_streaming_dataset("test"))
    assert [r["query_id"] for r in rows] == r4d_queries["query_id"]
    assert rows[5]["frames"] == r4d_queries[5]["frames"]


def test_both_lines_give_the_same_rows(r4d_release, r4d_queries, tmp_path):
    """The plain class (the 5.x path) and load_dataset (3.6) build identical rows."""
    from perckit.hf.entrypoints import builder_class

    b = builder_class("r4d_bench")(config_name="all_queries", data_dir=str(r4d_release.root), cache_dir=str(tmp_path))
    b.download_and_prepare()
    assert b.as_dataset("test").to_list() == r4d_queries.to_list()


def test_scene_naming_helpers():
    assert r4d_layout.scene_from_query_id("cook-spinach_q1") == "cook_spinach"
    assert r4d_layout.scene_from_query_id("split_cookie_q12") == "split_cookie"
    assert r4d_layout.scene_from_query_id("torchocolate_q2") == "torchchocolate"
    assert r4d_layout.scene_from_query_id("cut-lemon1_q1") == "cut_lemon"
    assert r4d_read.frame_id_of({"file_name": "000012_png.rf.abc123.jpg"}) == 12
    assert r4d_read.frame_id_of({"file_name": "x.jpg", "extra": {"name": "frame_000031.png"}}) == 31


def test_consistency_mismatch_is_a_warning(r4d_release, tmp_path, caplog):
    import shutil

    root = tmp_path / "rel"
    shutil.copytree(r4d_release.root, root)
    track = json.loads((root / r4d_layout.TRACK_GT).read_text())
    track["americano_q1"] = [99]
    (root / r4d_layout.TRACK_GT).write_text(json.dumps(track))
    rel = r4d_read.open_query_release(root)
    with caplog.at_level(logging.WARNING):
        rows = dict(r4d_rows.query_rows(rel))
    assert rows["americano_q1"]["target_track_ids"] == ["1"]  # the queries file wins
    assert "americano_q1" in caplog.text and "99" in caplog.text


def test_bool_like_metadata_strings():
    assert r4d_rows._as_bool("false") is False and r4d_rows._as_bool("True") is True
    assert r4d_rows._as_bool(None) is None and r4d_rows._as_bool(1) is True
