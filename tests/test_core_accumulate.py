"""The accumulator base (perckit.accumulate) on hand-checkable rows: pairing across batches, golden numbers,
the state's format and every refusal of a bad state or a bad save path."""

from __future__ import annotations

import json

import pytest

from perckit.accumulate import CORES, STATE_FORMAT, accumulator, core, load_state, merge_files
from perckit.errors import InputNotFoundError, OptionError, PredictionError, ReleaseFormatError


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


def test_every_registered_metric_has_a_core():
    for name in CORES:
        cfg = "tracking" if name == "syn4d" else None
        assert core(name, cfg).name == name
    with pytest.raises(OptionError, match="unknown metric 'nope'"):
        accumulator("nope")


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
    from perckit import accumulate

    assert perckit.accumulator is accumulate.accumulator and perckit.merge_files is accumulate.merge_files
    code = ("import sys, perckit; a = perckit.accumulator('track_id'); "
            "print('datasets' in sys.modules, 'evaluate' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False", "False"]  # a training loop's accumulator pulls in neither datasets nor evaluate
