"""mask_temporal and track_id as accumulators (issue 19): the sample release's queries in random batch sizes and
orders, split over several accumulators and merged, through state_dict and through files, equal to the core
functions (and so to the evaluate modules, which wrap the accumulators) bit for bit. A tampered state file (issue
28) is refused naming the file, the record and the field, on load_state and on merge_files; random hostile edits
of valid states load cleanly with numbers in range or are refused."""

from __future__ import annotations

import json
import pickle
import random
import re

import pytest
from helpers.accumulators import assert_ranges, assert_refused, canonical, feed, load_tampered, tamper, tampered_states
from helpers.fuzz import FUZZ, reaches
from hypothesis import example, given

from perckit.hf.accumulate import accumulator, load_state, merge_files
from perckit.demo import perturb_r4d
from perckit.errors import OptionError, PredictionError, ReleaseFormatError, short_repr
from perckit.r4d_bench import features as feats
from perckit.r4d_bench import metric as core

CASES = [("mask_temporal", {}), ("mask_temporal", {"strict": False}),
         ("mask_temporal", {"strict": False, "iou_threshold": 0.7, "evaluated_frames": "annotated"}),
         ("mask_temporal", {"strict": False, "only_query_prefix": "americano"}),
         ("track_id", {}), ("track_id", {"strict": True}), ("track_id", {"only_queries": ["americano_q1", "espresso_q2"]})]


@pytest.fixture(scope="module")
def inputs(r4d_queries):
    rows = r4d_queries.to_list()
    masks, tracks = perturb_r4d(rows)
    return {
        "mask_temporal": (masks, [feats.to_metric_reference(r) for r in rows], core.mask_temporal),
        "track_id": (tracks, [feats.to_track_reference(r) for r in rows], core.track_id),
    }


