"""Benchmark cases of scripts/bench.py for the metrics and the builders (one function per case).

Each case returns rows ``{"case", "measure", "value", "target", "ok", "info"}``: ``value`` is a ratio
checked against ``target`` (``ok`` None when there is no target), ``info`` the absolute figures.
Every case generates its own scaled synthetic data, times each variant several times in this one
process and keeps the best run (the least disturbed by the rest of the machine).
"""

from __future__ import annotations

import math
import os
import shutil
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

REPO = Path(__file__).resolve().parents[1]


def best_of(fn: Callable[[], object], repeat: int = 3) -> tuple[float, object]:
    """The shortest wall time of ``repeat`` runs and the last result."""
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def row(case: str, measure: str, value: float, target: str | None, ok: bool | None, info: str = "") -> dict:
    return {"case": case, "measure": measure, "value": value, "target": target, "ok": ok, "info": info}


def ellipse_rle(rng: np.random.Generator, h: int, w: int, shift: tuple[int, int] = (0, 0), params=None) -> tuple[dict, tuple]:
    """A random ellipse as a compressed RLE (rasterised by pycocotools from a 32-gon), and its parameters."""
    if params is None:
        cx, cy = rng.uniform(0.2 * w, 0.8 * w), rng.uniform(0.2 * h, 0.8 * h)
        rx, ry = rng.uniform(0.03 * w, 0.2 * w), rng.uniform(0.03 * h, 0.2 * h)
        params = (cx, cy, rx, ry)
    cx, cy, rx, ry = params
    a = np.linspace(0, 2 * np.pi, 32, endpoint=False)
    poly = np.column_stack([cx + shift[0] + rx * np.cos(a), cy + shift[1] + ry * np.sin(a)]).ravel().tolist()
    r = mask_utils.merge(mask_utils.frPyObjects([poly], h, w))
    return {"size": [h, w], "counts": r["counts"].decode("ascii")}, params


def _null_metric_dir(tmp: Path, features_expr: str, imports: str) -> Path:
    """A metric with the same features whose compute does nothing: evaluate's own round trip."""
    d = tmp / "null_metric"
    d.mkdir(parents=True, exist_ok=True)
    (d / "null_metric.py").write_text(
        "import datasets\nimport evaluate\n" + imports + "\n\n"
        "class NullMetric(evaluate.Metric):\n"
        "    def _info(self):\n"
        f"        return evaluate.MetricInfo(description='', citation='', inputs_description='', features=datasets.Features({features_expr}))\n\n"
        "    def _compute(self, predictions, references, **kw):\n"
        "        return {}\n"
    )
    return d


# ---------------------------------------------------------------- mask_temporal


def case_mask_temporal(quick: bool = False) -> list[dict]:
    import evaluate

    from perckit import rle

    nq, nf, h, w = (20, 20, 1014, 1352) if quick else (89, 60, 1014, 1352)
    rng = np.random.default_rng(0)
    refs, preds = [], []
    for q in range(nq):
        frames, pframes = [], []
        for t in range(nf):
            g, params = ellipse_rle(rng, h, w)
            p, _ = ellipse_rle(rng, h, w, shift=(int(rng.integers(-40, 40)), int(rng.integers(-40, 40))), params=params)
            frames.append({"frame_id": t, "mask": g})
            pframes.append({"frame_id": t, "mask": p})
        refs.append({"query_id": f"q{q}", "scene": f"s{q % 12}", "query_type": "ABC"[q % 3], "is_negative": False,
                     "frames": frames, "evaluated_frame_ids": list(range(nf)), "scene_frame_ids": list(range(nf))})
        preds.append({"query_id": f"q{q}", "frames": pframes})
    tmp = Path(tempfile.mkdtemp(prefix="bench-mt-"))
    try:
        metric = evaluate.load(str(REPO / "metrics" / "mask_temporal"))
        t_eval, result = best_of(lambda: metric.compute(predictions=preds, references=refs))
        null_dir = _null_metric_dir(
            tmp, "{'predictions': feats.prediction_schema(), 'references': feats.reference_schema()}",
            "from perckit.r4d_bench import features as feats",
        )
        null = evaluate.load(str(null_dir))
        t_null, _ = best_of(lambda: null.compute(predictions=preds, references=refs))
        pairs = [(p["mask"], g["mask"]) for pq, rq in zip(preds, refs) for p, g in zip(pq["frames"], rq["frames"])]
        cpairs = [({"size": p["size"], "counts": p["counts"].encode()}, {"size": g["size"], "counts": g["counts"].encode()}) for p, g in pairs]

        def bare_ops():
            for p, g in cpairs:
                mask_utils.area(p), mask_utils.area(g), mask_utils.area(mask_utils.merge([p, g], intersect=True))

        t_ops, _ = best_of(bare_ops)
        t_val, _ = best_of(lambda: [(rle.validate(p), rle.validate(g)) for p, g in pairs])
        floor = t_null + t_ops + t_val
        # Dense baseline (the official evaluator's way): PNG masks decoded with Pillow, IoU with numpy per frame.
        sub = pairs[: min(len(pairs), 300)]
        pngs = []
        for i, (p, g) in enumerate(sub):
            for kind, m in (("p", p), ("g", g)):
                path = tmp / f"{kind}{i}.png"
                Image.fromarray(rle.decode(m).astype(np.uint8) * 255).save(path)
            pngs.append((tmp / f"p{i}.png", tmp / f"g{i}.png"))

        def dense():
            ious = []
            for pp, gp in pngs:
                a = np.asarray(Image.open(pp)) > 0
                b = np.asarray(Image.open(gp)) > 0
                u = np.logical_or(a, b).sum()
                ious.append(np.logical_and(a, b).sum() / u if u else 1.0)
            return ious

        t_dense_sub, _ = best_of(dense, repeat=2)
        t_dense = t_dense_sub * len(pairs) / len(sub)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    info = (f"{nq} queries x {nf} frames at {w}x{h}: evaluate {t_eval:.2f}s; floor {floor:.2f}s = evaluate round trip "
            f"{t_null:.2f}s + pycocotools {t_ops:.2f}s + validation {t_val:.2f}s; dense {t_dense:.1f}s "
            f"(measured on {len(sub)} frame pairs, scaled); miou {result['miou']:.4f}")
    return [
        row("mask_temporal", "dense / evaluate", t_dense / t_eval, ">= 20", t_dense / t_eval >= 20, info),
        row("mask_temporal", "evaluate / floor", t_eval / floor, "<= 1.5", t_eval / floor <= 1.5, ""),
    ]


# ---------------------------------------------------------------- refer_iou


#: Expressions of the refer_iou case (the RefCOCO-M validation split's count).
REFER_IOU_PAIRS = 5598


def refer_iou_pairs(n: int, h: int = 480, w: int = 640, unique: int | None = None) -> tuple[list[dict], list[dict]]:
    """``n`` (prediction, reference) rows of refer_iou: a random ellipse as the ground truth and the same ellipse
    shifted by up to 20 pixels as the prediction. ``unique``: only that many pairs are generated and the rest
    repeat them under new ids (a large input in seconds; the scoring does the same work per pair)."""
    rng = np.random.default_rng(1)
    refs, preds = [], []
    cats = ["person", "dog", "car", "chair", "cup"]
    for i in range(min(n, unique or n)):
        g, params = ellipse_rle(rng, h, w)
        p, _ = ellipse_rle(rng, h, w, shift=(int(rng.integers(-20, 20)), int(rng.integers(-20, 20))), params=params)
        refs.append({"expression_id": f"{i}:0", "mask": g, "category": cats[i % 5], "supercategory": "thing"})
        preds.append({"expression_id": f"{i}:0", "mask": p})
    k = len(refs)
    preds += [{**preds[i % k], "expression_id": f"{i}:0"} for i in range(k, n)]
    refs += [{**refs[i % k], "expression_id": f"{i}:0", "category": cats[i % 5]} for i in range(k, n)]
    return preds, refs


