"""av_reasoning: the spec's test vectors by hand, GT-as-prediction through evaluate, shifted predictions, null rules,
bad input, the prediction folder, and evaluate's distributed mode."""

import json
import logging

import numpy as np
import pytest
from helpers.common import REPO
from helpers.distributed import batch_sizes, compute_in_batches, run_distributed

from perckit import rle
from perckit.hf.entrypoints import build_split
from perckit.errors import InputNotFoundError, OptionError, PredictionError, RLEError
from perckit.samples.reason_av_edit import encode_mp4
from perckit.reason_av_edit import features as feats
from perckit.reason_av_edit import metric as core
from perckit.reason_av_edit.read.predictions import gt_as_predictions, load_predictions_dir

SR = 16000
NOT = feats.NOT_PROVIDED_MEDIA
IOU_KEYS = ("visual_iou", "visual_ciou", "visual_iou_with_null", "audio_tiou", "audio_tiou_hull", "audio_tf_iou",
            "video_tiou", "video_tiou_hull", "av_support_tiou")
OFFSET_KEYS = ("av_onset_offset_abs_s", "av_support_offset_s")


def R(counts, size=(2, 4)):
    return {"size": list(size), "counts": counts}


def ref(sid="s", category="where_only", sub_track="W1_same_class_pair", anchor_mask=None, reason_audio=None, mask_video=None,
        edit_window_s=None, edit_window_frames=None, fps=25.0, num_frames=75, selected_instance_index=None, language="",
        orientation=""):
    return {
        "sample_id": sid, "category": category, "sub_track": sub_track, "language": language, "orientation": orientation,
        "anchor_mask": anchor_mask if anchor_mask is not None else dict(feats.NOT_PROVIDED_RLE),
        "reason_audio": {"bytes": reason_audio, "path": ""} if reason_audio is not None else dict(NOT),
        "mask_video": {"bytes": mask_video, "path": ""} if mask_video is not None else dict(NOT),
        "edit_window_s": edit_window_s, "edit_window_frames": edit_window_frames, "fps": fps, "num_frames": num_frames,
        "selected_instance_index": selected_instance_index,
    }


def score(pred, reference, **options):
    return core.score_sample(pred, reference, core.AVReasoningOptions(**options))


def sine_wav(start, end, seconds=3.0, amp=0.5, freq=440.0):
    """``seconds`` of silence with a ``freq`` Hz sine of amplitude ``amp`` on [start, end) s (as WAV bytes)."""
    x = np.zeros(int(seconds * SR))
    n = np.arange(int(start * SR), int(end * SR))
    x[n] = amp * np.sin(2 * np.pi * freq * n / SR)
    return feats.encode_wav(x, SR, subtype="FLOAT")


def mask_video(active_frames, total=75, hw=(32, 32)):
    frames = np.zeros((total, hw[0], hw[1], 3), np.uint8)
    for j in active_frames:
        frames[j, 8:24, 8:24] = 255
    return encode_mp4(frames, 25, lossless=True)


@pytest.fixture(scope="module")
def metric():
    import evaluate

    return evaluate.load(str(REPO / "metrics" / "av_reasoning"))


# ---------------------------------------------------------------- V1, V2 (visual)


def test_v1_visual(metric):
    r = ref(anchor_mask=R("242"))
    p = feats.make_prediction("s", anchor_mask=R("44"))
    s = score(p, r)
    assert (s.visual_intersection, s.visual_union) == (2, 6)  # I = 2, U = 6
    assert s.visual_iou == 1 / 3 and s.bg_leak == 2 / 4
    assert (s.which_rule, s.which_correct) == ("visual", False)
    out = metric.compute(predictions=[p], references=[r])
    assert out["visual_iou"] == 1 / 3 and out["visual_ciou"] == 1 / 3 and out["bg_leak"] == 0.5
    # which_acc is suggested for which_only / combined: a where_only sample shows it in its category block
    assert out["which_acc"] is None and out["per_category"]["where_only"]["which_acc"] == 0.0
    free = metric.compute(predictions=[p], references=[r], restrict_to_suggested=False)
    assert free["which_acc"] == 0.0 and free["which_acc_rule_counts"] == {"discrete": 0, "visual": 1, "audio": 0, "unscored": 0}
    assert out["n_visual_iou"] == 1 and out["visual_null_acc"] is None and "visual_null_acc" in out["skipped"]
    # the same arrays through make_prediction
    assert feats.make_prediction("s", anchor_mask=np.array([[0, 0, 1, 1], [0, 0, 1, 1]]))["anchor_mask"] == R("44")


