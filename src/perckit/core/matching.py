"""Pairing predictions with references by id: the one matcher every metric uses.

:func:`index_by_id` indexes one side (a list of dicts with a string id, no id twice);
:func:`pair_by_id` pairs every reference with the prediction of the same id, in reference
order, under one missing-id policy:

- a duplicate id on either side, or a prediction id the references do not know, always raises;
- a reference without a prediction raises when ``strict`` (the hint says what an empty
  prediction looks like and, where the metric has a lax mode, how to turn it on); otherwise it
  is paired with ``None`` and the metric scores it as "no output".

All messages are :class:`~perckit.errors.PredictionError` and start with the side
(``predictions`` / ``references``), name the id field and quote a few of the ids.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..errors import PredictionError
from ..errors import short_repr as _short

#: How many ids a message quotes.
QUOTED_IDS = 5


def index_by_id(rows: Sequence[Mapping], side: str, key: str = "query_id") -> dict[str, Mapping]:
    """``{row[key]: row}``; rows that are not a list, a row that is not a dict, a row without a string id or a
    repeated id raises :class:`PredictionError` naming ``side``, the row and the field."""
    if not isinstance(rows, (list, tuple)):
        raise PredictionError(f"{side}: expected a list of rows, got {_short(rows)}")
    out: dict[str, Mapping] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise PredictionError(f"{side}[{i}]: expected a dict with a string {key!r}, got {type(row).__name__}: {_short(row)}")
        rid = row.get(key)
        if not isinstance(rid, str):
            raise PredictionError(f"{side}[{i}].{key}: expected a string, got {_short(rid)}")
        if rid in out:
            raise PredictionError(f"{side}: duplicate {key} {rid!r}")
        out[rid] = row
    return out


def unknown_ids_message(key: str, unknown: Sequence[str]) -> str:
    """The one message for prediction ids the references do not know."""
    return (
        f"predictions: {key} {unknown[0]!r} is unknown to the references "
        f"({len(unknown)} unknown id(s), e.g. {list(unknown[:QUOTED_IDS])})"
    )


def missing_ids_message(key: str, missing: Sequence[str], empty_hint: str | None = None, lax_option: str | None = None) -> str:
    """The one message for references without a prediction.

    ``empty_hint`` says what an empty prediction looks like for this metric (``"frames=[]"``);
    ``lax_option`` names the option that scores missing predictions as empty (``"strict=False"``),
    for the metrics that have one.
    """
    text = f"predictions: no prediction for {len(missing)} reference {key}(s), e.g. {list(missing[:QUOTED_IDS])}; give every reference a prediction"
    if empty_hint:
        text += f" ({empty_hint})"
    if lax_option:
        text += f" or pass {lax_option} to score missing predictions as empty"
    return text


def pair_by_id(
    predictions: Sequence[Mapping],
    references: Sequence[Mapping],
    key: str,
    *,
    strict: bool = True,
    empty_hint: str | None = None,
    lax_option: str | None = None,
    selects: Callable[[str], bool] | None = None,
) -> list[tuple[Mapping | None, Mapping]]:
    """Pair every reference with the prediction of the same ``key``, in reference order.

    ``selects(id)`` keeps only some references (the pairs of the others are dropped; their
    predictions are still checked). A reference without a prediction raises when ``strict``
    (see :func:`missing_ids_message`), else it is paired with ``None``.
    """
    refs = index_by_id(references, "references", key)
    preds = index_by_id(predictions, "predictions", key)
    unknown = [k for k in preds if k not in refs]
    if unknown:
        raise PredictionError(unknown_ids_message(key, unknown))
    pairs = [(preds.get(k), r) for k, r in refs.items() if selects is None or selects(k)]
    if strict:
        missing = [r[key] for p, r in pairs if p is None]
        if missing:
            raise PredictionError(missing_ids_message(key, missing, empty_hint, lax_option))
    return pairs
