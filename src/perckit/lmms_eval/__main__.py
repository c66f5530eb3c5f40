"""python -m perckit.lmms_eval BENCHMARK DATASET --output DIR: write a task folder (a task YAML and its module) reading
a perckit export, with no absolute path in it (perckit.lmms_eval.write_task); then run
lmms-eval --include_path DIR --tasks <the printed task name>."""

from __future__ import annotations

import argparse
import sys

from ..errors import PerckitError
from . import TASKS, write_task


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perckit.lmms_eval", description=__doc__)
    parser.add_argument("benchmark", choices=sorted(TASKS))
    parser.add_argument("dataset", help="a perckit export folder, a local copy of a pushed one, or a Hub repository id")
    parser.add_argument("--output", required=True, help="the folder to write the task YAML into (lmms-eval --include_path)")
    parser.add_argument("--task", default=None, help="the task name (default: <packaged task>_<dataset name>)")
    parser.add_argument("--split", default=None)
    parser.add_argument("--config", default=None)
    args = parser.parse_args(argv)
    try:
        path = write_task(args.benchmark, args.dataset, args.output, args.task, args.split, args.config)
    except PerckitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    task = path.stem
    print(f"run it with: lmms-eval --include_path {path.parent} --tasks {task} ...")
    print(f"wrote the lmms-eval task {task} ({path.name} and {task}.py) to {path.parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
