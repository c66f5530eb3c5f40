"""Golden values of mask_temporal and track_id: the spec's test vectors V1-V5, computed by hand."""

import dataclasses
import math
import warnings

import numpy as np
import pytest
from helpers.r4d import E, G, P1, P34, V1_PREDS, V1_REFS, pred, ref

from perckit import rle
from perckit.errors import OptionError, PredictionError
from perckit.r4d_bench import metric as core


def test_v1_per_query():
    out = core.mask_temporal(V1_PREDS, V1_REFS)
    a, b = out["per_query"]
    assert a["miou"] == pytest.approx(1 / 6)
    assert a["temporal_acc"] == pytest.approx(1 / 3)
    assert a["existence_acc"] == pytest.approx(1 / 3)
    assert a["viou"] == pytest.approx(1 / 6)
    assert a["tiou"] == pytest.approx(1 / 3)
    assert a["temporal_precision"] == pytest.approx(0.5)
    assert a["temporal_recall"] == pytest.approx(0.5)
    assert a["macc"] == pytest.approx(0.5)
    assert (a["intersection"], a["union"]) == (1, 6)
    assert b["miou"] == pytest.approx(0.5)
    assert b["temporal_acc"] == pytest.approx(0.5)
    assert b["existence_acc"] == pytest.approx(0.5)
    assert b["viou"] == 0.0 and b["tiou"] == 0.0
    assert b["temporal_precision"] == 0.0 and b["temporal_recall"] == 0.0
    assert b["macc"] == pytest.approx(7 / 8)
    assert (b["intersection"], b["union"]) == (0, 1)


def test_v1_totals_and_groups():
    out = core.mask_temporal(V1_PREDS, V1_REFS)
    expected = {
        "miou": 1 / 3, "temporal_acc": 5 / 12, "existence_acc": 5 / 12, "viou": 1 / 12, "tiou": 1 / 6,
        "macc": 0.6875, "overall_iou": 1 / 7, "viou@0.3": 0.0, "viou@0.5": 0.0,
        "temporal_precision": 0.25, "temporal_recall": 0.25,
    }
    for k, v in expected.items():
        assert out[k] == pytest.approx(v), k
    assert out["num_queries"] == 2
    assert out["positive"]["miou"] == pytest.approx(1 / 6)
    assert out["negative"]["miou"] == pytest.approx(0.5)
    assert set(out["per_scene"]) == {"s1", "s2"} and out["per_scene"]["s2"]["num_queries"] == 1
    assert out["per_query_type"]["A"]["miou"] == pytest.approx(1 / 6)
    assert out["num_ignored_prediction_frames"] == 0


def test_v2_gt_as_prediction_is_one():
    preds = [pred(r["query_id"], [(f["frame_id"], f["mask"]) for f in r["frames"]]) for r in V1_REFS]
    out = core.mask_temporal(preds, V1_REFS)
    for k in core.GROUP_KEYS[:-1]:
        assert out[k] == 1.0, k


def test_v3_all_predictions_empty():
    out = core.mask_temporal([pred("A", []), pred("B", [])], V1_REFS)
    a, b = out["per_query"]
    for k in ("viou", "tiou", "temporal_precision", "temporal_recall"):
        assert a[k] == 0.0, k
    for k in core.QUERY_KEYS:
        assert b[k] == 1.0, k
    assert out["negative"]["overall_iou"] == 1.0  # union sum 0


def test_v4_two_frames_second_missing():
    r = [ref("q", [(1, G), (2, G)], [1, 2])]
    out = core.mask_temporal([pred("q", [(1, G)])], r)
    for k in ("miou", "temporal_acc", "viou", "tiou"):
        assert out[k] == pytest.approx(0.5), k


