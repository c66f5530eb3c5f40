"""Score a directory of official Syn4D NPZ predictions (drop-in for the official ``evaluate.py``).

    python -m perckit.syn4d.evaluate --predictions preds/ --data-root /path/to/Syn4D --tasks tracking,depth,pose \\
        --strict --output summary.json

The official argument syntax is accepted as it is (``--tasks``, ``--variants``, ``--scenes`` and ``--cameras``
as comma-separated strings; the space-separated form works too), and the run prints what the official script
prints: ``[i/N] <sequence_id>`` per scored record, the JSON of each task's overall, ``wrote <output>;
failures=<n>``. Before scoring, the files the run reads are verified against ``SHA256SUMS`` (where the card puts
it, beside ``data/tracking_gt``, also when ``--tracking-gt`` is given apart from ``--data-root``; a run that is not
verified says so in one line on standard error) and the release's ``protocol.json`` is checked against the rules
implemented here.

Reads one sequence at a time (full-size depth never goes through ``evaluate``'s Arrow cache) and shares the
per-sequence functions and the aggregation with ``metrics/syn4d``, so both give identical numbers."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..hf import cli
from ..errors import OptionError, check_choice, inferred_reading
from . import metric as core
from .layout import ReleasePaths, SequenceRecord, prediction_path, release_files, resolve_release, select_records
from .metric import baselines as published, protocol as proto
from .read import checksum_verifier, load_records, logger, read_npz, unverified_reason
from .rows import read_sequence_gt


class UnverifiedReleaseWarning(UserWarning):
    """A Syn4D run whose release files were not verified against ``SHA256SUMS`` (none where the card puts it, or
    verification turned off)."""


def reference_for_task(task: str, record: SequenceRecord, paths: ReleasePaths) -> dict:
    """The metric reference of one task of one sequence (:data:`perckit.syn4d.metric.REFERENCE_KEYS`), read from
    the release by :func:`perckit.syn4d.rows.read_sequence_gt` (raises when the ground truth is missing)."""
    gt = read_sequence_gt(record, paths, task, required=True)
    return {"sequence_id": record.sequence_id, "variant": record.variant, "scene": record.scene,
            "frame_indices": list(record.frame_indices), **{k: gt[k] for k in core.REFERENCE_KEYS[task]}}


def evaluate_release(predictions_dir: str | Path, data_dir: str | Path, tasks: Iterable[str] = core.TASKS,
                     strict: bool = True, depth_align: str = "scale", variants: Iterable[str] | None = None,
                     scenes: Iterable[str] | None = None, cameras: Iterable[int] | None = None, limit: int = 0,
                     manifest: str | Path | None = None, tracking_gt: str | Path | None = None,
                     challenge_dir: str | Path | None = None, min_coverage: float = core.DEFAULT_MIN_COVERAGE,
                     coverage: bool = False, verify_checksums: bool | None = None, check_protocol: bool = True,
                     compare_baselines: bool = False, progress: Callable[[int, int, str], None] | None = None,
                     notice: Callable[[str], None] | None = None) -> dict:
    """The official evaluation loop over a release; returns the official summary shape.

    Before anything is scored: ``verify_checksums`` (``None``: when ``SHA256SUMS`` is found; ``True``: require
    it; ``False``: skip) verifies every listed file the run will read (the index, and the tracking NPYs, depth
    EXRs and camera CSVs of the selected sequences and tasks, and protocol.json) with the builder's verifier
    (:func:`perckit.syn4d.read.checksum_verifier`); a mismatch raises :class:`~perckit.errors.ReleaseFormatError`
    naming the file, in lax mode too (it is the release that is wrong, not a prediction). ``SHA256SUMS`` is
    looked for where the card puts it, beside ``data/tracking_gt``: ``B/SHA256SUMS``, and for a ``tracking_gt``
    given apart the one beside its ``data/`` folder. A run that is not verified (no ``SHA256SUMS`` there, or
    ``verify_checksums=False``) gives one line saying so and where it looked, to ``notice`` (default: an
    :class:`UnverifiedReleaseWarning`; the command line prints it on standard error as ``warning: <line>``). ``check_protocol`` checks
    the release's ``protocol.json`` (when it has one) against the implemented rules
    (:mod:`perckit.syn4d.metric.protocol`).

    ``progress(i, n, sequence_id)`` is called after each record whose prediction was read, as the official
    loop prints ``[i/N] <sequence_id>``. ``compare_baselines=True`` adds ``"baselines"``: the card's published
    table with this run's overall as one more row (:func:`perckit.syn4d.metric.baselines.comparison`).

    The coverage of every scored tracking / depth sequence (:mod:`perckit.syn4d.metric`) is computed
    on the way: one :class:`~perckit.syn4d.metric.LowCoverageWarning` for the run when a sequence is
    below ``min_coverage``; ``coverage=True`` adds the blocks as ``"coverage": {task: {"overall",
    "sequences"}}`` (off by default: the report keeps the official shape)."""
    # A string is the official comma-separated form ("tracking,depth"), never a sequence of letters.
    tasks, variants, scenes, cameras = (cli.split_list([v]) if isinstance(v, str) else v
                                        for v in (tasks, variants, scenes, cameras))
    tasks = sorted(set(tasks))
    if not tasks:
        raise OptionError("option 'tasks': expected at least one of ['depth', 'pose', 'tracking'], got none")
    for t in tasks:
        check_choice("tasks", t, core.TASKS)
    if verify_checksums not in (None, True, False):
        raise OptionError(f"option 'verify_checksums': expected None, True or False, got {verify_checksums!r}")
    options = core.Syn4DOptions(strict=strict, depth_align=depth_align, min_coverage=min_coverage)
    paths = resolve_release(data_dir, tracking_gt, challenge_dir, manifest)
    verifier = checksum_verifier(paths, verify_checksums, " (pass --no-verify-checksums to skip)", tracking="tracking" in tasks)
    reason = unverified_reason(paths, verify_checksums, tracking="tracking" in tasks)
    if reason is not None:
        line = f"this Syn4D run is not verified against SHA256SUMS: {reason}"
        if notice is None:
            warnings.warn(line, UnverifiedReleaseWarning, stacklevel=2)
        else:
            notice(line)
    records = select_records(load_records(paths), variants, scenes, cameras, limit)
    protocol_file = proto.find_protocol(paths) if check_protocol else None
    if verifier is not None:
        files = release_files(paths, records, tracking="tracking" in tasks, depth="depth" in tasks, camera="pose" in tasks)
        verifier.check_all(itertools.chain([protocol_file], files))
    if protocol_file is not None:  # [inferred] fields: another shape is one warning naming the file, then skipped
        where = repr(str(protocol_file))
        inferred_reading(lambda: proto.check_protocol(proto.read_protocol(protocol_file), where), None, where, logger)
    rows: dict[str, list[dict]] = {}  # filled as rows come: tasks in the order of their first row, as the official
    entries: dict[str, list[dict]] = {t: [] for t in tasks if t in core.COVERAGE_TASKS}
    policy = core.FailurePolicy(options.strict)
    for number, record in enumerate(records, 1):
        npz = prediction_path(predictions_dir, record.sequence_id)
        if not npz.is_file():
            policy.missing(record.sequence_id, npz)
            continue
        prediction = read_npz(npz)
        for task in tasks:
            # the ground truth is read inside the task's error handling (as the official loop: a missing GT file
            # is a task failure in lax mode), then scored as the metric scores it
            scored = policy.attempt(record.sequence_id, task, lambda: core.score_sequence(
                task, reference_for_task(task, record, paths), prediction, options))
            if scored is not None:
                rows.setdefault(task, []).append(scored[0])
                if scored[1] is not None:
                    entries[task].append(scored[1])
        if progress is not None:
            progress(number, len(records), record.sequence_id)
    report = {"protocol": core.PROTOCOL, "requested_sequences": len(records),
              "tasks": {t: core.aggregate(r) for t, r in rows.items()}, "failures": policy.failures}
    blocks = {t: core.summarize_coverage(e, options.min_coverage) for t, e in entries.items() if e}
    core.warn_if_low(blocks, options.min_coverage)
    if coverage:
        report["coverage"] = blocks
    if compare_baselines:
        report["baselines"] = published.comparison(report)
    return report


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, with ``--tasks``, ``--variants``, ``--scenes`` and ``--cameras`` split into lists
    (``args.tasks`` sorted, as the official loop visits them); an unknown task or a non-integer camera is a
    usage error (exit 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    tasks = cli.split_list(args.tasks) if args.tasks is not None else list(core.TASKS)
    unknown = sorted(set(tasks) - set(core.TASKS))
    if unknown:
        parser.error(f"argument --tasks: expected a comma-separated subset of tracking,depth,pose, got the unknown task(s) {unknown}")
    if not tasks:
        parser.error("argument --tasks: expected at least one of tracking,depth,pose, got none")
    args.tasks = sorted(set(tasks))
    args.variants = cli.split_list(args.variants) or None
    args.scenes = cli.split_list(args.scenes) or None
    cameras = cli.split_list(args.cameras)
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
                   help="do not verify the files read against SHA256SUMS (default: verify when it exists beside "
                   "data/tracking_gt, also beside a --tracking-gt given apart; an unverified run says so on stderr)")
    p.add_argument("--no-check-protocol", dest="check_protocol", action="store_false",
                   help="do not check the release's protocol.json against the rules perckit implements")
    p.add_argument("--compare-baselines", action="store_true",
                   help="print the card's published baseline table with this run's overall as one more row, and add it to "
                   "the report JSON as 'baselines'")
    p.add_argument("--min-coverage", type=float, default=core.DEFAULT_MIN_COVERAGE,
                   help="warn when a sequence was scored on fewer than this fraction of its GT-valid tracking points / depth pixels (default 0.9)")
    p.add_argument("--with-coverage", action="store_true",
                   help="add the coverage blocks to the report JSON as 'coverage' (default: the official report shape; coverage is printed either way)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The official command line: every error is one line ``error: <message>`` (with its cause for a strict task
    failure) and exit code 2 (:func:`perckit.hf.cli.run_guarded`)."""
    return cli.run_guarded(_run, parse_args(argv))


