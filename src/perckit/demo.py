"""``make demo``: the main job on the embedded sample releases.

For every benchmark: write its synthetic sample release, convert every config to the Hub layout
(``build/demo/export/<benchmark>``), load the export back with no script, score ground truth as
prediction and a perturbed prediction with every metric, and draw pictures. The report is
``build/demo/report.html`` (its data: ``report.json``): a summary and contents, then one section per
benchmark (what the perturbation did, the scores with a note on each number that looks wrong but is right, the
figures, each with one caption and a legend of its colours).

The log on stdout is one whole sentence a line (what each step did, with a headline number of each metric), the last
naming where the report and the exports are; no progress bar or print of another library shows (:func:`main`).
"""

from __future__ import annotations

import functools
import html
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .draw import figures, previews, report
from . import rle
from .io.paths import write_atomic
from .hf import benchmark as benchmarks
from .hf.api import load_metric
from .hf.cli import progress_bars

Log = Callable[[str], None]


def _scalars(d: dict) -> dict:
    return {k: v for k, v in d.items() if not isinstance(v, (dict, list))}


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: a list inside a sentence of the log."""
    return " and ".join(filter(None, (", ".join(items[:-1]), items[-1])))


def _perturbed(results: dict, keys: dict[str, str]) -> str:
    """``the perturbed prediction scores <metric> <key> <value> and ...``: a headline number of each metric named."""
    return "the perturbed prediction scores " + _and([f"{m} {k} {results[m]['perturbed'][k]:.3f}" for m, k in keys.items()])


#: The file that marks a folder as the demo's own output: only such a folder is ever emptied by the demo.
MARKER = ".perckit_demo"


def claim_output(out: Path) -> None:
    """Make ``out`` the demo's folder, or refuse: an existing folder that holds anything but a previous demo run
    (no :data:`MARKER`, and names the demo does not write) is the user's, and the demo deletes and rewrites
    sub-folders of its output."""
    from .errors import OptionError

    if out.exists() and not out.is_dir():
        raise OptionError(f"demo --output {str(out)!r}: expected a folder, got a file")
    # A demo output of an earlier perckit (before the marker): its report and only names the demo writes.
    own = {"export", "cache", "figures", "report.json", "report.md", "report.html", "r4d_bench", "syn4d", "refcoco_m", "m4seg", "reason_av_edit"}
    names = {p.name for p in out.iterdir()} if out.is_dir() else set()
    earlier_demo = "report.json" in names and names <= own
    if names and not (out / MARKER).is_file() and not earlier_demo:
        raise OptionError(
            f"demo --output {str(out)!r}: expected an empty folder or a previous demo output (with {MARKER}), got a "
            "folder with other files; the demo replaces what it writes there, so choose a new folder"
        )
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / MARKER, "written by `perckit demo`; its sub-folders are replaced on every run\n")


def _fresh(path: Path) -> Path:
    """``path`` emptied: only ever a sub-folder of an output that :func:`claim_output` has made the demo's."""
    if path.exists():
        shutil.rmtree(path)
    return path


def convert_all(benchmark: str, label: str, release: Path, out: Path, log: Log) -> tuple[Path, dict]:
    """Convert every config of ``benchmark`` into ``out/export/<benchmark>``; load each back with no script."""

    from .hf.entrypoints import builder_class
    from .export import convert, load_export

    export_dir = _fresh(out / "export" / benchmark)
    cache = _fresh(out / "cache" / benchmark)  # script caches are keyed on the data_dir path, not its content
    t0 = time.perf_counter()
    splits = {}
    cls = builder_class(benchmark)
    for config in (c.name for c in cls.BUILDER_CONFIGS):
        exported = convert(benchmark, release, config, export_dir, cache_dir=cache, progress=False, log=lambda m: None)
        split = exported.splits[-1].name  # test (or validation); M4Seg's demo converts its test split
        splits[config] = load_export(export_dir, config, split=split, cache_dir=cache / "export")
    log(f"{label}: converted " + _and([f"{k} ({v.num_rows} rows)" for k, v in splits.items()])
        + f" to {export_dir} in {time.perf_counter() - t0:.1f} s, then loaded them back with no script.")
    return export_dir, splits


#: What the sample releases' pictures show under perckit's colours (a legend entry without a colour).
PICTURES = {"r4d_bench": "under the masks: a synthetic frame (random pixels; the objects are flat grey shapes)",
            "refcoco_m": "under the masks: a synthetic image (random pixels; each object's pixels dimmed to one tone)",
            "reason_av_edit": "under the mask: a synthetic video frame (the coloured squares: the target and a distractor)"}