def test_missing_prediction_row_strict_raises_lax_scores_empty():
    with pytest.raises(PredictionError, match=r"no prediction for 1 reference query_id.*'B'.*strict=False"):
        core.mask_temporal([pred("A", [(1, P1), (3, P34)])], V1_REFS)
    out = core.mask_temporal([pred("A", [(1, P1), (3, P34)])], V1_REFS, strict=False)
    assert out["per_query"][1]["miou"] == 1.0  # B: no prediction, both empty on its sentinel frames
    assert out["num_missing_predictions"] == 1


def test_track_id_strict_mode_raises_on_missing():
    with pytest.raises(PredictionError, match="'q5'"):
        core.track_id(V5_PREDS, V5_REFS, strict=True)
    assert core.track_id(V5_PREDS, V5_REFS)["num_missing_predictions"] == 1


def test_negative_query_with_no_evaluated_frames():
    r = [ref("n", [], [], negative=True)]
    assert core.mask_temporal([pred("n", [])], r)["miou"] == 1.0
    assert core.mask_temporal([pred("n", [(5, E)])], r)["miou"] == 1.0
    out = core.mask_temporal([pred("n", [(5, P1)])], r)
    assert all(out[k] == 0.0 for k in core.QUERY_KEYS)
    assert out["num_ignored_prediction_frames"] == 1


def test_threshold_is_inclusive_and_viou_at_is_strict():
    r = [ref("q", [(1, G)], [1])]
    out = core.mask_temporal([pred("q", [(1, P1)])], r, iou_threshold=0.5)
    assert out["temporal_acc"] == 1.0  # IoU 0.5 >= 0.5
    assert out["viou"] == 0.5 and out["viou@0.5"] == 0.0 and out["viou@0.3"] == 1.0


def test_evaluated_frames_modes_and_ignored_frames():
    r = [ref("q", [(1, G)], [1, 2], scene_frames=[1, 2, 3, 4])]
    p = [pred("q", [(1, G), (9, G)])]
    assert core.mask_temporal(p, r, evaluated_frames="annotated")["miou"] == 1.0
    assert core.mask_temporal(p, r)["miou"] == 1.0  # frame 2: both empty
    out = core.mask_temporal(p, r, evaluated_frames="all_scene_frames")
    assert out["per_query"][0]["num_evaluated_frames"] == 4
    assert out["num_ignored_prediction_frames"] == 1


def test_existence_frame_without_mask_is_counted():
    r = [ref("q", [(1, G)], [1, 2], scene_frames=[1, 2, 3, 4, 5])]
    out = core.mask_temporal([pred("q", [(1, G)])], r)
    assert out["num_existence_frames_without_mask"] == 1
    out = core.mask_temporal([pred("q", [(1, G)])], r, evaluated_frames="all_scene_frames")
    assert out["num_existence_frames_without_mask"] == 1  # unannotated scene frames are not existence frames


def test_macc_frame_success_mode_equals_temporal_acc():
    out = core.mask_temporal(V1_PREDS, V1_REFS, macc_mode="frame_success")
    assert out["macc"] == pytest.approx(out["temporal_acc"])


def test_empty_iou_option():
    out = core.mask_temporal([pred("B", [])], [V1_REFS[1]], empty_union_iou=0.0)
    assert out["miou"] == 0.0


def test_filters():
    out = core.mask_temporal(V1_PREDS, V1_REFS, only_queries=["A"])
    assert out["num_queries"] == 1 and out["miou"] == pytest.approx(1 / 6)
    out = core.mask_temporal(V1_PREDS, V1_REFS, only_query_prefix="B")
    assert out["num_queries"] == 1 and out["miou"] == pytest.approx(0.5)
    assert core.mask_temporal(V1_PREDS, V1_REFS, only_queries="A,B")["num_queries"] == 2


