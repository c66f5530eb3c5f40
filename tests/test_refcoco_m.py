"""RefCOCO-M: the synthetic release, the builder (both datasets lines, streaming, Hub), bad input, and the refer_iou metric."""

from __future__ import annotations

import io
import json
import logging
import shutil

import numpy as np
import pytest
import yaml
from helpers.common import REPO, needs_scripts
from helpers.distributed import run_distributed
from helpers.fake_hub import fake_snapshot_download
from helpers.harness import cause as root_cause
from PIL import Image

from perckit import hub
from perckit import rle
from perckit.entrypoints import build_split, builder_class
from perckit.errors import OptionError, PredictionError, ReleaseFormatError, ReleaseNotFoundError, RLEError
from perckit.fixtures import refcoco_m as fixture
from perckit.refcoco_m import features as feats
from perckit.refcoco_m import flatten_image_predictions, load_predictions_jsonl, to_metric_reference
from perckit.refcoco_m import metrics as core
from perckit.refcoco_m import release

SPLIT = "validation"


def R(counts, size=(2, 3)):
    return {"size": list(size), "counts": counts}


def REF(eid, counts, size=(2, 3), category="dog", supercategory="animal"):
    return {"expression_id": eid, "mask": R(counts, size), "category": category, "supercategory": supercategory}


def PRED(eid, counts, size=(2, 3)):
    return {"expression_id": eid, "mask": R(counts, size)}


@pytest.fixture(scope="module")
def rcm_release(tmp_path_factory):
    from perckit.fixtures.base import write_release

    return write_release("refcoco_m", tmp_path_factory.mktemp("refcoco_m_release"))


@pytest.fixture(scope="module")
def rcm_expressions(rcm_release, tmp_path_factory):
    return build_split("refcoco_m", "expressions", rcm_release.root, tmp_path_factory.mktemp("cache"), split=SPLIT)


@pytest.fixture(scope="module")
def refer_metric():
    import evaluate

    return evaluate.load(str(REPO / "metrics" / "refer_iou"))


def _copy(rcm_release, tmp_path):
    root = tmp_path / "release"
    shutil.copytree(rcm_release.root, root)
    return root


def _edit_first_shard(root, fn):
    path = root / fixture.shard_name(0, 2)
    rows = fixture.read_shard(path)
    fn(rows)
    fixture.write_shard(path, rows)


def _read_all(root, **options):
    return list(release.iter_release_rows(root, release.ReadOptions(**options)))


# ---------------------------------------------------------------- the synthetic release


def test_fixture_matches_the_card_schema(rcm_release):
    import datasets
    import pyarrow.parquet as pq

    text = (rcm_release.root / "README.md").read_text()
    card = yaml.safe_load(text.split("---")[1])
    assert card["configs"] == [{"config_name": "default", "data_files": [{"split": SPLIT, "path": "data/validation-*"}]}]
    expected = datasets.Features._from_yaml_list(card["dataset_info"]["features"]).arrow_schema.remove_metadata()
    assert rcm_release.shards == ["data/validation-00000-of-00002.parquet", "data/validation-00001-of-00002.parquet"]
    for shard in rcm_release.shards:
        schema = pq.read_schema(rcm_release.root / shard)
        assert schema.remove_metadata() == expected
        assert schema.field("samples").type.value_type.field("mask").type.names == ["counts", "size"]
    assert card["dataset_info"]["splits"][0]["num_examples"] == 12
    rows = [r for s in rcm_release.shards for r in fixture.read_shard(rcm_release.root / s)]
    sizes = {Image.open(io.BytesIO(r["image"]["bytes"])).size for r in rows}
    assert len(sizes) > 3 and all(Image.open(io.BytesIO(r["image"]["bytes"])).format == "JPEG" for r in rows)
    assert all(r["image"]["path"] == f"images/{r['file_name']}" for r in rows)
    assert all(r["file_name"].startswith("COCO_train2014_") for r in rows)


