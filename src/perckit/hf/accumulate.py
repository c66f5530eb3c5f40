"""Accumulators: every metric as ``update`` / ``compute`` / ``merge`` / ``reset`` / ``state_dict``.

A metric is scored item by item (a query, an expression, a sequence, a sample) and the per-item records are
reduced with order-independent sums (``math.fsum`` means, integer counts). An :class:`Accumulator` keeps those
records, so predictions and references can arrive in any batch sizes and any order (a prediction may come before
its reference: it waits, unpaired), two accumulators merge exactly (the union of their records), and the state is
a plain, versioned dict for checkpoints (:meth:`Accumulator.state_dict`), for ``torch.distributed``
(:func:`perckit.torch.gather`) and for files (:meth:`Accumulator.save`, :func:`merge_files`, JSON only: a state
file may come from elsewhere and is never unpickled).

A metric takes part by declaring a :class:`~perckit.hf.contract.MetricCore` (``perckit.<benchmark>.accumulate``),
which its benchmark's descriptor holds (:func:`core`); the evaluate modules are thin wrappers over
:func:`accumulator`.

A state is untrusted input (a file from a cluster job, an lmms-eval aggregation item, another rank's state), and
:meth:`Accumulator.load_state_dict` is the one place every state passes through (:func:`load_state`,
:func:`merge_files`, :func:`perckit.torch.gather`, ``perckit.lmms_eval``). Before anything is kept, it checks:
every record against its metric's declared :class:`RecordSchema` (:func:`check_records`: the types and ranges
compiled by :func:`perckit.hf.feature_check.compile_feature`, the checker of the metric inputs, then the
cross-field invariants such as ``intersection <= union``); the rows still waiting for their other half against
the metric's declared input features (what ``add_batch`` checks); ``dropped`` as strings; the options through the
metric's own option checks. A refusal is a :class:`~perckit.errors.ReleaseFormatError` naming the state
(the file, ``aggregation item k``, ``perckit.torch.gather: rank r`` or ``state_dict``), the record and the field
(``'s.json': records[3] 'q1'.miou: expected a number in [0, 1], got 7.0``), and the accumulator is left as it was.

Pairing rules (those of :func:`perckit.core.matching.pair_by_id`, now across batches): an id seen twice on one side is
a :class:`~perckit.errors.PredictionError` when it arrives; at :meth:`Accumulator.compute`, a prediction whose id
no reference has is an error, and a reference without a prediction is an error when the metric is strict (the
message names the lax option), else it is scored as "no output".
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.matching import index_by_id, missing_ids_message, unknown_ids_message
from ..errors import InputNotFoundError, OptionError, PerckitError, PredictionError, ReleaseFormatError
from ..io.jsonio import read_json
from ..io.paths import open_regular_file, write_atomic
from ..io.prefetch import gc_paused
from .cli import progress
from .contract import Item, MetricCore, check_records
from .feature_check import Scalar, check_side, compile_feature, compile_rows, describe

STATE_FORMAT = "perckit-accumulator"
STATE_VERSION = 1
#: the largest accumulator state file read (records of a full benchmark are a few MB)
MAX_STATE_BYTES = 1 << 30
#: rows per :meth:`Accumulator.update` where perckit streams rows (``perckit evaluate``'s references, the evaluate modules'
#: rows read back from evaluate's cache): few calls, and no more rows than that held as Python objects at a time
ROWS_PER_UPDATE = 1_000

def _json_safe(value: Any, where: str, callables: bool = False) -> Any:
    """``value`` as JSON data (numpy arrays and scalars as lists and numbers; NaN kept as float). ``callables``
    (options compared for merging): a callable option (an encoder object, a scoring function) becomes its qualified
    name (a function's, or an object's type's), so in-memory states holding one (``state_dict``,
    ``perckit.torch.gather``) load and merge; only ``save`` refuses them."""
    import numpy as np

    if isinstance(value, Mapping):
        return {str(k): _json_safe(v, where, callables) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v, where, callables) for v in value]
    if callables and callable(value):
        owner = value if hasattr(value, "__qualname__") else type(value)
        return f"<callable {getattr(owner, '__module__', '?')}.{owner.__qualname__}>"
    if isinstance(value, (np.ndarray, np.generic)):  # a numpy scalar's tolist() is its item()
        return value.tolist()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (bytes, bytearray)):
        raise OptionError(f"{where}: bytes cannot be saved in a JSON state file; pass the media as paths, or keep the "
                          "state in memory (state_dict, perckit.torch.gather)")
    raise OptionError(f"{where}: a {type(value).__name__} cannot be saved in a JSON state file")


def _too_large(options: Mapping[str, Any]) -> str | None:
    """The name of the first option holding an int that no float can hold (at any depth of its lists)."""

    def huge(v: Any) -> bool:
        if isinstance(v, (list, tuple)):
            return any(huge(x) for x in v)
        return isinstance(v, int) and not isinstance(v, bool) and abs(v) > sys.float_info.max

    return next((str(k) for k, v in options.items() if huge(v)), None)


class Accumulator:
    """A metric's running state: see the module docstring. Build one with :func:`accumulator`."""

    def __init__(self, metric: MetricCore, options: Mapping[str, Any] | None = None) -> None:
        self.core = metric
        self.options = dict(options or {})
        try:
            self.opts = metric.prepare(self.options)
        except OverflowError:  # the metrics' option checks take a number with float(): an int past float's range
            raise OptionError(f"{metric.name}: option {_too_large(self.options)!r}: expected a number, got an integer too "
                              "large for a float") from None
        self.reset()

    # ---------------------------------------------------------------- the running state

    def reset(self) -> None:
        """Forget every update (the metric and its options stay)."""
        self._records: dict[str, Any] = {}
        self._predictions: dict[str, Mapping] = {}
        self._references: dict[str, Mapping] = {}
        self._dropped: set[str] = set()

    def update(self, predictions: Sequence[Mapping] | None = None, references: Sequence[Mapping] | None = None) -> "Accumulator":
        """Add a batch (either side may be empty or None; the sides need not be aligned). Each pair is scored as
        soon as both halves are in. Returns the accumulator."""
        key = self.core.id_key
        preds = list(predictions) if isinstance(predictions, (list, tuple)) else predictions if predictions is not None else []
        refs = list(references) if isinstance(references, (list, tuple)) else references if references is not None else []
        done = self._records.keys()  # views and sets: isdisjoint walks the smaller side
        for side, rows, held in (("predictions", preds, (self._predictions.keys(), done)),
                                 ("references", refs, (self._references.keys(), done, self._dropped))):
            ids = index_by_id(rows, side, key)  # the rows' shape, their ids, repeats within the batch
            if not all(map(ids.keys().isdisjoint, held)):  # an id of this side already in, or already scored
                k = next(k for k in ids if any(k in seen for seen in held))
                raise PredictionError(f"{side}: duplicate {key} {k!r}")
        selects = self.core.selects(self.opts)
        for row in refs:
            k = row[key]
            if selects is not None and not selects(k):
                self._dropped.add(k)
                self._predictions.pop(k, None)
                continue
            self._references[k] = row
        self._predictions.update((row[key], row) for row in preds if row[key] not in self._dropped)
        ready = [k for k in self._references if k in self._predictions]
        with gc_paused():  # records hold no cycles; a collection pass would traverse every row and record held
            for k in progress(ready, f"scoring {self.core.name}", unit="pair") if len(ready) > 1 else ready:  # no bar for one
                record = self.core.score(self._predictions[k], self._references[k], self.opts)  # may raise: nothing is lost
                self._records[k] = Item(record, True)
                del self._predictions[k], self._references[k]
        return self

    def update_all(self, batches: Iterable[tuple[Sequence[Mapping] | None, Sequence[Mapping] | None]]) -> "Accumulator":
        """:meth:`update` with each ``(predictions, references)`` of ``batches`` in turn, the records then in the order
        one ``update`` of all the rows would leave them (the references' order, those waiting before first): a
        prediction and its reference in different batches give the same ``per_example`` list as in one batch. The
        evaluate modules' ``compute`` streams the rows read back from evaluate's cache through it. Returns the
        accumulator."""
        start, order = len(self._records), list(self._references)
        for predictions, references in batches:
            self.update(predictions, references)
            order += [row[self.core.id_key] for row in references or ()]
        prior = list(self._records)[:start]  # every record scored here has its reference in order
        self._records = {k: self._records[k] for k in prior + [k for k in order if k in self._records]}
        return self

    def compute(self) -> dict:
        """The metric's result over everything added so far (the state is unchanged: more updates may follow)."""
        key = self.core.id_key
        unknown = [k for k in self._predictions if k not in self._dropped]
        if unknown:
            raise PredictionError(unknown_ids_message(key, unknown))
        records = dict(self._records)
        if self._references:
            if self.core.strict(self.opts):
                raise PredictionError(missing_ids_message(key, list(self._references), self.core.empty_hint, self.core.lax_option))
            for k, ref in self._references.items():
                records[k] = Item(self.core.score(None, ref, self.opts), False)
        with gc_paused():  # as in update
            return self.core.reduce(list(records.values()), self.opts)

    # ---------------------------------------------------------------- merging and state

    def _check_same(self, other: "Accumulator | Mapping", where: str) -> None:
        name, config, options = (other.core.name, other.core.config, other.options) if isinstance(other, Accumulator) else (
            other.get("metric"), other.get("config"), other.get("options"))
        if (name, config) != (self.core.name, self.core.config):
            raise OptionError(f"{where}: expected an accumulator of {self.core.name!r} (config {self.core.config!r}), "
                              f"got {name!r} (config {config!r})")
        if _json_safe(options, where, True) != _json_safe(self.options, where, True):
            raise OptionError(f"{where}: expected the options {self.options!r}, got {options!r}; accumulators merge only "
                              "when they score with the same options")

    def merge(self, other: "Accumulator") -> "Accumulator":
        """Add ``other``'s state (same metric, config and options); an id both have scored is a
        :class:`PredictionError`. Returns this accumulator."""
        if not isinstance(other, Accumulator):
            raise OptionError(f"merge: expected an Accumulator, got {type(other).__name__}")
        self._check_same(other, "merge")
        key = self.core.id_key
        both = sorted(set(self._records) & set(other._records))
        if both:
            raise PredictionError(f"merge: {key} {both[:5]!r} scored in both accumulators (each item belongs to one)")
        self._records.update(other._records)
        self._dropped |= other._dropped
        self.update(list(other._predictions.values()), list(other._references.values()))
        return self

    def state_dict(self) -> dict:
        """The state as plain data (picklable; :meth:`save` writes it as JSON): format, version, metric, config,
        options, the records by id, the unpaired rows and the ids left out by ``selects``."""
        return {
            "format": STATE_FORMAT, "version": STATE_VERSION, "metric": self.core.name, "config": self.core.config,
            "options": dict(self.options),
            "records": [[k, self.core.record_to_state(item.record), item.predicted] for k, item in self._records.items()],
            "predictions": list(self._predictions.values()), "references": list(self._references.values()),
            "dropped": sorted(self._dropped),
        }

    def load_state_dict(self, state: Mapping, where: str = "state_dict") -> "Accumulator":
        """Replace this accumulator's state by ``state`` (from :meth:`state_dict`), checked first (format, version,
        metric, config, options, every record against the metric's :class:`RecordSchema`, the waiting rows against
        its declared features, ``dropped``; see the module docstring): a bad state is a
        :class:`~perckit.errors.ReleaseFormatError` naming ``where`` and leaves this accumulator as it was.
        Returns this accumulator."""
        with gc_paused():  # a state of many records builds many containers and holds no cycles
            return self._load_state_dict(state, where)

    def _load_state_dict(self, state: Mapping, where: str) -> "Accumulator":
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise ReleaseFormatError(f"{where}: expected a perckit accumulator state (format {STATE_FORMAT!r}), got "
                                     f"{type(state).__name__ if not isinstance(state, Mapping) else repr(state.get('format'))}")
        if state.get("version") != STATE_VERSION:
            raise ReleaseFormatError(f"{where}: expected state version {STATE_VERSION}, got {state.get('version')!r}")
        expected = {"format", "version", "metric", "config", "options", "records", "predictions", "references", "dropped"}
        if set(state) != expected:
            raise ReleaseFormatError(f"{where}: expected the keys {sorted(expected)}, got {sorted(state, key=repr)}")
        self._check_same(state, where)
        records = state["records"]
        if not isinstance(records, list):
            raise ReleaseFormatError(f"{where}: 'records' must be a list of [id, record, predicted] triples, got "
                                     f"{type(records).__name__}")
        strict = self.core.strict(self.opts)
        for i, r in enumerate(records):
            if not (isinstance(r, (list, tuple)) and len(r) == 3 and isinstance(r[0], str) and isinstance(r[2], bool)):
                raise ReleaseFormatError(f"{where}: 'records' must be a list of [id, record, predicted] triples; records[{i}] "
                                         f"is {describe(r)}")
            if strict and not r[2]:
                raise ReleaseFormatError(f"{where}: records[{i}] {r[0]!r}: expected predicted True (a strict metric never "
                                         "scores a missing prediction), got False")
        for side in ("predictions", "references", "dropped"):
            if not isinstance(state[side], list):
                raise ReleaseFormatError(f"{where}: 'predictions', 'references' and 'dropped' must be lists, got "
                                         f"{side!r}: {type(state[side]).__name__}")
        check_records(self.core.record_schema(self.opts), records, where)
        bad = check_side(compile_feature(Scalar("string"), nulls=False), state["dropped"], "dropped")
        if bad:
            raise ReleaseFormatError(f"{where}: {bad}")
        if self.core.features is not None and (state["predictions"] or state["references"]):
            for side, schema in zip(("predictions", "references"), self.core.features()):
                bad = check_side(compile_rows(schema), state[side], side)
                if bad:
                    raise ReleaseFormatError(f"{where}: {bad} (a waiting row must match the metric's declared "
                                             "features, as add_batch takes it)")
        loaded: dict[str, Item] = {}
        for i, (k, r, predicted) in enumerate(records):
            if k in loaded:
                raise ReleaseFormatError(f"{where}: {self.core.id_key} {k!r} recorded twice")
            try:
                loaded[k] = Item(self.core.record_from_state(r), predicted)
            except (TypeError, ValueError, KeyError) as e:  # a checked record always converts: a gap in its schema
                raise ReleaseFormatError(f"{where}: records[{i}] {k!r}: the record does not load ({type(e).__name__}: {e})") from None
        before = (self._records, self._predictions, self._references, self._dropped)
        self.reset()
        self._records, self._dropped = loaded, set(state["dropped"])
        try:
            self.update(state["predictions"], state["references"])
        except BaseException as e:
            self._records, self._predictions, self._references, self._dropped = before
            if isinstance(e, PerckitError):  # a waiting pair that does not score, an id given twice
                raise type(e)(f"{where}: {e}") from e
            raise
        return self

    def save(self, path: str | os.PathLike) -> Path:
        """Write :meth:`state_dict` as JSON to ``path`` (a new file, or one an earlier ``save`` wrote), atomically
        (:func:`perckit.io.paths.write_atomic`: on a full disk or past a file-size limit an
        :class:`~perckit.errors.OutputError`, and nothing is left behind)."""
        path = Path(path)
        state = _json_safe(self.state_dict(), f"save {str(path)!r}")
        if path.exists():
            try:  # a FIFO, a device, a folder, a file that cannot be read: not a state file
                with open_regular_file(path, repr(str(path))) as f:
                    ours = f'"format": "{STATE_FORMAT}"'.encode() in f.read(200)
            except (OSError, ValueError):
                ours = False
            if not ours:
                raise OptionError(f"save {str(path)!r}: expected a new file or an earlier accumulator state, got a file "
                                  "perckit did not write; choose another path")
        return write_atomic(path, json.dumps(state, allow_nan=True), f"save {str(path)!r}")

    def __repr__(self) -> str:
        return (f"Accumulator({self.core.name!r}, config={self.core.config!r}, {len(self._records)} scored, "
                f"{len(self._predictions)} predictions and {len(self._references)} references waiting)")


