"""Syn4D's metric (configs ``tracking``, ``depth``, ``pose``) as a :class:`perckit.hf.contract.MetricCore`.

The config is the task, as in ``evaluate.load("metrics/syn4d", task)``; the options are those of
:class:`perckit.syn4d.metric.Syn4DOptions`. One record per reference sequence, made by the metric's own accumulate
half (:func:`perckit.syn4d.metric.score_sequence` under a :class:`~perckit.syn4d.metric.FailurePolicy`): the scored
row and its coverage entry, or the lax-mode failure records. The reduce is the metric's own
(:func:`perckit.syn4d.metric.aggregate`, fsum macro means; :func:`perckit.syn4d.metric.summarize_coverage`, integer
sums and a minimum), so :meth:`~perckit.hf.accumulate.Accumulator.compute` gives the numbers of
:func:`perckit.syn4d.metric.compute_task` (``coverage=True``, what the evaluate module runs) in any batch sizes and
order; only the lists ``sequences``, ``failures`` and ``coverage.sequences`` follow the order the pairs were
completed in.

The failure policy is today's, with today's messages:

- strict (the default): a failing task raises :class:`~perckit.syn4d.metric.TaskFailedError` in the ``update`` that
  completes the pair; a prediction whose three arrays are all ``None`` raises ``"<sequence_id>: missing prediction"``
  there too, and a reference still without a prediction raises that same message at ``compute``;
- lax (``strict=False``): each becomes a failure record and the sequence is left out of the means.

A record read from a state is checked against its declared schema before it loads (:func:`record_schema`, by
:func:`perckit.hf.contract.check_records`): a scored row with exactly the keys of its task under the options, each
value in its range (declared below), and its coverage entry consistent with the row; or, in lax mode only, the one
failure record of the sequence (this task).

Pending rows (one side not in yet) hold the raw arrays: :meth:`~perckit.hf.accumulate.Accumulator.save` writes them
as JSON lists (exact for float32 / float64 values, NaN kept), which is large for depth maps; save after the pairs
are complete where possible."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..hf.contract import COUNT, TEXT, UNIT, Item, MetricCore, RecordSchema, refuse, same_id
from ..errors import OptionError
from ..hf.feature_check import Nullable, OptionalKey, Scalar
from . import metric as m

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
        """One sequence as :func:`perckit.syn4d.metric.score_sequences` scores it (same policy, same messages)."""
        sid = reference["sequence_id"]
        policy = m.FailurePolicy(opts.strict)
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
        """:func:`perckit.syn4d.metric.compute_task`'s result (with ``coverage``) from the records."""
        records = [item.record for item in items]
        rows = [r.row for r in records if r.row is not None]
        failures = [dict(f) for r in records for f in r.failures]
        out = {"protocol": m.PROTOCOL, "task": task, "requested_sequences": len(records), **m.aggregate(rows), "failures": failures}
        if task in m.COVERAGE_TASKS:
            out["coverage"] = m.summarize_coverage([r.coverage for r in records if r.coverage is not None], opts.min_coverage)
            m.warn_if_low({task: out["coverage"]}, opts.min_coverage)
        return out

    return reduce


def _to_state(record: SequenceRecord) -> dict:
    return {"row": _plain(record.row), "coverage": _plain(record.coverage), "failures": _plain(record.failures)}


#: An error (a distance, a depth error): >= 0; infinite or NaN only where the metric's float math overflowed
#: (:func:`perckit.syn4d.metric.mean_rows` leaves non-finite values out of the means).
ERROR = Scalar("float64", 0, math.inf, nan=True)
#: An angle in degrees (an arccos); NaN where it is undefined (a zero translation) or the math overflowed.
DEGREES = Scalar("float64", 0, 180, nan=True)
#: A fitted scale or shift: any number.
ANY = Scalar("float64", -math.inf, math.inf, nan=True)


def row_feature(task: str, opts: m.Syn4DOptions) -> dict:
    """The declared row of ``task`` under ``opts`` (:func:`perckit.syn4d.metric.score_sequence`'s keys)."""
    ident = {"sequence_id": TEXT, "variant": TEXT, "scene": TEXT}
    if task == "tracking":
        subset = lambda prefix, wrap: {  # noqa: E731
            **{f"{prefix}acc_{t:g}m": wrap(UNIT) for t in opts.tracking_thresholds_m},
            f"{prefix}apd": wrap(UNIT), f"{prefix}epe": wrap(ERROR), f"{prefix}count": wrap(Scalar("int64", 1)),
        }
        return {**ident, "scale": Scalar("float64", 0, math.inf, nan=True), **subset("", lambda f: f),
                **subset("dynamic_", OptionalKey), "dynamic_query_fraction": UNIT, "score": UNIT}
    if task == "depth":
        return {**ident, **{k: ERROR for k in ("abs_rel", "sq_rel", "rmse", "rmse_log", "silog")},
                **{k: UNIT for k in ("delta1", "delta2", "delta3")}, "scale": ANY, "shift": ANY, "valid_pixels": Scalar("int64", 1)}
    return {**ident, **{k: ERROR for k in ("ate_rmse", "position_mean", "position_median", "rpe_translation_rmse")},
            **{k: DEGREES for k in ("rotation_mean_deg", "rotation_median_deg", "rpe_rotation_mean_deg", "translation_direction_mean_deg")},
            **{k: UNIT for k in ("auc_5deg", "auc_10deg", "auc_20deg")}, "alignment_scale": ANY, "num_frames": Scalar("int64", 3)}


