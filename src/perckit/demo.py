"""``make demo``: the main job on the embedded sample releases.

For every benchmark: write its synthetic sample release, convert every config to the Hub layout
(``build/demo/export/<benchmark>``), load the export back with no script, score ground truth as
prediction and a perturbed prediction with every metric, and draw pictures. The report is
``build/demo/report.html`` (with ``report.md`` and ``report.json``).
"""

from __future__ import annotations

import functools
import html
import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .draw import figures, report
from . import rle
from .io.paths import write_atomic
from .hf.api import load_metric
from .hf.cli import progress_bars

Log = Callable[[str], None]


def _scalars(d: dict) -> dict:
    return {k: v for k, v in d.items() if not isinstance(v, (dict, list))}


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


def convert_all(benchmark: str, release: Path, out: Path, log: Log) -> tuple[Path, dict]:
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
    log(f"{benchmark}: converted " + ", ".join(f"{k} ({v.num_rows} rows)" for k, v in splits.items())
        + f" to {export_dir} in {time.perf_counter() - t0:.1f}s; loaded back with no script")
    save_preview(benchmark, splits[cls.DEFAULT_CONFIG_NAME], out)
    return export_dir, splits


def save_preview(benchmark: str, ds: Any, out: Path) -> Path | None:
    """The ``preview`` picture of the first row of the default config's export (what the Hub's Dataset Viewer shows
    in that row), saved for the report as ``figures/<benchmark>_preview.png`` (``.jpg`` for a JPEG preview); None
    when the export has no preview column."""
    from .draw.previews import PREVIEW_COLUMN

    if PREVIEW_COLUMN not in ds.features or ds.num_rows == 0:
        return None
    cell = ds.with_format("arrow")[0:1].column(PREVIEW_COLUMN)[0].as_py()
    path = out / "figures" / f"{benchmark}_preview.{'jpg' if cell['bytes'][:3] == bytes((0xFF, 0xD8, 0xFF)) else 'png'}"
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in path.parent.glob(f"{benchmark}_preview.*"):  # an earlier run's (the demo owns its figures folder)
        old.unlink()
    write_atomic(path, cell["bytes"])
    return path


def with_preview(benchmark: str, label: str, report: dict, out: Path) -> dict:
    """``report`` with the export's preview picture as its first figure (when the export has one)."""
    found = sorted((out / "figures").glob(f"{benchmark}_preview.*"))
    if found:
        path = found[0]
        caption = (f"{label}: the 'preview' column of the export's first row, the picture the Hub's Dataset Viewer "
                   "shows for it (drawn by perckit convert; not part of the release)")
        report["figures"] = [(path, caption)] + list(report.get("figures", []))
    return report


def build_sample(benchmark: str, out: Path, log: Log, describe: Callable[[Any], str]) -> tuple[Path, Any, dict]:
    """Write ``benchmark``'s sample release under ``out/<benchmark>/release``, log ``describe(summary)`` and convert
    every config: ``(the benchmark's demo folder, the writer's summary, {config: split})``."""
    from .samples import write_release

    base = _fresh(out / benchmark)
    summary = write_release(benchmark, base / "release")
    log(describe(summary))
    _, splits = convert_all(benchmark, base / "release", out, log)
    return base, summary, splits


def _scored(metric: Any, gt: list, perturbed: list, refs: list, **kw: Any) -> dict:
    """``{"gt_as_prediction": ..., "perturbed": ...}``: the scalar results of ``metric`` on both prediction sets."""
    return {"gt_as_prediction": _scalars(metric.compute(predictions=gt, references=refs, **kw)),
            "perturbed": _scalars(metric.compute(predictions=perturbed, references=refs, **kw))}


