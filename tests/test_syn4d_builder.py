"""The Syn4D builder: bit-exact ground truth from the official files, both configs, both datasets lines, bad input."""

import json
import shutil

import numpy as np
import pytest
from helpers.common import SYN4D_PARITY
from helpers.fake_hub import fake_snapshot_download
from helpers.harness import messages as _messages

from perckit.hf.entrypoints import build_split
from perckit.errors import ReleaseFormatError, ReleaseNotFoundError
from perckit.syn4d.layout import resolve_release
from perckit.syn4d.read import load_records, read_camera_csv, read_depth_exr, read_depth_sequence, read_tracking_npy
from perckit.syn4d.rows import unreal_rows_to_c2w

NPY = "benchmark/data/tracking_gt/{}.npy"


def _official_npy(sid):
    return np.load(SYN4D_PARITY / NPY.format(sid), allow_pickle=False)[()]


def test_parity_fixture_rows_are_bit_exact(syn4d_parity_rows):
    rows = syn4d_parity_rows
    assert [r["sequence_id"] for r in rows] == ["mixed/antiquity/seq_000000_0", "og/dream/seq_000001_1", "sim/office/seq_000002_0"]
    for row in rows:
        gt = _official_npy(row["sequence_id"])
        assert np.array_equal(row["tracks_ref0"], gt["tracks_ref0"], equal_nan=True)
        assert row["tracks_ref0"].dtype == np.float32
        assert np.array_equal(row["visibility"], gt["visibility"]) and row["visibility"].dtype == bool
        assert np.array_equal(row["dynamic"], gt["dynamic"])
        assert np.array_equal(row["query_uv"], gt["query_uv"])
        assert row["intrinsics"].tolist() == [1000.0, 1000.0, 640.0, 360.0]
        assert row["image_size"].tolist() == [720, 1280]
        assert row["frame_indices"].tolist() == list(range(0, 192, 6))
        assert row["schema"] == "syn4d-tracking-gt-v1"
        assert row["depth_m"].shape == (32, 90, 160) and row["depth_m"].dtype == np.float32
        assert row["camera_c2w"].shape == (32, 4, 4) and row["camera_unreal"].shape == (32, 6)
        assert row["video"] is None  # the parity fixture has no mp4
    assert rows[1]["camera"] == 1 and rows[0]["camera"] == 0


def test_depth_is_centimetres_over_100_in_float32(syn4d_parity_rows):
    import Imath
    import OpenEXR

    f = OpenEXR.InputFile(str(SYN4D_PARITY / "challenge_eval/mixed/antiquity/exr_layers/depth/seq_000000_0/seq_000000_0_0006_depth.exr"))
    raw = np.frombuffer(f.channel("Depth", Imath.PixelType(Imath.PixelType.FLOAT)), dtype=np.float32).reshape(90, 160)
    assert np.array_equal(syn4d_parity_rows[0]["depth_m"][1], raw / np.float32(100), equal_nan=True)


def test_camera_c2w_is_the_official_conversion(syn4d_parity_rows):
    import csv

    path = SYN4D_PARITY / "challenge_eval/og/dream/ground_truth/meta_exr_csv/seq_000001_1_camera.csv"
    rows = {r["name"]: r for r in csv.DictReader(open(path))}
    unreal = np.array([[float(rows[f"seq_000001_1_{t:04d}.png"][k]) for k in ("x", "y", "z", "yaw", "pitch", "roll")] for t in range(0, 192, 6)])
    row = syn4d_parity_rows[1]
    assert np.array_equal(row["camera_unreal"], unreal)
    assert np.array_equal(row["camera_c2w"], unreal_rows_to_c2w(unreal))
    assert np.allclose(np.linalg.det(row["camera_c2w"][:, :3, :3]), -1.0)  # left-handed Unreal world


