"""The accumulator base (perckit.hf.accumulate) on hand-checkable rows: pairing across batches, golden numbers,
the state's format and every refusal of a bad state or a bad save path; the one chokepoint of every state
(issue 28: load_state_dict behind load_state, merge_files, lmms-eval items and state dicts) and the record
declarations it compiles (perckit.hf.feature_check's Scalar, Nullable, OptionalKey, Positional)."""

from __future__ import annotations

import json
import math
import re

import pytest

from perckit.hf.accumulate import STATE_FORMAT, accumulator, core, load_state, merge_files
from perckit.hf.benchmark import metrics
from perckit.hf.contract import RecordSchema, check_records, refuse
from perckit.errors import InputNotFoundError, OptionError, PredictionError, ReleaseFormatError
from perckit.hf.feature_check import Nullable, OptionalKey, Positional, Refused, Scalar, compile_feature


def ref(qid: str, counts: str = "022") -> dict:
    return {"query_id": qid, "scene": "s", "query_type": "A", "is_negative": False,
            "frames": [{"frame_id": 1, "mask": {"size": [1, 4], "counts": counts}}],
            "evaluated_frame_ids": [1], "scene_frame_ids": [1]}


def pred(qid: str, counts: str) -> dict:
    return {"query_id": qid, "frames": [{"frame_id": 1, "mask": {"size": [1, 4], "counts": counts}}]}


def test_a_prediction_waits_for_its_reference_and_the_mean_is_golden():
    acc = accumulator("mask_temporal")
    acc.update([pred("a", "013")], [])  # IoU 1/2: the prediction comes first and waits
    assert "0 scored" in repr(acc)
    acc.update([], [ref("b")]).update([pred("b", "022")], [ref("a")])  # IoU 1
    assert "2 scored" in repr(acc)
    assert acc.compute()["miou"] == 0.75


def test_update_all_leaves_the_records_in_the_order_of_one_update():
    """Batches whose pairs straddle them (predictions reversed) give the records, hence any per-item list, of one
    ``update`` of all the rows: the records scored before first, then the references waiting before, then the rest in
    the references' order; ``update`` alone would leave them in the order they were completed in."""
    ids = [f"q{i}" for i in range(7)]
    preds, refs = [pred(k, "013") for k in reversed(ids)] + [pred("w", "004")], [ref(k) for k in ids]

    def started():  # "s" scored before, the reference "w" waiting (its prediction comes last)
        return accumulator("mask_temporal").update([pred("s", "022")], [ref("s"), ref("w")])

    def order(acc):
        return [k for k, _, _ in acc.state_dict()["records"]]

    batches = [(preds[i:i + 3], refs[i:i + 3]) for i in range(0, 8, 3)]
    one = started().update(preds, refs)
    assert order(one) == ["s", "w", *ids]
    assert order(started().update_all(batches)) == order(one)
    streamed = started()
    for p, r in batches:
        streamed.update(p, r)
    assert order(streamed) != order(one)  # what update_all puts right
    assert started().update_all(batches).compute() == one.compute()


def test_every_metric_of_a_descriptor_has_a_core():
    named = [name for name, (_, spec) in metrics().items() if spec.core is not None]
    assert sorted(named) == ["av_reasoning", "m4seg", "mask_temporal", "refer_iou", "syn4d", "track_id"]
    for name in named:
        cfg = "tracking" if name == "syn4d" else None
        assert core(name, cfg).name == name
    with pytest.raises(OptionError, match="unknown metric 'nope'"):
        accumulator("nope")
    with pytest.raises(OptionError, match="'av_edit_quality' has no streaming accumulator"):
        accumulator("av_edit_quality")


def test_the_state_round_trips_through_a_file(tmp_path):
    acc = accumulator("mask_temporal").update([pred("a", "013"), pred("c", "004")], [ref("a"), ref("b")])
    path = acc.save(tmp_path / "state.json")
    state = json.loads(path.read_text())
    assert state["format"] == STATE_FORMAT and state["version"] == 1 and state["metric"] == "mask_temporal"
    assert [r[0] for r in state["records"]] == ["a"] and len(state["predictions"]) == 1 and len(state["references"]) == 1
    back = load_state(path).update([pred("b", "022")], [ref("c")])
    assert back.compute()["num_queries"] == 3
    acc.save(path)  # a state file perckit wrote may be replaced


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.update(format="other"), "expected a perckit accumulator state"),
    (lambda s: s.update(version=2), "expected state version 1"),
    (lambda s: s.update(extra=1), "expected the keys"),
    (lambda s: s.update(records=[["a", {}]]), "records' must be a list of \\[id, record, predicted\\] triples"),
    (lambda s: s["records"].append(s["records"][0]), "recorded twice"),
    (lambda s: s["records"][0].__setitem__(1, {"query_id": "a"}), r"records\[0\] 'a': expected exactly the keys"),
    (lambda s: s.update(options=[]), "'options' must be an object"),
    (lambda s: s.update(metric=None), "with a 'metric'"),
])
def test_a_bad_state_file_is_refused_naming_it(tmp_path, edit, message):
    path = accumulator("mask_temporal").update([pred("a", "013")], [ref("a")]).save(tmp_path / "s.json")
    state = json.loads(path.read_text())
    edit(state)
    path.write_text(json.dumps(state))
    with pytest.raises((ReleaseFormatError, OptionError), match=message):
        load_state(path)


