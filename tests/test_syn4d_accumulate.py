"""syn4d (configs tracking, depth, pose) as an accumulator (issue 19): the sample release's challenge rows with
its official NPZ predictions, and synthetic rows with lax-mode failures, in random batch sizes and random order
(both sides interleaved, predictions before their references), two accumulators merged, state_dict /
load_state_dict, save / merge_files (pending prediction arrays included); every number equal to
perckit.syn4d.metrics.compute_task(..., coverage=True) (what the evaluate module runs) bit for bit, the row lists
compared sorted. Strict and lax missing predictions and task failures keep today's messages; duplicates across
batches, options that differ, a missing or unknown config and bad states are refused."""

from __future__ import annotations

import json
import pickle
import random
import warnings

import numpy as np
import pytest
from helpers.accumulators import canonical, feed

from perckit.accumulate import Accumulator, accumulator, load_state, merge_files
from perckit.errors import OptionError, PredictionError, ReleaseFormatError
from perckit.syn4d import io
from perckit.syn4d import metrics as core
from perckit.syn4d.accumulate import syn4d_core
from perckit.syn4d.coverage import LowCoverageWarning
from perckit.syn4d.failures import TaskFailedError
from perckit.syn4d.features import to_metric_reference

def expected(preds, refs, task, **options) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowCoverageWarning)
        return canonical(core.compute_task(preds, refs, task, core.Syn4DOptions.from_kwargs(**options), coverage=True))


def computed(acc: Accumulator) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowCoverageWarning)
        return canonical(acc.compute())


def synthetic_inputs(task: str):
    """Nine sequences over two variants and three scenes; in lax mode a missing prediction (no row), one whose
    arrays are all None, a task failure (wrong shape), a NaN point / pixel; frame indices on both sides."""
    rng = np.random.default_rng(3)
    preds, refs = [], []
    t, q, h, w = 4, 6, 3, 5
    for i in range(9):
        sid = f"{('og', 'sim')[i % 2]}/{('dream', 'office', 'street')[i % 3]}/seq_{i:06d}_0"
        ref = {"sequence_id": sid, "variant": sid.split("/")[0], "scene": sid.split("/")[1], "frame_indices": [0, 6, 12, 18]}
        row = {"sequence_id": sid, "tracking_xyz": None, "depth": None, "camera_c2w": None, "frame_indices": [0, 6, 12, 18]}
        if task == "tracking":
            gt = rng.normal(size=(t, q, 3)) + np.array([0.0, 0.0, 5.0])
            vis = rng.random((t, q)) < 0.8
            vis[0] = True
            ref.update(tracks_ref0_m=gt.astype(np.float32).tolist(), visibility=vis.tolist(), dynamic=(rng.random(q) < 0.5).tolist())
            pred = gt * 1.7 + rng.normal(scale=0.1, size=gt.shape)
            if i == 3:
                pred[1, 2, 0] = np.nan
            row["tracking_xyz"] = pred[..., :2] if i == 7 else pred
        elif task == "depth":
            gt = rng.uniform(1.0, 20.0, size=(t, h, w)).astype(np.float32)
            ref["depth_m"] = gt
            pred = (gt * 0.4 * rng.uniform(0.9, 1.1, size=gt.shape)).astype(np.float32)
            if i == 3:
                pred[0, 0, 0] = np.nan
            row["depth"] = pred[0] if i == 7 else pred
        else:
            ang = np.linspace(0.0, 1.0, t) + i
            gt = np.tile(np.eye(4), (t, 1, 1))
            gt[:, 0, 0], gt[:, 0, 1], gt[:, 1, 0], gt[:, 1, 1] = np.cos(ang), -np.sin(ang), np.sin(ang), np.cos(ang)
            gt[:, :3, 3] = rng.normal(size=(t, 3)) * 3
            ref["camera_c2w"] = gt
            pred = gt.copy()
            pred[:, :3, 3] = pred[:, :3, 3] * 2.0 + rng.normal(scale=0.05, size=(t, 3))
            row["camera_c2w"] = pred[:, :3] if i == 7 else pred
        refs.append(ref)
        if i == 5:
            continue  # no prediction row: a missing prediction
        if i == 1:
            row[core.PREDICTION_KEYS[task]] = None  # every array None: a missing prediction too
        preds.append(row)
    return preds, refs


