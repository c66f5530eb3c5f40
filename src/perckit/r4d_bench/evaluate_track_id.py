"""Score R4D-Bench track-ID predictions from the official file format (drop-in for evaluate_r4dgs.py).

    python -m perckit.r4d_bench.evaluate_track_id \\
        --queries evaluation/R4D-Bench_queries.json --predictions my_tracks.json --output report.json

``python -m perckit.r4d_bench.evaluate_r4dgs`` (the official script's name) runs this same module."""

from __future__ import annotations

import argparse
from typing import Sequence

from ..hf import cli
from . import metric as core
from .read import load_track_predictions
from .rows import track_ground_truth_rows

SUMMARY_KEYS = core.TRACK_KEYS + ("micro_precision", "micro_recall", "micro_f1", "num_queries")
PROG = "python -m perckit.r4d_bench.evaluate_track_id"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="R4D-Bench (referring segmentation in dynamic 4D scenes): "
                                "precision / recall / F1 and exact match of predicted target track-id sets, "
                                "macro and micro.")
    p.add_argument("--queries", required=True, help="evaluation/R4D-Bench_queries.json (the ground truth)")
    p.add_argument("--predictions", help="{query_id: [track ids]} or {query_id: {'target_track_ids': [...]}}")
    p.add_argument("--output", help="write the report JSON here")
    cli.add_query_filters(p)
    p.add_argument("--self-check", action="store_true", help="score the ground truth against itself")
    return p


def run(args: argparse.Namespace) -> dict:
    references = track_ground_truth_rows(args.queries)
    predictions = cli.predictions_or_self_check(
        args, lambda: [{"query_id": r["query_id"], "target_track_ids": r["target_track_ids"]} for r in references],
        load_track_predictions,
    )
    return core.track_id(
        predictions, references, only_query_prefix=args.only_query_prefix, only_queries=cli.split_list(args.only_queries) or None
    )


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    return cli.run_guarded(lambda a: cli.finish(run(a), a.output, a.self_check, SUMMARY_KEYS, SUMMARY_KEYS[:-1]),
                           build_parser(prog).parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