def test_fixture_is_deterministic_and_scales(tmp_path):
    a = fixture.write_release(tmp_path / "a", seed=3, num_images=5, shards=1)
    b = fixture.write_release(tmp_path / "b", seed=3, num_images=5, shards=1)
    assert (a.root / a.shards[0]).read_bytes() == (b.root / b.shards[0]).read_bytes()
    big = fixture.write_release(tmp_path / "big", num_images=40, shards=3)
    assert len(big.image_ids) == 40 and len(big.shards) == 3
    assert len(release.all_expression_rows(big.root)) == len(big.expression_ids)
    with pytest.raises(ValueError, match="shards"):
        fixture.write_release(tmp_path / "c", num_images=3, shards=4)


# ---------------------------------------------------------------- builder


def test_expression_rows(rcm_release, rcm_expressions):
    ds = rcm_expressions
    assert ds.features == feats.expression_features()
    assert ds["expression_id"] == rcm_release.expression_ids  # image, then sample, then sentence order
    assert ds.num_rows == 47 and len(set(ds["expression_id"])) == ds.num_rows
    assert set(ds["sample_id"]) == set(rcm_release.sample_ids) - set(rcm_release.empty_sentence_sample_ids)
    for r in ds.select(range(10)):
        assert r["expression_id"] == f"{r['sample_id']}:{r['sentence_index']}"
        assert [r["height"], r["width"]] == r["mask"]["size"] == list(rcm_release.sizes_hw[r["image_id"]])
        assert r["image"].size == (r["width"], r["height"])
        assert rle.area(rle.validate(r["mask"])) > 0 and len(r["bbox_xywh"]) == 4
        assert 0 <= r["sentence_index"] < r["num_sentences"]
        assert r["supercategory"] in {s for _, s in fixture.CATEGORIES}
    a, b = rcm_release.shared_sentence_sample_ids
    shared = [r for r in ds.select_columns(["expression_id", "sample_id", "sentence"]) if r["sentence"] == fixture.SHARED_SENTENCE]
    assert sorted(r["sample_id"] for r in shared) == [a, b]  # the same text under two samples: two expressions


def test_b1_keys_and_images_row_equals_input(tmp_path):
    img = fixture.jpeg_bytes(np.zeros((2, 3, 3), dtype=np.uint8))
    samples = [
        {"id": 10, "image_id": 5, "category": "dog", "supercategory": "animal", "label": "dog",
         "sentences": ["left dog", "dog on left"], "bbox": [0.0, 0.0, 2.0, 2.0], "mask": {"counts": "033", "size": [2, 3]}},
        {"id": 11, "image_id": 5, "category": "cat", "supercategory": "animal", "label": "cat",
         "sentences": ["cat"], "bbox": [0.0, 0.0, 2.0, 2.0], "mask": {"counts": "021O1", "size": [2, 3]}},
    ]
    row = {"image": {"bytes": img, "path": "images/x.jpg"}, "image_id": 5, "file_name": "x.jpg", "samples": samples}
    fixture.write_shard(tmp_path / "rel" / fixture.shard_name(0, 1), [row])
    ex = build_split("refcoco_m", "expressions", tmp_path / "rel", tmp_path / "c", split=SPLIT)
    assert ex["expression_id"] == ["10:0", "10:1", "11:0"]
    assert ex["sentence"] == ["left dog", "dog on left", "cat"] and ex["num_sentences"] == [2, 2, 1]
    images = build_split("refcoco_m", "images", tmp_path / "rel", tmp_path / "c", split=SPLIT)
    assert images.features == feats.images_features()
    assert images.num_rows == 1
    assert images.to_list() == [row]  # the mask struct's field order differs, its values do not


def test_images_config(rcm_release, rcm_expressions, tmp_path):
    ds = build_split("refcoco_m", "images", rcm_release.root, tmp_path, split=SPLIT)
    assert ds["image_id"] == rcm_release.image_ids
    released = [r for s in rcm_release.shards for r in fixture.read_shard(rcm_release.root / s)]
    assert ds.to_list() == released
    empty = [s for r in ds for s in r["samples"] if not s["sentences"]]
    assert [s["id"] for s in empty] == rcm_release.empty_sentence_sample_ids  # kept in the images config


