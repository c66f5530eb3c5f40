"""av_edit_quality end to end: the source as the edit scores perfect, a region-only edit keeps bg_* perfect, a background
edit is caught, the placement box of instance addition, the tables and their counts, the model plumbing (fake model
metrics: a per-sample mean, a set-level statistic; factories that are unavailable), the options, and evaluate
(builder rows of the sample release, add_batch, distributed mode)."""

import dataclasses
import json
import logging
import random

import numpy as np
import pytest
from helpers.common import REPO
from helpers.distributed import batch_sizes, compute_in_batches, run_distributed
from helpers.edit_quality import MeanMetric, SetMetric, box_region, clip, edit_box, reference, rgb_mp4

from perckit.hf.entrypoints import build_split
from perckit.errors import OptionError, PredictionError
from perckit.reason_av_edit import make_quality_prediction, to_quality_reference
from perckit.reason_av_edit.features import encode_wav
from perckit.reason_av_edit.quality import metric as core
from perckit.reason_av_edit.quality import models as registry
from perckit.core.stats import fmean

PIXEL = ["ssim", "psnr", "bg_psnr", "bg_ssim"]
BOX = (8, 8, 20, 20)


def score(preds, refs, **options):
    return core.av_edit_quality(preds, refs, **{"metrics": PIXEL, **options})


def pred_of(ref, frames=None, audio=None):
    video = ref["video"]["bytes"] if frames is None else rgb_mp4(frames)
    return make_quality_prediction(ref["sample_id"], video, audio)


@pytest.fixture(scope="module")
def src():
    return clip(t=5, h=32, w=32)


@pytest.fixture(scope="module")
def where_ref(src):
    return reference("w", src, box_region(5, 32, 32, BOX))


# ---------------------------------------------------------------- the three cases of the issue


def test_the_source_as_the_edit_scores_perfect(where_ref):
    out = score([pred_of(where_ref)], [where_ref])  # the very same bytes
    assert (out["ssim"], out["psnr"], out["bg_psnr"], out["bg_ssim"]) == (1.0, 100.0, 100.0, 1.0)
    assert out["num_samples"] == 1 and out["n_ssim"] == 1 and out["num_missing"] == 0
    assert core.av_edit_quality([pred_of(where_ref)], [where_ref], metrics=PIXEL, psnr_cap=60.0)["psnr"] == 60.0


def test_an_edit_confined_to_the_region_keeps_bg_perfect(src, where_ref):
    out = score([pred_of(where_ref, edit_box(src, BOX, 0))], [where_ref])
    assert out["bg_psnr"] == 100.0 and out["bg_ssim"] == 1.0
    assert out["psnr"] < 30 and out["ssim"] < 0.95


def test_a_background_edit_is_caught(src, where_ref):
    out = score([pred_of(where_ref, edit_box(src, (24, 0, 32, 8), 0))], [where_ref])
    assert out["bg_psnr"] < 30 and out["bg_ssim"] < 0.99 and out["psnr"] < 100


def test_no_mask_or_an_empty_mask_means_bg_over_the_whole_frame(src):
    ed = edit_box(src, BOX, 0)
    for region in (None, np.zeros((5, 32, 32), bool)):
        r = reference("n", src, region)
        out = score([pred_of(r, ed)], [r], return_per_sample=True)
        assert out["bg_psnr"] == out["psnr"] < 100 and out["bg_ssim"] == pytest.approx(out["ssim"], abs=1e-12)


def test_instance_addition_uses_the_placement_box(src):
    # an L-shaped placement mask: its bounding box is [8, 20) x [8, 20); the edit fills the box
    region = np.zeros((5, 32, 32), bool)
    region[:, 8:20, 8:11] = True
    region[:, 17:20, 8:20] = True
    ed = edit_box(src, BOX, 0)
    r = reference("c4", src, region, category="combined", sub_track="C4_spatial_add")
    box = score([pred_of(r, ed)], [r])
    assert box["bg_psnr"] == 100.0 and box["bg_ssim"] == 1.0
    raw = score([pred_of(r, ed)], [r], addition_region="mask")
    assert raw["bg_psnr"] < 30
    # not an addition sub-track: the raw mask
    w = reference("w", src, region)
    assert score([pred_of(w, ed)], [w])["bg_psnr"] == raw["bg_psnr"]