@pytest.fixture(scope="module")
def sample_inputs(syn4d_release, tmp_path_factory):
    """The sample release's challenge rows and official NPZ predictions (noisy), as arrays: {task: (preds, refs)}."""
    from perckit.entrypoints import build_split
    from perckit.sample_releases.syn4d_predictions import write_predictions

    tmp = tmp_path_factory.mktemp("syn4d_acc")
    rows = build_split("syn4d", "challenge", syn4d_release.root, tmp / "cache").to_list()
    ids = [r["sequence_id"] for r in rows]
    preds = io.load_prediction_rows(write_predictions(syn4d_release, tmp / "pred", noise=0.05), ids, as_lists=False)
    return {task: (preds, [to_metric_reference(r, task) for r in rows]) for task in core.TASKS}


@pytest.fixture(params=["sample", "synthetic"])
def source(request):
    return request.param


def inputs_of(source, task, request):
    return request.getfixturevalue("sample_inputs")[task] if source == "sample" else synthetic_inputs(task)


def options_of(source) -> dict:
    return {} if source == "sample" else {"strict": False}


@pytest.mark.parametrize("task", core.TASKS)
def test_random_batches_in_random_order_equal_the_metric(source, task, request):
    preds, refs = inputs_of(source, task, request)
    options = options_of(source)
    whole = expected(preds, refs, task, **options)
    result = json.loads(whole)
    assert result["sequences"] and result["overall"]["num_sequences"] == len(result["sequences"])
    if source == "synthetic":
        assert len(result["failures"]) == 3  # two missing predictions and one task failure
    for seed in range(2 if source == "sample" else 4):  # the sample's depth maps take a second or two per run
        acc = feed(accumulator("syn4d", task, **options), preds, refs, random.Random(seed), predictions_first=seed % 2 == 0)
        assert computed(acc) == whole, f"seed {seed}"


@pytest.mark.parametrize("task", core.TASKS)
def test_merge_state_dict_and_merge_files_equal_the_metric(source, task, request, tmp_path):
    preds, refs = inputs_of(source, task, request)
    options = {**options_of(source), "depth_align": "scale_shift"} if task == "depth" else options_of(source)
    whole = expected(preds, refs, task, **options)
    rng = random.Random(11)
    # two accumulators, each side split between them at random: some pairs are completed only by the merge
    a, b = accumulator("syn4d", task, **options), accumulator("syn4d", task, **options)
    side_p, side_r = [rng.random() < 0.5 for _ in preds], [rng.random() < 0.5 for _ in refs]
    feed(a, [p for p, s in zip(preds, side_p) if s], [r for r, s in zip(refs, side_r) if s], rng)
    feed(b, [p for p, s in zip(preds, side_p) if not s], [r for r, s in zip(refs, side_r) if not s], rng)
    states = [pickle.loads(pickle.dumps(x.state_dict())) for x in (a, b)]
    assert any(st["predictions"] for st in states) and any(st["references"] for st in states)  # pending rows saved too
    paths = [a.save(tmp_path / "a.json"), b.save(tmp_path / "b.json")]  # pending rows hold numpy arrays
    assert computed(a.merge(b)) == whole
    resumed = [accumulator("syn4d", task, **options).load_state_dict(s) for s in states]
    assert computed(resumed[0].merge(resumed[1])) == whole
    assert computed(merge_files(paths)) == whole
    state = json.loads(paths[0].read_text())
    assert state["config"] == task and state["metric"] == "syn4d"


