"""Results a person reads: a metric's result as a compact table, and several runs side by side.

A result (what ``compute`` returns) is read the same way for every metric:

- **headline**: its top-level numbers, after those under ``overall`` for a metric that has it (Syn4D);
- **blocks**: each top-level mapping of group -> numbers (``per_category``, ``per_question_type``, ``by_scene``,
  ...), one table each, a row per group and a column per number;
- everything else (per-sample lists, options, the ``perckit_run`` record) is left to the JSON.

:func:`render` writes the tables as plain text, Markdown or LaTeX (``booktabs``); :func:`compare` puts runs
side by side with the delta of each against the first, after checking from their ``perckit_run`` records that
they are comparable (the same metric, config and options; a different dataset fingerprint is marked).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import OptionError

FORMATS = ("text", "markdown", "latex", "json")
#: The key of a results file that says how its numbers were made (``perckit evaluate --output``).
RUN_KEY = "perckit_run"


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def headline(result: Mapping) -> dict[str, float]:
    """The numbers under ``overall`` when ``result`` has it (Syn4D), then its top-level numbers."""
    top = {k: v for k, v in result.items() if _number(v)}
    overall = result.get("overall")
    return {**headline(overall), **top} if isinstance(overall, Mapping) else top


def blocks(result: Mapping) -> dict[str, dict[str, dict[str, float]]]:
    """Every top-level mapping of group -> mapping of numbers, with its numbers only."""
    out = {}
    for name, value in result.items():
        if name == RUN_KEY or not isinstance(value, Mapping) or not value:
            continue
        if all(isinstance(g, Mapping) and any(_number(x) for x in g.values()) for g in value.values()):
            out[name] = {str(g): {k: x for k, x in row.items() if _number(x)} for g, row in value.items()}
    return out


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 1000):
        return f"{int(v):d}"
    return "nan" if isinstance(v, float) and math.isnan(v) else f"{v:.4f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], fmt: str, title: str) -> str:
    if fmt == "markdown":
        lines = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    if fmt == "latex":
        esc = str.maketrans({"_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#"})
        body = [" & ".join(c.translate(esc) for c in r) + r" \\" for r in rows]
        return "\n".join([f"% {title}", r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}", r"\toprule",
                          " & ".join(h.translate(esc) for h in header) + r" \\", r"\midrule", *body,
                          r"\bottomrule", r"\end{tabular}"])
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fit = [("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))) for r in [header, *rows]]
    return "\n".join([title, *fit])


def render(result: Mapping, fmt: str = "text", title: str = "") -> str:
    """``result`` as its headline table then one table per block (module docstring); ``fmt`` one of :data:`FORMATS`
    (``json``: the whole result, indented)."""
    if fmt not in FORMATS:
        raise OptionError(f"--format {fmt!r}: expected one of {list(FORMATS)}")
    if fmt == "json":
        return json.dumps(result, indent=2, ensure_ascii=False, default=str)
    parts = [_table(["metric", "value"], [[k, _cell(v)] for k, v in headline(result).items()], fmt, title or "results")]
    for name, groups in blocks(result).items():
        keys = list(dict.fromkeys(k for row in groups.values() for k in row))
        parts.append(_table([name, *keys], [[g, *(_cell(row.get(k)) for k in keys)] for g, row in groups.items()], fmt, name))
    return "\n\n".join(parts)


def _run(result: Mapping, where: str) -> Mapping:
    run = result.get(RUN_KEY)
    if not isinstance(run, Mapping):
        raise OptionError(f"{where}: expected a perckit results file (perckit evaluate --output), with its {RUN_KEY!r} record")
    return run


def _with_delta(v: Any, first: Any) -> str:
    """The cell of ``v`` in a later run: its value and its delta against the first run's ``first`` (when both are numbers)."""
    d = v - first if _number(v) and _number(first) else None
    return _cell(v) + ("" if d is None else f" ({d:+d})" if isinstance(d, int) else f" ({d:+.4f})")


def compare(results: Sequence[Mapping], names: Sequence[str], fmt: str = "text") -> str:
    """The runs' headline numbers side by side, each column after the first with its delta against the first.
    Runs of another metric, config or options than the first are refused (:class:`OptionError` naming the file);
    a run on a dataset with another fingerprint is marked ``*`` and said under the table."""
    if fmt not in FORMATS:
        raise OptionError(f"--format {fmt!r}: expected one of {list(FORMATS)}")
    runs = [_run(r, n) for r, n in zip(results, names)]
    notes = []
    for run, name in zip(runs[1:], names[1:]):
        for key in ("metric", "config", "options"):
            if run.get(key) != runs[0].get(key):
                raise OptionError(f"{name}: {key} {run.get(key)!r} differs from {names[0]}'s {runs[0].get(key)!r}; "
                                  "expected runs of the same metric, config and options")
        if run.get("dataset_fingerprint") != runs[0].get("dataset_fingerprint"):
            notes.append(f"* {name}: scored on another dataset (fingerprint {run.get('dataset_fingerprint')!r}, "
                         f"first run {runs[0].get('dataset_fingerprint')!r})")
    marked = [n + (" *" if any(note.startswith(f"* {n}:") for note in notes) else "") for n in names]
    heads = [headline(r) for r in results]
    if fmt == "json":
        return json.dumps({"runs": list(names), "metrics": {k: [h.get(k) for h in heads] for k in heads[0]}, "notes": notes}, indent=2)
    rows = [[k, _cell(heads[0][k]), *(_with_delta(h.get(k), heads[0][k]) for h in heads[1:])] for k in heads[0]]
    return "\n".join([_table(["metric", *marked], rows, fmt, f"{runs[0].get('metric')}: {len(results)} runs"), *notes])
