"""Fuzzing: random bytes, random JSON and mutated valid inputs through the RLE helpers and every
prediction-file parser.

Each test asserts the contract of docs/errors.md: an input either parses, or raises one of the documented
perckit errors (subclasses of :class:`perckit.errors.PerckitError`; a missing file is an
``InputNotFoundError``, which is also a ``FileNotFoundError``). Any other exception fails the test. Every
call runs under an alarm, so a Python-level hang fails too (pycocotools' C loops are guarded by
``rle.validate``, which every RLE from outside goes through before pycocotools sees it). Every test must
reach both its parser's accepting and refusing branch (``reaches``; the harness is tests/helpers/fuzz.py).
"""

from __future__ import annotations

import io
import json
import string
import zipfile

import numpy as np
import pytest
from helpers.fuzz import (
    FUZZ,
    FUZZ_SLOW,
    binary_masks,
    counts_text,
    documented_only,
    exercise,
    folder,
    json_rle_dicts,
    json_values,
    mutated,
    polygons,
    random_bytes,
    reaches,
    rle_dicts,
    rle_spellings,
    uncompressed,
    valid_rles,
)
from helpers.harness import deadline
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from perckit import rle as R

GOOD_RLE = {"size": [1, 4], "counts": "022"}  # [[1, 1, 0, 0]]
BAD_RLE = {"size": [1, 4], "counts": "0"}  # runs sum to 0, not 4

# ---------------------------------------------------------------- RLE helpers


@reaches("to_rle", "validate")
@FUZZ
@given(obj=rle_spellings | mutated(valid_rles) | rle_dicts | json_values | polygons)
@example(obj=GOOD_RLE)
@example(obj=BAD_RLE)
def test_rle_to_rle_and_validate_random_objects(obj):
    for fn in (R.to_rle, R.validate):
        out = documented_only(fn, obj)
        if out is not None:
            with deadline():
                exercise(out)


frame_sizes = st.tuples(st.integers(1, 48), st.integers(1, 48))


@st.composite
def polygons_inside(draw, size) -> list:
    """One or two polygons (3 to 6 vertices) inside an image of ``size`` (height, width)."""
    h, w = size
    vertex = st.tuples(st.floats(0, w), st.floats(0, h))
    return [[c for xy in draw(st.lists(vertex, min_size=3, max_size=6)) for c in xy] for _ in range(draw(st.integers(1, 2)))]


objects_with_sizes = (
    rle_spellings.map(lambda r: (r, tuple(r["size"])))
    | frame_sizes.flatmap(lambda size: st.tuples(polygons_inside(size), st.just(size)))
    | st.tuples(rle_dicts | polygons | json_values, frame_sizes)
)


@reaches("to_rle")
@FUZZ
@given(case=objects_with_sizes)
@example(case=(GOOD_RLE, (1, 4)))
@example(case=(GOOD_RLE, (4, 1)))
def test_rle_to_rle_with_a_size(case):
    obj, size = case
    out = documented_only(R.to_rle, obj, size=list(size), where="fuzz")
    if out is not None:
        assert out["size"] == list(size)
        with deadline():
            exercise(out)


@st.composite
def edited_text(draw, text: str) -> str:
    """``text`` itself, or with one character dropped, replaced or appended."""
    i = draw(st.integers(0, len(text)))
    c = draw(st.sampled_from("0123456789:;<=>?@ABOP_`ao!~é"))
    return draw(st.sampled_from([text, text[:i] + text[i + 1:], text[:i] + c + text[i + 1:], text + c]))


counts_and_shapes = (
    st.tuples(st.binary(max_size=40) | counts_text, st.integers(1, 2**16), st.integers(1, 2**16))
    | valid_rles.flatmap(lambda r: st.tuples(edited_text(r["counts"]), st.just(r["size"][0]), st.just(r["size"][1])))
    | valid_rles.map(lambda r: (r["counts"].encode(), r["size"][0], r["size"][1]))
)


@reaches("validate", "decode_counts")
@FUZZ
@given(case=counts_and_shapes)
@example(case=("022", 1, 4))
@example(case=("\x00", 1, 4))
def test_rle_validate_random_counts_bytes(case):
    counts, h, w = case
    out = documented_only(R.validate, {"size": [h, w], "counts": counts})
    if out is not None:
        with deadline():
            exercise(out)
    documented_only(R.decode_counts, counts)


