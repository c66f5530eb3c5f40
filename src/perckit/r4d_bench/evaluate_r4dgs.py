"""The track-ID evaluator under the official script's name (``evaluation/evaluate_r4dgs.py``).

    python -m perckit.r4d_bench.evaluate_r4dgs \\
        --queries evaluation/R4D-Bench_queries.json --predictions my_tracks.json --output report.json

A thin alias of :mod:`perckit.r4d_bench.evaluate_track_id`: the same flags, the same printed summary, the same
report JSON and exit codes. Nothing is implemented here."""

from __future__ import annotations

import functools

from .evaluate_track_id import build_parser, run, main as _main

__all__ = ["PROG", "build_parser", "main", "run"]  # build_parser and run: evaluate_track_id's, the one implementation
PROG = "python -m perckit.r4d_bench.evaluate_r4dgs"
main = functools.partial(_main, prog=PROG)  # main(argv=None) -> exit code


if __name__ == "__main__":
    raise SystemExit(main())