#: A coverage entry (:func:`perckit.syn4d.metric.coverage_entry`).
COVERAGE_ENTRY = {"sequence_id": TEXT, "scored": COUNT, "gt_valid": COUNT, "coverage": Nullable(UNIT)}
#: A lax-mode failure record (:class:`perckit.syn4d.metric.FailurePolicy`): ``task`` absent for a missing prediction.
FAILURE = {"sequence_id": TEXT, "task": OptionalKey(TEXT), "reason": TEXT}


def record_schema(task: str, opts: m.Syn4DOptions) -> RecordSchema:
    """A :class:`SequenceRecord` of ``task`` as a state holds it (:func:`_to_state`), under ``opts``."""
    row_keys = row_feature(task, opts)
    feature = {"row": Nullable(row_keys), "coverage": Nullable(COVERAGE_ENTRY), "failures": [FAILURE]}
    count = "count" if task == "tracking" else "valid_pixels"
    dynamic = [k for k, f in row_keys.items() if isinstance(f, OptionalKey)]

    def invariants(key: str, r: Mapping) -> None:
        row, entry, failures = r["row"], r["coverage"], r["failures"]
        if row is None:
            if opts.strict:
                raise refuse(".row", "a scored row (strict mode records no failures)", row)
            if entry is not None:
                raise refuse(".coverage", "null (a failed sequence has no coverage)", entry)
            if len(failures) != 1:
                raise refuse(".failures", "the one failure record of the sequence", failures)
            same_id(".failures[0].sequence_id", failures[0]["sequence_id"], key)
            if failures[0].get("task", task) != task:
                raise refuse(".failures[0].task", repr(task), failures[0]["task"])
            return
        same_id(".row.sequence_id", row["sequence_id"], key)
        if failures:
            raise refuse(".failures", "none (the sequence was scored)", failures)
        given = [k for k in dynamic if k in row]
        if given and len(given) != len(dynamic):
            raise refuse(".row", f"all of {dynamic} or none", given)
        if given and row["dynamic_count"] > row["count"]:
            raise refuse(".row.dynamic_count", f"at most count ({row['count']})", row["dynamic_count"])
        if task not in m.COVERAGE_TASKS:
            if entry is not None:
                raise refuse(".coverage", f"null (no coverage for {task})", entry)
            return
        if entry is None:
            raise refuse(".coverage", "the coverage entry of the scored row", entry)
        same_id(".coverage.sequence_id", entry["sequence_id"], key)
        if entry["scored"] != row[count]:
            raise refuse(".coverage.scored", f"the row's {count} ({row[count]})", entry["scored"])
        if entry["scored"] > entry["gt_valid"]:
            raise refuse(".coverage.scored", f"at most gt_valid ({entry['gt_valid']})", entry["scored"])
        want = entry["scored"] / entry["gt_valid"] if entry["gt_valid"] else None
        if entry["coverage"] != want:
            raise refuse(".coverage.coverage", f"scored / gt_valid = {want!r}", entry["coverage"])

    return RecordSchema(feature, (invariants,))


def _from_state(state: Any) -> SequenceRecord:
    """A checked record (:func:`record_schema`) as a :class:`SequenceRecord`."""
    row, entry, failures = state["row"], state["coverage"], state["failures"]
    return SequenceRecord(dict(row) if row is not None else None, dict(entry) if entry is not None else None,
                          tuple(dict(f) for f in failures))


def _features(task: str) -> tuple:
    from . import features as feats

    return feats.prediction_schema(), feats.reference_schema(task)


def syn4d_core(config: str | None = None) -> MetricCore:
    """The :class:`~perckit.hf.contract.MetricCore` of ``syn4d`` for task ``config`` (``tracking``, ``depth`` or
    ``pose``: required, an :class:`OptionError` naming the choices otherwise)."""
    task = _check_task(config)
    return MetricCore(
        name=NAME, config=task, id_key="sequence_id", prepare=lambda options: m.Syn4DOptions.from_kwargs(**options),
        score=_make_score(task), reduce=_make_reduce(task), record_to_state=_to_state, record_from_state=_from_state,
        record_schema=lambda opts: record_schema(task, opts), features=lambda: _features(task),
        # never "strict" for the accumulator: a missing prediction goes through the failure policy in score()
        # (strict raises today's "<sequence_id>: missing prediction", lax records the failure)
        strict=lambda opts: False,
    )
