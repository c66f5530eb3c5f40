"""Syn4D: the one failure policy (perckit.syn4d.metric.FailurePolicy), the one pairing by sequence_id, and the one reader of a
sequence's ground truth, shared by the metric, the builder and the file runner."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from perckit.errors import InputNotFoundError, PerckitError, PredictionError, ReleaseNotFoundError
from perckit.core.matching import unknown_ids_message
from perckit.syn4d import evaluate as runner
from perckit.syn4d import metric as core
from perckit.syn4d.layout import resolve_release
from perckit.syn4d.read import load_records
from perckit.syn4d.rows import read_sequence_gt
from perckit.syn4d.metric import FailurePolicy, TaskFailedError
from perckit.syn4d.features import to_metric_reference

PARITY = Path(__file__).resolve().parent / "data" / "syn4d_seed0"


def _fail() -> None:
    raise ValueError("no valid depth pixels")


def test_lax_policy_records_each_failure_in_order():
    policy = FailurePolicy(strict=False)
    policy.missing("v/s/a")
    policy.missing("v/s/b", "preds/v/s/b.npz")
    assert policy.attempt("v/s/c", "depth", _fail) is None
    assert policy.attempt("v/s/c", "pose", lambda x: x + 1, 1) == 2
    assert policy.failures == [
        {"sequence_id": "v/s/a", "reason": "missing prediction"},
        {"sequence_id": "v/s/b", "reason": "missing prediction preds/v/s/b.npz"},
        {"sequence_id": "v/s/c", "task": "depth", "reason": "ValueError: no valid depth pixels"},
    ]


def test_strict_policy_raises_the_official_errors():
    policy = FailurePolicy(strict=True)
    with pytest.raises(PredictionError, match="^v/s/a: missing prediction$"):
        policy.missing("v/s/a")
    with pytest.raises(InputNotFoundError, match="^missing prediction preds/v/s/b.npz$") as missing:
        policy.missing("v/s/b", "preds/v/s/b.npz")
    assert isinstance(missing.value, FileNotFoundError)
    with pytest.raises(TaskFailedError, match="^v/s/c depth failed$") as failed:
        policy.attempt("v/s/c", "depth", _fail)
    assert isinstance(failed.value, RuntimeError) and isinstance(failed.value, PerckitError)
    assert isinstance(failed.value.__cause__, ValueError)
    assert policy.failures == []


def _ref(sid: str) -> dict:
    gt = np.zeros((2, 3, 3))
    gt[..., 2] = 1.0
    return {"sequence_id": sid, "variant": sid.split("/")[0], "scene": sid.split("/")[1], "frame_indices": [0, 6],
            "tracks_ref0": gt, "visibility": np.ones((2, 3), bool), "dynamic": [True, False, False]}


def test_metric_pairs_by_sequence_id_with_the_shared_messages():
    refs = [_ref("v/s/a")]
    with pytest.raises(PredictionError) as info:
        core.score_sequences([{"sequence_id": "v/s/zz", "tracking_xyz": None}], refs, "tracking")
    assert str(info.value) == unknown_ids_message("sequence_id", ["v/s/zz"])
    with pytest.raises(PredictionError, match="predictions: duplicate sequence_id 'v/s/a'"):
        core.score_sequences([{"sequence_id": "v/s/a"}, {"sequence_id": "v/s/a"}], refs, "tracking")
    # a reference without a prediction goes through the failure policy (never pair_by_id's strict message)
    rows, failures = core.score_sequences([], refs, "tracking", core.Syn4DOptions(strict=False))
    assert rows == [] and failures == [{"sequence_id": "v/s/a", "reason": "missing prediction"}]
    with pytest.raises(PredictionError, match="^v/s/a: missing prediction$"):
        core.score_sequences([], refs, "tracking")


def test_metric_and_runner_score_one_sequence_the_same_way():
    ref = _ref("v/s/a")
    pred = {"sequence_id": "v/s/a", "tracking_xyz": ref["tracks_ref0"] * 2.0, "frame_indices": [0, 6]}
    rows, failures = core.score_sequences([pred], [ref], "tracking")
    row, entry = core.score_sequence("tracking", ref, pred)
    assert failures == [] and rows == [row] and row["score"] == 1.0 and row["variant"] == "v"
    assert entry == {"sequence_id": "v/s/a", "scored": 6, "gt_valid": 6, "coverage": 1.0}


def test_builder_rows_and_runner_references_are_one_reading(syn4d_parity_rows):
    """The builder's row fields and the file runner's references come from release.read_sequence_gt: equal arrays."""
    paths = resolve_release(PARITY)
    records = {r.sequence_id: r for r in load_records(paths)}
    assert len(records) == len(syn4d_parity_rows)
    for row in syn4d_parity_rows:
        record = records[row["sequence_id"]]
        for task in core.TASKS:
            expected = to_metric_reference(row, task)
            got = runner.reference_for_task(task, record, paths)
            assert sorted(got) == sorted(expected)
            for key, value in expected.items():
                if isinstance(value, str):
                    assert got[key] == value
                else:
                    np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(value), err_msg=f"{task} {key}")


def test_absent_ground_truth_is_none_or_raises_when_required(tmp_path):
    paths = resolve_release(PARITY)
    record = dataclasses.replace(load_records(paths)[0], depth_dir=tmp_path / "depth", camera_csv=tmp_path / "c.csv")
    assert read_sequence_gt(record, paths, "depth") == {"depth_m": None}
    assert read_sequence_gt(record, paths, "pose") == {"camera_unreal": None, "camera_c2w": None}
    with pytest.raises(ReleaseNotFoundError, match=r"^depth folder '.*depth' not found$"):
        read_sequence_gt(record, paths, "depth", required=True)
    with pytest.raises(ReleaseNotFoundError, match=r"^camera CSV '.*c\.csv' not found$"):
        read_sequence_gt(record, paths, "pose", required=True)
    elsewhere = dataclasses.replace(paths, tracking_gt=paths.tracking_gt.parent / "nowhere")
    assert set(read_sequence_gt(record, elsewhere, "tracking").values()) == {None}
    with pytest.raises(ReleaseNotFoundError, match="not found"):
        read_sequence_gt(record, elsewhere, "tracking", required=True)


def test_runner_records_missing_ground_truth_as_a_task_failure_in_lax_mode(tmp_path):
    """The ground truth is read inside the task's error handling (as the official loop): lax records it."""
    out = runner.evaluate_release(PARITY / "predictions", PARITY, tasks="pose", strict=False, limit=1,
                                  tracking_gt=tmp_path, verify_checksums=False)
    assert out["failures"] == [] and out["tasks"]["pose"]["overall"]["num_sequences"] == 1
    out = runner.evaluate_release(PARITY / "predictions", PARITY, tasks="tracking", strict=False, limit=1,
                                  tracking_gt=tmp_path, verify_checksums=False)
    (failure,) = out["failures"]
    assert failure["task"] == "tracking" and failure["reason"].startswith("ReleaseNotFoundError: ")
    with pytest.raises(TaskFailedError, match="tracking failed$"):
        runner.evaluate_release(PARITY / "predictions", PARITY, tasks="tracking", strict=True, limit=1,
                                tracking_gt=tmp_path, verify_checksums=False)