def test_save_of_pending_arrays_keeps_them_exactly(tmp_path):
    """A pending prediction of float32 / float64 arrays with NaN saves as JSON lists and scores the same after
    load_state (depth: float32 values, a NaN pixel, a resize-free shape)."""
    preds, refs = synthetic_inputs("depth")
    pred = next(p for p in preds if p["sequence_id"] == "sim/dream/seq_000003_0")  # the NaN pixel
    assert np.isnan(pred["depth"]).any() and pred["depth"].dtype == np.float32
    ref = next(r for r in refs if r["sequence_id"] == pred["sequence_id"])
    loaded = load_state(accumulator("syn4d", "depth").update(predictions=[pred]).save(tmp_path / "p.json"))
    loaded.update(references=[ref])
    assert computed(loaded) == expected([pred], [ref], "depth")
    loaded = load_state(accumulator("syn4d", "depth").update(references=[ref]).save(tmp_path / "r.json"))
    assert computed(loaded.update(predictions=[pred])) == expected([pred], [ref], "depth")


def test_strict_missing_prediction_keeps_the_metric_message():
    """The first reference still without a prediction (in the order the references came in) raises the metric's
    message; a prediction whose arrays are all None is refused in the update that completes the pair."""
    preds, refs = synthetic_inputs("pose")
    missing = ("sim/office/seq_000001_0", "sim/street/seq_000005_0", "sim/office/seq_000007_0")
    full = [p for p in preds if p["sequence_id"] not in missing]
    for rows in (full, [p for p in full if p["sequence_id"] != "sim/dream/seq_000003_0"]):
        with pytest.raises(PredictionError) as want:
            core.compute_task(rows, refs, "pose", core.Syn4DOptions())
        acc = feed(accumulator("syn4d", "pose"), rows, [], random.Random(0)).update(references=refs)
        with pytest.raises(PredictionError) as got:
            acc.compute()
        assert str(got.value) == str(want.value) == "sim/office/seq_000001_0: missing prediction"
        acc = feed(accumulator("syn4d", "pose"), rows, refs, random.Random(1), predictions_first=True)
        with pytest.raises(PredictionError, match=r"^\S+: missing prediction$") as got:
            acc.compute()
        assert str(got.value).split(":")[0] in {r["sequence_id"] for r in refs} - {p["sequence_id"] for p in rows}
    all_none = next(p for p in preds if p["sequence_id"] == "sim/office/seq_000001_0")
    acc = accumulator("syn4d", "pose").update(references=refs)
    with pytest.raises(PredictionError, match="^sim/office/seq_000001_0: missing prediction$"):
        acc.update(predictions=[all_none])


def test_strict_task_failure_raises_in_update_lax_records_it():
    preds, refs = synthetic_inputs("tracking")
    broken = next(p for p in preds if p["sequence_id"] == "sim/office/seq_000007_0")
    ref = next(r for r in refs if r["sequence_id"] == broken["sequence_id"])
    acc = accumulator("syn4d", "tracking").update(predictions=[broken])
    with pytest.raises(TaskFailedError, match="^sim/office/seq_000007_0 tracking failed$") as info:
        acc.update(references=[ref])
    assert isinstance(info.value.__cause__, ValueError)
    lax = accumulator("syn4d", "tracking", strict=False).update([broken], [ref]).compute()
    assert lax["sequences"] == [] and lax["overall"] == {"num_sequences": 0} and lax["requested_sequences"] == 1
    assert lax["failures"] == core.compute_task([broken], [ref], "tracking", core.Syn4DOptions(strict=False))["failures"]
    assert lax["failures"][0]["reason"].startswith("ValueError: tracking arrays must match")


def test_lax_missing_prediction_is_a_failure_record():
    preds, refs = synthetic_inputs("depth")
    out = accumulator("syn4d", "depth", strict=False).update(references=refs).compute()  # no prediction at all
    assert out["sequences"] == [] and out["requested_sequences"] == len(refs)
    assert sorted(f["sequence_id"] for f in out["failures"]) == sorted(r["sequence_id"] for r in refs)
    assert all(f == {"sequence_id": f["sequence_id"], "reason": "missing prediction"} for f in out["failures"])
    assert out["coverage"]["overall"]["scored"] == 0
    assert canonical(out) == expected([], refs, "depth", strict=False)


def test_low_coverage_warns_as_the_metric_does():
    preds, refs = synthetic_inputs("tracking")
    with pytest.warns(LowCoverageWarning) as want:
        core.compute_task(preds, refs, "tracking", core.Syn4DOptions(strict=False, min_coverage=1.0), coverage=True)
    with pytest.warns(LowCoverageWarning) as got:
        accumulator("syn4d", "tracking", strict=False, min_coverage=1.0).update(preds, refs).compute()
    assert [str(w.message) for w in got] == [str(w.message) for w in want]


