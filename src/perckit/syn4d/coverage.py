"""How much of the ground truth a Syn4D prediction was actually scored on (tracking points, depth pixels).

The official rule leaves a non-finite predicted point (or a non-finite / non-positive predicted depth pixel)
out of the scored set without penalty, so a prediction that is 99.9% NaN can score perfectly on the 0.1% it
kept. The metric keeps that rule (parity with the official numbers) and reports beside it, per sequence and
overall, the **coverage**: scored points / GT-valid points (tracking: ``visibility`` and a finite GT point;
depth: a finite GT depth in ``(depth_min_m, depth_max_m]``). A coverage below the option ``min_coverage``
(default :data:`DEFAULT_MIN_COVERAGE`) gives one :class:`LowCoverageWarning` per run.

Nothing here changes a metric value: the counts come from the scored set the metric already built (its
``count`` / ``valid_pixels``) and one extra pass over the reference arrays.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import OptionError

#: Below this fraction of GT-valid points scored, a run warns.
DEFAULT_MIN_COVERAGE = 0.9
#: The tasks that leave predicted values out (pose needs every pose finite, or the sequence fails).
TASKS = ("depth", "tracking")


class LowCoverageWarning(UserWarning):
    """A Syn4D prediction was scored on fewer GT-valid points / pixels than ``min_coverage`` of them."""


def check_min_coverage(value: object) -> float:
    """The option ``min_coverage``: a number in [0, 1] (0 never warns)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(float(value)) or not 0.0 <= float(value) <= 1.0:
        raise OptionError(f"option 'min_coverage': expected a number in [0, 1], got {value!r}")
    return float(value)


def gt_valid_count(task: str, reference: Mapping, min_depth: float, max_depth: float) -> int:
    """GT-valid points (tracking: visible with a finite GT point) or pixels (depth: finite, in ``(min, max]``)."""
    if task == "tracking":
        gt = np.asarray(reference["tracks_ref0_m"])
        visible = np.asarray(reference["visibility"], dtype=bool)
        finite = np.isfinite(gt[..., 0]) & np.isfinite(gt[..., 1]) & np.isfinite(gt[..., 2])
        return int(np.count_nonzero(visible & finite))
    gt = np.asarray(reference["depth_m"])
    lo, hi = np.float64(min_depth), np.float64(max_depth)
    return int(sum(np.count_nonzero(np.isfinite(g) & (g > lo) & (g <= hi)) for g in gt))


def sequence_entry(task: str, sequence_id: str, reference: Mapping, metrics: Mapping, min_depth: float, max_depth: float) -> dict:
    """``{"sequence_id", "scored", "gt_valid", "coverage"}`` of one scored sequence (``coverage`` None when
    the GT has no valid point)."""
    scored = int(metrics["count"] if task == "tracking" else metrics["valid_pixels"])
    valid = gt_valid_count(task, reference, min_depth, max_depth)
    return {"sequence_id": sequence_id, "scored": scored, "gt_valid": valid, "coverage": scored / valid if valid else None}


def summarize(entries: Sequence[Mapping], min_coverage: float) -> dict:
    """``{"overall": {...}, "sequences": entries}``. ``overall``: the summed counts and their ratio (so it
    does not depend on the order of the sequences), the lowest per-sequence coverage, and how many
    sequences fall below ``min_coverage``."""
    scored = sum(int(e["scored"]) for e in entries)
    valid = sum(int(e["gt_valid"]) for e in entries)
    per = [e["coverage"] for e in entries if e["coverage"] is not None]
    return {
        "overall": {
            "scored": scored,
            "gt_valid": valid,
            "coverage": scored / valid if valid else None,
            "min_sequence_coverage": min(per) if per else None,
            "num_sequences_below_min_coverage": sum(1 for c in per if c < min_coverage),
            "min_coverage": float(min_coverage),
        },
        "sequences": [dict(e) for e in entries],
    }


def warn_if_low(blocks: Mapping[str, Mapping], min_coverage: float) -> str | None:
    """One :class:`LowCoverageWarning` for a run whose coverage blocks (task -> :func:`summarize` output) have
    a sequence below ``min_coverage``; returns its text (None when nothing is low)."""
    parts = []
    for task in sorted(blocks):
        overall = blocks[task]["overall"]
        low = overall["num_sequences_below_min_coverage"]
        if low:
            worst = min((e for e in blocks[task]["sequences"] if e["coverage"] is not None), key=lambda e: e["coverage"])
            parts.append(
                f"{task}: {low} sequence(s) below, overall {overall['coverage']:.4f}, lowest {worst['coverage']:.4f} "
                f"({worst['sequence_id']!r}: {worst['scored']} of {worst['gt_valid']} GT-valid "
                f"{'points' if task == 'tracking' else 'pixels'} scored)"
            )
    if not parts:
        return None
    text = (
        f"Syn4D: predictions cover less than min_coverage={min_coverage:g} of the ground truth; non-finite "
        f"predicted values are left out of the score (the official rule), so these scores rest on part of the "
        f"points only: " + "; ".join(parts)
    )
    warnings.warn(text, LowCoverageWarning, stacklevel=3)
    return text


def entry_of(task: str, sequence_id: str, reference: Mapping, metrics: Mapping, options: Any) -> dict | None:
    """:func:`sequence_entry` for the tasks with a coverage (None for ``pose``)."""
    if task not in TASKS:
        return None
    return sequence_entry(task, sequence_id, reference, metrics, options.depth_min_m, options.depth_max_m)
