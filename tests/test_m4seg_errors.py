"""Spec section 6: bad input raises a ValueError naming the split, file, example_id and field (builder and metric)."""

import copy
import gzip
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.harness import messages
from helpers.m4seg import NO_METEOR, R, S1_PRED, S1_REF

from perckit.hf.entrypoints import build_split
from perckit.errors import OptionError, PredictionError, ReleaseFormatError, ReleaseNotFoundError
from perckit.m4seg import metric as core
from perckit.m4seg.read import ids as m4ids
from perckit.m4seg import layout as m4layout
from perckit.m4seg.read import native as m4native
from perckit.m4seg.read import parquet as m4parquet
from perckit.m4seg import rows as m4rows

STATE = m4rows.ConvertState("test", "test-00000-of-00001.parquet")
NSTATE = m4rows.ConvertState("test", "m4seg_test.json.gz")


def _rec():
    return {
        "example_id": "e1", "pair_id": "e1", "dataset_name": "coco_objects", "type": "spatial", "granularity": "object",
        "q": "?", "a": "chair_101 and cup_201",
        "images": [{"image_id": "a", "path": "a.jpg", "height": 1, "width": 4}, {"image_id": "b", "path": "b.jpg", "height": 1, "width": 2}],
        "groundings": [
            {"image_index": 1, "name": "chair", "annotation_ids": ["1"], "object_annotation_id": "1", "answer_span": [0, 9],
             "bbox": [0.0, 0.0, 2.0, 1.0], "segmentation": R("022", (1, 4))},
            {"image_index": 2, "name": "cup", "annotation_ids": ["2"], "object_annotation_id": None, "answer_span": [14, 21],
             "bbox": [0.0, 0.0, 1.0, 1.0], "segmentation": R("011", (1, 2))},
        ],
    }


def _parquet_row(rec):
    """The record converted by the column path (a batch of one)."""
    from perckit.m4seg.read import parquet as m4parquet

    batch = pa.Table.from_pylist([rec]).to_batches()[0]
    return m4parquet.batch_to_table(batch, STATE, m4parquet.row_schema()).to_pylist()[0]


def _native():
    return {
        "pair_id": 7, "q": "?", "a": "chair_101 and cup_201", "image_paths": ["x/a.jpg", "x/b.jpg"], "image_sizes": [[1, 4], [1, 2]],
        "groundings": {"img_1": [{"name": "chair", "annotation_id": 1, "segmentation": R("022", (1, 4))}],
                       "img_2": [{"name": "cup", "annotation_id": 2, "segmentation": R("011", (1, 2))}]},
    }


def _where_ok(msg, field, file="test-00000-of-00001.parquet"):
    assert "test split" in msg and file in msg and "'e1'" in msg and field in msg, msg


def test_parquet_record_is_valid():
    row = _parquet_row(_rec())
    assert row["groundings"][1]["object_annotation_id"] is None and row["type"] == "spatial"


@pytest.mark.parametrize("field, edit, expect", [
    ("image_index", lambda r: r["groundings"][0].update(image_index=0), "expected 1..2"),
    ("image_index", lambda r: r["groundings"][1].update(image_index=3), "expected 1..2"),
    ("segmentation", lambda r: r["groundings"][0].update(segmentation=R("011", (1, 2))), "expected size [1, 4], got [1, 2]"),
    ("segmentation", lambda r: r["groundings"][0].update(segmentation=R("0!2", (1, 4))), "outside the COCO alphabet"),
    ("segmentation", lambda r: r["groundings"][0].update(segmentation=R("05", (1, 4))), "runs sum to 5"),
    ("answer_span", lambda r: r["groundings"][0].update(answer_span=[0, 9, 1]), "found [0, 9, 1]"),
    ("answer_span", lambda r: r["groundings"][0].update(answer_span=[15, 40]), "<= 21 (the answer's length), found [15, 40]"),
    ("bbox", lambda r: r["groundings"][0].update(bbox=[1.0, 2.0]), "4 numbers"),
])
def test_parquet_bad_fields(field, edit, expect):
    rec = _rec()
    edit(rec)
    with pytest.raises(ValueError) as info:
        _parquet_row(rec)
    _where_ok(str(info.value), field)
    assert expect in str(info.value)