def test_save_never_replaces_a_file_it_did_not_write(tmp_path):
    mine = tmp_path / "notes.json"
    mine.write_text('{"my": "notes"}')
    with pytest.raises(OptionError, match="perckit did not write"):
        accumulator("mask_temporal").save(mine)
    assert mine.read_text() == '{"my": "notes"}'
    with pytest.raises(InputNotFoundError):
        load_state(tmp_path / "absent.json")
    with pytest.raises(OptionError, match="at least one"):
        merge_files([])


def test_files_scored_with_other_options_do_not_merge(tmp_path):
    a = accumulator("mask_temporal").update([pred("a", "013")], [ref("a")]).save(tmp_path / "a.json")
    b = accumulator("mask_temporal", iou_threshold=0.7).update([pred("b", "013")], [ref("b")]).save(tmp_path / "b.json")
    with pytest.raises(OptionError, match="same options"):
        merge_files([a, b])


def test_an_item_scored_in_two_accumulators_is_refused():
    a = accumulator("mask_temporal").update([pred("a", "013")], [ref("a")])
    b = accumulator("mask_temporal").update([pred("a", "013")], [ref("a")])
    with pytest.raises(PredictionError, match="scored in both accumulators"):
        a.merge(b)


def test_the_top_level_names_and_no_heavy_imports():
    import subprocess
    import sys

    import perckit
    from perckit.hf import accumulate

    assert perckit.accumulator is accumulate.accumulator and perckit.merge_files is accumulate.merge_files
    code = ("import sys, perckit; a = perckit.accumulator('track_id'); "
            "print('datasets' in sys.modules, 'evaluate' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", "False"]  # a training loop's accumulator pulls in neither datasets nor evaluate


# ---------------------------------------------------------------- issue 28: every state through one chokepoint


def _tampered_state() -> dict:
    """Two queries of IoU 1, the record of 'b' set to miou 7.0 (issue 28's attack: the run's miou became 4.0)."""
    state = accumulator("mask_temporal").update([pred("a", "022"), pred("b", "022")], [ref("a"), ref("b")]).state_dict()
    state["records"][1][1]["miou"] = 7.0
    return state


MIOU_7 = "records[1] 'b'.miou: expected a number in [0, 1], got 7.0"


def test_every_entry_point_refuses_a_tampered_record_naming_its_state(tmp_path):
    from perckit.lmms_eval import merged

    state = _tampered_state()
    with pytest.raises(ReleaseFormatError) as e:
        accumulator("mask_temporal").load_state_dict(state)
    assert str(e.value) == f"state_dict: {MIOU_7}"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(state))
    for load in (lambda: load_state(path), lambda: merge_files([path])):
        with pytest.raises(ReleaseFormatError) as e:
            load()
        assert str(e.value) == f"{str(path)!r}: {MIOU_7}"
    good = {"state": accumulator("mask_temporal").update([pred("c", "022")], [ref("c")]).state_dict(), "parsed": True, "form": "rle"}
    with pytest.raises(ReleaseFormatError) as e:
        merged("mask_temporal", {}, [good, {"state": state, "parsed": True, "form": "rle"}])
    assert str(e.value) == f"aggregation item 1: {MIOU_7}"


def test_a_refused_state_leaves_the_accumulator_as_it_was():
    acc = accumulator("mask_temporal").update([pred("x", "013")], [ref("x"), ref("y")])
    before = repr(acc), acc.state_dict()
    with pytest.raises(ReleaseFormatError):
        acc.load_state_dict(_tampered_state())
    state = accumulator("mask_temporal").update([pred("a", "022")], []).state_dict()
    state["predictions"].append(dict(state["predictions"][0]))  # the same id twice: refused by update, after the checks
    with pytest.raises(PredictionError, match="^state_dict: predictions: duplicate query_id 'a'"):
        acc.load_state_dict(state)
    assert (repr(acc), acc.state_dict()) == before
    assert acc.update([pred("y", "022")]).compute()["miou"] == 0.75  # IoU 1/2 and 1