def test_duplicates_across_batches_are_refused():
    preds, refs = synthetic_inputs("pose")
    acc = accumulator("syn4d", "pose", strict=False).update(preds[:3], refs[:2])
    with pytest.raises(PredictionError, match="predictions: duplicate sequence_id 'og/dream/seq_000000_0'"):
        acc.update(predictions=[preds[0]])
    with pytest.raises(PredictionError, match="references: duplicate sequence_id 'sim/dream/seq_000003_0'"):
        acc.update(references=[refs[3], refs[3]])
    with pytest.raises(PredictionError, match="references: duplicate sequence_id 'sim/office/seq_000001_0'"):
        acc.update(references=[refs[1]])
    other = accumulator("syn4d", "pose", strict=False).update(preds[:1], refs[:1])
    with pytest.raises(PredictionError, match="scored in both accumulators"):
        acc.merge(other)
    with pytest.raises(PredictionError, match="unknown to the references"):
        accumulator("syn4d", "pose").update(predictions=preds[:1]).compute()


def test_config_is_required_and_checked():
    for config in (None, "bogus", "Tracking"):
        with pytest.raises(OptionError, match=r"expected a config \(the task\) among \['depth', 'pose', 'tracking'\]"):
            syn4d_core(config)
        with pytest.raises(OptionError, match="among"):
            accumulator("syn4d", config)
    assert syn4d_core("depth").config == "depth"


def test_options_are_checked_and_must_match_to_merge():
    with pytest.raises(OptionError, match="depth_align"):
        accumulator("syn4d", "depth", depth_align="median")
    with pytest.raises(OptionError, match="bogus"):
        accumulator("syn4d", "depth", bogus=1)
    preds, refs = synthetic_inputs("depth")
    a = accumulator("syn4d", "depth", strict=False).update(preds[:2], refs[:2])
    for options in ({}, {"strict": False, "depth_align": "metric"}, {"strict": False, "min_coverage": 0.5}):
        with pytest.raises(OptionError, match="merge only when they score with the same options"):
            a.merge(accumulator("syn4d", "depth", **options))
    with pytest.raises(OptionError, match=r"expected an accumulator of 'syn4d' \(config 'depth'\)"):
        a.merge(accumulator("syn4d", "pose", strict=False))
    with pytest.raises(OptionError, match="same options"):
        accumulator("syn4d", "depth").load_state_dict(a.state_dict())


def test_bad_records_in_a_state_are_refused():
    preds, refs = synthetic_inputs("pose")
    state = accumulator("syn4d", "pose", strict=False).update(preds[:3], refs[:3]).state_dict()
    (sid, good, _), (fsid, failed, _) = state["records"][0], state["records"][1]
    assert good["row"] is not None and failed["failures"] == [{"sequence_id": fsid, "reason": "missing prediction"}]
    bad_records = (
        ({**good, "extra": 1}, r": expected exactly the keys \['coverage', 'failures', 'row'\]"),
        ({**good, "row": None}, r".coverage: expected null \(a failed sequence has no coverage\)|.failures: expected the one failure"),
        ({**good, "failures": failed["failures"]}, r".failures: expected none \(the sequence was scored\)"),
        ({**good, "row": {"scene": 1}}, r".row: expected exactly the keys"),
        ({**failed, "failures": [{"sequence_id": fsid}]}, r".failures\[0\]: expected the keys \['reason', 'sequence_id'\] and some of \['task'\]"),
        ({**failed, "failures": "missing"}, r".failures: expected a list, got str"),
        ([good], r": expected a dict with the keys"),
        ({**good, "coverage": {"sequence_id": "other"}}, r".coverage: expected a dict with the keys|.coverage: expected exactly the keys"),
    )
    for bad, message in bad_records:
        with pytest.raises(ReleaseFormatError, match=rf"^state_dict: records\[0\] {sid!r}({message})"):
            accumulator("syn4d", "pose", strict=False).load_state_dict({**state, "records": [[sid, bad, True]]})
