"""Syn4D's metric (configs ``tracking``, ``depth``, ``pose``) as a :class:`perckit.accumulate.MetricCore`.

The config is the task, as in ``evaluate.load("metrics/syn4d", task)``; the options are those of
:class:`perckit.syn4d.metrics.Syn4DOptions`. One record per reference sequence, made by the metric's own
accumulate half (:func:`perckit.syn4d.metrics.score_sequence` under a
:class:`~perckit.syn4d.failures.FailurePolicy`): the scored row and its coverage entry, or the lax-mode failure
records. The reduce is the metric's own (:func:`perckit.syn4d.metrics.aggregate`, fsum macro means;
:func:`perckit.syn4d.coverage.summarize`, integer sums and a minimum), so
:meth:`~perckit.accumulate.Accumulator.compute` gives the numbers of
:func:`perckit.syn4d.metrics.compute_task` (``coverage=True``, what the evaluate module runs) in any batch sizes
and order; only the lists ``sequences``, ``failures`` and ``coverage.sequences`` follow the order the pairs were
completed in.

The failure policy is today's, with today's messages:

- strict (the default): a failing task raises :class:`~perckit.syn4d.failures.TaskFailedError` in the
  ``update`` that completes the pair; a prediction whose three arrays are all ``None`` raises
  ``"<sequence_id>: missing prediction"`` there too, and a reference still without a prediction raises that
  same message at ``compute``;
- lax (``strict=False``): each becomes a failure record and the sequence is left out of the means.

Pending rows (one side not in yet) hold the raw arrays: :meth:`~perckit.accumulate.Accumulator.save` writes them
as JSON lists (exact for float32 / float64 values, NaN kept), which is large for depth maps; save after the pairs
are complete where possible.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..accumulate import Item, MetricCore
from ..errors import OptionError
from . import coverage as cov
from . import metrics as m
from .failures import FailurePolicy

NAME = "syn4d"


@dataclass(frozen=True)
class SequenceRecord:
    """One reference sequence of one task: its row and coverage entry when scored, else its failure records."""

    row: dict | None
    coverage: dict | None = None
    failures: tuple = field(default_factory=tuple)


def _check_task(config: Any) -> str:
    if config not in m.TASKS:
        raise OptionError(f"metric {NAME!r}: expected a config (the task) among {list(m.TASKS)}, got {config!r}")
    return config


def _plain(value: Any) -> Any:
    """A row or entry value as plain Python data (numpy scalars as Python numbers)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _make_score(task: str):
    def score(prediction: Mapping | None, reference: Mapping, opts: m.Syn4DOptions) -> SequenceRecord:
        """One sequence as :func:`perckit.syn4d.metrics.score_sequences` scores it (same policy, same messages)."""
        sid = reference["sequence_id"]
        policy = FailurePolicy(opts.strict)
        if m.is_missing_prediction(prediction):
            policy.missing(sid)  # strict: raises "<sid>: missing prediction"
            return SequenceRecord(None, None, tuple(policy.failures))
        scored = policy.attempt(sid, task, m.score_sequence, task, reference, prediction, opts, True)
        if scored is None:
            return SequenceRecord(None, None, tuple(policy.failures))
        return SequenceRecord(scored[0], scored[1])

    return score


def _make_reduce(task: str):
    def reduce(items: list[Item], opts: m.Syn4DOptions) -> dict:
        """:func:`perckit.syn4d.metrics.compute_task`'s result (with ``coverage``) from the records."""
        records = [item.record for item in items]
        rows = [r.row for r in records if r.row is not None]
        failures = [dict(f) for r in records for f in r.failures]
        out = {"protocol": m.PROTOCOL, "task": task, "requested_sequences": len(records), **m.aggregate(rows), "failures": failures}
        if task in cov.TASKS:
            out["coverage"] = cov.summarize([r.coverage for r in records if r.coverage is not None], opts.min_coverage)
            cov.warn_if_low({task: out["coverage"]}, opts.min_coverage)
        return out

    return reduce


def _to_state(record: SequenceRecord) -> dict:
    return {"row": _plain(record.row), "coverage": _plain(record.coverage), "failures": _plain(record.failures)}


def _from_state(state: Any) -> SequenceRecord:
    """A record from ``{"row", "coverage", "failures"}`` (checked: a row or failures, never both)."""
    if not isinstance(state, Mapping) or set(state) != {"row", "coverage", "failures"}:
        raise ValueError(f"expected {{'row', 'coverage', 'failures'}}, got {state!r}")
    row, entry, failures = state["row"], state["coverage"], state["failures"]
    if row is not None and (not isinstance(row, Mapping) or not all(isinstance(row.get(k), str) for k in ("sequence_id", "variant", "scene"))):
        raise ValueError(f"'row': expected null or a row with string sequence_id, variant and scene, got {row!r}")
    if entry is not None and (row is None or not isinstance(entry, Mapping) or entry.get("sequence_id") != row["sequence_id"]):
        raise ValueError(f"'coverage': expected null or the entry of the row's sequence, got {entry!r}")
    if not isinstance(failures, list) or not all(isinstance(f, Mapping) and isinstance(f.get("sequence_id"), str)
                                                 and isinstance(f.get("reason"), str) for f in failures):
        raise ValueError(f"'failures': expected a list of {{sequence_id, reason}} records, got {failures!r}")
    if (row is None) == (not failures):
        raise ValueError("expected either a scored row or failure records")
    return SequenceRecord(dict(row) if row is not None else None, dict(entry) if entry is not None else None,
                          tuple(dict(f) for f in failures))


def syn4d_core(config: str | None = None) -> MetricCore:
    """The :class:`~perckit.accumulate.MetricCore` of ``syn4d`` for task ``config`` (``tracking``, ``depth`` or
    ``pose``: required, an :class:`OptionError` naming the choices otherwise)."""
    task = _check_task(config)
    return MetricCore(
        name=NAME, config=task, id_key="sequence_id", prepare=lambda options: m.Syn4DOptions.from_kwargs(**options),
        score=_make_score(task), reduce=_make_reduce(task), record_to_state=_to_state, record_from_state=_from_state,
        # never "strict" for the accumulator: a missing prediction goes through the failure policy in score()
        # (strict raises today's "<sequence_id>: missing prediction", lax records the failure)
        strict=lambda opts: False,
    )