def preview_figure(benchmark: str, splits: dict, out: Path) -> dict | None:
    """The ``preview`` picture of the first row of the default config's export (what the Hub's Dataset Viewer shows
    in that row), saved as ``figures/<benchmark>_preview.png`` (``.jpg`` for a JPEG preview), as a report figure with
    its previewer's legend; None when the export has no preview column."""
    from .draw.previews import PREVIEW_COLUMN
    from .hf.entrypoints import builder_class

    cls = builder_class(benchmark)
    config = cls.DEFAULT_CONFIG_NAME
    ds = splits[config]
    if PREVIEW_COLUMN not in ds.features or ds.num_rows == 0:
        return None
    first = ds.with_format("arrow")[0:1]
    cell = first.column(PREVIEW_COLUMN)[0].as_py()
    path = out / "figures" / f"{benchmark}_preview.{'jpg' if cell['bytes'][:3] == bytes((0xFF, 0xD8, 0xFF)) else 'png'}"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, cell["bytes"])
    builder = cls(config_name=config, data_dir=str(out / benchmark / "release"), cache_dir=str(out / "cache" / benchmark))
    previewer = benchmarks.get(benchmark).preview(builder, config)
    legend = [*previewer.legend(first.to_pylist()[0]), *([(PICTURES[benchmark], None)] if benchmark in PICTURES else [])]
    caption = f"The export's preview column, first row of {config!r}: what the Hub's Dataset Viewer shows (drawn by perckit convert)."
    return {"path": str(path), "caption": caption, "legend": legend}


def build_sample(benchmark: str, label: str, out: Path, log: Log, describe: Callable[[Any], str]) -> tuple[Path, Any, dict]:
    """Write ``benchmark``'s sample release under ``out/<benchmark>/release``, log what it holds (``describe(summary)``)
    and convert every config: ``(the benchmark's demo folder, the writer's summary, {config: split})``."""
    from .samples import write_release

    base = _fresh(out / benchmark)
    summary = write_release(benchmark, base / "release")
    log(f"{label}: wrote the sample release ({describe(summary)}).")
    _, splits = convert_all(benchmark, label, base / "release", out, log)
    return base, summary, splits


def _scored(metric: Any, gt: list, perturbed: list, refs: list, **kw: Any) -> dict:
    """``{"gt_as_prediction": ..., "perturbed": ...}``: the scalar results of ``metric`` on both prediction sets."""
    return {"gt_as_prediction": _scalars(metric.compute(predictions=gt, references=refs, **kw)),
            "perturbed": _scalars(metric.compute(predictions=perturbed, references=refs, **kw))}


def _report(benchmark: str, splits: dict, results: dict, out: Path, name: str, figure: Any, caption: str, legend: Any,
            perturbed: str, notes: dict | None = None, **more: Any) -> dict:
    """The report of one benchmark: ``figure`` is saved (enlarged, nothing written on it) as ``figures/<name>.png``, after
    the export's preview; ``perturbed`` says what the perturbed prediction is; ``notes``: ``{metric: {key: why}}``."""
    fig = figures.save(figures.enlarged(figure), out / "figures" / f"{name}.png")
    shown = [preview_figure(benchmark, splits, out), {"path": str(fig), "caption": caption, "legend": list(legend)}]
    return {"benchmark": benchmarks.get(benchmark).label, "id": benchmark, "rows": {k: v.num_rows for k, v in splits.items()},
            "perturbed": perturbed, "metrics": results, "notes": notes or {}, "figures": [f for f in shown if f], **more}


def _check_perfect(benchmark: str, results: dict, keys: dict[str, tuple]) -> None:
    bad = [f"{m}.{k}" for m, ks in keys.items() for k in ks if results[m]["gt_as_prediction"].get(k) != 1.0]
    if bad:
        raise RuntimeError(f"{benchmark}: ground truth as prediction did not score 1.0 on {bad}")


# ---------------------------------------------------------------- R4D-Bench


def perturb_r4d(rows: list[dict], seed: int = 0) -> tuple[list[dict], list[dict]]:
    """A deterministic imperfect model: masks shifted 2 px right, 1 frame in 4 dropped, 1 query in 5 given an extra track id."""
    rng = np.random.default_rng(seed)
    masks, tracks = [], []
    for i, r in enumerate(rows):
        frames = [{"frame_id": f["frame_id"], "mask": rle.encode(np.roll(rle.decode(f["mask"]), 2, axis=1))}
                  for f in r["frames"] if rng.random() >= 0.25]
        masks.append({"query_id": r["query_id"], "frames": frames})
        tracks.append({"query_id": r["query_id"], "target_track_ids": list(r["target_track_ids"]) + (["99"] if i % 5 == 0 else [])})
    return masks, tracks


