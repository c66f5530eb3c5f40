"""The Syn4D builder's Arrow tables (``perckit.syn4d.rows.arrow_table``, built from the rows' numpy
buffers) against the reference, ``datasets``' per-example encoding (``Features.encode_example`` and
``ArrowWriter``, ``tests/oracles/syn4d.py``), on the sample releases (every config) and on hand-made rows."""

from __future__ import annotations

import os

import datasets
import numpy as np
import pyarrow as pa
import pytest
from helpers.common import SYN4D_PARITY
from oracles.syn4d import reference_table

from perckit.errors import ReleaseFormatError
from perckit.io.paths import check_relative
from perckit.io.paths import resolve_under
from perckit.syn4d import features as feats
from perckit.syn4d.layout import PLAIN_RELATIVE, PathResolver, real_path, resolve_release
from perckit.syn4d.read import _read_npy_data, check_npy_header, load_records, read_checksums, read_tracking_npy
from perckit.syn4d.rows import arrow_table
from perckit.syn4d.builder import Syn4DBuilder


def _builder(root, config, cache):
    return Syn4DBuilder(config_name=config, data_dir=str(root), cache_dir=str(cache))


def _rows_and_tables(root, config, cache):
    b = _builder(root, config, cache)
    (gen,) = b._split_generators(None)
    rows = [b._row(r, gen.gen_kwargs["paths"]) for r in gen.gen_kwargs["records"]]
    return b, rows, [t for _, t in b._generate_tables(**gen.gen_kwargs)]


def _canon(arr: pa.Array):
    """An array as comparable Python values, floats by their bits (NaN equals NaN of the same payload;
    ``pa.Table.equals`` says NaN != NaN)."""
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    if pa.types.is_list(arr.type):
        return ("list", arr.is_null().to_pylist(), arr.value_lengths().to_pylist(), _canon(arr.flatten()))
    if pa.types.is_struct(arr.type):
        # the fields of the non-null rows (under a null row, what pyarrow leaves in a field is not a value)
        present = arr.filter(arr.is_valid())
        return ("struct", arr.is_null().to_pylist(), [_canon(present.field(i)) for i in range(arr.type.num_fields)])
    if pa.types.is_floating(arr.type):
        values = arr.fill_null(0).to_numpy(zero_copy_only=False)
        return ("float", arr.is_null().to_pylist(), values.view(np.uint32 if values.dtype == np.float32 else np.uint64).tolist())
    return arr.to_pylist()


def _equal(a: pa.Table, b: pa.Table) -> bool:
    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False
    return all(_canon(a.column(n).combine_chunks()) == _canon(b.column(n).combine_chunks()) for n in a.schema.names)


@pytest.mark.parametrize("config", ["tracking", "challenge"])
@pytest.mark.parametrize("which", ["sample", "parity"])
def test_tables_equal_the_per_example_encoding_on_the_sample_releases(syn4d_release, tmp_path, config, which):
    root = syn4d_release.root if which == "sample" else SYN4D_PARITY
    b, rows, built = _rows_and_tables(root, config, tmp_path / "c")
    ref = reference_table(rows, b.info.features)
    assert ref.num_rows == len(rows) > 0
    assert _equal(pa.concat_tables(built), ref)
    assert _equal(arrow_table(rows, b.info.features), ref)
    # and the prepared dataset holds that table
    b.download_and_prepare()
    ds = b.as_dataset(split="test")
    assert _equal(ds.data.table, ref)


def _row(t=4, q=3, hw=(2, 5), rng=None, **over):
    rng = rng or np.random.default_rng(0)
    row = {
        "sequence_id": "og/dream/seq_000000_0", "variant": "og", "scene": "dream", "sequence": "seq_000000_0",
        "camera": 0, "schema": "syn4d-tracking-gt-v1", "frame_indices": list(range(0, 6 * t, 6)),
        "image_size": [720, 1280], "intrinsics": [1000.0, 1000.0, 640.0, 360.0],
        "query_uv": rng.random((q, 2), dtype=np.float32), "tracks_ref0": rng.random((t, q, 3), dtype=np.float32),
        "visibility": rng.random((t, q)) < 0.5, "dynamic": [bool(x) for x in rng.random(q) < 0.5],
        "video": {"path": "/x/seq.mp4", "bytes": None},
        "depth_m": rng.random((t, *hw), dtype=np.float32), "camera_c2w": rng.random((t, 4, 4)),
        "camera_unreal": rng.random((t, 6)),
    }
    if t:
        row["tracks_ref0"][0, 0, 0] = np.nan
    row.update(over)
    return row


