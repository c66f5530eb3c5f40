"""The shared feature pieces and the one helper that projects rows onto a metric's keys."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ..errors import PredictionError


def rle_feature() -> dict:
    """The shared RLE struct: ``size`` = [H, W] (checked to have length 2 in code), ``counts`` a compressed COCO RLE str."""
    from datasets import Value

    return {"size": [Value("int32")], "counts": Value("string")}


def project(row: Any, schema: Any) -> Any:
    """Project a builder row onto a metric's declared keys, recursively.

    evaluate rejects a missing or an extra key at every nesting level, and a
    ``None`` where a string or list is declared, so: dict schemas keep exactly
    their keys, list schemas map over the items (``None`` becomes ``[]``).
    """
    if isinstance(schema, Mapping):
        if not isinstance(row, Mapping):
            raise PredictionError(f"expected a dict with keys {sorted(schema)}, got {type(row).__name__}")
        missing = [k for k in schema if k not in row]
        if missing:
            raise PredictionError(f"row is missing the key(s) {missing} (expected {sorted(schema)})")
        return {k: project(row[k], sub) for k, sub in schema.items()}
    if isinstance(schema, (list, tuple)):
        return [] if row is None else [project(item, schema[0]) for item in row]
    if row is None:
        ds = sys.modules.get("datasets")  # a schema holding a datasets.Value means datasets is imported
        if ds is not None and isinstance(schema, ds.Value) and schema.dtype == "string":
            return ""
    return row