def test_with_images_false_drops_the_image_column(rcm_release, rcm_expressions, tmp_path):
    ds = build_split("refcoco_m", "expressions", rcm_release.root, tmp_path, split=SPLIT, with_images=False)
    assert "image" not in ds.features and ds.features == feats.expression_features(with_images=False)
    assert ds.to_list() == rcm_expressions.remove_columns("image").to_list()


def test_both_lines_give_the_same_rows(rcm_release, rcm_expressions, tmp_path):
    """The plain class (the 5.x path) and build_split (load_dataset with trust_remote_code on 3.6) agree."""
    b = builder_class("refcoco_m")(config_name="expressions", data_dir=str(rcm_release.root), cache_dir=str(tmp_path))
    b.download_and_prepare()
    assert b.as_dataset(SPLIT).to_list() == rcm_expressions.to_list()
    # and the rows equal the release read without datasets
    assert rcm_expressions.remove_columns("image").to_list() == release.all_expression_rows(rcm_release.root)


def test_streaming_plain_class(rcm_release, rcm_expressions):
    b = builder_class("refcoco_m")(config_name="expressions", data_dir=str(rcm_release.root))
    rows = list(b.as_streaming_dataset(SPLIT))
    assert [r["expression_id"] for r in rows] == rcm_expressions["expression_id"]
    assert rows[3]["mask"] == rcm_expressions[3]["mask"] and rows[3]["image"].size == rcm_expressions[3]["image"].size


@needs_scripts
def test_streaming_load_dataset(rcm_release, rcm_expressions):
    import datasets

    it = datasets.load_dataset(
        str(REPO / "builders" / "refcoco_m"), "expressions", data_dir=str(rcm_release.root), trust_remote_code=True, streaming=True
    )[SPLIT]
    first = [r for _, r in zip(range(5), it)]
    expected = rcm_expressions.select(range(5))
    assert [r["expression_id"] for r in first] == expected["expression_id"]
    assert [r["mask"] for r in first] == expected["mask"] and [r["sentence"] for r in first] == expected["sentence"]


# ---------------------------------------------------------------- Hub path


def test_hub_download_fetches_only_the_shards(rcm_release, rcm_expressions, tmp_path, monkeypatch):
    source = tmp_path / "hub_repo"
    shutil.copytree(rcm_release.root, source)
    (source / "extra.py").write_text("print('never fetched')\n")
    calls = []
    monkeypatch.setattr(hub, "snapshot_download", fake_snapshot_download(source, calls))
    b = builder_class("refcoco_m")(config_name="expressions", cache_dir=str(tmp_path / "c"))
    b.download_and_prepare()
    assert calls == [{"repo_id": "moondream/refcoco-m", "repo_type": "dataset", "allow_patterns": ["data/validation-*.parquet"]}]
    fetched = sorted(p.relative_to(tmp_path / "snapshot_1").as_posix() for p in (tmp_path / "snapshot_1").rglob("*") if p.is_file())
    assert fetched == rcm_release.shards
    assert b.as_dataset(SPLIT)["expression_id"] == rcm_expressions["expression_id"]


def test_hub_offline_error_says_how_to_pass_data_dir(tmp_path):
    b = builder_class("refcoco_m")(config_name="images", cache_dir=str(tmp_path), repo_id="someone/not-here")
    with pytest.raises(ReleaseNotFoundError, match="RefCOCO-M.*someone/not-here.*data_dir="):
        b.download_and_prepare()


# ---------------------------------------------------------------- bad release input (spec section 6)


def test_no_shard_and_no_folder(tmp_path):
    (tmp_path / "empty" / "data").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"no Parquet shard matches 'data/validation-\*\.parquet'"):
        build_split("refcoco_m", "expressions", tmp_path / "empty", tmp_path / "c", split=SPLIT)
    with pytest.raises(ReleaseNotFoundError, match="does not exist"):
        build_split("refcoco_m", "expressions", tmp_path / "nope", tmp_path / "c", split=SPLIT)


