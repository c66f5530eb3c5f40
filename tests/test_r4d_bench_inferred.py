"""Issue 30 for R4D-Bench: rows keep the release's own field names, and what perckit inferred never fails a build.

Each [inferred] reading of the card's table (``builders/r4d_bench/README.md``, "Inferred readings") is given
unexpected shapes (a list of scalars, an object without the keys, a nested object, ...) on every config that reads
it: the build succeeds, exactly one warning names the file, and the rows are those of the release without the
reading (the field removed, or the file deleted)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from helpers.bad_inputs import copy_release

from perckit.hf.entrypoints import build_split
from perckit.samples import write_release

COCO = "data/scenes/americano/_annotations.coco.json"
TRACK_JSON = "data/scenes/cut_lemon/cut_lemon.json"
META = "evaluation/R4D-Bench_queries.json"
TRACK_GT = "evaluation/R4D-Bench_predictions.json"
GT = {"all_queries": "scripts/new_predictions_ground_truth_all_queries.json",
      "subset_36": "scripts/new_predictions_ground_truth_final.json"}
Q = "americano_q1"
DROP = object()  # the value that removes the field (or deletes the file): the reading ignored
#: The three unexpected shapes of the issue; digits that are no frame id of americano (0..3), for extra.name.
SHAPES = {"a-list-of-scalars": [901, 902], "an-object-without-the-keys": {"foo": 977},
          "a-nested-object": {"a": {"b": "frame_000931", "track_id": [1]}}}


def _put(data, keys, value):
    """``data`` with the field at ``keys`` set to ``value`` (removed for DROP; ``keys == ()``: the whole file)."""
    if not keys:
        return value
    obj = data
    for k in keys[:-1]:
        obj = next(e for e in obj if e.get("query_id") == k) if isinstance(k, str) and isinstance(obj, list) else obj[k]
    if value is DROP:
        obj.pop(keys[-1], None)
    else:
        obj[keys[-1]] = value
    return data


def _entity_ids(config):
    """target_entity_ids read: the queries file and ground_truth give no target_track_ids / target_tracks for Q."""
    return [(META, (Q, "target_track_ids"), DROP), (GT[config], (Q, "ground_truth", "target_tracks"), DROP)]


#: (reading, configs, file, field keys, shapes, the other edits it needs (file, keys, value)).
CASES = [
    ("scene-track-json", ["frames"], TRACK_JSON, (), {**SHAPES, "tracks-a-list-of-scalars": {"tracks": [101, 102]},
     "tracks-an-object": {"tracks": {"1": [1]}}, "tracks-nested-objects": {"tracks": [{"track_id": {"a": 1}, "annotation_ids": {"b": [1]}}]},
     "an-annotation-in-two-tracks": [{"track_id": 1, "annotation_ids": [1]},
                                                                                 {"track_id": 2, "annotation_ids": [1]}]}, []),
    ("coco-track_id", ["frames"], COCO, ("annotations", 0, "track_id"), SHAPES, []),
    ("coco-attributes.track_id", ["frames"], COCO, ("annotations", 0, "attributes", "track_id"), SHAPES, []),
    # (an object is the shape read, whatever its other keys: `attributes` and `extra` are tried with other values)
    ("coco-attributes", ["frames"], COCO, ("annotations", 0, "attributes"), {"a-list-of-scalars": [901], "a-scalar": "x"}, []),
    ("coco-instance_id", ["frames"], COCO, ("annotations", 0, "instance_id"), SHAPES, []),
    ("images-extra.name", ["all_queries", "subset_36", "frames"], COCO, ("images", 0, "extra", "name"), SHAPES, []),
    ("images-extra", ["all_queries", "subset_36", "frames"], COCO, ("images", 0, "extra"), {"a-list-of-scalars": [901], "a-scalar": "000931.png"}, []),
    ("target_entity_ids", ["all_queries", "subset_36"], None, (Q, "ground_truth", "target_entity_ids"),
     {"a-scalar": "americano_e001", "an-object-without-the-keys": {"foo": 977}, "a-nested-object": SHAPES["a-nested-object"],
      "a-list-of-objects": [{"id": 1}]}, _entity_ids),  # (a list of scalars is the shape read)
    ("track-gt-object-values", ["all_queries", "subset_36"], TRACK_GT, (Q,),
     {"an-object-without-the-keys": {"foo": [1]}, "a-nested-object": {"target_track_ids": {"a": [1]}},
      "ids-a-scalar": {"target_track_ids": "1"}, "ids-a-list-of-lists": {"target_track_ids": [[1]]}}, []),
]
PARAMS = [pytest.param(config, file, keys, value, prep, id=f"{name}-{config}-{shape}")
          for name, configs, file, keys, shapes, prep in CASES for config in configs for shape, value in shapes.items()]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_release("r4d_bench", tmp_path_factory.mktemp("r4d_inferred"),
                         queries_per_scene={"americano": 1, "cook_spinach": 1, "cut_lemon": 1}).root


def _rows(root, config, cache):
    ds = build_split("r4d_bench", config, root, cache)
    return (ds.remove_columns("image") if config == "frames" else ds).to_list()


def _release(small, tmp_path, name, edits):
    root = copy_release(small, tmp_path / name)
    for rel, keys, value in edits:
        path = root / rel
        if value is DROP and not keys:
            path.unlink()
            continue
        path.write_text(json.dumps(_put(json.loads(path.read_text()), keys, value)))
    return root


@pytest.mark.parametrize("config, file, keys, value, prep", PARAMS)
def test_an_unexpected_shape_is_one_warning_then_ignored(small, tmp_path, caplog, config, file, keys, value, prep):
    file = file or GT[config]
    prep = prep(config) if callable(prep) else prep
    expected = _rows(_release(small, tmp_path, "ignored", [*prep, (file, keys, DROP)]), config, tmp_path / "c1")
    root = _release(small, tmp_path, "odd", [*prep, (file, keys, value)])
    with caplog.at_level(logging.WARNING, logger="perckit"):
        got = _rows(root, config, tmp_path / "c2")
    name = file.rsplit("/", 1)[-1]
    naming = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert len(naming) == 1 and "ignored: its layout is not documented" in naming[0], naming
    assert got == expected


def test_two_scene_track_json_candidates_are_one_warning_then_ignored(small, tmp_path, caplog):
    expected = _rows(_release(small, tmp_path, "ignored", [(TRACK_JSON, (), DROP)]), "frames", tmp_path / "c1")
    root = _release(small, tmp_path, "odd", [])
    (root / "data/scenes/cut_lemon/cut-lemon.json").write_text((root / TRACK_JSON).read_text())
    with caplog.at_level(logging.WARNING, logger="perckit"):
        got = _rows(root, "frames", tmp_path / "c2")
    naming = [r.getMessage() for r in caplog.records if "cut-lemon.json" in r.getMessage()]
    assert len(naming) == 1 and "expected at most one of" in naming[0] and got == expected


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