def run_r4d(out: Path, log: Log) -> dict:
    from .r4d_bench import features as feats

    base, fx, splits = build_sample("r4d_bench", "R4D-Bench", out, log, lambda fx: f"{len(fx.files)} files, {len(fx.query_ids)} queries")
    rows = splits["all_queries"].to_list()
    refs = [feats.to_metric_reference(r) for r in rows]
    track_refs = [feats.to_track_reference(r) for r in rows]
    pm, pt = perturb_r4d(rows)
    results = {
        "mask_temporal": _scored(load_metric("mask_temporal"), [feats.to_metric_prediction(r) for r in rows], pm, refs),
        "track_id": _scored(load_metric("track_id"), [feats.to_track_prediction(r) for r in rows], pt, track_refs),
    }
    _check_perfect("R4D-Bench", results, {"mask_temporal": ("miou", "viou", "overall_iou"), "track_id": ("f1", "exact_match")})
    log(f"R4D-Bench: ground truth as prediction scores 1.0 on every metric; {_perturbed(results, {'mask_temporal': 'miou', 'track_id': 'f1'})}.")
    # pictures: the first query with two frames, its first three frames as perckit report draws them
    row = next(r for r in rows if len(r["frames"]) >= 2 and not r["is_negative"])
    pred = next(p for p in pm if p["query_id"] == row["query_id"])
    drawn = report.PAGES["mask_temporal"].draw(row, row, pred, row, report.Frames(splits["frames"]))
    caption = f"Query {row['query_id']} ({row['text_en']!r}), left to right: " + "; ".join(c for _, c in drawn) + "."
    notes = {"mask_temporal": {"num_existence_frames_without_mask": "a count of the reference, not an error: like the real "
                                                                    "release, the sample has an existence frame without a mask."},
             "track_id": {"micro_recall": "1.0 when perturbed: an extra id loses no true one (recall is lower: a negative "
                                          "query given one scores 0)."}}
    return _report("r4d_bench", splits, results, out, "r4d_bench_overlay", figures.side_by_side([t for t, _ in drawn]), caption,
                   [*figures.MASK_LEGEND, (PICTURES["r4d_bench"], None)], PERTURBED["r4d_bench"], notes)


# ---------------------------------------------------------------- Syn4D


def run_syn4d(out: Path, log: Log) -> dict:
    from .samples.syn4d_predictions import write_predictions
    from .syn4d import evaluate as runner
    from .syn4d.layout import prediction_path
    from .syn4d.read import load_prediction_rows, read_npz
    from .syn4d import metric as core
    from .syn4d.features import to_metric_reference, to_numpy_row

    base, fx, splits = build_sample("syn4d", "Syn4D", out, log, lambda fx: f"{len(fx.files)} files, {len(fx.sequence_ids)} sequences")
    rows = splits["challenge"].to_list()
    ids = [r["sequence_id"] for r in rows]
    gt_dir = write_predictions(fx, base / "predictions_gt")
    noisy_dir = write_predictions(fx, base / "predictions_noisy", noise=0.05)
    metrics = {t: load_metric("syn4d", t) for t in core.TASKS}
    keys = {"tracking": ("score", "apd", "dynamic_apd", "epe"), "depth": ("abs_rel", "delta1", "rmse"),
            "pose": ("ate_rmse", "rpe_translation_rmse", "rpe_rotation_mean_deg")}
    results: dict[str, Any] = {}
    for task in core.TASKS:
        refs = [to_metric_reference(r, task) for r in rows]
        overall = {name: metrics[task].compute(predictions=load_prediction_rows(pdir, ids), references=refs)["overall"]
                   for name, pdir in (("gt_as_prediction", gt_dir), ("perturbed", noisy_dir))}
        results[f"syn4d ({task})"] = {name: {k: o[k] for k in (*keys[task], "num_sequences")} for name, o in overall.items()}
    _check_perfect("Syn4D", results, {"syn4d (tracking)": ("score",), "syn4d (depth)": ("delta1",)})
    summary = runner.evaluate_release(noisy_dir, base / "release")
    if any(summary["tasks"][t]["overall"][k] != results[f"syn4d ({t})"]["perturbed"][k] for t in core.TASKS for k in keys[t]):
        raise RuntimeError("Syn4D: the file runner and the evaluate module disagree")
    write_atomic(base / "summary_perturbed.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    log("Syn4D: ground-truth NPZ predictions score tracking 1.0 and depth delta1 1.0; "
        + _perturbed(results, {"syn4d (tracking)": "score", "syn4d (depth)": "abs_rel"}) + "; the official-format file runner agrees.")
    row = to_numpy_row(rows[0])
    pred = read_npz(prediction_path(noisy_dir, row["sequence_id"]))["tracking_xyz"].astype(np.float64) * 2.0
    caption = f"Sequence {row['sequence_id']}: its first 24 query tracks in frame 0 (the NPZ's half-scale tracks drawn at x2)."
    plot = figures.tracks_plot(row["tracks_ref0"], pred, row["intrinsics"], row["image_size"], valid=row["visibility"])
    pose, depth = (results[f"syn4d ({t})"][c][k] for t, c, k in (("pose", "gt_as_prediction", "rpe_rotation_mean_deg"),
                                                                 ("depth", "perturbed", "delta1")))
    notes = {"syn4d (pose)": {"rpe_rotation_mean_deg": f"{pose:.4f} degrees, not 0: the predictions store poses in float32, "
                              "arccos near 1 magnifies the rounding (the noise moves positions only)."},
             "syn4d (depth)": {"delta1": f"{depth:.6f} when perturbed: 5% noise leaves almost every pixel within the 1.25 ratio."},
             "syn4d (tracking)": {"score": "score, apd and dynamic_apd agree to four decimals: static and dynamic points get the same noise."}}
    return _report("syn4d", splits, results, out, "syn4d_tracks", plot, caption, figures.TRACKS_LEGEND, PERTURBED["syn4d"], notes)