def test_the_mask_is_padded_or_cut_to_the_source_length(src):
    r = reference("w", src, box_region(3, 32, 32, BOX))  # 3 mask frames for 5 source frames: 2 empty frames
    ed = edit_box(src, BOX, 0)
    out = score([pred_of(r, ed)], [r], return_per_sample=True)
    assert out["bg_psnr"] < 100  # the last two frames have no region: the edit is background there
    assert out["per_sample"][0]["num_frames"] == 5


def test_frame_count_and_size_mismatch_through_the_metric(src, where_ref):
    longer = np.concatenate([src, src[:2]])
    with pytest.raises(PredictionError, match=r"sample 'w': the edited video has 7 frames, the source 5 .*frame_mismatch="):
        score([pred_of(where_ref, longer)], [where_ref])
    assert score([pred_of(where_ref, longer)], [where_ref], frame_mismatch="truncate")["ssim"] == 1.0
    half = src[::2]  # 3 frames: resampled to 5 by the nearest frame
    out = score([pred_of(where_ref, half)], [where_ref], frame_mismatch="resample")
    assert 0 < out["ssim"] < 1
    big = np.repeat(np.repeat(src, 2, axis=1), 2, axis=2)
    with pytest.raises(PredictionError, match=r"sample 'w': the edited video has 5 frames of 64 x 64, the source 5 frames of 32 x 32.*resize_edited='bilinear'"):
        score([pred_of(where_ref, big)], [where_ref])
    pytest.importorskip("cv2", reason="resize_edited='bilinear' needs OpenCV")
    assert score([pred_of(where_ref, big)], [where_ref], resize_edited="bilinear")["ssim"] > 0.5


# ---------------------------------------------------------------- tables


@pytest.fixture(scope="module")
def mixed(src):
    """Five samples over four categories: two where_only (perfect, background edit), one combined (region edit),
    one when_only (perfect), one reference (region edit)."""
    region = box_region(5, 32, 32, BOX)
    refs = [
        reference("w1", src, region), reference("w2", src, region),
        reference("c1", src, region, category="combined", sub_track="C1_overlap_local_speech"),
        reference("t1", src, None, category="when_only", sub_track="T1_word_phrase_swap"),
        reference("r1", src, region, category="reference", sub_track="R1_person_identity"),
    ]
    edits = {"w2": edit_box(src, (24, 0, 32, 8), 0), "c1": edit_box(src, BOX, 0), "r1": edit_box(src, BOX, 255)}
    preds = [pred_of(r, edits.get(r["sample_id"])) for r in refs]
    return preds, refs


def test_tables_main_reference_category_sub_track(mixed):
    preds, refs = mixed
    out = score(preds, refs, return_per_sample=True)
    per = {p["sample_id"]: p for p in out["per_sample"]}
    assert [p["sample_id"] for p in out["per_sample"]] == ["c1", "r1", "t1", "w1", "w2"]
    main = ["w1", "w2", "c1", "t1"]
    assert out["num_samples"] == 4 and out["num_reference_samples"] == 1
    for k in PIXEL:
        assert out[k] == fmean([per[s][k] for s in main]) and out[f"n_{k}"] == 4
        assert out["reference"][k] == per["r1"][k] and out["reference"]["num_samples"] == 1
        assert out["per_category"]["where_only"][k] == fmean([per["w1"][k], per["w2"][k]])
        assert out["per_sub_track"]["C1_overlap_local_speech"][k] == per["c1"][k]
    assert list(out["per_category"]) == ["where_only", "when_only", "combined", "reference"]
    for t in [out, out["reference"], *out["per_category"].values(), *out["per_sub_track"].values()]:
        for k in core.OUTPUT_KEYS:
            assert k in t and f"n_{k}" in t
        assert "num_samples" in t and "num_without_edited_audio" in t
    assert out["suggested"] == {"where_only": ["bg_psnr", "bg_ssim"], "which_only": ["lpaps"], "when_only": ["desync"],
                                "combined": ["bg_psnr", "bg_ssim", "lpaps", "desync"]}
    # every None top-level key has a reason; the unselected model keys say so
    assert set(out["skipped"]) == {k for k in core.OUTPUT_KEYS if out[k] is None} == set(registry.MODEL_KEYS)
    assert out["skipped"]["fvd"].startswith("not selected")
    json.dumps(out)  # plain JSON (no inf, no numpy)


