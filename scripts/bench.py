"""Benchmarks of every perckit builder and metric against its floor or baseline: one table of every target.

    python scripts/bench.py                  # every case, sized to finish within 10 minutes on 2 cores with another process busy
    python scripts/bench.py --full           # every case at its full size (M4Seg native at 743,463 rows: about 25 minutes)
    python scripts/bench.py --quick          # smaller inputs for every case (a smoke run, about 3 minutes)
    python scripts/bench.py cases syn4d_build refer_iou   # only the cases named (any of CASES), --quick / --full too
    python scripts/bench.py m4seg --source native --sizes 200000 20000 --rounds 2 --workdir /tmp/m4   # the M4Seg case alone

The cases, in the order of the default run, with the wall time of each in an issue 32 default run (2 quiet
cores: 298 s in all, with refer_iou_200k at one round; 398 s in the closing run of 2026-12-04, before the M4Seg cases
went to 3 rounds; see README.md, Speed).
The default run measures every target: a case whose ratio does not depend on the input size runs fewer rounds or
repetitions than ``--full``.

- ``m4seg`` (scripts/bench_floors.py), 80 s: the builds of the synthetic train splits (tiled from 4,096 generated
  examples) beside their floors, every run in a fresh process (the child reports the CPU and wall seconds of the
  work alone; the parent reads its peak RSS). Parquet at the real 743,463 rows, 3 rounds of floor, num_proc=1 and
  num_proc=2 build, the peak-RSS baseline at 50,000 rows; native json.gz at 50,000 rows (build 5-7 s of CPU,
  floor 4-5 s), 3 rounds of floor and build, baseline at 10,000 (``--full``: 743,463 rows, 2 rounds, baseline 20,000).
  Targets: build / floor in CPU seconds <= 1.5 for both sources, peak RSS large / small <= 1.25, Parquet num_proc=2
  speedup >= 1.6 (wall); each from 50,000 rows (``--quick``: 10,000 and 2,000 rows, reported only).
- ``refcoco_m_build`` (20 s) and ``syn4d_build`` (95 s), in ``--full`` and by name only (no target: ratios
  reported; smaller inputs would raise the ratios through the builds' fixed costs): the RefCOCO-M ``expressions``
  build (600 images) and the Syn4D ``tracking`` (256 sequences, Q=512) and ``challenge`` (8 sequences, depth
  360x640) builds against their floors, in this process, interleaved, warm cache, best of 2.
- ``mask_temporal`` 18 s, ``refer_iou`` 6 s, ``refer_iou_cli`` 5 s (the command line's start-up),
  ``refer_iou_200k`` 60 s a round (refer_iou at 200k pairs four ways, 2 rounds; ``--full`` 3), ``syn4d`` 13 s,
  ``edit_quality_frame`` 5 s, ``edit_quality_num_proc`` 20 s (3 rounds of num_proc=1, num_proc=2 and the
  machine's ceiling), ``r4d_build`` 50 s (3 paired cold-cache repetitions; ``--full`` 5), ``reason_av_edit_build``
  25 s (3 clips per sub-track; ``--full`` 5), ``convert_previews`` 48 s: scripts/bench_cases.py.

Floors: the work no build can skip, done with the bare libraries (scripts/bench_floors.py's docstring says what
each one does). The script ends with one table, ``case  measure  value  target  met``, then each row's absolute
figures, and exits 0 whenever it ran (a missed target is reported, not an error; a failing case becomes a FAILED
row).
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cases  # noqa: E402
import bench_floors  # noqa: E402

#: Every case, in the order of the default run (M4Seg first, while this process is small).
CASES: dict[str, Callable[..., list[dict]]] = {
    "m4seg": bench_floors.case_m4seg,
    "refcoco_m_build": bench_floors.case_refcoco_m_build,
    "syn4d_build": bench_floors.case_syn4d_build,
    **bench_cases.CASES,
}


def _fmt_value(v: float) -> str:
    if v != v:  # NaN: a failed case
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"


def print_table(rows: list[dict]) -> None:
    """The one final table (case, measure, value, target, met), then the info line of each row."""
    print()
    print(f"{'case':22s} {'measure':58s} {'value':>10s}  {'target':8s} {'met':4s}")
    print("-" * 108)
    for r in rows:
        met = "-" if r["ok"] is None else ("yes" if r["ok"] else "NO")
        print(f"{r['case']:22s} {r['measure'][:58]:58s} {_fmt_value(r['value']):>10s}  {r['target'] or '':8s} {met:4s}")
    print()
    for r in rows:
        if r["info"]:
            print(f"  {r['case']} / {r['measure']}: {r['info']}")


def run_cases(names: list[str], quick: bool, kwargs: dict[str, dict] | None = None, full: bool = False) -> list[dict]:
    """Run the named cases in order; a case that raises becomes one FAILED row and the others still run. ``full``
    reaches the cases that take it (the others have one size)."""
    rows: list[dict] = []
    for name in names:
        t0 = time.perf_counter()
        print(f"{name}{' (quick)' if quick else ' (full)' if full else ''}: load average {os.getloadavg()[0]:.2f}", flush=True)
        extra = dict((kwargs or {}).get(name, {}))
        if full and "full" in inspect.signature(CASES[name]).parameters:
            extra["full"] = True
        try:
            rows += CASES[name](quick=quick, **extra)
        except Exception as e:  # reported, not raised
            rows.append({"case": name, "measure": f"FAILED: {type(e).__name__}: {e}"[:58], "value": float("nan"),
                         "target": None, "ok": False, "info": repr(e)[:2000]})
        print(f"  {name}: {time.perf_counter() - t0:.0f}s", flush=True)
    return rows


def _header(what: str, quick: bool, full: bool = False) -> float:
    print(f"perckit bench: {what}{' (quick)' if quick else ' (full)' if full else ''}; {os.cpu_count()} CPU(s), load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return time.perf_counter()


def _footer(rows: list[dict], t0: float) -> int:
    print_table(rows)
    missed = [f"{r['case']}: {r['measure']}" for r in rows if r["ok"] is False]
    print(f"\n{len(rows)} rows, {sum(r['ok'] is True for r in rows)} targets met, {len(missed)} missed"
          + (f" ({'; '.join(missed)})" if missed else "")
          + f"; wall {time.perf_counter() - t0:.0f}s; load average at the end {os.getloadavg()[0]:.2f}")
    return 0


#: Cases with no target (ratios reported), run by ``--full`` and by name but not by the default run.
FULL_ONLY = ("refcoco_m_build", "syn4d_build")


def bench_all(args: argparse.Namespace) -> int:
    names = [n for n in CASES if args.full or args.quick or n not in FULL_ONLY]
    t0 = _header("every case" if len(names) == len(CASES) else f"every case with a target ({', '.join(FULL_ONLY)}: --full)", args.quick, args.full)
    return _footer(run_cases(names, args.quick, full=args.full), t0)


def bench_named(args: argparse.Namespace) -> int:
    names = args.cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s) {unknown}; expected some of {list(CASES)}", file=sys.stderr)
        return 2
    t0 = _header(f"cases {names}", args.quick, args.full)
    return _footer(run_cases(names, args.quick, full=args.full), t0)


def bench_m4seg(args: argparse.Namespace) -> int:
    t0 = _header("M4Seg build vs floor", args.quick, args.full)
    kwargs = {"m4seg": {"sources": args.source, "workdir": Path(args.workdir) if args.workdir else None,
                        "sizes": tuple(args.sizes) if args.sizes else None, "rounds": args.rounds}}
    return _footer(run_cases(["m4seg"], args.quick, kwargs, full=args.full), t0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sizes = p.add_mutually_exclusive_group()
    sizes.add_argument("--quick", action="store_true", help="with no command: smaller inputs for every case")
    sizes.add_argument("--full", action="store_true", help="with no command: every case at its full size (about 25 minutes)")
    sub = p.add_subparsers(dest="command")
    for name, func, helptext in (("all", bench_all, "every case (the default)"),
                                 ("cases", bench_named, f"the cases named, in the order given ({', '.join(CASES)})"),
                                 ("m4seg", bench_m4seg, "the M4Seg builds beside their floors")):
        c = sub.add_parser(name, help=helptext)
        group = c.add_mutually_exclusive_group()
        group.add_argument("--quick", action="store_true", help="smaller inputs (a smoke run)")
        group.add_argument("--full", action="store_true", help="the full sizes")
        c.set_defaults(func=func)
        if name == "cases":
            c.add_argument("cases", nargs="*", help="case names (default: all)")
        if name == "m4seg":
            c.add_argument("--source", nargs="+", choices=["parquet", "native"], help="default: both")
            c.add_argument("--sizes", type=int, nargs=2, metavar=("LARGE", "SMALL"), help="the sizes of every source (default: the plan's)")
            c.add_argument("--rounds", type=int, help="rounds at the large size (default: the plan's)")
            c.add_argument("--workdir", help="keep the generated releases here (reused across runs)")
    # Kept for callers of the former child command; the children now live in bench_floors.py.
    c = sub.add_parser("_m4seg-convert", help=argparse.SUPPRESS)
    c.add_argument("--root", required=True)
    c.add_argument("--source", required=True)
    c.add_argument("--num-proc", type=int, default=1)
    c.add_argument("--cache", required=True)
    c.set_defaults(func=bench_floors.child_convert)
    args = p.parse_args(argv)
    if args.command is None:  # `python scripts/bench.py [--quick | --full]` runs everything
        args = argparse.Namespace(quick=args.quick, full=args.full, func=bench_all)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