# ---------------------------------------------------------------- RefCOCO-M


def perturb_masks(masks: list[dict], seed: int = 0) -> list[dict]:
    """Each mask shifted by 0-2 px right and down (deterministic), one in ten replaced by an empty mask."""
    rng = np.random.default_rng(seed)
    out = []
    for i, m in enumerate(masks):
        dense = rle.decode(m)
        shifted = np.zeros_like(dense) if i % 10 == 9 else np.roll(np.roll(dense, int(rng.integers(0, 3)), axis=1),
                                                                   int(rng.integers(0, 3)), axis=0)
        out.append(rle.encode(shifted))
    return out


def run_refcoco_m(out: Path, log: Log) -> dict:
    from .refcoco_m import features as feats

    base, _, splits = build_sample("refcoco_m", "RefCOCO-M", out, log, lambda fx: "Parquet shards with embedded images and COCO RLE masks")
    rows = splits["expressions"].to_list()
    refs = [feats.to_metric_reference(r) for r in rows]
    noisy_masks = perturb_masks([r["mask"] for r in rows])
    noisy = [{"expression_id": r["expression_id"], "mask": m} for r, m in zip(rows, noisy_masks)]
    gt = [feats.to_metric_prediction(r) for r in rows]
    results = {"refer_iou": _scored(load_metric("refer_iou"), gt, noisy, refs)}
    _check_perfect("RefCOCO-M", results, {"refer_iou": ("miou", "ciou", "precision@0.9")})
    log(f"RefCOCO-M: ground truth as prediction scores mIoU = cIoU = 1.0; {_perturbed(results, {'refer_iou': 'miou'})}.")
    tiles = [report.overlay(r["image"], r["mask"], m) for r, m in list(zip(rows, noisy_masks))[:3]]
    caption = "The first three expressions, left to right: " + "; ".join(f"{r['expression_id']} {r['sentence']!r}" for r in rows[:3])
    return _report("refcoco_m", splits, results, out, "refcoco_m_overlay", figures.side_by_side(tiles), caption,
                   [*figures.MASK_LEGEND, (PICTURES["refcoco_m"], None)], PERTURBED["refcoco_m"])


# ---------------------------------------------------------------- ReasonAVEdit-Bench