def test_tracking_config_both_lines_same_rows(tmp_path, syn4d_parity_rows):
    ds = build_split("syn4d", "tracking", SYN4D_PARITY, tmp_path)
    assert "depth_m" not in ds.features and ds.num_rows == 3
    for a, b in zip(ds.with_format("numpy"), syn4d_parity_rows):
        assert np.array_equal(a["tracks_ref0"], b["tracks_ref0"], equal_nan=True)


def test_synthetic_release_layout_and_rows(syn4d_release, tmp_path):
    root = syn4d_release.root
    assert (root / "benchmark/sequences.jsonl").is_file() and (root / "benchmark/protocol.json").is_file()
    assert (root / "benchmark/baselines.json").is_file() and (root / "benchmark/SHA256SUMS").is_file()
    line = (root / "benchmark/SHA256SUMS").read_text().splitlines()[0]
    assert len(line.split("  ")[0]) == 64  # sha256sum format
    ds = build_split("syn4d", "challenge", root, tmp_path).with_format("numpy")
    assert ds.num_rows == 16 == len(syn4d_release.sequence_ids)
    assert ds.features["tracks_ref0"].shape == (None, 32, 3)
    assert ds.features["depth_m"].shape == (None, 18, 32)
    video = ds[0]["video"]
    assert video["path"].endswith("challenge_eval/mixed/antiquity/mp4/seq_000000_0.mp4") and video["bytes"] is None
    import av

    with av.open(video["path"]) as c:
        assert c.streams.video[0].codec_context.name == "h264"


def test_streaming_yields_the_same_first_row(syn4d_release, tmp_path):
    from perckit.hf.entrypoints import builder_class

    b = builder_class("syn4d")(config_name="tracking", data_dir=str(syn4d_release.root), cache_dir=str(tmp_path))
    first = next(iter(b.as_streaming_dataset("test")))
    assert first["sequence_id"] == syn4d_release.sequence_ids[0]
    assert np.asarray(first["tracks_ref0"]).shape == (32, 32, 3)


def test_filters_and_no_index(syn4d_release, tmp_path):
    ds = build_split("syn4d", "tracking", syn4d_release.root, tmp_path, variants=("og",), cameras=(1,))
    assert ds["sequence_id"] == ["og/antiquity/seq_000000_1", "og/office/seq_000000_1"]
    root = tmp_path / "noindex"
    shutil.copytree(syn4d_release.root / "benchmark/data", root / "data")
    ds = build_split("syn4d", "tracking", root, tmp_path / "c2")
    assert ds.num_rows == 16 and ds["sequence_id"] == sorted(ds["sequence_id"])


def test_challenge_inside_benchmark(tmp_path):
    from perckit.samples import write_release

    fx = write_release("syn4d", tmp_path / "r", variants=("sim",), scenes=("office",), challenge_inside=True, write_video=False)
    ds = build_split("syn4d", "challenge", fx.root, tmp_path / "c").with_format("numpy")
    assert ds.num_rows == 2 and ds[0]["depth_m"].shape == (32, 18, 32) and ds[0]["video"] is None


# ---------------------------------------------------------------- bad input


@pytest.fixture
def small(tmp_path):
    from perckit.samples import write_release

    return write_release("syn4d", tmp_path / "rel", variants=("og",), scenes=("dream",), cameras=(0,), write_video=False)


def _npy(small):
    return small.root / "benchmark/data/tracking_gt/og/dream/seq_000000_0.npy"


def _rewrite(path, mutate):
    rec = np.load(path, allow_pickle=False)
    rec = mutate(rec)
    np.save(path, rec, allow_pickle=True)


def _build(small, tmp_path, config="tracking", **kw):
    return build_split("syn4d", config, small.root, tmp_path / "cache", verify_checksums=False, **kw)


def test_pickled_object_npy_is_refused(small, tmp_path):
    np.save(_npy(small), np.array({"schema": "syn4d-tracking-gt-v1"}, dtype=object), allow_pickle=True)
    with pytest.raises(ReleaseFormatError, match=r"seq_000000_0.npy.*non-pickled"):
        read_tracking_npy(_npy(small))