@pytest.mark.parametrize("name, options", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_random_batches_and_merges_give_the_core_numbers(inputs, name, options, seed):
    preds, refs, fn = inputs[name]
    lax = options.get("strict", name == "mask_temporal") is False  # mask_temporal is strict by default, track_id lax
    preds = preds[:-4] if lax else preds  # lax: some queries have no prediction
    want = canonical(fn(preds, refs, **options))
    rng = random.Random(seed)
    parts = [accumulator(name, **options) for _ in range(3)]
    feed(parts, preds, refs, rng)
    merged = accumulator(name, **options)
    for part in parts:  # each part's state travels as a pickle (what torch.distributed sends)
        state = pickle.loads(pickle.dumps(part.state_dict()))
        merged.merge(accumulator(name, **options).load_state_dict(state))
    assert canonical(merged.compute()) == want


def test_files_from_separate_jobs_merge(inputs, tmp_path):
    preds, refs, fn = inputs["mask_temporal"]
    want = canonical(fn(preds, refs))
    rng = random.Random(3)
    parts = [accumulator("mask_temporal") for _ in range(4)]
    feed(parts, preds, refs, rng)
    paths = [part.save(tmp_path / f"rank{i}.json") for i, part in enumerate(parts)]
    assert canonical(merge_files(paths).compute()) == want
    assert canonical(load_state(paths[0]).merge(load_state(paths[1])).merge(load_state(paths[2])).merge(load_state(paths[3])).compute()) == want


def test_compute_leaves_the_state_and_reset_empties_it(inputs):
    preds, refs, fn = inputs["mask_temporal"]
    acc = accumulator("mask_temporal").update(preds[:10], refs[:10])
    first = canonical(acc.compute())
    assert canonical(acc.compute()) == first  # compute does not consume the records
    acc.update(preds[10:], refs[10:])
    assert canonical(acc.compute()) == canonical(fn(preds, refs))
    acc.reset()
    with pytest.raises(PredictionError, match="no prediction for|num_queries|empty"):
        acc.update([], refs[:1]).compute()


def test_duplicates_unknown_and_missing_are_refused_with_the_core_messages(inputs):
    preds, refs, fn = inputs["mask_temporal"]
    acc = accumulator("mask_temporal").update(preds[:2], refs[:2])
    with pytest.raises(PredictionError, match=r"predictions: duplicate query_id"):
        acc.update(preds[:1], [])
    with pytest.raises(PredictionError, match=r"references: duplicate query_id"):
        acc.update([], refs[1:2])
    with pytest.raises(PredictionError) as core_error:
        fn(preds[1:2], refs[:2])
    with pytest.raises(PredictionError) as acc_error:
        accumulator("mask_temporal").update(preds[1:2], refs[:2]).compute()
    assert str(acc_error.value) == str(core_error.value)
    unknown = dict(preds[0], query_id="not_a_query")
    with pytest.raises(PredictionError, match="unknown to the references"):
        accumulator("mask_temporal").update([unknown], refs[:1]).compute()


def test_a_pair_that_fails_to_score_is_kept_waiting(inputs):
    """A prediction whose scoring raises stays unpaired (nothing is silently lost); compute then refuses."""
    preds, refs, _ = inputs["mask_temporal"]
    bad = dict(preds[0], frames=[{"frame_id": preds[0]["frames"][0]["frame_id"], "mask": {"size": [1, 1], "counts": "!!"}}]) \
        if preds[0]["frames"] else dict(preds[0], frames="not a list")
    acc = accumulator("mask_temporal")
    with pytest.raises(PredictionError):
        acc.update([bad], refs[:1])
    assert "0 scored" in repr(acc) and "1 predictions and 1 references waiting" in repr(acc)


def test_merging_other_options_or_metrics_is_refused(inputs):
    with pytest.raises(OptionError, match="same options"):
        accumulator("mask_temporal").merge(accumulator("mask_temporal", iou_threshold=0.7))
    with pytest.raises(OptionError, match="expected an accumulator of 'mask_temporal'"):
        accumulator("mask_temporal").merge(accumulator("track_id"))
    with pytest.raises(OptionError, match="unknown option"):
        accumulator("track_id", iou_threshold=0.5)
    with pytest.raises(OptionError, match="no configs"):
        accumulator("mask_temporal", "tracking")


# ---------------------------------------------------------------- tampered states (issue 28)


def _ref(qid: str, counts: tuple[str, ...] = ("022",)) -> dict:
    """A reference query of 1 x 4 masks, one per frame 1..n."""
    frames = [{"frame_id": t + 1, "mask": {"size": [1, 4], "counts": c}} for t, c in enumerate(counts)]
    ids = [t + 1 for t in range(len(counts))]
    return {"query_id": qid, "scene": "s", "query_type": "A", "is_negative": False, "frames": frames,
            "evaluated_frame_ids": ids, "scene_frame_ids": ids}


def _pred(qid: str, counts: tuple[str, ...] = ("022",)) -> dict:
    return {"query_id": qid, "frames": [{"frame_id": t + 1, "mask": {"size": [1, 4], "counts": c}} for t, c in enumerate(counts)]}


def _track(qid: str, ids: list[str]) -> tuple[dict, dict]:
    return {"query_id": qid, "target_track_ids": ids}, {"query_id": qid, "scene": "s", "target_track_ids": ["1", "2"]}


def test_a_record_miou_of_7_is_refused_naming_the_file_the_record_and_the_field(tmp_path):
    """Issue 28's attack: two queries of IoU 1 (miou 1.0); the record of 'b' set to miou 7.0 made the run's miou 4.0."""
    a = accumulator("mask_temporal").update([_pred("a")], [_ref("a")]).save(tmp_path / "a.json")
    b = accumulator("mask_temporal").update([_pred("b")], [_ref("b")]).save(tmp_path / "b.json")
    assert merge_files([a, b]).compute()["miou"] == 1.0
    bad = tamper(b, lambda s: s["records"][0][1].__setitem__("miou", 7.0))
    assert_refused(bad, [a], "records[0] 'b'.miou: expected a number in [0, 1], got 7.0")


def _set(field, value):
    return lambda s: s["records"][0][1].__setitem__(field, value)


MASK_ATTACKS = [
    (_set("miou", float("nan")), ".miou: expected a number in [0, 1], got nan"),
    (_set("viou", float("inf")), ".viou: expected a number in [0, 1], got inf"),
    (_set("acc", -0.5), ".acc: expected a number in [0, 1], got -0.5"),
    (_set("tiou", "0.5"), ".tiou: expected a number in [0, 1], got '0.5'"),
    (_set("macc", True), ".macc: expected a number in [0, 1], got True"),
    (_set("union", 10**400), f".union: expected an integer in [0, 9223372036854775807], got {short_repr(10**400, 120)}"),
    (_set("intersection", 2.0), ".intersection: expected an integer in [0, 9223372036854775807], got 2.0"),
    (_set("intersection", 9), ".intersection: expected at most the union (2), got 9"),
    (_set("is_negative", 0), ".is_negative: expected True or False, got 0"),
    (_set("scene", None), ".scene: expected a string, got None"),
    (_set("query_id", "c"), ".query_id: expected the record's id 'b', got 'c'"),
    (_set("frame_ious", [[1, 1.0], [1, 1.0]]), ".frame_ious: expected one IoU per evaluated frame (1), got [[1, 1.0], [1, 1.0]]"),
    (_set("frame_ious", [[1, 1.5]]), ".frame_ious[0].iou: expected a number in [0, 1], got 1.5"),
    (_set("frame_ious", [[1]]), ".frame_ious[0]: expected a list [frame_id, iou], got 1 items: [1]"),
    (lambda s: s["records"][0][1].pop("temporal_recall"), ": expected exactly the keys"),
]


@pytest.mark.parametrize("edit, message", MASK_ATTACKS, ids=[m.split(":")[0] for _, m in MASK_ATTACKS])
def test_every_field_of_a_mask_temporal_record_is_checked(tmp_path, edit, message):
    a = accumulator("mask_temporal").update([_pred("a")], [_ref("a")]).save(tmp_path / "a.json")
    b = accumulator("mask_temporal").update([_pred("b")], [_ref("b")]).save(tmp_path / "b.json")
    bad = tamper(b, edit)
    if message.startswith(": expected exactly"):  # the long list of keys: its start
        with pytest.raises(ReleaseFormatError, match="^" + re.escape(f"{str(bad)!r}: records[0] 'b'{message}")):
            merge_files([a, bad])
        return
    assert_refused(bad, [a], "records[0] 'b'" + message)


TRACK_ATTACKS = [
    (_set("tp", 3), ".tp: expected at most num_pred (1) and num_gt (2), got 3"),
    (_set("num_pred", 0), ".tp: expected at most num_pred (0) and num_gt (2), got 1"),
    (_set("is_negative", True), ".is_negative: expected False (num_gt is 2), got True"),
    (_set("precision", 1.5), ".precision: expected a number in [0, 1], got 1.5"),
    (_set("num_gt", 10**400), f".num_gt: expected an integer in [0, 9223372036854775807], got {short_repr(10**400, 120)}"),
    (_set("f1", None), ".f1: expected a number in [0, 1], got None"),
]


@pytest.mark.parametrize("edit, message", TRACK_ATTACKS, ids=[m.split(":")[0] for _, m in TRACK_ATTACKS])
def test_every_field_of_a_track_id_record_is_checked(tmp_path, edit, message):
    a = accumulator("track_id").update(*map(list, zip(_track("a", ["1", "2"])))).save(tmp_path / "a.json")
    b = accumulator("track_id").update(*map(list, zip(_track("b", ["1"])))).save(tmp_path / "b.json")
    assert merge_files([a, b]).compute()["precision"] == 1.0
    assert_refused(tamper(b, edit), [a], "records[0] 'b'" + message)


def _json(acc) -> dict:
    return json.loads(json.dumps(acc.state_dict(), allow_nan=True))


#: Valid saved states: records of queries with partial, empty and perfect masks over three frames, with a
#: reference waiting (lax: scored as no output) or a prediction waiting (compute then refuses it, after the load).
_MASK_REFS = [_ref("q1", ("022", "013", "4")), _ref("q2", ("4", "4", "4")), _ref("q3", ("022", "022", "103"))]
_MASK_PREDS = [_pred("q1", ("013", "013", "04")), _pred("q2", ("13", "4", "4")), _pred("q3", ("022", "022", "103"))]
MASK_STATES = [
    _json(accumulator("mask_temporal", strict=False).update(_MASK_PREDS[:2], _MASK_REFS)),
    _json(accumulator("mask_temporal").update(_MASK_PREDS, _MASK_REFS[:2])),
]
MASK_RANGES = [(r"(viou@.*|acc|viou|miou|macc|temporal_acc|existence_acc|tiou|temporal_precision|temporal_recall|overall_iou)", 0, 1),
               (r"(intersection|union)", 0, float("inf"))]
_TRACKS = [_track("t1", ["1", "2"]), _track("t2", ["3"]), _track("t3", [])]
TRACK_STATES = [
    _json(accumulator("track_id").update([p for p, _ in _TRACKS[:2]], [r for _, r in _TRACKS])),
    _json(accumulator("track_id", strict=True).update([p for p, _ in _TRACKS], [r for _, r in _TRACKS[:2]])),
]
TRACK_RANGES = [(r"(precision|recall|f1|exact_match|micro_precision|micro_recall|micro_f1)", 0, 1), (r"(tp|num_pred|num_gt)", 0, float("inf"))]


def _edited(state: dict, edit) -> dict:
    state = json.loads(json.dumps(state))
    edit(state)
    return state


@reaches("load_state")
@FUZZ
@given(state=tampered_states(MASK_STATES))
@example(state=MASK_STATES[0])
@example(state=_edited(MASK_STATES[0], lambda s: s["records"][1][1].__setitem__("miou", 7.0)))
def test_tampered_mask_temporal_states_load_in_range_or_are_refused(state):
    load_tampered(state, lambda out: assert_ranges(out, MASK_RANGES))


@reaches("load_state")
@FUZZ
@given(state=tampered_states(TRACK_STATES))
@example(state=TRACK_STATES[0])
@example(state=_edited(TRACK_STATES[0], lambda s: s["records"][0][1].__setitem__("tp", 3)))
def test_tampered_track_id_states_load_in_range_or_are_refused(state):
    load_tampered(state, lambda out: assert_ranges(out, TRACK_RANGES))