def run_reason_av_edit(out: Path, log: Log) -> dict:
    from .reason_av_edit import features as feats
    from .reason_av_edit.metric import decode_wav
    from .reason_av_edit.read.predictions import gt_as_predictions

    base, fx, splits = build_sample("reason_av_edit", "ReasonAVEdit-Bench", out, log,
                                    lambda fx: f"{len(fx.sample_ids)} samples in 16 sub-tracks, media as 7 tars under archives/")
    ds = splits["default"]
    rows = ds.remove_columns(["video", "audio", "reason_visual", "reason_visual_mask", "ref_image"]).to_list()
    refs = [feats.to_metric_reference(r) for r in rows]
    noisy = []
    for i, r in enumerate(refs):
        p = feats.gt_as_prediction(r)
        if r["edit_window_s"]:
            a, b = r["edit_window_s"]
            p["edit_window_s"] = [a + 0.08 * (i % 3), b + 0.08 * (i % 3)]  # shifted by 0, 2 or 4 frames
        if i % 2:
            p["reason_audio"] = dict(feats.NOT_PROVIDED_MEDIA)
        if i % 4 == 1 and r["anchor_mask"]["size"]:
            p["anchor_mask"] = rle.empty(*r["anchor_mask"]["size"])
        noisy.append(p)
    results = {"av_reasoning": _scored(load_metric("av_reasoning"), gt_as_predictions(rows), noisy, refs)}
    _check_perfect("ReasonAVEdit-Bench", results, {"av_reasoning": ("visual_iou", "audio_tiou", "audio_tf_iou", "video_tiou", "av_support_tiou")})
    log("ReasonAVEdit-Bench: ground truth as prediction scores every IoU 1.0 and A/V offset 0; "
        + _perturbed(results, {"av_reasoning": "visual_iou"}) + ".")
    shifted = {p["sample_id"]: p["edit_window_s"] for p, ref in zip(noisy, refs) if ref["edit_window_s"] and p["edit_window_s"] != ref["edit_window_s"]}
    row = next((r for r in rows if r["sample_id"] in shifted and r["category"] == "when_only"), None) or next(r for r in rows if r["sample_id"] in shifted)
    pred_window = shifted[row["sample_id"]]
    wave = decode_wav(row["reason_audio"]["bytes"], where=row["sample_id"])
    caption = (f"Sample {row['sample_id']} ({row['sub_track']}): its reasoning audio over time, the ground-truth edit window "
               f"{row['edit_window_s'][0]:.2f}-{row['edit_window_s'][1]:.2f} s and the perturbed one, shifted by "
               f"{pred_window[0] - row['edit_window_s'][0]:+.2f} s (cut at the end of the audio).")
    plot = figures.waveform_plot(wave, 16000, tuple(row["edit_window_s"]), tuple(pred_window))
    null = "None: the null sample (H3) is which_only, not among the categories the top-level {} keys count."
    notes = {"av_reasoning": {
        "visual_null_acc": null.format("visual"), "video_null_acc": null.format("video"),
        "bg_leak": "0 when perturbed: lower is better, and an emptied mask leaks nothing.",
        "audio_tf_iou": "1.0 when perturbed, on fewer samples (n): it needs reason_audio, withdrawn from every other sample.",
        "audio_null_acc": "0 when perturbed: the audio-null sample (C4) lost its reason_audio and kept a shifted window.",
        "video_tiou": "1.0 when perturbed (as video_tiou_hull): the video keys read mask_video first, which the perturbation keeps."}}
    return _report("reason_av_edit", splits, results, out, "reason_av_edit_waveform", plot, caption, figures.WINDOW_LEGEND,
                   PERTURBED["reason_av_edit"], notes, tables=edit_quality_tables(ds, log))


def edit_quality_predictions(refs: list[dict]) -> dict[str, list[dict]]:
    """Three sets of edited clips for ``av_edit_quality``: the source itself (the very same bytes), a region-only
    edit (the target region inverted on its frames) and a background edit (an 8 x 8 corner block blacked out outside
    the region), both written RGB-lossless so that only the edit differs from the decoded source."""
    from .reason_av_edit.quality import decode as qd
    from .reason_av_edit.quality.predictions import make_quality_prediction
    from .samples.reason_av_edit import encode_rgb_mp4

    out: dict[str, list[dict]] = {"source as the edit": [], "region-only edit": [], "background edit": []}
    for r in refs:
        sid = r["sample_id"]
        frames, fps = qd.decode_video(r["video"]["bytes"], sid, f"demo {sid!r}")
        region = qd.target_region(r["mask_video"], frames.shape[:3], 127, qd.is_addition(r["sub_track"]), f"demo {sid!r}")
        region = np.zeros(frames.shape[:3], dtype=bool) if region is None else region
        inside = np.where(region[..., None], 255 - frames, frames)
        outside = frames.copy()
        outside[:, :8, :8][~region[:, :8, :8]] = 0  # the corner block, outside the region
        out["source as the edit"].append(make_quality_prediction(sid, r["video"], r["audio"]))
        out["region-only edit"].append(make_quality_prediction(sid, encode_rgb_mp4(inside, int(round(fps))), r["audio"]))
        out["background edit"].append(make_quality_prediction(sid, encode_rgb_mp4(outside, int(round(fps))), r["audio"]))
    return out


def edit_quality_tables(ds: Any, log: Log) -> list[dict]:
    """The ``av_edit_quality`` tables of the report: the main ranking (pure-instruction samples) for the three sets of
    :func:`edit_quality_predictions`, and the model metrics skipped (:func:`skipped_models`)."""
    from .reason_av_edit.quality.references import to_quality_reference

    refs = [to_quality_reference(r) for r in ds]
    metric = load_metric("av_edit_quality")
    scored = {name: metric.compute(predictions=preds, references=refs) for name, preds in edit_quality_predictions(refs).items()}
    same, inside, outside = scored.values()
    if (same["ssim"], same["psnr"], same["bg_psnr"], same["bg_ssim"]) != (1.0, 100.0, 100.0, 1.0):
        raise RuntimeError(f"ReasonAVEdit-Bench: the source as the edit did not score perfect: {_scalars(same)}")
    if (inside["bg_psnr"], inside["bg_ssim"]) != (100.0, 1.0) or inside["psnr"] >= 100.0:
        raise RuntimeError("ReasonAVEdit-Bench: a region-only edit did not keep bg_psnr / bg_ssim perfect")
    if outside["bg_psnr"] >= 100.0 or outside["bg_ssim"] >= 1.0:
        raise RuntimeError("ReasonAVEdit-Bench: a background edit was not caught by bg_psnr / bg_ssim")
    log("ReasonAVEdit-Bench: av_edit_quality scores the source as the edit perfect, a region-only edit keeps bg_* perfect "
        "and a background edit lowers bg_*; the model metrics without weights are skipped (the report says what each needs).")
    keys = [k for k in same if not isinstance(same[k], (dict, list)) and not k.startswith("n_") and k not in same["skipped"]]
    notes = {"psnr": "100 is the cap of an identical frame; psnr averages the frames, so an edit of a few frames stays high."}
    return [{"title": "av_edit_quality", "columns": ["key", *scored], "rows": [[k] + [v[k] for v in scored.values()] for k in keys],
             "notes": notes}] + [skipped_models(same["skipped"])] * bool(same["skipped"])


