"""Adapters from other tools' prediction formats to ``refer_iou`` prediction rows."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Iterable, Mapping
from typing import Any

from ..core import segmentation as seg
from ..errors import InputNotFoundError, PredictionError, RLEError
from ..errors import short_repr as _short
from ..io.jsonio import iter_json_lines
from ..io.jsonio import parse_int
from .features import to_metric_prediction
from .release import expression_id as make_expression_id


def _mask(value: Any, where: str) -> dict:
    try:
        return seg.as_rle(value, where)
    except RLEError as e:
        raise PredictionError(str(e)) from None


def _expression_id(obj: Mapping, where: str) -> str:
    """``expression_id``, or ``"<sample_id>:<sentence_index>"``; the two must agree when both are given."""
    has_pair = "sample_id" in obj or "sentence_index" in obj
    eid = obj.get("expression_id")
    if has_pair:
        if "sample_id" not in obj or "sentence_index" not in obj:
            raise PredictionError(f"{where}: 'sample_id' and 'sentence_index' go together, got only one of them")
        built = make_expression_id(
            parse_int(obj["sample_id"], f"{where}: 'sample_id'", PredictionError),
            parse_int(obj["sentence_index"], f"{where}: 'sentence_index'", PredictionError),
        )
        if eid is not None and eid != built:
            raise PredictionError(f"{where}: 'expression_id' {eid!r} disagrees with sample_id:sentence_index {built!r}")
        return built
    if isinstance(eid, str) and eid:
        return eid
    if eid is not None:
        raise PredictionError(f"{where}: 'expression_id' must be a non-empty string, got {_short(eid)}")
    if "sentence" in obj:
        raise PredictionError(
            f"{where}: a prediction keyed by sentence text is ambiguous (one sentence can occur under several samples); "
            "give 'expression_id' or 'sample_id' + 'sentence_index'"
        )
    raise PredictionError(f"{where}: expected 'expression_id' or 'sample_id' + 'sentence_index', got the keys {sorted(obj)}")


def _check_unique(rows: list[dict], where_of: list[str]) -> None:
    seen: dict[str, str] = {}
    for row, where in zip(rows, where_of):
        eid = row["expression_id"]
        if eid in seen:
            raise PredictionError(f"{where}: duplicate expression_id {eid!r} (first at {seen[eid]})")
        seen[eid] = where


#: Largest prediction file read: the 5,598 expressions of the release need a few MB.
MAX_PREDICTIONS_BYTES = 1 << 30


def load_predictions_jsonl(path: str | Path) -> list[dict]:
    """Read one prediction per line into ``refer_iou`` prediction rows ``{expression_id, mask}``.

    Each JSON object carries ``expression_id``, or ``sample_id`` plus ``sentence_index``, and
    ``mask`` as a COCO RLE dict (``counts`` a str, or a list of ints for uncompressed RLE).
    Blank lines are skipped. Errors name the file and the line.
    """
    path = Path(path)
    if not path.exists() or path.is_dir():
        raise InputNotFoundError(f"{str(path)!r}: prediction file not found")
    # The one JSON Lines reader (perckit.io.jsonio.iter_json_lines): a regular file under MAX_PREDICTIONS_BYTES,
    # a leading UTF-8 BOM skipped, one JSON object a line, a repeated key refused.
    rows, wheres = [], []
    for _, where, obj in iter_json_lines(path, error=PredictionError, limit=MAX_PREDICTIONS_BYTES, not_found=InputNotFoundError):
        eid = _expression_id(obj, where)
        if not isinstance(obj.get("mask"), Mapping):
            raise PredictionError(f"{where}: expected 'mask' as a COCO RLE dict {{'size': [H, W], 'counts': ...}}, got {_short(obj.get('mask'))}")
        rows.append({"expression_id": eid, "mask": _mask(obj["mask"], f"{where}: mask")})
        wheres.append(where)
    _check_unique(rows, wheres)
    return rows


def flatten_image_predictions(rows: Iterable[Mapping]) -> list[dict]:
    """Per-image predictions ``{"image_id", "samples": [{"id", "masks": [mask per sentence]}]}`` to expression rows.

    ``masks[k]`` is the prediction for sentence k of sample ``id`` (expression ``"<id>:<k>"``);
    masks may be RLE dicts (str, bytes or list counts) or 2-D binary arrays.
    """
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise PredictionError(f"predictions: expected a list of per-image rows {{'image_id', 'samples'}}, got {type(rows).__name__}")
    out, wheres = [], []
    for i, row in enumerate(rows):
        where = f"predictions[{i}]"
        if not isinstance(row, Mapping):
            raise PredictionError(f"{where}: expected {{'image_id', 'samples'}}, got {type(row).__name__}")
        if "image_id" in row:
            where = f"{where} (image_id {row['image_id']})"
        samples = row.get("samples")
        if not isinstance(samples, (list, tuple)):
            raise PredictionError(f"{where}: expected 'samples' as a list of {{'id', 'masks'}}, got {_short(samples)}")
        for j, s in enumerate(samples):
            if not isinstance(s, Mapping) or "id" not in s:
                raise PredictionError(f"{where}: samples[{j}]: expected {{'id', 'masks'}}, got {_short(s)}")
            sid = parse_int(s["id"], f"{where}: samples[{j}].id", PredictionError)
            masks = s.get("masks")
            if not isinstance(masks, (list, tuple)):
                raise PredictionError(f"{where}: sample id {sid}: expected 'masks' as a list (one mask per sentence), got {_short(masks)}")
            for k, m in enumerate(masks):
                swhere = f"{where}: sample id {sid}: masks[{k}]"
                out.append({"expression_id": make_expression_id(sid, k), "mask": _mask(m, swhere)})
                wheres.append(swhere)
    _check_unique(out, wheres)
    return out


def gt_as_predictions(rows: Iterable[Mapping]) -> list[dict]:
    """``expressions`` rows as predictions (the ground truth scored against itself)."""
    return [to_metric_prediction(r) for r in rows]
