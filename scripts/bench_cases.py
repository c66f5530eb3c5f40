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
    from perckit.r4d_bench import features as feats

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


#: Pairs of the command line's large run (quick: 20k), and of its start-up run.
CLI_PAIRS, CLI_FIRST_PAIRS = 200_000, 100
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
    """``perckit evaluate refer_iou`` as a user runs it (a fresh process, the rows from two JSON Lines files):

    - start-up: from the command to the first score, :data:`CLI_FIRST_PAIRS` pairs, against ``python -c "import
      perckit"`` plus the scoring of those pairs by the core function in a fresh process (:data:`_CORE_CHILD`'s own
      seconds: the metric's imports and numba's first compiled call are part of any scoring; target <= 2);
    - at :data:`CLI_PAIRS` pairs (tiled from refer_iou's :data:`REFER_IOU_PAIRS` generated pairs): the command's wall
      time and peak RSS against the core function's (:func:`perckit.refcoco_m.metric.refer_iou` in its own process,
      the rows read with ``json``; targets <= 1.2 each).

    Best of 2 rounds (full: 3; quick: 1 round of 20k pairs), the commands of a comparison interleaved, the peak RSS the largest
    seen; the CPU seconds (``os.wait4``) are reported beside each ratio: on a loaded machine they are the steadier."""
    import json
    import sys

    tmp = Path(tempfile.mkdtemp(prefix="bench-refer-iou-cli-"))
    repeat, n = (1, 20_000) if quick else (3 if full else 2, CLI_PAIRS)
    try:
        def files(name: str, rows: tuple[list[dict], list[dict]]) -> list[str]:
            paths = [tmp / f"{name}-{side}.jsonl" for side in ("predictions", "references")]
            for path, side in zip(paths, rows):
                path.write_text("".join(json.dumps(r) + "\n" for r in side))
            return [str(p) for p in paths]

        def cli(paths: list[str]) -> list[str]:
            return [sys.executable, "-m", "perckit", "evaluate", "refer_iou", "--predictions", paths[0], "--references",
                    paths[1], "--format", "json"]

        first = files("first", refer_iou_pairs(CLI_FIRST_PAIRS))
        (t_import, _, _, cpu_import), (_, _, outs, cpu_score), (t_first, _, _, cpu_first) = run_measured(
            [[sys.executable, "-c", "import perckit"], [sys.executable, "-c", _CORE_CHILD, *first], cli(first)], tmp, repeat)
        t_score, cpu_score = min(json.loads(o)["seconds"] for o in outs), cpu_score - cpu_import
        large = files("large", refer_iou_pairs(n, unique=REFER_IOU_PAIRS))
        (t_core, rss_core, outs_core, cpu_core), (t_cli, rss_cli, outs_cli, cpu_cli) = run_measured(
            [[sys.executable, "-c", _CORE_CHILD, *large], cli(large)], tmp, repeat)
        miou_core, miou_cli = json.loads(outs_core[-1])["miou"], json.loads(outs_cli[-1])["miou"]
        if miou_cli != miou_core:
            raise RuntimeError(f"perckit evaluate's miou {miou_cli!r} is not the core function's {miou_core!r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    floor = t_import + t_score
    gate = not quick  # 20k pairs: start-up weighs more than at 200k, the figures are reported
    return [
        row("refer_iou cli", f"first score / (import + scoring), {CLI_FIRST_PAIRS} pairs", t_first / floor, "<= 2",
            t_first / floor <= 2, f"perckit evaluate {t_first:.2f}s; python -c 'import perckit' {t_import:.2f}s + scoring "
            f"{t_score:.2f}s (CPU seconds: {cpu_first:.2f} / ({cpu_import:.2f} + {cpu_score:.2f}) = "
            f"{cpu_first / (cpu_import + cpu_score):.2f})"),
        row("refer_iou cli", f"time, cli / core, {n // 1000}k pairs", t_cli / t_core, "<= 1.2" if gate else None,
            t_cli / t_core <= 1.2 if gate else None, f"perckit evaluate {t_cli:.2f}s, core function {t_core:.2f}s "
            f"(each a fresh process reading the same two files; miou {miou_cli:.4f} in both; CPU seconds {cpu_cli:.2f} / "
            f"{cpu_core:.2f} = {cpu_cli / cpu_core:.2f})"),
        row("refer_iou cli", f"peak RSS, cli / core, {n // 1000}k pairs", rss_cli / rss_core, "<= 1.2" if gate else None,
            rss_cli / rss_core <= 1.2 if gate else None, f"perckit evaluate {rss_cli:.0f} MB, core function {rss_core:.0f} MB"),
    ]


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


CASES = {
    "mask_temporal": case_mask_temporal,
    "refer_iou": case_refer_iou,
    "refer_iou_cli": case_refer_iou_cli,
    "syn4d": case_syn4d,
    "r4d_build": case_r4d_build,
    "reason_av_edit_build": case_reason_av_edit_build,
}
