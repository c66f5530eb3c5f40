"""The M4Seg Parquet column path (``perckit.m4seg.read.parquet``, the only Parquet converter) against the
record-by-record oracle (``tests/oracles/m4seg_parquet.parquet_to_row`` + ``features.encode_example``, the
builder's behaviour before issue 29): the same tables, warnings and errors, on the sample release and on
hand-made quirks and failures."""

from __future__ import annotations

import re
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
from perckit.m4seg.read import parquet as pt  # noqa: E402
from perckit.m4seg.read import images as m4images  # noqa: E402
from perckit.m4seg import layout as m4layout  # noqa: E402
from perckit.m4seg.read import native as m4native  # noqa: E402
from perckit.m4seg import rows as m4rows  # noqa: E402
from perckit.m4seg.builder import M4SegBuilder  # noqa: E402
from oracles.m4seg_parquet import parquet_to_row  # noqa: E402

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
    """(column table, its warning count, its messages) and (oracle table, ...); an error as ("error", type, text)."""
    out = []
    for fn in (_column, _oracle):
        state = m4rows.ConvertState("test", "t.parquet")
        if caplog is not None:
            caplog.clear()
        try:
            table = fn(batch, state)
        except (ReleaseFormatError, RLEError) as e:
            out.append(("error", type(e).__name__, str(e)))
            continue
        msgs = [r.getMessage() for r in caplog.records] if caplog is not None else []
        out.append((table, state.span_warnings, msgs))
    return out


def _column(batch: pa.RecordBatch, state) -> pa.Table:
    return pt.batch_to_table(batch, state, SCHEMA)


def _oracle(batch: pa.RecordBatch, state) -> pa.Table:
    """The batch record by record: ``parquet_to_row``."""
    return _encoded([parquet_to_row(rec, state) for rec in batch.to_pylist()])


def _batch(records: list[dict], schema: pa.Schema | None = None) -> pa.RecordBatch:
    table = pa.Table.from_pylist(records, schema=schema)
    return table.to_batches(max_chunksize=len(records))[0] if records else table


def _shard_rows(root, split: str) -> list[dict]:
    """The oracle rows of a split's Parquet shards."""
    import pyarrow.parquet as pq

    state = m4rows.ConvertState(split, "f", quiet=True)
    return [parquet_to_row(r, state) for p in m4layout.parquet_paths(root, split) for r in pq.read_table(p).to_pylist()]


def test_sample_release_batches_equal_the_oracle(m4_release):
    import pyarrow.parquet as pq

    n = 0
    for path in m4layout.parquet_paths(m4_release.root, "train") + m4layout.parquet_paths(m4_release.root, "test"):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=pt.BATCH_SIZE):
            table = pt.batch_to_table(batch, m4rows.ConvertState("t", "f", quiet=True), SCHEMA)  # a refusal fails here
            rows = [parquet_to_row(r, m4rows.ConvertState("t", "f", quiet=True)) for r in batch.to_pylist()]
            assert table.equals(_encoded(rows))
            n += table.num_rows
    assert n == 72


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
    "null item in annotation_ids": ([{**_record(0), "groundings": [_grounding(annotation_ids=["7", None])]}], None),
    "int annotation_ids": ([{**_record(0), "groundings": [_grounding(annotation_ids=[7, 8])]}], None),
    "scalar annotation_ids": ([{**_record(0), "groundings": [_grounding(annotation_ids=7)]}], None),
    "heights as digit strings": ([{**_record(0), "images": [{"image_id": 1, "path": "a.jpg", "height": "4", "width": "6"}],
                                   "groundings": [_grounding()]}], None),
    "float spans and index": ([{**_record(0), "groundings": [_grounding(answer_span=[4.0, 13.0], image_index=1.0)]}], None),
    "int bbox": ([{**_record(0), "groundings": [_grounding(bbox=[0, 0, 2, 3])]}], None),
    "float example_id": ([{**_record(0), "example_id": 5.0}], None),
    "uncompressed masks": ([{**_record(0), "groundings": [_grounding(segmentation={"size": [4, 6], "counts": [0, 24]})]}], None),
    "masks under 'mask'": ([{**{k: x for k, x in _record(0).items()}, "groundings": [
        {**{k: x for k, x in _grounding().items() if k != "segmentation"}, "mask": _grounding()["segmentation"]}]}], None),
}


def _binary_counts_schema():
    t = pa.Table.from_pylist([_record(0)]).schema
    g = t.field("groundings").type.value_type
    fields = [pa.field("segmentation", pa.struct([("size", pa.list_(pa.int64())), ("counts", pa.binary())])) if f.name == "segmentation" else f for f in g]
    return pa.schema([pa.field("groundings", pa.list_(pa.struct(fields))) if f.name == "groundings" else f for f in t])