def test_v2_null_visual():
    r = ref(anchor_mask=R("8"))
    good = score(feats.make_prediction("s", anchor_mask=R("8")), r)
    assert good.visual_null is True and good.visual_null_correct is True and good.visual_iou_with_null == 1.0
    bad = score(feats.make_prediction("s", anchor_mask=R("242")), r)  # 50% of the frame >= 0.1%
    assert bad.visual_null_correct is False and bad.visual_iou_with_null == 0.0
    assert good.visual_iou is None and bad.visual_iou is None  # never enters visual_iou
    out = core.reduce_scores([good, bad])
    assert out["visual_null_acc"] == 0.5 and out["visual_iou_with_null"] == 0.5 and out["visual_iou"] is None
    assert out["n_visual_iou"] == 0 and out["n_visual_null_acc"] == 2


# ---------------------------------------------------------------- A1, A2, A3, W1


def test_a1_windows():
    r = ref(category="when_only", sub_track="T1_word_phrase_swap", edit_window_s=[1.0, 2.0], num_frames=75)
    s = score(feats.make_prediction("s", edit_window_s=[1.5, 2.5]), r)
    assert s.audio_tiou_hull == 0.5 / 1.5
    # frame vectors over 1 + 48000 // 256 = 188 frames: GT 63..124 (62), prediction 94..156 (63), I 31, U 94
    assert s.audio_tiou == 31 / 94
    out = core.reduce_scores([s])
    assert out["audio_tiou_r@0.5"] == 0.0 and out["audio_tiou_r@0.7"] == 0.0 and out["n_audio_tiou_r@0.5"] == 1
    g = core.window_vector((1.0, 2.0), 188)
    assert np.flatnonzero(g)[[0, -1]].tolist() == [63, 124]


def test_a2_waveforms():
    gt = sine_wav(1.0, 2.0)
    w = core.Waveform(core.decode_wav(gt, "gt"), core.AudioOptions())
    assert len(w.active) == 188 and np.flatnonzero(w.active)[[0, -1]].tolist() == [61, 126] and w.active.sum() == 66
    r = ref(category="when_only", sub_track="T1_word_phrase_swap", reason_audio=gt)  # edit_window_s null
    same = score(feats.make_prediction("s", reason_audio=gt), r)
    assert same.audio_tiou == 1.0 and same.audio_tf_iou == 1.0 and same.audio_tiou_hull == 1.0
    silent = score(feats.make_prediction("s", reason_audio=np.zeros(3 * SR)), r)
    assert silent.audio_tiou == 0.0 and silent.audio_tf_iou == 0.0
    # gt_temporal_source="reason_audio" ignores an annotation window
    r2 = ref(reason_audio=gt, edit_window_s=[0.0, 3.0])
    assert score(feats.make_prediction("s", reason_audio=gt), r2, gt_temporal_source="reason_audio").audio_tiou == 1.0
    # all-zero GT: audio-null; a silent prediction is correct and the sample has no tIoU
    null = score(feats.make_prediction("s", reason_audio=np.zeros(3 * SR)), ref(reason_audio=feats.encode_wav(np.zeros(3 * SR))))
    assert null.audio_null is True and null.audio_null_correct is True and null.audio_tiou is None and null.audio_tf_iou is None


def test_a3_av_support():
    r = ref(category="when_only", sub_track="T1_word_phrase_swap", num_frames=75)
    p = feats.make_prediction("s", edit_window_s=[1.5, 2.5], mask_video=mask_video(range(25, 50)))
    s = score(p, r)
    assert s.av_onset_offset_abs_s == 0.5 and s.av_support_offset_s == 0.5 and s.av_support_tiou == 0.5 / 1.5
    assert s.av_undefined is False
    # an empty support makes the sample undefined
    e = score(feats.make_prediction("s", edit_window_s=[1.0, 1.0], mask_video=mask_video(range(25, 50))), r)
    assert e.av_undefined is True and e.av_support_offset_s is None
    out = core.reduce_scores([s, e])
    assert out["num_av_undefined"] == 1 and out["av_support_offset_s"] == 0.5 and out["n_av_support_offset_s"] == 1


