"""Issue 13 for Syn4D: paths from the release (index fields, sequence ids that build paths, checksums) and from
prediction files stay inside their roots; text readers skip a leading BOM and refuse repeated JSON keys; FIFOs
never hang a reader; the metric reports coverage. (RefCOCO-M: tests/test_refcoco_m_trust.py.)
"""

from __future__ import annotations

import json
import math
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers.common import SYN4D_PARITY
from helpers.harness import deadline, expect
from helpers.bad_inputs import link_out

from perckit.hf.entrypoints import build_split
from perckit.errors import OptionError, PredictionError, ReleaseFormatError
from perckit.samples import write_release
from perckit.syn4d import evaluate as runner
from perckit.syn4d import metric as core
from perckit.syn4d.layout import prediction_path, resolve_release
from perckit.syn4d.read import load_records, read_camera_csv, read_checksums, read_npz, read_text, read_tracking_npy

INDEX = "benchmark/sequences.jsonl"
SUMS = "benchmark/SHA256SUMS"
NPY = "benchmark/data/tracking_gt/og/dream/seq_000000_0.npy"
CSV = "challenge_eval/og/dream/ground_truth/meta_exr_csv/seq_000000_0_camera.csv"
EXR = "challenge_eval/og/dream/exr_layers/depth/seq_000000_0/seq_000000_0_0000_depth.exr"
MP4 = "challenge_eval/og/dream/mp4/seq_000000_0.mp4"
BOM = b"\xef\xbb\xbf"


# ================================================================ Syn4D


@pytest.fixture(scope="module")
def s4_small(tmp_path_factory):
    return write_release("syn4d", tmp_path_factory.mktemp("s4_trust"), variants=("og",), scenes=("dream",), cameras=(0,), write_video=False).root


@pytest.fixture
def s4(s4_small, tmp_path):
    dest = tmp_path / "release"
    shutil.copytree(s4_small, dest)
    return dest


def _index(root: Path, **changes) -> None:
    p = root / INDEX
    obj = json.loads(p.read_text().splitlines()[0])
    obj.update(changes)
    p.write_text(json.dumps(obj) + "\n")


def _build(root: Path, tmp_path: Path, config: str = "challenge", **options):
    options.setdefault("verify_checksums", False)
    return build_split("syn4d", config, root, tmp_path / "cache", **options)


@pytest.mark.parametrize("key", ["depth_dir", "camera_csv"])
@pytest.mark.parametrize("kind", ["absolute", "dotdot", "backslash-dotdot"])
def test_index_path_leaving_the_challenge_folder_is_refused(s4, tmp_path, key, kind):
    real = json.loads((s4 / INDEX).read_text().splitlines()[0])[key]
    outside = tmp_path / "outside"
    shutil.copytree(s4 / "challenge_eval", outside)  # a full copy, so nothing else would stop the read
    value = {"absolute": str(outside / real), "dotdot": os.path.relpath(outside / real, s4 / "challenge_eval"),
             "backslash-dotdot": "..\\..\\" + real.replace("/", "\\")}[kind]
    _index(s4, **{key: value})
    expect(lambda: load_records(resolve_release(s4)), ReleaseFormatError, rf"sequences\.jsonl' line 1: '{key}'")


def test_index_camera_csv_symlinked_out_of_the_release_is_refused(s4, tmp_path):
    outside = tmp_path / "outside.csv"
    link_out(s4 / CSV, outside)
    expect(lambda: load_records(resolve_release(s4)), ReleaseFormatError, r"'camera_csv'|camera CSV", "symbolic link leaves the root")


@pytest.mark.parametrize("sid", ["og/../seq_000000_0", "og/./seq_000000_0", "og/dream/..", "og/dream\\x/seq"])
def test_sequence_id_parts_must_be_folder_names(s4, sid):
    _index(s4, sequence_id=sid, variant=None, scene=None, sequence=None)
    p = s4 / INDEX
    obj = {k: v for k, v in json.loads(p.read_text()).items() if v is not None}
    p.write_text(json.dumps(obj) + "\n")
    expect(lambda: load_records(resolve_release(s4)), ReleaseFormatError, r"line 1: expected 'sequence_id'", "three folder names")


def test_tracking_npy_symlinked_out_of_the_release_is_refused(s4, tmp_path):
    outside = tmp_path / "outside.npy"
    link_out(s4 / NPY, outside)
    expect(lambda: _build(s4, tmp_path, "tracking"), ReleaseFormatError, "tracking NPY", "symbolic link leaves the root")


def test_depth_exr_symlinked_out_of_the_release_is_refused(s4, tmp_path):
    outside = tmp_path / "outside.exr"
    link_out(s4 / EXR, outside)
    expect(lambda: _build(s4, tmp_path, depth_hw=(18, 32), num_queries=32), ReleaseFormatError, r"frame 0", "symbolic link leaves the root")


