"""Write the synthetic sample release of each benchmark (the ones tests and the demo build from).

    python scripts/write_fixtures.py OUTPUT_DIR [--benchmark r4d_bench] [--seed 0]
"""

import argparse
from pathlib import Path

from perckit.benchmarks import NAMES
from perckit.sample_releases import write_release


def main() -> int:
    generators = sorted(NAMES)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("output", type=Path)
    p.add_argument("--benchmark", action="append", choices=sorted(generators), help="default: all")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    for name in args.benchmark or sorted(generators):
        fx = write_release(name, args.output / name, seed=args.seed)
        print(f"{name}: {len(fx.files)} files under {args.output / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
