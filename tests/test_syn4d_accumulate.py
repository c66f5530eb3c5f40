"""syn4d (configs tracking, depth, pose) as an accumulator (issue 19): the sample release's challenge rows with
its official NPZ predictions, and synthetic rows with lax-mode failures, in random batch sizes and random order
(both sides interleaved, predictions before their references), two accumulators merged, state_dict /
load_state_dict, save / merge_files (pending prediction arrays included); every number equal to
perckit.syn4d.metric.compute_task(..., coverage=True) (what the evaluate module runs) bit for bit, the row lists
compared sorted. Strict and lax missing predictions and task failures keep today's messages; duplicates across
batches, options that differ, a missing or unknown config and bad states are refused: a tampered record (issue 28:
a row's ``apd`` of 50, a coverage entry that disagrees with its row) names the file, the record and the field, and
random hostile edits of valid states load cleanly with numbers in range or are refused."""

from __future__ import annotations

import functools
import json
import math
import pickle
import random
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers.accumulators import assert_ranges, assert_refused, canonical, feed, load_tampered, tamper, tampered_states
from helpers.fuzz import FUZZ, reaches
from hypothesis import example, given

from perckit.hf.accumulate import Accumulator, accumulator, load_state, merge_files
from perckit.errors import OptionError, PredictionError, ReleaseFormatError
from perckit.syn4d.read import load_prediction_rows
from perckit.syn4d import metric as core
from perckit.syn4d.accumulate import syn4d_core
from perckit.syn4d.metric import LowCoverageWarning
from perckit.syn4d.metric import TaskFailedError
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
            ref.update(tracks_ref0=gt.astype(np.float32).tolist(), visibility=vis.tolist(), dynamic=(rng.random(q) < 0.5).tolist())
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
    from perckit.hf.entrypoints import build_split
    from perckit.samples.syn4d_predictions import write_predictions

    tmp = tmp_path_factory.mktemp("syn4d_acc")
    rows = build_split("syn4d", "challenge", syn4d_release.root, tmp / "cache").to_list()
    ids = [r["sequence_id"] for r in rows]
    preds = load_prediction_rows(write_predictions(syn4d_release, tmp / "pred", noise=0.05), ids, as_lists=False)
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


# ---------------------------------------------------------------- tampered states (issue 28)


def _saved(acc: Accumulator, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowCoverageWarning)
        return acc.save(path)


def test_a_row_apd_of_50_is_refused_naming_the_file_the_record_and_the_field(tmp_path):
    """Issue 28's attack: a tracking row's ``apd`` set to 50 lifted the overall APD (a mean of fractions) above 1."""
    preds, refs = synthetic_inputs("tracking")
    a = _saved(accumulator("syn4d", "tracking", strict=False).update(preds[:3], refs[:3]), tmp_path / "a.json")
    b = _saved(accumulator("syn4d", "tracking", strict=False).update(preds[3:5], refs[3:5]), tmp_path / "b.json")
    sid, record, _ = json.loads(b.read_text())["records"][0]
    assert 0 <= record["row"]["apd"] <= 1
    assert_refused(tamper(b, lambda s: s["records"][0][1]["row"].__setitem__("apd", 50)), [a],
                   f"records[0] {sid!r}.row.apd: expected a number in [0, 1], got 50")


def _row(field, value):
    return lambda s: s["records"][0][1]["row"].__setitem__(field, value)


def _entry(field, value):
    return lambda s: s["records"][0][1]["coverage"].__setitem__(field, value)


SYN4D_ATTACKS = [
    ("tracking", _row("epe", -1.0), ".row.epe: expected a number in [0, inf] or NaN, got -1.0"),
    ("tracking", _row("score", float("nan")), ".row.score: expected a number in [0, 1], got nan"),
    ("tracking", _row("count", 0), ".row.count: expected an integer in [1, 9223372036854775807], got 0"),
    ("tracking", _row("acc_0.1m", "0.5"), ".row.acc_0.1m: expected a number in [0, 1], got '0.5'"),
    ("tracking", lambda s: s["records"][0][1]["row"].pop("dynamic_apd"),
     ".row: expected all of ['dynamic_acc_0.1m', 'dynamic_acc_0.3m', 'dynamic_acc_0.5m', 'dynamic_acc_1m', 'dynamic_apd', "
     "'dynamic_epe', 'dynamic_count'] or none, got ['dynamic_acc_0.1m', 'dynamic_acc_0.3m', 'dynamic_acc_0.5m', 'dynamic_acc_1m', "
     "'dynamic_epe', 'dynamic_count']"),
    ("tracking", _entry("scored", 10**6), ".coverage.scored: expected the row's count"),
    ("tracking", _entry("coverage", 0.5), ".coverage.coverage: expected scored / gt_valid = "),
    ("tracking", lambda s: s["records"][0][1].__setitem__("coverage", None), ".coverage: expected the coverage entry of the scored row, got None"),
    ("depth", _row("delta1", 1.25), ".row.delta1: expected a number in [0, 1], got 1.25"),
    ("depth", _row("rmse", float("-inf")), ".row.rmse: expected a number in [0, inf] or NaN, got -inf"),
    ("depth", _row("valid_pixels", 2.0), ".row.valid_pixels: expected an integer in [1, 9223372036854775807], got 2.0"),
    ("pose", _row("rotation_mean_deg", 181.0), ".row.rotation_mean_deg: expected a number in [0, 180] or NaN, got 181.0"),
    ("pose", _row("num_frames", 2), ".row.num_frames: expected an integer in [3, 9223372036854775807], got 2"),
    ("pose", _row("auc_5deg", 10**400), ".row.auc_5deg: expected a number in [0, 1], got 1000000000000"),
    ("pose", lambda s: s["records"][0][1].__setitem__("coverage", {"sequence_id": "x", "scored": 1, "gt_valid": 1, "coverage": 1.0}),
     ".coverage: expected null (no coverage for pose)"),
]