def test_missing_column_is_raised_unwrapped(rcm_release, tmp_path):
    import pyarrow as pa

    root = _copy(rcm_release, tmp_path)
    path = root / fixture.shard_name(1, 2)
    rows = fixture.read_shard(path)
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
    root = _copy(rcm_release, tmp_path)
    rows = fixture.read_shard(root / fixture.shard_name(0, 2))
    img, sid = rows[1]["image_id"], _sample_id(rows, 1, 0)
    _edit_first_shard(root, edit)
    msg = pattern.format(shard=r"data/validation-00000-of-00002\.parquet", img=img, sid=sid)
    with pytest.raises(error, match=msg):
        _read_all(root)


def test_row_errors_reach_the_caller_through_the_builder(rcm_release, tmp_path):
    root = _copy(rcm_release, tmp_path)
    _edit_first_shard(root, lambda rows: _set_mask(rows, 1, 0, counts="5"))
    with pytest.raises(Exception) as info:
        build_split("refcoco_m", "expressions", root, tmp_path / "c", split=SPLIT)
    cause = root_cause(info.value)
    assert isinstance(cause, RLEError) and "runs sum to 5" in str(cause)


def test_mask_sizes_differ_within_an_image(rcm_release, tmp_path):
    root = _copy(rcm_release, tmp_path)
    rows = fixture.read_shard(root / fixture.shard_name(0, 2))
    row = next(i for i, r in enumerate(rows) if len(r["samples"]) > 1)
    a, b = rows[row]["samples"][:2]
    h, w = a["mask"]["size"]
    _edit_first_shard(root, lambda rs: rs[row]["samples"][1].update(mask={"counts": rle.empty(h, w + 2)["counts"], "size": [h, w + 2]}))
    with pytest.raises(ReleaseFormatError, match=rf"image_id {rows[row]['image_id']}.*sample id {b['id']} has mask size \[{h}, {w + 2}\].*sample id {a['id']}.*\[{h}, {w}\]"):
        _read_all(root, allow_empty_masks=True)


def test_mask_size_differs_from_image_size(rcm_release, tmp_path):
    root = _copy(rcm_release, tmp_path)
    rows = fixture.read_shard(root / fixture.shard_name(0, 2))
    h, w = rows[0]["samples"][0]["mask"]["size"]
    big = fixture.jpeg_bytes(np.zeros((h + 1, w, 3), dtype=np.uint8))
    _edit_first_shard(root, lambda rs: rs[0].update(image={"bytes": big, "path": rs[0]["image"]["path"]}))
    with pytest.raises(ReleaseFormatError, match=rf"image_id {rows[0]['image_id']}.*mask size \[{h}, {w}\] differs from the image size \[{h + 1}, {w}\]"):
        _read_all(root)
    assert len(_read_all(root, check_image_size=False)) == 12


def test_unreadable_image_and_shard(rcm_release, tmp_path):
    root = _copy(rcm_release, tmp_path)
    rows = fixture.read_shard(root / fixture.shard_name(0, 2))
    _edit_first_shard(root, lambda rs: rs[2].update(image={"bytes": b"not an image", "path": "images/x.jpg"}))
    with pytest.raises(ReleaseFormatError, match=rf"row 2 \(image_id {rows[2]['image_id']}\): cannot open the embedded image"):
        _read_all(root)
    (root / fixture.shard_name(1, 2)).write_bytes(b"PAR1 but not really")
    with pytest.raises(ReleaseFormatError, match="validation-00001-of-00002.parquet: not a readable Parquet file"):
        build_split("refcoco_m", "images", root, tmp_path / "c", split=SPLIT)


def test_duplicate_sample_id(rcm_release, tmp_path):
    root = _copy(rcm_release, tmp_path)
    rows = fixture.read_shard(root / fixture.shard_name(0, 2))
    first = rows[0]["samples"][0]["id"]
    _edit_first_shard(root, lambda rs: rs[3]["samples"][0].update(id=first))
    with pytest.raises(ReleaseFormatError, match=rf"row 3 \(image_id {rows[3]['image_id']}\): duplicate sample id {first} \(already used under image_id {rows[0]['image_id']}\)"):
        _read_all(root)