def test_wrong_schema_string(small):
    def mutate(r):
        r["schema"] = "syn4d-tracking-gt-v0"
        return r

    _rewrite(_npy(small), mutate)
    with pytest.raises(ReleaseFormatError, match=r"seq_000000_0.npy.*expected schema 'syn4d-tracking-gt-v1', got 'syn4d-tracking-gt-v0'"):
        read_tracking_npy(_npy(small))


def test_wrong_field_shape(small):
    from perckit.samples.syn4d import npy_dtype

    rec = np.load(_npy(small), allow_pickle=False)
    dt = [(n, rec.dtype[n].base, rec.dtype[n].shape) if n != "dynamic" else ("dynamic", "?", (31,)) for n in rec.dtype.names]
    bad = np.zeros((), dtype=dt)
    for n in rec.dtype.names:
        if n != "dynamic":
            bad[n] = rec[n]
    np.save(_npy(small), bad)
    assert npy_dtype(32, 32) == rec.dtype
    with pytest.raises(ReleaseFormatError, match=r"expected dynamic of shape \(32,\), got \(31,\)"):
        read_tracking_npy(_npy(small))


def test_not_zero_d(small):
    np.save(_npy(small), np.zeros((2,), dtype=np.load(_npy(small), allow_pickle=False).dtype))
    with pytest.raises(ReleaseFormatError, match=r"shape \(\)\), got shape \(2,\)"):
        read_tracking_npy(_npy(small))


def test_sequence_id_disagreeing_with_path(small, tmp_path):
    def mutate(r):
        r["sequence_id"] = "og/dream/seq_000009_0"
        return r

    _rewrite(_npy(small), mutate)
    with pytest.raises(Exception) as info:
        _build(small, tmp_path)
    assert any("seq_000000_0.npy" in m and "sequence_id inside is 'og/dream/seq_000009_0', but its path says 'og/dream/seq_000000_0'" in m for m in _messages(info.value))


def test_checksum_mismatch_names_the_file(small, tmp_path):
    def mutate(r):
        r["query_uv"] = r["query_uv"] + 1
        return r

    _rewrite(_npy(small), mutate)
    with pytest.raises(Exception) as info:
        build_split("syn4d", "tracking", small.root, tmp_path / "cache")
    chain = _messages(info.value)
    assert any("seq_000000_0.npy" in m and "SHA-256 mismatch" in m and "expected" in m for m in chain), chain
    assert build_split("syn4d", "tracking", small.root, tmp_path / "c2", verify_checksums=False).num_rows == 1


def test_missing_release_and_challenge(small, tmp_path):
    with pytest.raises(ReleaseNotFoundError, match="does not exist"):
        build_split("syn4d", "tracking", tmp_path / "nope", tmp_path / "c")
    shutil.rmtree(small.root / "challenge_eval")
    with pytest.raises(ReleaseNotFoundError, match="challenge_eval"):
        _build(small, tmp_path, "challenge")


def test_partial_exr_set_and_missing_csv_row(small, tmp_path):
    depth = small.root / "challenge_eval/og/dream/exr_layers/depth/seq_000000_0"
    (depth / "seq_000000_0_0090_depth.exr").unlink()
    rec = load_records(resolve_release(small.root))[0]
    with pytest.raises(ReleaseFormatError, match=r"expected 32 depth EXRs, 1 missing.*0090"):
        read_depth_sequence(rec)
    csv_path = small.root / "challenge_eval/og/dream/ground_truth/meta_exr_csv/seq_000000_0_camera.csv"
    lines = [l for l in csv_path.read_text().splitlines() if not l.startswith("seq_000000_0_0012.png")]
    csv_path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ReleaseFormatError, match=r"camera.csv.*'seq_000000_0_0012.png'"):
        read_camera_csv(rec)