def _report(label: str, splits: dict, results: dict, out: Path, name: str, figure: Any, caption: str,
            legend: Any = figures.MASK_LEGEND, **more: Any) -> dict:
    """The report of one benchmark; ``figure`` is saved with its legend and ``caption`` as ``figures/<name>.png``."""
    fig = figures.save(figures.annotated(figure, caption, legend), out / "figures" / f"{name}.png")
    return {"benchmark": label, "rows": {k: v.num_rows for k, v in splits.items()}, "metrics": results,
            "figures": [(fig, caption)], **more}


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

    base, fx, splits = build_sample("r4d_bench", out, log, lambda fx: f"R4D-Bench: wrote the sample release ({len(fx.files)} files, {len(fx.query_ids)} queries)")
    rows = splits["all_queries"].to_list()
    refs = [feats.to_metric_reference(r) for r in rows]
    track_refs = [feats.to_track_reference(r) for r in rows]
    pm, pt = perturb_r4d(rows)
    results = {
        "mask_temporal": _scored(load_metric("mask_temporal"), [feats.to_metric_prediction(r) for r in rows], pm, refs),
        "track_id": _scored(load_metric("track_id"), [feats.to_track_prediction(r) for r in rows], pt, track_refs),
    }
    _check_perfect("R4D-Bench", results, {"mask_temporal": ("miou", "viou", "overall_iou"), "track_id": ("f1", "exact_match")})
    log("R4D-Bench: ground truth as prediction scores 1.0 on every metric; perturbed prediction scored")
    # pictures: the first query with two frames, its first three frames as perckit report draws them
    row = next(r for r in rows if len(r["frames"]) >= 2 and not r["is_negative"])
    pred = next(p for p in pm if p["query_id"] == row["query_id"])
    drawn = report.PAGES["mask_temporal"].draw(row, row, pred, row, report.Frames(splits["frames"]))
    caption = (f"R4D-Bench query {row['query_id']} ({row['text_en']!r}), " + "; ".join(c for _, c in drawn)
               + ": prediction = ground-truth masks shifted 2 px right, one frame in four dropped")
    return _report("R4D-Bench", splits, results, out, "r4d_bench_overlay", figures.side_by_side([t for t, _ in drawn]), caption)


# ---------------------------------------------------------------- Syn4D


def run_syn4d(out: Path, log: Log) -> dict:
    from .samples.syn4d_predictions import write_predictions
    from .syn4d import evaluate as runner
    from .syn4d.layout import prediction_path
    from .syn4d.read import load_prediction_rows, read_npz
    from .syn4d import metric as core
    from .syn4d.features import to_metric_reference, to_numpy_row

    base, fx, splits = build_sample("syn4d", out, log, lambda fx: f"Syn4D: wrote the sample release ({len(fx.files)} files, {len(fx.sequence_ids)} sequences)")
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
    log("Syn4D: scored ground-truth and perturbed NPZ predictions; the official-format file runner agrees")
    row = to_numpy_row(rows[0])
    pred = read_npz(prediction_path(noisy_dir, row["sequence_id"]))["tracking_xyz"].astype(np.float64) * 2.0
    caption = f"Syn4D {row['sequence_id']}: 24 query tracks projected into frame 0; prediction = ground truth with 5% noise (the noisy NPZ), rescaled x2"
    plot = figures.tracks_plot(row["tracks_ref0"], pred, row["intrinsics"], row["image_size"], valid=row["visibility"])
    return _report("Syn4D", splits, results, out, "syn4d_tracks", plot, caption, figures.TRACKS_LEGEND)


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

    base, _, splits = build_sample("refcoco_m", out, log, lambda fx: "RefCOCO-M: wrote the sample release (Parquet shards with embedded images and COCO RLE masks)")
    rows = splits["expressions"].to_list()
    refs = [feats.to_metric_reference(r) for r in rows]
    noisy_masks = perturb_masks([r["mask"] for r in rows])
    noisy = [{"expression_id": r["expression_id"], "mask": m} for r, m in zip(rows, noisy_masks)]
    gt = [feats.to_metric_prediction(r) for r in rows]
    results = {"refer_iou": _scored(load_metric("refer_iou"), gt, noisy, refs)}
    _check_perfect("RefCOCO-M", results, {"refer_iou": ("miou", "ciou", "precision@0.9")})
    log("RefCOCO-M: ground truth as prediction scores mIoU = cIoU = 1.0; perturbed prediction scored")
    tiles = [report.overlay(r["image"], r["mask"], m) for r, m in list(zip(rows, noisy_masks))[:3]]
    caption = "RefCOCO-M: " + "; ".join(f"{r['expression_id']} {r['sentence']!r}" for r in rows[:3]) + " (prediction = ground truth shifted 0-2 px right and down)"
    return _report("RefCOCO-M", splits, results, out, "refcoco_m_overlay", figures.side_by_side(tiles), caption)


