"""RefCOCO-M: the sample release and the builder (both datasets lines, streaming, the Hub path)."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
import yaml
from helpers.common import REPO, needs_scripts
from helpers.fake_hub import fake_snapshot_download
from helpers.refcoco_m import SPLIT, all_expression_rows, read_shard
from PIL import Image

from perckit.hf import hub
from perckit import rle
from perckit.hf.entrypoints import build_split, builder_class
from perckit.errors import ReleaseNotFoundError
from perckit.samples import refcoco_m as fixture
from perckit.refcoco_m import features as feats


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
    rows = [r for s in rcm_release.shards for r in read_shard(rcm_release.root / s)]
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
    assert len(all_expression_rows(big.root)) == len(big.expression_ids)
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
        assert rle.area(rle.validate(r["mask"])) > 0 and len(r["bbox"]) == 4
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
    released = [r for s in rcm_release.shards for r in read_shard(rcm_release.root / s)]
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
    assert rcm_expressions.remove_columns("image").to_list() == all_expression_rows(rcm_release.root)


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