def _features(q=3, hw=(2, 5), challenge=True):
    return datasets.Features(feats.challenge_features(q, hw) if challenge else feats.tracking_features(q))


_TRACKING = tuple(feats.tracking_features(3))


@pytest.mark.parametrize("case", [
    "plain", "none_video", "none_depth", "none_pose", "all_none", "zero_frames", "float64_tracks", "int_visibility",
    "numpy_lists", "one_row",
])
def test_hand_made_rows_equal_the_reference(case):
    rng = np.random.default_rng(1)
    rows = [_row(rng=rng), _row(t=2, rng=rng), _row(rng=rng)]
    f = _features()
    if case == "none_video":
        rows[1]["video"] = None
    elif case == "none_depth":
        rows[0]["depth_m"] = None
    elif case == "none_pose":
        rows[2]["camera_c2w"] = rows[2]["camera_unreal"] = None
    elif case == "all_none":
        for r in rows:
            for k in ("query_uv", "tracks_ref0", "visibility", "dynamic", "depth_m", "video", "schema"):
                r[k] = None
    elif case == "zero_frames":
        rows[1] = _row(t=0, rng=rng)
    elif case == "float64_tracks":
        rows[0]["tracks_ref0"] = rows[0]["tracks_ref0"].astype(np.float64)
    elif case == "int_visibility":
        rows[2]["visibility"] = rows[2]["visibility"].astype(np.int64)
    elif case == "numpy_lists":
        rows[0]["dynamic"] = np.asarray(rows[0]["dynamic"])
        rows[1]["image_size"] = np.asarray(rows[1]["image_size"], dtype=np.int32)
    elif case == "one_row":
        rows = rows[:1]
    ref = reference_table(rows, f)
    assert ref.num_rows == len(rows)
    assert _equal(arrow_table(rows, f), ref)
    tracking = [{k: r[k] for k in _TRACKING} for r in rows]
    ft = _features(challenge=False)
    assert _equal(arrow_table(tracking, ft), reference_table(tracking, ft))


@pytest.mark.parametrize("field, value, shape", [
    ("tracks_ref0", np.zeros((4, 2, 3), np.float32), "(T, 3, 3)"), ("depth_m", np.zeros((2, 10), np.float32), "(T, 2, 5)"),
])
def test_a_value_of_the_wrong_shape_is_refused_naming_row_and_field(field, value, shape):
    rows = [_row(), _row(**{field: value})]
    with pytest.raises(ReleaseFormatError) as info:
        arrow_table(rows, _features())
    assert str(info.value) == (
        f"Syn4D row 'og/dream/seq_000000_0': field {field!r}: expected an array of shape {shape}, got {value.shape}"
    )


# ---------------------------------------------------------------- the path resolver and the checksum names



_NAMES = [
    "a", "a/b.npy", "data/tracking_gt/mixed/antiquity/seq_000000_0.npy", "/a", "..", "a/../b", "a/..", "./a", "a/./b",
    ".hidden", "a//b", "a/", "a\\b", "..\\x", "C:x", "x" * 4097, "x" * 4096, "a\x00b", "...", "a/.../b", "a..b", "..a",
    "é/x", "a b", "", " ", "a/.", "-a", "+", "out", "out/x.npy", "inlink/f.npy", "inlink", "missing/deeper/f.npy",
    "loop", "loop/x", "dir/", "dir/f.npy", "dir/outfile",
]


def _verdict(fn, *args):
    try:
        return ("ok", str(fn(*args)))
    except ReleaseFormatError as e:
        return ("error", str(e))


def test_plain_relative_names_are_a_subset_of_check_relative():
    rng = np.random.default_rng(0)
    alphabet = list("ab./\\:-_ \x00é")
    names = _NAMES + ["".join(rng.choice(alphabet, size=int(rng.integers(0, 9)))) for _ in range(3000)]
    plain = [name for name in names if PLAIN_RELATIVE.fullmatch(name)]
    assert len(plain) > 100  # the random names reach the fast path often enough to test it
    refused = []
    for name in plain:
        try:
            check_relative(name, "w")
        except ReleaseFormatError:
            refused.append(name)
    assert refused == [], f"PLAIN_RELATIVE accepts names check_relative refuses: {refused[:5]}"


