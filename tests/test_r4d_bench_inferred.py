"""Issue 30 for R4D-Bench: rows keep the release's own field names."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perckit.hf.entrypoints import build_split
from perckit.samples import write_release

COCO = "data/scenes/americano/_annotations.coco.json"
GT = {"all_queries": "scripts/new_predictions_ground_truth_all_queries.json",
      "subset_36": "scripts/new_predictions_ground_truth_final.json"}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_release("r4d_bench", tmp_path_factory.mktemp("r4d_inferred"),
                         queries_per_scene={"americano": 1, "cook_spinach": 1, "cut_lemon": 1}).root


def _rows(root, config, cache):
    ds = build_split("r4d_bench", config, root, cache)
    return (ds.remove_columns("image") if config == "frames" else ds).to_list()


def test_rows_keep_the_card_field_names(small, tmp_path):
    """The card's names (queries file, dense GT) and COCO's (the frames come with a COCO annotation JSON); the
    COCO rows work with pycocotools as the COCO file does."""
    from pycocotools.coco import COCO as PyCOCO

    row = _rows(small, "all_queries", tmp_path / "c1")[0]
    card = {"query_id", "scene", "text_en", "text_zh", "target_track_ids", "target_count", "query_type",
            "requires_motion_understanding", "temporal_relation", "expected_temporal_anchor", "distractor", "note",
            "existence_frames"}
    assert card <= set(row) and "existence_frame_ids" not in row
    entry = next(e for e in json.loads((small / GT["all_queries"]).read_text()) if e["query_id"] == row["query_id"])
    assert row["existence_frames"] == sorted(set(entry["ground_truth"]["existence_frames"]))
    coco = json.loads((small / COCO).read_text())
    frames = [r for r in _rows(small, "frames", tmp_path / "c2") if r["scene"] == "americano"]
    images = {i["id"]: i for i in coco["images"]}
    for r in frames:
        assert {k: r[k] for k in ("id", "file_name", "height", "width")} == {k: images[r["id"]][k] for k in ("id", "file_name", "height", "width")}
    anns = [a for r in frames for a in r["annotations"]]
    assert anns and all(set(a) == {"id", "category_id", "category_name", "track_id", "bbox", "area", "iscrowd", "segmentation"} for a in anns)
    ours, theirs = PyCOCO(), PyCOCO()
    ours.dataset = {"images": [{k: r[k] for k in ("id", "file_name", "height", "width")} for r in frames],
                    "annotations": [{**a, "image_id": r["id"]} for r in frames for a in r["annotations"] if a["segmentation"]],
                    "categories": coco["categories"]}
    theirs.dataset = coco
    ours.createIndex()
    theirs.createIndex()
    assert sorted(ours.anns) == sorted(a["id"] for a in coco["annotations"] if a["segmentation"])
    for aid, a in ours.anns.items():
        np.testing.assert_array_equal(ours.annToMask(a), theirs.annToMask(theirs.anns[aid]))
        np.testing.assert_allclose(a["bbox"], theirs.anns[aid]["bbox"])