@reaches("to_rle")
@FUZZ
@given(arr=binary_masks | binary_masks.map(lambda m: m.astype(np.uint8)) | hnp.arrays(hnp.scalar_dtypes(), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6)))
@example(arr=np.array([[True, False], [False, True]]))
@example(arr=np.zeros((2, 2, 2), dtype=bool))
def test_rle_to_rle_random_arrays(arr):
    out = documented_only(R.to_rle, arr)
    if out is not None:
        with deadline():
            exercise(out)


# ---------------------------------------------------------------- files

json_text = json_values.map(lambda v: json.dumps(v))


def _tiny_png(draw_bytes: bytes) -> bytes:
    from PIL import Image

    arr = np.frombuffer((draw_bytes * 16)[:16] or b"\0" * 16, dtype=np.uint8).reshape(4, 4)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


# ---------------------------------------------------------------- r4d_bench


mask_paths = st.sampled_from(["m.png", "missing.png", "", "/", ".", "sub/../m.png", "bad.png"]) | st.text(max_size=10)
r4d_mask_files = st.dictionaries(
    st.text(max_size=6),
    st.fixed_dictionaries({"frames": st.dictionaries(st.text(alphabet="0123456789x-", max_size=4), mask_paths, max_size=3)})
    | st.lists(st.fixed_dictionaries({"frame_id": json_values, "mask_path": mask_paths}), max_size=3)
    | json_values,
    max_size=3,
).map(json.dumps)
r4d_frames = st.dictionaries(st.integers(0, 30).map(str), st.just("m.png"), min_size=1, max_size=3)
valid_r4d_mask_files = st.dictionaries(
    st.text(min_size=1, max_size=6),
    st.fixed_dictionaries({"frames": r4d_frames}) | r4d_frames.map(lambda d: [{"frame_id": int(k), "mask_path": v} for k, v in d.items()]),
    min_size=1, max_size=3,
)


@reaches("load_mask_predictions")
@FUZZ_SLOW
@given(content=random_bytes | json_text | r4d_mask_files | mutated(valid_r4d_mask_files).map(json.dumps), png=random_bytes)
@example(content='{"q1": {"frames": {"0": "m.png", "2": "m.png"}}}', png=b"")
@example(content='{"q1": {"frames": {"0": "missing.png"}}}', png=b"")
def test_r4d_mask_prediction_files(content, png):
    from perckit.r4d_bench.read import load_mask_predictions

    with folder() as d:
        (d / "p.json").write_bytes(content.encode() if isinstance(content, str) else content)
        (d / "m.png").write_bytes(_tiny_png(png))
        (d / "bad.png").write_bytes(png)
        rows = documented_only(load_mask_predictions, d / "p.json", d)
        assert rows is None or all(isinstance(r["query_id"], str) for r in rows)


track_ids = st.lists(st.integers(0, 99) | st.text(alphabet=string.digits, min_size=1, max_size=3), max_size=3)
valid_track_files = st.dictionaries(st.text(min_size=1, max_size=5), track_ids | track_ids.map(lambda ids: {"target_track_ids": ids}), min_size=1, max_size=3)


@reaches("load_track_predictions")
@FUZZ
@given(content=random_bytes | json_text | st.dictionaries(st.text(max_size=5), st.lists(json_values, max_size=3) | json_values, max_size=3).map(json.dumps)
       | mutated(valid_track_files).map(json.dumps))
@example(content='{"q1": [1, "2"], "q2": {"target_track_ids": []}}')
@example(content='{"q1": "1"}')
def test_r4d_track_prediction_files(content):
    from perckit.r4d_bench.read import load_track_predictions

    with folder() as d:
        (d / "t.json").write_bytes(content.encode() if isinstance(content, str) else content)
        rows = documented_only(load_track_predictions, d / "t.json")
        assert rows is None or all(all(isinstance(t, str) for t in r["target_track_ids"]) for r in rows)


# ---------------------------------------------------------------- syn4d

def _npy_header(shape, dtype) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape})
    return buf.getvalue()


DTYPES = [np.dtype(t) for t in ("<f4", "<f8", "|b1", "<i8", "O", "<U3", "|S2")] + [np.dtype([("a", "<f4")])]
npy_headers = st.builds(_npy_header, st.lists(st.integers(0, 10**7), max_size=4).map(tuple), st.sampled_from(DTYPES))