def test_w1_which_discrete_rule():
    r = ref(anchor_mask=R("242"), selected_instance_index=2)
    s = score(feats.make_prediction("s", anchor_mask=R("8"), selected_instance_index=2), r)
    assert s.visual_iou == 0.0 and (s.which_rule, s.which_correct) == ("discrete", True)
    assert core.which_correct(1, 2, False, 1.0, None, None) == ("discrete", False)
    assert core.which_correct(None, 2, False, 0.5, None, None) == ("visual", True)
    assert core.which_correct(None, None, True, None, 0.4, 0.9) == ("audio", False)  # tf IoU first
    assert core.which_correct(None, None, True, None, None, 0.9) == ("audio", True)  # falls back to audio_tiou
    assert core.which_correct(None, None, None, None, 1.0, 1.0) == ("unscored", None)


# ---------------------------------------------------------------- shifted predictions (hand-computed)


def test_video_shifted_by_three_frames():
    """GT mask active on frames 10..19 of 40; the prediction is shifted by 3 frames (13..22): I = 7, U = 13."""
    r = ref(category="when_only", sub_track="T2_sentence_rewrite", mask_video=mask_video(range(10, 20), total=40),
            edit_window_frames=[10, 20], num_frames=40)
    s = score(feats.make_prediction("s", mask_video=mask_video(range(13, 23), total=40)), r)
    assert s.video_tiou == 7 / 13
    assert s.video_tiou_hull == pytest.approx(7 / 13, abs=1e-12)  # [0.4, 0.8) vs [0.52, 0.92) s: 0.28 / 0.52
    # a predicted window instead of a mask video: 1[a <= j / 25 < b] -> frames 13..22 as well
    w = score(feats.make_prediction("s", edit_window_s=[0.52, 0.92]), r)
    assert w.video_tiou == 7 / 13
    # a shorter prediction is padded with inactive frames; extra frames are dropped
    short = score(feats.make_prediction("s", mask_video=mask_video(range(10, 15), total=15)), r)
    assert short.video_tiou == 5 / 10


def test_audio_shifted_by_half_a_second():
    """The A2 sine moved by 0.512 s = 32 frames: active 93..158 vs GT 61..126 -> I = 34, U = 98."""
    gt = sine_wav(1.0, 2.0)
    r = ref(category="when_only", sub_track="T1_word_phrase_swap", reason_audio=gt)
    s = score(feats.make_prediction("s", reason_audio=sine_wav(1.512, 2.512)), r)
    assert s.audio_tiou == 34 / 98
    assert s.audio_tiou_hull == pytest.approx(0.544 / 1.568, abs=1e-12)  # [0.976, 2.032) vs [1.488, 2.544)


