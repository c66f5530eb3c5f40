"""refer_iou as an accumulator (issue 19): the sample release's expressions and the synthetic rows in random batch
sizes and random order (both sides interleaved, predictions before their references), two accumulators merged,
state_dict / load_state_dict, save / merge_files; every number equal to perckit.refcoco_m.metric.refer_iou bit
for bit (per_example compared sorted). Duplicates across batches, missing and unknown predictions, options that
differ and bad states are refused; random hostile edits of valid states (issue 28) load cleanly with numbers in
range or are refused naming the file."""

from __future__ import annotations

import json
import pickle
import random

import numpy as np
import pytest
from helpers.accumulators import assert_ranges, assert_refused, canonical, feed, load_tampered, tamper, tampered_states
from helpers.fuzz import FUZZ, reaches
from hypothesis import example, given
from helpers.refcoco_m import PRED, REF

from perckit import rle
from perckit.hf.accumulate import accumulator, load_state, merge_files
from perckit.errors import OptionError, PredictionError, ReleaseFormatError
from perckit.refcoco_m import metric as core
from perckit.refcoco_m import to_metric_reference
from perckit.refcoco_m.accumulate import refer_iou_core

OPTION_SETS = ({}, {"return_per_example": True}, {"return_per_example": True, "thresholds": [0.25, 0.75], "empty_union_iou": 0.0})


def synthetic_inputs():
    """Random masks of two sizes, empty predictions, empty ground truths and both empty, three categories."""
    rng = np.random.default_rng(4)
    preds, refs = [], []
    for i in range(23):
        shape = (5, 7) if i % 2 else (4, 3)
        m = rng.random(shape) < 0.5
        if i % 7 == 6:
            m[:] = False
        refs.append({"expression_id": f"{i}:{i % 2}", "mask": rle.encode(m), "category": ("dog", "cat", "car")[i % 3],
                     "supercategory": ("animal", "animal", "vehicle")[i % 3]})
        p = np.zeros_like(m) if i % 4 == 3 else m ^ (rng.random(m.shape) < 0.2)
        preds.append({"expression_id": f"{i}:{i % 2}", "mask": rle.encode(p)})
    refs.append(REF("m1", "033", category=None, supercategory=None))  # no category: the "" group
    preds.append(PRED("m1", "021O1"))
    return preds, refs


@pytest.fixture(scope="module")
def sample_inputs(rcm_expressions):
    """The sample release's expressions, predicted with shifted and emptied masks."""
    refs = [to_metric_reference(r) for r in rcm_expressions.remove_columns("image")]
    preds = []
    for i, r in enumerate(refs):
        m = rle.decode(r["mask"])
        m = np.roll(m, 2, axis=1) if i % 3 == 1 else np.zeros_like(m) if i % 3 == 2 else m
        preds.append({"expression_id": r["expression_id"], "mask": rle.encode(m)})
    return preds, refs


@pytest.fixture(params=["sample", "synthetic"])
def inputs(request):
    return request.getfixturevalue("sample_inputs") if request.param == "sample" else synthetic_inputs()


@pytest.mark.parametrize("options", OPTION_SETS)
def test_random_batches_in_random_order_equal_the_metric(inputs, options):
    preds, refs = inputs
    whole = core.refer_iou(preds, refs, **options)
    assert 0 < whole["miou"] < 1
    for seed in range(6):
        acc = feed(accumulator("refer_iou", **options), preds, refs, random.Random(seed), predictions_first=seed % 3 == 0)
        assert canonical(acc.compute()) == canonical(whole), f"seed {seed}"
    acc.update(predictions=[])  # compute leaves the state as it was: a second compute gives the same numbers
    assert canonical(acc.compute()) == canonical(whole)


def test_merged_accumulators_equal_the_metric(inputs):
    preds, refs = inputs
    options = {"return_per_example": True}
    whole = canonical(core.refer_iou(preds, refs, **options))
    for seed in range(4):
        rng = random.Random(seed)
        a, b = accumulator("refer_iou", **options), accumulator("refer_iou", **options)
        # each side split between the two at random: pairs may be completed only by the merge
        side_p = [rng.random() < 0.5 for _ in preds]
        side_r = [rng.random() < 0.5 for _ in refs]
        feed(a, [p for p, s in zip(preds, side_p) if s], [r for r, s in zip(refs, side_r) if s], rng)
        feed(b, [p for p, s in zip(preds, side_p) if not s], [r for r, s in zip(refs, side_r) if not s], rng)
        assert canonical(a.merge(b).compute()) == whole