@st.composite
def npz_files(draw) -> bytes:
    buf = io.BytesIO()
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    with zipfile.ZipFile(buf, "w", compression=method) as z:
        names = draw(st.sets(st.sampled_from(["tracking_xyz", "depth", "camera_c2w", "frame_indices", "other"]), max_size=3))
        for name in names:
            body = draw(npy_headers | st.just(b"")) + draw(random_bytes)
            z.writestr(name + draw(st.sampled_from([".npy", ""])), body)
    data = buf.getvalue()
    cut = draw(st.integers(0, len(data)))
    return data if draw(st.booleans()) else data[:cut]


@st.composite
def valid_npz(draw, dtypes=st.sampled_from([np.float32, np.float64, np.int32, np.bool_, np.dtype("U2")])) -> bytes:
    arrays = {}
    for key in draw(st.sets(st.sampled_from(["tracking_xyz", "depth", "camera_c2w", "frame_indices", "x"]), max_size=3)):
        arrays[key] = draw(hnp.arrays(dtypes, hnp.array_shapes(max_dims=3, max_side=4)))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


@reaches("read_npz", "load_prediction_row")
@FUZZ_SLOW
@given(content=random_bytes | npz_files() | valid_npz() | valid_npz(st.sampled_from([np.float32, np.float64, np.int32, np.bool_])))
@example(content=_npz_bytes(tracking_xyz=np.zeros((2, 3, 3), np.float32), frame_indices=np.arange(2)))
@example(content=b"PK\x03\x04 not a zip")
def test_syn4d_npz_prediction_files(content):
    from perckit.syn4d.layout import PREDICTION_KEYS
    from perckit.syn4d.read import load_prediction_row, read_npz

    with folder() as d:
        p = d / "seq.npz"
        p.write_bytes(content)
        out = documented_only(read_npz, p)
        assert out is None or set(out) == set(PREDICTION_KEYS)
        documented_only(load_prediction_row, p, "og/dream/seq")
        documented_only(load_prediction_row, p, "og/dream/seq", as_lists=False)


# ---------------------------------------------------------------- refcoco_m


def _lines(rows) -> str:
    """JSON lines, one a row (a mutated list of rows may have become one JSON value: that value)."""
    return "\n".join(json.dumps(r) for r in rows) if isinstance(rows, list) else json.dumps(rows)


refcoco_lines = st.lists(
    st.fixed_dictionaries({"expression_id": st.text(max_size=4) | json_values, "mask": json_rle_dicts | json_values})
    | st.fixed_dictionaries({"sample_id": json_values, "sentence_index": json_values, "mask": json_rle_dicts})
    | json_values,
    max_size=4,
).map(_lines)
valid_refcoco_rows = st.lists(
    st.tuples(st.text(min_size=1, max_size=4), valid_rles | valid_rles.map(uncompressed)), min_size=1, max_size=4, unique_by=lambda t: t[0],
).map(lambda pairs: [{"expression_id": e, "mask": m} for e, m in pairs])


@reaches("load_predictions_jsonl")
@FUZZ
@given(content=random_bytes | refcoco_lines | st.text(max_size=200) | mutated(valid_refcoco_rows).map(_lines))
@example(content=_lines([{"expression_id": "1:0", "mask": GOOD_RLE}, {"sample_id": 2, "sentence_index": 0, "mask": uncompressed(GOOD_RLE)}]))
@example(content=_lines([{"expression_id": "1:0", "mask": BAD_RLE}]))
def test_refcoco_jsonl_prediction_files(content):
    from perckit.refcoco_m.read import load_predictions_jsonl

    with folder() as d:
        p = d / "p.jsonl"
        p.write_bytes(content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content)
        rows = documented_only(load_predictions_jsonl, p)
        if rows:
            for r in rows:
                with deadline():
                    exercise(r["mask"])


image_rows = st.lists(
    st.fixed_dictionaries({"image_id": json_values, "samples": st.lists(st.fixed_dictionaries({"id": json_values, "masks": st.lists(rle_dicts, max_size=2) | json_values}) | json_values, max_size=3)})
    | json_values,
    max_size=3,
)
valid_image_rows = st.lists(
    st.tuples(st.integers(0, 50), st.lists(rle_spellings, min_size=1, max_size=2)), min_size=1, max_size=3, unique_by=lambda t: t[0],
).flatmap(lambda samples: st.integers(0, 9).map(lambda image_id: [{"image_id": image_id, "samples": [{"id": i, "masks": m} for i, m in samples]}]))