def _run(args: argparse.Namespace) -> int:
    if not args.data_root:
        raise OptionError("--data-root (or SYN4D_DATA_ROOT) is required")
    report = evaluate_release(args.predictions, args.data_root, args.tasks, args.strict, args.depth_align, args.variants,
                              args.scenes, args.cameras, args.limit, args.manifest, args.tracking_gt,
                              min_coverage=args.min_coverage, coverage=True, verify_checksums=args.verify_checksums,
                              check_protocol=args.check_protocol, compare_baselines=args.compare_baselines,
                              progress=lambda i, n, sid: print(f"[{i}/{n}] {sid}", flush=True),
                              notice=lambda line: print(f"warning: {line}", file=sys.stderr, flush=True))
    blocks = report.pop("coverage")
    if args.with_coverage:
        report["coverage"] = blocks
    for task, block in sorted(blocks.items()):
        print(_coverage_line(task, block["overall"]))
    if args.output:
        cli.write_json(args.output, report)
    # The official closing lines: each task's overall as JSON, then where the report went and the failures.
    print(json.dumps({task: block["overall"] for task, block in report["tasks"].items()}, indent=2))
    if args.compare_baselines:
        print(published.format_comparison(report["baselines"]))
    written = f"wrote {args.output}" if args.output else "no report written (no --output)"
    print(f"{written}; failures={len(report['failures'])}")
    return cli.EXIT_OK


def _coverage_line(task: str, o: dict) -> str:
    what = "points" if task == "tracking" else "pixels"
    if o["coverage"] is None or o["min_sequence_coverage"] is None:
        return f"{task:>9s} coverage: no GT-valid {what}"
    return (f"{task:>9s} coverage: {o['coverage']:.6f} of GT-valid {what} scored ({o['scored']} of {o['gt_valid']}), "
            f"lowest sequence {o['min_sequence_coverage']:.6f}, {o['num_sequences_below_min_coverage']} below "
            f"{o['min_coverage']:g}")


if __name__ == "__main__":
    raise SystemExit(main())
