"""The M4Seg Parquet record-batch path (``perckit.m4seg.parquet_tables``) against the reference row path
(``parquet_to_row`` + ``features.encode_example``, the builder's previous per-example behaviour). The counts scan
it uses (``perckit._kernels.scan_counts``) is checked against the reference grammar in tests/test_core_rle.py."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from perckit import rle

# ---------------------------------------------------------------- the record-batch transform

import logging  # noqa: E402

import datasets  # noqa: E402
import pytest  # noqa: E402

from perckit.errors import ReleaseFormatError  # noqa: E402
from perckit.errors import RLEError  # noqa: E402
from perckit.m4seg import features as feats  # noqa: E402
from perckit.m4seg import parquet_tables as pt  # noqa: E402
from perckit.m4seg import release  # noqa: E402
from perckit.m4seg.builder import M4SegBuilder  # noqa: E402

SCHEMA = feats.row_features().arrow_schema


def _encoded(rows: list[dict], features: datasets.Features | None = None) -> pa.Table:
    """The reference: the builder's previous per-example behaviour (``encode_example`` of each row)."""
    features = features or feats.row_features()
    return datasets.Dataset.from_list([features.encode_example(r) for r in rows], features=features).data.table


def _grounding(**over):
    g = {
        "image_index": 1, "name": "chair", "annotation_ids": ["7", "8"], "object_annotation_id": None,
        "answer_span": [4, 13], "bbox": [0.0, 0.0, 2.0, 3.0],
        "segmentation": {"size": [4, 6], "counts": rle.encode(np.ones((4, 6)))["counts"]},
    }
    g.update(over)
    return g


def _record(i: int = 0, **over):
    r = {
        "example_id": f"e{i}", "pair_id": f"p{i}", "dataset_name": "coco_objects", "type": "spatial",
        "granularity": "object", "q": "which?", "a": "The chair_102 is here.",
        "images": [{"image_id": "1", "path": "coco/a.jpg", "height": 4, "width": 6},
                   {"image_id": "2", "path": "coco/b.jpg", "height": 6, "width": 4}],
        "groundings": [_grounding(), _grounding(image_index=2, answer_span=[0, 3], bbox=None,
                                                segmentation={"size": [6, 4], "counts": rle.encode(np.eye(6, 4))["counts"]})],
    }
    r.update(over)
    return r


def _both(batch: pa.RecordBatch, caplog=None):
    """(fast-or-fallback table, its warnings, reference table, its warnings), or the two errors."""
    out = []
    for fn in (pt.batch_to_table, pt.reference_table):
        state = release.ConvertState("test", "t.parquet")
        if caplog is not None:
            caplog.clear()
        try:
            table = fn(batch, state, SCHEMA)
        except (ReleaseFormatError, RLEError) as e:
            out.append(("error", type(e).__name__, str(e)))
            continue
        msgs = [r.getMessage() for r in caplog.records] if caplog is not None else []
        out.append((table, state.span_warnings, msgs))
    return out


def _batch(records: list[dict], schema: pa.Schema | None = None) -> pa.RecordBatch:
    table = pa.Table.from_pylist(records, schema=schema)
    return table.to_batches(max_chunksize=len(records))[0] if records else table


def test_sample_release_batches_take_the_fast_path_and_equal_the_reference(m4_release):
    for path in release.parquet_paths(m4_release.root, "train") + release.parquet_paths(m4_release.root, "test"):
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=release.BATCH_SIZE):
            fast, _ = pt.fast_table(batch, SCHEMA)  # not refused
            rows = [release.parquet_to_row(r, release.ConvertState("t", "f", quiet=True)) for r in batch.to_pylist()]
            assert fast.equals(_encoded(rows))