def test_exr_without_a_depth_channel_and_wrong_size(small, tmp_path):
    import Imath
    import OpenEXR

    path = small.root / "challenge_eval/og/dream/exr_layers/depth/seq_000000_0/seq_000000_0_0000_depth.exr"
    header = OpenEXR.Header(32, 18)
    header["channels"] = {"G": Imath.Channel(Imath.PixelType(Imath.PixelType.FLOAT))}
    out = OpenEXR.OutputFile(str(path), header)
    out.writePixels({"G": np.zeros((18, 32), np.float32).tobytes()})
    out.close()
    with pytest.raises(ReleaseFormatError, match=r"_0000_depth.exr.*one of the channels \['Depth', 'Z', 'R', 'Y'\].*\['G'\]"):
        read_depth_exr(path)
    with pytest.raises(ReleaseFormatError, match=r"expected depth size \(H, W\) = \(20, 32\), got \(18, 32\); set the option depth_hw"):
        read_depth_exr(path, (20, 32))
    path.write_bytes(b"not an exr")
    with pytest.raises(ReleaseFormatError, match="readable OpenEXR"):
        read_depth_exr(path)


def test_bad_index_lines(small, tmp_path):
    idx = small.root / "benchmark/sequences.jsonl"
    good = idx.read_text().splitlines()[0]
    idx.write_text(good + "\n{broken\n")
    with pytest.raises(ReleaseFormatError, match=r"sequences.jsonl' line 2: expected a JSON object"):
        load_records(resolve_release(small.root))
    idx.write_text(good + "\n" + good + "\n")
    with pytest.raises(ReleaseFormatError, match="duplicate sequence_id"):
        load_records(resolve_release(small.root))
    obj = json.loads(good)
    obj["frame_indices"] = list(range(32))  # [inferred]: ignored with one warning, the card's frames read
    idx.write_text(json.dumps(obj) + "\n")
    assert load_records(resolve_release(small.root))[0].frame_indices == tuple(range(0, 192, 6))


def test_q_differs_from_the_build(small, tmp_path):
    with pytest.raises(Exception) as info:
        _build(small, tmp_path, num_queries=64)
    msgs = _messages(info.value)
    assert any("Q = 32" in m and "num_queries" in m for m in msgs), msgs


@pytest.mark.parametrize("config", ["tracking", "challenge"])
def test_hub_download_fetches_only_needed_files(syn4d_release, tmp_path, monkeypatch, config):
    from perckit.hf import hub
    from perckit.hf.entrypoints import builder_class

    source = tmp_path / "hub_repo"
    shutil.copytree(syn4d_release.root, source)
    calls = []
    monkeypatch.setattr(hub, "snapshot_download", fake_snapshot_download(source, calls))
    b = builder_class("syn4d")(config_name=config, cache_dir=str(tmp_path / "c"), variants=("og",))
    b.download_and_prepare()
    assert b.as_dataset("test")["sequence_id"] == [s for s in syn4d_release.sequence_ids if s.startswith("og/")]
    assert calls[0]["repo_id"] == "Syn4D/Syn4D_Benchmark" and calls[0]["repo_type"] == "dataset"
    snap = tmp_path / "snapshot_1"
    fetched = sorted(p.relative_to(snap).as_posix() for p in snap.rglob("*") if p.is_file())
    assert all("/og/" in f or f.startswith("benchmark/") and "/tracking_gt/" not in f for f in fetched)
    assert any(f.endswith(".exr") for f in fetched) == (config == "challenge")
    assert not any(f.endswith(("protocol.json", "baselines.json", "README.md")) for f in fetched)


def test_hub_build_leaves_the_shared_config_unchanged(syn4d_release, tmp_path, monkeypatch):
    """A Hub build keeps its snapshot on the builder: the class's BUILDER_CONFIGS entry (which datasets hands to
    every builder made without config options) keeps data_dir=None, so a second build downloads again."""
    from perckit.hf import hub
    from perckit.hf.entrypoints import builder_class

    source = tmp_path / "hub_repo"
    shutil.copytree(syn4d_release.root, source)
    calls = []
    monkeypatch.setattr(hub, "snapshot_download", fake_snapshot_download(source, calls))
    cls = builder_class("syn4d")
    for n in (1, 2):
        b = cls(config_name="tracking", cache_dir=str(tmp_path / f"c{n}"))
        b.download_and_prepare()
        assert len(calls) == n, calls
        assert b.as_dataset("test").num_rows == len(syn4d_release.sequence_ids)
    assert all(c.data_dir is None for c in cls.BUILDER_CONFIGS), [c.data_dir for c in cls.BUILDER_CONFIGS]