def test_wrong_size_prediction_raises_or_resizes():
    big = rle.encode(np.repeat(np.repeat([[1, 1, 0, 0]], 2, 0), 2, 1))  # G upscaled 2x
    r = [ref("q", [(1, G)], [1])]
    with pytest.raises(PredictionError, match=r"query 'q'.*frame 1.*\[2, 8\].*\[1, 4\]"):
        core.mask_temporal([pred("q", [(1, big)])], r)
    out = core.mask_temporal([pred("q", [(1, big)])], r, resize_predictions="nearest")
    assert out["miou"] == 1.0


@pytest.mark.parametrize(
    "preds, match",
    [
        ([pred("A", []), pred("A", [])], "duplicate query_id 'A'"),
        ([pred("Z", [])], "query_id 'Z' is unknown"),
        ([pred("A", [(1, G), (1, G)])], "duplicate frame_id 1"),
        ([{"query_id": "A", "frames": [{"frame_id": "x1", "mask": G}]}], "frame_id"),
        ([pred("A", [(1, {"size": [1, 4], "counts": "5"})])], "sum to 5"),
    ],
)
def test_bad_predictions_raise(preds, match):
    with pytest.raises(PredictionError, match=match):
        core.mask_temporal(preds, V1_REFS, strict=False)


@pytest.mark.parametrize("opt", [{"evaluated_frames": "every"}, {"macc_mode": "x"}, {"resize_mismatched": "bilinear"}, {"iou_threshold": 2}])
def test_unknown_option_values_list_the_allowed(opt):
    with pytest.raises(OptionError):
        core.mask_temporal(V1_PREDS, V1_REFS, **opt)


# ---------------------------------------------------------------- V5 track_id

V5_REFS = [
    {"query_id": "q1", "scene": "s", "target_track_ids": [3, 5]},
    {"query_id": "q2", "scene": "s", "target_track_ids": [7]},
    {"query_id": "q3", "scene": "t", "target_track_ids": []},
    {"query_id": "q4", "scene": "t", "target_track_ids": []},
    {"query_id": "q5", "scene": "t", "target_track_ids": [2]},
]
V5_PREDS = [
    {"query_id": "q1", "target_track_ids": ["3"]},
    {"query_id": "q2", "target_track_ids": [7, 8]},
    {"query_id": "q3", "target_track_ids": []},
    {"query_id": "q4", "target_track_ids": [1]},
]


def test_v5_track_id():
    out = core.track_id(V5_PREDS, V5_REFS)
    rows = {r["query_id"]: r for r in out["per_query"]}
    assert (rows["q1"]["precision"], rows["q1"]["recall"]) == (1.0, 0.5)
    assert rows["q1"]["f1"] == pytest.approx(2 / 3) and rows["q2"]["f1"] == pytest.approx(2 / 3)
    assert rows["q3"]["f1"] == 1.0 and rows["q3"]["exact_match"] == 1.0
    assert rows["q4"]["f1"] == 0.0 and rows["q5"]["f1"] == 0.0
    assert out["precision"] == pytest.approx(0.5)
    assert out["recall"] == pytest.approx(0.5)
    assert out["f1"] == pytest.approx(7 / 15)
    assert out["exact_match"] == pytest.approx(0.2)
    assert out["micro_precision"] == 0.5 and out["micro_recall"] == 0.5 and out["micro_f1"] == 0.5
    assert out["negative"]["num_queries"] == 2 and out["positive"]["num_queries"] == 3
    assert out["per_scene"]["s"]["num_queries"] == 2


def test_track_id_micro_both_empty_is_one():
    out = core.track_id([{"query_id": "q3", "target_track_ids": []}], [V5_REFS[2]])
    assert out["micro_precision"] == out["micro_recall"] == out["micro_f1"] == 1.0
    assert not math.isnan(out["f1"])


# ---------------------------------------------------------------- the common option names and their deprecated aliases


def _wrong_size_case():
    big = rle.encode(np.repeat(np.repeat([[1, 1, 0, 0]], 2, 0), 2, 1))  # G upscaled 2x
    return [pred("q", [(1, big)]), pred("B", [])], [ref("q", [(1, G)], [1]), V1_REFS[1]]