def skipped_models(skipped: dict[str, str]) -> dict:
    """The model metrics ``av_edit_quality`` skipped, one row per model: what is missing (the lead of the skip reason, see
    :class:`~perckit.reason_av_edit.quality.models.ModelUnavailable`) and what supplies it (an install command, a download
    a reason quotes, ``--model``)."""
    from .reason_av_edit.quality.models import ENTRIES

    rows = []
    for e in (e for e in ENTRIES if any(k in skipped for k in e.keys)):
        reason = next(skipped[k] for k in e.keys if k in skipped)
        missing = re.split(r"; |: | \((?=[A-Z])", reason)[0]
        download = re.findall(r"`([^`]+)`", reason)
        if re.search(r"not installed|cannot be imported|not available|^this \w+ has no", missing):  # a library, then weights
            fix = f"`{e.install.split(' (')[0]}`, then `--model {e.name}=PATH`"
        else:
            fix = " or ".join(f"`{c}`" for c in download + [f"--model {e.name}={'FOLDER' if download else 'PATH'}"])
        keys = [k for k in e.keys if k in skipped]
        rows.append([e.name + ("" if keys == [e.name] else f" ({', '.join(keys)})"), missing, fix])
    return {"title": "av_edit_quality: skipped model metrics", "columns": ["model (keys)", "missing here", "to score it"],
            "rows": rows, "text": True, "about": "Supply what is missing, then add the options below to `perckit evaluate "
            "av_edit_quality`; which file PATH is, and where to get it: the metric card's Model-based metrics table."}


# ---------------------------------------------------------------- M4Seg


def run_m4seg(out: Path, log: Log) -> dict:
    from .m4seg import features as feats
    from .m4seg.metric.options import SEVEN
    from .m4seg.metric import text

    base, _, splits = build_sample("m4seg", "M4Seg", out, log, lambda fx: "native annotations/*.json.gz and Parquet shards, train and test")
    rows = splits["default"].to_list()  # the test split
    refs = [feats.to_metric_reference(r) for r in rows]
    gt_preds = [feats.gt_as_prediction(r) for r in rows]
    noisy = []
    for i, p in enumerate(gt_preds):
        q = {**p, "groundings": [dict(g) for g in p["groundings"]]}
        for j, g in enumerate(q["groundings"]):
            if (i + j) % 3 == 0:
                g["segmentation"] = rle.encode(np.roll(rle.decode(g["segmentation"]), 2, axis=1))
            if (i + j) % 5 == 4:
                g["name"] = "object"
        noisy.append(q)
    results = {"m4seg": _scored(load_metric("m4seg"), gt_preds, noisy, refs, skip_unavailable=True)}
    checked = [k for k in SEVEN if results["m4seg"]["gt_as_prediction"][k] is not None]  # skipped: no encoder or Java
    _check_perfect("M4Seg", results, {"m4seg": tuple(checked)})
    skipped = [k for k in SEVEN if k not in checked]
    needs = [f"the semantic metrics need {text.EXTRA_TEXT}"] * bool(set(skipped) - {"meteor"}) + \
        [f"METEOR needs {text.EXTRA_METEOR} and a Java runtime"] * ("meteor" in skipped)
    log(f"M4Seg: ground truth as prediction scores 1.0 on {'all' if not skipped else f'{len(checked)} of the'} seven metrics "
        f"({_and(checked)})" + (f", {_and(skipped)} skipped ({'; '.join(needs)})" if skipped else "")
        + f"; {_perturbed(results, {'m4seg': 'miou'})}.")
    row = next(r for r in rows if len(r["images"]) >= 2 and r["groundings"])
    pred = next(p for p in noisy if p["example_id"] == row["example_id"])
    tiles = [t for t, _ in report.PAGES["m4seg"].draw(row, row, pred, row, None)]  # as perckit report draws them
    caption = f"Example {row['example_id']} ({row['q']!r}): the groundings of each of its images, left to right."
    notes = {"m4seg": dict.fromkeys(("ss", "meteor"), "1.0 when perturbed: it compares the answer text, which is unchanged.")}
    return _report("m4seg", splits, results, out, "m4seg_overlay", figures.side_by_side(tiles), caption,
                   [*figures.MASK_LEGEND, previews.NO_IMAGE], PERTURBED["m4seg"], notes, rows={"default (test)": splits["default"].num_rows})