def test_duplicate_image_id(rcm_release, tmp_path):
    root = _copy(rcm_release, tmp_path)
    rows = fixture.read_shard(root / fixture.shard_name(1, 2))
    dup = fixture.read_shard(root / fixture.shard_name(0, 2))[0]["image_id"]
    for s in rows[0]["samples"]:
        s["image_id"] = dup
    rows[0]["image_id"] = dup
    fixture.write_shard(root / fixture.shard_name(1, 2), rows)
    with pytest.raises(ReleaseFormatError, match=rf"00001-of-00002.parquet: row 0 \(image_id {dup}\): duplicate image_id {dup} \(first seen at data/validation-00000-of-00002.parquet: row 0\)"):
        _read_all(root)


def test_empty_gt_mask(rcm_release, tmp_path):
    root = _copy(rcm_release, tmp_path)
    rows = fixture.read_shard(root / fixture.shard_name(0, 2))
    h, w = rows[1]["samples"][0]["mask"]["size"]
    sid = rows[1]["samples"][0]["id"]
    _edit_first_shard(root, lambda rs: _set_mask(rs, 1, 0, counts=rle.empty(h, w)["counts"]))
    with pytest.raises(ReleaseFormatError, match=rf"id {sid}\): the mask has zero area.*allow_empty_masks=True"):
        _read_all(root)
    rows = release.all_expression_rows(root, options=release.ReadOptions(allow_empty_masks=True, read_images=False))
    assert rle.area(next(r for r in rows if r["sample_id"] == sid)["mask"]) == 0


def test_empty_sentence_list_is_a_warning(rcm_release, caplog):
    with caplog.at_level(logging.WARNING, logger="perckit.refcoco_m.release"):
        rows = release.all_expression_rows(rcm_release.root)
    (sid,) = rcm_release.empty_sentence_sample_ids
    assert f"sample id {sid} has no sentence" in caplog.text
    assert not any(r["sample_id"] == sid for r in rows)


def test_image_meta_column_is_ignored(rcm_release, tmp_path):
    import pyarrow as pa

    root = _copy(rcm_release, tmp_path)
    path = root / fixture.shard_name(0, 2)
    rows = fixture.read_shard(path)
    schema = fixture.arrow_schema().append(pa.field("image_meta", pa.struct([("width", pa.int64()), ("height", pa.int64()), ("image_id", pa.int64())])))
    for r in rows:
        r["image_meta"] = {"width": 1, "height": 1, "image_id": r["image_id"]}
    fixture.write_shard(path, rows, schema)
    assert release.all_expression_rows(root) == release.all_expression_rows(rcm_release.root)


def test_bad_option_value(rcm_release, tmp_path):
    with pytest.raises(OptionError, match="with_images"):
        build_split("refcoco_m", "expressions", rcm_release.root, tmp_path, split=SPLIT, with_images="no")


# ---------------------------------------------------------------- metric: test vectors


M1_REFS = [REF("e1", "033"), REF("e2", "033"), REF("e3", "033", category="cat")]
M1_PREDS = [PRED("e3", "06"), PRED("e1", "021O1"), PRED("e2", "033")]  # matched by id, not position