def test_state_dict_round_trip_mid_run(inputs):
    preds, refs = inputs
    options = {"return_per_example": True}
    whole = canonical(core.refer_iou(preds, refs, **options))
    half = len(refs) // 2
    acc = accumulator("refer_iou", **options).update(preds[:half], refs[3:half + 5])  # scored and pending rows
    state = pickle.loads(pickle.dumps(acc.state_dict()))
    assert state["version"] == 1 and state["metric"] == "refer_iou" and state["config"] is None
    resumed = accumulator("refer_iou", **options).load_state_dict(state)
    assert repr(resumed) == repr(acc)
    resumed.update(preds[half:], refs[:3] + refs[half + 5:])
    assert canonical(resumed.compute()) == whole
    resumed.reset()
    with pytest.raises(PredictionError, match="unknown to the references"):
        resumed.update(preds[:1]).compute()


def test_save_then_merge_files(inputs, tmp_path):
    preds, refs = inputs
    options = {"return_per_example": True, "thresholds": (0.5, 0.9)}
    whole = canonical(core.refer_iou(preds, refs, **options))
    rng = random.Random(7)
    shards = [accumulator("refer_iou", **options) for _ in range(3)]
    for p in preds:
        shards[rng.randrange(3)].update(predictions=[p])
    for r in refs:
        shards[rng.randrange(3)].update(references=[r])  # most pairs stay pending in their shard
    paths = [s.save(tmp_path / f"rank{i}.json") for i, s in enumerate(shards)]
    assert canonical(merge_files(paths).compute()) == whole
    assert canonical(load_state(paths[0]).merge(load_state(paths[1])).merge(load_state(paths[2])).compute()) == whole
    shards[0].save(paths[0])  # an earlier state file may be overwritten


def test_pending_bytes_counts_refuse_save_scored_ones_save(tmp_path):
    """pycocotools' bytes counts: scored, a record of integers saves; pending, the raw row cannot be JSON."""
    m = np.eye(3, dtype=bool)
    ref = {"expression_id": "e", "mask": rle.encode(m), "category": "dog", "supercategory": "animal"}
    pred = {"expression_id": "e", "mask": {**rle.encode(m), "counts": rle.encode(m)["counts"].encode()}}
    pending = accumulator("refer_iou").update(predictions=[pred])
    with pytest.raises(OptionError, match="bytes cannot be saved in a JSON state file"):
        pending.save(tmp_path / "pending.json")
    assert not (tmp_path / "pending.json").exists()
    pending.update(references=[ref])
    assert load_state(pending.save(tmp_path / "scored.json")).compute() == core.refer_iou([pred], [ref])


def test_duplicates_across_batches_are_refused():
    preds, refs = synthetic_inputs()
    acc = accumulator("refer_iou").update(preds[:3], refs[:2])
    with pytest.raises(PredictionError, match=r"predictions: duplicate expression_id '0:0'"):
        acc.update(predictions=[preds[0]])  # already scored
    with pytest.raises(PredictionError, match=r"predictions: duplicate expression_id '2:0'"):
        acc.update(predictions=[preds[2]])  # pending
    with pytest.raises(PredictionError, match=r"references: duplicate expression_id '1:1'"):
        acc.update(references=[refs[1]])
    with pytest.raises(PredictionError, match="references: duplicate expression_id"):
        acc.update(references=[refs[5], refs[5]])  # within one batch
    other = accumulator("refer_iou").update(preds[1:2], refs[1:2])
    with pytest.raises(PredictionError, match=r"merge: expression_id \['1:1'\] scored in both"):
        acc.merge(other)


def test_missing_and_unknown_predictions_are_refused_as_the_metric_does():
    """refer_iou has no lax mode: the accumulator's messages are the metric's own."""
    preds, refs = synthetic_inputs()
    with pytest.raises(PredictionError) as want:
        core.refer_iou(preds[1:], refs)
    with pytest.raises(PredictionError) as got:
        accumulator("refer_iou").update(preds[1:], refs).compute()
    assert str(got.value) == str(want.value)
    assert "no prediction for 1 reference expression_id(s), e.g. ['0:0']" in str(got.value) and "empty mask" in str(got.value)
    assert "strict=False" not in str(got.value)
    with pytest.raises(PredictionError, match=r"expression_id 'zz' is unknown to the references"):
        accumulator("refer_iou").update(preds + [PRED("zz", "033")], refs).compute()


def test_options_and_config_are_checked():
    with pytest.raises(OptionError, match="has no configs"):
        refer_iou_core("default")
    with pytest.raises(OptionError, match="empty_union_iou"):
        accumulator("refer_iou", empty_union_iou=2)
    with pytest.raises(OptionError, match="bogus"):
        accumulator("refer_iou", bogus=1)
    preds, refs = synthetic_inputs()
    a = accumulator("refer_iou").update(preds[:2], refs[:2])
    for options in ({"empty_union_iou": 0.0}, {"return_per_example": True}, {"thresholds": [0.5]}):
        with pytest.raises(OptionError, match="merge only when they score with the same options"):
            a.merge(accumulator("refer_iou", **options).update(preds[2:4], refs[2:4]))
    with pytest.raises(OptionError, match="expected an accumulator of 'refer_iou'"):
        a.merge(accumulator("track_id"))
    with pytest.raises(OptionError, match="same options"):
        accumulator("refer_iou", empty_union_iou=0.0).load_state_dict(a.state_dict())