def test_cli_strict_task_failure_is_one_line_with_its_cause(tmp_path, capsys):
    code = runner.main(["--predictions", str(PARITY / "predictions"), "--data-root", str(PARITY), "--tasks", "tracking",
                        "--limit", "1", "--tracking-gt", str(tmp_path), "--no-verify-checksums", "--strict"])
    # the run's one unverified line (--no-verify-checksums), then the error on one line
    warning, error = capsys.readouterr().err.splitlines()
    assert code == 2 and warning.startswith("warning: this Syn4D run is not verified against SHA256SUMS")
    assert error.startswith("error: ") and " tracking failed (caused by ReleaseNotFoundError: " in error


def test_perckit_evaluate_reports_a_strict_syn4d_failure_as_one_line(tmp_path, capsys):
    from perckit.__main__ import main

    ref = {"sequence_id": "v/s/a", "variant": "v", "scene": "s", "frame_indices": [0, 6],
           "tracks_ref0": [[[0.0, 0.0, 1.0]] * 3] * 2, "visibility": [[True] * 3] * 2, "dynamic": [True, False, False]}
    pred = {"sequence_id": "v/s/a", "tracking_xyz": [[[1.0, 2.0]] * 3] * 2, "depth": None, "camera_c2w": None, "frame_indices": [0, 6]}
    (tmp_path / "p.jsonl").write_text(json.dumps(pred) + "\n")
    (tmp_path / "r.jsonl").write_text(json.dumps(ref) + "\n")
    argv = ["evaluate", "syn4d", "--config", "tracking", "--predictions", str(tmp_path / "p.jsonl"), "--references", str(tmp_path / "r.jsonl")]
    assert main(argv) == 1  # a data error; before, a traceback
    err = capsys.readouterr().err
    assert err.startswith("error: v/s/a tracking failed (caused by ValueError: ") and err.count("\n") == 1
    assert main(argv + ["--option", "strict=false"]) == 0
