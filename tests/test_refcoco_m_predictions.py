"""RefCOCO-M: the official prediction formats (JSON Lines, per-image rows) read into refer_iou predictions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.refcoco_m import R, REF

from perckit.errors import PredictionError
from perckit.refcoco_m import flatten_image_predictions, load_predictions_jsonl, to_metric_reference
from perckit.refcoco_m import metric as core


# ---------------------------------------------------------------- prediction adapters


def test_load_predictions_jsonl(tmp_path):
    path = tmp_path / "preds.jsonl"
    lines = [
        {"expression_id": "10:0", "mask": R("021O1")},
        {"sample_id": 10, "sentence_index": 1, "mask": {"size": [2, 3], "counts": [0, 2, 1, 1, 2]}},
        {"sample_id": "11", "sentence_index": 0, "expression_id": "11:0", "mask": R("6")},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    rows = load_predictions_jsonl(path)
    assert rows == [{"expression_id": "10:0", "mask": R("021O1")}, {"expression_id": "10:1", "mask": R("021O1")},
                    {"expression_id": "11:0", "mask": R("6")}]
    refs = [REF("10:0", "033"), REF("10:1", "033"), REF("11:0", "033")]
    assert core.refer_iou(rows, refs)["miou"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    "line, match",
    [
        ({"sentence": "left dog", "mask": R("6")}, "keyed by sentence text is ambiguous"),
        ({"sample_id": 10, "mask": R("6")}, "'sample_id' and 'sentence_index' go together"),
        ({"expression_id": "10:1", "sample_id": 10, "sentence_index": 0, "mask": R("6")}, "disagrees"),
        ({"expression_id": "10:0", "mask": R("5")}, r"line 1: mask.*sum to 5"),
        ({"expression_id": "10:0"}, r"line 1: expected 'mask'"),
        ({"expression_id": 7, "mask": R("6")}, "non-empty string"),
    ],
)
def test_load_predictions_jsonl_errors(tmp_path, line, match):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(PredictionError, match=match):
        load_predictions_jsonl(path)


def test_load_predictions_jsonl_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_predictions_jsonl(tmp_path / "nope.jsonl")
    path = tmp_path / "p.jsonl"
    path.write_text('{"expression_id": "1:0", "mask": {"size": [2, 3], "counts": "6"}}\n{"expression_id": "1:0", "mask": {"size": [2, 3], "counts": "6"}}\n')
    with pytest.raises(PredictionError, match=r"line 2: duplicate expression_id '1:0' \(first at .*line 1\)"):
        load_predictions_jsonl(path)
    path.write_text("{not json\n")
    with pytest.raises(PredictionError, match="line 1: expected a JSON object, got a parse error"):
        load_predictions_jsonl(path)


def test_flatten_image_predictions(rcm_release, rcm_expressions):
    A = np.array([[1, 0, 0], [1, 1, 0]], dtype=bool)
    rows = [{"image_id": 5, "samples": [
        {"id": 10, "masks": [A, {"size": [2, 3], "counts": b"021O1"}]},
        {"id": 11, "masks": [{"size": [2, 3], "counts": [6]}]},
    ]}]
    assert flatten_image_predictions(rows) == [
        {"expression_id": "10:0", "mask": R("021O1")}, {"expression_id": "10:1", "mask": R("021O1")}, {"expression_id": "11:0", "mask": R("6")},
    ]
    with pytest.raises(PredictionError, match=r"image_id 5\): sample id 10: masks\[1\].*sum to 5"):
        flatten_image_predictions([{"image_id": 5, "samples": [{"id": 10, "masks": [A, R("5")]}]}])
    with pytest.raises(PredictionError, match="duplicate expression_id '10:0'"):
        flatten_image_predictions(rows + rows)
    # GT-as-prediction through the per-image shape
    images = {}
    for r in rcm_expressions.select_columns(["image_id", "sample_id", "sentence_index", "mask"]):
        images.setdefault(r["image_id"], {}).setdefault(r["sample_id"], []).append(r["mask"])
    per_image = [{"image_id": i, "samples": [{"id": s, "masks": m} for s, m in samples.items()]} for i, samples in images.items()]
    refs = [to_metric_reference(r) for r in rcm_expressions.remove_columns("image")]
    assert core.refer_iou(flatten_image_predictions(per_image), refs)["miou"] == 1.0