# ---------------------------------------------------------------- report

#: What each benchmark's perturbed prediction is (the report says it before the scores).
PERTURBED = {
    "r4d_bench": "the ground-truth masks shifted 2 px right with one frame in four dropped (mask_temporal); one query in five "
                 "given an extra, wrong track id '99' (track_id).",
    "syn4d": "the ground truth with Gaussian noise: 0.05 m on the 3D tracks, 5% on the depth, 0.025 m on the camera positions. "
             "Both predictions are written as a model's NPZ files may be (tracks at half scale, depth at 0.37x, poses relative "
             "to the first frame at 2x), which the metrics' alignment undoes.",
    "refcoco_m": "each ground-truth mask shifted 0-2 px right and down, one in ten replaced by an empty mask.",
    "m4seg": "every third grounding mask shifted 2 px right, every fifth grounding renamed 'object'; the answer texts unchanged.",
    "reason_av_edit": "(av_reasoning) the edit windows shifted by 0, 0.08 or 0.16 s in turn, every other sample's reason_audio "
                      "withdrawn ('not provided'), one anchor mask in four emptied. av_edit_quality scores three sets of edited "
                      "clips on its main ranking (the pure-instruction samples): each source as its own edit, the target region "
                      "inverted (a region-only edit), an 8 x 8 corner block blacked out outside it (a background edit).",
}
#: The report's opening paragraphs (``code`` and **bold** as in Markdown).
SUMMARY = (
    "**What was built.** perckit wrote each benchmark's sample release (a small synthetic stand-in in the official layout, "
    "not the real data) in `<benchmark>/release/`, converted every config to the Hugging Face Hub layout (Parquet, a card, "
    "a `preview` picture column) in `export/<benchmark>/`, and loaded each export back with plain `datasets`, no script.",
    "**What was scored.** Every metric, twice. **Ground truth as prediction**: the references as the predictions, which a "
    "correct metric scores perfect (else the demo stops). **Perturbed**: the ground truth damaged by a fixed, seeded recipe "
    "each section states (masks shifted, frames dropped, noise), which a metric that notices scores worse.",
    "**Reading the tables.** Errors (`epe`, `abs_rel`, `*rmse`, `*_deg`, `bg_leak`, `*_offset_*`) are lower-is-better; `num_*` "
    "are counts, `n` the samples a key was measured on (GT / perturbed); None: no sample enters the key; a note number marks "
    "a value that looks wrong but is right. Pictures: ground truth blue, prediction orange, overlap bluish green (Okabe-Ito).",
)


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def _metric_table(metric: str, res: dict, notes: dict) -> dict:
    """One metric's scores as a report table: a row per key, its ``n_<key>`` count in the column ``n``."""
    gt, pert = res["gt_as_prediction"], res["perturbed"]
    n = {k: str(gt[f"n_{k}"]) + ("" if gt[f"n_{k}"] == pert[f"n_{k}"] else f"\u00a0/\u00a0{pert[f'n_{k}']}") for k in gt if f"n_{k}" in gt}
    rows = [[k, gt[k], pert.get(k)] + [n.get(k, "")] * bool(n) for k in gt if not k.startswith("n_")]
    return {"title": metric, "columns": ["key", "GT as prediction", "perturbed"] + ["n"] * bool(n), "rows": rows, "notes": notes}


def sections(rep: dict) -> list[tuple[str, dict]]:
    """A benchmark's parts in order, ``(anchor, table)`` for each table and ``(anchor, {})`` for its figures."""
    tables = [_metric_table(m, res, rep["notes"].get(m, {})) for m, res in rep["metrics"].items()] + rep.get("tables", [])
    return [(rep["id"] + "-" + re.sub(r"\W+", "_", t.get("title", "figures")).strip("_"), t) for t in [*tables, {}]]