def test_m1_through_evaluate(refer_metric):
    out = refer_metric.compute(predictions=M1_PREDS, references=M1_REFS, return_per_example=True)
    assert out["miou"] == pytest.approx(2 / 3) and out["ciou"] == pytest.approx(8 / 13)
    assert out["precision@0.5"] == 1.0
    for t in ("0.6", "0.7", "0.8", "0.9"):
        assert out[f"precision@{t}"] == pytest.approx(1 / 3)
    assert out["num_examples"] == 3
    assert out["per_example"] == [
        {"expression_id": "e1", "iou": 0.5, "intersection": 2, "union": 4},
        {"expression_id": "e2", "iou": 1.0, "intersection": 3, "union": 3},
        {"expression_id": "e3", "iou": 0.5, "intersection": 3, "union": 6},
    ]
    assert out["per_category"] == {"cat": {"miou": 0.5, "ciou": 0.5, "num_examples": 1},
                                   "dog": {"miou": 0.75, "ciou": 5 / 7, "num_examples": 2}}
    assert out["per_supercategory"] == {"animal": {"miou": out["miou"], "ciou": out["ciou"], "num_examples": 3}}
    assert out == core.refer_iou(M1_PREDS, M1_REFS, return_per_example=True)
    json.dumps(out, sort_keys=True, indent=2)  # the report is plain JSON


def test_m2_empty_prediction():
    out = core.refer_iou([PRED("e", "6")], [REF("e", "033")], return_per_example=True)
    assert out["per_example"] == [{"expression_id": "e", "iou": 0.0, "intersection": 0, "union": 3}]


def test_m3_empty_gt_and_empty_prediction(refer_metric):
    assert refer_metric.compute(predictions=[PRED("e", "6")], references=[REF("e", "6")])["miou"] == 1.0
    assert core.refer_iou([PRED("e", "6")], [REF("e", "6")], empty_union_iou=0.0)["miou"] == 0.0


def test_m4_wrong_size_raises_or_resizes(refer_metric):
    with pytest.raises(PredictionError, match=r"expression 'e1'.*\[3, 2\].*\[2, 3\]"):
        refer_metric.compute(predictions=[PRED("e1", "6", (3, 2))], references=[REF("e1", "033")])
    big = np.repeat(np.repeat(np.array([[1, 0, 0], [1, 1, 0]], dtype=bool), 2, axis=0), 2, axis=1)
    out = refer_metric.compute(predictions=[{"expression_id": "e1", "mask": rle.encode(big)}], references=[REF("e1", "033")],
                               resize_predictions="nearest")
    assert out["miou"] == 0.5


def test_gt_as_prediction_is_one(rcm_expressions, refer_metric):
    refs = [to_metric_reference(r) for r in rcm_expressions.remove_columns("image")]
    assert set(refs[0]) == {"expression_id", "mask", "category", "supercategory"}
    preds = [feats.to_metric_prediction(r) for r in refs]
    out = refer_metric.compute(predictions=preds, references=refs)
    assert out["miou"] == out["ciou"] == 1.0
    assert all(out[f"precision@{t}"] == 1.0 for t in ("0.5", "0.6", "0.7", "0.8", "0.9"))
    assert out["num_examples"] == rcm_expressions.num_rows
    assert all(b["miou"] == 1.0 for b in out["per_category"].values())
    assert sum(b["num_examples"] for b in out["per_supercategory"].values()) == rcm_expressions.num_rows


# ---------------------------------------------------------------- metric: bad input


@pytest.mark.parametrize(
    "preds, refs, error, match",
    [
        ([PRED("e1", "033"), PRED("e1", "033")], [REF("e1", "033")], PredictionError, "duplicate expression_id 'e1'"),
        ([PRED("e1", "033"), PRED("zz", "033")], [REF("e1", "033")], PredictionError, r"unknown to the references.*'zz'"),
        ([PRED("e1", "033")], [REF("e1", "033"), REF("e2", "033")], PredictionError, r"no prediction for 1 reference expression_id.*'e2'"),
        ([PRED("e1", "033")], [REF("e1", "033"), REF("e1", "033")], PredictionError, "references: duplicate expression_id 'e1'"),
        ([PRED("e1", "5")], [REF("e1", "033")], RLEError, r"expression 'e1': predicted mask.*sum to 5"),
        ([PRED("e1", "033")], [REF("e1", "03")], RLEError, r"expression 'e1': ground-truth mask.*sum to 3"),
    ],
)
def test_metric_errors(preds, refs, error, match):
    with pytest.raises(error, match=match):
        core.refer_iou(preds, refs)


