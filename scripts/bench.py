"""Benchmarks of every perckit builder and metric against its floor or baseline: one table of every target.

    python scripts/bench.py                  # everything (meant to stay under 10 minutes on 2 idle cores), one final table
    python scripts/bench.py --quick          # smaller inputs for every case (a smoke run)
    python scripts/bench.py cases syn4d_build refer_iou   # only the cases named (any of CASES), --quick too
    python scripts/bench.py m4seg            # the M4Seg case alone: 20k and 743,463 synthetic train rows
    python scripts/bench.py m4seg --sizes 20000 200000 --source parquet --num-proc 1 2 --repeat 2

The cases, in the order of the default run:

- ``m4seg`` (scripts/bench_floors.py): synthetic train splits at 20k rows and at the real 743,463 rows (quick:
  2k and 10k, one run each; tiled from 4,096 generated examples, ``write_release(..., tile_block=4096)``). Parquet source:
  rounds of its floor, the num_proc=1 and the num_proc=2 build; native source: its floor and the num_proc=1
  build. Every build and every floor runs in a fresh subprocess, which reports the time of the work
  alone; the parent reads its peak RSS from ``os.wait4`` (one process: the child's own ``VmHWM``). Best of 2
  rounds at 20k and, for Parquet, at 743k; one native round at 743k. Targets: Parquet build / floor <= 4 at
  743k rows (num_proc=1), peak RSS at 743k / at 20k <= 1.25, num_proc=2 / num_proc=1 speedup >= 1.6 at 743k;
  the native ratio, the rows/s and the build
  seconds at 743k are reported (with ``--quick`` only the RSS ratio is checked: start-up dominates 10k rows).
- ``refcoco_m_build``, ``syn4d_build`` (scripts/bench_floors.py): the RefCOCO-M ``expressions`` build (600
  images) and the Syn4D ``tracking`` (256 sequences, Q=512) and ``challenge`` (8 sequences, depth 360x640)
  builds against their library floors, in this process, interleaved,
  warm cache, best of 2 (ratios reported; the issue sets no target).
- ``mask_temporal``, ``refer_iou``, ``syn4d`` (metrics) and ``r4d_build``, ``reason_av_edit_build`` (builds
  against reading their files once, cold cache): scripts/bench_cases.py.
- ``refer_iou_cli`` (scripts/bench_cases.py): ``perckit evaluate refer_iou`` in a fresh process, from the command to
  the first score (100 pairs) against ``python -c "import perckit"`` plus the scoring (<= 2), and at 200k pairs its
  wall time and peak RSS against the core function's in its own process (<= 1.2 each; quick: 20k, reported only).
  ``python scripts/bench.py cases refer_iou_cli`` runs it alone.

The script ends with one table, ``case  measure  value  target  met``, then each row's absolute figures, and
exits 0 whenever it ran (a missed target is reported, not an error; a failing case becomes a FAILED row).
"""

from __future__ import annotations

import argparse
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


def run_cases(names: list[str], quick: bool, kwargs: dict[str, dict] | None = None) -> list[dict]:
    """Run the named cases in order; a case that raises becomes one FAILED row and the others still run."""
    rows: list[dict] = []
    for name in names:
        t0 = time.perf_counter()
        print(f"{name}{' (quick)' if quick else ''}: load average {os.getloadavg()[0]:.2f}", flush=True)
        try:
            rows += CASES[name](quick=quick, **(kwargs or {}).get(name, {}))
        except Exception as e:  # reported, not raised
            rows.append({"case": name, "measure": f"FAILED: {type(e).__name__}: {e}"[:58], "value": float("nan"),
                         "target": None, "ok": False, "info": repr(e)[:2000]})
        print(f"  {name}: {time.perf_counter() - t0:.0f}s", flush=True)
    return rows


def _header(what: str, quick: bool) -> float:
    print(f"perckit bench: {what}{' (quick)' if quick else ''}; {os.cpu_count()} CPU(s), load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return time.perf_counter()


def _footer(rows: list[dict], t0: float) -> int:
    print_table(rows)
    missed = [f"{r['case']}: {r['measure']}" for r in rows if r["ok"] is False]
    print(f"\n{len(rows)} rows, {sum(r['ok'] is True for r in rows)} targets met, {len(missed)} missed"
          + (f" ({'; '.join(missed)})" if missed else "")
          + f"; wall {time.perf_counter() - t0:.0f}s; load average at the end {os.getloadavg()[0]:.2f}")
    return 0


def bench_all(args: argparse.Namespace) -> int:
    t0 = _header("every case", args.quick)
    return _footer(run_cases(list(CASES), args.quick), t0)


def bench_named(args: argparse.Namespace) -> int:
    names = args.cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s) {unknown}; expected some of {list(CASES)}", file=sys.stderr)
        return 2
    t0 = _header(f"cases {names}", args.quick)
    return _footer(run_cases(names, args.quick), t0)


def bench_m4seg(args: argparse.Namespace) -> int:
    t0 = _header("M4Seg build vs floor", args.quick)
    nprocs = {s: list(args.num_proc) if s == "parquet" or args.num_proc != [1, 2] else [1] for s in ("parquet", "native")}
    kwargs = {"m4seg": {"sizes": args.sizes, "sources": args.source, "nprocs": nprocs,
                        "workdir": Path(args.workdir) if args.workdir else None, "repeat_large": args.repeat}}
    return _footer(run_cases(["m4seg"], args.quick, kwargs), t0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="with no command: smaller inputs for every case")
    sub = p.add_subparsers(dest="command")
    a = sub.add_parser("all", help="every case (the default)")
    a.add_argument("--quick", action="store_true", help="smaller inputs (a smoke run)")
    a.set_defaults(func=bench_all)
    cs = sub.add_parser("cases", help=f"the cases named, in the order given ({', '.join(CASES)})")
    cs.add_argument("cases", nargs="*", help="case names (default: all)")
    cs.add_argument("--quick", action="store_true")
    cs.set_defaults(func=bench_named)
    m = sub.add_parser("m4seg", help="M4Seg builds beside their floors: rows/s, peak RSS, num_proc speedup")
    m.add_argument("--quick", action="store_true", help="2k and 10k rows instead of 20k and 743,463")
    m.add_argument("--sizes", type=int, nargs="+", help="train sizes (default 20000 743463)")
    m.add_argument("--source", nargs="+", choices=["parquet", "native"], help="default: both")
    m.add_argument("--num-proc", type=int, nargs="+", default=[1, 2],
                   help="num_proc values of the Parquet builds (default 1 2; native: 1 unless given)")
    m.add_argument("--workdir", help="keep the generated releases here (reused across runs)")
    m.add_argument("--repeat", type=int, help="rounds of each floor and build above 50k rows, best kept (default: Parquet 2, native 1)")
    m.set_defaults(func=bench_m4seg)
    # Kept for callers of the former child command; the children now live in bench_floors.py.
    c = sub.add_parser("_m4seg-convert", help=argparse.SUPPRESS)
    c.add_argument("--root", required=True)
    c.add_argument("--source", required=True)
    c.add_argument("--num-proc", type=int, default=1)
    c.add_argument("--cache", required=True)
    c.set_defaults(func=bench_floors.child_convert)
    args = p.parse_args(argv)
    if args.command is None:  # `python scripts/bench.py [--quick]` runs everything
        args = argparse.Namespace(quick=args.quick, func=bench_all)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