def test_fixture_sample_shifted_by_frames(rows):
    """A builder row's mask video shifted by d frames: the GT is active on [f0, f1), the prediction on
    [f0 + d, min(f1 + d, n)), so I = L - d and U = min(f1 + d, n) - f0 (L = f1 - f0)."""
    from perckit.reason_av_edit.metric import decode_mask_video

    row = next(r for r in rows if r["category"] == "when_only")
    f0, f1 = row["edit_window_frames"]
    n = row["num_frames"]
    h, w = row["anchor_mask"]["size"]
    active, fps = decode_mask_video(row["mask_video"]["bytes"], "m.mp4", "gt", 127, 0.001)
    assert np.flatnonzero(active).tolist() == list(range(f0, f1)) and fps == 25.0
    d = 2
    frames = np.zeros((n, h, w, 3), np.uint8)
    frames[f0 + d : f1 + d, : h // 2, : w // 2] = 255
    reference = feats.to_metric_reference(row)
    s = score(feats.make_prediction(row["sample_id"], mask_video=encode_mp4(frames, 25, lossless=True)), reference)
    L = f1 - f0
    assert L > d
    expected = (L - d) / (min(f1 + d, n) - f0)
    assert s.video_tiou == expected
    assert s.video_tiou_hull == pytest.approx(expected, abs=1e-12)


# ---------------------------------------------------------------- null rules


def test_audio_null_rules():
    r = ref(category="combined", sub_track="C4_spatial_add", reason_audio=feats.encode_wav(np.zeros(3 * SR)))
    assert score(feats.make_prediction("s", edit_window_s=[1.0, 1.0]), r).audio_null_correct is True  # empty window
    assert score(feats.make_prediction("s", edit_window_s=[2.0, 1.0]), r).audio_null_correct is True  # b <= a
    assert score(feats.make_prediction("s", edit_window_s=[1.0, 2.0]), r).audio_null_correct is False
    assert score(feats.make_prediction("s", reason_audio=sine_wav(1, 2)), r).audio_null_correct is False
    # the GT copied as prediction (window + silent waveform) is correct
    assert score(feats.make_prediction("s", edit_window_s=[1.0, 2.0], reason_audio=np.zeros(3 * SR)), r).audio_null_correct is True
    assert score(feats.make_prediction("s"), r).audio_null_correct is None  # nothing predicted


def test_video_null_rules():
    r = ref(category="when_only", sub_track="T1_word_phrase_swap", mask_video=mask_video([], total=20), num_frames=20)
    good = score(feats.make_prediction("s", mask_video=mask_video([], total=20)), r)
    bad = score(feats.make_prediction("s", edit_window_s=[0.2, 0.4]), r)
    assert good.video_null is True and good.video_null_correct is True and good.video_tiou is None
    assert bad.video_null_correct is False
    out = core.reduce_scores([good, bad])
    assert out["video_null_acc"] == 0.5 and out["video_tiou"] is None and out["n_video_tiou"] == 0


def test_null_disagreement_warning(caplog):
    r = ref(sid="h", category="which_only", sub_track="H3_offscreen_source", anchor_mask=R("242"))
    with caplog.at_level(logging.WARNING):
        core.reduce_scores([score(feats.make_prediction("h", anchor_mask=R("242")), r)])
    assert "visual null anchors (H3 only)" in caplog.text and "'h'" in caplog.text


def test_visual_null_sample_uses_audio_rule_for_which():
    r = ref(category="which_only", sub_track="H3_offscreen_source", anchor_mask=R("8"), reason_audio=sine_wav(1, 2))
    s = score(feats.make_prediction("s", anchor_mask=R("8"), reason_audio=sine_wav(1, 2)), r)
    assert (s.which_rule, s.which_correct) == ("audio", True)


# ---------------------------------------------------------------- aggregation


def test_restrict_to_suggested_and_blocks():
    v1 = ref(sid="a", category="which_only", sub_track="H1_overlapping_voices", anchor_mask=R("242"))
    rr = ref(sid="b", category="reference", sub_track="R1_person_identity", anchor_mask=R("242"))
    preds = [feats.make_prediction("a", anchor_mask=R("44")), feats.make_prediction("b", anchor_mask=R("242"))]
    out = core.av_reasoning(preds, [v1, rr])
    assert out["visual_iou"] is None and "where_only" in out["skipped"]["visual_iou"]
    assert out["which_acc"] == 0.0  # which_only counts for which_acc
    assert out["reference"]["visual_iou"] == 1.0 and out["num_reference_samples"] == 1
    assert out["per_category"]["which_only"]["visual_iou"] == 1 / 3
    assert out["per_sub_track"]["R1_person_identity"]["which_acc"] == 1.0
    assert list(out["per_category"]) == ["which_only", "reference"]
    free = core.av_reasoning(preds, [v1, rr], restrict_to_suggested=False)
    assert free["visual_iou"] == (1 / 3 + 1) / 2 and free["visual_ciou"] == (2 + 4) / (6 + 4)


def test_skipped_reasons(monkeypatch):
    r = ref(category="combined", sub_track="C1_overlap_local_speech", anchor_mask=R("242"), mask_video=mask_video(range(5, 9), total=12), num_frames=12)
    out = core.av_reasoning([feats.make_prediction("s", anchor_mask=R("242"))], [r])
    assert out["visual_iou"] == 1.0
    sk = out["skipped"]
    assert sk["audio_tf_iou"] == "no predicted reason_audio" and sk["audio_tiou"] == "no predicted edit_window_s or reason_audio"
    assert sk["video_tiou"] == "no predicted mask_video or edit_window_s" and sk["av_support_offset_s"] == "no predicted mask_video"
    monkeypatch.setattr(core, "_cv2", lambda: None)
    out = core.av_reasoning([feats.make_prediction("s", edit_window_s=[0.2, 0.36])], [r])
    assert out["video_tiou"] is None and out["skipped"]["video_tiou"].startswith("cv2 not installed")
    assert out["audio_tiou_hull"] is None  # no reference window, no reference waveform


def test_output_has_no_out_of_scope_keys():
    out = core.av_reasoning([feats.make_prediction("s", anchor_mask=R("242"))], [ref(anchor_mask=R("242"))])
    keys = {k.lower() for k in out} | {k.lower() for k in out["per_category"]["where_only"]}
    for name in ("fvd", "fad", "clap", "desync", "lpaps", "ssim", "peavs", "sync_c", "sync_d", "pq", "tv_a", "ta_a", "av_a"):
        assert not any(k == name or k.startswith(name + "_") for k in keys)


def test_options_are_named_with_spec_defaults():
    o = core.AVReasoningOptions()
    assert (o.rms_floor, o.rel_db, o.gap_close_s, o.min_run_s, o.n_fft, o.hop, o.sample_rate) == (1e-4, 40.0, 0.10, 0.05, 1024, 256, 16000)
    assert (o.null_area_frac, o.mask_video_threshold, o.which_iou_threshold, o.tiou_recall_thresholds) == (0.001, 127, 0.5, (0.5, 0.7))
    assert (o.restrict_to_suggested, o.gt_temporal_source, o.resample, o.resize_predictions) == (True, "annotation", True, None)
    assert o.audio.frames_of(o.gap_close_s) == 6 and o.audio.frames_of(o.min_run_s) == 3
    for bad in ({"gt_temporal_source": "video"}, {"resize_predictions": "bilinear"}, {"n_fft": 1023}, {"rel_db": -1},
                {"tiou_recall_thresholds": (0.5, 1.5)}, {"mask_video_threshold": 300}):
        with pytest.raises(OptionError):
            core.AVReasoningOptions(**bad)
    with pytest.raises(OptionError, match=r"unknown option\(s\) \['nfft'\]"):
        core.av_reasoning([], [], nfft=512)


def test_gap_closing_and_min_run():
    a = np.array([0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0], bool)
    closed = core.close_gaps(a, 6)
    assert closed[1:12].all() and not closed[12:19].any()  # gap of 6 closed, gap of 7 kept
    assert not core.drop_short_runs(closed, 3)[19]  # the run of 1 is dropped


# ---------------------------------------------------------------- bad input (spec section 6)


def test_bad_wav_and_rate():
    r = ref(reason_audio=sine_wav(1, 2))
    with pytest.raises(PredictionError, match=r"prediction sample 's': reason_audio.*expected a decodable WAV"):
        score(feats.make_prediction("s", reason_audio=b"RIFFnope"), r)
    wav8k = feats.encode_wav(np.zeros(8000 * 3), 8000)
    with pytest.raises(PredictionError, match=r"sample rate is 8000 Hz, expected 16000 Hz"):
        score(feats.make_prediction("s", reason_audio=wav8k), r, resample=False)
    x = np.zeros(8000 * 3)
    n = np.arange(8000, 16000)
    x[n] = 0.5 * np.sin(2 * np.pi * 440 * n / 8000)
    s = score(feats.make_prediction("s", reason_audio=feats.encode_wav(x, 8000, subtype="FLOAT")), r)
    assert s.audio_tiou > 0.9  # resampled to 16 kHz
    with pytest.raises(InputNotFoundError, match="nope.wav"):
        score(feats.make_prediction("s", reason_audio="/nonexistent/nope.wav"), r)


def test_mask_size_mismatch_and_bad_rle():
    r = ref(anchor_mask=R("242"))
    with pytest.raises(PredictionError, match=r"sample 's'.*\[2, 2\] differs from the ground-truth size \[2, 4\].*resize_predictions='nearest'"):
        score(feats.make_prediction("s", anchor_mask=R("04", (2, 2))), r)
    assert score(feats.make_prediction("s", anchor_mask=R("04", (2, 2))), r, resize_predictions="nearest").visual_iou == 0.5
    with pytest.raises(RLEError, match=r"length 2"):
        score({**feats.make_prediction("s"), "anchor_mask": {"size": [2, 4, 1], "counts": "8"}}, r)
    with pytest.raises(RLEError, match=r"length 2"):
        score({**feats.make_prediction("s"), "anchor_mask": {"size": [], "counts": "8"}}, r)


def test_id_errors():
    refs = [ref(sid="a", anchor_mask=R("242")), ref(sid="b", anchor_mask=R("242"))]
    p = lambda sid: feats.make_prediction(sid, anchor_mask=R("242"))  # noqa: E731
    with pytest.raises(PredictionError, match="duplicate sample_id 'a'"):
        core.av_reasoning([p("a"), p("a"), p("b")], refs)
    with pytest.raises(PredictionError, match=r"unknown to the references.*'c'"):
        core.av_reasoning([p("a"), p("b"), p("c")], refs)
    with pytest.raises(PredictionError, match=r"no prediction for 1 reference sample_id.*'b'"):
        core.av_reasoning([p("a")], refs)


def test_unopenable_mask_video():
    r = ref(category="when_only", mask_video=mask_video([3], total=10), num_frames=10)
    with pytest.raises(PredictionError, match=r"prediction sample 's': mask_video.*cannot be opened"):
        score(feats.make_prediction("s", mask_video=b"not a video"), r)


def test_zero_length_window_is_no_edit():
    r = ref(category="when_only", sub_track="T1_word_phrase_swap", edit_window_s=[1.0, 2.0])
    s = score(feats.make_prediction("s", edit_window_s=[1.5, 1.5]), r)
    assert s.audio_tiou == 0.0 and s.audio_tiou_hull == 0.0


# ---------------------------------------------------------------- builder rows, evaluate, files, distributed


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    from perckit.samples import write_release

    return write_release("reason_av_edit", tmp_path_factory.mktemp("rae_m"), extracted=True)


@pytest.fixture(scope="module")
def rows(release, tmp_path_factory):
    ds = build_split("reason_av_edit", "default", release.root, tmp_path_factory.mktemp("cache"))
    return list(ds.remove_columns(["video", "audio", "reason_visual", "reason_visual_mask", "ref_image"]))


def _check_perfect(out):
    for block in [out, out["reference"], *out["per_category"].values(), *out["per_sub_track"].values()]:
        for k in IOU_KEYS:
            assert block[k] in (1.0, None), (k, block[k])
        for k in OFFSET_KEYS:
            assert block[k] in (0.0, None), (k, block[k])
        for k in ("visual_null_acc", "audio_null_acc", "video_null_acc", "which_acc", "audio_tiou_r@0.5", "audio_tiou_r@0.7"):
            assert block[k] in (1.0, None), (k, block[k])
        assert block["bg_leak"] in (0.0, None)
    for k in IOU_KEYS + OFFSET_KEYS:
        assert out[k] is not None, k


def test_gt_as_prediction_through_evaluate(metric, rows):
    refs = [feats.to_metric_reference(r) for r in rows]
    out = metric.compute(predictions=gt_as_predictions(rows), references=refs, return_per_sample=True)
    _check_perfect(out)
    assert out["skipped"] == {
        "video_null_acc": "no null-GT sample in the categories ['when_only', 'combined'] (main samples)",
        "visual_null_acc": "no null-GT sample in the categories ['where_only', 'combined'] (main samples)",
    }
    assert out["num_samples"] == 16 and out["num_av_undefined"] == 0
    per = {s["sample_id"]: s for s in out["per_sample"]}
    assert per["h3_0000"]["visual_null"] and per["h3_0000"]["video_null"] and per["h3_0000"]["which_rule"] == "audio"
    assert per["c4_0000"]["audio_null"] and per["r3_0000"]["audio_null"] and per["c4_0000"]["audio_null_correct"]
    assert out["per_category"]["which_only"]["visual_null_acc"] == 1.0 and out["per_category"]["which_only"]["video_null_acc"] == 1.0
    assert out["per_category"]["combined"]["audio_null_acc"] == 1.0 and out["reference"]["audio_null_acc"] == 1.0
    assert sum(out["which_acc_rule_counts"].values()) == out["n_which_acc"] == 8
    free = metric.compute(predictions=gt_as_predictions(rows), references=refs, restrict_to_suggested=False)
    _check_perfect(free)
    assert free["visual_null_acc"] == 1.0 and free["n_visual_null_acc"] == 1 and free["video_null_acc"] == 1.0


def test_prediction_folder_roundtrip(rows, tmp_path):
    from PIL import Image

    for r in rows:
        sid = r["sample_id"]
        (tmp_path / f"{sid}.json").write_text(json.dumps({"edit_window_s": r["edit_window_s"], "selected_instance_index": r["selected_instance_index"]}))
        Image.fromarray(rle.decode(r["anchor_mask"]).astype(np.uint8) * 255).save(tmp_path / f"{sid}_anchor_mask.png")
        (tmp_path / f"{sid}_reason_audio.wav").write_bytes(r["reason_audio"]["bytes"])
        (tmp_path / f"{sid}_mask.mp4").write_bytes(r["mask_video"]["bytes"])
    preds = load_predictions_dir(tmp_path)
    assert [p["sample_id"] for p in preds] == sorted(r["sample_id"] for r in rows)
    _check_perfect(core.av_reasoning(preds, [feats.to_metric_reference(r) for r in rows]))
    # a missing file is "not provided"; an invalid JSON names the file
    (tmp_path / "w1_0000_mask.mp4").unlink()
    p = {q["sample_id"]: q for q in load_predictions_dir(tmp_path, ["w1_0000"])}["w1_0000"]
    assert p["mask_video"] == NOT and p["reason_audio"]["bytes"] is not None
    (tmp_path / "w1_0000.json").write_text("{oops")
    with pytest.raises(PredictionError, match=r"w1_0000.json.*expected valid JSON"):
        load_predictions_dir(tmp_path)
    (tmp_path / "w1_0000.json").write_text(json.dumps({"window": [0, 1]}))
    with pytest.raises(PredictionError, match=r"w1_0000.json.*unknown key\(s\) \['window'\]"):
        load_predictions_dir(tmp_path)


def _path_refs(rows, root):
    """References whose media are absolute paths (JSON-serialisable for the worker processes)."""
    out = []
    for r in rows:
        ref_ = feats.to_metric_reference(r)
        for k in ("reason_audio", "mask_video"):
            ref_[k] = {"bytes": None, "path": str(root / r[k]["path"])}
        out.append(ref_)
    return out


def _perturbed(refs, fps=25.0):
    preds = []
    for i, r in enumerate(refs):
        p = feats.gt_as_prediction(r)
        if i % 3 == 1 and r["edit_window_s"]:
            a, b = r["edit_window_s"]
            p["edit_window_s"] = [a + 2 / fps, b + 2 / fps]
        if i % 4 == 2:
            p["anchor_mask"] = rle.empty(*r["anchor_mask"]["size"])
            p["selected_instance_index"] = None
        if i % 5 == 3:
            p["reason_audio"] = dict(NOT)
        preds.append(p)
    return preds


def test_distributed_matches_single_process(metric, rows, release, tmp_path):
    refs = _path_refs(rows, release.root)
    preds = _perturbed(refs)
    options = {"return_per_sample": True}
    single = metric.compute(predictions=preds, references=refs, **options)
    assert single["audio_tiou"] < 1.0 and single["visual_iou"] < 1.0
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"predictions": preds, "references": refs, "options": options}))
    dist = run_distributed("av_reasoning", inputs, 2, tmp_path, "av-reasoning-dist", 3, timeout=600)
    assert dist == json.loads(json.dumps(single))