def core(name: str, config: str | None = None) -> MetricCore:
    """The :class:`MetricCore` of metric ``name`` (config ``config``), from its benchmark's descriptor; an
    :class:`OptionError` for an unknown one."""
    from .benchmark import metric

    return metric(name)[1].metric_core(config)


def accumulator(name: str, config: str | None = None, **options: Any) -> Accumulator:
    """An empty :class:`Accumulator` of metric ``name`` (``config``: Syn4D's task) scoring with ``options`` (those of
    the metric's ``compute``)."""
    return Accumulator(core(name, config), options)


def load_state(path: str | os.PathLike) -> Accumulator:
    """The accumulator a :meth:`Accumulator.save` file holds (read under :data:`MAX_STATE_BYTES`, checked)."""
    where = repr(str(path))
    state = read_json(Path(path), error=ReleaseFormatError, not_found=InputNotFoundError, limit=MAX_STATE_BYTES)
    if not isinstance(state, Mapping) or not isinstance(state.get("metric"), str):
        raise ReleaseFormatError(f"{where}: expected a perckit accumulator state with a 'metric', got {type(state).__name__}")
    config = state.get("config")
    if config is not None and not isinstance(config, str):
        raise ReleaseFormatError(f"{where}: 'config' must be a string or null, got {describe(config)}")
    options = state.get("options")
    if not isinstance(options, Mapping):
        raise ReleaseFormatError(f"{where}: 'options' must be an object, got {describe(options)}")
    try:
        acc = Accumulator(core(state["metric"], config), options)
    except OptionError as e:  # an unknown metric or config, an option the metric refuses
        raise OptionError(f"{where}: {e}") from None
    return acc.load_state_dict(state, where)


def merge_files(paths: Iterable[str | os.PathLike]) -> Accumulator:
    """One accumulator holding the states of every file :meth:`Accumulator.save` wrote (a Slurm array, separate
    hosts): same metric, config and options in all of them."""
    paths = list(paths)
    if not paths:
        raise OptionError("merge_files: expected at least one state file")
    acc = load_state(paths[0])
    for p in paths[1:]:
        acc.merge(load_state(p))
    return acc
