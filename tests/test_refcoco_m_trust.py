"""Issue 13 for RefCOCO-M: globbed shards and the data folder stay inside the release, bboxes are checked, an
image without bytes is refused, and the predictions JSON Lines reader refuses repeated keys, a late BOM and
FIFOs. (Syn4D: tests/test_syn4d_trust.py.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.harness import deadline, expect
from helpers.refcoco_m import copy_release, edit_first_shard, read_all
from helpers.bad_inputs import link_out

from perckit.hf.entrypoints import build_split
from perckit.errors import PredictionError, ReleaseFormatError

BOM = b"\xef\xbb\xbf"


def _first_shard(root: Path) -> Path:
    return sorted((root / "data").glob("validation-*.parquet"))[0]


@pytest.fixture
def rcm(rcm_release, tmp_path):
    """A copy of the RefCOCO-M sample release (tests edit it)."""
    return copy_release(rcm_release, tmp_path)


def test_shard_symlinked_out_of_the_release_is_refused(rcm, tmp_path):
    shard = _first_shard(rcm)
    outside = tmp_path / "outside.parquet"
    link_out(shard, outside)
    expect(lambda: build_split("refcoco_m", "expressions", rcm, tmp_path / "c", split="validation"), ReleaseFormatError,
           r"RefCOCO-M shard 'data/validation-", "symbolic link leaves the root")


def test_data_folder_symlinked_out_of_the_release_is_refused(rcm, tmp_path):
    outside = tmp_path / "outside_data"
    link_out(rcm / "data", outside)
    expect(lambda: read_all(rcm), ReleaseFormatError, "symbolic link leaves the root")


@pytest.mark.parametrize("bbox, pattern", [
    ([float("nan"), 0.0, 1.0, 1.0], r"'bbox'\[0\]: expected a finite number, got nan"),
    ([0.0, float("inf"), 1.0, 1.0], r"'bbox'\[1\]: expected a finite number, got inf"),
    ([0.0, 0.0, -1.0, 1.0], r"expected w >= 0 and h >= 0"),
    ([0.0, 0.0, 1.0, -2.0], r"expected w >= 0 and h >= 0"),
    ([0.0, 0.0, 1.0, None], r"'bbox'\[3\]: expected a number, got None"),
    (None, r"'bbox' must be \[x, y, w, h\].*NoneType"),
    ([0.0, 0.0, 1.0, 1.0, 5.0], r"'bbox' must be \[x, y, w, h\].*5 value"),
])
def test_bbox_is_checked(rcm, bbox, pattern):
    edit_first_shard(rcm, lambda rows: rows[1]["samples"][0].update(bbox=bbox))
    expect(lambda: read_all(rcm), ReleaseFormatError, r"data/validation-\d+-of-\d+\.parquet: row 1 \(image_id \d+\): sample 0 \(id \d+\)", pattern)


@pytest.mark.parametrize("bbox, pattern", [
    (["1", 2, 3, 4], r"'bbox'\[0\]: expected a number, got '1'"),
    ([[1.0], 2.0, 3.0, 4.0], r"'bbox'\[0\]: expected a number, got \[1\.0\]"),
    ([True, 2, 3, 4], r"'bbox'\[0\]: expected a number, got True"),
    ([1e39, 0.0, 1.0, 1.0], r"expected a finite number"),
])
def test_bbox_values_of_the_wrong_type(bbox, pattern):
    from perckit.refcoco_m import read as release

    with pytest.raises(ReleaseFormatError, match=pattern):
        release.check_bbox(bbox, "shard: row 0 (image_id 1): sample 0 (id 2)")


def test_image_without_bytes_is_refused(rcm, tmp_path):
    edit_first_shard(rcm, lambda rows: rows[0].update(image={"bytes": None, "path": "/etc/hostname"}))
    expect(lambda: read_all(rcm, check_image_size=False), ReleaseFormatError, r"row 0 \(image_id \d+\): 'image'", "with its bytes")
    assert read_all(rcm, check_image_size=False, read_images=False)  # the image column is not read at all then


def test_predictions_jsonl_repeated_key_bom_and_fifo(tmp_path):
    from perckit.refcoco_m import load_predictions_jsonl

    p = tmp_path / "p.jsonl"
    p.write_text('{"expression_id": "1:0", "mask": {"size": [2, 3], "counts": "033"}, "expression_id": "2:0"}\n')
    expect(lambda: load_predictions_jsonl(p), PredictionError, r"line 1", "duplicate key 'expression_id'")
    line = b'{"expression_id": "1:0", "mask": {"size": [2, 3], "counts": "033"}}\n'
    p.write_bytes(BOM + line)
    assert [r["expression_id"] for r in load_predictions_jsonl(p)] == ["1:0"]
    p.write_bytes(line + BOM + line.replace(b"1:0", b"2:0"))
    expect(lambda: load_predictions_jsonl(p), PredictionError, "line 2: expected a JSON object, got a byte-order mark")
    f = tmp_path / "fifo.jsonl"
    os.mkfifo(f)
    with deadline():
        expect(lambda: load_predictions_jsonl(f), PredictionError, "got a FIFO")