def test_add_batch_in_any_batch_sizes(metric, rows, release):
    refs = _path_refs(rows, release.root)
    preds = _perturbed(refs)
    whole = metric.compute(predictions=preds, references=refs)
    for bs in (1, 5):
        assert compute_in_batches(metric, preds, refs, batch_sizes(len(refs), bs)) == whole


# ---------------------------------------------------------------- per language and orientation (issue 31)

#: (sample, language, orientation, predicted anchor mask) against the GT "242" = [[0,1,1,0],[0,1,1,0]] (4 pixels):
#: IoU 2/6 ("44"), 1 (the GT), 0 (empty, U = 4) and 4/8 (the whole frame).
GROUPED = [("a", "zh", "landscape", "44"), ("b", "zh", "portrait", "242"), ("c", "en", "landscape", "8"), ("d", "en", "portrait", "08")]


def test_per_language_and_orientation_golden_values(metric):
    """Two zh and two en samples, mixed orientations: each block is the mean of its two samples' IoUs, by hand, through
    evaluate (references projected by to_metric_reference from rows that carry the fields) and the Python function."""
    rows = [dict(ref(sid, anchor_mask=R("242"), language=lang, orientation=o), instruction="") for sid, lang, o, _ in GROUPED]
    refs = [feats.to_metric_reference(r) for r in rows]
    assert [(r["language"], r["orientation"]) for r in refs] == [(g[1], g[2]) for g in GROUPED]
    preds = [feats.make_prediction(sid, anchor_mask=R(p)) for sid, _, _, p in GROUPED]
    for out in (metric.compute(predictions=preds, references=refs), core.av_reasoning(preds, refs)):
        assert out["visual_iou"] == (1 / 3 + 1 + 0 + 0.5) / 4
        assert list(out["per_language"]) == ["en", "zh"] and list(out["per_orientation"]) == ["landscape", "portrait"]
        assert out["per_language"]["zh"]["visual_iou"] == (1 / 3 + 1) / 2 and out["per_language"]["en"]["visual_iou"] == 0.25
        assert out["per_orientation"]["landscape"]["visual_iou"] == (1 / 3 + 0) / 2
        assert out["per_orientation"]["portrait"]["visual_iou"] == 0.75
        assert {b["num_samples"] for g in ("per_language", "per_orientation") for b in out[g].values()} == {2}
    # a sample without a language (the release has no such column) is in no language block
    refs[0]["language"] = ""
    assert core.av_reasoning(preds, refs)["per_language"]["zh"]["num_samples"] == 1