# ---------------------------------------------------------------- ReasonAVEdit-Bench


def run_reason_av_edit(out: Path, log: Log) -> dict:
    from .reason_av_edit import features as feats
    from .reason_av_edit.metric import decode_wav
    from .reason_av_edit.read.predictions import gt_as_predictions

    base, fx, splits = build_sample("reason_av_edit", out, log, lambda fx: f"ReasonAVEdit-Bench: wrote the sample release ({len(fx.sample_ids)} samples in 16 sub-tracks; media as 7 tars under archives/)")
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
    log("ReasonAVEdit-Bench: ground truth as prediction scores every IoU 1.0 and A/V offset 0; perturbed prediction scored")
    shifted = {p["sample_id"]: p["edit_window_s"] for p, ref in zip(noisy, refs) if ref["edit_window_s"] and p["edit_window_s"] != ref["edit_window_s"]}
    row = next((r for r in rows if r["sample_id"] in shifted and r["category"] == "when_only"), None) or next(r for r in rows if r["sample_id"] in shifted)
    pred_window = shifted[row["sample_id"]]
    wave = decode_wav(row["reason_audio"]["bytes"], where=row["sample_id"])
    caption = (f"ReasonAVEdit-Bench {row['sample_id']} ({row['sub_track']}): acoustic reasoning waveform; ground-truth window "
               f"{row['edit_window_s'][0]:.2f}-{row['edit_window_s'][1]:.2f} s, predicted window shifted by {pred_window[0] - row['edit_window_s'][0]:+.2f} s")
    plot = figures.waveform_plot(wave, 16000, tuple(row["edit_window_s"]), tuple(pred_window))
    return _report("ReasonAVEdit-Bench", splits, results, out, "reason_av_edit_waveform", plot, caption, figures.WINDOW_LEGEND,
                   tables=[edit_quality_table(ds, log)])


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


def edit_quality_table(ds: Any, log: Log) -> dict:
    """The ``av_edit_quality`` table of the report: the main ranking (pure-instruction samples) for the three sets of
    :func:`edit_quality_predictions`, every model metric listed as skipped with its reason."""
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
    log("ReasonAVEdit-Bench: av_edit_quality scores the source as the edit perfect; a region-only edit keeps bg_* perfect; "
        "a background edit lowers bg_*; model metrics without weights are skipped with their reasons")
    keys = [k for k in same if not isinstance(same[k], (dict, list)) and not k.startswith("n_")]
    rows = [[k] + [("skipped" if v[k] is None and k in v["skipped"] else v[k]) for v in scored.values()] for k in keys]
    notes = [f"{k}: {reason}" for k, reason in same["skipped"].items()]
    return {"title": "av_edit_quality (edited clips, main ranking: the pure-instruction samples)", "columns": ["key", *scored], "rows": rows,
            "notes": notes}


# ---------------------------------------------------------------- M4Seg


def run_m4seg(out: Path, log: Log) -> dict:
    from .m4seg import features as feats
    from .m4seg.metric import text

    base, _, splits = build_sample("m4seg", out, log, lambda fx: "M4Seg: wrote the sample release (native annotations/*.json.gz and Parquet shards, train and test)")
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
    skipped = [k for k, v in results["m4seg"]["gt_as_prediction"].items() if v is None]  # skip_unavailable's None
    if skipped:  # an extra (or Java) is not installed
        needs = []
        if set(skipped) - {"meteor"}:
            needs.append(f"the semantic metrics need {text.EXTRA_TEXT}")
        if "meteor" in skipped:
            needs.append(f"METEOR needs {text.EXTRA_METEOR} and a Java runtime")
        log(f"M4Seg: skipped {', '.join(skipped)}: {'; '.join(needs)}.")
    checked = tuple(k for k in ("miou", "recall", "siou", "i_siou") if k not in skipped)
    _check_perfect("M4Seg", results, {"m4seg": checked})
    log(f"M4Seg: ground truth as prediction scores 1.0 on {', '.join(checked)}; perturbed prediction scored")
    row = next(r for r in rows if len(r["images"]) >= 2 and r["groundings"])
    pred = next(p for p in noisy if p["example_id"] == row["example_id"])
    tiles = [t for t, _ in report.PAGES["m4seg"].draw(row, row, pred, row, None)]  # as perckit report draws them
    caption = f"M4Seg {row['example_id']}: {row['q']!r} - groundings per image; prediction = ground truth with every third mask shifted 2 px right"
    return _report("M4Seg", splits, results, out, "m4seg_overlay", figures.side_by_side(tiles), caption,
                   rows={"default (test)": splits["default"].num_rows})


