"""Prediction files on disk [inferred convention] and the GT-as-prediction helper.

``load_predictions_dir(dir)`` builds ``av_reasoning`` prediction rows from, per sample:

- ``<sample_id>.json``: an object with ``edit_window_s`` ([start, end) seconds) and/or ``selected_instance_index``;
- ``<sample_id>_anchor_mask.png``: foreground = any stored channel, alpha included, > 0
  (:func:`perckit.io.images.mask_foreground`);
- ``<sample_id>_reason_audio.wav``;
- ``<sample_id>_mask.mp4``.

A missing file means "not provided". :func:`write_gt_predictions` writes the ground truth of builder rows as such a
folder (each file atomically, to a new path). Every file name is built from a sample id that must be a plain file-name
stem (:func:`.metadata.check_sample_id`) and resolved inside the folder (:func:`perckit.io.paths.resolve_under`: a
symbolic link out of it is refused); each file must be a regular file under a size cap of :mod:`..layout`
(a FIFO, a device or a folder in its place is refused, never waited on). A JSON object that repeats a key is
refused, and a leading UTF-8 BOM is skipped.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ... import rle as rle_ops
from ...errors import InputNotFoundError, PredictionError, ReleaseFormatError
from ...io.jsonio import decode_text, parse_json
from ...io.paths import read_regular_file, resolve_under, write_atomic
from ..features import gt_as_prediction, is_not_provided_rle, make_prediction, media_bytes
from ..layout import MAX_MASK_PNG_BYTES, MAX_MEDIA_FILE_BYTES, MAX_PREDICTION_JSON_BYTES
from .metadata import check_sample_id
from ..rows import anchor_mask_from_png

SUFFIXES = {"anchor_mask": "_anchor_mask.png", "reason_audio": "_reason_audio.wav", "mask_video": "_mask.mp4", "json": ".json"}
LIMITS = {"anchor_mask": MAX_MASK_PNG_BYTES, "reason_audio": MAX_MEDIA_FILE_BYTES, "mask_video": MAX_MEDIA_FILE_BYTES,
          "json": MAX_PREDICTION_JSON_BYTES}


def folder_ids(root: str | os.PathLike, sample_ids: Iterable[str] | None, suffixes: Iterable[str]) -> tuple[Path, list[str]]:
    """``(root, ids)`` of a predictions folder (a missing folder raises): ``sample_ids`` as given, else the ids that the
    names of its entries carry before the first of ``suffixes`` they end with, sorted (every entry but folders: a FIFO
    or a device is found, then refused)."""
    root = Path(root)
    if not root.is_dir():
        raise InputNotFoundError(f"predictions folder {str(root)!r} does not exist")
    if sample_ids is not None:
        return root, list(sample_ids)
    ids: set[str] = set()
    for p in root.iterdir():
        suffix = next((x for x in suffixes if p.name.endswith(x)), None)
        if suffix is not None and not (p.is_dir() and not p.is_symlink()):
            ids.add(p.name[: -len(suffix)])
    return root, sorted(ids)


def _read(root: Path, sample_id: str, key: str) -> tuple[Path, bytes | None]:
    """``(path, bytes)`` of one file of a sample; ``None`` bytes when nothing is there."""
    rel = f"{sample_id}{SUFFIXES[key]}"
    path = resolve_under(root, rel, f"{str(root / rel)!r}", PredictionError)
    if not os.path.lexists(path):
        return path, None
    return path, read_regular_file(path, repr(str(path)), LIMITS[key], PredictionError, InputNotFoundError)


def load_prediction(root: str | os.PathLike, sample_id: str) -> dict:
    """One prediction row from the files of ``sample_id`` under ``root``."""
    root = Path(root)
    check_sample_id(sample_id, f"{str(root)!r}: sample id", PredictionError)
    kwargs: dict = {}
    meta, data = _read(root, sample_id, "json")
    if data is not None:
        where = repr(str(meta))
        obj = parse_json(decode_text(data, where, PredictionError, "UTF-8 JSON"), where, PredictionError)
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
    png, data = _read(root, sample_id, "anchor_mask")
    if data is not None:
        try:
            kwargs["anchor_mask"] = anchor_mask_from_png(data, 0, str(png))
        except ReleaseFormatError as e:
            raise PredictionError(str(e)) from None
    for key in ("reason_audio", "mask_video"):
        path, data = _read(root, sample_id, key)
        if data is not None:
            kwargs[key] = {"bytes": data, "path": str(path)}
    try:
        return make_prediction(sample_id, **kwargs)
    except PredictionError as e:
        raise PredictionError(f"{str(root)!r}: {e}") from None


def load_predictions_dir(root: str | os.PathLike, sample_ids: Iterable[str] | None = None) -> list[dict]:
    """Prediction rows from a folder of per-sample files (see the module docstring).

    ``sample_ids`` (e.g. the reference ids) gives one row per id, with "not provided" for every
    missing file; without it, the ids are read from the file names (sorted).
    """
    root, ids = folder_ids(root, sample_ids, SUFFIXES.values())
    return [load_prediction(root, sid) for sid in ids]


def gt_as_predictions(rows: Sequence[Mapping]) -> list[dict]:
    """Builder rows (or references) as the predictions that copy their ground truth."""
    return [gt_as_prediction(r) for r in rows]


def write_files(root: Path, sample_id: str, files: Mapping[str, bytes | None], suffixes: Mapping[str, str]) -> None:
    """The files of one sample, ``<root>/<sample_id><suffixes[key]>`` for each ``key: data`` of ``files`` (``None``:
    none written): the id checked, each path resolved inside ``root``, each file written atomically to a new path."""
    check_sample_id(sample_id, f"{str(root)!r}: sample id", PredictionError)
    for key, data in files.items():
        if data is not None:
            rel = f"{sample_id}{suffixes[key]}"
            write_atomic(resolve_under(root, rel, f"{str(root / rel)!r}", PredictionError), data, replace=False)


def write_gt_predictions(rows: Iterable[Mapping], root: str | os.PathLike) -> int:
    """The ground truth of builder rows as a predictions folder (the module docstring), which
    :func:`load_predictions_dir` reads back as :func:`gt_as_predictions`; returns how many samples were written."""
    from PIL import Image

    count = 0
    for count, row in enumerate(rows, 1):
        p = gt_as_prediction(row)
        png = None
        if not is_not_provided_rle(p["anchor_mask"]):
            buf = io.BytesIO()
            Image.fromarray(rle_ops.decode(p["anchor_mask"]).astype(np.uint8) * 255).save(buf, format="PNG")
            png = buf.getvalue()
        meta = {k: p[k] for k in ("edit_window_s", "selected_instance_index")}
        media = {k: media_bytes(p[k], f"sample {p['sample_id']!r}: {k}") for k in ("reason_audio", "mask_video")}
        write_files(Path(root), p["sample_id"], {"json": json.dumps(meta).encode(), "anchor_mask": png, **media}, SUFFIXES)
    return count