@pytest.mark.parametrize("task, edit, message", SYN4D_ATTACKS, ids=[f"{t}{m.split(':')[0]}" for t, _, m in SYN4D_ATTACKS])
def test_every_part_of_a_syn4d_record_is_checked(tmp_path, task, edit, message):
    preds, refs = synthetic_inputs(task)
    a = _saved(accumulator("syn4d", task, strict=False).update(preds[:3], refs[:3]), tmp_path / "a.json")
    b = _saved(accumulator("syn4d", task, strict=False).update(preds[3:5], refs[3:5]), tmp_path / "b.json")
    sid = json.loads(b.read_text())["records"][0][0]
    bad = tamper(b, edit)
    with pytest.raises(ReleaseFormatError) as e:
        load_state(bad)
    assert str(e.value).startswith(f"{str(bad)!r}: records[0] {sid!r}{message}"), str(e.value)
    with pytest.raises(ReleaseFormatError) as e:
        merge_files([a, bad])
    assert str(e.value).startswith(f"{str(bad)!r}: records[0] {sid!r}{message}"), str(e.value)


def test_a_failure_record_is_refused_in_strict_mode_and_must_be_its_sequences(tmp_path):
    preds, refs = synthetic_inputs("pose")
    lax = json.loads(_saved(accumulator("syn4d", "pose", strict=False).update(preds[:3], refs[:3]), tmp_path / "lax.json").read_text())
    fsid, failed, _ = lax["records"][1]
    assert failed == {"row": None, "coverage": None, "failures": [{"sequence_id": fsid, "reason": "missing prediction"}]}
    strict = _saved(accumulator("syn4d", "pose").update(preds[:1], refs[:1]), tmp_path / "strict.json")
    bad = tamper(strict, lambda s: s["records"].append([fsid, failed, True]))
    with pytest.raises(ReleaseFormatError, match=rf"records\[1\] {fsid!r}.row: expected a scored row \(strict mode records no failures\), got None"):
        load_state(bad)
    other = {**failed, "failures": [{"sequence_id": "other", "reason": "x"}]}
    with pytest.raises(ReleaseFormatError, match=rf"records\[0\] {fsid!r}.failures\[0\].sequence_id: expected the record's id"):
        accumulator("syn4d", "pose", strict=False).load_state_dict({**lax, "records": [[fsid, other, True]]})
    other = {**failed, "failures": [{"sequence_id": fsid, "task": "depth", "reason": "x"}]}
    with pytest.raises(ReleaseFormatError, match=r".failures\[0\].task: expected 'pose', got 'depth'"):
        accumulator("syn4d", "pose", strict=False).load_state_dict({**lax, "records": [[fsid, other, True]]})


@functools.lru_cache(maxsize=None)
def _states(tasks: tuple[str, ...]) -> list[tuple[str, dict]]:
    """Valid saved states of each task (synthetic rows, lax: failures among the records, a reference waiting, scored
    as missing at compute; strict: a prediction waiting, which compute refuses after the load)."""
    out = []
    with tempfile.TemporaryDirectory() as d:
        for task in tasks:
            preds, refs = synthetic_inputs(task)
            lax = accumulator("syn4d", task, strict=False).update(preds[:5], refs[:7])
            strict = accumulator("syn4d", task).update([preds[0], preds[2], preds[3]], refs[:1])
            for i, acc in enumerate((lax, strict)):
                out.append((task, json.loads(_saved(acc, Path(d) / f"{task}{i}.json").read_text())))
    return out


def _syn4d_ranges(out: dict) -> None:
    """The reduced blocks (overall, by variant, by scene, coverage) in the metric's documented ranges."""
    unit = (r"(dynamic_)?(acc_.*|apd)|score|dynamic_query_fraction|delta[123]|auc_.*|coverage|min_sequence_coverage|min_coverage", 0, 1)
    degrees = (r"rotation_mean_deg|rotation_median_deg|rpe_rotation_mean_deg|translation_direction_mean_deg", 0, 180)
    errors = (r"(dynamic_)?(epe|count)|abs_rel|sq_rel|rmse|rmse_log|silog|ate_rmse|position_.*|rpe_translation_rmse|valid_pixels|"
              r"num_frames|scored|gt_valid", 0, math.inf)
    blocks = {k: out[k] for k in ("overall", "by_variant", "by_scene")}
    if "coverage" in out:
        blocks["coverage"] = out["coverage"]["overall"]
    assert_ranges(blocks, [unit, degrees, errors])


def _load_tampered(state: dict) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowCoverageWarning)
        load_tampered(state, _syn4d_ranges)


#: The pose states, built at import for the explicit examples (pose is scored with numpy alone).
POSE_STATES = [s for _, s in _states(("pose",))]


@reaches("load_state")
@FUZZ
@given(state=tampered_states(lambda: [s for _, s in _states(core.TASKS)]))
@example(state=POSE_STATES[0])
@example(state={**POSE_STATES[0], "records": [[r[0], {**r[1], "row": {**r[1]["row"], "auc_5deg": 50}}, r[2]]
                                              for r in POSE_STATES[0]["records"][:1]]})
def test_tampered_syn4d_states_load_in_range_or_are_refused(state):
    _load_tampered(state)
