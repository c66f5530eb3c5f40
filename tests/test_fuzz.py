"""Fuzzing: random bytes and random JSON through the RLE helpers and every prediction-file parser.

Each test asserts the contract of docs/errors.md: an input either parses, or raises one of the documented
perckit errors (subclasses of :class:`perckit.errors.PerckitError`; a missing file is an
``InputNotFoundError``, which is also a ``FileNotFoundError``). Any other exception fails the test. Every
call runs under an alarm, so a Python-level hang fails too (pycocotools' C loops are guarded by
``rle.validate``, which every RLE from outside goes through before pycocotools sees it).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import string
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from perckit import rle as R
from perckit.errors import PerckitError

FUZZ = settings(max_examples=int(os.environ.get("PERCKIT_FUZZ_EXAMPLES", 100)), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUZZ_SLOW = settings(max_examples=int(os.environ.get("PERCKIT_FUZZ_EXAMPLES", 100)) // 2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SECONDS = 20  # per call: generous, a real hang is infinite


@contextlib.contextmanager
def time_limit(seconds: float = SECONDS):
    def handler(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s (a hang)")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def documented_only(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, or ``None`` when it raises a documented perckit error; anything else propagates."""
    with time_limit():
        try:
            return fn(*args, **kwargs)
        except PerckitError as e:
            assert str(e), "a documented error with an empty message"
            return None


# ---------------------------------------------------------------- strategies

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=16,
)
COCO_CHARS = "".join(chr(c) for c in range(48, 112))
counts_text = st.text(alphabet=COCO_CHARS, max_size=24) | st.text(alphabet=COCO_CHARS + "!~ \x00é", max_size=24)
sizes = (
    st.tuples(st.integers(1, 40), st.integers(1, 40)).map(list)
    | st.lists(st.integers(-3, 2**33), max_size=3)
    | st.lists(st.floats(allow_nan=True), min_size=2, max_size=2)
    | json_values
)
rle_counts = counts_text | st.binary(max_size=24) | st.lists(st.integers(-3, 2000), max_size=8) | json_values
rle_dicts = st.fixed_dictionaries({"size": sizes, "counts": rle_counts}) | st.dictionaries(st.sampled_from(["size", "counts", "other"]), json_values, max_size=3)
json_rle_dicts = st.fixed_dictionaries({"size": sizes, "counts": counts_text | st.lists(st.integers(-3, 2000), max_size=8) | json_values})
polygons = st.lists(st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**40), 2**40), max_size=10), max_size=3)


def _exercise(out: dict) -> None:
    """A validated RLE must be safe for every pycocotools-backed helper."""
    assert set(out) == {"size", "counts"} and isinstance(out["counts"], str)
    a = R.area(out)
    assert 0 <= a <= out["size"][0] * out["size"][1]
    inter, union = R.intersection_union(out, out)
    assert inter == union == a
    R.to_bbox(out)
    R.union([out, out])
    if out["size"][0] * out["size"][1] <= 4096:
        assert int(R.decode(out).sum()) == a


# ---------------------------------------------------------------- RLE helpers


@FUZZ
@given(obj=rle_dicts | json_values | polygons)
def test_rle_to_rle_and_validate_random_objects(obj):
    for fn in (R.to_rle, R.validate):
        out = documented_only(fn, obj)
        if out is not None:
            with time_limit():
                _exercise(out)


@FUZZ
@given(obj=rle_dicts | polygons | json_values, size=st.tuples(st.integers(1, 48), st.integers(1, 48)))
def test_rle_to_rle_with_a_size(obj, size):
    out = documented_only(R.to_rle, obj, size=list(size), where="fuzz")
    if out is not None:
        assert out["size"] == list(size)
        with time_limit():
            _exercise(out)


@FUZZ
@given(counts=st.binary(max_size=40) | counts_text, h=st.integers(1, 2**16), w=st.integers(1, 2**16))
def test_rle_validate_random_counts_bytes(counts, h, w):
    out = documented_only(R.validate, {"size": [h, w], "counts": counts})
    if out is not None:
        with time_limit():
            _exercise(out)
    documented_only(R.decode_counts, counts)


@FUZZ
@given(arr=hnp.arrays(hnp.scalar_dtypes(), hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6)))
def test_rle_to_rle_random_arrays(arr):
    out = documented_only(R.to_rle, arr)
    if out is not None:
        with time_limit():
            _exercise(out)


# ---------------------------------------------------------------- files

random_bytes = st.binary(max_size=300)
json_text = json_values.map(lambda v: json.dumps(v))


def _tiny_png(draw_bytes: bytes) -> bytes:
    from PIL import Image

    arr = np.frombuffer((draw_bytes * 16)[:16] or b"\0" * 16, dtype=np.uint8).reshape(4, 4)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


@contextlib.contextmanager
def folder():
    with tempfile.TemporaryDirectory(prefix="perckit-fuzz-") as d:
        yield Path(d)


# ---------------------------------------------------------------- r4d_bench


mask_paths = st.sampled_from(["m.png", "missing.png", "", "/", ".", "sub/../m.png", "bad.png"]) | st.text(max_size=10)
r4d_mask_files = st.dictionaries(
    st.text(max_size=6),
    st.fixed_dictionaries({"frames": st.dictionaries(st.text(alphabet="0123456789x-", max_size=4), mask_paths, max_size=3)})
    | st.lists(st.fixed_dictionaries({"frame_id": json_values, "mask_path": mask_paths}), max_size=3)
    | json_values,
    max_size=3,
).map(json.dumps)


