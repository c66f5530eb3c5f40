"""av_reasoning as an accumulator (issue 19): the sample release's builder rows in random batch sizes and random order,
merged, through a state round trip and through state files, always equal to perckit.reason_av_edit.metric.av_reasoning;
unpaired rows holding media bytes make save refuse; duplicates and bad states are refused: a tampered record (issue
28) names the file, the record and the field, and random hostile edits of valid states load cleanly with numbers in
range or are refused."""

import dataclasses
import json
import pickle
import random
import re

import numpy as np
import pytest
from helpers.accumulators import assert_ranges, assert_refused, assert_same, feed, load_tampered, tamper, tampered_states
from helpers.fuzz import FUZZ, reaches
from hypothesis import example, given

from perckit import rle
from perckit.hf.accumulate import Accumulator, accumulator, load_state, merge_files
from perckit.hf.entrypoints import build_split
from perckit.errors import OptionError, PredictionError, ReleaseFormatError
from perckit.samples.reason_av_edit import encode_mp4
from perckit.reason_av_edit import features as feats
from perckit.reason_av_edit import metric as core
from perckit.reason_av_edit.accumulate import av_reasoning_core

NOT = feats.NOT_PROVIDED_MEDIA
FPS = 25.0


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    from perckit.samples import write_release

    return write_release("reason_av_edit", tmp_path_factory.mktemp("rae_acc"), extracted=True)


@pytest.fixture(scope="module")
def rows(release, tmp_path_factory):
    ds = build_split("reason_av_edit", "default", release.root, tmp_path_factory.mktemp("cache"))
    return list(ds.remove_columns(["video", "audio", "reason_visual", "reason_visual_mask", "ref_image"]))


@pytest.fixture(scope="module")
def refs(rows):
    """The references with their media as bytes (the builder rows, projected)."""
    return [feats.to_metric_reference(r) for r in rows]