def test_video_symlinked_out_of_the_release_is_refused(s4, tmp_path):
    outside = tmp_path / "outside.mp4"
    outside.write_bytes(b"not yours")
    (s4 / MP4).parent.mkdir(parents=True, exist_ok=True)
    (s4 / MP4).symlink_to(outside)
    expect(lambda: load_records(resolve_release(s4)), ReleaseFormatError, "video", "symbolic link leaves the root")


@pytest.mark.parametrize("name", ["/etc/passwd", "../../etc/passwd", "data\\..\\..\\x"])
def test_checksum_entry_leaving_the_release_is_refused(s4, tmp_path, name):
    with open(s4 / SUMS, "a") as f:
        f.write(f"{'0' * 64}  {name}\n")
    n = len((s4 / SUMS).read_text().splitlines())
    expect(lambda: read_checksums(s4 / SUMS), ReleaseFormatError, rf"SHA256SUMS' line {n}: path")
    expect(lambda: _build(s4, tmp_path, "tracking", verify_checksums=True), ReleaseFormatError, rf"SHA256SUMS' line {n}: path")


@pytest.mark.parametrize("rel", [INDEX, SUMS])
def test_index_and_checksums_symlinked_out_of_the_release_are_refused(s4, tmp_path, rel):
    outside = tmp_path / "outside.txt"
    link_out(s4 / rel, outside)
    expect(lambda: resolve_release(s4), ReleaseFormatError, "symbolic link leaves the root")


def test_index_line_with_a_repeated_key_is_refused(s4):
    p = s4 / INDEX
    line = p.read_text().splitlines()[0]
    p.write_text(line[:-1] + ', "camera": 1}\n')
    expect(lambda: load_records(resolve_release(s4)), ReleaseFormatError, r"sequences\.jsonl' line 1", "duplicate key 'camera'")


def test_text_files_with_a_bom_are_read(s4, tmp_path):
    for rel in (INDEX, SUMS, CSV):
        (s4 / rel).write_bytes(BOM + (s4 / rel).read_bytes())
    paths = resolve_release(s4)
    [record] = load_records(paths)
    assert record.sequence_id == "og/dream/seq_000000_0"
    assert "data/tracking_gt/og/dream/seq_000000_0.npy" in read_checksums(paths.checksums)
    assert read_camera_csv(record).shape == (32, 6)


def test_a_bom_elsewhere_is_not_skipped(s4):
    p = s4 / INDEX
    p.write_bytes(b"\n" + BOM + p.read_bytes())
    expect(lambda: load_records(resolve_release(s4)), ReleaseFormatError, r"line 2: expected a JSON object, got a byte-order mark")


def test_tracking_npy_fifo_is_refused_at_once(s4):
    (s4 / NPY).unlink()
    os.mkfifo(s4 / NPY)
    with deadline():
        expect(lambda: read_tracking_npy(s4 / NPY), ReleaseFormatError, "expected a regular .npy file", "FIFO")


def test_camera_csv_over_the_cap_is_refused(s4):
    [record] = load_records(resolve_release(s4))
    size = record.camera_csv.stat().st_size
    expect(lambda: read_text(record.camera_csv, "a UTF-8 CSV", size - 1), ReleaseFormatError, rf"more than the limit of {size - 1} bytes")
    assert read_text(record.camera_csv, "a UTF-8 CSV", size).startswith("name,")


def test_prediction_npz_fifo_and_symlink_out(tmp_path):
    preds = tmp_path / "preds"
    (preds / "og" / "dream").mkdir(parents=True)
    os.mkfifo(preds / "og" / "dream" / "a.npz")
    with deadline():
        expect(lambda: read_npz(preds / "og" / "dream" / "a.npz"), PredictionError, "expected a regular .npz file", "FIFO")
    outside = tmp_path / "outside.npz"
    np.savez(outside, tracking_xyz=np.zeros((1, 1, 3)))
    (preds / "og" / "dream" / "b.npz").symlink_to(outside)
    expect(lambda: prediction_path(preds, "og/dream/b"), PredictionError, "symbolic link leaves the root")
    for sid in ("og/../b", "og/dream/..", "../dream/b"):
        expect(lambda: prediction_path(preds, sid), PredictionError, "three folder names")
    assert prediction_path(preds, "og/dream/c") == preds / "og" / "dream" / "c.npz"


# ---------------------------------------------------------------- Syn4D coverage


GT = np.random.default_rng(0).normal(size=(4, 250, 3)) + np.array([0.0, 0.0, 5.0])
REF = {"sequence_id": "og/dream/a", "variant": "og", "scene": "dream", "frame_indices": [0, 6, 12, 18],
       "tracks_ref0": GT, "visibility": np.ones((4, 250), bool), "dynamic": np.arange(250) % 2 == 0}


def _mostly_nan() -> np.ndarray:
    pred = np.full_like(GT, np.nan)
    pred[0, 0] = GT[0, 0]  # one point of 1000 kept: it scores perfectly by the official rule
    pred[0, 1] = GT[0, 1]
    return pred


def _pred(tracking):
    return {"sequence_id": "og/dream/a", "tracking_xyz": tracking, "depth": None, "camera_c2w": None, "frame_indices": [0, 6, 12, 18]}


