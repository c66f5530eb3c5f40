"""perckit.export.parquet: Parquet shards the Dataset Viewer can page (issue 18), golden cases checked by hand.

The byte measure: an int64 is 8 bytes, a string its length plus a 4-byte offset. The Viewer's rules these cases
follow are cited in tests/helpers/viewer_rules.py (dataset-viewer paths)."""

from __future__ import annotations

import io
import json
import time

import datasets
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from perckit.export.parquet import (
    MAX_ROW_GROUP_BYTES,
    VIEWER_MAX_PAGE_BYTES,
    VIEWER_MAX_SPLITS,
    VIEWER_PAGE_ROWS,
    SplitExport,
    max_page_bytes,
    row_sizes,
    viewer_verdict,
    write_split,
)


def _png(value: int, size: int = 8) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.full((size, size, 3), value, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def _ints(n: int, value: int | None = 0) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"x": [value if value is not None else i for i in range(n)]},
                                      features=datasets.Features({"x": datasets.Value("int64")}))


def _groups(path):
    md = pq.read_metadata(str(path))
    return [md.row_group(i).num_rows for i in range(md.num_row_groups)]


def test_the_constants_are_the_viewers():
    assert (MAX_ROW_GROUP_BYTES, VIEWER_PAGE_ROWS, VIEWER_MAX_PAGE_BYTES, VIEWER_MAX_SPLITS) == (100_000_000, 100, 300_000_000, 30)


def test_row_groups_cut_at_the_byte_limit(tmp_path):
    """100 int64 rows (8 bytes each), limit 80 bytes: ten row groups of ten rows; 800 bytes in all."""
    s = write_split(_ints(100), tmp_path / "data", "train", progress=False, max_row_group_bytes=80)
    assert (s.name, s.num_examples, s.num_bytes, s.files) == ("train", 100, 800, ["data/train-00000-of-00001.parquet"])
    assert _groups(tmp_path / s.files[0]) == [10] * 10
    assert s.max_row_bytes == 8
    footer = pq.read_metadata(str(tmp_path / s.files[0]))
    assert s.max_row_group_bytes == max(80, *(footer.row_group(i).total_byte_size for i in range(10)))


def test_an_over_large_row_is_a_row_group_of_its_own(tmp_path):
    """Strings of 10, 10, 500, 10, 10 characters measure 14, 14, 504, 14, 14 bytes; limit 100: [2 rows][1][2]."""
    ds = datasets.Dataset.from_dict({"s": ["a" * 10, "b" * 10, "c" * 500, "d" * 10, "e" * 10]})
    s = write_split(ds, tmp_path / "data", "test", progress=False, max_row_group_bytes=100)
    assert _groups(tmp_path / s.files[0]) == [2, 1, 2]
    assert s.max_row_bytes == 504
    assert s.num_bytes == 560
    assert s.max_row_group_bytes >= 504
    assert viewer_verdict([s], 1) == (True, "")  # 504 bytes is nothing to the Viewer


def test_page_bytes_by_hand():
    """Row groups of 50, 100, 30 and 200 rows, 10, 20, 5 and 7 bytes: the page starting at row 149 (the last of the
    second group) overlaps groups 2, 3 and 4: 32 bytes; no 100-row window reads more."""
    groups = [(50, 10), (100, 20), (30, 5), (200, 7)]
    assert max_page_bytes(groups) == 32
    assert max_page_bytes([(100, 9)]) == 9
    assert max_page_bytes([(1, 3)] * 250) == 300  # 100 one-row groups of 3 bytes
    assert max_page_bytes([]) == 0


def test_shards_cut_and_the_page_bytes_span_them(tmp_path):
    """300 zero int64 rows, row groups of 400 bytes (50 rows), shards of 800 bytes (two row groups): three shards;
    the page starting at row 49 overlaps three row groups across a shard boundary: 1200 bytes."""
    s = write_split(_ints(300), tmp_path / "data", "train", max_shard_size=800, progress=False, max_row_group_bytes=400)
    assert s.files == [f"data/train-0000{i}-of-00003.parquet" for i in range(3)]
    assert [_groups(tmp_path / f) for f in s.files] == [[50, 50]] * 3
    assert (s.num_bytes, s.max_row_group_bytes, s.max_page_bytes) == (2400, 400, 1200)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [f.split("/")[1] for f in s.files]  # no leftovers


