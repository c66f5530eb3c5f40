"""``metadata.csv`` and ``annotations/<id>.json`` of a ReasonAVEdit-Bench release: parsed and checked.

:func:`read_metadata` turns the CSV into :class:`Sample` rows (the documented columns required, the others
through one alias table); :func:`read_annotation` gives the typed fields of one sample's annotation (a
missing file: null fields and a warning). Errors are :class:`~perckit.errors.ReleaseFormatError` naming the
file, the line and the column (or the JSON key), what was expected and what was found.
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import posixpath
from dataclasses import dataclass, field
from types import SimpleNamespace
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import InferredShapeError, ReleaseFormatError, ReleaseNotFoundError, inferred_reading, short_repr as _short
from ...io.jsonio import decode_text, parse_json
from ...io.paths import read_regular_file, resolve_under
from .archives import check_name
from ..layout import ANNOTATIONS_DIR, METADATA

logger = logging.getLogger(__name__)

#: Largest ``metadata.csv`` read (the real one is about 300 KB for 1,200 rows).
MAX_METADATA_BYTES = 256 << 20
#: Largest ``annotations/<id>.json`` read (the real ones are a few KB).
MAX_ANNOTATION_BYTES = 16 << 20


#: [card] the sub-track code prefix decides the category (note: Which is H, When is T).
CATEGORY_BY_PREFIX = {"W": "where_only", "H": "which_only", "T": "when_only", "C": "combined", "R": "reference"}
CATEGORIES = tuple(CATEGORY_BY_PREFIX.values())
#: [card] sub-tracks whose visual GT is a null anchor (off-screen source) ...
CARD_VISUAL_NULL = ("H3",)
#: ... and whose acoustic GT is a silent null anchor (instance addition).
CARD_AUDIO_NULL = ("C4", "R3")

#: [card] the columns of the card's loading example; all are required.
DOCUMENTED_COLUMNS = ("sub_track", "instruction", "video", "audio", "reason_visual", "reason_visual_mask", "reason_audio")
#: [inferred] every other field, resolved through one alias table (first match wins).
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {
    "sample_id": ("id", "sample_id"),
    "mask_video": ("mask", "masks", "mask_video"),
    "ref_image": ("ref_image", "reference_image"),
    "category": ("category",),
    "language": ("language", "lang"),
    "orientation": ("orientation",),
    "fps": ("fps",),
    "num_frames": ("num_frames",),
}
#: Row fields that hold a media path, with the CSV column each comes from (the key itself for documented ones).
MEDIA_FIELDS = ("video", "audio", "mask_video", "reason_visual", "reason_visual_mask", "reason_audio", "ref_image")

#: [inferred] annotation keys tried, in order, by :func:`extract_annotation_fields`.
WINDOW_S_KEYS = ("edit_window_s", "window_s", "edit_window_sec")
WINDOW_S_PAIRS = (("edit_start_s", "edit_end_s"), ("start_s", "end_s"), ("t0", "t1"))
WINDOW_F_KEYS = ("edit_window_frames", "window_frames")
WINDOW_F_PAIRS = (("edit_start_frame", "edit_end_frame"), ("f0", "f1"))
ANCHOR_KEYS = ("anchor_frame", "anchor_frame_index", "anchor_frame_idx")
INSTANCE_KEYS = ("selected_instance_index", "selected_instance", "instance_index", "target_instance")
ANNOTATION_FIELDS = ("edit_window_s", "edit_window_frames", "anchor_frame", "selected_instance_index", "fps", "num_frames", "duration_s")


# ---------------------------------------------------------------- metadata.csv


@dataclass
class Sample:
    """One ``metadata.csv`` row, resolved (media paths are release-relative POSIX paths)."""

    sample_id: str
    line: int
    sub_track: str
    category: str
    instruction: str
    language: str | None
    orientation: str | None
    video: str
    audio: str
    mask_video: str | None
    reason_visual: str
    reason_visual_mask: str
    reason_audio: str
    ref_image: str | None
    fps: float | None = None
    num_frames: int | None = None
    #: media field -> the CSV column it came from (for error messages).
    columns: dict = field(default_factory=dict, repr=False)
    #: media fields metadata.csv has no column for, whose member was looked up by sample id (:func:`.media.apply_lookup`).
    looked_up: tuple = field(default=(), repr=False)

    def media(self) -> dict[str, str]:
        """``{field: path}`` of every media path this row names (absent optional ones left out)."""
        return {f: getattr(self, f) for f in MEDIA_FIELDS if getattr(self, f)}


def resolve_columns(header: Sequence[str], where: str = METADATA) -> dict[str, str | None]:
    """Map every row field to the CSV column that holds it (``None`` when absent).

    The documented columns are required; the others go through :data:`COLUMN_ALIASES` (the first alias
    present; :func:`parse_metadata` refuses a row where another alias column holds a different value).
    A column name given twice (after stripping spaces) is refused: ``csv`` would keep one of the two.
    Raises :class:`ReleaseFormatError` naming the missing columns and the ones found.
    """
    names = [h.strip() for h in header]
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in first:
            raise ReleaseFormatError(f"{where} line 1: column {name!r} appears twice (fields {first[name] + 1} and {i + 1}); "
                                     f"expected every column name once")
        first[name] = i
    missing = [c for c in DOCUMENTED_COLUMNS if c not in names]
    if missing:
        raise ReleaseFormatError(f"{where}: missing the documented column(s) {missing}; expected {list(DOCUMENTED_COLUMNS)} "
                                 f"(found {names})")
    out: dict[str, str | None] = {c: c for c in DOCUMENTED_COLUMNS}
    for fld, aliases in COLUMN_ALIASES.items():
        out[fld] = next((a for a in aliases if a in names), None)
    return out


def check_sample_id(sample_id: Any, where: str, error: type[Exception] = ReleaseFormatError) -> str:
    """A sample id that is safe as a file-name stem (``annotations/<id>.json``, ``<id>_mask.mp4``): a non-empty
    string without ``/``, ``\\`` or NUL, not ``.`` or ``..``, of at most 200 bytes."""
    if not isinstance(sample_id, str) or not sample_id:
        raise error(f"{where}: expected a sample id (a non-empty string), got {_short(sample_id)}")
    if "/" in sample_id or "\\" in sample_id or "\x00" in sample_id or sample_id in (".", ".."):
        raise error(f"{where}: expected a sample id usable as a file name (no '/', '\\', NUL, not '.' or '..'), got {_short(sample_id)}")
    if len(sample_id.encode("utf-8", "surrogateescape")) > 200:
        raise error(f"{where}: expected a sample id of at most 200 bytes, got {len(sample_id.encode('utf-8', 'surrogateescape'))}")
    return sample_id


def _optional_number(value: str | None, kind: type) -> Any:
    """An [inferred] numeric cell (``fps``, ``num_frames``): None when empty; :class:`InferredShapeError` otherwise."""
    if value is None or not value.strip():
        return None
    try:
        number = float(value)
    except ValueError:
        raise InferredShapeError(f"expected a number, got {value!r}") from None
    if not math.isfinite(number) or (kind is int and not number.is_integer()):
        raise InferredShapeError(f"expected a finite {'integer' if kind is int else 'number'}, got {value!r}")
    return int(number) if kind is int else number


def parse_metadata(data: bytes, label: str = METADATA, warn: bool = True) -> list[Sample]:
    """Parse ``metadata.csv`` (UTF-8, optional BOM) into :class:`Sample` rows, in CSV order.

    Raises :class:`ReleaseFormatError` for missing documented columns, an empty required cell, an
    unknown sub-track prefix, a duplicate ``sample_id`` and a path that is absolute or has ``..``. The
    [inferred] cells ``fps`` / ``num_frames`` that do not read as numbers are ignored, with one warning for the
    file (when ``warn``) naming the first.
    """
    ignored: list[str] = []
    notes = SimpleNamespace(warning=lambda msg, *args: ignored.append(msg % args))
    text = decode_text(data, label, ReleaseFormatError, "UTF-8 text")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:  # e.g. a field longer than csv.field_size_limit()
        raise ReleaseFormatError(f"{label}: expected CSV, got a parse error: {e}") from None
    if not rows:
        raise ReleaseFormatError(f"{label}: the file is empty; expected a header with {list(DOCUMENTED_COLUMNS)}")
    header = [h.strip() for h in rows[0]]
    cols = resolve_columns(header, label)
    index = {name: i for i, name in enumerate(header)}
    samples: list[Sample] = []
    seen: dict[str, int] = {}
    for line, values in enumerate(rows[1:], start=2):
        if not values or all(not v.strip() for v in values):
            continue
        if len(values) != len(header):
            raise ReleaseFormatError(f"{label} line {line}: expected {len(header)} fields like the header, got {len(values)}")

        def cell(fld: str) -> str | None:
            col = cols.get(fld)
            if col is None:
                return None
            value = values[index[col]]
            for other in COLUMN_ALIASES.get(fld, ()):  # [inferred] aliases: the first one present is read
                if other != col and other in index and values[index[other]].strip() not in ("", value.strip()):
                    logger.warning("%s line %d: columns %r and %r both give the field %r but differ (%s vs %s); reading %r",
                                   label, line, col, other, fld, _short(value), _short(values[index[other]]), col)
            return value

        def where(fld: str) -> str:
            return f"{label} line {line}, column {cols.get(fld)!r}"

        for fld in DOCUMENTED_COLUMNS:
            if fld != "instruction" and not (cell(fld) or "").strip():
                raise ReleaseFormatError(f"{where(fld)}: expected a value, got an empty cell")
        media: dict[str, str | None] = {}
        for fld in MEDIA_FIELDS:  # a release-relative POSIX path (check_name: inside the release, within the OS limits)
            raw = cell(fld)
            media[fld] = check_name(raw.strip(), where(fld)) if raw is not None and raw.strip() else None
            if media[fld] == ".":
                raise ReleaseFormatError(f"{where(fld)}: expected a path to a file inside the release, got {raw!r}")
        sample_id = (cell("sample_id") or "").strip() or posixpath.splitext(posixpath.basename(media["video"]))[0]
        check_sample_id(sample_id, where("sample_id") if cols.get("sample_id") else f"{label} line {line}, id from column 'video'")
        if sample_id in seen:
            raise ReleaseFormatError(f"{label} line {line}: duplicate sample_id {sample_id!r} (first on line {seen[sample_id]}); "
                                     "expected one row per sample")
        seen[sample_id] = line
        sub_track = cell("sub_track").strip()
        category = CATEGORY_BY_PREFIX.get(sub_track[:1].upper())  # the category from the sub-track's code prefix
        if category is None:
            raise ReleaseFormatError(f"{where('sub_track')}: sub_track {sub_track!r} has the prefix {sub_track[:1].upper()!r}; "
                                     f"expected one of {sorted(CATEGORY_BY_PREFIX)} (W where_only, H which_only, T when_only, "
                                     "C combined, R reference)")
        csv_category = cell("category")
        if csv_category is not None and csv_category.strip():
            value = csv_category.strip().lower().replace("-", "_").replace(" ", "_")
            if value not in CATEGORIES:
                logger.warning("%s: category %r is not one of %s; using %r from the sub_track prefix", where("category"), csv_category, list(CATEGORIES), category)
            elif value != category:
                logger.warning("%s: category %r disagrees with the sub_track %r (prefix says %r); keeping the CSV value", where("category"), csv_category, sub_track, category)
            category = value if value in CATEGORIES else category
        samples.append(Sample(
            sample_id=sample_id, line=line, sub_track=sub_track, category=category, instruction=cell("instruction") or "",
            language=(cell("language") or "").strip().lower() or None,
            orientation=(cell("orientation") or "").strip().lower() or None, **media,
            fps=inferred_reading(lambda: _optional_number(cell("fps"), float), None, where("fps"), notes),
            num_frames=inferred_reading(lambda: _optional_number(cell("num_frames"), int), None, where("num_frames"), notes),
            columns={fld: cols.get(fld) for fld in MEDIA_FIELDS},
        ))
    if not samples:
        raise ReleaseFormatError(f"{label}: no sample rows after the header")
    if ignored and warn:
        logger.warning("%s%s", ignored[0], f" (and {len(ignored) - 1} more cells like it)" if len(ignored) > 1 else "")
    return samples


def read_metadata(root: str | os.PathLike, warn: bool = True) -> list[Sample]:
    """``<root>/metadata.csv`` parsed; a missing root or file raises naming the expected path. It must be a
    regular file of at most :data:`MAX_METADATA_BYTES` inside the root (:func:`perckit.io.paths.resolve_under`)."""
    root = Path(root)
    if not root.is_dir():
        raise ReleaseNotFoundError(f"ReasonAVEdit-Bench release folder {str(root)!r} does not exist (expected the release root "
                                   f"that holds {METADATA}; pass it as data_dir=...)")
    path = root / METADATA
    if not os.path.lexists(path):
        raise ReleaseNotFoundError(f"{METADATA!r} not found under {str(root)!r}: expected the release root (the folder with {METADATA}, annotations/ and archives/)")
    path = resolve_under(root, METADATA, str(path))
    return parse_metadata(read_regular_file(path, str(path), MAX_METADATA_BYTES), str(path), warn)


def annotation_path(root: str | os.PathLike, sample_id: str) -> Path:
    """``<root>/annotations/<id>.json`` (built from the id; no directory listing). The id must be a safe
    file-name stem (:func:`check_sample_id`) and the path must stay inside the root after symbolic links."""
    check_sample_id(sample_id, f"{METADATA}: sample_id")
    rel = f"{ANNOTATIONS_DIR}/{sample_id}.json"
    return resolve_under(root, rel, f"{str(Path(root) / rel)!r} (sample {sample_id!r})")


# ---------------------------------------------------------------- annotations/<id>.json


def _number(value: Any, where: str, integer: bool = False) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InferredShapeError(f"{where}: expected {'an integer' if integer else 'a number'} or null, got {_short(value)}")
    if not math.isfinite(float(value)) or (integer and float(value) != int(value)):
        raise InferredShapeError(f"{where}: expected a finite {'integer' if integer else 'number'}, got {value!r}")
    return int(value) if integer else float(value)


def _window(obj: Mapping, keys: Sequence[str], pairs: Sequence[tuple[str, str]], where: str, integer: bool) -> list | None:
    k = next((k for k in keys if obj.get(k) is not None), None)
    if k is not None:
        v = obj[k]
        if not isinstance(v, (list, tuple)) or len(v) != 2:
            raise InferredShapeError(f"{where}: key {k!r}: expected a [start, end) pair, got {_short(v)}")
        out = [_number(v[i], f"{where}: key {k!r}[{i}]", integer) for i in (0, 1)]
        label = k
    else:
        pair = next((p for p in pairs if obj.get(p[0]) is not None and obj.get(p[1]) is not None), None)
        if pair is None:
            return None
        out = [_number(obj[key], f"{where}: key {key!r}", integer) for key in pair]
        label = "/".join(pair)
    if out[0] is None or out[1] is None:
        return None
    if out[1] < out[0]:
        raise InferredShapeError(f"{where}: window {label!r} has end < start ({out[0]!r} > {out[1]!r}); expected [start, end) with end >= start")
    return out


def _first_index(obj: Mapping, keys: Sequence[str], where: str) -> int | None:
    """The integer under the first of ``keys`` that ``obj`` has (``None`` when it has none)."""
    k = next((k for k in keys if k in obj), None)
    return None if k is None else _number(obj[k], f"{where}: key {k!r}", integer=True)


def extract_annotation_fields(obj: Any, where: str) -> dict:
    """The typed fields of one annotation object [inferred: the card describes what it holds, not its keys].

    Tries the key names of :data:`WINDOW_S_KEYS` / :data:`WINDOW_S_PAIRS`, :data:`WINDOW_F_KEYS` /
    :data:`WINDOW_F_PAIRS`, :data:`ANCHOR_KEYS`, :data:`INSTANCE_KEYS` and ``fps`` / ``num_frames`` /
    ``duration_s``. Not an object, none of those keys, a present value of the wrong type, or a window with
    ``end < start``: :class:`InferredShapeError` naming ``where`` and the key (:func:`read_annotation` then warns
    once and leaves the fields null).
    """
    if not isinstance(obj, Mapping):
        raise InferredShapeError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    keys = (*WINDOW_S_KEYS, *sum(WINDOW_S_PAIRS, ()), *WINDOW_F_KEYS, *sum(WINDOW_F_PAIRS, ()), *ANCHOR_KEYS, *INSTANCE_KEYS,
            "fps", "num_frames", "duration_s")
    if not any(k in obj for k in keys):
        raise InferredShapeError(f"{where}: expected at least one of the keys {list(keys)}, found {_short(sorted(obj))}")
    return {"edit_window_s": _window(obj, WINDOW_S_KEYS, WINDOW_S_PAIRS, where, integer=False),  # ANNOTATION_FIELDS
            "edit_window_frames": _window(obj, WINDOW_F_KEYS, WINDOW_F_PAIRS, where, integer=True),
            "anchor_frame": _first_index(obj, ANCHOR_KEYS, where),
            "selected_instance_index": _first_index(obj, INSTANCE_KEYS, where),
            **{key: _number(obj.get(key), f"{where}: key {key!r}", integer)
               for key, integer in (("fps", False), ("num_frames", True), ("duration_s", False))}}


def read_annotation(path: str | os.PathLike) -> tuple[dict, str | None]:
    """The annotation of one sample; a missing file gives null fields, ``None`` text and a warning, and so does one
    whose shape is not the inferred one (:func:`perckit.errors.inferred_reading`; its text is still kept).

    ``path`` comes from :func:`annotation_path`. Anything there other than a regular file of at most
    :data:`MAX_ANNOTATION_BYTES` (a folder, a FIFO, a device), or text that is not JSON, raises
    :class:`ReleaseFormatError`."""
    if not os.path.lexists(path):
        logger.warning("annotation file %r not found: its fields are null", str(path))
        return dict.fromkeys(ANNOTATION_FIELDS), None
    where = str(path)  # invalid JSON raises naming the file
    text = decode_text(read_regular_file(path, where, MAX_ANNOTATION_BYTES), where, ReleaseFormatError, "UTF-8 JSON")
    obj = parse_json(text, where, ReleaseFormatError)
    return inferred_reading(lambda: extract_annotation_fields(obj, where), dict.fromkeys(ANNOTATION_FIELDS), where, logger), text