@pytest.mark.parametrize("option, value", [("thresholds", [1.5]), ("empty_union_iou", -1), ("resize_predictions", "bilinear"), ("return_per_example", "yes")])
def test_metric_bad_options(option, value):
    with pytest.raises(OptionError, match=option):
        core.refer_iou([PRED("e", "033")], [REF("e", "033")], **{option: value})


def test_metric_thresholds_option(refer_metric):
    out = refer_metric.compute(predictions=M1_PREDS, references=M1_REFS, thresholds=[0.25, 0.75])
    assert out["precision@0.25"] == 1.0 and out["precision@0.75"] == pytest.approx(1 / 3)
    assert "precision@0.5" not in out


def _dense_report(preds, gts):
    inter = [int((p & g).sum()) for p, g in zip(preds, gts)]
    union = [int((p | g).sum()) for p, g in zip(preds, gts)]
    ious = [i / u if u else 1.0 for i, u in zip(inter, union)]
    return ious, sum(inter) / sum(union)


def test_metric_rle_equals_dense_numpy():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(1, 6).flatmap(lambda n: st.tuples(st.integers(1, 9), st.integers(1, 9)).flatmap(
        lambda hw: st.lists(st.tuples(hnp.arrays(bool, hw), hnp.arrays(bool, hw)), min_size=n, max_size=n))))
    def check(pairs):
        gts = [g for _, g in pairs]
        preds = [p for p, _ in pairs]
        refs = [{"expression_id": f"{i}:0", "mask": rle.encode(g), "category": "c", "supercategory": "s"} for i, g in enumerate(gts)]
        # predictions in the other accepted forms: binary arrays and pycocotools' bytes counts
        pr = [{"expression_id": f"{i}:0", "mask": p if i % 2 else {**rle.encode(p), "counts": rle.encode(p)["counts"].encode()}}
              for i, p in enumerate(preds)]
        out = core.refer_iou(pr, refs)
        ious, ciou = (None, None) if not any((p | g).any() for p, g in pairs) else _dense_report(preds, gts)
        if ious is not None:
            assert out["miou"] == pytest.approx(float(np.mean(ious)), rel=1e-12)
            assert out["ciou"] == ciou
        assert out["num_examples"] == len(pairs)

    check()


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


# ---------------------------------------------------------------- evaluate distributed mode


def _perturbed(refs):
    preds = []
    for i, r in enumerate(refs):
        m = rle.decode(r["mask"])
        if i % 3 == 1:
            m = np.roll(m, 2, axis=1)
        elif i % 3 == 2:
            m = np.zeros_like(m)
        preds.append({"expression_id": r["expression_id"], "mask": rle.encode(m)})
    return preds


def test_distributed_matches_single_process(rcm_expressions, refer_metric, tmp_path):
    refs = [to_metric_reference(r) for r in rcm_expressions.remove_columns("image")]
    preds = _perturbed(refs)
    options = {"return_per_example": True}
    single = refer_metric.compute(predictions=preds, references=refs, **options)
    assert 0 < single["miou"] < 1
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"predictions": preds, "references": refs, "options": options}))
    dist = run_distributed("refer_iou", inputs, 2, tmp_path, "refer-iou-dist", 5, timeout=600)
    # evaluate gathers the shards in process order: the per-example order differs, every number is identical.
    per_example = dist.pop("per_example")
    expected = dict(single)
    assert sorted(per_example, key=lambda r: r["expression_id"]) == sorted(expected.pop("per_example"), key=lambda r: r["expression_id"])
    assert dist == json.loads(json.dumps(expected))


def test_add_batch_in_any_batch_sizes(rcm_expressions, refer_metric):
    refs = [to_metric_reference(r) for r in rcm_expressions.remove_columns("image")]
    preds = _perturbed(refs)
    whole = refer_metric.compute(predictions=preds, references=refs)
    for bs in (1, 16):
        for i in range(0, len(refs), bs):
            refer_metric.add_batch(predictions=preds[i : i + bs], references=refs[i : i + bs])
        assert refer_metric.compute() == whole