def _shifted_video(row, d):
    """The row's GT mask video shifted later by ``d`` frames (lossless)."""
    f0, f1 = row["edit_window_frames"]
    n = row["num_frames"]
    h, w = row["anchor_mask"]["size"]
    frames = np.zeros((n, h, w, 3), np.uint8)
    frames[f0 + d : f1 + d, : h // 2, : w // 2] = 255
    return encode_mp4(frames, int(FPS), lossless=True)


def _perturbed(rows, refs):
    """GT-as-prediction with shifted windows, dropped anchor masks, dropped reasoning audio, dropped and shifted mask
    videos (media as bytes): every key scores below perfect somewhere."""
    preds = []
    for i, (row, r) in enumerate(zip(rows, refs)):
        p = feats.gt_as_prediction(r)
        if i % 3 == 1 and r["edit_window_s"]:
            a, b = r["edit_window_s"]
            p["edit_window_s"] = [a + 2 / FPS, b + 2 / FPS]
        if i % 4 == 2:
            p["anchor_mask"] = rle.empty(*r["anchor_mask"]["size"])
            p["selected_instance_index"] = None
        if i % 5 == 3:
            p["reason_audio"] = dict(NOT)
        if i % 6 == 4:
            p["mask_video"] = dict(NOT)
        elif i % 6 == 0 and row["edit_window_frames"] and row["edit_window_frames"][1] - row["edit_window_frames"][0] > 2:
            p["mask_video"] = {"bytes": _shifted_video(row, 2), "path": ""}
        preds.append(p)
    return preds


@pytest.fixture(scope="module")
def preds(rows, refs):
    return _perturbed(rows, refs)


def _as_files(rows, refs, preds, root):
    """The same predictions and references with every media value written to a file under ``root``, given by path."""
    root.mkdir(parents=True, exist_ok=True)

    def by_path(value, name):
        if value["bytes"] is None:
            return dict(value)
        (root / name).write_bytes(value["bytes"])
        return {"bytes": None, "path": str(root / name)}

    out_refs, out_preds = [], []
    for r, p in zip(refs, preds):
        sid = r["sample_id"]
        out_refs.append({**r, **{k: by_path(r[k], f"ref_{sid}_{k}") for k in ("reason_audio", "mask_video")}})
        out_preds.append({**p, **{k: by_path(p[k], f"pred_{sid}_{k}") for k in ("reason_audio", "mask_video")}})
    return out_refs, out_preds


#: ReasonAVEdit-Bench's random batches: 1 to 5 rows
BATCHES = {"largest": 5}

OPTION_SETS = ({"return_per_sample": True}, {"restrict_to_suggested": False, "tiou_recall_thresholds": (0.3, 0.9)})


def test_the_perturbed_predictions_are_not_perfect(preds, refs):
    out = core.av_reasoning(preds, refs)
    for k in ("visual_iou", "audio_tiou", "audio_tiou_hull", "video_tiou", "which_acc"):
        assert out[k] is not None and out[k] < 1.0, k
    assert any(p["mask_video"] == NOT for p in preds) and any(p["reason_audio"] == NOT for p in preds)


@pytest.mark.parametrize("options", OPTION_SETS)
def test_random_batches_in_random_order_equal_the_core_function(preds, refs, options):
    expected = core.av_reasoning(preds, refs, **options)
    for seed in range(3):
        acc = feed(accumulator("av_reasoning", **options), preds, refs, random.Random(seed), **BATCHES)
        assert_same(acc.compute(), expected)
    # compute leaves the state as it was: compute again, reset empties it
    assert_same(acc.compute(), expected)
    acc.reset()
    assert acc.compute()["num_samples"] == 0


def test_one_call_equals_the_core_function(preds, refs):
    acc = Accumulator(av_reasoning_core(None)).update(preds, refs)
    assert_same(acc.compute(), core.av_reasoning(preds, refs))


def test_merge_of_random_shards(preds, refs):
    options = {"return_per_sample": True}
    expected = core.av_reasoning(preds, refs, **options)
    rng = random.Random(7)
    for n_shards in (2, 4):
        shards = [accumulator("av_reasoning", **options) for _ in range(n_shards)]
        # each row to a random shard, independently for the two sides: many pairs meet only at the merge
        for side, rows_ in (("predictions", preds), ("references", refs)):
            for row in rows_:
                shards[rng.randrange(n_shards)].update(**{side: [row]})
        merged = shards[0]
        for other in shards[1:]:
            merged.merge(other)
        assert_same(merged.compute(), expected)
    # merging in the other order gives the same numbers
    a, b = accumulator("av_reasoning", **options), accumulator("av_reasoning", **options)
    a.update(preds[:7], refs[:7])
    b.update(preds[7:], refs[7:])
    assert_same(b.merge(a).compute(), expected)


def test_merge_refuses_other_options_and_twice_scored(preds, refs):
    a = accumulator("av_reasoning").update(preds[:2], refs[:2])
    with pytest.raises(OptionError, match="same options"):
        a.merge(accumulator("av_reasoning", restrict_to_suggested=False))
    b = accumulator("av_reasoning").update(preds[1:3], refs[1:3])
    with pytest.raises(PredictionError, match=rf"sample_id \[{preds[1]['sample_id']!r}\] scored in both"):
        a.merge(b)


def test_state_dict_round_trip_with_pending_media_bytes(preds, refs):
    options = {"return_per_sample": True}
    expected = core.av_reasoning(preds, refs, **options)
    acc = accumulator("av_reasoning", **options)
    feed(acc, preds[:10], refs[4:], random.Random(3), **BATCHES)  # rows 4..9 scored, the rest waiting with their bytes
    state = acc.state_dict()
    assert state["predictions"] and state["references"]
    assert any(row["reason_audio"]["bytes"] or row["mask_video"]["bytes"] for row in state["predictions"] + state["references"])
    loaded = accumulator("av_reasoning", **options).load_state_dict(pickle.loads(pickle.dumps(state)))
    loaded.update(preds[10:], refs[:4])
    assert_same(loaded.compute(), expected)
    # the records are small and JSON-safe: exactly the SampleScore fields, plain scalars
    for _, record, predicted in state["records"]:
        assert predicted is True and set(record) == {f.name for f in dataclasses.fields(core.SampleScore)}
        assert json.loads(json.dumps(record)) == record
        assert all(v is None or type(v) in (bool, int, float, str) for v in record.values())


def test_save_refuses_pending_media_bytes(preds, refs, tmp_path):
    acc = accumulator("av_reasoning").update(predictions=[p for p in preds if p["reason_audio"]["bytes"]][:1])
    assert acc.state_dict()["predictions"]  # in memory it works
    path = tmp_path / "state.json"
    with pytest.raises(OptionError, match=r"bytes cannot be saved in a JSON state file; pass the media as paths, or keep the state in memory"):
        acc.save(path)
    assert not path.exists()
    # once every row is paired, only the records remain: bytes inputs save fine
    done = accumulator("av_reasoning").update(preds, refs)
    assert load_state(done.save(path)).compute() == done.compute()


def test_save_and_merge_files_with_media_by_path(rows, refs, preds, tmp_path):
    path_refs, path_preds = _as_files(rows, refs, preds, tmp_path / "media")
    options = {"return_per_sample": True, "tiou_recall_thresholds": (0.3, 0.9)}
    expected = core.av_reasoning(preds, refs, **options)
    assert_same(core.av_reasoning(path_preds, path_refs, **options), expected)
    rng = random.Random(11)
    shards = [accumulator("av_reasoning", **options) for _ in range(3)]
    for side, rows_ in (("predictions", path_preds), ("references", path_refs)):
        for row in rows_:
            shards[rng.randrange(3)].update(**{side: [row]})
    assert any(s.state_dict()["predictions"] or s.state_dict()["references"] for s in shards)  # unpaired rows are saved too
    paths = [s.save(tmp_path / f"shard_{i}.json") for i, s in enumerate(shards)]
    merged = merge_files(paths)
    assert_same(merged.compute(), expected)
    # a saved state loads back as the same accumulator, and merges with a live one of the same options
    again = load_state(paths[0]).merge(shards[1]).merge(load_state(paths[2]))
    assert_same(again.compute(), expected)
    # saving again over an earlier state file is allowed
    shards[0].save(paths[0])
    assert_same(merge_files(paths).compute(), expected)


def test_duplicates_are_refused(preds, refs):
    sid = preds[0]["sample_id"]
    with pytest.raises(PredictionError, match=rf"predictions: duplicate sample_id {sid!r}"):
        accumulator("av_reasoning").update(predictions=[preds[0], preds[0]])
    acc = accumulator("av_reasoning").update(predictions=[preds[0]])
    with pytest.raises(PredictionError, match=rf"predictions: duplicate sample_id {sid!r}"):
        acc.update(predictions=[preds[0]])  # waiting
    acc.update(references=[refs[0]])
    with pytest.raises(PredictionError, match=rf"predictions: duplicate sample_id {sid!r}"):
        acc.update(predictions=[preds[0]])  # scored
    with pytest.raises(PredictionError, match=rf"references: duplicate sample_id {sid!r}"):
        acc.update(references=[refs[0]])


def test_unknown_and_missing_ids_give_the_core_messages(preds, refs):
    def message(fn):
        with pytest.raises(PredictionError) as e:
            fn()
        return str(e.value)

    assert message(lambda: accumulator("av_reasoning").update(preds, refs[1:]).compute()) == message(
        lambda: core.av_reasoning(preds, refs[1:]))
    assert message(lambda: accumulator("av_reasoning").update(preds[1:], refs).compute()) == message(
        lambda: core.av_reasoning(preds[1:], refs))
    assert "make_prediction(sample_id)" in message(lambda: accumulator("av_reasoning").update(preds[1:], refs).compute())


def test_options_config_and_bad_states(preds, refs):
    with pytest.raises(OptionError, match=r"av_reasoning: unknown option\(s\) \['nfft'\]"):
        accumulator("av_reasoning", nfft=512)
    with pytest.raises(OptionError, match="mask_video_threshold"):
        accumulator("av_reasoning", mask_video_threshold=300)
    with pytest.raises(OptionError, match="has no configs"):
        accumulator("av_reasoning", "default")
    state = accumulator("av_reasoning").update(preds[:2], refs[:2]).state_dict()
    bad = json.loads(json.dumps(state))
    bad["records"][0][1]["visual_iouu"] = bad["records"][0][1].pop("visual_iou")
    with pytest.raises(ReleaseFormatError, match=r"records\[0\] '.*': expected the keys .*\(missing \['visual_iou'\], unexpected \['visual_iouu'\]\)"):
        accumulator("av_reasoning").load_state_dict(bad)
    bad = json.loads(json.dumps(state))
    bad["records"][0][1]["visual_iou"] = [0.5]
    with pytest.raises(ReleaseFormatError, match=r"records\[0\] '.*'.visual_iou: expected a number in \[0, 1\], got \[0.5\]"):
        accumulator("av_reasoning").load_state_dict(bad)


# ---------------------------------------------------------------- tampered states (issue 28)


def _ref(sid, mask, category="where_only"):
    """A reference with an anchor mask and an edit window; its media "not provided" (nothing to decode)."""
    return {"sample_id": sid, "category": category, "sub_track": "h1_x", "anchor_mask": rle.encode(mask), "reason_audio": dict(NOT),
            "mask_video": dict(NOT), "edit_window_s": [0.2, 0.6], "edit_window_frames": [5, 15], "fps": FPS, "num_frames": 25,
            "selected_instance_index": 1}


def _hand_inputs():
    """Three samples by hand: a visual IoU of 4 / 8 (two 2 x 3 boxes overlapping by 2 x 2), a visual-null GT, a window only."""
    box, moved = np.zeros((4, 6), bool), np.zeros((4, 6), bool)
    box[1:3, 1:4] = True
    moved[1:3, 2:5] = True
    refs = [_ref("a", box), _ref("b", np.zeros((4, 6), bool), "which_only"), _ref("c", box, "when_only")]
    preds = [feats.make_prediction("a", anchor_mask=moved, edit_window_s=[0.3, 0.7], selected_instance_index=1),
             feats.make_prediction("b", anchor_mask=np.zeros((4, 6), bool), selected_instance_index=2),
             feats.make_prediction("c", edit_window_s=[0.1, 0.5])]
    return preds, refs


def _set(field, value):
    return lambda s: s["records"][0][1].__setitem__(field, value)


AV_ATTACKS = [
    (_set("visual_intersection", 9), ".visual_intersection: expected at most the union (8), which is > 0, got 9"),
    (_set("visual_iou", 0.75), ".visual_iou: expected visual_intersection / visual_union = 0.5, got 0.75"),
    (_set("visual_iou", None), ".visual_iou: expected null exactly when visual_intersection and visual_union are, got None"),
    (_set("visual_union", 0), ".visual_intersection: expected at most the union (0), which is > 0, got 4"),
    (_set("bg_leak", 1.5), ".bg_leak: expected a number in [0, 1], got 1.5"),
    (_set("audio_tiou", float("nan")), ".audio_tiou: expected a number in [0, 1], got nan"),
    (_set("av_onset_offset_abs_s", -0.1), ".av_onset_offset_abs_s: expected a number in [0, inf], got -0.1"),
    (_set("which_rule", "magic"), ".which_rule: expected one of ['discrete', 'visual', 'audio', 'unscored'], got 'magic'"),
    (_set("which_correct", None), ".which_correct: expected null exactly when which_rule is 'unscored', got None"),
    (_set("visual_null", 1), ".visual_null: expected True or False, got 1"),
    (_set("pred_mask", None), ".pred_mask: expected True or False, got None"),
    (_set("visual_union", 10**400), ".visual_union: expected an integer in [0, 9223372036854775807], got 1000000000000"),
]


@pytest.mark.parametrize("edit, message", AV_ATTACKS, ids=[m.split(":")[0] for _, m in AV_ATTACKS])
def test_every_field_of_an_av_reasoning_record_is_checked(tmp_path, edit, message):
    preds, refs = _hand_inputs()
    a = accumulator("av_reasoning").update(preds[1:], refs[1:]).save(tmp_path / "a.json")
    b = accumulator("av_reasoning").update(preds[:1], refs[:1]).save(tmp_path / "b.json")
    assert json.loads(b.read_text())["records"][0][1]["visual_iou"] == 0.5  # 4 / 8 pixels
    bad = tamper(b, edit)
    if "1000000000000" in message:  # 10**400, cut in the message
        with pytest.raises(ReleaseFormatError, match=rf"^{re.escape(repr(str(bad)))}: records\[0\] 'a'{re.escape(message)}"):
            merge_files([a, bad])
        return
    assert_refused(bad, [a], "records[0] 'a'" + message)


def _json(acc) -> dict:
    return json.loads(json.dumps(acc.state_dict(), allow_nan=True))


_PREDS, _REFS = _hand_inputs()
#: Valid saved states: records only (compute gives numbers), and records with rows of both sides waiting.
AV_STATES = [
    _json(accumulator("av_reasoning", restrict_to_suggested=False, return_per_sample=True).update(_PREDS, _REFS)),
    _json(accumulator("av_reasoning").update(_PREDS[:2], _REFS[1:])),
]
AV_RANGES = [(r"(visual_iou|visual_ciou|visual_null_acc|visual_iou_with_null|bg_leak|audio_tiou|audio_tiou_hull|audio_tiou_r@.*|"
              r"audio_tf_iou|audio_null_acc|video_tiou|video_tiou_hull|video_null_acc|av_support_tiou|which_acc)", 0, 1),
             (r"(av_onset_offset_abs_s|av_support_offset_s|visual_intersection|visual_union|discrete|visual|audio|unscored)", 0, float("inf"))]


@reaches("load_state")
@FUZZ
@given(state=tampered_states(AV_STATES))
@example(state=AV_STATES[0])
@example(state={**AV_STATES[0], "records": [[r[0], {**r[1], "visual_intersection": 9}, r[2]] for r in AV_STATES[0]["records"][:1]]})
def test_tampered_av_reasoning_states_load_in_range_or_are_refused(state):
    load_tampered(state, lambda out: assert_ranges(out, AV_RANGES))