def case_refer_iou(quick: bool = False) -> list[dict]:
    import evaluate

    from perckit import rle
    from perckit.refcoco_m.metric import refer_iou

    n, h, w = (1000 if quick else REFER_IOU_PAIRS), 480, 640
    preds, refs = refer_iou_pairs(n, h, w)
    metric = evaluate.load(str(REPO / "metrics" / "refer_iou"))
    t_eval, result = best_of(lambda: metric.compute(predictions=preds, references=refs))
    t_core, _ = best_of(lambda: refer_iou(preds, refs))

    def dense():
        out = []
        for p, g in zip(preds, refs):
            a, b = rle.decode(p["mask"]), rle.decode(g["mask"])
            u = np.logical_or(a, b).sum()
            out.append(np.logical_and(a, b).sum() / u if u else 1.0)
        return out

    t_dense, _ = best_of(dense, repeat=1)
    info = f"{n} examples at {w}x{h}: evaluate {t_eval:.3f}s, core {t_core:.3f}s, dense {t_dense:.2f}s; miou {result['miou']:.4f}"
    return [
        row("refer_iou", "evaluate / core", t_eval / t_core, "<= 2", t_eval / t_core <= 2, info),
        row("refer_iou", "dense / evaluate", t_dense / t_eval, ">= 10", t_dense / t_eval >= 10, ""),
    ]


# ---------------------------------------------------------------- refer_iou from the command line


#: Pairs of the command line's start-up run.
CLI_FIRST_PAIRS = 100
#: A small process that runs the command in its argv[2:] and writes ``[exit code, wall seconds, peak RSS KiB, CPU
#: seconds]`` of it to the file argv[1] (``os.wait4``). Started from it, the command's peak RSS is its own: a child of this
#: large process would start with this process's high-water mark (fork copies it; exec keeps the larger).
_LAUNCHER = ("import json, os, subprocess, sys, time\n"
             "t = time.perf_counter(); p = subprocess.Popen(sys.argv[2:]); _, s, u = os.wait4(p.pid, 0)\n"
             "open(sys.argv[1], 'w').write(json.dumps([os.waitstatus_to_exitcode(s), time.perf_counter() - t, u.ru_maxrss, "
             "u.ru_utime + u.ru_stime]))")
#: The core function on the rows of two files (read with the standard ``json``, the garbage collector paused while
#: they are read, as perckit's readers do), in a fresh process: prints its miou and the seconds of the scoring there
#: (the metric's imports, numba's first compiled call, reading, scoring).
_CORE_CHILD = ("import gc, json, sys, time\n"
               "t = time.perf_counter()\n"
               "from perckit.refcoco_m.metric import refer_iou\n"
               "gc.disable()\n"
               "rows = [[json.loads(line) for line in open(path, 'rb')] for path in sys.argv[1:3]]\n"
               "gc.enable()\n"
               "print(json.dumps({'miou': refer_iou(*rows)['miou'], 'seconds': time.perf_counter() - t}))")


def run_measured(commands: list[list[str]], tmp: Path, repeat: int = 3) -> list[tuple[float, float, list[str], float]]:
    """Each command run ``repeat`` times in a fresh process (through :data:`_LAUNCHER`), interleaved (one round runs
    every command once, so every command sees the same machine): per command the best wall seconds, the largest peak
    RSS (MB), the stdout of every run and the least CPU seconds. A failed run raises with its stderr."""
    import json
    import subprocess
    import sys

    report = tmp / "launcher.json"
    runs: list[list[tuple[float, float, str, float]]] = [[] for _ in commands]
    for _ in range(repeat):
        for cmd, done in zip(commands, runs):
            with open(tmp / "out", "wb") as out, open(tmp / "err", "wb") as err:
                subprocess.run([sys.executable, "-c", _LAUNCHER, str(report), *cmd], stdout=out, stderr=err, check=True)
            code, wall, rss_kib, cpu = json.loads(report.read_text())
            if code != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited {code}: {(tmp / 'err').read_text()[-2000:]}")
            done.append((wall, rss_kib / 1024, (tmp / "out").read_text(), cpu))
    return [(min(r[0] for r in done), max(r[1] for r in done), [r[2] for r in done], min(r[3] for r in done)) for done in runs]


def case_refer_iou_cli(quick: bool = False, full: bool = False) -> list[dict]:
    """``perckit evaluate refer_iou`` as a user runs it (a fresh process, the rows from two JSON Lines files), from the
    command to the first score, :data:`CLI_FIRST_PAIRS` pairs, against ``python -c "import perckit"`` plus the scoring
    of those pairs by the core function in a fresh process (:data:`_CORE_CHILD`'s own seconds: the metric's imports and
    numba's first compiled call are part of any scoring; target <= 2). Best of 2 rounds (full: 3; quick: 1), the commands
    interleaved; the CPU seconds (``os.wait4``) are reported beside the ratio. The command at 200k pairs against the
    core function, the accumulator and the evaluate module: :func:`case_refer_iou_200k`."""
    import json
    import sys

    tmp = Path(tempfile.mkdtemp(prefix="bench-refer-iou-cli-"))
    repeat = 1 if quick else 3 if full else 2
    try:
        first = [tmp / f"first-{side}.jsonl" for side in ("predictions", "references")]
        for path, side in zip(first, refer_iou_pairs(CLI_FIRST_PAIRS)):
            path.write_text("".join(json.dumps(r) + "\n" for r in side))
        cli = [sys.executable, "-m", "perckit", "evaluate", "refer_iou", "--predictions", str(first[0]), "--references",
               str(first[1]), "--format", "json"]
        (t_import, _, _, cpu_import), (_, _, outs, cpu_score), (t_first, _, _, cpu_first) = run_measured(
            [[sys.executable, "-c", "import perckit"], [sys.executable, "-c", _CORE_CHILD, *map(str, first)], cli], tmp, repeat)
        t_score, cpu_score = min(json.loads(o)["seconds"] for o in outs), cpu_score - cpu_import
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    floor = t_import + t_score
    return [
        row("refer_iou cli", f"first score / (import + scoring), {CLI_FIRST_PAIRS} pairs", t_first / floor, "<= 2",
            t_first / floor <= 2, f"perckit evaluate {t_first:.2f}s; python -c 'import perckit' {t_import:.2f}s + scoring "
            f"{t_score:.2f}s (CPU seconds: {cpu_first:.2f} / ({cpu_import:.2f} + {cpu_score:.2f}) = "
            f"{cpu_first / (cpu_import + cpu_score):.2f})"),
    ]


# ---------------------------------------------------------------- refer_iou at 200k pairs, four ways