@reaches("flatten_image_predictions")
@FUZZ
@given(rows=image_rows | json_values | mutated(valid_image_rows))
@example(rows=[{"image_id": 1, "samples": [{"id": 3, "masks": [GOOD_RLE, np.zeros((1, 4), dtype=bool)]}]}])
@example(rows=[{"image_id": 1, "samples": [{"id": 3, "masks": [BAD_RLE]}]}])
def test_refcoco_flatten_image_predictions(rows):
    from perckit.refcoco_m.read import flatten_image_predictions

    out = documented_only(flatten_image_predictions, rows)
    assert out is None or all(isinstance(r["expression_id"], str) for r in out)


# ---------------------------------------------------------------- reason_av_edit

stems = st.sampled_from(["s", "t"]) | st.text(alphabet=string.ascii_letters + string.digits + "_-.", min_size=1, max_size=6)
rav_json = st.fixed_dictionaries({}, optional={"edit_window_s": json_values, "selected_instance_index": json_values, "sample_id": json_values}).map(json.dumps)


@st.composite
def rav_folders(draw) -> dict[str, bytes]:
    files = {}
    for _ in range(draw(st.integers(0, 4))):
        stem = draw(stems)
        suffix = draw(st.sampled_from([".json", "_anchor_mask.png", "_reason_audio.wav", "_mask.mp4", ".txt"]))
        if suffix == ".json":
            body = draw(rav_json | json_text | random_bytes)
        elif suffix == "_anchor_mask.png":
            body = draw(random_bytes.map(_tiny_png) | random_bytes)
        else:
            body = draw(random_bytes)
        files[stem + suffix] = body.encode() if isinstance(body, str) else body
    return files


@reaches("load_predictions_dir")
@FUZZ_SLOW
@given(files=rav_folders(), ids=st.none() | st.lists(stems, max_size=3))
@example(files={"s.json": b'{"edit_window_s": [0.5, 1.5], "selected_instance_index": 0}'}, ids=None)
@example(files={"s.json": b'{"unknown": 1}'}, ids=None)
def test_reason_av_edit_prediction_folders(files, ids):
    from perckit.reason_av_edit.read.predictions import load_predictions_dir

    with folder() as d:
        for name, body in files.items():
            (d / name).write_bytes(body)
        rows = documented_only(load_predictions_dir, d, ids)
        assert rows is None or all(isinstance(r["sample_id"], str) for r in rows)


# ---------------------------------------------------------------- the CLI's file reader

ROW_SUFFIXES = [".jsonl", ".json", ".txt"]


def _rows_file(rows, suffix: str) -> str:
    """``rows`` written the way the reader expects a file of that suffix (JSON lines, else one JSON array)."""
    return _lines(rows) if suffix == ".jsonl" and isinstance(rows, list) else json.dumps(rows)


valid_rows = st.lists(st.dictionaries(st.text(max_size=5), json_values, max_size=3), min_size=1, max_size=4)
row_files = (
    st.tuples(random_bytes | json_text | st.lists(json_values, max_size=4).map(_lines), st.sampled_from(ROW_SUFFIXES))
    | st.tuples(mutated(valid_rows), st.sampled_from(ROW_SUFFIXES)).map(lambda t: (_rows_file(*t), t[1]))
)


@reaches("_read_rows")
@FUZZ
@given(case=row_files)
@example(case=('{"a": 1}\n\n{"b": [2]}', ".jsonl"))
@example(case=('{"a": 1}', ".json"))
def test_cli_row_files(case):
    from perckit.__main__ import _read_rows

    content, suffix = case
    with folder() as d:
        p = d / f"rows{suffix}"
        p.write_bytes(content.encode() if isinstance(content, str) else content)
        rows = documented_only(_read_rows, str(p))
        assert rows is None or all(isinstance(r, dict) for r in rows)


def test_missing_files_are_input_not_found(tmp_path):
    from perckit.__main__ import _read_rows
    from perckit.errors import InputNotFoundError
    from perckit.r4d_bench.read import load_mask_predictions, load_track_predictions
    from perckit.reason_av_edit.read.predictions import load_predictions_dir
    from perckit.refcoco_m.read import load_predictions_jsonl
    from perckit.syn4d.read import read_npz

    for fn, arg in [(load_mask_predictions, "a.json"), (load_track_predictions, "a.json"), (read_npz, "a.npz"), (load_predictions_jsonl, "a.jsonl"),
                    (load_predictions_dir, "nodir"), (_read_rows, "a.jsonl"), (_read_rows, "a.json")]:
        with pytest.raises(InputNotFoundError) as info:
            fn(str(tmp_path / arg))
        assert isinstance(info.value, FileNotFoundError) and arg in str(info.value)
