"""RefCOCO-M: bad release input (spec section 6): the builder's and the reader's messages."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from helpers.harness import cause as root_cause
from helpers.refcoco_m import SPLIT, all_expression_rows, copy_release, edit_first_shard, read_all, read_shard

from perckit import rle
from perckit.hf.entrypoints import build_split
from perckit.errors import OptionError, ReleaseFormatError, ReleaseNotFoundError, RLEError
from perckit.samples import refcoco_m as fixture
from perckit.refcoco_m import read as release


# ---------------------------------------------------------------- bad release input (spec section 6)


def test_no_shard_and_no_folder(tmp_path):
    (tmp_path / "empty" / "data").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"no Parquet shard matches 'data/validation-\*\.parquet'"):
        build_split("refcoco_m", "expressions", tmp_path / "empty", tmp_path / "c", split=SPLIT)
    with pytest.raises(ReleaseNotFoundError, match="does not exist"):
        build_split("refcoco_m", "expressions", tmp_path / "nope", tmp_path / "c", split=SPLIT)


def test_missing_column_is_raised_unwrapped(rcm_release, tmp_path):
    import pyarrow as pa

    root = copy_release(rcm_release, tmp_path)
    path = root / fixture.shard_name(1, 2)
    rows = read_shard(path)
    schema = fixture.arrow_schema()
    schema = schema.remove(schema.get_field_index("file_name"))
    fixture.write_shard(path, [{k: v for k, v in r.items() if k != "file_name"} for r in rows], schema)
    with pytest.raises(ReleaseFormatError, match=r"validation-00001-of-00002.parquet: missing column\(s\) \['file_name'\].*'image', 'image_id', 'file_name', 'samples'"):
        build_split("refcoco_m", "expressions", root, tmp_path / "c", split=SPLIT)
    bad = pa.schema([("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])), ("image_id", pa.int64()),
                     ("file_name", pa.string()), ("samples", pa.list_(pa.struct([("id", pa.int64())])))])
    with pytest.raises(ReleaseFormatError, match=r"'samples' items lack the field\(s\) \['image_id', 'category'"):
        release.check_schema(bad, "x.parquet")


def _set_mask(rows, row, sample, **mask):
    rows[row]["samples"][sample]["mask"].update(mask)


def _sample_id(rows, row, sample):
    return rows[row]["samples"][sample]["id"]


BAD_ROWS = [
    # (edit, error type, message pattern built from (shard, image_id, sample id))
    (lambda rows: _set_mask(rows, 1, 0, size=[5]), RLEError, r"{shard}: row 1 \(image_id {img}\): sample 0 \(id {sid}\): mask: expected 'size' = \[H, W\]"),
    (lambda rows: _set_mask(rows, 1, 0, size=[0, 3]), RLEError, r"image_id {img}.*id {sid}.*two positive ints"),
    (lambda rows: _set_mask(rows, 1, 0, counts="5"), RLEError, r"image_id {img}.*id {sid}.*runs sum to 5 pixels, expected H\*W"),
    (lambda rows: _set_mask(rows, 1, 0, counts="0~~"), RLEError, r"image_id {img}.*id {sid}.*outside the COCO alphabet"),
    (lambda rows: rows[1]["samples"][0].update(bbox=[1.0, 2.0, 3.0]), ReleaseFormatError, r"image_id {img}.*id {sid}.*'bbox' must be \[x, y, w, h\].*3 value"),
    (lambda rows: rows[1]["samples"][0].update(image_id=1), ReleaseFormatError, r"image_id {img}.*id {sid}.*'image_id' is 1"),
]


@pytest.mark.parametrize("edit, error, pattern", BAD_ROWS)
def test_bad_sample_names_shard_image_and_sample(rcm_release, tmp_path, edit, error, pattern):
    root = copy_release(rcm_release, tmp_path)
    rows = read_shard(root / fixture.shard_name(0, 2))
    img, sid = rows[1]["image_id"], _sample_id(rows, 1, 0)
    edit_first_shard(root, edit)
    msg = pattern.format(shard=r"data/validation-00000-of-00002\.parquet", img=img, sid=sid)
    with pytest.raises(error, match=msg):
        read_all(root)


def test_row_errors_reach_the_caller_through_the_builder(rcm_release, tmp_path):
    root = copy_release(rcm_release, tmp_path)
    edit_first_shard(root, lambda rows: _set_mask(rows, 1, 0, counts="5"))
    with pytest.raises(Exception) as info:
        build_split("refcoco_m", "expressions", root, tmp_path / "c", split=SPLIT)
    cause = root_cause(info.value)
    assert isinstance(cause, RLEError) and "runs sum to 5" in str(cause)


def test_mask_sizes_differ_within_an_image(rcm_release, tmp_path):
    root = copy_release(rcm_release, tmp_path)
    rows = read_shard(root / fixture.shard_name(0, 2))
    row = next(i for i, r in enumerate(rows) if len(r["samples"]) > 1)
    a, b = rows[row]["samples"][:2]
    h, w = a["mask"]["size"]
    edit_first_shard(root, lambda rs: rs[row]["samples"][1].update(mask={"counts": rle.empty(h, w + 2)["counts"], "size": [h, w + 2]}))
    with pytest.raises(ReleaseFormatError, match=rf"image_id {rows[row]['image_id']}.*sample id {b['id']} has mask size \[{h}, {w + 2}\].*sample id {a['id']}.*\[{h}, {w}\]"):
        read_all(root, allow_empty_masks=True)


def test_mask_size_differs_from_image_size(rcm_release, tmp_path):
    root = copy_release(rcm_release, tmp_path)
    rows = read_shard(root / fixture.shard_name(0, 2))
    h, w = rows[0]["samples"][0]["mask"]["size"]
    big = fixture.jpeg_bytes(np.zeros((h + 1, w, 3), dtype=np.uint8))
    edit_first_shard(root, lambda rs: rs[0].update(image={"bytes": big, "path": rs[0]["image"]["path"]}))
    with pytest.raises(ReleaseFormatError, match=rf"image_id {rows[0]['image_id']}.*mask size \[{h}, {w}\] differs from the image size \[{h + 1}, {w}\]"):
        read_all(root)
    assert len(read_all(root, check_image_size=False)) == 12


def test_unreadable_image_and_shard(rcm_release, tmp_path):
    root = copy_release(rcm_release, tmp_path)
    rows = read_shard(root / fixture.shard_name(0, 2))
    edit_first_shard(root, lambda rs: rs[2].update(image={"bytes": b"not an image", "path": "images/x.jpg"}))
    with pytest.raises(ReleaseFormatError, match=rf"row 2 \(image_id {rows[2]['image_id']}\): cannot open the embedded image"):
        read_all(root)
    (root / fixture.shard_name(1, 2)).write_bytes(b"PAR1 but not really")
    with pytest.raises(ReleaseFormatError, match="validation-00001-of-00002.parquet: not a readable Parquet file"):
        build_split("refcoco_m", "images", root, tmp_path / "c", split=SPLIT)


def test_duplicate_sample_id(rcm_release, tmp_path):
    root = copy_release(rcm_release, tmp_path)
    rows = read_shard(root / fixture.shard_name(0, 2))
    first = rows[0]["samples"][0]["id"]
    edit_first_shard(root, lambda rs: rs[3]["samples"][0].update(id=first))
    with pytest.raises(ReleaseFormatError, match=rf"row 3 \(image_id {rows[3]['image_id']}\): duplicate sample id {first} \(already used under image_id {rows[0]['image_id']}\)"):
        read_all(root)


def test_duplicate_image_id(rcm_release, tmp_path):
    root = copy_release(rcm_release, tmp_path)
    rows = read_shard(root / fixture.shard_name(1, 2))
    dup = read_shard(root / fixture.shard_name(0, 2))[0]["image_id"]
    for s in rows[0]["samples"]:
        s["image_id"] = dup
    rows[0]["image_id"] = dup
    fixture.write_shard(root / fixture.shard_name(1, 2), rows)
    with pytest.raises(ReleaseFormatError, match=rf"00001-of-00002.parquet: row 0 \(image_id {dup}\): duplicate image_id {dup} \(first seen at data/validation-00000-of-00002.parquet: row 0\)"):
        read_all(root)


def test_empty_gt_mask(rcm_release, tmp_path):
    root = copy_release(rcm_release, tmp_path)
    rows = read_shard(root / fixture.shard_name(0, 2))
    h, w = rows[1]["samples"][0]["mask"]["size"]
    sid = rows[1]["samples"][0]["id"]
    edit_first_shard(root, lambda rs: _set_mask(rs, 1, 0, counts=rle.empty(h, w)["counts"]))
    with pytest.raises(ReleaseFormatError, match=rf"id {sid}\): the mask has zero area.*allow_empty_masks=True"):
        read_all(root)
    rows = all_expression_rows(root, options=release.ReadOptions(allow_empty_masks=True, read_images=False))
    assert rle.area(next(r for r in rows if r["sample_id"] == sid)["mask"]) == 0


def test_empty_sentence_list_is_a_warning(rcm_release, caplog):
    with caplog.at_level(logging.WARNING, logger="perckit.refcoco_m.read"):
        rows = all_expression_rows(rcm_release.root)
    (sid,) = rcm_release.empty_sentence_sample_ids
    assert f"sample id {sid} has no sentence" in caplog.text
    assert not any(r["sample_id"] == sid for r in rows)


def test_image_meta_column_is_ignored(rcm_release, tmp_path):
    import pyarrow as pa

    root = copy_release(rcm_release, tmp_path)
    path = root / fixture.shard_name(0, 2)
    rows = read_shard(path)
    schema = fixture.arrow_schema().append(pa.field("image_meta", pa.struct([("width", pa.int64()), ("height", pa.int64()), ("image_id", pa.int64())])))
    for r in rows:
        r["image_meta"] = {"width": 1, "height": 1, "image_id": r["image_id"]}
    fixture.write_shard(path, rows, schema)
    assert all_expression_rows(root) == all_expression_rows(rcm_release.root)


def test_bad_option_value(rcm_release, tmp_path):
    with pytest.raises(OptionError, match="with_images"):
        build_split("refcoco_m", "expressions", rcm_release.root, tmp_path, split=SPLIT, with_images="no")