QUIRKS = {
    "plain": ([_record(0), _record(1)], None),
    "a and answer both present": ([{**_record(0), "answer": "x"}, {**_record(1), "a": None, "answer": "The chair_102 is here."}], None),
    "int64 example_id": ([{**_record(0), "example_id": 5}, {**_record(1), "example_id": 6}], None),
    "null optional columns": ([{**_record(0), "pair_id": None, "q": None, "type": None}], None),
    "null groundings": ([{**_record(0), "groundings": None}, _record(1)], None),
    "empty groundings": ([{**_record(0), "groundings": []}], None),
    "non-ASCII answer": ([{**_record(0), "a": "Él chair_102 está aquí.", "groundings": [_grounding(answer_span=[3, 12])]}], None),
    "non-ASCII answer, code mismatch": ([{**_record(0), "a": "Ça chair_202 ñ", "groundings": [_grounding(answer_span=[3, 12])]}], None),
    "span not a code": ([{**_record(0), "groundings": [_grounding(answer_span=[0, 3])] * 7}], None),
    "null bbox everywhere": ([{**_record(0), "groundings": [_grounding(bbox=None)]}], None),
    "null path": ([{**_record(0), "images": [{"image_id": None, "path": None, "height": 4, "width": 6}], "groundings": [_grounding()]}], None),
    "null annotation_ids": ([{**_record(0), "groundings": [_grounding(annotation_ids=None)]}], None),
}


def _binary_counts_schema():
    t = pa.Table.from_pylist([_record(0)]).schema
    g = t.field("groundings").type.value_type
    fields = [pa.field("segmentation", pa.struct([("size", pa.list_(pa.int64())), ("counts", pa.binary())])) if f.name == "segmentation" else f for f in g]
    return pa.schema([pa.field("groundings", pa.list_(pa.struct(fields))) if f.name == "groundings" else f for f in t])


def _bad(**over):
    return [_record(0), _record(1, **over)]


FAILURES = {
    "null example_id": [_record(0), {**_record(1), "example_id": None}],
    "no images": _bad(images=[]),
    "height 0": _bad(images=[{"image_id": "1", "path": "a.jpg", "height": 0, "width": 6}]),
    "too many pixels": _bad(images=[{"image_id": "1", "path": "a.jpg", "height": 1 << 16, "width": 1 << 16}]),
    "absolute path": _bad(images=[{"image_id": "1", "path": "/etc/a.jpg", "height": 4, "width": 6}], groundings=[]),
    "dotdot path": _bad(images=[{"image_id": "1", "path": "a/../../b.jpg", "height": 4, "width": 6}], groundings=[]),
    "image_index 0": _bad(groundings=[_grounding(image_index=0)]),
    "image_index 3": _bad(groundings=[_grounding(image_index=3)]),
    "span past the answer": _bad(groundings=[_grounding(answer_span=[4, 99])]),
    "span reversed": _bad(groundings=[_grounding(answer_span=[5, 4])]),
    "span of 3": _bad(groundings=[_grounding(answer_span=[1, 2, 3])]),
    "null span": _bad(groundings=[_grounding(answer_span=None)]),
    "bbox of 3": _bad(groundings=[_grounding(bbox=[1.0, 2.0, 3.0])]),
    "bbox nan": _bad(groundings=[_grounding(bbox=[1.0, float("nan"), 3.0, 4.0])]),
    "mask of another size": _bad(groundings=[_grounding(segmentation={"size": [6, 4], "counts": rle.encode(np.ones((6, 4)))["counts"]})]),
    "runs short": _bad(groundings=[_grounding(segmentation={"size": [4, 6], "counts": rle.encode(np.ones((4, 5)))["counts"]})]),
    "counts outside the alphabet": _bad(groundings=[_grounding(segmentation={"size": [4, 6], "counts": "0~"})]),
    "empty counts": _bad(groundings=[_grounding(segmentation={"size": [4, 6], "counts": ""})]),
    "null mask": _bad(groundings=[_grounding(segmentation=None)]),
}


@pytest.mark.parametrize("case", sorted(QUIRKS))
def test_quirky_batches_equal_the_reference(case, caplog):
    records, schema = QUIRKS[case]
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg.release"):
        (fast, fw, fmsgs), (ref, rw, rmsgs) = _both(_batch(records, schema), caplog)
    rows = [release.parquet_to_row(r, release.ConvertState("t", "f", quiet=True)) for r in records]
    assert fast.equals(ref) and ref.equals(_encoded(rows))
    assert (fw, fmsgs) == (rw, rmsgs)