def test_a_waiting_row_is_checked_as_add_batch_checks_it(tmp_path):
    """The brief's example: a waiting prediction's frame_id of 1.9 (evaluate would store 1) is refused at load,
    naming the file and the field, with the words of the metric-input check."""
    path = accumulator("mask_temporal").update([pred("a", "013")], []).save(tmp_path / "s.json")
    state = json.loads(path.read_text())
    state["predictions"][0]["frames"][0]["frame_id"] = 1.9
    path.write_text(json.dumps(state))
    with pytest.raises(ReleaseFormatError) as e:
        load_state(path)
    assert str(e.value) == (f"{str(path)!r}: predictions[0].frames[0].frame_id: expected an integer, got 1.9 (a waiting row "
                            "must match the metric's declared features, as add_batch takes it)")
    state["predictions"][0]["frames"][0]["frame_id"] = 1
    state["references"] = [{**ref("b"), "evaluated_frame_ids": ["x"]}]
    path.write_text(json.dumps(state))
    with pytest.raises(ReleaseFormatError, match=r"references\[0\].evaluated_frame_ids\[0\]: expected an integer, got 'x'"):
        load_state(path)
    state["references"] = []
    state["dropped"] = ["q", 5]
    path.write_text(json.dumps(state))
    with pytest.raises(ReleaseFormatError, match=r": dropped\[1\]: expected a string, got 5$"):
        load_state(path)


@pytest.mark.parametrize("options, message", [
    ({"iou_threshold": float("inf")}, "option 'iou_threshold': expected a number in [0, 1], got inf"),
    ({"iou_threshold": True}, "option 'iou_threshold': expected a number"),
    ({"strict": "yes"}, "option 'strict': expected"),
    ({"bogus": 1}, "unknown option(s) ['bogus']"),
    ({"iou_threshold": 10**400}, "mask_temporal: option 'iou_threshold': expected a number, got an integer too large for a float"),
])
def test_a_state_options_go_through_the_metric_checks_naming_the_file(tmp_path, options, message):
    path = accumulator("mask_temporal").update([pred("a", "013")], [ref("a")]).save(tmp_path / "s.json")
    state = json.loads(path.read_text())
    state["options"] = options
    path.write_text(json.dumps(state))  # inf as JSON's Infinity, what a 1e400 in the file also reads as
    with pytest.raises(OptionError) as e:
        load_state(path)
    assert str(e.value).startswith(f"{str(path)!r}: ") and message in str(e.value)