def test_references_without_language_and_orientation(metric):
    """References made before issue 31 (no language / orientation): the Python function scores them (no such blocks);
    evaluate, whose declared features are the schema, refuses them naming the missing keys; a state saved before keeps
    loading."""
    from perckit.hf.accumulate import accumulator

    refs = [{k: v for k, v in ref(sid, anchor_mask=R("242")).items() if k not in ("language", "orientation")} for sid, *_ in GROUPED]
    preds = [feats.make_prediction(sid, anchor_mask=R(p)) for sid, _, _, p in GROUPED]
    out = core.av_reasoning(preds, refs)
    assert out["visual_iou"] == (1 / 3 + 1 + 0 + 0.5) / 4 and out["per_language"] == {} and out["per_orientation"] == {}
    with pytest.raises(PredictionError, match=r"references\[0\]: .*\(missing \['language', 'orientation'\], unexpected \[\]\)"):
        metric.compute(predictions=preds, references=refs)
    with pytest.raises(PredictionError, match=r"missing the key\(s\) \['language', 'orientation'\]"):
        feats.to_metric_reference(refs[0])
    full = [dict(r, language=g[1], orientation=g[2]) for r, g in zip(refs, GROUPED)]
    state = accumulator("av_reasoning").update(preds, full).state_dict()
    assert state["records"][0][1]["language"] == "zh"
    for _, record, _ in state["records"]:
        del record["language"], record["orientation"]
    old = accumulator("av_reasoning").load_state_dict(state).compute()
    assert old["visual_iou"] == out["visual_iou"] and old["per_language"] == {}