def test_page_index_and_huggingface_metadata(tmp_path):
    features = datasets.Features({"id": datasets.Value("string"), "image": datasets.Image(),
                                  "boxes": datasets.Sequence(datasets.Value("float32"))})
    ds = datasets.Dataset.from_dict({"id": ["a", "b"], "image": [{"bytes": _png(1), "path": None}, {"bytes": _png(2), "path": None}],
                                     "boxes": [[1.0, 2.0], []]}, features=features)
    s = write_split(ds, tmp_path / "data", "train", progress=False)
    pf = pq.ParquetFile(tmp_path / s.files[0])
    meta = json.loads(pf.schema_arrow.metadata[b"huggingface"])
    assert datasets.Features.from_dict(meta["info"]["features"]) == features
    md = pf.metadata
    chunks = [md.row_group(i).column(j) for i in range(md.num_row_groups) for j in range(md.num_columns)]
    assert chunks and all(c.has_offset_index for c in chunks)
    assert all(c.has_column_index for c in chunks if c.statistics is not None and c.statistics.has_min_max)


def _rich() -> datasets.Dataset:
    features = datasets.Features({
        "id": datasets.Value("string"), "n": datasets.Value("int32"), "score": datasets.Value("float64"),
        "image": datasets.Image(), "frames": datasets.Array2D(shape=(None, 3), dtype="float32"),
        "tags": datasets.Sequence(datasets.Value("string")), "meta": {"a": datasets.Value("int64"), "b": datasets.Value("string")},
    })
    rows = {"id": [f"r{i}" for i in range(30)], "n": [i if i % 7 else None for i in range(30)],
            "score": [i / 3 for i in range(30)], "image": [{"bytes": _png(i), "path": f"img{i}.png"} for i in range(30)],
            "frames": [np.arange(3 * (i % 4), dtype=np.float32).reshape(-1, 3) for i in range(30)],
            "tags": [["x"] * (i % 3) for i in range(30)], "meta": [{"a": i, "b": None if i % 2 else "k"} for i in range(30)]}
    return datasets.Dataset.from_dict(rows, features=features)


def test_round_trip_through_load_dataset(tmp_path):
    """The folder loads back with plain datasets (this datasets line) as the same features and rows."""
    ds = _rich()
    s = write_split(ds, tmp_path / "export" / "data", "train", progress=False, max_row_group_bytes=300)
    assert len(_groups(tmp_path / "export" / s.files[0])) > 3
    back = datasets.load_dataset("parquet", data_files={"train": [str(tmp_path / "export" / f) for f in s.files]},
                                 split="train", cache_dir=str(tmp_path / "cache"))
    assert back.features == ds.features
    assert back.with_format("arrow")[:].equals(ds.with_format("arrow")[:])
    folder = datasets.load_dataset(str(tmp_path / "export"), split="train", cache_dir=str(tmp_path / "cache2"))
    assert folder.features == ds.features and folder.num_rows == 30
    assert folder[3]["image"].size == (8, 8)


def test_media_by_path_are_embedded_and_media_with_bytes_unchanged(tmp_path):
    picture = tmp_path / "pics" / "one.png"
    picture.parent.mkdir()
    picture.write_bytes(_png(7))
    ds = datasets.Dataset.from_dict({"image": [{"bytes": None, "path": str(picture)}, {"bytes": _png(9), "path": "/kept/full/path.png"}, None]},
                                    features=datasets.Features({"image": datasets.Image()}))
    s = write_split(ds, tmp_path / "data", "train", progress=False)
    cells = pq.read_table(tmp_path / s.files[0]).column("image").to_pylist()
    assert cells == [{"bytes": _png(7), "path": "one.png"}, {"bytes": _png(9), "path": "/kept/full/path.png"}, None]
    assert s.num_bytes == int(np.ceil(row_sizes(pq.read_table(tmp_path / s.files[0])).sum()))


def test_nested_media_by_path_are_embedded(tmp_path):
    picture = tmp_path / "p.png"
    picture.write_bytes(_png(3))
    ds = datasets.Dataset.from_dict({"images": [[{"bytes": None, "path": str(picture)}]]},
                                    features=datasets.Features({"images": [datasets.Image()]}))
    s = write_split(ds, tmp_path / "data", "train", progress=False)
    assert pq.read_table(tmp_path / s.files[0]).column("images").to_pylist() == [[{"bytes": _png(3), "path": "p.png"}]]


