"""What every perckit ``evaluate`` module shares: input errors that name the row and the field.

``evaluate`` encodes each batch with the module's declared features before any perckit code runs, and
that encoding coerces silently (``Value("int32")`` stores ``1.9`` as 1, ``True`` as 1, ``"3"`` as 3;
``Value("string")`` stores 5 as ``"5"``; ...): the metric would score a value the user never gave.
:class:`PerckitMetric` therefore checks every raw batch against the declared features first
(:mod:`perckit.hf.feature_check`, on ``compute``, ``add_batch`` and ``add``) and refuses any value the
encoding would change with a :class:`~perckit.errors.PredictionError` (still a ``ValueError``) naming
the side, the row and the field (``predictions[0].frames[2].frame_id: expected an integer, got 1.9``).
What ``evaluate`` itself still refuses (a bare ``ValueError`` such as ``invalid literal for int() with
base 10: 'one'``, a ``TypeError``, its own ``ValueError`` that prints the whole schema and batch) becomes
such an error too. The options given to ``evaluate.load`` are checked as well: a name ``evaluate`` does
not know (a compute option passed at load time would be silently ignored) or a value of the wrong type
is an :class:`~perckit.errors.OptionError`.

:class:`PerckitMetric` also builds the module's ``MetricInfo`` from three class attributes (``CARD``,
``SCHEMAS``, ``COMPUTE``), so each metric script stays a thin entry point.

The metric scripts import this module (``from perckit.hf import metric as evaluate_base``), never the class
itself: ``evaluate.load`` takes the first ``EvaluationModule`` subclass it finds in the script's
namespace as the metric.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any, Callable, ClassVar, Iterator, NamedTuple

import evaluate

from . import feature_check
from ..errors import OptionError, PredictionError, check_option_type, short_repr
from ..io.paths import open_checked
from ..io.prefetch import gc_paused

#: The options ``evaluate.load`` / ``EvaluationModule.__init__`` take, and the type each must have.
INIT_OPTIONS = {
    "config_name": "str | None", "keep_in_memory": "bool", "cache_dir": "path | None", "num_process": "int",
    "process_id": "int", "seed": "int | None", "experiment_id": "str | None", "hash": "str | None",
    "max_concurrent_cache_files": "int", "timeout": "number",
}


def _encoder_diagnosis(metric: evaluate.Metric, batch: Mapping[str, Any], features: Mapping[str, Any], one: bool = False) -> str | None:
    """The first row / key of ``batch`` that ``datasets``' own encoder refuses, as a message (None if none, or
    if the diagnosis itself fails: it must never hide the error it explains)."""
    try:
        import datasets
        import pyarrow as pa

        for side in (k for k in features if k in batch):
            schema = features[side]
            for i, row in enumerate(batch[side]):
                where = _singular(side) if one else f"{side}[{i}]"
                if isinstance(schema, Mapping):
                    if not isinstance(row, Mapping) or set(row) != set(schema):
                        continue  # reported by the perckit check
                    items = [(f"{where}.{k}", schema[k], row[k]) for k in schema]
                else:
                    items = [(where, schema, row)]
                for name, feature, value in items:
                    try:  # value encoded with feature the way evaluate.add_batch does, raising what it would raise
                        metric._enforce_nested_string_type(feature, value)
                        encoded = datasets.Features({"v": feature})
                        pa.Table.from_pylist([encoded.encode_example({"v": value})], schema=encoded.arrow_schema)
                    except Exception as e:  # whatever datasets' encoder raises on this value
                        return f"{name}: expected {feature}, got {short_repr(value, 200)} ({type(e).__name__}: {e})"
        return None
    except Exception:  # whatever the diagnosis raises
        return None


def _singular(side: str) -> str:
    """``prediction`` for ``predictions``: how ``add`` names its one example."""
    return side[:-1] if side.endswith("s") else side


def describe_bad_input(metric: evaluate.Metric, batch: Mapping[str, Any], features: Mapping[str, Any], *, one: bool = False) -> str | None:
    """The first value of ``batch`` that the declared ``features`` refuse, as a message (None if none found).

    First the perckit check (:mod:`perckit.hf.feature_check`: every value ``evaluate``'s encoding would refuse
    or silently change, named by its exact place), then, when ``datasets``' own encoder refuses something
    too, its diagnosis (the top-level field, the declared feature and its error). ``one=True``: ``batch``
    holds one example (``add``), each side named by its singular (``prediction``).
    """
    sides = [k for k in features if k in batch]
    if not one:
        bad = next(filter(None, (feature_check.check_rows_type(batch[side], side) for side in sides)), None)
        if bad:
            return bad
        lengths = {k: len(batch[k]) for k in sides}
        if len(set(lengths.values())) > 1:
            return ("expected as many predictions as references (evaluate pairs them row by row), got "
                    + " and ".join(f"{n} {k}" for k, n in lengths.items()))
    cache = metric.__dict__.get("_perckit_checkers")  # the compiled checkers, once per metric instance and feature set
    if cache is None or cache[0] is not features:
        cache = metric.__dict__["_perckit_checkers"] = (features, {k: feature_check.compile_rows(v) for k, v in features.items()})
    checked = (feature_check.check_side(cache[1][k], batch[k], _singular(k) if one else k, one) for k in sides)
    detail = next(filter(None, checked), None)
    if detail is None:
        return None
    if one:
        batch = {k: [batch[k]] for k in sides}
    encoder = _encoder_diagnosis(metric, batch, features, one)
    return detail if encoder is None else f"{detail} (datasets' encoder: {encoder})"


class Card(NamedTuple):
    """The texts of a metric module's ``MetricInfo`` (what ``evaluate`` shows as the metric's card)."""

    description: str
    inputs_description: str  #: the ``Args`` / ``Returns`` / ``Examples`` text
    citation: str
    reference_urls: tuple = ()


#: evaluate 0.4's names (not public API) the direct cache write uses; where one is missing, evaluate's add_batch writes
_EVALUATE_WRITER = ("_init_writer", "_enforce_nested_string_type", "_infer_feature_from_batch", "writer")


def _cache_tables(paths: list[str]) -> Iterator[Any]:
    """Each record batch of evaluate's cache files ``paths`` (Arrow streams) as a table, read through the checked
    reader (a regular file; it is evaluate's own file, so no size cap)."""
    import pyarrow as pa

    for path in paths:
        with open_checked(path, "evaluate's cache file", error=PredictionError) as f:
            for batch in pa.ipc.open_stream(f):
                yield pa.Table.from_batches([batch])


class PerckitMetric(evaluate.Metric):
    """``evaluate.Metric`` whose input errors are :class:`PredictionError` naming the row and the field.

    A metric script sets three class attributes; ``_info`` and ``_compute`` are built from them:

    - ``CARD``: a :class:`Card` (also the class docstring, as ``evaluate``'s ``add_start_docstrings`` makes it);
    - ``SCHEMAS``: ``(predictions_schema, references_schema)``, two callables returning the declared features;
    - ``ACCUMULATOR``: the metric's name (its descriptor's ``MetricSpec.core``): ``compute`` runs its accumulator
      (``accumulator(name, config).update(predictions, references).compute()``, the numbers a training loop's
      accumulator gives); or ``COMPUTE``, a core function called as ``COMPUTE(predictions, references, **options)``.

    A metric with configs overrides :meth:`schemas` (its config is passed to the accumulator).
    """

    CARD: ClassVar[Card] = Card("", "", "")
    SCHEMAS: ClassVar[tuple] = ()
    ACCUMULATOR: ClassVar[str | None] = None
    COMPUTE: ClassVar[Callable[..., Any] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "CARD" in cls.__dict__:
            cls.__doc__ = cls.CARD.description + cls.CARD.inputs_description + (cls.__dict__.get("__doc__") or "")

    def schemas(self) -> tuple[Any, Any]:
        """The declared features of the predictions and of the references."""
        predictions, references = self.SCHEMAS
        return predictions(), references()

    def _info(self) -> evaluate.MetricInfo:
        import datasets

        predictions, references = self.schemas()
        info = evaluate.MetricInfo(
            description=self.CARD.description,
            citation=self.CARD.citation,
            inputs_description=self.CARD.inputs_description,
            features=datasets.Features({"predictions": predictions, "references": references}),
            reference_urls=list(self.CARD.reference_urls),
        )
        # compute hands _compute the cache's Arrow columns, read a batch at a time (_batches). Set after the dataclass's
        # check, which takes a format only for Value features (written for numpy: Arrow holds any feature).
        info.format = "arrow"
        return info

    def _batches(self, predictions: Any, references: Any, size: int) -> Iterator[tuple[list, list]]:
        """The rows :meth:`_compute` scores, as ``(predictions, references)`` lists of at most ``size`` rows. Rows given
        to ``_compute`` directly come as they are, in one batch. The Arrow columns ``compute`` hands over (the module's
        ``format="arrow"``) come as datasets' Python format gives them (``PythonFormatter``: the values, media
        decoded), read again from the cache files they were memory-mapped from (``file_paths``, in evaluate's
        order) with plain reads, one record batch at a time: read through the memory map, every page would stay in
        the process's resident memory to the end (130 MB at 200k refer_iou pairs). With ``keep_in_memory`` the
        columns are read themselves."""
        import pyarrow as pa

        if not isinstance(predictions, (pa.Array, pa.ChunkedArray)):
            yield predictions, references
            return
        from datasets.formatting import PythonFormatter

        python = PythonFormatter(features=self.data.features).format_column
        if getattr(self, "buf_writer", True) is None and getattr(self, "file_paths", None):  # plain reads (a path would be memory-mapped)
            tables = _cache_tables(self.file_paths)
        else:
            tables = [pa.table({"predictions": predictions, "references": references})]
        for table in tables:
            for start in range(0, table.num_rows, size):
                part = table.slice(start, size)
                yield python(part.select(["predictions"])), python(part.select(["references"]))

    def _compute(self, predictions: Any, references: Any, **options: Any) -> dict:
        """Score through the metric's accumulator, the rows streamed :data:`~perckit.hf.accumulate.ROWS_PER_UPDATE` at
        a time (:meth:`_batches`; :meth:`Accumulator.update_all`: the numbers, and the order of a ``per_example``
        list, of one ``update`` of all the rows), or through ``COMPUTE`` on all the rows: never a Python copy of every
        row beside the user's own."""
        from .accumulate import ROWS_PER_UPDATE, accumulator

        self._scoring = True  # evaluate has finalized its cache file: a failure from here on is released by compute
        with contextlib.closing(self._batches(predictions, references, ROWS_PER_UPDATE)) as batches:  # closed on a raise too
            if self.ACCUMULATOR is not None:
                config = self.config_name if self.config_name not in (None, "default") else None
                return accumulator(self.ACCUMULATOR, config, **options).update_all(batches).compute()
            if self.COMPUTE is None:
                raise NotImplementedError(f"{type(self).__name__}: set ACCUMULATOR or COMPUTE (the core function), or override _compute")
            sides = list(zip(*batches)) or [(), ()]  # (the predictions' parts, the references' parts)
        return type(self).COMPUTE(*([row for part in side for row in part] for side in sides), **options)

    @property
    def metric_name(self) -> str:
        """The metric's name as users load it: the script's file name (``refer_iou``), not the class name."""
        import inspect
        from pathlib import Path

        try:
            return Path(inspect.getfile(type(self))).stem
        except (TypeError, OSError):
            return self.name

    def __init__(self, config_name: str | None = None, **kwargs: Any) -> None:
        # The options of evaluate.load(path, **options): a name evaluate does not take (it would be silently ignored:
        # compute options go to compute) or a value of the wrong type raises OptionError.
        owner = f"evaluate.load('metrics/{self.metric_name}')"
        unknown = sorted(set(kwargs) - set(INIT_OPTIONS))
        if unknown:
            raise OptionError(f"{owner}: unknown option(s) {unknown}; expected some of {sorted(INIT_OPTIONS)} "
                              "(the metric's own options go to compute(...))")
        for name, value in {"config_name": config_name, **kwargs}.items():
            check_option_type(name, value, INIT_OPTIONS[name], owner=owner)
        super().__init__(config_name=config_name, **kwargs)

    def _declared(self) -> Mapping[str, Any] | None:
        features = self.selected_feature_format or self.features
        return features if isinstance(features, Mapping) else None

    def _refuse(self, batch: Mapping[str, Any], *, one: bool = False) -> None:
        """Raise :class:`PredictionError` when a value of ``batch`` does not match the declared features."""
        features = self._declared()
        if features is None:
            return
        detail = describe_bad_input(self, batch, features, one=one)
        if detail:
            what = "input does" if one else "inputs do"
            raise PredictionError(f"{self.metric_name}: the {what} not match the metric's declared features: {detail}")

    def compute(self, *, predictions=None, references=None, **kwargs):
        """``evaluate.EvaluationModule.compute``, with Python's cyclic garbage collector paused while it runs.

        The inputs, their encoded form and the rows read back from the cache file are plain acyclic data
        (dicts, lists, strings): a collection pass finds nothing to free but traverses all of them, and such
        passes took half of ``compute``'s time on 5,598 RefCOCO-M pairs. The collector is re-enabled (if it was
        on) when ``compute`` returns or raises."""
        self._scoring = False
        with gc_paused():
            try:
                return super().compute(predictions=predictions, references=references, **kwargs)
            except BaseException:
                if self._scoring:
                    self._release_failed_compute()
                raise
            finally:
                self._scoring = False

    def _release_failed_compute(self) -> None:
        """Undo what ``evaluate``'s ``compute`` leaves when the scoring step raises (an option or a prediction
        refused after the rows were cached): it releases the cache files' locks and removes the files only after
        ``_compute`` returns, so a refusal left this module's own cache file on disk and its lock held, and the
        next ``add_batch`` / ``compute`` of the module waited a second for that lock before taking another file
        name. Here the module's own cache files (the ones ``evaluate`` created for it, listed in ``file_paths``)
        are removed and their locks released, as after a successful ``compute``; nothing else is touched."""
        self.data = None
        self.writer = None
        if self.buf_writer is not None:
            self.buf_writer = None
            return
        for lock, path in reversed(list(zip(self.filelocks or [], self.file_paths or []))):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            lock.release()
        self.filelocks = None

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of predictions and references (see ``evaluate.EvaluationModule.add_batch``).

        Every value is checked against the declared features first: one that ``evaluate``'s encoding
        would refuse or silently change (a fraction for an int, a number for a string, ...) raises
        :class:`~perckit.errors.PredictionError` naming the side, the row and the field. The collector is
        paused as in :meth:`compute`.
        """
        batch = {"predictions": predictions, "references": references, **kwargs}
        with gc_paused():
            self._refuse(batch)
            if self._write_direct(batch):
                return None
            try:
                return super().add_batch(predictions=predictions, references=references, **kwargs)
            except PredictionError:
                raise
            except Exception as e:
                import pyarrow as pa

                if not isinstance(e, (ValueError, TypeError, KeyError, pa.ArrowException)):
                    raise
                features = self._declared()
                detail = _encoder_diagnosis(self, batch, features) if features is not None else None
                raise PredictionError(
                    f"{self.metric_name}: the inputs do not match the metric's declared features: "
                    + (detail or f"{type(e).__name__}: {e}")
                ) from e

    def _write_direct(self, batch: Mapping[str, Any]) -> bool:
        """Write a checked ``batch`` to evaluate's cache as Arrow arrays that pyarrow builds from the rows with each
        input's declared Arrow type, where ``datasets``' per-value ``encode_batch`` (three quarters of ``add_batch``)
        would build the same (:func:`perckit.hf.feature_check.arrow_direct`); the writer, its file and its lock are
        evaluate's own, set up as its ``add_batch`` does. False (nothing written: evaluate's ``add_batch`` takes the
        batch) for other features, inputs other than lists, or rows pyarrow will not convert."""
        import datasets
        import pyarrow as pa

        types = self.__dict__.get("_perckit_arrow")  # per metric instance: {input: its Arrow type} or None
        if types is None:
            features = self.features
            direct = isinstance(features, datasets.Features) and all(map(feature_check.arrow_direct, features.values()))
            types = self.__dict__["_perckit_arrow"] = {f.name: f.type for f in features.arrow_schema} if direct else {}
        if not types or set(batch) != set(types) or not all(isinstance(batch[k], (list, tuple)) for k in types):
            return False
        if not all(hasattr(self, name) for name in _EVALUATE_WRITER):  # another evaluate: its own add_batch writes
            return False
        try:  # evaluate's own path encodes it, or refuses it (as its first row's check refuses a None string, dict or list)
            for k in types:
                if len(batch[k]):
                    self._enforce_nested_string_type(self.features[k], batch[k][0])
            arrays = {k: pa.array(batch[k], type=t) for k, t in types.items()}
        except (pa.ArrowException, TypeError, ValueError, KeyError, OverflowError):
            return False
        if self.writer is None:
            self.selected_feature_format = self._infer_feature_from_batch(batch)
            self._init_writer()
        self.writer.write_batch(arrays)
        return True

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one prediction and reference (see ``evaluate.EvaluationModule.add``); bad inputs raise PredictionError
        naming the field (``prediction.frames[0].frame_id: expected an integer, got 1.9``)."""
        self._refuse({"predictions": prediction, "references": reference, **kwargs}, one=True)
        try:
            return super().add(prediction=prediction, reference=reference, **kwargs)
        except PredictionError:
            raise
        except (ValueError, TypeError, KeyError) as e:
            raise PredictionError(f"{self.metric_name}: the input does not match the metric's declared features: {type(e).__name__}: {e}") from e