def test_per_language_and_orientation_golden_values(src):
    """Two zh and two en samples, mixed orientations, a per-sample model metric set by hand (tv_a = 0.25, 0.5, 0.75, 1 for
    a..d): each language and orientation table is the mean of its two samples, through evaluate too; per_sample
    carries the two fields."""
    import evaluate

    groups = {"a": ("zh", "landscape", 0.25), "b": ("zh", "portrait", 0.5), "c": ("en", "landscape", 0.75), "d": ("en", "portrait", 1.0)}
    refs = [to_quality_reference(reference(sid, src, language=lang, orientation=o)) for sid, (lang, o, _) in groups.items()]
    preds = [pred_of(r) for r in refs]
    options = dict(metrics=["tv_a"], models={"tv_a": MeanMetric(keys=("tv_a",), fn=lambda s: groups[s.sample_id][2])})
    module = evaluate.load(str(REPO / "metrics" / "av_edit_quality"))
    for out in (core.av_edit_quality(preds, refs, return_per_sample=True, **options),
                module.compute(predictions=preds, references=refs, return_per_sample=True, **options)):
        assert out["tv_a"] == 0.625
        assert {k: {g: t["tv_a"] for g, t in out[k].items()} for k in ("per_language", "per_orientation")} == {
            "per_language": {"en": 0.875, "zh": 0.375}, "per_orientation": {"landscape": 0.5, "portrait": 0.75}}
        assert [(p["language"], p["orientation"]) for p in out["per_sample"]] == [g[:2] for g in groups.values()]
        assert list(out["per_language"]) == ["en", "zh"] and out["per_language"]["zh"]["num_samples"] == 2


def test_the_reduction_does_not_depend_on_the_order(mixed):
    preds, refs = mixed
    a = score(preds, refs)
    rng = random.Random(0)
    p2, r2 = preds[:], refs[:]
    rng.shuffle(p2)
    rng.shuffle(r2)
    assert score(p2, r2) == a


def test_num_proc_gives_the_records_of_one_process(src, mixed):
    """num_proc=2 (worker processes for the model-free metrics) gives the very numbers and per-sample rows of one
    process, in the same order; a model metric runs in this process meanwhile (every sample, in order); a user's
    error raised in a worker reaches the caller as itself, without the worker's traceback."""
    preds, refs = mixed
    one = score(preds, refs, return_per_sample=True)
    assert score(preds, refs, return_per_sample=True, num_proc=2) == one
    assert score(preds, refs, return_per_sample=True, num_proc=8) == one  # more processes than samples
    fvd = SetMetric()
    two = core.av_edit_quality(preds, refs, metrics=PIXEL + ["fvd"], models={"fvd": fvd}, num_proc=2, return_per_sample=True)
    assert two == core.av_edit_quality(preds, refs, metrics=PIXEL + ["fvd"], models={"fvd": SetMetric()}, return_per_sample=True)
    assert {k: two[k] for k in PIXEL} == {k: one[k] for k in PIXEL} and two["n_fvd"] == 4 and ["r1"] in fvd.reduced
    longer = [pred_of(r, np.concatenate([src, src[:2]])) if r["sample_id"] == "c1" else p for p, r in zip(preds, refs)]
    with pytest.raises(PredictionError, match=r"sample 'c1': the edited video has 7 frames, the source 5") as e:
        score(longer, refs, num_proc=2)
    assert e.value.__cause__ is None


def test_pixel_device_gives_the_numbers_of_the_compiled_path(mixed):
    pytest.importorskip("torch", reason="pixel_device needs torch (pip install torch)")
    preds, refs = mixed
    one, dev = score(preds, refs, return_per_sample=True), score(preds, refs, return_per_sample=True, pixel_device="cpu")
    for a, b in zip(one["per_sample"], dev["per_sample"]):
        assert a.keys() == b.keys() and all(b[k] == pytest.approx(a[k], abs=1e-10) for k in a)