def _bad(**over):
    return [_record(0), _record(1, **over)]


def _every(**over):
    """Two rows whose every grounding has ``over`` (a column of another type: the first row is refused)."""
    return [_record(0, groundings=[_grounding(**over)]), _record(1, groundings=[_grounding(**over)] * 2)]


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
    "answer an int": [{**_record(0), "a": 1}, {**_record(1), "a": 2}],
    "null answer": [_record(0), {**_record(1), "a": None}],
    "null image": _bad(images=[None, {"image_id": "2", "path": "b.jpg", "height": 6, "width": 4}]),
    "null height": _bad(images=[{"image_id": "1", "path": "a.jpg", "height": None, "width": 6}]),
    "height a word": [{**_record(i), "images": [{"image_id": "1", "path": "a.jpg", "height": "tall", "width": 6}]} for i in range(2)],
    "null grounding": _bad(groundings=[_grounding(), None]),
    "image_index a word": _every(image_index="one"),
    "null image_index": _bad(groundings=[_grounding(image_index=None)]),
    "bbox of strings": _every(bbox=["x", "y", "w", "h"]),
    "span of words": _every(answer_span=["zero", "nine"]),
    "span with a null": _bad(groundings=[_grounding(answer_span=[4, None])]),
    "counts an int": _every(segmentation={"size": [4, 6], "counts": 5}),
    "mask size of 3": _bad(groundings=[_grounding(segmentation={"size": [4, 6, 1], "counts": "0"})]),
    "empty path": _bad(images=[{"image_id": "1", "path": "", "height": 4, "width": 6}], groundings=[]),
    # the first refused value in row order, then in the order a row's fields are read
    "two bad rows": [_record(0), {**_record(1), "groundings": [_grounding(bbox=[1.0])]}, {**_record(2), "images": []}],
    "two bad fields of a row": _bad(groundings=[_grounding(bbox=[1.0]), _grounding(image_index=9)]),
    "a bad mask before a bad span": _bad(groundings=[_grounding(answer_span=[9, 1], segmentation=None)]),
    "a bad image before a bad grounding": _bad(images=[{"image_id": "1", "path": "a.jpg", "height": 4, "width": 6},
                                                       {"image_id": "2", "path": "/b.jpg", "height": 6, "width": 4}],
                                              groundings=[_grounding(image_index=5)]),
}


@pytest.mark.parametrize("case", sorted(QUIRKS))
def test_quirky_batches_equal_the_oracle(case, caplog):
    records, schema = QUIRKS[case]
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg.release"):
        (table, w, msgs), (ref, rw, rmsgs) = _both(_batch(records, schema), caplog)
    assert table.equals(ref)
    assert (w, msgs) == (rw, rmsgs)


def test_binary_counts_equal_the_oracle():
    (table, _, _), (ref, _, _) = _both(_batch([_record(0), _record(1)], _binary_counts_schema()))
    assert table.equals(ref) and table.column("groundings").type == SCHEMA.field("groundings").type


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_each_failing_check_gives_the_oracle_message(case):
    column, oracle = _both(_batch(FAILURES[case]))
    assert column[0] == "error" and column == oracle


def test_rows_before_a_refused_row_are_converted_first(caplog):
    """Their warnings are given before the refused row raises, as record by record."""
    bad = {**_record(3), "images": []}
    warned = {**_record(0), "groundings": [_grounding(answer_span=[0, 3])]}
    got = []
    for fn in (_column, _oracle):
        state = m4rows.ConvertState("test", "t.parquet")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="perckit.m4seg.release"), pytest.raises(ReleaseFormatError) as e:
            fn(_batch([warned, _record(1), bad]), state)
        got.append((str(e.value), state.span_warnings, [r.getMessage() for r in caplog.records]))
    assert got[0] == got[1] and "'images': expected a non-empty list" in got[0][0] and got[0][1] == 2  # one warning per row before


def test_warning_count_and_first_five_messages(caplog):
    records = [{**_record(i), "groundings": [_grounding(answer_span=[0, 3])] * 3} for i in range(4)]
    got = []
    for fn in (_column, _oracle):
        state = m4rows.ConvertState("test", "t.parquet")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="perckit.m4seg.release"):
            fn(_batch(records), state)
            state.finish()
        got.append((state.span_warnings, [r.getMessage() for r in caplog.records]))
    assert got[0] == got[1] and got[0][0] == 12 and len(got[0][1]) == 6


@pytest.mark.parametrize("source", ["parquet", "native"])
def test_built_tables_equal_per_example_encoding(m4_release, tmp_path, source):
    builder = M4SegBuilder(data_dir=str(m4_release.root), cache_dir=str(tmp_path / "c"), source=source)
    builder.download_and_prepare()
    for split in ("train", "test"):
        built = builder.as_dataset(split)
        if source == "parquet":
            rows = _shard_rows(m4_release.root, split)
        else:
            path = str(m4layout.native_path(m4_release.root, split))
            rows = list(m4native.iter_native(open, m4native.native_shards(path, m4native.scan_native(open, path, split), 1), split))
        assert built.data.table.equals(_encoded(rows))


