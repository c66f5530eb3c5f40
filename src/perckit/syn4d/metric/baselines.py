"""The Syn4D card's published baseline table, and a run's overall numbers side by side with it.

The table (``published_baselines.json``, package data) holds the card's nine columns for Open-D4RT, 4RC,
V-DPM, Any4D, TraceAnything, St4RTrack and SpaTrackerV2, with the numbers as the card prints them
(4 decimals; ``null`` where the card has a dash). :func:`comparison` adds a run's overall values as one
more row; :func:`format_comparison` prints it as a Markdown table. Used by the file runner
(``--compare-baselines``) and by ``perckit evaluate syn4d``.

The card's numbers are macro averages over all 512 sequences: a run on a subset is not comparable number for number,
and the table says how many sequences the run scored."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

from ...errors import OptionError
from ...io.jsonio import loads
from . import TASKS

DATA_FILE = "published_baselines.json"
RUN_LABEL = "this run"


@functools.lru_cache(maxsize=1)
def published_baselines() -> Mapping[str, Any]:
    """The shipped table: ``{"source", "note", "num_sequences", "decimals", "columns": [{"label", "task",
    "metric"}], "methods": [{"method", "values": [9 numbers or None]}]}``."""
    data = loads(resources.files(__package__).joinpath(DATA_FILE).read_bytes())
    width = len(data["columns"])
    for m in data["methods"]:
        if len(m["values"]) != width:  # a packaging error, never user input
            raise RuntimeError(f"{DATA_FILE}: method {m['method']!r} has {len(m['values'])} values, expected {width}")
    return data


def run_overall(result: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """``{task: overall}`` of a run: the file runner's report / :func:`~perckit.syn4d.metric.to_official_summary`
    (``{"tasks": {task: {"overall", ...}}}``), one ``metrics/syn4d`` result (``{"task", "overall", ...}``), or
    a mapping ``{task: result}`` of several."""
    if not isinstance(result, Mapping):
        raise OptionError(f"Syn4D baseline comparison: expected a Syn4D report or metric result (a mapping), got {type(result).__name__}")
    if isinstance(result.get("tasks"), Mapping):
        return {t: b["overall"] for t, b in result["tasks"].items() if isinstance(b, Mapping) and "overall" in b}
    if isinstance(result.get("task"), str) and isinstance(result.get("overall"), Mapping):
        return {result["task"]: result["overall"]}
    if result and all(t in TASKS and isinstance(v, Mapping) and "overall" in v for t, v in result.items()):
        return {t: v["overall"] for t, v in result.items()}
    raise OptionError("Syn4D baseline comparison: expected a report with 'tasks', a metric result with 'task' and 'overall', "
                      f"or {{task: result}}, got the keys {sorted(map(str, result))[:8]}")


def comparison(result: Mapping[str, Any], label: str = RUN_LABEL) -> dict[str, Any]:
    """The published rows plus the run's row, as data: ``{"source", "note", "columns": [labels],
    "rows": [{"method", "values", "num_sequences"}]}``. The run's row is last; a value the run does not
    have (a task it did not score) is None; its ``num_sequences`` is ``{task: n}``."""
    table = published_baselines()
    overall = run_overall(result)
    values = []
    for col in table["columns"]:
        v = overall.get(col["task"], {}).get(col["metric"])
        values.append(float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
    rows = [{"method": m["method"], "values": list(m["values"]), "num_sequences": table["num_sequences"]} for m in table["methods"]]
    rows.append({"method": label, "values": values, "num_sequences": {t: o.get("num_sequences") for t, o in sorted(overall.items())}})
    return {"source": table["source"], "note": table["note"], "columns": [c["label"] for c in table["columns"]], "rows": rows}


def format_comparison(result_or_comparison: Mapping[str, Any], label: str = RUN_LABEL) -> str:
    """A Markdown table: the card's header, its seven rows as printed there, and the run's row (4 decimals,
    ``-`` where a value is missing), then a line saying over how many sequences each side was averaged."""
    comp = result_or_comparison if "rows" in result_or_comparison and "columns" in result_or_comparison else comparison(result_or_comparison, label)
    digits = published_baselines()["decimals"]
    lines = ["| Method | " + " | ".join(comp["columns"]) + " |", "| --- |" + " ---: |" * len(comp["columns"])]
    for row in comp["rows"]:
        cells = ["-" if v is None else f"{v:.{digits}f}" for v in row["values"]]
        lines.append(f"| {row['method']} | " + " | ".join(cells) + " |")
    run = comp["rows"][-1]["num_sequences"]
    counts = ", ".join(f"{t} {n}" for t, n in run.items()) if isinstance(run, Mapping) else str(run)
    lines.append(f"Baselines: macro averages over {published_baselines()['num_sequences']} sequences ({comp['source']}); "
                 f"{comp['rows'][-1]['method']}: {counts or 'no task scored'} sequence(s).")
    return "\n".join(lines)
