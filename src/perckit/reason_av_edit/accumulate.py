"""ReasonAVEdit-Bench's ``av_reasoning`` metric as a :class:`perckit.accumulate.MetricCore`.

The per-sample record is the metric's own :class:`~.metrics.SampleScore` (exact integer pixel counts, per-sample
tIoUs and offsets, the Which-Acc rule, what each side provided), made by :func:`~.metrics.score_sample` as soon as a
prediction meets its reference; the media (mask videos, reasoning audio, as bytes or paths) are decoded then and
never kept in the record. The reduce is :func:`~.metrics.reduce_scores` (``fmean`` on ``math.fsum`` and integer
counts: any order of the samples gives the same numbers), so :meth:`~perckit.accumulate.Accumulator.compute` equals
:func:`~.metrics.av_reasoning` exactly.

The metric is always strict (as :func:`~.metrics.av_reasoning`): a reference without a prediction is an error at
``compute``, whose message says what an empty prediction is (``make_prediction(sample_id)``). A row still waiting
for its other half keeps its media; when that media is bytes, ``save`` refuses (the base's message: pass paths, or
keep the state in memory), while ``state_dict`` works.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, Mapping

import numpy as np

from ..accumulate import Item, MetricCore
from ..errors import OptionError, check_options
from . import metrics as m

#: the fields of a :class:`~.metrics.SampleScore` record, in declaration order
RECORD_FIELDS = tuple(f.name for f in fields(m.SampleScore))


def _options(options: Mapping[str, Any]) -> m.AVReasoningOptions:
    """The checked options: :func:`~.metrics.av_reasoning`'s message for an unknown one, the dataclass's checks."""
    check_options("av_reasoning", options, m.AVReasoningOptions.__dataclass_fields__)
    return m.AVReasoningOptions(**options)


def _plain(value: Any) -> Any:
    """A record value as a plain Python scalar (numpy scalars from the pixel and audio counts become int / float / bool)."""
    return value.item() if isinstance(value, np.generic) else value


def _record_to_state(record: m.SampleScore) -> dict:
    """A :class:`~.metrics.SampleScore` as a JSON-safe dict (every field, plain scalars)."""
    return {k: _plain(v) for k, v in asdict(record).items()}


def _record_from_state(state: Any) -> m.SampleScore:
    """The record back from :func:`_record_to_state`: exactly the :class:`~.metrics.SampleScore` fields, each a
    scalar or null (a ``TypeError`` otherwise, which the loader reports as a bad state)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"expected a dict of the SampleScore fields, got {type(state).__name__}")
    if set(state) != set(RECORD_FIELDS):
        raise TypeError(f"expected the SampleScore fields {sorted(RECORD_FIELDS)}, got {sorted(state)}")
    for k, v in state.items():
        if v is not None and not isinstance(v, (bool, int, float, str)):
            raise TypeError(f"field {k!r}: expected a scalar or null, got {type(v).__name__}")
    return m.SampleScore(**state)


def _reduce(items: list[Item], opts: m.AVReasoningOptions) -> dict:
    return m.reduce_scores([item.record for item in items], opts)


def av_reasoning_core(config: str | None = None) -> MetricCore:
    """The ``av_reasoning`` core (no configs): records by ``sample_id``, always strict."""
    if config is not None:
        raise OptionError(f"metric 'av_reasoning' has no configs, got config {config!r}")
    return MetricCore(
        name="av_reasoning", config=None, id_key="sample_id", prepare=_options,
        score=lambda p, r, opts: m.score_sample(p, r, opts), reduce=_reduce,
        record_to_state=_record_to_state, record_from_state=_record_from_state,
        strict=lambda opts: True, empty_hint=m.EMPTY_PREDICTION, lax_option=None,
    )