#: Pairs of the four-way scoring comparison (and with ``quick``), and the batch size of the evaluate module's add_batch loop.
SCORING_PAIRS, SCORING_QUICK_PAIRS, SCORING_BATCH = 200_000, 20_000, 1_000
#: One way of scoring the two JSON Lines files argv[2:4] (argv[1]: core, accumulator, evaluate or cli), in a fresh
#: process. The entry point is imported first, untimed (evaluate's import loads transformers and torch when they are
#: installed, as here: seconds that are no part of the scoring); the timed work is everything after it: reading the two
#: files (the three library ways with the standard ``json``, the collector paused, as perckit's readers do; the command
#: line with its own reader), every module imported on the way, and scoring. The last line printed is
#: ``{"miou", "seconds", "cpu"}`` of that work (``cpu``: ``time.process_time``, every thread of the process).
_SCORING_CHILD = """\
import gc, json, sys, time
kind, pred_path, ref_path = sys.argv[1:4]
if kind == "core":
    from perckit.refcoco_m.metric import refer_iou
elif kind == "accumulator":
    from perckit.hf.accumulate import accumulator
elif kind == "evaluate":
    import evaluate, perckit
else:
    from perckit.__main__ import main
t, c = time.perf_counter(), time.process_time()

def read():
    gc.disable()
    rows = [[json.loads(line) for line in open(path, "rb")] for path in (pred_path, ref_path)]
    gc.enable()
    return rows

if kind == "core":
    miou = refer_iou(*read())["miou"]
elif kind == "accumulator":
    miou = accumulator("refer_iou").update(*read()).compute()["miou"]
elif kind == "evaluate":
    metric = perckit.load_metric("refer_iou")
    preds, refs = read()
    b = int(sys.argv[4])
    for i in range(0, len(preds), b):
        metric.add_batch(predictions=preds[i:i + b], references=refs[i:i + b])
    miou = metric.compute()["miou"]
else:
    code = main(["evaluate", "refer_iou", "--predictions", pred_path, "--references", ref_path, "--format", "json"])
    if code:
        raise SystemExit(code)
    miou = None
t, c = time.perf_counter() - t, time.process_time() - c
sys.stdout.flush()
print("\\n" + json.dumps({"miou": miou, "seconds": t, "cpu": c}))
"""


