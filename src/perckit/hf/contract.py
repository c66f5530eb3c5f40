"""The one metric contract: what every metric declares so an accumulator can run it (like torchmetrics' split of
a functional ``update`` / ``compute`` pair from the stateful object that holds them).

A metric is a :class:`MetricCore`: ``prepare`` (the checked options), ``score`` (one item: a prediction and its
reference become a record of sufficient statistics), ``reduce`` (any list of records, in any order, becomes the
result) and the record's JSON form with its :class:`RecordSchema`. Each benchmark's ``accumulate`` module builds
its metrics' cores from the formulas of its ``metric`` module; the benchmark's descriptor
(:class:`perckit.hf.descriptor.MetricSpec`, field ``core``) holds each factory, imported directly; the
accumulators (:mod:`perckit.hf.accumulate`), the ``evaluate`` modules, the lmms-eval tasks and
:mod:`perckit.torch` reach a metric only through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from ..errors import ReleaseFormatError
from .feature_check import Refused, Scalar, compile_feature


#: The atoms of the record schemas (:class:`RecordSchema`): a rate, IoU or accuracy; a count (pixels, frames,
#: items: an int, never a bool or ``2.0``, within int64 so sums and ``math.fsum`` stay exact); a string; a flag.
UNIT = Scalar("float64", 0, 1)
COUNT = Scalar("int64", 0)
TEXT = Scalar("string")
FLAG = Scalar("bool")


@dataclass(frozen=True)
class RecordSchema:
    """A metric's record as a state holds it (``record_to_state``'s output), declared once.

    ``feature``: the type and range of every field, in the declarations of :mod:`perckit.hf.feature_check`
    (``Scalar``, ``Nullable``, ``OptionalKey``, ``Positional``, dicts and ``[item]`` lists), compiled with
    ``nulls=False``: ``None`` only where declared. ``invariants``: the rules across fields, each
    ``rule(record_id, record)`` on a record that already has the declared types, raising :func:`refuse` on a
    record no scoring could have produced (``intersection > union``, a pair index out of its matrix, ...).
    """

    feature: Any
    invariants: tuple[Callable[[str, Any], None], ...] = ()

    @cached_property
    def check(self) -> Any:
        """The compiled checker of :attr:`feature` (built once per schema)."""
        return compile_feature(self.feature, nulls=False)


def refuse(path: str, expected: str, value: Any) -> Refused:
    """The refusal an invariant raises: the field's ``path`` in the record (``.intersection``), what was expected,
    the value found."""
    r = Refused(expected, value)
    r.path.append(path)
    return r


def same_id(path: str, value: Any, key: str) -> None:
    """An invariant of every record: its own id field (at ``path``) is the id it is recorded under."""
    if value != key:
        raise refuse(path, f"the record's id {key!r}", value)


def check_records(schema: RecordSchema, records: list, where: str) -> None:
    """The one check of a state's records (``[id, record, predicted]`` triples): each record against ``schema``,
    the types and ranges first (all records at once on the checker's fast path, one by one to name the first
    refused), then the invariants. A :class:`ReleaseFormatError` names ``where``, the record's index and id and
    the field: ``'s.json': records[3] 'q1'.miou: expected a number in [0, 1], got 7.0``."""
    check = schema.check
    i = -1
    try:
        if not check.fast([r[1] for r in records]):
            for i, (_, record, _) in enumerate(records):
                check(record)
        for i, (key, record, _) in enumerate(records):
            for rule in schema.invariants:
                rule(key, record)
    except Refused as r:
        raise ReleaseFormatError(r.message(f"{where}: records[{i}] {records[i][0]!r}")) from None


class Item(NamedTuple):
    """One scored item: the metric's record and whether a prediction was given (False: scored as "no output")."""

    record: Any
    predicted: bool


@dataclass(frozen=True)
class MetricCore:
    """What a metric declares so an :class:`Accumulator` can run it.

    - ``prepare(options) -> opts``: the checked options object (an :class:`OptionError` for an unknown or bad one);
    - ``score(prediction | None, reference, opts) -> record``: one item (``None``: no prediction, lax mode);
    - ``reduce(items, opts) -> dict``: the metric's result from the :class:`Item` list (in pairing order; the sums
      are order-independent, so any order gives the same numbers);
    - ``strict(opts)``: a reference without a prediction is an error; ``selects(opts)``: ``None`` or a predicate
      on ids keeping a subset of the references;
    - ``record_to_state`` / ``record_from_state``: a record as JSON-safe data and back (``record_from_state``
      only converts: the record was checked against ``record_schema(opts)``, the :class:`RecordSchema` of the
      record under these options, first);
    - ``features()``: the declared ``(predictions, references)`` features of the metric's ``evaluate`` module,
      which the rows a state holds unpaired are checked against (``None``: not checked).
    """

    name: str
    config: str | None
    id_key: str
    prepare: Callable[[Mapping[str, Any]], Any]
    score: Callable[[Mapping | None, Mapping, Any], Any]
    reduce: Callable[[list[Item], Any], dict]
    record_to_state: Callable[[Any], Any]
    record_from_state: Callable[[Any], Any]
    record_schema: Callable[[Any], RecordSchema]
    features: Callable[[], tuple[Any, Any]] | None = None
    strict: Callable[[Any], bool] = lambda opts: True
    selects: Callable[[Any], Callable[[str], bool] | None] = lambda opts: None
    #: how the "missing prediction" message tells the user to score a missing prediction as no output
    empty_hint: str | None = None
    lax_option: str | None = None
