"""Reference implementations of Syn4D's compiled paths, the straightforward numpy way (spec §4.1, the shape of
the official evaluator): whole arrays in float64, boolean masks, ``np.median`` / ``np.mean`` /
``np.linalg.lstsq``; and the builder's tables by ``datasets``' own per-example encoding.

They are what ``perckit.syn4d.metric`` ran without numba and what the builder's tables (``perckit.syn4d.rows``)
fell back to before issue 29 made the compiled kernels and the direct Arrow tables the one production path: the tests
compare the production code with these (tracking bit for bit, depth within 1e-12 relative with the exact
decisions, tables value for value). Slow and memory-hungry on purpose; small inputs only.
"""

from __future__ import annotations

import datasets
import numpy as np
import pyarrow as pa

from perckit.syn4d.metric import DEPTH_MAX_M, DEPTH_MIN_M, DYNAMIC_WEIGHT, TRACKING_THRESHOLDS_M, resize_depth


def tracking_metrics(gt, pred, valid, dynamic, thresholds=TRACKING_THRESHOLDS_M, dynamic_weight=DYNAMIC_WEIGHT) -> dict:
    """``perckit.syn4d.metric.tracking_metrics`` by numpy formulas: scored set, median scale, distances."""
    gt, pred = np.asarray(gt, np.float64), np.asarray(pred, np.float64)
    valid, dynamic = np.asarray(valid, bool), np.asarray(dynamic, bool).reshape(-1)
    finite = valid & np.isfinite(gt).all(axis=-1) & np.isfinite(pred).all(axis=-1)
    if not finite.any():
        raise ValueError("sequence has no finite valid tracking correspondences")
    g, p = gt[finite], pred[finite]
    norm = lambda a: np.sqrt(a[:, 0] * a[:, 0] + a[:, 1] * a[:, 1] + a[:, 2] * a[:, 2])  # noqa: E731 - np.linalg.norm's order
    pred_median = float(np.median(norm(p)))
    scale = float(np.median(norm(g)) / pred_median) if pred_median > 1e-12 else 0.0
    distances = norm(g - scale * p)
    dyn = np.broadcast_to(dynamic[None, :], finite.shape)[finite]
    out: dict = {"scale": scale}
    for prefix, d in (("", distances), ("dynamic_", distances[dyn])):
        if d.size:
            acc = {f"{prefix}acc_{t:g}m": float(np.mean(d <= t)) for t in thresholds}
            out.update(acc)
            out[f"{prefix}apd"] = float(np.mean(list(acc.values())))
            out[f"{prefix}epe"] = float(np.mean(d))
            out[f"{prefix}count"] = int(d.size)
    out["dynamic_query_fraction"] = float(np.mean(dynamic))
    w = dynamic_weight
    out["score"] = float((1.0 - w) * out["apd"] + w * out["dynamic_apd"]) if "dynamic_apd" in out else float(out["apd"])
    return out


def depth_metrics(gt, pred, align="scale", min_depth=DEPTH_MIN_M, max_depth=DEPTH_MAX_M) -> dict:
    """``perckit.syn4d.metric.depth_metrics`` by numpy formulas, every alignment."""
    gt = np.asarray(gt)
    if gt.dtype not in (np.float32, np.float64):
        gt = gt.astype(np.float64)
    p = resize_depth(pred, gt.shape[1:]).astype(np.float64)
    g = gt.astype(np.float64)
    lo, hi = np.float64(min_depth), np.float64(max_depth)
    valid = np.isfinite(g) & np.isfinite(p) & (g > lo) & (g <= hi) & (p > 0)
    g, p = g[valid], p[valid]
    n = g.size
    if n == 0:
        raise ValueError("sequence has no valid depth pixels")
    if align == "scale":
        scale, shift = float(np.median(g) / max(np.median(p), 1e-12)), 0.0
    elif align == "scale_shift":
        scale, shift = np.linalg.lstsq(np.stack([p, np.ones(n)], axis=1), g, rcond=None)[0].tolist()
    else:
        scale, shift = 1.0, 0.0
    g, p = np.clip(g, lo, hi), np.clip(scale * p + shift, lo, hi)
    diff, ld = p - g, np.log(p) - np.log(g)
    ratio = np.maximum(g / p, p / g)
    return {
        "abs_rel": float(np.mean(np.abs(diff) / g)), "sq_rel": float(np.mean(diff * diff / g)),
        "rmse": float(np.sqrt(np.mean(diff * diff))), "rmse_log": float(np.sqrt(np.mean(ld * ld))),
        "silog": float(np.sqrt(max(0.0, np.mean(ld * ld) - np.mean(ld) ** 2)) * 100.0),
        "delta1": float(np.mean(ratio < 1.25)), "delta2": float(np.mean(ratio < 1.25**2)), "delta3": float(np.mean(ratio < 1.25**3)),
        "scale": float(scale), "shift": float(shift), "valid_pixels": int(n),
    }


def relative_to_first(c2w):
    """``inv(X[0]) @ X`` for a ``[T, 4, 4]`` stack (full 4x4 inverse), in float64: the official pose normalisation,
    one inverse per call (``perckit.syn4d.metric.pose_metrics`` batches the two trajectories' inverses)."""
    poses = np.asarray(c2w, dtype=np.float64)
    return np.linalg.inv(poses[0])[None] @ poses


def reference_table(rows, features: datasets.Features) -> pa.Table:
    """The table ``datasets``' per-example path writes for ``rows`` (``encode_example``, then ``ArrowWriter``)."""
    from datasets.arrow_writer import ArrowWriter

    sink = pa.BufferOutputStream()
    with ArrowWriter(features=features, stream=sink, writer_batch_size=max(1, len(rows))) as writer:
        for row in rows:
            writer.write(features.encode_example(row))
        writer.finalize()
    return pa.ipc.open_stream(sink.getvalue()).read_all()
