"""``perckit`` / ``python -m perckit``: the command-line entry point."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="perckit", description="Typed Hugging Face datasets and evaluate metrics for perception benchmarks.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="build every benchmark from its sample release, score sample predictions, write a report")
    demo.add_argument("--output", default="build/demo", help="folder of the sample releases, caches and the report (default build/demo)")
    fixture = sub.add_parser("write-fixture", help="write a benchmark's synthetic sample release")
    fixture.add_argument("benchmark", choices=["r4d_bench"])
    fixture.add_argument("output", help="release root to write")
    fixture.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import main as demo_main

        return demo_main(args.output)
    if args.command == "write-fixture":
        from .fixtures.base import write_release

        fx = write_release(args.benchmark, args.output, seed=args.seed)
        print(f"wrote {len(fx.files)} files to {args.output}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