def case_refer_iou_200k(quick: bool = False, full: bool = False) -> list[dict]:
    """``refer_iou`` at :data:`SCORING_PAIRS` pairs four ways, each in a fresh process (:data:`_SCORING_CHILD`,
    started through :data:`_LAUNCHER` so that its peak RSS is its own): the core function
    (:func:`perckit.refcoco_m.metric.refer_iou`), the accumulator (``accumulator("refer_iou").update(...).compute()``),
    the evaluate module (``perckit.load_metric("refer_iou")``, ``add_batch`` in batches of :data:`SCORING_BATCH`, then
    ``compute()``, its cache file in evaluate's default place) and the command line (``perckit evaluate refer_iou``,
    its ``main`` called in the process). The rows are tiled from refer_iou's :data:`REFER_IOU_PAIRS` generated pairs.

    Time: the CPU seconds of the work after the entry point's import (see :data:`_SCORING_CHILD`; the same rule in all
    four), its wall seconds reported beside. Memory: the peak RSS of the whole process (``os.wait4``), nothing
    subtracted, imports included in all four (evaluate's transformers and torch too). Targets against the core
    function: evaluate <= 1.5 in time and <= 2 in memory, the accumulator and the command line <= 1.2 in both.
    Two rounds (full: 3), the four interleaved in each; per way the least CPU seconds and the largest peak RSS. Quick:
    :data:`SCORING_QUICK_PAIRS` pairs, reported only (start-up and import memory weigh more)."""
    import json
    import sys

    n, rounds = (SCORING_QUICK_PAIRS if quick else SCORING_PAIRS), 1 if quick else 3 if full else 2
    tmp = Path(tempfile.mkdtemp(prefix="bench-refer-iou-200k-"))
    try:
        paths = [tmp / f"{side}.jsonl" for side in ("predictions", "references")]
        for path, side in zip(paths, refer_iou_pairs(n, unique=REFER_IOU_PAIRS)):
            path.write_text("".join(json.dumps(r) + "\n" for r in side))
        ways = ("core", "accumulator", "evaluate", "cli")
        commands = [[sys.executable, "-c", _SCORING_CHILD, way, *map(str, paths), str(SCORING_BATCH)] for way in ways]
        measured = run_measured(commands, tmp, rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    figures = {}
    for way, (_, rss, outs, process_cpu) in zip(ways, measured):
        last = [json.loads(o.strip().splitlines()[-1]) for o in outs]
        if way == "cli":  # the command's own JSON table, then the child's line
            for o, r in zip(outs, last):
                r["miou"] = json.loads(o.strip().rsplit("\n", 1)[0])["miou"]
        figures[way] = {"cpu": min(r["cpu"] for r in last), "wall": min(r["seconds"] for r in last), "rss": rss,
                        "process": process_cpu, "miou": {r["miou"] for r in last}}
    if any(f["miou"] != figures["core"]["miou"] for f in figures.values()):
        raise RuntimeError(f"the four ways give different miou: { {w: f['miou'] for w, f in figures.items()} }")
    core, miou = figures["core"], next(iter(figures["core"]["miou"]))
    gate = not quick
    rows = []
    for way, label, time_target, rss_target in (("evaluate", "evaluate module", 1.5, 2.0), ("accumulator", "accumulator", 1.2, 1.2),
                                                ("cli", "command line", 1.2, 1.2)):
        f = figures[way]
        t, m = f["cpu"] / core["cpu"], f["rss"] / core["rss"]
        rows.append(row("refer_iou 200k", f"time, {label} / core, {n:,} pairs", t, f"<= {time_target:g}" if gate else None,
                        t <= time_target if gate else None,
                        f"CPU seconds of the work {f['cpu']:.2f} / {core['cpu']:.2f} (wall {f['wall']:.2f} / {core['wall']:.2f} = "
                        f"{f['wall'] / core['wall']:.2f}; the whole process, imports included, {f['process']:.2f} / "
                        f"{core['process']:.2f} CPU seconds = {f['process'] / core['process']:.2f})"
                        + (f"; best of {rounds} round(s), miou {miou:.4f} in all four" if way == "evaluate" else "")))
        rows.append(row("refer_iou 200k", f"peak RSS, {label} / core, {n:,} pairs", m, f"<= {rss_target:g}" if gate else None,
                        m <= rss_target if gate else None, f"{f['rss']:.0f} MB / {core['rss']:.0f} MB (whole process)"))
    return rows


# ---------------------------------------------------------------- syn4d


def _official_depth(gt: np.ndarray, pred: np.ndarray) -> dict:
    """The straightforward way of the official evaluator (the bench's baseline): OpenCV resize, whole arrays
    cast to float64, boolean masks, two full medians."""
    import cv2

    h, w = gt.shape[1:]
    p = np.stack([cv2.resize(f, (w, h), interpolation=cv2.INTER_LINEAR) for f in pred.astype(np.float32)]).astype(np.float64)
    g = gt.astype(np.float64)
    valid = np.isfinite(g) & np.isfinite(p) & (g > 0.001) & (g <= 300.0) & (p > 0)
    g, p = g[valid], p[valid]
    s = np.median(g) / max(np.median(p), 1e-12)
    p = np.clip(s * p, 0.001, 300.0)
    g = np.clip(g, 0.001, 300.0)
    diff = p - g
    ratio = np.maximum(g / p, p / g)
    ld = np.log(p) - np.log(g)
    return {"abs_rel": float(np.mean(np.abs(diff) / g)), "sq_rel": float(np.mean(diff * diff / g)),
            "rmse": float(np.sqrt(np.mean(diff * diff))), "rmse_log": float(np.sqrt(np.mean(ld * ld))),
            "silog": float(np.sqrt(max(0.0, np.mean(ld * ld) - np.mean(ld) ** 2)) * 100.0),
            "delta1": float(np.mean(ratio < 1.25)), "delta2": float(np.mean(ratio < 1.25**2)), "delta3": float(np.mean(ratio < 1.25**3))}


def case_syn4d(quick: bool = False) -> list[dict]:
    from perckit.syn4d import metric as core

    rng = np.random.default_rng(2)
    t_len, q = 32, 512
    n_seq = 64 if quick else 512
    # tracking + pose, per sequence
    seqs = []
    for i in range(n_seq):
        gt = rng.uniform(-3, 3, (t_len, q, 3)).astype(np.float32)
        gt[..., 2] += 6
        vis = rng.random((t_len, q)) > 0.2
        dyn = rng.random(q) > 0.6
        c2w = np.tile(np.eye(4), (t_len, 1, 1))
        c2w[:, :3, 3] = np.cumsum(rng.normal(0, 0.1, (t_len, 3)), axis=0)
        pred_c2w = c2w.copy()
        pred_c2w[:, :3, 3] = pred_c2w[:, :3, 3] * 2 + rng.normal(0, 0.01, (t_len, 3))
        seqs.append(({"tracks_ref0": gt, "visibility": vis, "dynamic": dyn, "camera_c2w": c2w, "frame_indices": list(range(0, 192, 6))},
                     {"tracking_xyz": gt * 0.5 + rng.normal(0, 0.05, gt.shape), "camera_c2w": pred_c2w, "depth": None, "frame_indices": None}))
    opts = core.Syn4DOptions()

    def tracking_pose():
        for ref, pred in seqs:
            core.task_metrics("tracking", ref, pred, opts)
            core.task_metrics("pose", ref, pred, opts)

    t_tp, _ = best_of(tracking_pose)
    per_seq_ms = 1000 * t_tp / n_seq
    # depth at 720x1280, 32 frames, the prediction at half resolution
    h, w = 720, 1280
    gt = rng.uniform(1, 80, (t_len, h, w)).astype(np.float32)
    gt[:, :80] = 655.0
    gt[:, -1, :16] = 0.0
    gt[:, -2, :16] = np.nan
    pred = (gt[:, ::2, ::2] * 0.4 * rng.uniform(0.9, 1.1, (t_len, h // 2, w // 2))).astype(np.float32)
    t_ours, ours = best_of(lambda: core.depth_metrics(gt, pred))
    t_base, base = best_of(lambda: _official_depth(gt, pred))
    t_floor, _ = best_of(lambda: (np.sum(gt), np.sum(pred)))
    t_resize, _ = best_of(lambda: core.resize_depth(pred, (h, w)))  # the OpenCV upsampling both sides pay
    worst = max(abs(ours[k] - base[k]) / max(abs(base[k]), 1e-300) for k in base)
    info = (f"depth 32x{h}x{w}: ours {t_ours:.3f}s, official-style {t_base:.3f}s, numpy.sum floor {t_floor:.4f}s "
            f"(ours {t_ours / t_floor:.0f}x floor, official-style {t_base / t_floor:.0f}x; both include the "
            f"OpenCV resize, {t_resize:.3f}s = {t_resize / t_floor:.0f}x floor); max rel. difference {worst:.1e}")
    return [
        row("syn4d", "depth: official-style / ours", t_base / t_ours, ">= 3", t_base / t_ours >= 3 and worst <= 1e-9, info),
        row("syn4d", "tracking + pose ms per sequence", per_seq_ms, "< 1", per_seq_ms < 1,
            f"{n_seq} sequences, Q={q}, T={t_len}: {t_tp:.3f}s"),
    ]


# ---------------------------------------------------------------- av_edit_quality, the model-free metrics


#: The release's frame size, and the frames / samples of the num_proc workload (quick: smaller).
EDIT_SIZE = (480, 832)
EDIT_NUM_PROC = {False: (31, 4, 3), True: (21, 2, 1)}  # frames per clip, samples, rounds
#: A process that streams memory (copies 64 MB back and forth) until it is killed: the load of the loaded rounds.
_BURNER = "import numpy as np\na = np.ones(1 << 23)\nb = a.copy()\nwhile True:\n    np.copyto(b, a); np.copyto(a, b)"


def edit_clip(t: int, h: int, w: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(edited, source, region)``: a smooth textured source panning down, an elliptic region moving right, the edit
    inverting the region and adding noise of +-12 everywhere (lossy-codec-like), as uint8 ``(T, H, W, 3)`` / bool."""
    import cv2

    rng = np.random.default_rng(seed)
    base = cv2.GaussianBlur(rng.integers(0, 256, (h + 4 * t, w, 3), dtype=np.uint8), (0, 0), 4)
    src = np.clip(np.stack([base[4 * j : 4 * j + h] for j in range(t)]).astype(np.int16) * 4 - 384, 0, 255).astype(np.uint8)
    yy, xx = np.mgrid[:h, :w]
    region = np.stack([((xx - 0.45 * w - 2 * j) / (0.18 * w)) ** 2 + ((yy - 0.5 * h) / (0.25 * h)) ** 2 <= 1 for j in range(t)])
    ed = np.clip(src.astype(np.int16) + rng.integers(-12, 13, src.shape), 0, 255).astype(np.uint8)
    ed[region] = 255 - ed[region]
    return ed, src, region


def edit_quality_floor(a: np.ndarray, b: np.ndarray, region: np.ndarray | None, win: int = 7) -> dict:
    """The four numbers of one frame in OpenCV + numpy float32, the same window (``cv2.blur``: the uniform window's
    means; the sample covariance ``N / (N - 1)``; the mean over the interior): the floor of the per-frame target.
    With a region, the pasted frame's map is computed only on the bounding box of the region's reach (as ours)."""
    import cv2

    c1, c2, k, n = (0.01 * 255) ** 2, (0.03 * 255) ** 2, (win, win), win * win
    h, w = a.shape[:2]
    p = (win - 1) // 2
    x, y = a.astype(np.float32), b.astype(np.float32)
    uy, uyy = cv2.blur(y, k), cv2.blur(y * y, k)

    def ssim_map(x: np.ndarray, y: np.ndarray, uy: np.ndarray, uyy: np.ndarray) -> np.ndarray:
        ux, uxx, uxy = cv2.blur(x, k), cv2.blur(x * x, k), cv2.blur(x * y, k)
        cov = np.float32(n / (n - 1.0))
        vx, vy, vxy = cov * (uxx - ux * ux), cov * (uyy - uy * uy), cov * (uxy - ux * uy)
        return ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))

    full = ssim_map(x, y, uy, uyy)
    d = x - y
    se = (d * d).sum(axis=-1)
    psnr, ssim = 10 * math.log10(255 ** 2 / (float(se.mean()) / 3)), float(full[p : h - p, p : w - p].mean())
    if region is None:
        return {"psnr": psnr, "ssim": ssim, "bg_psnr": psnr, "bg_ssim": ssim}
    smap = full.mean(axis=-1)
    ys, xs = np.nonzero(region)
    y0, y1, x0, x1 = max(ys.min() - 2 * p, 0), min(ys.max() + 1 + 2 * p, h), max(xs.min() - 2 * p, 0), min(xs.max() + 1 + 2 * p, w)
    box = (slice(y0, y1), slice(x0, x1))
    pasted = ssim_map(np.where(region[box][..., None], y[box], x[box]), y[box], uy[box], uyy[box])
    smap[y0 + p : y1 - p, x0 + p : x1 - p] = pasted[p : y1 - y0 - p, p : x1 - x0 - p].mean(axis=-1)
    keep = ~region[p : h - p, p : w - p]
    return {"psnr": psnr, "ssim": ssim, "bg_psnr": 10 * math.log10(255 ** 2 / (float(se[~region].mean()) / 3)),
            "bg_ssim": float(smap[p : h - p, p : w - p][keep].mean())}


def _cpu_best(fn: Callable[[], object], repeat: int) -> float:
    """The least CPU seconds (``time.process_time``: every thread of this process) of ``repeat`` runs."""
    best = math.inf
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def case_edit_quality_frame(quick: bool = False) -> list[dict]:
    """av_edit_quality's four model-free numbers of one 480 x 832 frame (:func:`perckit.reason_av_edit.quality.pixel.
    frame_scores`) against :func:`edit_quality_floor`, without and with a target region (an ellipse over 14% of the
    frame): CPU seconds, OpenCV on one thread for both, best of interleaved rounds (ours, floor, ours, floor, ...);
    once on the machine as it is and once beside two processes streaming memory (started here, killed after).
    Target <= 1.25 each. The torch path (``pixel_device``) is timed only where CUDA is."""
    import subprocess
    import sys

    from perckit.draw.figures import one_opencv_thread
    from perckit.reason_av_edit.quality import pixel

    (a,), (b,), (region,) = edit_clip(1, *EDIT_SIZE)
    for r in (None, region):  # the floor computes the same numbers (float32: to 1e-4)
        ours, floor = pixel.frame_scores(a, b, r), edit_quality_floor(a, b, r)
        if any(abs(ours[k] - floor[k]) > 1e-4 * max(1.0, abs(ours[k])) for k in ours):
            raise RuntimeError(f"the floor's numbers {floor} are not ours {ours}")
    rounds, rows = (3 if quick else 8), []
    with one_opencv_thread():
        for loaded in (False, True):
            burners = [subprocess.Popen([sys.executable, "-c", _BURNER]) for _ in range(2 if loaded else 0)]
            try:
                time.sleep(0.5 if loaded else 0)
                load = os.getloadavg()[0]
                for r, what in ((None, "no region"), (region, "region")):
                    t_ours, t_floor = math.inf, math.inf
                    for _ in range(rounds):
                        t_ours = min(t_ours, _cpu_best(lambda: pixel.frame_scores(a, b, r), 2))
                        t_floor = min(t_floor, _cpu_best(lambda: edit_quality_floor(a, b, r), 2))
                    rows.append(row("edit_quality_frame", f"ours / floor, {what}" + (", +2 memory streams" if loaded else ""),
                                    t_ours / t_floor, "<= 1.25", t_ours / t_floor <= 1.25,
                                    f"CPU per 480x832 frame: ours {1000 * t_ours:.1f} ms, OpenCV float32 floor {1000 * t_floor:.1f} ms "
                                    f"(load average {load:.1f})"))
            finally:
                for proc in burners:
                    proc.kill()
                    proc.wait()
    rows[0]["info"] += "; " + _torch_device_info(pixel, a, b, region)
    return rows


def _torch_device_info(pixel, a: np.ndarray, b: np.ndarray, region: np.ndarray) -> str:
    """The torch path's wall time per frame on CUDA beside the compiled path's, or why it was not timed."""
    try:
        import torch
    except ImportError:
        return "pixel_device: torch absent, not timed"
    if not torch.cuda.is_available():
        return "pixel_device: no CUDA device here, not timed"
    gpu, _ = best_of(lambda: pixel.frame_scores(a, b, region, device="cuda"), repeat=5)
    cpu, _ = best_of(lambda: pixel.frame_scores(a, b, region), repeat=5)
    return f"pixel_device='cuda' ({torch.cuda.get_device_name()}): {1000 * gpu:.1f} ms per frame with a region, CPU path {1000 * cpu:.1f} ms"


def case_edit_quality_num_proc(quick: bool = False) -> list[dict]:
    """av_edit_quality's model-free metrics over whole samples (decoding the edited mp4, the source mp4 and the mask
    video, then every frame; :data:`EDIT_NUM_PROC` frames of 480 x 832 and samples) with ``num_proc=2`` against
    ``num_proc=1``: wall-time speedup, best of interleaved rounds (target >= 1.6; on a machine that other sessions
    load, two processes get no more CPU than one, so the CPU seconds are reported beside it). Also the end-to-end CPU
    per frame of one process (decoding included), the figure the card extrapolates to the release."""
    import resource

    from perckit.reason_av_edit import make_quality_prediction
    from perckit.reason_av_edit.quality.metric import av_edit_quality
    from perckit.samples.base import encode_mp4

    t, n, rounds = EDIT_NUM_PROC[quick]
    ed, src, region = edit_clip(t, *EDIT_SIZE)
    mask = np.repeat(region[..., None].astype(np.uint8) * 255, 3, axis=-1)
    media = [{"bytes": encode_mp4(x, preset="ultrafast", lossless=lossless), "path": ""} for x, lossless in ((ed, False), (src, False), (mask, True))]
    none = {"bytes": None, "path": ""}
    refs = [{"sample_id": f"s{i}", "category": "where_only", "sub_track": "W1_same_class_pair", "language": "en", "orientation": "landscape",
             "instruction": "", "video": media[1], "audio": none, "mask_video": media[2], "ref_image": none, "edit_window_s": [0.0, 1.0],
             "fps": 25.0, "num_frames": t} for i in range(n)]
    preds = [make_quality_prediction(r["sample_id"], media[0]) for r in refs]
    keys = ["ssim", "psnr", "bg_psnr", "bg_ssim"]

    def halves() -> None:  # the machine's ceiling: the same work in two independent processes, no pool, no exchange
        import multiprocessing

        fork = multiprocessing.get_context("fork")
        procs = [fork.Process(target=av_edit_quality, args=(preds[j::2], refs[j::2]), kwargs={"metrics": keys, "num_proc": 1})
                 for j in (0, 1)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
            if p.exitcode != 0:
                raise RuntimeError(f"a half-workload process exited with {p.exitcode}")

    wall, cpu, outs = {1: math.inf, 2: math.inf, "halves": math.inf}, {1: (math.inf, 0.0), 2: (math.inf, 0.0)}, {}
    for _ in range(rounds):
        for k in (1, 2, "halves"):
            c0, ch0, t0 = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            if k == "halves":
                halves()
                wall[k] = min(wall[k], time.perf_counter() - t0)
                continue
            outs[k] = av_edit_quality(preds, refs, metrics=keys, num_proc=k, return_per_sample=True)
            ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall[k] = min(wall[k], time.perf_counter() - t0)
            cpu[k] = min(cpu[k], (time.process_time() - c0, ch1.ru_utime + ch1.ru_stime - ch0.ru_utime - ch0.ru_stime), key=sum)
    if outs[2] != outs[1]:
        raise RuntimeError("num_proc=2 gave other numbers than num_proc=1")
    (one, _), (main, workers) = cpu[1], cpu[2]
    speedup, free, per_frame = wall[1] / wall[2], one / (main + workers / 2), one / (n * t)
    ceiling = wall[1] / wall["halves"]
    return [
        row("edit_quality_num_proc", f"speedup num_proc=2 / 1, {n} samples x {t} frames", speedup, ">= 1.6", speedup >= 1.6,
            f"wall num_proc=1 {wall[1]:.2f}s, num_proc=2 {wall[2]:.2f}s, equal outputs; load average {os.getloadavg()[0]:.1f}. CPU "
            f"seconds: one process {one:.2f}; num_proc=2 main {main:.2f} + workers {workers:.2f}, so on two free cores (each worker "
            f"half the clips) {free:.2f}x. The kernel shares the CPU between sessions (autogroup): while other sessions are "
            "busy, two processes get no more CPU than one and the wall speedup falls toward 1"),
        row("edit_quality_num_proc", "the machine's ceiling: two independent processes / 1", ceiling, None, None,
            f"the same {n} samples split in two halves, each scored by its own forked process with num_proc=1 (no pool, nothing "
            f"exchanged), wall {wall['halves']:.2f}s, best of {rounds}: what two processes gain on this machine now; "
            f"num_proc=2 reaches {speedup / ceiling:.2f} of it"),
        row("edit_quality_num_proc", "CPU ms per 480x832 frame, decoding included", 1000 * per_frame, None, None,
            f"one process: {one:.2f} CPU s for {n} samples x {t} frames (edited and source mp4 ultrafast yuv420p, a lossless mask); "
            f"the release, 1,200 x 121 frames: {1200 * 121 * per_frame / 3600:.2f} CPU hours"),
    ]


# ---------------------------------------------------------------- builders


def _read_all(paths: list[Path], sink=None) -> int:
    """Read every file once (1 MB chunks); with ``sink``, also write every byte to it."""
    total = 0
    for p in paths:
        with open(p, "rb") as f:
            while chunk := f.read(1 << 20):
                total += len(chunk)
                if sink is not None:
                    sink.write(chunk)
    return total


def _copy_once(read: Callable[..., int], out: Path) -> int:
    """Read the files once and write their bytes once to a new file: the least any conversion does."""
    with open(out, "wb") as sink:
        n = read(sink)
    out.unlink()
    return n


def _drop_page_cache(paths: list[Path]) -> bool:
    """Evict files from the OS page cache (fsync, then POSIX_FADV_DONTNEED; no root needed), so that the next
    read comes from the storage device, as on a first build. False where the OS has no posix_fadvise."""
    if not hasattr(os, "posix_fadvise"):
        return False
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return True


def _build(name: str, config: str, data_dir: Path, cache: Path, keep: bool = True) -> float:
    """Seconds of one ``download_and_prepare`` into a fresh ``cache``; ``keep=False`` removes the output right
    after (its dirty pages are then dropped, not written back while the next measurement runs, as the floors'
    outputs are)."""
    import datasets

    from perckit.hf.entrypoints import builder_class

    if cache.exists():
        shutil.rmtree(cache)
    datasets.disable_progress_bars()
    t0 = time.perf_counter()
    builder_class(name)(config_name=config, data_dir=str(data_dir), cache_dir=str(cache)).download_and_prepare()
    seconds = time.perf_counter() - t0
    if not keep:
        shutil.rmtree(cache)
    return seconds


def _io_bound_rows(case: str, what: str, files: list[Path], read: Callable[..., int], build: Callable[[], float], repeat: int = 2) -> list[dict]:
    """Throughput of a build against reading the same files once, both from a cold page cache (the files
    evicted before every run: the first build of a freshly downloaded release) and, for information, warm.
    ``read(sink=None)`` reads the files once (writing the bytes to ``sink`` when given); the info line also
    gives the copy floor: reading once and writing the bytes once, which every conversion must do."""
    t_read_warm, nbytes = best_of(read, repeat=3)
    t_build_warm = min(build() for _ in range(repeat))
    copy_to = Path(tempfile.mkdtemp(prefix="bench-copy-")) / "copy.bin"
    cold = _drop_page_cache(files)
    if cold:
        t_read = min(_timed_after(lambda: _drop_page_cache(files), read) for _ in range(repeat))
        t_copy = min(_timed_after(lambda: _drop_page_cache(files), lambda: _copy_once(read, copy_to)) for _ in range(repeat))
        t_build = min(_timed_after(lambda: _drop_page_cache(files), build, inner=True) for _ in range(repeat))
    else:
        t_read, t_build = t_read_warm, t_build_warm
        t_copy, _ = best_of(lambda: _copy_once(read, copy_to), repeat=repeat)
    shutil.rmtree(copy_to.parent, ignore_errors=True)
    ratio = t_read / t_build
    info = (f"{what} ({nbytes / 1e6:.0f} MB in {len(files)} files): "
            + (f"cold cache: read once {t_read:.2f}s ({nbytes / 1e6 / t_read:.0f} MB/s), build {t_build:.2f}s; " if cold
               else "posix_fadvise unavailable: warm figures only; ")
            + f"warm cache: read once {t_read_warm:.2f}s ({nbytes / 1e6 / t_read_warm:.0f} MB/s), build {t_build_warm:.2f}s "
            f"(ratio {t_read_warm / t_build_warm:.2f}). Copy (read once + write every byte once{', cold' if cold else ''}) "
            f"{t_copy:.2f}s: read / copy {t_read / t_copy:.2f} (a one-thread copy; a build that overlaps reading and writing can beat it); "
            f"build / copy {t_build / t_copy:.2f}")
    measure = "throughput vs reading the files once" + (" (cold)" if cold else " (warm)")
    return [row(case, measure, ratio, ">= 0.5", ratio >= 0.5, info)]


def _timed_after(prepare: Callable[[], object], fn: Callable[[], object], inner: bool = False) -> float:
    """Wall time of ``fn`` after ``prepare`` (not timed); ``inner``: ``fn`` returns its own time."""
    prepare()
    t0 = time.perf_counter()
    out = fn()
    return float(out) if inner else time.perf_counter() - t0


def case_r4d_build(quick: bool = False, repeat: int | None = None, full: bool = False) -> list[dict]:
    """The combined build (``frames`` + ``all_queries``) against reading every release file once, and each
    config against its library floor (:func:`_r4d_floor`), all from a cold page cache.

    Cold reads on a virtual machine vary by a factor of two from one minute to the next, so the runs are
    paired: each repetition reads the files once, builds both configs and runs both floors, one after the
    other (the release evicted before each), and every ratio is taken within a repetition; the table gives
    the median ratio over ``repeat`` repetitions (3; full 5; quick 2), the info line its range. The target row is
    read once / combined build >= 0.5. When it is missed, the row says whether the floors alone reach 0.5
    ("floor-bound" only when they do not, and no build beats its floor, which would make it no lower bound)."""
    from perckit.samples import write_release

    tmp = Path(tempfile.mkdtemp(prefix="bench-r4d-"))
    try:
        frames = 60 if quick else 300
        reps = repeat or (2 if quick else 5 if full else 3)
        rel = tmp / "rel"
        write_release("r4d_bench", rel, frames_per_scene=frames, height=270, width=480, write_query_masks=False)
        files = sorted(p for p in rel.rglob("*") if p.is_file())
        nbytes = sum(p.stat().st_size for p in files)
        configs = ("frames", "all_queries")
        cold = hasattr(os, "posix_fadvise")
        evict = (lambda: _drop_page_cache(files)) if cold else (lambda: None)
        for config in configs:  # warm-up: compiled kernels, imports, the cache folder's first use
            _build("r4d_bench", config, rel, tmp / "c")
        _r4d_floor(rel, tmp / "floor.arrow")
        runs = []
        for _ in range(reps):
            t_read = _timed_after(evict, lambda: _read_all(files))
            evict()  # once before both builds, as a first build of each config in a row would run
            builds = {c: _build("r4d_bench", c, rel, tmp / "c", keep=False) for c in configs}
            evict()
            floors = _r4d_floor(rel, tmp / "floor.arrow")
            runs.append({"read": t_read, "build": builds, "floor": floors})
        state = "cold" if cold else "warm"

        def med(values: list[float]) -> float:
            return float(np.median(values))

        def spread(values: list[float]) -> str:
            return f"median {med(values):.2f}, range {min(values):.2f}-{max(values):.2f} over {len(values)} runs"

        ratio = [r["read"] / sum(r["build"].values()) for r in runs]
        at_floor = [r["read"] / sum(sum(r["floor"][c].values()) for c in configs) for r in runs]
        per_config = {c: [r["build"][c] / sum(r["floor"][c].values()) for r in runs] for c in configs}
        beaten = [c for c in configs if med(per_config[c]) < 1]
        met = med(ratio) >= 0.5
        if met:
            verdict = "target met"
        elif med(at_floor) < 0.5 and not beaten:
            verdict = f"floor-bound: even builds at the library floors reach {med(at_floor):.2f}"
        elif beaten:
            verdict = f"not shown floor-bound: the {' and '.join(beaten)} build beats its library floor (no lower bound there)"
        else:
            verdict = f"not floor-bound: builds at the library floors would reach {med(at_floor):.2f}"
        read_med = med([r["read"] for r in runs])
        build_med = {c: med([r["build"][c] for r in runs]) for c in configs}

        def floor_text(c: str) -> str:
            parts = {k: med([r["floor"][c][k] for r in runs]) for k in runs[0]["floor"][c]}
            return f"{sum(parts.values()):.2f}s (" + ", ".join(f"{k} {v:.2f}s" for k, v in parts.items()) + ")"

        what = f"12 scenes x {frames} frames ({nbytes / 1e6:.0f} MB in {len(files)} files), {state} cache, paired runs"
        rows = [row("r4d_bench build", f"throughput vs reading the files once ({state})" + ("" if met or not verdict.startswith("floor-bound") else " [floor-bound]"),
                    med(ratio), ">= 0.5", met,
                    f"{verdict}; {what}: read once / (frames + all_queries build) {spread(ratio)}; medians: read once "
                    f"{read_med:.2f}s ({nbytes / 1e6 / read_med:.0f} MB/s), frames {build_med['frames']:.2f}s, all_queries "
                    f"{build_med['all_queries']:.2f}s"),
                row("r4d_bench build", f"floors vs reading the files once ({state})", med(at_floor), None, None,
                    f"read once / (both library floors) {spread(at_floor)}: what builds at the floors would reach")]
        for c in configs:
            rows.append(row("r4d_bench build", f"{c} build / its library floor", med(per_config[c]), None, None,
                            f"{spread(per_config[c])}; {c} build {build_med[c]:.2f}s, library floor {floor_text(c)}"))
        return rows
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: Images the frames floor asks the OS to read ahead, across scenes, refilled when half are read: the window
#: of :func:`perckit.io.prefetch.read_ahead` (256 files; its 32 MB budget does not bind on these 100 KB images).
_FLOOR_READ_AHEAD = 256


def _r4d_floor(root: Path, out: Path) -> dict[str, dict[str, float]]:
    """Per config, the work no R4D-Bench build can skip, done with the bare libraries (no checks, no rows),
    streamed as a build streams (64 frames at a time, so no buffer holds the whole release):

    - ``json``: ``orjson.loads`` of the COCO files (both configs need the frame sizes; ``frames`` also the
      annotations) and of the dense GT (``all_queries``);
    - ``pycocotools``: every segmentation to RLE in one ``frPyObjects`` call per frame (and each query
      frame's masks OR-ed);
    - ``image reads`` (``frames``): every image, the next ones announced to the OS as the build does;
    - ``Arrow write``: one ``pa.ipc`` stream to ``out`` of what the rows carry (the image bytes and the masks'
      counts), the file every ``datasets`` build writes too."""
    import orjson
    import pyarrow as pa

    from perckit.io.prefetch import gc_paused
    from perckit.r4d_bench import layout as r4d_layout

    advise = getattr(os, "posix_fadvise", None)

    def hint(p: Path) -> None:
        if advise is not None:
            fd = os.open(p, os.O_RDONLY)
            try:
                advise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            finally:
                os.close(fd)

    def rle_of(segs: list, h: int, w: int) -> bytes | None:
        polys = [p for s in segs if isinstance(s, list) for p in s]
        parts = list(mask_utils.frPyObjects(polys, h, w)) if polys else []
        for s in segs:
            if isinstance(s, dict):
                parts.append(mask_utils.frPyObjects(s, h, w) if isinstance(s.get("counts"), list) else
                             {"size": s["size"], "counts": s["counts"].encode()})
        if not parts:
            return None
        return (mask_utils.merge(parts) if len(parts) > 1 else parts[0])["counts"]

    def frame_rles(segs: list, h: int, w: int) -> list[bytes]:
        """Each annotation's RLE, the frame's polygons rasterised in one call (as the build does)."""
        polys = [p for s in segs if isinstance(s, list) for p in s]
        raster = iter(mask_utils.frPyObjects(polys, h, w) if polys else [])
        out = []
        for s in segs:
            if isinstance(s, list):
                own = [next(raster) for _ in s]
                out.append((mask_utils.merge(own) if len(own) > 1 else own[0])["counts"])
            else:
                out.append(rle_of([s], h, w))
        return out

    cocos = sorted((root / r4d_layout.SCENES_DIR).glob("*/_annotations*.coco.json"))
    result: dict[str, dict[str, float]] = {}
    for config in ("frames", "all_queries"):
        parts = dict.fromkeys(["json", "pycocotools", "image reads", "Arrow write"] if config == "frames" else ["json", "pycocotools", "Arrow write"], 0.0)
        writer = None
        sink = pa.OSFile(str(out), "wb")

        def write(columns: dict[str, list]) -> None:
            nonlocal writer
            t0 = time.perf_counter()
            batch = pa.record_batch(columns)
            if writer is None:
                writer = pa.ipc.new_stream(sink, batch.schema)
            writer.write_batch(batch)
            parts["Arrow write"] += time.perf_counter() - t0

        with gc_paused():  # as the builders parse (the collector would otherwise add about a third)
            t0 = time.perf_counter()
            parsed = [orjson.loads(p.read_bytes()) for p in cocos]
            gt = orjson.loads((root / r4d_layout.dense_gt_file("all_queries", "segmentation")).read_bytes()) if config == "all_queries" else []
            parts["json"] += time.perf_counter() - t0
            if config == "frames":
                work = []
                for path, coco in zip(cocos, parsed):
                    images = sorted(coco["images"], key=lambda im: im["id"])
                    segs: dict = {}
                    for a in coco["annotations"]:
                        if a.get("segmentation"):
                            segs.setdefault(a["image_id"], []).append(a["segmentation"])
                    work.append((images, segs, [path.parent / "images" / im["file_name"] for im in images]))
                names = [p for _, _, scene_names in work for p in scene_names]
                hinted = 0
                k = 0  # images read so far, across scenes
                for images, segs, scene_names in work:
                    for start in range(0, len(images), 64):
                        data, counts = [], []
                        for j in range(start, min(start + 64, len(images))):
                            t0 = time.perf_counter()
                            if hinted - k <= _FLOOR_READ_AHEAD // 2:  # the build's window, refilled at half
                                while hinted < len(names) and hinted - k < _FLOOR_READ_AHEAD:
                                    hint(names[hinted])
                                    hinted += 1
                            data.append(scene_names[j].read_bytes())
                            k += 1
                            t1 = time.perf_counter()
                            counts.append(frame_rles(segs.get(images[j]["id"], []), images[j]["height"], images[j]["width"]))
                            parts["image reads"] += t1 - t0
                            parts["pycocotools"] += time.perf_counter() - t1
                        write({"image": pa.array(data, pa.binary()), "counts": pa.array(counts, pa.list_(pa.binary()))})
            else:
                t0 = time.perf_counter()
                im = parsed[0]["images"][0]
                h, w = im["height"], im["width"]
                for entry in gt:
                    counts = [rle_of([m["segmentation"] for m in fr.get("masks") or [] if m.get("segmentation")], h, w)
                              for fr in entry["ground_truth"]["frames"]]
                    t1 = time.perf_counter()
                    parts["pycocotools"] += t1 - t0
                    write({"counts": pa.array(counts, pa.binary())})
                    t0 = time.perf_counter()
        t0 = time.perf_counter()
        if writer is not None:
            writer.close()
        sink.close()
        out.unlink()
        parts["Arrow write"] += time.perf_counter() - t0
        result[config] = parts
    return result


def case_reason_av_edit_build(quick: bool = False, full: bool = False) -> list[dict]:
    from perckit.samples import write_release

    tmp = Path(tempfile.mkdtemp(prefix="bench-rave-"))
    try:
        per_track = 1 if quick else 5 if full else 3
        write_release("reason_av_edit", tmp / "rel", samples_per_sub_track=per_track, frames=121, size=(256, 448), texture="noise",
                      x264_preset="ultrafast")  # noise clips: large, incompressible tars (~580 MB), quick to encode
        tars = sorted((tmp / "rel" / "archives").glob("*.tar"))
        # metadata.csv and the annotations are read by the build too
        files = tars + [tmp / "rel" / "metadata.csv"] + sorted((tmp / "rel" / "annotations").glob("*.json"))

        def read_tars(sink=None) -> int:
            n = 0
            for t in tars:
                with tarfile.open(t) as tf:
                    for m in tf:
                        if m.isfile():
                            data = tf.extractfile(m).read()
                            n += len(data)
                            if sink is not None:
                                sink.write(data)
            return n

        return _io_bound_rows("reason_av_edit build", "tar members, read with tarfile", files, read_tars,
                              lambda: _build("reason_av_edit", "default", tmp / "rel", tmp / "c"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------- convert_previews

#: The build alone, as a user runs it: a fresh process building RefCOCO-M's default config into a fresh cache.
_BUILD_CHILD = ("import sys\n"
                "from perckit.hf.entrypoints import builder_class\n"
                "builder_class('refcoco_m')(config_name='expressions', data_dir=sys.argv[1], cache_dir=sys.argv[2]).download_and_prepare()")


#: Both compiled kernels a conversion runs (the counts scan, the sampler's walk), compiled (or loaded) once before the
#: timed runs: after an edit of perckit/core/counts.py the first process to call them compiles them.
_WARM_KERNELS = ("import numpy as np\nfrom perckit import rle\n"
                 "rle.resize_nearest(rle.encode(np.ones((4, 4), bool)), [2, 2], rule='pil')")


def _picture_floor(release: Path) -> tuple[float, int, int]:
    """The pictures' own work with the bare libraries, CPU seconds (best of 2): each image of the RefCOCO-M release
    decoded once by Pillow (at the DCT scale a preview allows) and shrunk by OpenCV to the preview's size
    (``perckit.draw.previews.fit_size``; OpenCV on one thread, as the previews draw), and one JPEG of the previews'
    settings written per expression picture (a sample with a sentence), masks not drawn; with the counts of images and
    pictures."""
    import io

    import cv2
    import pyarrow.parquet as pq

    from perckit.draw.figures import one_opencv_thread
    from perckit.draw.previews import JPEG_QUALITY, fit_size

    items = []
    for f in sorted((release / "data").glob("*.parquet")):
        for r in pq.read_table(f, columns=["image", "samples"]).to_pylist():
            items.append((r["image"]["bytes"], sum(bool(s.get("sentences")) for s in r["samples"] or [])))

    def once() -> float:
        t = time.process_time()
        for data, pictures in items:
            im = Image.open(io.BytesIO(data))
            h, w = fit_size(im.height, im.width)
            im.draft("RGB", (w, h))
            arr = np.asarray(im.convert("RGB"))
            arr = arr if arr.shape[:2] == (h, w) else cv2.resize(arr, (w, h), interpolation=cv2.INTER_LINEAR_EXACT)
            for _ in range(pictures):
                Image.fromarray(arr).save(io.BytesIO(), format="JPEG", quality=JPEG_QUALITY, optimize=False, subsampling=2)
        return time.process_time() - t

    with one_opencv_thread():  # as the previews draw: the pool's workers would spin between the small calls
        return min(once(), once()), len(items), sum(p for _, p in items)


def case_convert_previews(quick: bool = False) -> list[dict]:
    """``perckit convert refcoco_m`` with its default previews against the same build alone (issue 32), 600 images of
    360x480 to 480x640 (refcoco_m_build's release; quick: 120 images, reported only): ``python -m perckit -q convert
    refcoco_m`` (the default ``expressions`` config, its ``preview`` column, the Parquet export) against ``python -c``
    building that config with ``download_and_prepare`` (:data:`_BUILD_CHILD`), each a fresh process through
    :data:`_LAUNCHER` into a fresh cache (and output folder), run build, convert, convert ``--no-preview`` (plain),
    build, convert after the compiled kernels are warm (quick: build, convert, plain; 60-70 s on the shared 2-core
    machine at load 2-4, a sixth of it writing the release). CPU seconds (user + system, ``os.wait4``), the least of
    each: target <= 2; the peak RSS (the largest of each) is reported beside it. Reported too: the convert against
    the plain convert plus :func:`_picture_floor` (what the previews cannot do without), and that sum against the
    build alone: the least the convert can cost, in the target's terms."""
    import json
    import subprocess
    import sys

    from perckit.samples import write_release

    tmp = Path(tempfile.mkdtemp(prefix="bench-convert-previews-"))
    n, order = (120, ("build", "convert", "plain")) if quick else (600, ("build", "convert", "plain", "build", "convert"))
    convert = [sys.executable, "-m", "perckit", "-q", "convert", "refcoco_m", "--data-dir", str(tmp / "rel"),
               "--output", str(tmp / "out"), "--cache-dir", str(tmp / "cache")]
    commands = {"build": [sys.executable, "-c", _BUILD_CHILD, str(tmp / "rel"), str(tmp / "cache")], "convert": convert,
                "plain": convert + ["--no-preview"]}
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    try:
        write_release("refcoco_m", tmp / "rel", num_images=n, shards=2, min_size=(360, 480), max_size=(480, 640))
        subprocess.run([sys.executable, "-c", _WARM_KERNELS], check=True)  # numba's on-disk cache, written once
        for name in order:
            for folder in ("cache", "out"):  # removed here, not in the measured process
                shutil.rmtree(tmp / folder, ignore_errors=True)
            with open(tmp / "err", "wb") as err:
                subprocess.run([sys.executable, "-c", _LAUNCHER, str(tmp / "launcher.json"), *commands[name]],
                               stdout=subprocess.DEVNULL, stderr=err, check=True)
            code, _, rss_kib, cpu = json.loads((tmp / "launcher.json").read_text())
            if code != 0:
                raise RuntimeError(f"{name} exited {code}: {(tmp / 'err').read_text()[-2000:]}")
            runs[name].append((cpu, rss_kib / 1024))
        pictures, images, drawn = _picture_floor(tmp / "rel")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    (cpu_b, rss_b), (cpu_c, rss_c), (cpu_p, _) = ((min(c for c, _ in runs[k]), max(r for _, r in runs[k])) for k in ("build", "convert", "plain"))
    gate, floor = not quick, (cpu_p + pictures) / cpu_b
    return [
        row("convert_previews", f"CPU, convert / build alone, {n} images", cpu_c / cpu_b, "<= 2" if gate else None,
            cpu_c / cpu_b <= 2 if gate else None, f"perckit convert refcoco_m (expressions, default previews) {cpu_c:.2f} CPU s, "
            f"the build alone {cpu_b:.2f} CPU s (fresh processes, run {', '.join(order)}; the least of each)"),
        row("convert_previews", "CPU, convert / (--no-preview + pictures' floor)", cpu_c / (cpu_p + pictures), None, None,
            f"perckit convert --no-preview {cpu_p:.2f} CPU s; the pictures with the bare libraries {pictures:.2f} CPU s "
            f"({images} images decoded and shrunk once, {drawn} JPEGs written, no mask drawn: _picture_floor)"),
        row("convert_previews", "CPU, (--no-preview + pictures' floor) / build alone", floor, None, None,
            "the least a convert with previews costs, against the build alone: " + (
                "above the target's 2, which is below the work itself here" if floor > 2 else
                f"the target leaves {2 - floor:.2f}x of the build ({(2 - floor) * cpu_b:.2f} CPU s) for drawing the "
                "masks, storing the preview cells and the map around them")),
        row("convert_previews", f"peak RSS, convert / build alone, {n} images", rss_c / rss_b, None, None,
            f"perckit convert {rss_c:.0f} MB, the build alone {rss_b:.0f} MB (the largest of each)"),
    ]


CASES = {
    "mask_temporal": case_mask_temporal,
    "refer_iou": case_refer_iou,
    "refer_iou_cli": case_refer_iou_cli,
    "refer_iou_200k": case_refer_iou_200k,
    "syn4d": case_syn4d,
    "edit_quality_frame": case_edit_quality_frame,
    "edit_quality_num_proc": case_edit_quality_num_proc,
    "r4d_build": case_r4d_build,
    "reason_av_edit_build": case_reason_av_edit_build,
    "convert_previews": case_convert_previews,
}