def test_native_record_is_valid():
    row = m4rows.native_to_row(_native(), NSTATE, example_id="7")
    assert row["example_id"] == "7" and row["groundings"][1]["answer_span"] == [14, 21]
    assert row["images"][0]["image_id"] == "a"


@pytest.mark.parametrize("edit, expect", [
    (lambda e: e["groundings"].update(img_3=[]), "groundings.img_3: expected keys img_1..img_2"),
    (lambda e: e["groundings"]["img_1"].append({"name": "table", "segmentation": R("22", (1, 4))}), "image 1: expected 2 distinct entity code(s)"),
    (lambda e: e.update(image_sizes=[[2, 3], [1, 2]]), "matches neither [H, W] nor [W, H]"),
    # masks of two sizes, [H, W] and [W, H]: neither order is the image's
    (lambda e: e["groundings"]["img_2"].append({"name": "cup", "segmentation": R("02", (2, 1))}), "image_sizes[1] = [1, 2] matches neither"),
    (lambda e: e.update(image_paths=[["x/a.jpg"], "x/b.jpg"]), "image_paths[0]: expected a relative path string"),
    (lambda e: e["groundings"]["img_2"][0].update(segmentation=R("0111", (1, 2))), "runs sum to 4"),
    (lambda e: e.update(image_sizes=[[1, 4]]), "one size per image path"),
    (lambda e: e["groundings"].update(image_1=[]), "expected keys 'img_1', 'img_2'"),
])
def test_native_bad_fields(edit, expect):
    ex = _native()
    edit(ex)
    with pytest.raises(ValueError) as info:
        m4rows.native_to_row(ex, NSTATE, example_id="e1")
    msg = str(info.value)
    assert expect in msg and "m4seg_test.json.gz" in msg and "'e1'" in msg, msg


def test_native_forms_polygon_uncompressed_and_wh_sizes():
    ex = _native()
    ex["image_sizes"] = [[4, 1], [2, 1]]  # [W, H]
    ex["groundings"]["img_1"][0]["segmentation"] = [[0, 0, 2, 0, 2, 1, 0, 1]]
    ex["groundings"]["img_2"][0]["segmentation"] = {"size": [1, 2], "counts": [0, 1, 1]}
    row = m4rows.native_to_row(ex, m4rows.ConvertState("test", "f", "auto"), example_id="e1")
    assert [im["height"] for im in row["images"]] == [1, 1]
    assert row["groundings"][0]["segmentation"] == R("022", (1, 4)) and row["groundings"][1]["segmentation"] == R("011", (1, 2))
    assert row["groundings"][0]["bbox"] == [0.0, 0.0, 2.0, 1.0]
    forced = m4rows.native_to_row(ex, m4rows.ConvertState("test", "f", "wh"), example_id="e1")
    assert forced["images"] == row["images"]
    with pytest.raises(ValueError, match="native_image_size_order"):
        m4rows.ConvertState("test", "f", "xy")


def test_missing_files_name_both_paths(tmp_path):
    (tmp_path / "rel").mkdir()
    with pytest.raises(ReleaseNotFoundError) as info:
        build_split("m4seg", "default", tmp_path / "rel", tmp_path / "c", split="test")
    msg = str(info.value)
    assert "annotations/m4seg_train.json.gz" in msg and "data/train-*.parquet" in msg and "train split" in msg
    with pytest.raises(ReleaseNotFoundError, match="source='native'.*m4seg_test.json.gz"):
        m4layout.resolve_source(tmp_path / "rel", "test", "native")
    with pytest.raises(ReleaseNotFoundError, match="does not exist"):
        build_split("m4seg", "default", tmp_path / "nowhere", tmp_path / "c", split="test")


