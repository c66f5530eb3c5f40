"""Score a directory of official Syn4D NPZ predictions (drop-in for the official ``evaluate.py``).

    python -m perckit.syn4d.evaluate --predictions preds/ --data-root /path/to/Syn4D --tasks tracking depth pose \\
        --strict --output summary.json

Reads one sequence at a time (full-size depth never goes through ``evaluate``'s Arrow cache) and shares the
per-sequence functions and the aggregation with ``metrics/syn4d``, so both give identical numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import PerckitError, ReleaseNotFoundError, check_choice
from . import coverage as cov
from . import io
from . import metrics as core
from . import release as rel
from .geometry import unreal_rows_to_c2w


def reference_for_task(task: str, record: rel.SequenceRecord, paths: rel.ReleasePaths) -> dict:
    """The ground truth of one task of one sequence, read from the release (raises when it is missing)."""
    ref: dict = {"sequence_id": record.sequence_id, "variant": record.variant, "scene": record.scene, "frame_indices": list(record.frame_indices)}
    if task == "tracking":
        gt = rel.read_tracking_npy(record.tracking_npy(paths.tracking_gt), record.sequence_id)
        ref.update(tracks_ref0_m=gt["tracks_ref0"], visibility=gt["visibility"], dynamic=gt["dynamic"])
    elif task == "depth":
        depth = rel.read_depth_sequence(record)
        if depth is None:
            raise ReleaseNotFoundError(f"depth folder {str(record.depth_dir)!r} not found")
        ref["depth_m"] = depth
    else:
        unreal = rel.read_camera_csv(record)
        if unreal is None:
            raise ReleaseNotFoundError(f"camera CSV {str(record.camera_csv)!r} not found")
        ref["camera_c2w"] = unreal_rows_to_c2w(unreal)
    return ref


def evaluate_release(
    predictions_dir: str | Path,
    data_dir: str | Path,
    tasks: Iterable[str] = core.TASKS,
    strict: bool = True,
    depth_align: str = "scale",
    variants: Iterable[str] | None = None,
    scenes: Iterable[str] | None = None,
    cameras: Iterable[int] | None = None,
    limit: int = 0,
    manifest: str | Path | None = None,
    tracking_gt: str | Path | None = None,
    challenge_dir: str | Path | None = None,
    min_coverage: float = cov.DEFAULT_MIN_COVERAGE,
    coverage: bool = False,
) -> dict:
    """The official evaluation loop over a release; returns the official summary shape.

    The coverage of every scored tracking / depth sequence (:mod:`perckit.syn4d.coverage`) is computed
    on the way: one :class:`~perckit.syn4d.coverage.LowCoverageWarning` for the run when a sequence is
    below ``min_coverage``; ``coverage=True`` adds the blocks as ``"coverage": {task: {"overall",
    "sequences"}}`` (off by default: the report keeps the official shape)."""
    tasks = sorted(set(tasks))
    for t in tasks:
        check_choice("tasks", t, core.TASKS)
    options = core.Syn4DOptions(strict=strict, depth_align=depth_align, min_coverage=min_coverage)
    paths = rel.resolve_release(data_dir, tracking_gt, challenge_dir, manifest)
    records = rel.select_records(rel.load_records(paths), variants, scenes, cameras, limit)
    rows: dict[str, list[dict]] = {t: [] for t in tasks}
    entries: dict[str, list[dict]] = {t: [] for t in tasks if t in cov.TASKS}
    failures: list[dict] = []
    for record in records:
        npz = io.prediction_path(predictions_dir, record.sequence_id)
        if not npz.is_file():
            if strict:
                raise FileNotFoundError(f"missing prediction {npz}")
            failures.append({"sequence_id": record.sequence_id, "reason": f"missing prediction {npz}"})
            continue
        prediction = io.read_npz(npz)
        for task in tasks:
            try:
                reference = reference_for_task(task, record, paths)
                metrics = core.task_metrics(task, reference, prediction, options)
                if task in entries:
                    entries[task].append(cov.entry_of(task, record.sequence_id, reference, metrics, options))
            except Exception as exc:  # the official loop records any task error in lax mode
                if strict:
                    raise RuntimeError(f"{record.sequence_id} {task} failed") from exc
                failures.append({"sequence_id": record.sequence_id, "task": task, "reason": core.failure_reason(exc)})
                continue
            rows[task].append({"sequence_id": record.sequence_id, "variant": record.variant, "scene": record.scene, **metrics})
    report = {
        "protocol": core.PROTOCOL,
        "requested_sequences": len(records),
        "tasks": {t: core.aggregate(rows[t]) for t in tasks if rows[t]},
        "failures": failures,
    }
    blocks = {t: cov.summarize(e, options.min_coverage) for t, e in entries.items() if e}
    cov.warn_if_low(blocks, options.min_coverage)
    if coverage:
        report["coverage"] = blocks
    return report


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m perckit.syn4d.evaluate",
        description="Syn4D: score per-sequence NPZ predictions (tracking_xyz, depth, camera_c2w, frame_indices) "
        "exactly as the official evaluator, and write its report JSON.",
    )
    p.add_argument("--predictions", required=True, help="folder of <variant>/<scene>/<sequence>.npz")
    p.add_argument("--data-root", default=os.environ.get("SYN4D_DATA_ROOT"), help="release root (default: $SYN4D_DATA_ROOT)")
    p.add_argument("--manifest", help="sequence index (default: sequences.jsonl / manifest.jsonl of the release)")
    p.add_argument("--tracking-gt", default=os.environ.get("SYN4D_TRACKING_GT"), help="tracking_gt folder (default: $SYN4D_TRACKING_GT or the release's)")
    p.add_argument("--tasks", nargs="+", default=list(core.TASKS), choices=list(core.TASKS))
    p.add_argument("--depth-align", default="scale", choices=list(core.DEPTH_ALIGNS))
    p.add_argument("--variants", nargs="+")
    p.add_argument("--scenes", nargs="+")
    p.add_argument("--cameras", nargs="+", type=int)
    p.add_argument("--limit", type=int, default=0, help="score only the first N selected sequences (0 = all)")
    p.add_argument("--strict", action="store_true", help="fail on any missing prediction or task (leaderboard mode)")
    p.add_argument("--output", help="write the report JSON here")
    p.add_argument("--min-coverage", type=float, default=cov.DEFAULT_MIN_COVERAGE,
                   help="warn when a sequence was scored on fewer than this fraction of its GT-valid tracking points / depth pixels (default 0.9)")
    p.add_argument("--with-coverage", action="store_true",
                   help="add the coverage blocks to the report JSON as 'coverage' (default: the official report shape; coverage is printed either way)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.data_root:
        print("error: --data-root (or SYN4D_DATA_ROOT) is required", file=sys.stderr)
        return 2
    try:
        report = evaluate_release(
            args.predictions, args.data_root, args.tasks, args.strict, args.depth_align, args.variants, args.scenes,
            args.cameras, args.limit, args.manifest, args.tracking_gt, min_coverage=args.min_coverage, coverage=True,
        )
    except (PerckitError, FileNotFoundError, RuntimeError, ValueError) as e:
        cause = f" (caused by {type(e.__cause__).__name__}: {e.__cause__})" if e.__cause__ else ""
        print(f"error: {e}{cause}", file=sys.stderr)
        return 2
    blocks = report.pop("coverage")
    if args.with_coverage:
        report["coverage"] = blocks
    text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    for task, block in report["tasks"].items():
        overall = block["overall"]
        keys = {"tracking": ("score", "apd", "dynamic_apd", "epe"), "depth": ("abs_rel", "delta1", "rmse"), "pose": ("ate_rmse", "rpe_translation_rmse", "rpe_rotation_mean_deg")}[task]
        print(f"{task:>9s} ({overall['num_sequences']} sequences): " + ", ".join(f"{k} {overall[k]:.6f}" for k in keys if k in overall))
    for task, block in sorted(blocks.items()):
        o = block["overall"]
        what = "points" if task == "tracking" else "pixels"
        print(
            f"{task:>9s} coverage: {o['coverage']:.6f} of GT-valid {what} scored ({o['scored']} of {o['gt_valid']}), "
            f"lowest sequence {o['min_sequence_coverage']:.6f}, {o['num_sequences_below_min_coverage']} below {o['min_coverage']:g}"
            if o["coverage"] is not None and o["min_sequence_coverage"] is not None
            else f"{task:>9s} coverage: no GT-valid {what}"
        )
    print(f"{len(report['failures'])} failure(s)")
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"report written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