@pytest.mark.slow  # two spawned interpreters importing torch (about 20 s)
def test_pixel_device_with_num_proc_spawns_its_workers(mixed):
    """With a torch device the workers are started by spawn (a forked CUDA context is unusable): the numbers of one
    process on that device."""
    pytest.importorskip("torch", reason="pixel_device needs torch (pip install torch)")
    preds, refs = mixed
    assert score(preds, refs, return_per_sample=True, pixel_device="cpu", num_proc=2) == score(preds, refs, return_per_sample=True,
                                                                                               pixel_device="cpu")


def test_reference_only_leaves_the_main_table_empty_with_reasons(mixed):
    preds, refs = mixed
    out = score([preds[4]], [refs[4]])
    assert out["ssim"] is None and out["num_samples"] == 0 and out["reference"]["ssim"] is not None
    assert out["skipped"]["ssim"] == "no pure-instruction (non-reference) sample"


# ---------------------------------------------------------------- model plumbing (fake metrics)


def test_model_metrics_accumulate_and_reduce_per_table(src, mixed):
    preds, refs = mixed
    fvd, pq = SetMetric(), MeanMetric()
    tone = 0.5 * np.sin(2 * np.pi * 440 * np.arange(8000) / 16000)
    audio_preds = [dict(p) for p in preds]
    audio_preds[0] = make_quality_prediction("w1", preds[0]["edited_video"], encode_wav(tone, 8000))  # resampled to 16 kHz
    audio_preds[2] = make_quality_prediction("c1", rgb_mp4(edit_box(src, BOX, 0), audio=tone[:4000]))  # the video's track
    refs_a = [dict(r, audio={"bytes": encode_wav(tone, 16000), "path": ""}) for r in refs]
    out = core.av_edit_quality(audio_preds, refs_a, metrics=PIXEL + ["fvd", "pq"], models={"fvd": fvd, "pq": pq})
    # the set-level statistic: reduced over each table's own records
    assert out["n_fvd"] == 4 and out["fvd"] is not None and out["reference"]["fvd"] is None  # one reference sample
    assert ["c1", "t1", "w1", "w2"] in fvd.reduced and ["r1"] in fvd.reduced
    # the audio metric: only the two samples with edited audio (a WAV at 8 kHz, the video's AAC track)
    assert out["n_pq"] == 2 and out["num_without_edited_audio"] == 2 and out["reference"]["n_pq"] == 0
    seen = {s.sample_id: s for s in pq.seen}
    assert set(seen) == {"w1", "c1"}
    for s in seen.values():
        assert s.edited.audio.dtype == np.float32 and s.edited.audio.ndim == 1 and s.edited.sample_rate == 16000
        assert s.source.audio is not None and s.region is not None and s.region.dtype == bool
        assert s.edited.frames.shape == s.source.frames.shape == (5, 32, 32, 3)
    assert seen["w1"].edited.audio.shape == (16000,)  # 8000 samples at 8 kHz (1 s) resampled to 16 kHz
    assert abs(seen["c1"].edited.audio.shape[0] - 4000) < 2048  # AAC priming / padding aside
    assert out["pq"] == pytest.approx(np.mean([np.sqrt(np.mean(np.square(seen[s].edited.audio))) for s in ("w1", "c1")]))
    assert out["skipped"].keys() == {k for k in core.OUTPUT_KEYS if out[k] is None}
    assert "fvd" not in out["skipped"] and "pq" not in out["skipped"]


def test_model_metric_given_by_key_or_entry_name(where_ref):
    tv = MeanMetric(keys=("tv_a", "tc"), fn=lambda s: 0.25)
    for name in ("clip", "tv_a"):
        out = core.av_edit_quality([pred_of(where_ref)], [where_ref], metrics=["tv_a", "tc"], models={name: tv})
        assert out["tv_a"] == 0.25 and out["tc"] == 0.25 and out["ssim"] is None and out["skipped"]["ssim"].startswith("not selected")
    with pytest.raises(OptionError, match=r"option 'models': \['clip', 'tv_a'\] name the same model 'clip'"):
        core.av_edit_quality([pred_of(where_ref)], [where_ref], metrics=["tv_a"], models={"clip": tv, "tv_a": tv})
    with pytest.raises(OptionError, match=r"option 'models': unknown model\(s\) \['nope'\]"):
        core.av_edit_quality([pred_of(where_ref)], [where_ref], models={"nope": tv})