def test_coverage_reports_a_mostly_nan_prediction_and_warns_once():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = core.compute_task([_pred(_mostly_nan())], [REF], "tracking", core.Syn4DOptions(), coverage=True)
    assert out["overall"]["score"] == 1.0  # the official number, unchanged
    cov = out["coverage"]
    assert cov["sequences"] == [{"sequence_id": "og/dream/a", "scored": 2, "gt_valid": 1000, "coverage": 0.002}]
    assert cov["overall"]["coverage"] == 0.002 and cov["overall"]["num_sequences_below_min_coverage"] == 1
    low = [w for w in caught if issubclass(w.category, core.LowCoverageWarning)]
    assert len(low) == 1 and "2 of 1000 GT-valid points scored" in str(low[0].message)


def test_coverage_is_one_and_silent_for_a_full_prediction():
    with warnings.catch_warnings():
        warnings.simplefilter("error", core.LowCoverageWarning)
        out = core.compute_task([_pred(GT * 2)], [REF], "tracking", core.Syn4DOptions(), coverage=True)
    assert out["coverage"]["overall"]["coverage"] == 1.0
    # without coverage=True the result keeps its shape (the official keys only)
    assert "coverage" not in core.compute_task([_pred(GT * 2)], [REF], "tracking", core.Syn4DOptions())


def test_coverage_counts_depth_pixels_against_valid_gt():
    gt = np.full((3, 4, 5), 10.0, np.float32)
    gt[0, 0, 0] = np.nan  # not GT-valid
    gt[0, 0, 1] = 500.0  # beyond depth_max_m: not GT-valid
    pred = np.full((3, 4, 5), 5.0, np.float32)
    pred[1] = np.nan  # one frame of 20 pixels without a usable prediction
    ref = {"sequence_id": "og/dream/a", "variant": "og", "scene": "dream", "frame_indices": [0, 6, 12], "depth_m": gt}
    p = {"sequence_id": "og/dream/a", "tracking_xyz": None, "depth": pred, "camera_c2w": None, "frame_indices": [0, 6, 12]}
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        out = core.compute_task([p], [ref], "depth", core.Syn4DOptions(), coverage=True)
    [entry] = out["coverage"]["sequences"]
    assert (entry["scored"], entry["gt_valid"]) == (38, 58) and math.isclose(entry["coverage"], 38 / 58)


@pytest.mark.parametrize("value", [-0.1, 1.5, float("nan"), "high", True])
def test_min_coverage_option_is_checked(value):
    with pytest.raises(OptionError, match="min_coverage"):
        core.Syn4DOptions(min_coverage=value)


def test_min_coverage_zero_never_warns():
    with warnings.catch_warnings():
        warnings.simplefilter("error", core.LowCoverageWarning)
        out = core.compute_task([_pred(_mostly_nan())], [REF], "tracking", core.Syn4DOptions(min_coverage=0.0), coverage=True)
    assert out["coverage"]["overall"]["num_sequences_below_min_coverage"] == 0


def test_metric_module_reports_coverage():
    import evaluate
    from helpers.common import REPO

    metric = evaluate.load(str(REPO / "metrics" / "syn4d"), "tracking")
    ref = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in REF.items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = metric.compute(predictions=[_pred(_mostly_nan().tolist())], references=[ref], min_coverage=0.5)
    assert out["coverage"]["overall"]["coverage"] == 0.002 and out["coverage"]["overall"]["min_coverage"] == 0.5
    assert sum(issubclass(w.category, core.LowCoverageWarning) for w in caught) == 1


def test_runner_reports_coverage_and_warns_once_per_run(tmp_path, capsys):
    """The parity predictions keep ~98% of the points; a min_coverage above that warns once for all tasks."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = runner.evaluate_release(SYN4D_PARITY / "predictions", SYN4D_PARITY, tasks=["tracking", "depth"], min_coverage=0.999, coverage=True)
    assert sum(issubclass(w.category, core.LowCoverageWarning) for w in caught) == 1
    t = out["coverage"]["tracking"]
    assert 0.9 < t["overall"]["coverage"] < 1.0 and len(t["sequences"]) == out["tasks"]["tracking"]["overall"]["num_sequences"]
    assert t["sequences"][0]["scored"] == out["tasks"]["tracking"]["sequences"][0]["count"] == 3936
    assert out["coverage"]["depth"]["sequences"][0]["scored"] == 440226
    report = tmp_path / "r.json"
    args = ["--predictions", str(SYN4D_PARITY / "predictions"), "--data-root", str(SYN4D_PARITY), "--tasks", "tracking", "--output", str(report)]
    assert runner.main(args) == 0
    assert "tracking coverage: 0.9" in capsys.readouterr().out and "coverage" not in json.loads(report.read_text())
    assert runner.main(args + ["--with-coverage"]) == 0
    assert json.loads(report.read_text())["coverage"]["tracking"]["overall"]["gt_valid"] > 0
    assert runner.main(args + ["--min-coverage", "2"]) == 2