def test_deprecated_option_aliases_warn_and_give_the_same_numbers():
    preds, refs = _wrong_size_case()
    new = core.mask_temporal(preds, refs, resize_predictions="nearest", empty_union_iou=0.0)
    assert new["miou"] == 0.5  # q: IoU 1.0 after the resize; B: both frames empty, IoU = empty_union_iou = 0
    with pytest.warns(FutureWarning, match="'resize_mismatched' is deprecated, use 'resize_predictions'"):
        with pytest.warns(FutureWarning, match="'empty_iou' is deprecated, use 'empty_union_iou'"):
            old = core.mask_temporal(preds, refs, resize_mismatched="nearest", empty_iou=0.0)
    assert old == new
    with pytest.warns(FutureWarning, match="'resize_mismatched'"):
        opts = core.MaskTemporalOptions(resize_mismatched="nearest")
    assert opts == core.MaskTemporalOptions(resize_predictions="nearest")
    assert [f.name for f in dataclasses.fields(core.MaskTemporalOptions)].count("resize_mismatched") == 0  # not a field
    assert dataclasses.replace(opts, iou_threshold=0.3).resize_predictions == "pil"  # no second warning either


def test_new_option_names_do_not_warn_and_refuse_like_the_old():
    preds, refs = _wrong_size_case()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        core.mask_temporal(preds, refs, resize_predictions="nearest")
        with pytest.raises(PredictionError, match=r"query 'q'.*frame 1.*\[2, 8\].*\[1, 4\].*resize_predictions='nearest'"):
            core.mask_temporal(preds, refs)
    for bad, name in [({"resize_predictions": "bilinear"}, "resize_predictions"), ({"empty_union_iou": 2}, "empty_union_iou"),
                      ({"resize_mismatched": "bilinear"}, "resize_mismatched"), ({"empty_iou": "1"}, "empty_iou"),
                      ({"empty_iou": 2}, "empty_iou")]:
        with pytest.raises(OptionError, match=f"'{name}'"):
            core.mask_temporal(preds, refs, **bad)
    with pytest.raises(OptionError, match="deprecated alias of 'empty_union_iou'; pass only"):
        core.mask_temporal(preds, refs, empty_iou=0.0, empty_union_iou=0.5)


def test_deprecated_aliases_through_evaluate(mask_metric):
    preds, refs = _wrong_size_case()
    new = mask_metric.compute(predictions=preds, references=refs, resize_predictions="nearest", empty_union_iou=0.0)
    with pytest.warns(FutureWarning, match="use 'resize_predictions'"):
        old = mask_metric.compute(predictions=preds, references=refs, resize_mismatched="nearest", empty_union_iou=0.0)
    assert old == new == core.mask_temporal(preds, refs, resize_predictions="nearest", empty_union_iou=0.0)


def test_deprecated_resize_flag_of_the_command_line(r4d_release, tmp_path):
    from perckit.r4d_bench import evaluate_mask_temporal as cli_mask

    root = r4d_release.root
    common = ["--self-check", "--ground-truth", str(root / "scripts/new_predictions_ground_truth_all_queries.json"),
              "--queries-meta", str(root / "evaluation/R4D-Bench_queries.json"), "--repo-root", str(root)]
    assert cli_mask.build_parser().parse_args(common + ["--resize-predictions", "nearest"]).resize_predictions == "nearest"
    assert cli_mask.main(common + ["--resize-predictions", "nearest", "--output", str(tmp_path / "new.json")]) == 0
    with pytest.warns(FutureWarning, match="'resize_mismatched' is deprecated, use 'resize_predictions'"):
        assert cli_mask.main(common + ["--resize-mismatched", "nearest", "--output", str(tmp_path / "old.json")]) == 0
    assert (tmp_path / "old.json").read_text() == (tmp_path / "new.json").read_text()
