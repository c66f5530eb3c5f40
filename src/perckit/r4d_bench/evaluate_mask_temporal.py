"""Score R4D-Bench mask predictions from the official file formats (drop-in for evaluate_mask_temporal.py).

    python -m perckit.r4d_bench.evaluate_mask_temporal \\
        --predictions preds.json --ground-truth scripts/new_predictions_ground_truth_all_queries.json \\
        --queries-meta evaluation/R4D-Bench_queries.json --repo-root . --output report.json
"""

from __future__ import annotations

import argparse
from typing import Sequence

from ..hf import cli
from ..errors import OptionError
from . import features as feats, metric as core
from .read import load_mask_predictions
from .rows import ground_truth_rows

SUMMARY_KEYS = core.GROUP_KEYS + ("num_ignored_prediction_frames", "num_existence_frames_without_mask", "num_missing_predictions")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m perckit.r4d_bench.evaluate_mask_temporal",
        description="R4D-Bench (referring segmentation in dynamic 4D scenes): mask metrics from the official "
        "prediction JSON shapes. First the R4D-Bench-QA protocol keys, acc (frame-wise temporal activation "
        "accuracy) and viou; then mIoU, mAcc, temporal Acc, existence Acc (= acc), vIoU@R, and the diagnostics "
        "tIoU and temporal P/R, and the overall IoU.",
    )
    p.add_argument("--predictions", help="prediction JSON: {query_id: {'frames': {'1': 'mask.png'}}} or {query_id: [{frame_id, mask_path}]}")
    p.add_argument("--ground-truth", required=True, help="dense GT JSON, e.g. scripts/new_predictions_ground_truth_all_queries.json")
    p.add_argument("--queries-meta", required=True, help="evaluation/R4D-Bench_queries.json")
    p.add_argument("--repo-root", default=".", help="release root; mask paths in --predictions resolve relative to it "
                   "unless absolute, and a relative one must stay under it (default: .)")
    p.add_argument("--allow-absolute-paths", action="store_true",
                   help="no effect, kept so that existing command lines keep working: absolute mask paths in "
                   "--predictions are always accepted now")
    p.add_argument("--output", help="write the report JSON here")
    p.add_argument("--iou-threshold", type=float, default=0.5, help="threshold of temporal_acc, inclusive (default 0.5)")
    cli.add_query_filters(p)
    p.add_argument("--debug-query", help="print the per-frame IoU table of this query")
    p.add_argument("--self-check", action="store_true", help="score the ground truth against itself; every key must be 1.0")
    p.add_argument("--evaluated-frames", default="annotated_and_existence", choices=core.EVALUATED_FRAMES)
    p.add_argument("--macc-mode", default="class_mean", choices=core.MACC_MODES)
    p.add_argument("--resize-predictions", default=None, choices=["nearest", "pil", "opencv"],
                   help="resize predictions of another size with nearest neighbour: PIL's rule (pil, also nearest: "
                   "ReferGaussian's) or OpenCV's INTER_NEAREST (opencv); default: an error")
    p.add_argument("--resize-mismatched", default=None, choices=["nearest", "pil", "opencv"],
                   help="deprecated alias of --resize-predictions (warns)")
    p.add_argument("--mask-source", default="segmentation", choices=["segmentation", "mask_image"], help="GT geometry: segmentation (default) or the PNG paths of a *_with_paths file")
    return p


def run(args: argparse.Namespace) -> dict:
    rows = ground_truth_rows(args.ground_truth, args.queries_meta, args.repo_root, args.mask_source)
    predictions = cli.predictions_or_self_check(
        args, lambda: [feats.to_metric_prediction(r) for r in rows],
        lambda path: load_mask_predictions(path, args.repo_root),  # absolute paths: the user's own files
    )
    references = [feats.to_metric_reference(r) for r in rows]
    opts = core.MaskTemporalOptions(
        iou_threshold=args.iou_threshold, evaluated_frames=args.evaluated_frames, macc_mode=args.macc_mode,
        resize_predictions=getattr(args, "resize_predictions", None),
        **({"resize_mismatched": args.resize_mismatched} if getattr(args, "resize_mismatched", None) else {}),  # deprecated flag: warns
        only_query_prefix=args.only_query_prefix, only_queries=cli.split_list(args.only_queries) or None,
    )
    # As the official script: a query absent from the prediction file is scored as empty (strict=False).
    pairs = core.match_by_query_id(predictions, references, opts.selects, strict=False)
    scores = [core.score_query(p, r, opts) for p, r in pairs]
    report = core.reduce_mask_temporal(scores)
    report["num_missing_predictions"] = sum(1 for p, _ in pairs if p is None)
    if args.debug_query:
        if args.debug_query not in {r["query_id"] for r in references}:
            raise OptionError(f"--debug-query {args.debug_query!r} is not a query of {args.ground_truth}")
        for s in scores:
            if s.query_id == args.debug_query:
                print(f"query {s.query_id} ({s.scene}, negative={s.is_negative}): frame_id IoU")
                for fid, iou in s.frame_ious:
                    print(f"  {fid:>8d}  {iou:.6f}")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run_guarded(
        lambda a: cli.finish(run(a), a.output, a.self_check, SUMMARY_KEYS, core.GROUP_KEYS[:-1], core.PAPER_KEYS),
        build_parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
