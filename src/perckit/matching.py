"""Matching predictions to references by id: the one index every metric uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .errors import PredictionError


def index_by_id(rows: Sequence[Mapping], side: str, key: str = "query_id") -> dict[str, Mapping]:
    """``{row[key]: row}``; a row without a string id or a repeated id raises :class:`PredictionError` naming ``side``."""
    out: dict[str, Mapping] = {}
    for i, row in enumerate(rows):
        rid = row.get(key) if isinstance(row, Mapping) else None
        if not isinstance(rid, str):
            raise PredictionError(f"{side}[{i}]: expected a dict with a string {key!r}, got {type(row).__name__}")
        if rid in out:
            raise PredictionError(f"{side}: duplicate {key} {rid!r}")
        out[rid] = row
    return out