def test_hub_offline_error_names_data_dir(tmp_path):
    from perckit.hf.entrypoints import builder_class

    b = builder_class("syn4d")(config_name="tracking", cache_dir=str(tmp_path))
    with pytest.raises(ReleaseNotFoundError, match="Syn4D/Syn4D_Benchmark.*data_dir="):
        b.download_and_prepare()


# ---------------------------------------------------------------- model inputs (issue 31)


def _frame_number(frame):
    """The number a sample-release frame shows in its top rows (8 bands of 0 / 255, bit 0 left)."""
    band = frame.shape[1] // 8
    top = frame[: frame.shape[0] // 4, : 8 * band].astype(float).mean(axis=(0, 2)).reshape(8, band).mean(axis=1)
    return int(sum(1 << b for b in range(8) if top[b] > 127))


def test_model_inputs_are_the_evaluated_frames_of_the_mp4(syn4d_release, tmp_path):
    """From a challenge row and from a release path: uint8 [32, H, W, 3], frames 0, 6, ..., 186 of the MP4, equal to
    those frames decoded directly (every frame of the 192, by PyAV), each showing its own frame number."""
    import av

    from perckit.syn4d import model_inputs
    from perckit.syn4d.layout import FRAME_INDICES

    row = build_split("syn4d", "challenge", syn4d_release.root, tmp_path, limit=1)[0]
    rel = "challenge_eval/mixed/antiquity/mp4/seq_000000_0.mp4"
    with av.open(str(syn4d_release.root / rel)) as c:
        every = np.stack([f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])])
    assert every.shape == (192, 36, 64, 3) and [_frame_number(f) for f in every] == list(range(192))
    for got in (model_inputs(row), model_inputs(rel, root=syn4d_release.root), model_inputs({"video": {"bytes": (syn4d_release.root / rel).read_bytes()}})):
        assert got.shape == (32, 36, 64, 3) and got.dtype == np.uint8
        assert np.array_equal(got, every[list(FRAME_INDICES)])
        assert [_frame_number(f) for f in got] == list(FRAME_INDICES) == list(range(0, 187, 6))


def test_model_inputs_refusals(syn4d_release, tmp_path):
    from perckit.samples.base import encode_mp4
    from perckit.syn4d import model_inputs

    root = syn4d_release.root
    with pytest.raises(ReleaseFormatError, match="no video"):
        model_inputs({"sequence_id": "og/dream/seq_000000_0", "video": None})
    with pytest.raises(ReleaseFormatError, match="needs root="):
        model_inputs("challenge_eval/mixed/antiquity/mp4/seq_000000_0.mp4")
    for bad in ("../outside.mp4", "/etc/passwd"):
        with pytest.raises(ReleaseFormatError, match="release root"):
            model_inputs(bad, root=root)
    with pytest.raises(ReleaseNotFoundError, match="not found"):
        model_inputs("challenge_eval/og/nowhere.mp4", root=root)
    short = {"sequence_id": "x/y/z", "video": {"bytes": encode_mp4(np.zeros((100, 16, 16, 3), np.uint8)), "path": ""}}
    with pytest.raises(ReleaseFormatError, match=r"'x/y/z'.*ends before frame 102; expected the 32 frames 0, 6, \.\.\., 186"):
        model_inputs(short)
    with pytest.raises(ReleaseFormatError, match="cannot be decoded"):
        model_inputs({"video": {"bytes": b"not a video", "path": ""}})