def test_bad_records_in_a_state_are_refused():
    preds, refs = synthetic_inputs()
    state = accumulator("refer_iou").update(preds[:2], refs[:2]).state_dict()
    eid, good = state["records"][0][0], state["records"][0][1]
    list_of_6 = r": expected a list \[expression_id, category, supercategory, intersection, union, iou\]"
    for bad, message in (
        (good[:5], list_of_6), ({"iou": 1.0}, list_of_6),
        ([1] + good[1:], r".expression_id: expected a string, got 1"),
        (good[:3] + [5, 4, 1.0], r".intersection: expected at most the union \(4\), got 5"),
        (good[:3] + [True, 4, 0.5], r".intersection: expected an integer in \[0, 9223372036854775807\], got True"),
        (good[:5] + [1.5], r".iou: expected a number in \[0, 1\], got 1.5"),
        (good[:3] + [1, 4, 0.5], r".iou: expected intersection / union = 0.25, got 0.5"),
        (good[:3] + [0, 0, 0.0], r".iou: expected empty_union_iou = 1.0 \(an empty union\), got 0.0"),
        (["other"] + good[1:], r".expression_id: expected the record's id '0:0', got 'other'"),
    ):
        broken = {**state, "records": [[eid, bad, True]]}
        with pytest.raises(ReleaseFormatError, match=rf"^state_dict: records\[0\] '0:0'{message}"):
            accumulator("refer_iou").load_state_dict(broken)


def test_a_tampered_record_is_refused_on_load_state_and_merge_files(tmp_path):
    preds, refs = synthetic_inputs()
    a = accumulator("refer_iou").update(preds[:2], refs[:2]).save(tmp_path / "a.json")
    b = accumulator("refer_iou").update(preds[2:4], refs[2:4]).save(tmp_path / "b.json")
    record = json.loads(b.read_text())["records"][1]
    assert record[1][3] <= record[1][4]
    bad = tamper(b, lambda s: s["records"][1][1].__setitem__(3, record[1][4] + 1))
    assert_refused(bad, [a], f"records[1] {record[0]!r}.intersection: expected at most the union ({record[1][4]}), got {record[1][4] + 1}")


def test_a_waiting_row_is_checked_as_add_batch_checks_it(tmp_path):
    """A state's unpaired rows are refused as the evaluate module's add_batch refuses them, naming the file."""
    preds, refs = synthetic_inputs()
    a = accumulator("refer_iou").update(preds[:2], refs[:2]).save(tmp_path / "a.json")
    b = accumulator("refer_iou").update(preds[2:3], refs[3:4]).save(tmp_path / "b.json")
    bad = tamper(b, lambda s: s["predictions"][0]["mask"].__setitem__("counts", 5))
    assert_refused(bad, [a], "predictions[0].mask.counts: expected a string, got 5 (a waiting row must match the metric's "
                             "declared features, as add_batch takes it)")
    bad = tamper(b, lambda s: s["references"][0].__setitem__("category", ["dog"]), "b2.json")
    assert_refused(bad, [a], "references[0].category: expected a string, got ['dog'] (a waiting row must match the "
                             "metric's declared features, as add_batch takes it)")


def _json(acc) -> dict:
    return json.loads(json.dumps(acc.state_dict(), allow_nan=True))


_PREDS, _REFS = synthetic_inputs()
#: Valid saved states: records only (compute gives numbers), and records with rows of both sides waiting.
REFER_STATES = [
    _json(accumulator("refer_iou", return_per_example=True).update(_PREDS[:8], _REFS[:8])),
    _json(accumulator("refer_iou", empty_union_iou=0.0).update(_PREDS[:6], _REFS[1:7])),
]
REFER_RANGES = [(r"(miou|ciou|precision@.*|iou)", 0, 1), (r"(intersection|union)", 0, float("inf"))]


@reaches("load_state")
@FUZZ
@given(state=tampered_states(REFER_STATES))
@example(state=REFER_STATES[0])
@example(state={**REFER_STATES[0], "records": [[r[0], r[1][:3] + [5, 4, 1.0], r[2]] for r in REFER_STATES[0]["records"]]})
def test_tampered_refer_iou_states_load_in_range_or_are_refused(state):
    load_tampered(state, lambda out: assert_ranges(out, REFER_RANGES))