@FUZZ_SLOW
@given(content=random_bytes | json_text | r4d_mask_files, png=random_bytes)
def test_r4d_mask_prediction_files(content, png):
    from perckit.r4d_bench.io import load_mask_predictions

    with folder() as d:
        (d / "p.json").write_bytes(content.encode() if isinstance(content, str) else content)
        (d / "m.png").write_bytes(_tiny_png(png))
        (d / "bad.png").write_bytes(png)
        rows = documented_only(load_mask_predictions, d / "p.json", d)
        assert rows is None or all(isinstance(r["query_id"], str) for r in rows)


@FUZZ
@given(content=random_bytes | json_text | st.dictionaries(st.text(max_size=5), st.lists(json_values, max_size=3) | json_values, max_size=3).map(json.dumps))
def test_r4d_track_prediction_files(content):
    from perckit.r4d_bench.io import load_track_predictions

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
def valid_npz(draw) -> bytes:
    arrays = {}
    for key in draw(st.sets(st.sampled_from(["tracking_xyz", "depth", "camera_c2w", "frame_indices", "x"]), max_size=3)):
        arrays[key] = draw(hnp.arrays(st.sampled_from([np.float32, np.float64, np.int32, np.bool_, np.dtype("U2")]), hnp.array_shapes(max_dims=3, max_side=4)))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


@FUZZ_SLOW
@given(content=random_bytes | npz_files() | valid_npz())
def test_syn4d_npz_prediction_files(content):
    from perckit.syn4d.io import PREDICTION_KEYS, load_prediction_row, read_npz

    with folder() as d:
        p = d / "seq.npz"
        p.write_bytes(content)
        out = documented_only(read_npz, p)
        assert out is None or set(out) == set(PREDICTION_KEYS)
        documented_only(load_prediction_row, p, "og/dream/seq")
        documented_only(load_prediction_row, p, "og/dream/seq", as_lists=False)


# ---------------------------------------------------------------- refcoco_m

refcoco_lines = st.lists(
    st.fixed_dictionaries({"expression_id": st.text(max_size=4) | json_values, "mask": json_rle_dicts | json_values})
    | st.fixed_dictionaries({"sample_id": json_values, "sentence_index": json_values, "mask": json_rle_dicts})
    | json_values,
    max_size=4,
).map(lambda rows: "\n".join(json.dumps(r) for r in rows))


@FUZZ
@given(content=random_bytes | refcoco_lines | st.text(max_size=200))
def test_refcoco_jsonl_prediction_files(content):
    from perckit.refcoco_m.io import load_predictions_jsonl

    with folder() as d:
        p = d / "p.jsonl"
        p.write_bytes(content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content)
        rows = documented_only(load_predictions_jsonl, p)
        if rows:
            for r in rows:
                with time_limit():
                    _exercise(r["mask"])


image_rows = st.lists(
    st.fixed_dictionaries({"image_id": json_values, "samples": st.lists(st.fixed_dictionaries({"id": json_values, "masks": st.lists(rle_dicts, max_size=2) | json_values}) | json_values, max_size=3)})
    | json_values,
    max_size=3,
)


@FUZZ
@given(rows=image_rows | json_values)
def test_refcoco_flatten_image_predictions(rows):
    from perckit.refcoco_m.io import flatten_image_predictions

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


@FUZZ_SLOW
@given(files=rav_folders(), ids=st.none() | st.lists(stems, max_size=3))
def test_reason_av_edit_prediction_folders(files, ids):
    from perckit.reason_av_edit.io import load_predictions_dir

    with folder() as d:
        for name, body in files.items():
            (d / name).write_bytes(body)
        rows = documented_only(load_predictions_dir, d, ids)
        assert rows is None or all(isinstance(r["sample_id"], str) for r in rows)


# ---------------------------------------------------------------- the CLI's file reader


@FUZZ
@given(content=random_bytes | json_text | st.lists(json_values, max_size=4).map(lambda v: "\n".join(json.dumps(x) for x in v)), suffix=st.sampled_from([".jsonl", ".json", ".txt"]))
def test_cli_row_files(content, suffix):
    from perckit.__main__ import _read_rows

    with folder() as d:
        p = d / f"rows{suffix}"
        p.write_bytes(content.encode() if isinstance(content, str) else content)
        rows = documented_only(_read_rows, str(p))
        assert rows is None or all(isinstance(r, dict) for r in rows)


def test_missing_files_are_input_not_found(tmp_path):
    from perckit.__main__ import _read_rows
    from perckit.errors import InputNotFoundError
    from perckit.r4d_bench.io import load_mask_predictions, load_track_predictions
    from perckit.reason_av_edit.io import load_predictions_dir
    from perckit.refcoco_m.io import load_predictions_jsonl
    from perckit.syn4d.io import read_npz

    for fn, arg in [(load_mask_predictions, "a.json"), (load_track_predictions, "a.json"), (read_npz, "a.npz"), (load_predictions_jsonl, "a.jsonl"),
                    (load_predictions_dir, "nodir"), (_read_rows, "a.jsonl"), (_read_rows, "a.json")]:
        with pytest.raises(InputNotFoundError) as info:
            fn(str(tmp_path / arg))
        assert isinstance(info.value, FileNotFoundError) and arg in str(info.value)
