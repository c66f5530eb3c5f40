"""Score a directory of official Syn4D NPZ predictions (drop-in for the official ``evaluate.py``).

    python -m perckit.syn4d.evaluate --predictions preds/ --data-root /path/to/Syn4D --tasks tracking,depth,pose \\
        --strict --output summary.json

The official argument syntax is accepted as it is (``--tasks``, ``--variants``, ``--scenes`` and ``--cameras``
as comma-separated strings; the space-separated form works too), and the run prints what the official script
prints: ``[i/N] <sequence_id>`` per scored record, the JSON of each task's overall, ``wrote <output>;
failures=<n>``. Before scoring, the files the run reads are verified against ``SHA256SUMS`` and the release's
``protocol.json`` is checked against the rules implemented here.

Reads one sequence at a time (full-size depth never goes through ``evaluate``'s Arrow cache) and shares the
per-sequence functions and the aggregation with ``metrics/syn4d``, so both give identical numbers.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..errors import OptionError, PerckitError, ReleaseNotFoundError, check_choice
from . import baselines as published
from . import coverage as cov
from . import io
from . import metrics as core
from . import protocol as proto
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
    verify_checksums: bool | None = None,
    check_protocol: bool = True,
    compare_baselines: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict:
    """The official evaluation loop over a release; returns the official summary shape.

    Before anything is scored: ``verify_checksums`` (``None``: when the release has ``SHA256SUMS``; ``True``:
    require it; ``False``: skip) verifies every listed file the run will read (the index, and the tracking
    NPYs, depth EXRs and camera CSVs of the selected sequences and tasks, and protocol.json); a mismatch raises
    :class:`~perckit.errors.ReleaseFormatError` naming the file, in lax mode too (it is the release that is
    wrong, not a prediction). ``check_protocol`` checks the release's ``protocol.json`` (when it has one)
    against the implemented rules (:mod:`perckit.syn4d.protocol`).

    ``progress(i, n, sequence_id)`` is called after each record whose prediction was read, as the official
    loop prints ``[i/N] <sequence_id>``. ``compare_baselines=True`` adds ``"baselines"``: the card's published
    table with this run's overall as one more row (:func:`perckit.syn4d.baselines.comparison`).

    The coverage of every scored tracking / depth sequence (:mod:`perckit.syn4d.coverage`) is computed
    on the way: one :class:`~perckit.syn4d.coverage.LowCoverageWarning` for the run when a sequence is
    below ``min_coverage``; ``coverage=True`` adds the blocks as ``"coverage": {task: {"overall",
    "sequences"}}`` (off by default: the report keeps the official shape)."""
    # A string is the official comma-separated form ("tracking,depth"), never a sequence of letters.
    tasks, variants, scenes, cameras = (
        _split_list([v]) if isinstance(v, str) else v for v in (tasks, variants, scenes, cameras)
    )
    tasks = sorted(set(tasks))
    if not tasks:
        raise OptionError("option 'tasks': expected at least one of ['depth', 'pose', 'tracking'], got none")
    for t in tasks:
        check_choice("tasks", t, core.TASKS)
    if verify_checksums not in (None, True, False):
        raise OptionError(f"option 'verify_checksums': expected None, True or False, got {verify_checksums!r}")
    options = core.Syn4DOptions(strict=strict, depth_align=depth_align, min_coverage=min_coverage)
    paths = rel.resolve_release(data_dir, tracking_gt, challenge_dir, manifest)
    if verify_checksums and paths.checksums is None:
        raise ReleaseNotFoundError(
            f"verify_checksums=True but {str(paths.benchmark / 'SHA256SUMS')!r} does not exist (pass --no-verify-checksums to skip)"
        )
    records = rel.select_records(rel.load_records(paths), variants, scenes, cameras, limit)
    protocol_file = proto.find_protocol(paths) if check_protocol else None
    if verify_checksums is not False and paths.checksums is not None:
        files = rel.release_files(paths, records, tracking="tracking" in tasks, depth="depth" in tasks, camera="pose" in tasks)
        rel.ChecksumVerifier(paths).check_all(itertools.chain([protocol_file], files))
    if protocol_file is not None:
        proto.check_protocol(proto.read_protocol(protocol_file), repr(str(protocol_file)))
    rows: dict[str, list[dict]] = {}  # filled as rows come: tasks in the order of their first row, as the official
    entries: dict[str, list[dict]] = {t: [] for t in tasks if t in cov.TASKS}
    failures: list[dict] = []
    for number, record in enumerate(records, 1):
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
            rows.setdefault(task, []).append({"sequence_id": record.sequence_id, "variant": record.variant, "scene": record.scene, **metrics})
        if progress is not None:
            progress(number, len(records), record.sequence_id)
    report = {
        "protocol": core.PROTOCOL,
        "requested_sequences": len(records),
        "tasks": {t: core.aggregate(r) for t, r in rows.items()},
        "failures": failures,
    }
    blocks = {t: cov.summarize(e, options.min_coverage) for t, e in entries.items() if e}
    cov.warn_if_low(blocks, options.min_coverage)
    if coverage:
        report["coverage"] = blocks
    if compare_baselines:
        report["baselines"] = published.comparison(report)
    return report


def _split_list(values: Sequence[str] | None) -> list[str]:
    """The official comma-separated form (``tracking,depth,pose``) and the space-separated one, or both mixed;
    empty parts are dropped (``--variants ""`` selects every variant, as the official)."""
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with ``--tasks``, ``--variants``, ``--scenes`` and ``--cameras`` split into lists
    (``args.tasks`` sorted, as the official loop visits them); an unknown task or a non-integer camera is a
    usage error (exit 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    tasks = _split_list(args.tasks) if args.tasks is not None else list(core.TASKS)
    unknown = sorted(set(tasks) - set(core.TASKS))
    if unknown:
        parser.error(f"argument --tasks: expected a comma-separated subset of tracking,depth,pose, got the unknown task(s) {unknown}")
    if not tasks:
        parser.error("argument --tasks: expected at least one of tracking,depth,pose, got none")
    args.tasks = sorted(set(tasks))
    args.variants = _split_list(args.variants) or None
    args.scenes = _split_list(args.scenes) or None
    cameras = _split_list(args.cameras)
    try:
        args.cameras = [int(c) for c in cameras] or None
    except ValueError:
        parser.error(f"argument --cameras: expected comma-separated integers such as 0,1, got {','.join(cameras)!r}")
    return args


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m perckit.syn4d.evaluate",
        description="Syn4D: score per-sequence NPZ predictions (tracking_xyz, depth, camera_c2w, frame_indices) "
        "exactly as the official evaluator, and write its report JSON.",
    )
    p.add_argument("--predictions", required=True, help="folder of <variant>/<scene>/<sequence>.npz")
    p.add_argument("--data-root", default=os.environ.get("SYN4D_DATA_ROOT"),
                   help="the release root (the folder holding benchmark/) or, as the official, the challenge_eval folder "
                   "(default: $SYN4D_DATA_ROOT)")
    p.add_argument("--manifest", help="sequence index (default: sequences.jsonl / manifest.jsonl of the release)")
    p.add_argument("--tracking-gt", default=os.environ.get("SYN4D_TRACKING_GT"), help="tracking_gt folder (default: $SYN4D_TRACKING_GT or the release's)")
    p.add_argument("--tasks", nargs="+", metavar="TASKS",
                   help="comma-separated tasks, as the official: tracking,depth,pose (the default); a space-separated list works too")
    p.add_argument("--depth-align", default="scale", choices=list(core.DEPTH_ALIGNS))
    p.add_argument("--variants", nargs="+", metavar="VARIANTS", help="keep only these variants, comma-separated (e.g. og,sim; default: all)")
    p.add_argument("--scenes", nargs="+", metavar="SCENES", help="keep only these scenes, comma-separated (default: all)")
    p.add_argument("--cameras", nargs="+", metavar="CAMERAS", help="keep only these cameras, comma-separated (e.g. 0,1; default: all)")
    p.add_argument("--limit", type=int, default=0, help="score only the first N selected sequences (0 or less = all)")
    p.add_argument("--strict", action="store_true", help="fail on any missing prediction or task (leaderboard mode)")
    p.add_argument("--output", help="write the report JSON here (the official requires it; without it nothing is written)")
    p.add_argument("--no-verify-checksums", dest="verify_checksums", action="store_false", default=None,
                   help="do not verify the files read against the release's SHA256SUMS (default: verify when it exists)")
    p.add_argument("--no-check-protocol", dest="check_protocol", action="store_false",
                   help="do not check the release's protocol.json against the rules perckit implements")
    p.add_argument("--compare-baselines", action="store_true",
                   help="print the card's published baseline table with this run's overall as one more row, and add it to "
                   "the report JSON as 'baselines'")
    p.add_argument("--min-coverage", type=float, default=cov.DEFAULT_MIN_COVERAGE,
                   help="warn when a sequence was scored on fewer than this fraction of its GT-valid tracking points / depth pixels (default 0.9)")
    p.add_argument("--with-coverage", action="store_true",
                   help="add the coverage blocks to the report JSON as 'coverage' (default: the official report shape; coverage is printed either way)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.data_root:
        print("error: --data-root (or SYN4D_DATA_ROOT) is required", file=sys.stderr)
        return 2
    try:
        report = evaluate_release(
            args.predictions, args.data_root, args.tasks, args.strict, args.depth_align, args.variants, args.scenes,
            args.cameras, args.limit, args.manifest, args.tracking_gt, min_coverage=args.min_coverage, coverage=True,
            verify_checksums=args.verify_checksums, check_protocol=args.check_protocol,
            compare_baselines=args.compare_baselines, progress=lambda i, n, sid: print(f"[{i}/{n}] {sid}", flush=True),
        )
    except (PerckitError, FileNotFoundError, RuntimeError, ValueError) as e:
        cause = f" (caused by {type(e.__cause__).__name__}: {e.__cause__})" if e.__cause__ else ""
        print(f"error: {e}{cause}", file=sys.stderr)
        return 2
    blocks = report.pop("coverage")
    if args.with_coverage:
        report["coverage"] = blocks
    for task, block in sorted(blocks.items()):
        o = block["overall"]
        what = "points" if task == "tracking" else "pixels"
        print(
            f"{task:>9s} coverage: {o['coverage']:.6f} of GT-valid {what} scored ({o['scored']} of {o['gt_valid']}), "
            f"lowest sequence {o['min_sequence_coverage']:.6f}, {o['num_sequences_below_min_coverage']} below {o['min_coverage']:g}"
            if o["coverage"] is not None and o["min_sequence_coverage"] is not None
            else f"{task:>9s} coverage: no GT-valid {what}"
        )
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    # The official closing lines: each task's overall as JSON, then where the report went and the failures.
    print(json.dumps({task: block["overall"] for task, block in report["tasks"].items()}, indent=2))
    if args.compare_baselines:
        print(published.format_comparison(report["baselines"]))
    written = f"wrote {args.output}" if args.output else "no report written (no --output)"
    print(f"{written}; failures={len(report['failures'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