def test_path_resolver_answers_as_resolve_under(tmp_path):
    base = tmp_path / "base"
    (base / "dir").mkdir(parents=True)
    (base / "dir" / "f.npy").write_bytes(b"x")
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", base / "out")
    os.symlink(base / "dir", base / "inlink")
    os.symlink(tmp_path / "outside" / "o", base / "dir" / "outfile")
    os.symlink(base / "loop", base / "loop")
    resolver = PathResolver(base)
    for name in _NAMES * 2:  # twice: the second pass answers from the folder cache
        assert _verdict(resolver, name, "w") == _verdict(resolve_under, base, name, "w"), name


def test_read_checksums_names(tmp_path):
    h = "0" * 64
    good = tmp_path / "ok"
    good.write_text("".join(f"{h}  {n}\n" for n in ("a/b.npy", "./c", "*d", "x/./y", "é")), encoding="utf-8")
    assert read_checksums(good) == {"a/b.npy": h, "c": h, "d": h, "x/./y": h, "é": h}
    for bad in ("../x", "/etc/passwd", "a/../../b", "C:x", "a\\..\\b"):
        p = tmp_path / "bad"
        p.write_text(f"{h}  ok\n{h}  {bad}\n", encoding="utf-8")
        with pytest.raises(ReleaseFormatError) as info:
            read_checksums(p)
        with pytest.raises(ReleaseFormatError) as ref:
            check_relative(bad, f"{str(p)!r} line 2: path")
        assert str(info.value) == str(ref.value)


def test_real_path_equals_resolve(tmp_path, monkeypatch):
    base = tmp_path / "base"
    (base / "dir").mkdir(parents=True)
    (base / "dir" / "f").write_bytes(b"x")
    (tmp_path / "outside").mkdir()
    os.symlink(tmp_path / "outside", base / "out")
    os.symlink(base / "dir", base / "inlink")
    os.symlink(base / "dir" / "f", base / "dir" / "g")
    monkeypatch.chdir(tmp_path)
    from pathlib import Path

    cache: dict = {}
    names = ["dir/f", "dir/g", "inlink/f", "inlink/g", "out/x", "out/../dir/f", "inlink/../dir/f", "missing/x", "dir", "."]
    for _ in range(2):
        for n in names:
            for p in (base / n, Path("base") / n):
                assert real_path(p, cache) == p.resolve(), p


@pytest.mark.parametrize("kind", ["c", "fortran", "empty", "scalar", "structured", "big_endian", "v2"])
def test_npy_data_read_once_equals_np_load(tmp_path, kind):
    arrays = {
        "c": np.arange(24, dtype=np.float32).reshape(2, 3, 4), "fortran": np.asfortranarray(np.arange(24.0).reshape(2, 3, 4)),
        "empty": np.zeros((0, 3)), "scalar": np.array(3.5), "big_endian": np.arange(5, dtype=">i4"),
        "structured": np.zeros((), dtype=[("a", "<f4", (2,)), ("b", "U5")]), "v2": np.arange(6, dtype=np.int16),
    }
    a, p = arrays[kind], tmp_path / f"{kind}.npy"
    if kind == "v2":
        with open(p, "wb") as f:
            np.lib.format.write_array(f, a, version=(2, 0))
    else:
        np.save(p, a)
    ref = np.load(p, allow_pickle=False)
    with open(p, "rb") as f:
        shape, fortran, dtype, version = check_npy_header(f, os.path.getsize(p), "w")
        got = _read_npy_data(f, shape, fortran, dtype)
    assert (version == (2, 0)) == (kind == "v2")
    assert got.dtype == ref.dtype and got.shape == ref.shape and got.flags.writeable
    assert got.flags.f_contiguous == ref.flags.f_contiguous and got.tobytes() == ref.tobytes()


def test_tracking_npy_rows_equal_np_load(syn4d_release):
    """read_tracking_npy's arrays (the header read once) equal those of np.load on every sample NPY."""
    paths = resolve_release(syn4d_release.root)
    for r in load_records(paths):
        npy = r.tracking_npy(paths.tracking_gt)
        got = read_tracking_npy(npy, r.sequence_id)
        ref = np.load(npy, allow_pickle=False)[()]
        for field, key in (("tracks_ref0", "tracks_ref0"), ("visibility", "visibility"), ("query_uv", "query_uv")):
            assert np.array_equal(got[key], np.asarray(ref[field]), equal_nan=True)