def test_unavailable_models_are_skipped_with_the_reason(where_ref, monkeypatch):
    fvd = registry.BY_KEY["fvd"]
    entries = tuple(
        dataclasses.replace(e, factory="helpers.edit_quality:unavailable_factory") if e.name == "fvd"
        else dataclasses.replace(e, factory="perckit.reason_av_edit.quality.models.no_such_module:build") if e.name == "fad"
        else e
        for e in registry.ENTRIES
    )
    monkeypatch.setattr(registry, "ENTRIES", entries)
    out = core.av_edit_quality([pred_of(where_ref)], [where_ref], metrics=PIXEL + ["fvd", "fad"])
    assert out["fvd"] is None and out["skipped"]["fvd"] == "no weights for the fake model: pass models={'fvd': <path>}"
    assert out["fad"] is None and "the fad model module is not available (ModuleNotFoundError" in out["skipped"]["fad"]
    assert registry.BY_KEY["fad"].install in out["skipped"]["fad"] and fvd.name == "fvd"
    assert out["ssim"] == 1.0


def test_an_audio_metric_without_any_edited_audio_says_so(where_ref):
    out = core.av_edit_quality([pred_of(where_ref)], [where_ref], metrics=["pq"], models={"pq": MeanMetric()})
    assert out["pq"] is None and out["n_pq"] == 0 and out["num_without_edited_audio"] == 1
    assert out["skipped"]["pq"].startswith("no pure-instruction (non-reference) sample has edited audio")