@pytest.mark.parametrize("name, config, option, value", [
    ("refer_iou", None, "thresholds", [0.5, 10**400]), ("refer_iou", None, "empty_union_iou", -(10**400)),
    ("track_id", None, "strict", 10**400), ("syn4d", "pose", "dynamic_weight", 10**400), ("syn4d", "depth", "tracking_thresholds_m", [10**400]),
    ("m4seg", None, "siou_threshold", 10**400), ("av_reasoning", None, "rms_floor", 10**400),
    ("av_reasoning", None, "tiou_recall_thresholds", [10**400]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_an_integer_option_past_float_range_is_an_option_error(tmp_path, name, config, option, value):
    """Every metric's option checks take a number with float(): 10**400 was a bare OverflowError, from a state's
    options (naming the file) as from the caller's."""
    with pytest.raises(OptionError, match=rf"^({name}: )?option '{option}': expected"):
        accumulator(name, config, **{option: value})
    state = json.loads(json.dumps(accumulator(name, config).state_dict()))
    state["options"] = {option: value}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(state))
    with pytest.raises(OptionError) as e:
        load_state(path)
    assert re.match(rf"{re.escape(repr(str(path)))}: ({name}: )?option '{option}': expected", str(e.value)), str(e.value)


def test_a_strict_metric_state_never_holds_a_missing_prediction():
    state = accumulator("mask_temporal").update([pred("a", "013")], [ref("a")]).state_dict()
    state["records"][0][2] = False  # scored as "no output": only the lax mode scores a missing prediction, and only at compute
    with pytest.raises(ReleaseFormatError, match=r"^state_dict: records\[0\] 'a': expected predicted True"):
        accumulator("mask_temporal").load_state_dict(state)
    lax = accumulator("mask_temporal", strict=False).update([pred("a", "013")], [ref("a")]).state_dict()
    lax["records"][0][2] = False
    assert accumulator("mask_temporal", strict=False).load_state_dict(lax).compute()["num_missing_predictions"] == 1


def test_a_huge_integer_in_a_state_dict_is_refused_without_a_value_error():
    """An int past Python's 4,300-digit repr limit (only an in-memory state can hold one) is named by its size."""
    state = accumulator("track_id").update([{"query_id": "a", "target_track_ids": ["1"]}],
                                           [{"query_id": "a", "scene": "s", "target_track_ids": ["1"]}]).state_dict()
    state["records"][0][1]["tp"] = 10**5000
    with pytest.raises(ReleaseFormatError, match=r"^state_dict: records\[0\] 'a'.tp: expected an integer in \[0, 9223372036854775807\], "
                                                 r"got an integer of 16610 bits$"):
        accumulator("track_id").load_state_dict(state)

    class Unprintable:
        def __repr__(self):
            raise RuntimeError("no repr")

    for value, got in (([10**5000], "got list: a list"), (Unprintable(), "got Unprintable: a Unprintable")):
        state["records"][0][1] = value
        with pytest.raises(ReleaseFormatError) as e:
            accumulator("track_id").load_state_dict(state)
        assert str(e.value).startswith("state_dict: records[0] 'a': expected a dict with the keys") and str(e.value).endswith(got)


# ---------------------------------------------------------------- the record declarations (perckit.hf.feature_check)


RECORD = {
    "id": Scalar("string"), "rate": Scalar("float64", 0, 1), "count": Scalar("int64", 0), "flag": Scalar("bool"),
    "error": Scalar("float64", 0, math.inf, nan=True), "maybe": Nullable(Scalar("float64", 0, 1)),
    "extra": OptionalKey(Scalar("string")), "pairs": [Positional({"i": Scalar("int64", 0), "iou": Scalar("float64", 0, 1)})],
}
GOOD = {"id": "r", "rate": 0.5, "count": 3, "flag": False, "error": float("inf"), "maybe": None, "pairs": [[0, 1.0], (1, 0.25)]}


@pytest.mark.parametrize("edit, message", [
    ({"rate": 1.0000001}, ".rate: expected a number in [0, 1], got 1.0000001"),
    ({"rate": float("nan")}, ".rate: expected a number in [0, 1], got nan"),
    ({"rate": 1}, None),  # an int where a float is declared: the metric-input rule, same value
    ({"count": 2.0}, ".count: expected an integer in [0, 9223372036854775807], got 2.0"),  # a record's int is exact
    ({"count": -1}, ".count: expected an integer in [0, 9223372036854775807], got -1"),
    ({"count": 2**63}, ".count: expected an integer in [0, 9223372036854775807], got 9223372036854775808"),
    ({"count": True}, ".count: expected an integer in [0, 9223372036854775807], got True"),
    ({"flag": 0}, ".flag: expected True or False, got 0"),
    ({"id": None}, ".id: expected a string, got None"),
    ({"error": float("nan")}, None),
    ({"error": float("-inf")}, ".error: expected a number in [0, inf] or NaN, got -inf"),
    ({"maybe": 0.5}, None),
    ({"maybe": "0.5"}, ".maybe: expected a number in [0, 1], got '0.5'"),
    ({"extra": "x"}, None),
    ({"extra": None}, ".extra: expected a string, got None"),
    ({"pairs": None}, ".pairs: expected a list, got None"),
    ({"pairs": [[0, 1.0, 2]]}, ".pairs[0]: expected a list [i, iou], got 3 items: [0, 1.0, 2]"),
    ({"pairs": [[0, 1.5]]}, ".pairs[0].iou: expected a number in [0, 1], got 1.5"),
    ({"other": 1}, ": expected the keys ['count', 'error', 'flag', 'id', 'maybe', 'pairs', 'rate'] and some of ['extra'], got "
                   "['count', 'error', 'flag', 'id', 'maybe', 'other', 'pairs', 'rate'] (missing [], unexpected ['other'])"),
])
def test_the_record_declarations_check_types_ranges_and_nulls(edit, message):
    check = compile_feature(RECORD, nulls=False)
    value = {**GOOD, **edit}
    fast = check.fast([value])
    if message is None:
        check(value)
        return
    assert not fast
    with pytest.raises(Refused) as e:
        check(value)
    assert e.value.message("rec") == "rec" + message
    with pytest.raises(ReleaseFormatError) as e:
        check_records(RecordSchema(RECORD), [["r", GOOD, True], ["s", value, True]], "'f.json'")
    assert str(e.value) == "'f.json': records[1] 's'" + message


def test_invariants_run_on_typed_records_only_and_name_the_record():
    def at_most(key, r):
        if r["count"] > len(r["pairs"]):
            raise refuse(".count", f"at most the pairs ({len(r['pairs'])})", r["count"])

    schema = RecordSchema(RECORD, (at_most,))
    check_records(schema, [["r", {**GOOD, "count": 2}, True]], "w")
    with pytest.raises(ReleaseFormatError) as e:
        check_records(schema, [["r", {**GOOD, "count": 2}, True], ["s", GOOD, True]], "w")
    assert str(e.value) == "w: records[1] 's'.count: expected at most the pairs (2), got 3"
    with pytest.raises(ReleaseFormatError, match=r"^w: records\[0\] 'r'.count: expected an integer"):  # the types first
        check_records(schema, [["r", {**GOOD, "count": "3"}, True]], "w")