def _inline(text: str) -> str:
    """``text`` as HTML: escaped, with Markdown's ``code`` and **bold**."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text)))


_STYLE = (report.LEGEND_STYLE + "body{font-family:sans-serif;line-height:1.4;max-width:1000px;margin:0 auto;padding:0 12px}"
          ".scroll{overflow-x:auto}table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ccc;padding:2px 8px;"
          "text-align:right;vertical-align:top}th:first-child,td:first-child,.text *{text-align:left}code{white-space:nowrap}"
          "figure{margin:1.2em 0}img{max-width:100%;height:auto;image-rendering:pixelated;border:1px solid #ccc}"
          "@media(max-width:600px){td,th{padding:2px 4px}code{white-space:normal;overflow-wrap:anywhere}.text tr:first-child{"
          "display:none}.text tr,.text td{display:block}.text tr{border:1px solid #ccc;margin-bottom:.4em}.text td{border:0}"
          ".text td::before{content:attr(data-h) ': ';font-weight:bold}}")


def _table_html(anchor: str, t: dict) -> str:
    """A report table; on a phone its keys break after underscores and a text table (``t["text"]``) stacks its rows."""
    e, cols = html.escape, t["columns"]
    marks = {k: i for i, k in enumerate((row[0] for row in t["rows"] if row[0] in t.get("notes", {})), 1)}  # note numbers
    body = "".join(f"<tr><td data-h='{e(cols[0])}'>" + e(row[0]).replace("_", "_<wbr>")
                   + (f"<sup><a href='#{anchor}-n{marks[row[0]]}'>{marks[row[0]]}</a></sup>" if row[0] in marks else "") + "</td>"
                   + "".join(f"<td data-h='{e(c)}'>{_inline(_fmt(v))}</td>" for c, v in zip(cols[1:], row[1:])) + "</tr>"
                   for row in t["rows"])
    notes = "".join(f"<li id='{anchor}-n{i}'><b>{e(k).replace('_', '_<wbr>')}</b>: {e(t['notes'][k])}</li>" for k, i in marks.items())
    return ((f"<p>{_inline(t['about'])}</p>" if t.get("about") else "") + "<div class=scroll><table"
            + " class=text" * bool(t.get("text")) + "><tr>" + "".join(f"<th>{e(c)}</th>" for c in cols) + f"</tr>{body}</table></div>"
            + f"<ol class=notes>{notes}</ol>" * bool(notes))


def render_html(reports: list[dict], out: Path) -> str:
    e = html.escape
    parts = ["<!doctype html><html lang=en><head><meta charset='utf-8'><meta name=viewport content='width=device-width,"
             f"initial-scale=1'><title>perckit demo report</title><style>{_STYLE}</style></head><body><h1>perckit demo report</h1>",
             *(f"<p>{_inline(p)}</p>" for p in SUMMARY), "<nav><h2 id=contents>Contents</h2><ol>",
             *(f"<li><a href='#{rep['id']}'>{e(rep['benchmark'])}</a>: " + ", ".join(f"<a href='#{a}'>{e(t.get('title', 'figures'))}</a>"
                                                                                  for a, t in sections(rep)) + "</li>" for rep in reports),
             "</ol></nav>"]
    for rep in reports:
        parts.append(f"<section><h2 id='{rep['id']}'>{e(rep['benchmark'])}</h2><p>Converted: " + ", ".join(
            f"<code>{e(k)}</code> {v} rows" for k, v in rep["rows"].items()) + f".</p><p><b>Perturbed prediction:</b> {e(rep['perturbed'])}</p>")
        for anchor, t in sections(rep):
            parts.append(f"<h3 id='{anchor}'>{e(t.get('title', 'Figures'))}</h3>" + (_table_html(anchor, t) if t else "".join(
                f"<figure id='{anchor}-{i}'><img src='{e(Path(f['path']).relative_to(out).as_posix())}' alt='figure {i}'><figcaption>"
                f"<b>Figure {i}.</b> {e(f['caption'])}</figcaption>{report.legend_html(f['legend'])}</figure>"
                for i, f in enumerate(rep["figures"], 1))))
        parts.append("</section>")
    return "\n".join(parts + ["</body></html>"])


#: the benchmarks' runners in report order
RUNNERS = (run_r4d, run_syn4d, run_refcoco_m, run_m4seg, run_reason_av_edit)


def main(out_dir: str | Path = "build/demo") -> int:
    import logging

    import datasets

    out = Path(out_dir)
    claim_output(out)
    datasets.logging.set_verbosity_error()
    perckit_logger = logging.getLogger("perckit")
    level = perckit_logger.level
    perckit_logger.setLevel(logging.ERROR)

    log = functools.partial(print, flush=True)
    _fresh(out / "figures")  # an earlier run's previews may have another extension
    try:
        with progress_bars(False):  # no bar of perckit, datasets or huggingface_hub: the demo's log stays readable
            reports = [run(out, log) for run in RUNNERS]
    finally:
        perckit_logger.setLevel(level)
    write_atomic(out / "report.json", json.dumps(reports, indent=2, sort_keys=True, default=str) + "\n")
    write_atomic(out / "report.html", render_html(reports, out))
    print(f"Wrote the report to {out / 'report.html'} (also report.json) and the Hub-layout exports to {out / 'export'}.")
    return 0