# ---------------------------------------------------------------- report


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def render_markdown(reports: list[dict], out: Path) -> str:
    lines = ["# perckit demo report", ""]
    for rep in reports:
        lines += [f"## {rep['benchmark']}", "", "Rows converted: " + ", ".join(f"`{k}` {v}" for k, v in rep["rows"].items()), ""]
        for metric, res in rep["metrics"].items():
            lines += [f"### {metric}", "", "| key | GT as prediction | perturbed |", "|---|---|---|",
                      *(f"| {k} | {_fmt(v)} | {_fmt(res['perturbed'].get(k))} |" for k, v in res["gt_as_prediction"].items()), ""]
        for t in rep.get("tables", []):
            lines += [f"### {t['title']}", "", "| " + " | ".join(t["columns"]) + " |", "|" + "---|" * len(t["columns"])]
            lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in t["rows"]]
            lines += [""] + [f"- skipped {n}" for n in t.get("notes", [])] + [""]
        for path, caption in rep.get("figures", []):
            lines += [f"![{caption}]({Path(path).relative_to(out).as_posix()})", "", f"*{caption}*", ""]
    return "\n".join(lines)


def render_html(reports: list[dict], out: Path) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>perckit demo report</title>",
             "<style>body{font-family:sans-serif;max-width:1000px;margin:2em auto}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}th:first-child,td:first-child{text-align:left}"
             "img{max-width:100%;min-width:640px;image-rendering:pixelated;border:1px solid #ccc}</style></head><body>",
             "<h1>perckit demo report</h1>"]
    for rep in reports:
        parts.append(f"<h2>{html.escape(rep['benchmark'])}</h2><p>Rows converted: "
                     + ", ".join(f"<code>{html.escape(k)}</code> {v}" for k, v in rep["rows"].items()) + "</p>")
        for metric, res in rep["metrics"].items():
            parts += [f"<h3>{html.escape(metric)}</h3><table><tr><th>key</th><th>GT as prediction</th><th>perturbed</th></tr>",
                      *(f"<tr><td>{html.escape(k)}</td><td>{_fmt(v)}</td><td>{_fmt(res['perturbed'].get(k))}</td></tr>"
                        for k, v in res["gt_as_prediction"].items()), "</table>"]
        for t in rep.get("tables", []):
            parts.append(f"<h3>{html.escape(t['title'])}</h3><table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in t["columns"]) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>" for row in t["rows"]]
            parts.append("</table><ul>" + "".join(f"<li>skipped {html.escape(n)}</li>" for n in t.get("notes", [])) + "</ul>")
        for path, caption in rep.get("figures", []):
            parts.append(f"<figure><img src='{Path(path).relative_to(out).as_posix()}' alt='{html.escape(caption)}'>"
                         f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


#: (benchmark, label, runner) in report order
RUNNERS = [("r4d_bench", "R4D-Bench", run_r4d), ("syn4d", "Syn4D", run_syn4d), ("refcoco_m", "RefCOCO-M", run_refcoco_m),
           ("m4seg", "M4Seg", run_m4seg), ("reason_av_edit", "ReasonAVEdit-Bench", run_reason_av_edit)]


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
    try:
        with progress_bars(False):  # no bar of perckit, datasets or huggingface_hub: the demo's log stays readable
            reports = [with_preview(name, label, run(out, log), out) for name, label, run in RUNNERS]
    finally:
        perckit_logger.setLevel(level)
    write_atomic(out / "report.json", json.dumps(reports, indent=2, sort_keys=True, default=str) + "\n")
    md = render_markdown(reports, out)
    write_atomic(out / "report.md", md + "\n")
    write_atomic(out / "report.html", render_html(reports, out))
    print()
    print(md)
    print(f"Report: {out / 'report.html'} (also report.md and report.json); Hub-layout exports in {out / 'export'}")
    return 0
