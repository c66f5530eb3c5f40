"""Predictions on disk [inferred convention] and the GT-as-prediction helper.

``load_predictions_dir(dir)`` builds ``av_reasoning`` prediction rows from, per sample:

- ``<sample_id>.json``: an object with ``edit_window_s`` ([start, end) seconds) and/or ``selected_instance_index``;
- ``<sample_id>_anchor_mask.png``: foreground = pixel value > 0;
- ``<sample_id>_reason_audio.wav``;
- ``<sample_id>_mask.mp4``.

A missing file means "not provided".
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Iterable, Mapping, Sequence

from ..errors import InputNotFoundError, PredictionError, ReleaseFormatError
from ..jsonio import read_json
from .features import gt_as_prediction, make_prediction
from .release import anchor_mask_from_png

SUFFIXES = {"anchor_mask": "_anchor_mask.png", "reason_audio": "_reason_audio.wav", "mask_video": "_mask.mp4", "json": ".json"}


def _discover(root: Path) -> list[str]:
    ids: set[str] = set()
    for p in root.iterdir():
        if not p.is_file():
            continue
        name = p.name
        for key in ("anchor_mask", "reason_audio", "mask_video"):
            if name.endswith(SUFFIXES[key]):
                ids.add(name[: -len(SUFFIXES[key])])
                break
        else:
            if name.endswith(".json"):
                ids.add(name[:-5])
    return sorted(ids)


def load_prediction(root: str | os.PathLike, sample_id: str) -> dict:
    """One prediction row from the files of ``sample_id`` under ``root``."""
    root = Path(root)
    kwargs: dict = {}
    meta = root / f"{sample_id}{SUFFIXES['json']}"
    if meta.is_file():
        obj = read_json(meta, error=PredictionError, not_found=InputNotFoundError, unique_keys=True)
        if not isinstance(obj, Mapping):
            raise PredictionError(f"{str(meta)!r}: expected a JSON object with edit_window_s and/or selected_instance_index, got {type(obj).__name__}")
        unknown = sorted(set(obj) - {"edit_window_s", "selected_instance_index", "sample_id"})
        if unknown:
            raise PredictionError(f"{str(meta)!r}: unknown key(s) {unknown}; expected edit_window_s and/or selected_instance_index")
        if obj.get("sample_id") not in (None, sample_id):
            raise PredictionError(f"{str(meta)!r}: sample_id inside is {obj['sample_id']!r}, but the file name says {sample_id!r}")
        kwargs["edit_window_s"] = obj.get("edit_window_s")
        idx = obj.get("selected_instance_index")
        if idx is not None and (isinstance(idx, bool) or not isinstance(idx, int)):
            raise PredictionError(f"{str(meta)!r}: selected_instance_index must be an integer or null, got {idx!r}")
        kwargs["selected_instance_index"] = idx
    png = root / f"{sample_id}{SUFFIXES['anchor_mask']}"
    if png.is_file():
        try:
            kwargs["anchor_mask"] = anchor_mask_from_png(png.read_bytes(), 0, str(png))
        except ReleaseFormatError as e:
            raise PredictionError(str(e)) from None
    wav = root / f"{sample_id}{SUFFIXES['reason_audio']}"
    if wav.is_file():
        kwargs["reason_audio"] = {"bytes": wav.read_bytes(), "path": str(wav)}
    mp4 = root / f"{sample_id}{SUFFIXES['mask_video']}"
    if mp4.is_file():
        kwargs["mask_video"] = {"bytes": mp4.read_bytes(), "path": str(mp4)}
    try:
        return make_prediction(sample_id, **kwargs)
    except PredictionError as e:
        raise PredictionError(f"{str(root)!r}: {e}") from None


def load_predictions_dir(root: str | os.PathLike, sample_ids: Iterable[str] | None = None) -> list[dict]:
    """Prediction rows from a folder of per-sample files (see the module docstring).

    ``sample_ids`` (e.g. the reference ids) gives one row per id, with "not provided" for every
    missing file; without it, the ids are read from the file names (sorted).
    """
    root = Path(root)
    if not root.is_dir():
        raise InputNotFoundError(f"predictions folder {str(root)!r} does not exist")
    ids = list(sample_ids) if sample_ids is not None else _discover(root)
    return [load_prediction(root, sid) for sid in ids]


def gt_as_predictions(rows: Sequence[Mapping]) -> list[dict]:
    """Builder rows (or references) as the predictions that copy their ground truth."""
    return [gt_as_prediction(r) for r in rows]
