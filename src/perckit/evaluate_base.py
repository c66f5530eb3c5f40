"""What every perckit ``evaluate`` module shares: input errors that name the row and the field.

``evaluate`` encodes each batch with the module's declared features before any perckit code runs.
On a value of the wrong type it raises a bare ``ValueError`` (``invalid literal for int() with base
10: 'one'``), a ``TypeError``, or its own ``ValueError`` that prints the whole schema and batch.
:class:`PerckitMetric` turns all of them into a :class:`~perckit.errors.PredictionError` (still a
``ValueError``) that names the side, the row, the key, the declared feature and the value found.
Only the failure path does extra work; a good batch is added exactly as ``evaluate`` does it.

:class:`PerckitMetric` also builds the module's ``MetricInfo`` from three class attributes (``CARD``,
``SCHEMAS``, ``COMPUTE``), so each metric script stays a thin entry point.

The metric scripts import this module (``from perckit import evaluate_base``), never the class
itself: ``evaluate.load`` takes the first ``EvaluationModule`` subclass it finds in the script's
namespace as the metric.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, ClassVar, NamedTuple

import evaluate

from .errors import PredictionError, short_repr


def _check_value(metric: evaluate.Metric, feature: Any, value: Any) -> None:
    """Encode ``value`` with ``feature`` the way ``evaluate.add_batch`` does; raise what it would raise."""
    import datasets
    import pyarrow as pa

    metric._enforce_nested_string_type(feature, value)
    features = datasets.Features({"v": feature})
    pa.Table.from_pylist([features.encode_example({"v": value})], schema=features.arrow_schema)


def describe_bad_input(metric: evaluate.Metric, batch: Mapping[str, Any], features: Mapping[str, Any]) -> str | None:
    """The first row / key of ``batch`` that the declared ``features`` refuse, as a message (None if none found)."""
    sides = [k for k in features if k in batch]
    lengths = {k: len(batch[k]) for k in sides if hasattr(batch[k], "__len__")}
    if len(set(lengths.values())) > 1:
        return (
            "expected as many predictions as references (evaluate pairs them row by row), got "
            + " and ".join(f"{n} {k}" for k, n in lengths.items())
        )
    for side in sides:
        schema = features[side]
        for i, row in enumerate(batch[side]):
            where = f"{side}[{i}]"
            if isinstance(schema, Mapping):
                if not isinstance(row, Mapping):
                    return f"{where}: expected a dict with the keys {sorted(schema)}, got {type(row).__name__}: {short_repr(row)}"
                missing = [k for k in schema if k not in row]
                extra = [k for k in row if k not in schema]
                if missing or extra:
                    return f"{where}: expected exactly the keys {sorted(schema)}, got {sorted(row)} (missing {missing}, unexpected {extra})"
                items = [(f"{where}.{k}", schema[k], row[k]) for k in schema]
            else:
                items = [(where, schema, row)]
            for name, feature, value in items:
                try:
                    _check_value(metric, feature, value)
                except Exception as e:  # whatever datasets' encoder raises on this value
                    return f"{name}: expected {feature}, got {short_repr(value, 200)} ({type(e).__name__}: {e})"
    return None


class Card(NamedTuple):
    """The texts of a metric module's ``MetricInfo`` (what ``evaluate`` shows as the metric's card)."""

    description: str
    inputs_description: str  #: the ``Args`` / ``Returns`` / ``Examples`` text
    citation: str
    reference_urls: tuple = ()


class PerckitMetric(evaluate.Metric):
    """``evaluate.Metric`` whose input errors are :class:`PredictionError` naming the row and the field.

    A metric script sets three class attributes; ``_info`` and ``_compute`` are built from them:

    - ``CARD``: a :class:`Card` (also the class docstring, as ``evaluate``'s ``add_start_docstrings`` makes it);
    - ``SCHEMAS``: ``(predictions_schema, references_schema)``, two callables returning the declared features;
    - ``COMPUTE``: the core function, called as ``COMPUTE(predictions, references, **options)``.

    A metric with configs overrides :meth:`schemas` and ``_compute``.
    """

    CARD: ClassVar[Card] = Card("", "", "")
    SCHEMAS: ClassVar[tuple] = ()
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
        return evaluate.MetricInfo(
            description=self.CARD.description,
            citation=self.CARD.citation,
            inputs_description=self.CARD.inputs_description,
            features=datasets.Features({"predictions": predictions, "references": references}),
            reference_urls=list(self.CARD.reference_urls),
        )

    def _compute(self, predictions: Any, references: Any, **options: Any) -> dict:
        if self.COMPUTE is None:
            raise NotImplementedError(f"{type(self).__name__}: set COMPUTE (the core function) or override _compute")
        return type(self).COMPUTE(predictions, references, **options)

    @property
    def metric_name(self) -> str:
        """The metric's name as users load it: the script's file name (``refer_iou``), not the class name."""
        import inspect
        from pathlib import Path

        try:
            return Path(inspect.getfile(type(self))).stem
        except (TypeError, OSError):
            return self.name

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of predictions and references (see ``evaluate.EvaluationModule.add_batch``).

        Inputs that do not match the declared features raise :class:`~perckit.errors.PredictionError`
        naming the row and the field.
        """
        try:
            return super().add_batch(predictions=predictions, references=references, **kwargs)
        except PredictionError:
            raise
        except Exception as e:
            import pyarrow as pa

            if not isinstance(e, (ValueError, TypeError, KeyError, pa.ArrowException)):
                raise
            batch = {"predictions": predictions, "references": references, **kwargs}
            features = self.selected_feature_format or (self.features if isinstance(self.features, Mapping) else None)
            detail = None
            if features is not None:
                try:
                    detail = describe_bad_input(self, batch, features)
                except Exception:  # the diagnosis must never hide the original error
                    detail = None
            raise PredictionError(
                f"{self.metric_name}: the inputs do not match the metric's declared features: "
                + (detail or f"{type(e).__name__}: {e}")
            ) from e

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one prediction and reference (see ``evaluate.EvaluationModule.add``); bad inputs raise PredictionError."""
        try:
            return super().add(prediction=prediction, reference=reference, **kwargs)
        except PredictionError:
            raise
        except (ValueError, TypeError, KeyError) as e:
            raise PredictionError(f"{self.metric_name}: the input does not match the metric's declared features: {type(e).__name__}: {e}") from e