def test_same_input_same_bytes(tmp_path):
    ds = _rich()
    a = write_split(ds, tmp_path / "a" / "data", "train", progress=False, max_row_group_bytes=500, max_shard_size=1500)
    b = write_split(ds, tmp_path / "b" / "data", "train", progress=False, max_row_group_bytes=500, max_shard_size=1500)
    assert a == b and len(a.files) > 1
    for f in a.files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_an_empty_split_is_one_shard_with_the_schema(tmp_path):
    s = write_split(_ints(0), tmp_path / "data", "validation", progress=False)
    assert (s.num_examples, s.num_bytes, s.files, s.max_page_bytes) == (0, 0, ["data/validation-00000-of-00001.parquet"], 0)
    assert pq.read_table(tmp_path / s.files[0]).num_rows == 0


def test_an_indices_mapping_is_honoured(tmp_path):
    ds = _ints(50, value=None).select([4, 2, 0])
    s = write_split(ds, tmp_path / "data", "train", progress=False)
    assert pq.read_table(tmp_path / s.files[0]).column("x").to_pylist() == [4, 2, 0]


def test_the_measure_is_the_arrow_size():
    """Per-row bytes add up to the table's Arrow nbytes, less the validity bitmaps (a bit per value)."""
    t = _rich().data.table
    measured = row_sizes(t).sum()
    assert measured <= t.nbytes <= measured + t.num_rows * t.num_columns  # validity bitmaps: at most 1 byte a cell
    assert list(row_sizes(pa.table({"s": ["ab", None, "abcd"], "x": pa.array([1, 2, 3], pa.int16())}))) == [8.0, 6.0, 10.0]
    depth = datasets.Dataset.from_dict({"d": [np.zeros((2, 2, 3), np.float32), np.zeros((0, 2, 3), np.float32)]},
                                       features=datasets.Features({"d": datasets.Array3D(shape=(None, 2, 3), dtype="float32")}))
    # datasets stores Array3D as lists of lists of lists: an offset per list, 4 bytes per float
    assert list(row_sizes(depth.data.table)) == [4 + 2 * (4 + 2 * (4 + 3 * 4)), 4]


def test_viewer_verdict():
    ok = SplitExport("train", 10, 100, ["data/train-00000-of-00001.parquet"], 10, 100, 100)
    assert viewer_verdict([ok], 1) == (True, "")
    big_row = SplitExport("test", 1, 400_000_000, [], max_row_bytes=400_000_000, max_row_group_bytes=400_000_000, max_page_bytes=400_000_000)
    viewable, reason = viewer_verdict([ok, big_row], 2)
    assert not viewable and "`test`" in reason and "400.0 MB" in reason and "300.0 MB" in reason
    page = SplitExport("train", 1000, 10, [], max_row_bytes=5_000_000, max_row_group_bytes=90_000_000, max_page_bytes=300_000_001)
    viewable, reason = viewer_verdict([page], 1)
    assert not viewable and "page of 100 rows" in reason and "row" in reason
    viewable, reason = viewer_verdict([ok], 31)
    assert not viewable and "31 splits" in reason
    assert viewer_verdict([ok], 30) == (True, "")


@pytest.mark.slow
def test_a_large_split_is_fast_and_measured_without_a_row_loop(tmp_path):
    """743,000 M4Seg-like rows (an id, a question, a list of groundings with an RLE string): written in seconds,
    row groups under the limit, every row accounted for."""
    n = 743_000
    block = pa.array([[{"image_index": 1, "name": "obj", "mask": {"size": [480, 640], "counts": "x" * 40}}] * 2] * 1000)
    features = datasets.Features({"example_id": datasets.Value("string"), "groundings": [
        {"image_index": datasets.Value("int64"), "name": datasets.Value("string"),
         "mask": {"size": [datasets.Value("int64")], "counts": datasets.Value("string")}}]})
    ids = pa.array([f"ex{i:04d}" for i in range(1000)])
    table = pa.table({"example_id": pa.concat_arrays([ids] * (n // 1000)),
                      "groundings": pa.concat_arrays([block.cast(features.arrow_schema.field("groundings").type)] * (n // 1000))},
                     schema=features.arrow_schema)
    ds = datasets.Dataset(datasets.table.InMemoryTable(table))
    start = time.perf_counter()
    s = write_split(ds, tmp_path / "data", "train", progress=False, max_row_group_bytes=10_000_000)
    elapsed = time.perf_counter() - start
    assert elapsed < 60, f"{elapsed:.1f} s"
    assert s.num_examples == n and s.num_bytes == int(np.ceil(row_sizes(table).sum()))
    assert sum(pq.read_metadata(str(tmp_path / f)).num_rows for f in s.files) == n
    assert s.max_row_group_bytes <= 10_000_000 and s.max_page_bytes <= 20_000_000