@pytest.mark.parametrize("source", ["parquet", "native"])
def test_built_tables_with_image_root_equal_per_example_encoding(m4_release, tmp_path, source):
    image_root = str(m4_release.root.parent / "images")
    builder = M4SegBuilder(data_dir=str(m4_release.root), cache_dir=str(tmp_path / "c"), source=source, image_root=image_root, splits=("test",))
    builder.download_and_prepare()
    built = builder.as_dataset("test")
    if source == "parquet":
        rows = _shard_rows(m4_release.root, "test")
    else:
        path = str(m4layout.native_path(m4_release.root, "test"))
        rows = list(m4native.iter_native(open, m4native.native_shards(path, m4native.scan_native(open, path, "test"), 1), "test"))
    for row in rows:
        row[feats.IMAGE_FILES] = [m4images.read_image_bytes(open, image_root, im["path"], "w") for im in row["images"]]
    assert built.data.table.equals(_encoded(rows, feats.row_features(with_images=True)))


from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from perckit.m4seg.metric.codes import span_code_problems  # noqa: E402
from perckit.io.paths import MAX_PATH_CHARS, check_relative  # noqa: E402

_CODE_TEXT = st.text(alphabet="ab_19 .é", max_size=12) | st.from_regex(r"[a-z_ .é0-9]{0,4}_[0-9]{2,6}", fullmatch=True)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.lists(_CODE_TEXT, min_size=1, max_size=4), st.lists(st.tuples(st.integers(0, 3), st.integers(-1, 1),
                                                                                        st.integers(1, 9)), max_size=4)), max_size=6))
@example([(["x ", "bottle_101", " y"], [(1, 0, 1), (1, 0, 2)]), (["leg_20103", "é"], [(0, 0, 2)]), (["a_12_345", "a__12345"], [(0, 0, 3), (1, 0, 1)]),
          *[([text], [(0, 0, 1)]) for text in ("_12345", "_123", "a b_123", "a_1234", "b_12", "a_1x3", "a_12x", "a_123")]])
def test_code_suspects_flag_exactly_the_rows_with_entity_code_warnings(rows):
    """The column prefilter of the entity-code warnings: every row with a warning is flagged (span_code_problems
    decides), an ASCII row without one is not, a non-ASCII row always is. Each span covers one part of its
    answer, give or take a character."""
    answers, parent, s, e, k = [], [], [], [], []
    for r, (parts, spans) in enumerate(rows):
        answers.append("".join(parts))
        for j, trim, img in spans:
            j = min(j, len(parts) - 1)
            a = len("".join(parts[:j]))
            a, b = sorted((min(max(a + trim, 0), len(answers[-1])), min(a + len(parts[j]), len(answers[-1]))))
            parent.append(r), s.append(a), e.append(b), k.append(img)
    got = pt._code_suspects(pa.array(answers, pa.string()), np.array(parent, dtype=np.int64), np.array(s, dtype=np.int64),
                            np.array(e, dtype=np.int64), np.array(k, dtype=np.int64))
    want = [r for r, answer in enumerate(answers) if r in parent and (not answer.isascii() or span_code_problems(answer, [
        {"answer_span": [a, b], "image_index": img} for p, a, b, img in zip(parent, s, e, k) if p == r]))]
    assert got == want


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet="a./\\:C\x00é", max_size=9) | st.sampled_from(["", "C:x", "..", "a/..", "../a", "a\\..\\b", "a..b",
                                                                                 "é" * MAX_PATH_CHARS, "é" * (MAX_PATH_CHARS + 1)]),
                max_size=8))
def test_path_prefilter_flags_what_the_previous_regex_did(paths):
    """The compiled path prefilter flags exactly the paths the column check used to flag with pyarrow (empty, over
    MAX_PATH_CHARS code points, or matching the NUL / absolute / drive / ``..`` component regex), each of which
    ``check_relative`` then decides; a path it does not flag ``check_relative`` accepts."""
    arr = pa.array(paths, pa.string())
    flag = np.zeros(len(paths), dtype=np.bool_)
    from perckit.core.counts import _compiled

    _compiled(pt._bad_paths)(*pt._buffers(arr), MAX_PATH_CHARS, flag)
    regex = r"\x00|^[/\\]|^[A-Za-z]:|(^|[\\/])\.\.([\\/]|$)"
    assert flag.tolist() == [p == "" or len(p) > MAX_PATH_CHARS or re.search(regex, p) is not None for p in paths]
    for p, f in zip(paths, flag):
        if not f:
            check_relative(p, "w")