def test_unknown_options(tmp_path):
    from perckit.hf.entrypoints import builder_class

    cls = builder_class("m4seg")
    for kwargs, name in (({"source": "csv"}, "source"), ({"native_image_size_order": "xy"}, "native_image_size_order"),
                         ({"splits": ("validation",)}, "splits")):
        with pytest.raises(OptionError, match=name):
            cls(config_name="default", data_dir=str(tmp_path), cache_dir=str(tmp_path / "c"), **kwargs)
    for kwargs in ({"matching": "optimal"}, {"miou_unit": "pixel"}, {"i_mode": "x"}, {"ss_level": "word"}, {"embed_fn": "glove"},
                   {"recall_text_encoder": "t5"}, {"resize_predictions": "bilinear"}, {"metrics": ["bleu"]}, {"siou_threshold": 2}):
        with pytest.raises(OptionError):
            core.compute([S1_PRED], [S1_REF], **kwargs)


def _edit_release(src, tmp_path, split, fn):
    root = tmp_path / "rel"
    shutil.copytree(src, root)
    fn(root)
    return root


def test_duplicate_example_id_in_builder_output(m4_release, tmp_path):
    def dup(root):
        path = root / "data/train-00002-of-00003.parquet"
        t = pq.read_table(path).to_pylist()
        t[-1]["example_id"] = "5000000"  # the id of the first row of the first shard
        pq.write_table(pa.Table.from_pylist(t), path)
        (root / "annotations").rename(root / "no_annotations")

    root = _edit_release(m4_release.root, tmp_path, "train", dup)
    for nproc in (None, 2):
        from perckit.hf.entrypoints import builder_class

        b = builder_class("m4seg")(config_name="default", data_dir=str(root), cache_dir=str(tmp_path / f"c{nproc}"), splits=("train",))
        with pytest.raises(Exception) as info:
            b.download_and_prepare(num_proc=nproc)
        assert any("duplicate example_id '5000000'" in m and "train split" in m for m in messages(info.value)), messages(info.value)


def test_native_prepass_rejects_duplicate_example_ids(tmp_path):
    path = tmp_path / "m4seg_test.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump([{**_native(), "example_id": "x"}, {**_native(), "example_id": "x"}], f)
    with pytest.raises(ReleaseFormatError, match="duplicate example_id 'x'"):
        m4native.scan_native(open, str(path), "test", need_count=True)
    scan = m4native.scan_native(open, str(path), "test", need_count=False)
    with pytest.raises(ReleaseFormatError, match="duplicate example_id 'x'"):
        list(_guarded(m4native.iter_native(open, m4native.native_shards(str(path), scan, 1), "test")))


def _guarded(rows):
    guard = m4ids.IdGuard("test split")
    for r in rows:
        guard.add(r["example_id"])
        yield r
    guard.flush()


def test_id_guard_and_occurrences():
    g = m4ids.IdGuard("w")
    g.BLOCK = 3
    for i in range(10):
        g.add(str(i))
    with pytest.raises(ReleaseFormatError, match="duplicate example_id '4'"):
        g.add("4")
        g.flush()
    occ = m4ids.occurrence_index(["a", "b", "a", "c", "a", "b"])
    assert occ.tolist() == [0, 0, 1, -1, 2, 1]
    assert m4ids.derived_example_id("a", -1) == "a" and m4ids.derived_example_id("a", 2) == "a#2"


# ---------------------------------------------------------------- metric side


def _compute(preds, refs, **kw):
    return core.compute(preds, refs, **{**NO_METEOR, **kw})


def test_metric_reference_errors():
    for edit, expect in (
        (lambda r: r["groundings"][0].update(image_index=3), "reference 's1': groundings[0].image_index: expected 1..2"),
        (lambda r: r["groundings"][0].update(segmentation=R("011", (1, 2))), "reference 's1': groundings[0].segmentation: expected the size of image 1"),
        (lambda r: r["groundings"][0].update(segmentation=R("0!", (1, 4))), "reference 's1': groundings[0].segmentation"),
        (lambda r: r["groundings"][0].update(answer_span=[0]), "reference 's1': groundings[0].answer_span"),
        (lambda r: r["groundings"][0].update(answer_span=[30, 99]), "found [30, 99]"),
    ):
        ref = copy.deepcopy(S1_REF)
        edit(ref)
        with pytest.raises(ValueError) as info:
            _compute([S1_PRED], [ref])
        assert expect in str(info.value), str(info.value)


