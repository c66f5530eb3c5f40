"""The M4Seg builder: native JSON == Parquet row by row, features, ids, both datasets lines, streaming, num_proc,
images, the Hub path (mocked) and spec vector B1."""

import gzip
import json
import logging
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.common import DS_MAJOR, REPO, needs_scripts
from helpers.fake_hub import fake_snapshot_download
from helpers.harness import messages as _messages

from perckit import rle
from perckit.hf.entrypoints import build_split
from perckit.errors import ReleaseFormatError, ReleaseNotFoundError
from perckit.m4seg import features as feats
from perckit.m4seg import layout as m4layout
from perckit.m4seg.read import native as m4native


def test_native_and_parquet_give_identical_rows(m4_native, m4_parquet, m4_release):
    for split, ids in (("train", m4_release.train_ids), ("test", m4_release.test_ids)):
        a, b = m4_native[split], m4_parquet[split]
        assert a.features == b.features == feats.row_features()
        assert a.num_rows == b.num_rows == len(ids)
        for ra, rb in zip(a, b):
            assert ra == rb, ra["example_id"]
        assert a["example_id"] == ids  # rows in file order, keyed by example_id


def test_rows_and_quirks(m4_parquet, m4_release):
    train, test = m4_parquet["train"], m4_parquet["test"]
    assert sum(len(r["groundings"]) for r in train) == m4_release.num_groundings["train"]
    # test ids are the pair ids; train repeats pair ids, so example ids get #k suffixes
    assert all(r["example_id"] == r["pair_id"] for r in test)
    repeated = [r for r in train if r["example_id"] != r["pair_id"]]
    assert repeated and all(r["example_id"].startswith(r["pair_id"] + "#") for r in repeated)
    assert len(set(train["pair_id"])) < train.num_rows
    assert {r["granularity"] for r in train} == {"object", "part"}
    assert all(feats.SOURCE_GRANULARITY[r["dataset_name"]] == r["granularity"] for r in train)
    assert any(len(g["annotation_ids"]) == 2 for r in train for g in r["groundings"])  # a combined grounding
    assert any(len(r["images"]) == 3 for r in train) and all(2 <= len(r["images"]) <= 3 for r in train)
    for r in list(train) + list(test):
        for g in r["groundings"]:
            im = r["images"][g["image_index"] - 1]
            assert g["segmentation"]["size"] == [im["height"], im["width"]]
            rle.validate(g["segmentation"])
            assert g["bbox"] == rle.to_bbox(g["segmentation"])
            assert len(g["answer_span"]) == 2
    # ADE20K objects and ADE20KPart234 keep separate image roots
    paths = {im["path"].split("/images/")[0] for r in train for im in r["images"] if "ADE_" in im["path"]}
    assert paths <= {"Part_Segm/ADE20KPart234", "Semantic_Segm/ade20k_instances"}


#: The M4Seg card's "Decode a mask" snippet, as the card prints it (``example`` is a row of the test split).
CARD_DECODE_SNIPPET = """
from pycocotools import mask as mask_utils

grounding = example["groundings"][0]
rle = grounding["segmentation"]
mask = mask_utils.decode({
    "size": rle["size"],
    "counts": rle["counts"].encode("ascii"),
})
"""
#: The card's field list: every row has these names, as the release's own rows do.
CARD_FIELDS = {"example_id", "pair_id", "dataset_name", "type", "granularity", "q", "a", "images", "groundings"}
CARD_GROUNDING_FIELDS = {"image_index", "name", "annotation_ids", "object_annotation_id", "answer_span", "bbox", "segmentation"}


def test_the_cards_snippet_runs_unchanged_on_perckit_rows(m4_parquet, m4_native):
    """Rows keep the release's field names (issue 30): code written against load_dataset("kanguyen-vn/M4Seg")
    runs on perckit's rows, from either source."""
    for rows in (m4_parquet["test"], m4_native["test"]):
        assert set(rows.column_names) == CARD_FIELDS
        example = next(r for r in rows if r["groundings"])
        assert set(example["groundings"][0]) == CARD_GROUNDING_FIELDS
        scope = {"example": example}
        exec(CARD_DECODE_SNIPPET, scope)
        g = example["groundings"][0]
        assert scope["mask"].shape == tuple(g["segmentation"]["size"]) and scope["mask"].dtype == np.uint8
        np.testing.assert_array_equal(scope["mask"].astype(bool), rle.decode(g["segmentation"]))
        assert g["bbox"] == rle.to_bbox(g["segmentation"])


