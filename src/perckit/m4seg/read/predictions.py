"""The user's predictions as ``metrics/m4seg`` prediction rows: GLaMM/PRIMA-style model output (text + masks),
and JSON Lines files read through the checked reader."""

from __future__ import annotations

import bisect
import logging
import re
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Sequence

import numpy as np

from ...core.segmentation import prediction_rle
from ...errors import InputNotFoundError, PredictionError, optional_field, short_repr as _short
from ...io.jsonio import iter_json_lines, parse_int
from ..metric.codes import IMAGE_TAG, collapse_ws

logger = logging.getLogger(__name__)

_SEG = re.compile(r"\[SEG\](\s*" + IMAGE_TAG + r")?")
_PHRASE = re.compile(r"<p>(.*?)</p>", re.S)

#: Most digits accepted in an ``(IMAGE<k>)`` tag (an image index; Python refuses int() of 4300+ digits).
MAX_IMAGE_TAG_DIGITS = 9


def _mask_list(masks: Any, where: str) -> list:
    """The masks given to :func:`parse_grounded_answer` as a list: a sequence, or an ``[N, H, W]`` array."""
    if masks is None:
        return []
    if isinstance(masks, np.ndarray):
        if masks.ndim != 3:
            raise PredictionError(f"{where}: masks: expected a list of masks or an [N, H, W] array, got an array of shape {masks.shape}")
        return list(masks)
    if isinstance(masks, (str, bytes, Mapping)) or not isinstance(masks, (list, tuple)):
        raise PredictionError(
            f"{where}: masks: expected a list of masks (binary arrays or RLEs) or an [N, H, W] array, got {_short(masks)}"
        )
    return list(masks)


def parse_grounded_answer(text: str, masks: Sequence[Any], example_id: str = "") -> dict:
    """A prediction row from ``… <p> phrase </p> [SEG] (IMAGEk) …`` output and its masks.

    The i-th ``[SEG]`` takes the i-th mask; the phrase of the ``<p>…</p>`` before it becomes the ``name`` and k the
    ``image_index``. Masks may be binary arrays (a list, or one ``[N, H, W]`` array), RLEs with bytes or str counts,
    or uncompressed RLEs. A ``[SEG]`` without an ``(IMAGEk)`` tag, or more ``[SEG]`` tokens than masks, raises."""
    where = f"prediction {example_id!r}"
    text = optional_field(text, "", str, "the model's output as a string", f"{where}: text", PredictionError)
    segs = list(_SEG.finditer(text))
    masks = _mask_list(masks, where)
    if len(segs) > len(masks):
        raise PredictionError(f"{where}: the text has {len(segs)} [SEG] token(s) but only {len(masks)} mask(s) were given")
    if len(segs) < len(masks):
        logger.warning("%s: %d mask(s) for %d [SEG] token(s); the extra masks are ignored", where, len(masks), len(segs))
    # Phrases, found once: the phrase of a [SEG] is the last <p>…</p> that ends before it.
    phrases = list(_PHRASE.finditer(text))
    phrase_ends = [m.end() for m in phrases]
    groundings = []
    for i, m in enumerate(segs):
        if m.group(2) is None:
            raise PredictionError(f"{where}: [SEG] #{i + 1} (offset {m.start()}) has no (IMAGEk) tag after it, so its image is unknown")
        digits = m.group(2)
        if len(digits.lstrip("0")) > MAX_IMAGE_TAG_DIGITS:
            raise PredictionError(
                f"{where}: [SEG] #{i + 1} (offset {m.start()}): expected an image index in its (IMAGEk) tag, got "
                f"{len(digits)} digits"
            )
        j = bisect.bisect_right(phrase_ends, m.start())
        name = collapse_ws(phrases[j - 1].group(1)) if j else ""
        mask = prediction_rle(masks[i], f"{where}: mask {i}")
        groundings.append({"image_index": int(digits), "name": name, "segmentation": mask})
    return {"example_id": str(example_id), "a": text, "groundings": groundings}


def prediction_row(obj: Any, where: str) -> dict:
    """Check and normalise one prediction object to exactly the declared keys (masks to str-count RLE). The keys
    are the rows' (the release's): ``a`` and ``groundings[].segmentation``; a row still using the names perckit
    gave them before (``answer``, ``mask``) is refused with the key to use."""
    if not isinstance(obj, Mapping):
        raise PredictionError(f"{where}: expected an object {{example_id, a, groundings}}, found {_short(obj)}")
    eid = obj.get("example_id")
    if not isinstance(eid, (str, int)) or isinstance(eid, bool):
        raise PredictionError(f"{where}: example_id: expected a string, found {_short(eid)}")
    _renamed(obj, "answer", "a", where)
    answer = optional_field(obj.get("a"), "", str, "a string", f"{where}: a", PredictionError)
    gs = optional_field(obj.get("groundings"), [], list, "a list", f"{where}: groundings", PredictionError)
    out = []
    for j, g in enumerate(gs):
        gw = f"{where}: groundings[{j}]"
        if not isinstance(g, Mapping):
            raise PredictionError(f"{gw}: expected {{image_index, name, segmentation}}, found {_short(g)}")
        _renamed(g, "mask", "segmentation", gw)
        k = parse_int(g.get("image_index"), f"{gw}.image_index", PredictionError)
        name = optional_field(g.get("name"), "", str, "a string", f"{gw}.name", PredictionError)
        mask = prediction_rle(g.get("segmentation"), f"{gw}.segmentation")
        out.append({"image_index": k, "name": name, "segmentation": mask})
    return {"example_id": str(eid), "a": answer, "groundings": out}


def _renamed(obj: Mapping, old: str, new: str, where: str) -> None:
    """A :class:`PredictionError` for an object holding ``old`` but not ``new``, the name M4Seg's rows use."""
    if old in obj and new not in obj:
        raise PredictionError(f"{where}: expected the key {new!r} (M4Seg's own field name, as in the rows), found {old!r}")


#: Largest predictions file read (a regular file; a FIFO or a device is refused before any read).
MAX_PREDICTIONS_BYTES = 1 << 30


def load_predictions_jsonl(path: str | Path) -> list[dict]:
    """Read one prediction row per line; duplicate ``example_id`` values raise.

    The file must be a regular file of at most :data:`MAX_PREDICTIONS_BYTES`, read by the one JSON Lines
    reader :func:`perckit.io.jsonio.iter_json_lines` (its rules: a UTF-8 BOM skipped only at the start of the
    file, blank lines skipped, one JSON object a line, a repeated key refused). A missing file or a folder
    raises :class:`InputNotFoundError`."""
    p = Path(path)
    if not p.exists() or p.is_dir():
        raise InputNotFoundError(f"predictions file {str(p)!r} not found")
    rows, seen = [], {}
    for n, where, obj in iter_json_lines(p, error=PredictionError, limit=MAX_PREDICTIONS_BYTES, not_found=InputNotFoundError):
        row = prediction_row(obj, where)
        if row["example_id"] in seen:
            raise PredictionError(f"{where}: duplicate example_id {row['example_id']!r} (first on line {seen[row['example_id']]})")
        seen[row["example_id"]] = n
        rows.append(row)
    return rows