def test_metric_prediction_errors():
    bad_index = copy.deepcopy(S1_PRED)
    bad_index["groundings"][0]["image_index"] = 0
    with pytest.raises(PredictionError, match="prediction 's1': groundings\\[0\\].image_index: expected 1..2"):
        _compute([bad_index], [S1_REF])
    bad_size = copy.deepcopy(S1_PRED)
    bad_size["groundings"][0]["segmentation"] = R("02", (1, 2))
    with pytest.raises(PredictionError, match="predicted mask size \\[1, 2\\] differs from the size of image 1 \\[1, 4\\].*resize_predictions"):
        _compute([bad_size], [S1_REF])
    assert _compute([bad_size], [S1_REF], resize_predictions="nearest")["num_pred_groundings"] == 2
    bad_counts = copy.deepcopy(S1_PRED)
    bad_counts["groundings"][0]["segmentation"] = R("9", (1, 4))
    with pytest.raises(PredictionError, match="runs sum to 9"):
        _compute([bad_counts], [S1_REF])
    with pytest.raises(PredictionError, match="duplicate example_id 's1'"):
        _compute([S1_PRED, S1_PRED], [S1_REF])
    with pytest.raises(PredictionError, match="'zzz' is unknown"):
        _compute([S1_PRED, {**S1_PRED, "example_id": "zzz"}], [S1_REF])
    with pytest.raises(PredictionError, match="no prediction for 1 reference"):
        _compute([], [S1_REF])
    with pytest.raises(PredictionError, match="references: duplicate example_id"):
        _compute([S1_PRED], [S1_REF, S1_REF])


def test_scan_parquet_ids_counts_in_arrow_and_names_the_first_repeat(m4_release, tmp_path):
    """The id scan run before num_proc workers: every shard's example_id column as str() of each value,
    numbered by pyarrow's dictionary encoding; the first repeat in order is named (also one that only str()
    makes, an int 7 in one shard and "7" in another, and two nulls, read as 'None'), across shards."""
    files = sorted(str(p) for p in (m4_release.root / "data").glob("train-*.parquet"))
    total = sum(pq.read_metadata(p).num_rows for p in files)
    assert m4parquet.scan_parquet_ids(open, files, "train") == total == 48

    def shard(name, ids):
        path = tmp_path / name
        rows = pq.read_table(files[0]).slice(0, len(ids)).to_pylist()
        for r, i in zip(rows, ids):
            r["example_id"] = i
        pq.write_table(pa.Table.from_pylist(rows), path)
        return str(path)

    cases = [
        ([shard("a.parquet", ["a", "b"]), shard("b.parquet", ["c", "a"])], "duplicate example_id 'a'"),
        ([shard("i.parquet", [7, 8]), shard("s.parquet", ["9", "7"])], "duplicate example_id '7'"),
        ([shard("n.parquet", ["x", None, None])], "duplicate example_id 'None'"),
        ([shard("o.parquet", ["a", "b", "c", "b", "a"])], "duplicate example_id 'b'"),  # the first repeat in order
        ([shard("f.parquet", [1.0, 2.0])], None),
    ]
    for paths, error in cases:
        if error is None:
            assert m4parquet.scan_parquet_ids(open, paths, "train") == 2
            continue
        with pytest.raises(ReleaseFormatError, match=error):
            m4parquet.scan_parquet_ids(open, paths, "train")


def test_scan_parquet_ids_takes_equal_hashes_to_the_exact_scan(m4_release, tmp_path, monkeypatch):
    """Distinct hashes vouch for distinct ids; equal ones (a repeat, or a collision) go to the exact dictionary
    scan, which accepts distinct ids whatever their hashes and names the first repeat."""
    def same(off, data, out):  # every id collides
        for i in range(out.shape[0]):
            out[i] = 1

    monkeypatch.setattr(m4parquet, "_id_hashes", same)
    files = sorted(str(p) for p in (m4_release.root / "data").glob("train-*.parquet"))
    assert m4parquet.scan_parquet_ids(open, files, "train") == 48
    path = tmp_path / "d.parquet"
    rows = pq.read_table(files[0]).slice(0, 3).to_pylist()
    rows[2]["example_id"] = rows[0]["example_id"]
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(ReleaseFormatError, match=f"duplicate example_id {rows[0]['example_id']!r}"):
        m4parquet.scan_parquet_ids(open, [str(path)], "train")