def test_every_model_key_is_none_with_a_reason_without_weights(where_ref, tmp_path, monkeypatch):
    """The real factories, with empty caches (nothing is downloaded): every model key is None and its reason says
    what to install or pass."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.chdir(tmp_path)  # ImageBind's own default: ./.checkpoints/imagebind_huge.pth
    out = core.av_edit_quality([pred_of(where_ref)], [where_ref])
    for k in registry.MODEL_KEYS:
        assert out[k] is None, k
        assert any(w in out["skipped"][k] for w in ("install", "models=", "models={", "huggingface-cli download")), (k, out["skipped"][k])
    assert out["ssim"] == 1.0
    for k in registry.MODEL_KEYS:
        if out[k] is None:
            assert out["skipped"][k], k
    assert set(out["skipped"]) == {k for k in core.OUTPUT_KEYS if out[k] is None}


# ---------------------------------------------------------------- ids and options


def test_missing_samples_strict_and_lax(mixed, caplog):
    preds, refs = mixed
    with pytest.raises(PredictionError, match=r"predictions: no prediction for 1 reference sample_id\(s\), e\.g\. \['t1'\].*missing='skip'"):
        score(preds[:3] + preds[4:], refs)
    with caplog.at_level(logging.WARNING, logger="perckit"):
        out = score(preds[:3] + preds[4:], refs, missing="skip")
    assert out["num_missing"] == 1 and out["num_samples"] == 3 and "1 reference sample(s) have no prediction" in caplog.text
    with pytest.raises(PredictionError, match=r"predictions: duplicate sample_id 'w1'"):
        score(preds + preds[:1], refs)
    with pytest.raises(PredictionError, match=r"predictions: sample_id 'zz' is unknown to the references"):
        score(preds + [make_quality_prediction("zz", b"x")], refs)


@pytest.mark.parametrize("options, pattern", [
    ({"strcit": True}, r"av_edit_quality: unknown option\(s\) \['strcit'\]"),
    ({"frame_mismatch": "pad"}, r"option 'frame_mismatch': expected one of \[None, 'truncate', 'resample'\], got 'pad'"),
    ({"resize_edited": "nearest"}, r"option 'resize_edited': expected one of \[None, 'bilinear'\]"),
    ({"missing": "lax"}, r"option 'missing': expected one of \['error', 'skip'\]"),
    ({"addition_region": "ellipse"}, r"option 'addition_region'"),
    ({"psnr_cap": float("inf")}, r"option 'psnr_cap': expected a finite number of dB > 0"),
    ({"psnr_cap": "100"}, r"option 'psnr_cap': expected a number"),
    ({"ssim_win_size": 4}, r"option 'ssim_win_size': expected an odd integer >= 3, got 4"),
    ({"mask_threshold": 256}, r"option 'mask_threshold': expected an int in \[0, 255\]"),
    ({"metrics": ["ssim", "vmaf"]}, r"option 'metrics': expected some of \['ssim'"),
    ({"metrics": "ssim"}, r"option 'metrics': expected a list of strings"),
    ({"models": ["fvd"]}, r"option 'models': expected a dict"),
    ({"batch_size": 0}, r"option 'batch_size': expected an integer >= 1"),
    ({"return_per_sample": 1}, r"option 'return_per_sample': expected True or False"),
    ({"num_proc": 0}, r"option 'num_proc': expected an integer >= 1, got 0"),
    ({"num_proc": "2"}, r"option 'num_proc': expected an integer, got str"),
    ({"pixel_device": 0}, r"option 'pixel_device': expected a string or None, got int"),
    ({"pixel_device": "cpu", "ssim_impl": "skimage"}, r"option 'pixel_device': 'cpu' computes ssim_impl='boxsum'"),
])
def test_bad_options_are_option_errors(where_ref, options, pattern):
    with pytest.raises(OptionError, match=pattern):
        core.av_edit_quality([pred_of(where_ref)], [where_ref], **options)


# ---------------------------------------------------------------- evaluate, on the sample release's builder rows


@pytest.fixture(scope="module")
def rows(reason_av_edit_release, tmp_path_factory):
    ds = build_split("reason_av_edit", "default", reason_av_edit_release.root, tmp_path_factory.mktemp("q_cache"))
    return [to_quality_reference(r) for r in ds]


@pytest.fixture(scope="module")
def metric():
    import evaluate

    return evaluate.load(str(REPO / "metrics" / "av_edit_quality"))


def test_builder_rows_through_evaluate_score_perfect(metric, rows):
    preds = [make_quality_prediction(r["sample_id"], r["video"]) for r in rows]
    out = metric.compute(predictions=preds, references=rows, metrics=PIXEL)
    assert out["num_samples"] == 13 and out["num_reference_samples"] == 3
    for t in [out, out["reference"], *out["per_category"].values(), *out["per_sub_track"].values()]:
        assert (t["ssim"], t["psnr"], t["bg_psnr"], t["bg_ssim"]) == (1.0, 100.0, 100.0, 1.0)
    assert out["num_without_edited_audio"] == 0  # the sample release's videos carry an AAC track
    c4 = next(r for r in rows if r["sub_track"].startswith("C4"))
    assert c4["ref_image"]["bytes"][:8] == b"\x89PNG\r\n\x1a\n"  # the decoded PIL image stored as PNG


def test_a_model_metric_instance_through_evaluate(metric, mixed):
    preds, refs = mixed
    fvd = SetMetric()
    out = metric.compute(predictions=preds, references=refs, metrics=["fvd"], models={"fvd": fvd})
    assert out["fvd"] == core.av_edit_quality(preds, refs, metrics=["fvd"], models={"fvd": SetMetric()})["fvd"] > 0
    assert out["n_fvd"] == 4 and out["skipped"]["ssim"].startswith("not selected")


def test_add_batch_in_any_batch_sizes(metric, mixed):
    preds, refs = mixed
    whole = metric.compute(predictions=preds, references=refs, metrics=PIXEL)
    for sizes in (batch_sizes(len(refs), 2), [1] * len(refs)):
        assert compute_in_batches(metric, preds, refs, sizes, metrics=PIXEL) == whole
    assert metric.compute(predictions=preds, references=refs, metrics=PIXEL, num_proc=2) == whole


def test_distributed_matches_single_process(metric, mixed, tmp_path):
    preds, refs = mixed

    def media(x):
        return {"bytes": None, "path": str(x)}

    for p, r in zip(preds, refs):  # JSON inputs: the media as files
        (tmp_path / f"{r['sample_id']}_edit.mp4").write_bytes(p["edited_video"]["bytes"])
        (tmp_path / f"{r['sample_id']}_src.mp4").write_bytes(r["video"]["bytes"])
        (tmp_path / f"{r['sample_id']}_mask.mp4").write_bytes(r["mask_video"]["bytes"] or b"")
    preds = [make_quality_prediction(r["sample_id"], media(tmp_path / f"{r['sample_id']}_edit.mp4")) for r in refs]
    refs = [dict(r, video=media(tmp_path / f"{r['sample_id']}_src.mp4"),
                 mask_video=media(tmp_path / f"{r['sample_id']}_mask.mp4") if r["mask_video"]["bytes"] else r["mask_video"]) for r in refs]
    single = metric.compute(predictions=preds, references=refs, metrics=PIXEL)
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"predictions": preds, "references": refs, "options": {"metrics": PIXEL}}))
    assert run_distributed("av_edit_quality", inputs, 2, tmp_path, "av_edit_quality_2", batch=2) == json.loads(json.dumps(single))


# ---------------------------------------------------------------- counts and model settings


def test_n_counts_only_the_records_that_have_a_value(where_ref):
    """n_<key> counts the samples that entered the key: a per-sample record whose value is None (a single frame has
    no temporal consistency) and a set-level record without rows (a clip too short for I3D) are not counted."""
    refs = [dict(where_ref, sample_id=f"w{i}") for i in range(3)]
    preds = [pred_of(r) for r in refs]

    class PerSample(MeanMetric):
        def measure(self, sample):
            return {"tv_a": None if sample.sample_id == "w0" else 2.0, "tc": None if sample.sample_id == "w0" else 3.0}

        def reduce(self, records):
            return {k: fmean(r[k] for r in records if r[k] is not None) for k in self.keys}

    class Rows(SetMetric):
        def measure(self, sample):
            rows = np.zeros((0, 2)) if sample.sample_id == "w2" else np.full((1, 2), float(sample.sample_id[1:]))
            return {"edited": rows, "source": rows + 1, "id": sample.sample_id}

        def reduce(self, records):
            return {"fvd": float(len(records))}

    out = core.av_edit_quality(preds, refs, metrics=["tv_a", "tc", "fvd"],
                               models={"clip": PerSample(keys=("tv_a", "tc")), "fvd": Rows()})
    assert (out["tv_a"], out["n_tv_a"], out["tc"], out["n_tc"]) == (2.0, 2, 3.0, 2)
    assert (out["fvd"], out["n_fvd"]) == (3.0, 2)
    assert out["per_sub_track"]["W1_same_class_pair"]["n_tv_a"] == 2


def test_model_options_reach_every_factory_and_unknown_settings_are_refused(where_ref, monkeypatch):
    seen = {}

    def build(entry, weights, options):
        seen[entry.name] = dict(options.extra)
        if entry.name != "fvd":
            raise registry.ModelUnavailable("absent")
        return MeanMetric(keys=("fvd",), fn=lambda s: 1.0)

    monkeypatch.setattr(registry.ModelEntry, "build", build)
    out = core.av_edit_quality([pred_of(where_ref)], [where_ref], model_options={"fvd_sampling": "uniform"})
    assert out["fvd"] == 1.0 and out["skipped"]["tv_a"] == "absent"
    assert seen == {e.name: {"fvd_sampling": "uniform"} for e in registry.ENTRIES if e.unavailable is None}
    with pytest.raises(OptionError, match=r"option 'model_options': unknown setting\(s\) \['fvd_frames'\]; expected some of \['clip_frame_stride'"):
        core.av_edit_quality([pred_of(where_ref)], [where_ref], model_options={"fvd_frames": 8})
    with pytest.raises(OptionError, match=r"option 'model_options': expected a dict"):
        core.av_edit_quality([pred_of(where_ref)], [where_ref], model_options=[("fvd_sampling", "uniform")])


def test_the_real_fvd_factory_reads_its_model_options(tmp_path):
    """fvd_sampling given in model_options reaches FVDMetric (a bad value is the factory's OptionError)."""
    torch = pytest.importorskip("torch", reason="torch (the 'quality' extra) is not installed")
    from perckit.reason_av_edit.quality.models import i3d

    class Detector(torch.nn.Module):
        def forward(self, x, rescale: bool = True, resize: bool = True, return_features: bool = True):
            return x.float().mean(dim=(2, 3, 4))

    m = i3d.build_fvd(Detector(), registry.ModelOptions(extra={"fvd_sampling": "uniform", "fvd_num_frames": 4}))
    assert (m.sampling, m.num_frames) == ("uniform", 4)