def test_auto_source_and_size_order_options(m4_release, m4_parquet, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg"):
        auto = build_split("m4seg", "default", m4_release.root, tmp_path / "a", split="test")
    assert auto.to_list() == m4_parquet["test"].to_list()
    # issue 14: auto reads the Parquet when both exist (it read the native file before), so no size warning
    assert "only as [W, H]" not in caplog.text
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg"):
        native = build_split("m4seg", "default", m4_release.root, tmp_path / "n", split="test", source="native")
    assert "only as [W, H]" in caplog.text  # the native file is read and its PASCAL sizes are [W, H]
    assert native.to_list() == auto.to_list()
    only_parquet = tmp_path / "rel"
    shutil.copytree(m4_release.root / "data", only_parquet / "data")
    assert build_split("m4seg", "default", only_parquet, tmp_path / "b", split="test").to_list() == auto.to_list()
    only_native = tmp_path / "rel_native"
    shutil.copytree(m4_release.root / "annotations", only_native / "annotations")
    assert build_split("m4seg", "default", only_native, tmp_path / "d", split="test").to_list() == auto.to_list()
    with pytest.raises(Exception) as info:  # forcing [H, W] breaks on the PASCAL masks
        build_split("m4seg", "default", m4_release.root, tmp_path / "c", split="test", native_image_size_order="hw", splits=("test",),
                    source="native")  # auto would read the Parquet, which has no image_sizes
    assert any("expected size" in m and "m4seg_test.json.gz" in m for m in _messages(info.value))


def test_both_lines_give_the_same_rows(m4_release, m4_parquet, tmp_path):
    """The plain class (the 5.x path) and load_dataset (3.6) build identical rows."""
    from perckit.hf.entrypoints import builder_class

    b = builder_class("m4seg")(config_name="default", data_dir=str(m4_release.root), cache_dir=str(tmp_path), source="parquet")
    b.download_and_prepare()
    for split in ("train", "test"):
        assert b.as_dataset(split).to_list() == m4_parquet[split].to_list()


def test_num_proc_2_same_rows(m4_release, m4_parquet, tmp_path):
    from perckit.hf.entrypoints import builder_class

    for source in ("native", "parquet"):
        b = builder_class("m4seg")(config_name="default", data_dir=str(m4_release.root), cache_dir=str(tmp_path / source),
                                   source=source, splits=("train",))
        b.download_and_prepare(num_proc=2)
        assert b.as_dataset("train").to_list() == m4_parquet["train"].to_list(), source


def test_native_shards_are_contiguous_ranges(m4_release):
    path = str(m4layout.native_path(m4_release.root, "train"))
    scan = m4native.scan_native(open, path, "train", need_count=True)
    assert scan.count == 48 and scan.occurrence is not None and (scan.occurrence >= 0).any()
    shards = m4native.native_shards(path, scan, 3)
    assert shards[0].start == 0 and shards[-1].stop is None  # the last range is open-ended
    assert all(a.stop == b.start for a, b in zip(shards, shards[1:])) and len(shards[-1].occurrence) == 48 - shards[-1].start
    rows = [r["example_id"] for s in shards for r in m4native.iter_native(open, [s], "train")]
    assert rows == m4_release.train_ids


def test_prepass_reads_awkward_pair_ids_and_shards_read_them(tmp_path):
    """The prepass (every example parsed by orjson) reads pair ids with quotes, brackets and non-ASCII text around them,
    integer and float ids; every split into shards gives the same ids in file order."""
    texts = ['a } b', 'quote \\" and {"pair_id": 9}', "ünï ] [", "plain", "x\\\\", "y", "z"]
    exs = [{"a": t, "pair_id": pid, "image_paths": ["p.jpg"], "image_sizes": [[1, 2]], "groundings": {}}
           for t, pid in zip(texts, ["a", 'q"uote', 7, "a", "ünï", 7, "b"])]
    path = tmp_path / "m4seg_train.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(exs, f, indent=1, ensure_ascii=False)
    scan = m4native.scan_native(open, str(path), "train", need_count=True)
    assert scan.count == 7 and scan.occurrence.tolist() == [0, -1, 0, 1, -1, 1, -1]
    expected = ["a#0", 'q"uote', "7#0", "a#1", "ünï", "7#1", "b"]
    for n in (1, 2, 3, 7):
        shards = m4native.native_shards(str(path), scan, n)
        assert len(shards) == n
        rows = [r for s in shards for r in m4native.iter_native(open, [s], "train")]
        assert [r["example_id"] for r in rows] == expected and [r["a"] for r in rows] == texts
    exs[2]["pair_id"] = 7.5  # a float pair id: its own id
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(exs, f)
    scan = m4native.scan_native(open, str(path), "train", need_count=True)
    assert scan.occurrence.tolist() == [0, -1, -1, 1, -1, -1, -1]


def test_prepass_mismatch_is_detected(m4_release):
    path = str(m4layout.native_path(m4_release.root, "train"))
    scan = m4native.scan_native(open, path, "train", need_count=True)
    scan.id_hashes = scan.id_hashes.copy()
    scan.id_hashes[30] += 1
    shards = m4native.native_shards(path, scan, 2)
    with pytest.raises(ReleaseFormatError, match="example 30 does not have the pair_id the prepass read"):
        list(m4native.iter_native(open, shards[1:], "train"))


def test_shard_bounds_balance_the_work():
    assert m4native.shard_bounds(10, 1) == [0, 10]
    b = m4native.shard_bounds(200_000, 2, 0.08)
    assert b[0] == 0 and b[-1] == 200_000 and 100_000 < b[1] < 106_000  # the first range skips nothing
    work = [(b[j] * 0.08 + (b[j + 1] - b[j])) for j in range(2)]
    assert abs(work[0] - work[1]) < 2
    assert m4native.shard_bounds(9, 3, 0.0) == [0, 3, 6, 9]


def test_streaming_plain_class(m4_release, m4_parquet):
    from perckit.hf.entrypoints import builder_class

    for source in ("native", "parquet"):
        b = builder_class("m4seg")(config_name="default", data_dir=str(m4_release.root), source=source)
        rows = list(b.as_streaming_dataset("test"))
        assert [r["example_id"] for r in rows] == m4_parquet["test"]["example_id"]
        assert rows[3]["groundings"] == m4_parquet["test"][3]["groundings"]


@needs_scripts
def test_streaming_load_dataset(m4_release, m4_parquet):
    import datasets

    path = str(REPO / "builders" / "m4seg")
    ds = datasets.load_dataset(path, data_dir=str(m4_release.root), trust_remote_code=True, streaming=True)
    it = iter(ds["train"])
    first = next(it)
    assert first == m4_parquet["train"][0]


def test_image_root_embeds_images(m4_release, tmp_path):
    ds = build_split("m4seg", "default", m4_release.root, tmp_path, split="test", source="parquet",
                     image_root=str(m4_release.image_root), splits=("test",))
    assert feats.IMAGE_FILES in ds.features
    row = ds[0]
    assert len(row[feats.IMAGE_FILES]) == len(row["images"])
    assert row[feats.IMAGE_FILES][0].size == (row["images"][0]["width"], row["images"][0]["height"])


def test_image_root_lists_the_first_missing_paths(m4_release, tmp_path):
    partial = tmp_path / "images"
    shutil.copytree(m4_release.image_root, partial)
    removed = sorted(p for p in partial.rglob("*.jpg"))[:3]
    for p in removed:
        p.unlink()
    with pytest.raises(ReleaseNotFoundError) as info:
        build_split("m4seg", "default", m4_release.root, tmp_path / "c", split="test", source="native",
                    image_root=str(partial), splits=("test",))
    msg = str(info.value)
    assert "not found under image_root" in msg and "the first" in msg
    assert sum(p.relative_to(partial).as_posix() in msg for p in removed) >= 1


def test_hub_download_fetches_only_what_the_source_needs(m4_release, tmp_path, monkeypatch):
    from perckit.hf import hub
    from perckit.hf.entrypoints import builder_class

    source = tmp_path / "hub_repo"
    shutil.copytree(m4_release.root, source)
    calls = []
    monkeypatch.setattr(hub, "snapshot_download", fake_snapshot_download(source, calls))

    def fetched(n):
        snap = tmp_path / f"snapshot_{n}"
        return sorted(p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file())

    b = builder_class("m4seg")(config_name="default", cache_dir=str(tmp_path / "c1"), splits=("test",))
    b.download_and_prepare()
    assert b.as_dataset("test").num_rows == 24
    assert calls[0]["repo_id"] == "kanguyen-vn/M4Seg" and calls[0]["repo_type"] == "dataset"
    # issue 14: auto fetches the Parquet first (it fetched the native file before)
    assert calls[0]["allow_patterns"] == ["data/test-*.parquet"]
    assert fetched(1) == sorted(f for f in m4_release.files if f.startswith("data/test-"))

    b = builder_class("m4seg")(config_name="default", cache_dir=str(tmp_path / "c2"), source="parquet", repo_id="me/M4Seg-copy")
    b.download_and_prepare()
    assert calls[1]["repo_id"] == "me/M4Seg-copy"
    assert fetched(2) == sorted(f for f in m4_release.files if f.startswith("data/"))

    for p in (source / "data").glob("test-*.parquet"):  # auto falls back to the native file
        p.unlink()
    b = builder_class("m4seg")(config_name="default", cache_dir=str(tmp_path / "c3"), splits=("test",))
    b.download_and_prepare()
    assert [c["allow_patterns"] for c in calls[2:]] == [["data/test-*.parquet"], ["annotations/m4seg_test.json.gz"]]
    assert fetched(4) == ["annotations/m4seg_test.json.gz"]
    assert b.as_dataset("test").num_rows == 24

    b = builder_class("m4seg")(config_name="default", cache_dir=str(tmp_path / "c4"), splits=("test",), source="native")
    b.download_and_prepare()
    assert calls[4]["allow_patterns"] == ["annotations/m4seg_test.json.gz"] and fetched(5) == ["annotations/m4seg_test.json.gz"]


def test_hub_offline_error_names_data_dir(tmp_path):
    from perckit.hf.entrypoints import builder_class

    b = builder_class("m4seg")(config_name="default", cache_dir=str(tmp_path))
    with pytest.raises(ReleaseNotFoundError, match="kanguyen-vn/M4Seg.*data_dir="):
        b.download_and_prepare()


# ---------------------------------------------------------------- B1


def _m(rows):
    mask = rle.encode(np.array(rows, dtype=bool))
    return {"bbox": rle.to_bbox(mask), "segmentation": mask}


B1_PARQUET = [
    {"example_id": "b1-a", "pair_id": "b1-a", "dataset_name": "coco_objects", "type": "spatial", "granularity": "object",
     "q": "Which chair is near the cup?", "a": "The chair_101 is near the cup_201 and the chair_102.",
     "images": [{"image_id": "101", "path": "coco_2017/val2017/000000000101.jpg", "height": 2, "width": 3},
                {"image_id": "202", "path": "coco_2017/val2017/000000000202.jpg", "height": 3, "width": 2}],
     "groundings": [
         {"image_index": 1, "name": "chair", "annotation_ids": ["7"], "object_annotation_id": "7", "answer_span": [4, 13],
          **_m([[1, 0, 0], [1, 0, 0]])},
         {"image_index": 1, "name": "chair", "annotation_ids": ["8", "9"], "object_annotation_id": None, "answer_span": [42, 51],
          **_m([[0, 0, 1], [0, 0, 1]])},
         {"image_index": 2, "name": "cup", "annotation_ids": ["10"], "object_annotation_id": "10", "answer_span": [26, 33],
          **_m([[1, 1], [0, 0], [0, 0]])}]},
    {"example_id": "b1-b", "pair_id": "b1-b", "dataset_name": "pascal_part", "type": "counting", "granularity": "part",
     "q": "How many legs?", "a": "Two: leg_20101 and leg_20102.",
     "images": [{"image_id": "303", "path": "x/2008_000303.jpg", "height": 2, "width": 3},
                {"image_id": "404", "path": "x/2008_000404.jpg", "height": 3, "width": 2}],
     "groundings": [
         {"image_index": 2, "name": "leg", "annotation_ids": ["1"], "object_annotation_id": "5", "answer_span": [5, 14],
          **_m([[1, 0], [1, 0], [1, 0]])},
         {"image_index": 2, "name": "leg", "annotation_ids": ["2"], "object_annotation_id": "5", "answer_span": [19, 28],
          **_m([[0, 1], [0, 1], [0, 1]])}]},
]


def _b1_native(ex):
    groups = {}
    for g in ex["groundings"]:
        groups.setdefault(f"img_{g['image_index']}", []).append({
            "name": g["name"], "annotation_ids": [int(a) for a in g["annotation_ids"]],
            "object_id": None if g["object_annotation_id"] is None else int(g["object_annotation_id"]),
            "bbox": [9, 9, 9, 9], "segmentation": g["segmentation"],
        })
    return {"pair_id": ex["pair_id"], "dataset_name": ex["dataset_name"], "type": ex["type"], "granularity": ex["granularity"],
            "q": ex["q"], "a": ex["a"], "image_paths": [im["path"] for im in ex["images"]],
            "image_sizes": [[im["width"], im["height"]] for im in ex["images"]], "groundings": groups}


def test_b1_parquet_and_native_json_agree(tmp_path, caplog):
    root = tmp_path / "b1"
    (root / "data").mkdir(parents=True)
    (root / "annotations").mkdir()
    pq.write_table(pa.Table.from_pylist(B1_PARQUET), root / "data/test-00000-of-00001.parquet")
    with gzip.open(root / "annotations/m4seg_test.json.gz", "wt") as f:
        json.dump([_b1_native(ex) for ex in B1_PARQUET], f)
    p = build_split("m4seg", "default", root, tmp_path / "c", split="test", source="parquet", splits=("test",))
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg"):
        n = build_split("m4seg", "default", root, tmp_path / "c", split="test", source="native", splits=("test",))
    swaps = [r for r in caplog.records if "only as [W, H]" in r.getMessage()]
    assert len(swaps) == 1
    a, b = p.to_list(), n.to_list()
    for ra, rb in zip(a, b):
        assert [im["image_id"] for im in rb["images"]] == [im["path"].rsplit("/", 1)[1][:-4] for im in ra["images"]]
        for im in ra["images"] + rb["images"]:
            im.pop("image_id")
    assert a == b
    assert b[0]["groundings"][1]["answer_span"] == [42, 51]  # derived: the second distinct code of image 1


@pytest.mark.skipif(DS_MAJOR < 4, reason="the plain-class path with hash= is the datasets 4.x / 5.x one")
def test_plain_class_accepts_hash(m4_release, tmp_path):
    from perckit.hf.entrypoints import builder_class

    b = builder_class("m4seg")(config_name="default", data_dir=str(m4_release.root), cache_dir=str(tmp_path), hash="abc", splits=("test",))
    b.download_and_prepare()
    assert b.as_dataset("test").num_rows == 24


def test_a_release_folder_with_glob_characters_lists_only_its_own_shards(m4_release, m4_parquet, tmp_path):
    # the shard pattern is joined to a literal root: m4seg[1] once matched m4seg1's shards, m4seg* every m4segX's
    for name in ("m4seg[1]", "m4seg*"):
        root = tmp_path / name
        shutil.copytree(m4_release.root / "data", root / "data")
        decoy = tmp_path / name.replace("[1]", "1").replace("*", "z")
        shutil.copytree(m4_release.root / "data", decoy / "data")
        (decoy / "data" / "test-00000-of-00001.parquet").rename(decoy / "data" / "test-decoy.parquet")
        found = m4layout.parquet_paths(root, "test")
        assert found and all(p.startswith(str(root) + "/") for p in found), found
    built = build_split("m4seg", "default", tmp_path / "m4seg[1]", tmp_path / "out", split="test")
    assert built.to_list() == m4_parquet["test"].to_list()
