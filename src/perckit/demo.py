"""``make demo``: build every benchmark from its sample release, score sample predictions, write a report.

Benchmarks so far: R4D-Bench, Syn4D. Each step prints what it does; the report goes to
``build/demo/report.md`` (and ``report.json``).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from . import rle
from .entrypoints import REPO_ROOT, build_split


def perturb_r4d(rows: list[dict], seed: int = 0) -> tuple[list[dict], list[dict]]:
    """A deterministic imperfect model: masks shifted 2 px right, 1 frame in 4 dropped, 1 query in 5 given an extra track id."""
    rng = np.random.default_rng(seed)
    masks, tracks = [], []
    for i, r in enumerate(rows):
        frames = []
        for j, f in enumerate(r["frames"]):
            if rng.random() < 0.25:
                continue
            m = np.roll(rle.decode(f["mask"]), 2, axis=1)
            frames.append({"frame_id": f["frame_id"], "mask": rle.encode(m)})
        masks.append({"query_id": r["query_id"], "frames": frames})
        ids = list(r["target_track_ids"]) + (["99"] if i % 5 == 0 else [])
        tracks.append({"query_id": r["query_id"], "target_track_ids": ids})
    return masks, tracks


def _scalars(d: dict) -> dict:
    return {k: v for k, v in d.items() if not isinstance(v, (dict, list))}


def run_r4d(out: Path, log) -> dict:
    import evaluate

    from .fixtures.base import write_release
    from .r4d_bench import features as feats

    rel = out / "r4d_bench" / "release"
    if rel.exists():
        shutil.rmtree(rel)
    fx = write_release("r4d_bench", rel)
    log(f"R4D-Bench: wrote the sample release ({len(fx.files)} files, {len(fx.query_ids)} queries) to {rel}")
    cache = out / "cache" / "r4d_bench"
    if cache.exists():  # script caches are keyed on the data_dir path, not its content: start clean
        shutil.rmtree(cache)
    t0 = time.perf_counter()
    splits = {cfg: build_split("r4d_bench", cfg, rel, cache) for cfg in ("all_queries", "subset_36", "frames")}
    log("R4D-Bench: built configs " + ", ".join(f"{k} ({v.num_rows} rows)" for k, v in splits.items()) + f" in {time.perf_counter() - t0:.1f}s")
    rows = splits["all_queries"].to_list()
    refs = [feats.to_metric_reference(r) for r in rows]
    track_refs = [feats.to_track_reference(r) for r in rows]
    mask_metric = evaluate.load(str(REPO_ROOT / "metrics" / "mask_temporal"))
    track_metric = evaluate.load(str(REPO_ROOT / "metrics" / "track_id"))
    results: dict[str, Any] = {}
    gt_mask = mask_metric.compute(predictions=[feats.to_metric_prediction(r) for r in rows], references=refs)
    gt_track = track_metric.compute(predictions=[feats.to_track_prediction(r) for r in rows], references=track_refs)
    bad = [k for k, v in {**_scalars(gt_mask), **_scalars(gt_track)}.items() if isinstance(v, float) and v != 1.0]
    if bad:
        raise RuntimeError(f"R4D-Bench: ground truth as prediction did not score 1.0 on {bad}")
    log("R4D-Bench: ground truth as prediction scores 1.0 on every metric")
    pm, pt = perturb_r4d(rows)
    results["mask_temporal"] = {"gt_as_prediction": _scalars(gt_mask), "perturbed": mask_metric.compute(predictions=pm, references=refs)}
    results["track_id"] = {"gt_as_prediction": _scalars(gt_track), "perturbed": track_metric.compute(predictions=pt, references=track_refs)}
    return {"benchmark": "R4D-Bench", "rows": {k: v.num_rows for k, v in splits.items()}, "metrics": results}


def run_syn4d(out: Path, log) -> dict:
    import evaluate

    from .fixtures.base import write_release
    from .fixtures.syn4d import write_predictions
    from .syn4d import evaluate as runner
    from .syn4d import io
    from .syn4d import metrics as core
    from .syn4d.features import to_metric_reference

    base = out / "syn4d"
    if base.exists():
        shutil.rmtree(base)
    fx = write_release("syn4d", base / "release")
    log(f"Syn4D: wrote the sample release ({len(fx.files)} files, {len(fx.sequence_ids)} sequences) to {base / 'release'}")
    cache = out / "cache" / "syn4d"
    if cache.exists():
        shutil.rmtree(cache)
    t0 = time.perf_counter()
    splits = {cfg: build_split("syn4d", cfg, base / "release", cache) for cfg in ("tracking", "challenge")}
    log("Syn4D: built configs " + ", ".join(f"{k} ({v.num_rows} rows)" for k, v in splits.items()) + f" in {time.perf_counter() - t0:.1f}s")
    rows = splits["challenge"].to_list()
    ids = [r["sequence_id"] for r in rows]
    gt_dir = write_predictions(fx, base / "predictions_gt")
    noisy_dir = write_predictions(fx, base / "predictions_noisy", noise=0.05)
    metrics = {t: evaluate.load(str(REPO_ROOT / "metrics" / "syn4d"), t) for t in core.TASKS}
    keys = {"tracking": ("score", "apd", "dynamic_apd", "epe"), "depth": ("abs_rel", "delta1", "rmse"),
            "pose": ("ate_rmse", "rpe_translation_rmse", "rpe_rotation_mean_deg")}
    results: dict[str, Any] = {}
    for task in core.TASKS:
        refs = [to_metric_reference(r, task) for r in rows]
        scored = {}
        for name, pdir in (("gt_as_prediction", gt_dir), ("perturbed", noisy_dir)):
            res = metrics[task].compute(predictions=io.load_prediction_rows(pdir, ids), references=refs)
            scored[name] = {k: res["overall"][k] for k in keys[task]} | {"num_sequences": res["overall"]["num_sequences"]}
        results[f"syn4d ({task})"] = scored
    summary = runner.evaluate_release(noisy_dir, base / "release")
    same = all(summary["tasks"][t]["overall"][k] == results[f"syn4d ({t})"]["perturbed"][k] for t in core.TASKS for k in keys[t])
    if not same:
        raise RuntimeError("Syn4D: the file runner and the evaluate module disagree")
    (base / "summary_perturbed.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    log("Syn4D: scored ground truth and perturbed NPZ predictions; the file runner agrees with the evaluate module")
    return {"benchmark": "Syn4D", "rows": {k: v.num_rows for k, v in splits.items()}, "metrics": results}


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def render_markdown(reports: list[dict]) -> str:
    lines = ["# perckit demo report", ""]
    for rep in reports:
        lines += [f"## {rep['benchmark']}", "", "Rows built: " + ", ".join(f"`{k}` {v}" for k, v in rep["rows"].items()), ""]
        for metric, res in rep["metrics"].items():
            lines += [f"### {metric}", "", "| key | GT as prediction | perturbed |", "|---|---|---|"]
            for k, v in res["gt_as_prediction"].items():
                lines.append(f"| {k} | {_fmt(v)} | {_fmt(res['perturbed'].get(k))} |")
            lines.append("")
    return "\n".join(lines)


def main(out_dir: str | Path = "build/demo") -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, flush=True)

    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    reports = [run_r4d(out, log), run_syn4d(out, log)]
    (out / "report.json").write_text(json.dumps(reports, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    md = render_markdown(reports)
    (out / "report.md").write_text(md + "\n", encoding="utf-8")
    print()
    print(md)
    print(f"Report written to {out / 'report.md'} (and report.json).")
    return 0