def test_binary_counts_equal_the_reference():
    schema = _binary_counts_schema()
    records = [_record(0), _record(1)]
    (fast, _, _), (ref, _, _) = _both(_batch(records, schema))
    assert fast.equals(ref)
    assert pt.fast_table(_batch(records, schema), SCHEMA)[0].equals(ref)  # taken by the fast path


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_each_failing_check_gives_the_reference_message(case):
    fast, ref = _both(_batch(FAILURES[case]))
    assert fast[0] == "error" and fast == ref
    with pytest.raises((ReleaseFormatError, RLEError)) as e:
        [release.parquet_to_row(r, release.ConvertState("test", "t.parquet")) for r in FAILURES[case]]
    assert (type(e.value).__name__, str(e.value)) == ref[1:]


def test_warning_count_and_first_five_messages(caplog):
    records = [{**_record(i), "groundings": [_grounding(answer_span=[0, 3])] * 3} for i in range(4)]
    state_f, state_r = release.ConvertState("test", "t.parquet"), release.ConvertState("test", "t.parquet")
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg.release"):
        pt.batch_to_table(_batch(records), state_f, SCHEMA)
        state_f.finish()
        fmsgs = [r.getMessage() for r in caplog.records]
        caplog.clear()
        pt.reference_table(_batch(records), state_r, SCHEMA)
        state_r.finish()
        rmsgs = [r.getMessage() for r in caplog.records]
    assert state_f.span_warnings == state_r.span_warnings == 12
    assert fmsgs == rmsgs and len(fmsgs) == 6


def test_fast_path_refuses_what_it_does_not_handle():
    with pytest.raises(pt.Refused):
        pt.fast_table(_batch([{**_record(0), "example_id": 5}]), SCHEMA)
    for records in FAILURES.values():
        with pytest.raises((pt.Refused, pa.ArrowException, ValueError, TypeError)):
            pt.fast_table(_batch(records), SCHEMA)


def test_id_guard_add_many_equals_add(monkeypatch):
    monkeypatch.setattr(release.IdGuard, "BLOCK", 7)
    ids = [f"x{i}" for i in range(40)]
    for dup_at, dup_of in [(None, None), (3, 1), (12, 2), (39, 38), (20, 19)]:
        seq = list(ids)
        if dup_at is not None:
            seq[dup_at] = seq[dup_of]
        errors = []
        for many in (True, False):
            g = release.IdGuard("w")
            try:
                if many:
                    for lo in range(0, len(seq), 5):
                        g.add_many(seq[lo : lo + 5])
                else:
                    for eid in seq:
                        g.add(eid)
                g.flush()
                errors.append((None, g.count))
            except ReleaseFormatError as e:
                errors.append((str(e), g.count))
        assert errors[0] == errors[1]


@pytest.mark.parametrize("source", ["parquet", "native"])
def test_built_tables_equal_per_example_encoding(m4_release, tmp_path, source):
    builder = M4SegBuilder(data_dir=str(m4_release.root), cache_dir=str(tmp_path / "c"), source=source)
    builder.download_and_prepare()
    for split in ("train", "test"):
        built = builder.as_dataset(split)
        if source == "parquet":
            rows = list(release.iter_parquet(open, [release.ParquetShard(p) for p in release.parquet_paths(m4_release.root, split)], split))
        else:
            path = str(release.native_path(m4_release.root, split))
            rows = list(release.iter_native(open, release.native_shards(path, release.scan_native(open, path, split), 1), split))
        assert built.data.table.equals(_encoded(rows))


@pytest.mark.parametrize("source", ["parquet", "native"])
def test_built_tables_with_image_root_equal_per_example_encoding(m4_release, tmp_path, source):
    image_root = str(m4_release.root.parent / "images")
    builder = M4SegBuilder(data_dir=str(m4_release.root), cache_dir=str(tmp_path / "c"), source=source, image_root=image_root, splits=("test",))
    builder.download_and_prepare()
    built = builder.as_dataset("test")
    if source == "parquet":
        rows = list(release.iter_parquet(open, [release.ParquetShard(p) for p in release.parquet_paths(m4_release.root, "test")], "test"))
    else:
        path = str(release.native_path(m4_release.root, "test"))
        rows = list(release.iter_native(open, release.native_shards(path, release.scan_native(open, path, "test"), 1), "test"))
    for row in rows:
        row[feats.IMAGE_FILES] = [release.read_image_bytes(open, image_root, im["path"], "w") for im in row["images"]]
    assert built.data.table.equals(_encoded(rows, feats.row_features(with_images=True)))
