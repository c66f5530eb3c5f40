"""Matching predictions to references by id: the one index every metric uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .errors import PredictionError
from .errors import short_repr as _short


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
