"""Reading the ReasonAVEdit-Bench release: ``metadata.csv``, ``annotations/<id>.json`` and the media tars.

The Hub release keeps ``metadata.csv``, ``annotations/`` and ``README.md`` loose and ships the seven
media folders as one tar each under ``archives/`` (members carry the folder prefix, e.g.
``videos/<file>``). Unpacked next to ``metadata.csv`` they give the same seven folders.

Everything here is format knowledge and checks; the builder (``builder.py``) only wires it to
``datasets``. Errors name the file, the archive member or the CSV column, what was expected and what
was found. Nothing here extracts a tar to disk except :func:`extract_archives`, a safe helper for
users and tests (the builder never calls it).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import logging
import math
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .. import rle as rle_ops
from ..errors import ReleaseFormatError, ReleaseNotFoundError
from ..errors import short_repr as _short
from ..images import mask_foreground
from ..jsonio import DuplicateKeyError, decode_text, loads
from ..paths import read_regular_file, resolve_under
# The tar readers and the extractor live in archives.py; their names stay importable from here.
from .archives import MAX_MEMBER_BYTES, MAX_MEMBERS, MemberGuard, _unreadable, check_name, extract_archives  # noqa: F401
from .archives import iter_tar_file, iter_tar_members, iter_tar_stream  # noqa: F401

logger = logging.getLogger(__name__)

METADATA = "metadata.csv"
#: Largest ``metadata.csv`` read (the real one is about 300 KB for 1,200 rows).
MAX_METADATA_BYTES = 256 << 20
#: Largest ``annotations/<id>.json`` read (the real ones are a few KB).
MAX_ANNOTATION_BYTES = 16 << 20
ANNOTATIONS_DIR = "annotations"
ARCHIVES_DIR = "archives"
ARCHIVE_PATTERN = f"{ARCHIVES_DIR}/*.tar"
#: [card] the seven media folders (one tar each on the Hub).
MEDIA_FOLDERS = ("videos", "audios", "masks", "reason_visual", "reason_visual_mask", "reason_audio", "ref_images")

#: [card] the sub-track code prefix decides the category (note: Which is H, When is T).
CATEGORY_BY_PREFIX = {"W": "where_only", "H": "which_only", "T": "when_only", "C": "combined", "R": "reference"}
CATEGORIES = tuple(CATEGORY_BY_PREFIX.values())
#: [card] the 16 sub-tracks with their sizes in the real release (1,200 samples).
SUB_TRACKS = {
    "W1_same_class_pair": 100, "W2_spatial_reference": 80, "W3_small_or_occluded": 70,
    "H1_overlapping_voices": 120, "H2_speech_vs_ambient": 100, "H3_offscreen_source": 80,
    "T1_word_phrase_swap": 200, "T2_sentence_rewrite": 100,
    "C1_overlap_local_speech": 100, "C2_ambient_local_speech": 50, "C3_animal_local": 40, "C4_spatial_add": 50,
    "C5_complex_remove": 10,
    "R1_person_identity": 50, "R2_animal_object_look": 30, "R3_ref_guided_add": 20,
}
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
    #: media fields metadata.csv has no column for, whose member was looked up by sample id (:func:`apply_lookup`).
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
            raise ReleaseFormatError(
                f"{where} line 1: column {name!r} appears twice (fields {first[name] + 1} and {i + 1}); expected every column name once"
            )
        first[name] = i
    missing = [c for c in DOCUMENTED_COLUMNS if c not in names]
    if missing:
        raise ReleaseFormatError(
            f"{where}: missing the documented column(s) {missing}; expected {list(DOCUMENTED_COLUMNS)} "
            f"(found {names})"
        )
    out: dict[str, str | None] = {c: c for c in DOCUMENTED_COLUMNS}
    for fld, aliases in COLUMN_ALIASES.items():
        out[fld] = next((a for a in aliases if a in names), None)
    return out


def normalise_member_path(value: str, where: str) -> str:
    """A release-relative POSIX path (``./`` and backslashes removed), by :func:`perckit.paths.check_relative`:
    absolute paths (``/x``, ``\\x``, ``C:``), ``..`` components, NUL bytes and names past the OS limits
    (:class:`archives.MemberGuard`) raise :class:`ReleaseFormatError` naming ``where``; so does a path naming
    the release root itself."""
    norm = check_name(value.strip(), where)
    if norm == ".":
        raise ReleaseFormatError(f"{where}: expected a path to a file inside the release, got {value!r}")
    return norm


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


def category_of(sub_track: str, where: str) -> str:
    """The category of a sub-track from its code prefix (``W``, ``H``, ``T``, ``C`` or ``R``)."""
    prefix = sub_track[:1].upper()
    if prefix not in CATEGORY_BY_PREFIX:
        raise ReleaseFormatError(
            f"{where}: sub_track {sub_track!r} has the prefix {prefix!r}; expected one of "
            f"{sorted(CATEGORY_BY_PREFIX)} (W where_only, H which_only, T when_only, C combined, R reference)"
        )
    return CATEGORY_BY_PREFIX[prefix]


def _normalise_category(value: str) -> str:
    return value.strip().lower().replace("-", "_").replace(" ", "_")


def _optional_number(value: str | None, where: str, kind: type) -> Any:
    if value is None or not value.strip():
        return None
    try:
        number = float(value)
    except ValueError:
        raise ReleaseFormatError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ReleaseFormatError(f"{where}: expected a finite number, got {value!r}")
    if kind is int:
        if not number.is_integer():
            raise ReleaseFormatError(f"{where}: expected an integer, got {value!r}")
        return int(number)
    return number


def parse_metadata(data: bytes, label: str = METADATA) -> list[Sample]:
    """Parse ``metadata.csv`` (UTF-8, optional BOM) into :class:`Sample` rows, in CSV order.

    Raises :class:`ReleaseFormatError` for missing documented columns, an empty required cell, an
    unknown sub-track prefix, a duplicate ``sample_id`` and a path that is absolute or has ``..``.
    """
    text = decode_text(data, label, ReleaseFormatError, "UTF-8 text")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:  # e.g. a field longer than csv.field_size_limit()
        raise ReleaseFormatError(f"{label}: expected CSV, got a parse error: {e}") from None
    reader = iter(rows)
    try:
        header = next(reader)
    except StopIteration:
        raise ReleaseFormatError(f"{label}: the file is empty; expected a header with {list(DOCUMENTED_COLUMNS)}") from None
    header = [h.strip() for h in header]
    cols = resolve_columns(header, label)
    index = {name: i for i, name in enumerate(header)}
    samples: list[Sample] = []
    seen: dict[str, int] = {}
    for line, values in enumerate(reader, start=2):
        if not values or all(not v.strip() for v in values):
            continue
        if len(values) != len(header):
            raise ReleaseFormatError(f"{label} line {line}: expected {len(header)} fields like the header, got {len(values)}")

        def cell(fld: str) -> str | None:
            col = cols.get(fld)
            if col is None:
                return None
            value = values[index[col]]
            for other in COLUMN_ALIASES.get(fld, ()):
                if other != col and other in index:
                    v = values[index[other]]
                    if v.strip() and v.strip() != value.strip():
                        raise ReleaseFormatError(
                            f"{label} line {line}: columns {col!r} and {other!r} both give the field {fld!r} but differ "
                            f"({_short(value)} vs {_short(v)}); expected one value"
                        )
            return value

        def where(fld: str) -> str:
            return f"{label} line {line}, column {cols.get(fld)!r}"

        for fld in DOCUMENTED_COLUMNS:
            if fld != "instruction" and not (cell(fld) or "").strip():
                raise ReleaseFormatError(f"{where(fld)}: expected a value, got an empty cell")
        media: dict[str, str | None] = {}
        for fld in MEDIA_FIELDS:
            raw = cell(fld)
            media[fld] = normalise_member_path(raw, where(fld)) if raw is not None and raw.strip() else None
        sample_id = (cell("sample_id") or "").strip() or posixpath.splitext(posixpath.basename(media["video"]))[0]
        check_sample_id(sample_id, where("sample_id") if cols.get("sample_id") else f"{label} line {line}, id from column 'video'")
        if sample_id in seen:
            raise ReleaseFormatError(
                f"{label} line {line}: duplicate sample_id {sample_id!r} (first on line {seen[sample_id]}); "
                "expected one row per sample"
            )
        seen[sample_id] = line
        sub_track = cell("sub_track").strip()
        category = category_of(sub_track, where("sub_track"))
        csv_category = cell("category")
        if csv_category is not None and csv_category.strip():
            value = _normalise_category(csv_category)
            if value not in CATEGORIES:
                logger.warning("%s: category %r is not one of %s; using %r from the sub_track prefix", where("category"), csv_category, list(CATEGORIES), category)
            elif value != category:
                logger.warning("%s: category %r disagrees with the sub_track %r (prefix says %r); keeping the CSV value", where("category"), csv_category, sub_track, category)
                category = value
            else:
                category = value
        language = (cell("language") or "").strip().lower() or None
        orientation = (cell("orientation") or "").strip().lower() or None
        samples.append(Sample(
            sample_id=sample_id, line=line, sub_track=sub_track, category=category,
            instruction=cell("instruction") or "", language=language, orientation=orientation,
            video=media["video"], audio=media["audio"], mask_video=media["mask_video"],
            reason_visual=media["reason_visual"], reason_visual_mask=media["reason_visual_mask"],
            reason_audio=media["reason_audio"], ref_image=media["ref_image"],
            fps=_optional_number(cell("fps"), where("fps"), float),
            num_frames=_optional_number(cell("num_frames"), where("num_frames"), int),
            columns={fld: cols.get(fld) for fld in MEDIA_FIELDS},
        ))
    if not samples:
        raise ReleaseFormatError(f"{label}: no sample rows after the header")
    return samples


def read_metadata(root: str | os.PathLike) -> list[Sample]:
    """``<root>/metadata.csv`` parsed; a missing root or file raises naming the expected path. It must be a
    regular file of at most :data:`MAX_METADATA_BYTES` inside the root (:func:`perckit.paths.resolve_under`)."""
    root = Path(root)
    if not root.is_dir():
        raise ReleaseNotFoundError(
            f"ReasonAVEdit-Bench release folder {str(root)!r} does not exist (expected the release root that holds "
            f"{METADATA}; pass it as data_dir=...)"
        )
    path = root / METADATA
    if not os.path.lexists(path):
        raise ReleaseNotFoundError(f"{METADATA!r} not found under {str(root)!r}: expected the release root (the folder with {METADATA}, annotations/ and archives/)")
    path = resolve_under(root, METADATA, str(path))
    return parse_metadata(read_regular_file(path, str(path), MAX_METADATA_BYTES), str(path))


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
        raise ReleaseFormatError(f"{where}: expected {'an integer' if integer else 'a number'} or null, got {_short(value)}")
    if not math.isfinite(float(value)):
        raise ReleaseFormatError(f"{where}: expected a finite number, got {value!r}")
    if integer:
        if float(value) != int(value):
            raise ReleaseFormatError(f"{where}: expected an integer, got {value!r}")
        return int(value)
    return float(value)


def _window(obj: Mapping, keys: Sequence[str], pairs: Sequence[tuple[str, str]], where: str, integer: bool) -> list | None:
    for k in keys:
        if k in obj and obj[k] is not None:
            v = obj[k]
            if not isinstance(v, (list, tuple)) or len(v) != 2:
                raise ReleaseFormatError(f"{where}: key {k!r}: expected a [start, end) pair, got {_short(v)}")
            out = [_number(v[0], f"{where}: key {k!r}[0]", integer), _number(v[1], f"{where}: key {k!r}[1]", integer)]
            label = k
            break
    else:
        for a, b in pairs:
            if obj.get(a) is not None and obj.get(b) is not None:
                out = [_number(obj[a], f"{where}: key {a!r}", integer), _number(obj[b], f"{where}: key {b!r}", integer)]
                label = f"{a}/{b}"
                break
        else:
            return None
    if out[0] is None or out[1] is None:
        return None
    if out[1] < out[0]:
        raise ReleaseFormatError(f"{where}: window {label!r} has end < start ({out[0]!r} > {out[1]!r}); expected [start, end) with end >= start")
    return out


def _first(obj: Mapping, keys: Sequence[str]) -> tuple[str | None, Any]:
    for k in keys:
        if k in obj:
            return k, obj[k]
    return None, None


def extract_annotation_fields(obj: Any, where: str) -> dict:
    """The typed fields of one annotation object; a missing key gives ``None``, never an error.

    Tries the key names of :data:`WINDOW_S_KEYS` / :data:`WINDOW_S_PAIRS`, :data:`WINDOW_F_KEYS` /
    :data:`WINDOW_F_PAIRS`, :data:`ANCHOR_KEYS`, :data:`INSTANCE_KEYS` and ``fps`` / ``num_frames`` /
    ``duration_s``. A present value of the wrong type, or a window with ``end < start``, raises
    :class:`ReleaseFormatError` naming ``where`` and the key.
    """
    if not isinstance(obj, Mapping):
        raise ReleaseFormatError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    out = dict.fromkeys(ANNOTATION_FIELDS)
    out["edit_window_s"] = _window(obj, WINDOW_S_KEYS, WINDOW_S_PAIRS, where, integer=False)
    out["edit_window_frames"] = _window(obj, WINDOW_F_KEYS, WINDOW_F_PAIRS, where, integer=True)
    k, v = _first(obj, ANCHOR_KEYS)
    out["anchor_frame"] = _number(v, f"{where}: key {k!r}", integer=True) if k else None
    k, v = _first(obj, INSTANCE_KEYS)
    out["selected_instance_index"] = _number(v, f"{where}: key {k!r}", integer=True) if k else None
    out["fps"] = _number(obj.get("fps"), f"{where}: key 'fps'")
    out["num_frames"] = _number(obj.get("num_frames"), f"{where}: key 'num_frames'", integer=True)
    out["duration_s"] = _number(obj.get("duration_s"), f"{where}: key 'duration_s'")
    return out


def parse_annotation(data: bytes, where: str) -> tuple[dict, str]:
    """``(fields, verbatim text)`` of one annotation file's bytes; invalid JSON raises naming ``where``."""
    text = decode_text(data, where, ReleaseFormatError, "UTF-8 JSON")
    try:
        obj = loads(text)
    except DuplicateKeyError as e:
        raise ReleaseFormatError(f"{where}: {e}") from None
    except (ValueError, RecursionError) as e:  # also too-long integer literals and very deep nesting
        raise ReleaseFormatError(f"{where}: expected valid JSON, got a parse error: {type(e).__name__}: {e}") from None
    return extract_annotation_fields(obj, where), text


def read_annotation(path: str | os.PathLike) -> tuple[dict, str | None]:
    """The annotation of one sample; a missing file gives null fields, ``None`` text and a warning.

    ``path`` comes from :func:`annotation_path`. Anything there other than a regular file of at most
    :data:`MAX_ANNOTATION_BYTES` (a folder, a FIFO, a device) raises :class:`ReleaseFormatError`."""
    if not os.path.lexists(path):
        logger.warning("annotation file %r not found: its fields are null", str(path))
        return dict.fromkeys(ANNOTATION_FIELDS), None
    return parse_annotation(read_regular_file(path, str(path), MAX_ANNOTATION_BYTES), str(path))


# ---------------------------------------------------------------- tar archives


def find_archives(root: str | os.PathLike) -> list[Path]:
    """``sorted(glob("archives/*.tar"))``; none raises naming the pattern."""
    archives = sorted(Path(root).glob(ARCHIVE_PATTERN))
    if not archives:
        raise ReleaseNotFoundError(
            f"no archive matches {ARCHIVE_PATTERN!r} under {str(root)!r}; expected the seven media tars of the Hub "
            f"layout (or the extracted folders {list(MEDIA_FOLDERS)} next to {METADATA}, with source='extracted')"
        )
    return archives


def archive_label(path: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """``archives/<name>.tar`` (relative to the root when possible) for messages."""
    p = Path(path)
    if root is not None:
        try:
            return p.relative_to(root).as_posix()
        except ValueError:
            pass
    return f"{ARCHIVES_DIR}/{p.name}"


def top_folder(path: str) -> str:
    return path.split("/", 1)[0] if "/" in path else ""


def pick_video_archive(labels: Sequence[str], samples: Sequence[Sample]) -> str:
    """The tar that holds the clips: the one named after the folder of the CSV ``video`` paths.

    Tar names are not documented [inferred]: they are used only here. The folder is the most
    common first path component of the ``video`` column (``videos`` in the release).
    """
    folders: dict[str, int] = {}
    for s in samples:
        folders[top_folder(s.video)] = folders.get(top_folder(s.video), 0) + 1
    folder = max(sorted(folders), key=lambda k: folders[k]) if folders else "videos"
    stems = {posixpath.splitext(posixpath.basename(lab))[0]: lab for lab in labels}
    for name in (folder, "videos", "video"):
        if name and name in stems:
            return stems[name]
    raise ReleaseNotFoundError(
        f"no video archive among {list(labels)}: expected '{ARCHIVES_DIR}/{folder or 'videos'}.tar', named after the "
        f"folder of the {METADATA} 'video' paths"
    )


@dataclass
class MediaStore:
    """The media of one build: ``{member path: bytes}`` from the non-video tars, with a disk fallback.

    ``folder_archive`` remembers which archive held each top-level folder, so a missing member is
    reported against the archive it should have been in.
    """

    root: Path
    labels: list[str]
    data: dict[str, bytes] = field(default_factory=dict)
    folder_archive: dict[str, str] = field(default_factory=dict)

    def add_archive(self, items: Iterable[tuple[str, bytes]], label: str, wanted: set[str]) -> None:
        """Keep the ``wanted`` members of one archive; ``items`` from :func:`iter_tar_members` or :func:`iter_tar_file`."""
        for path, data in items:
            self.folder_archive.setdefault(top_folder(path), label)
            if path in wanted:
                self.data[path] = data

    def expected_archive(self, path: str) -> str:
        folder = top_folder(path)
        if folder in self.folder_archive:
            return self.folder_archive[folder]
        stems = {posixpath.splitext(posixpath.basename(lab))[0]: lab for lab in self.labels}
        return stems.get(folder, f"{ARCHIVES_DIR}/{folder}.tar")

    def missing(self, path: str, sample: Sample, fld: str) -> ReleaseNotFoundError:
        label = self.expected_archive(path)
        state = "has no member" if label in self.labels else "does not exist; it should hold member"
        return ReleaseNotFoundError(
            f"archive {label!r} {state} {path!r}, named in {METADATA} line {sample.line} ({_origin(sample, fld)}, "
            f"sample {sample.sample_id!r}); the archive may be truncated, and the "
            f"file is not on disk under {str(self.root)!r} either"
        )

    def get(self, path: str, sample: Sample, fld: str) -> bytes:
        if path in self.data:
            return self.data[path]
        data = _disk_media(self.root, path, sample, fld)
        if data is None:
            raise self.missing(path, sample, fld)
        return data


def _origin(sample: Sample, fld: str) -> str:
    """Where a media path of ``sample`` came from, for messages: ``column 'mask'``, or the by-id lookup."""
    if sample.columns.get(fld) is None and fld in sample.looked_up:
        return f"no column for {fld!r}, looked up by sample id"
    return f"column {sample.columns.get(fld) or fld!r}"


def _media_where(path: str, sample: Sample, fld: str) -> str:
    return f"{METADATA} line {sample.line}, {_origin(sample, fld)} (sample {sample.sample_id!r}): {path!r}"


def _disk_media(root: Path, path: str, sample: Sample, fld: str) -> bytes | None:
    """The bytes of ``root/path`` (a CSV media path), ``None`` when nothing is there. The path must stay
    inside the root after symbolic links, and be a regular file of at most :data:`MAX_MEMBER_BYTES`."""
    where = _media_where(path, sample, fld)
    disk = resolve_under(root, path, where)
    if not os.path.lexists(disk):
        return None
    try:
        return read_regular_file(disk, where, MAX_MEMBER_BYTES)
    except ReleaseNotFoundError:  # a dangling link inside the root, or a parent that is a file
        return None


def read_disk_media(root: Path, path: str, sample: Sample, fld: str) -> bytes:
    """The bytes of an extracted media file (checked like :func:`_disk_media`); a missing one raises naming the
    CSV line and column."""
    data = _disk_media(root, path, sample, fld)
    if data is None:
        raise ReleaseNotFoundError(
            f"{path!r} (named in {METADATA} line {sample.line}, {_origin(sample, fld)}, sample "
            f"{sample.sample_id!r}) not found under {str(root)!r}; expected the extracted media folders next to {METADATA}"
        )
    return data


def disk_present(root: Path, path: str, sample: Sample, fld: str) -> bool:
    """Whether something exists at ``root/path`` (checked by :func:`perckit.paths.resolve_under`: a path that
    resolves through a symbolic link out of the root raises). What is there is read, and refused when it is not
    a regular file under the cap, by :func:`read_disk_media` / :meth:`MediaStore.get`."""
    return os.path.exists(resolve_under(root, path, _media_where(path, sample, fld)))


# ---------------------------------------------------------------- members looked up by sample id


#: [inferred] The member looked up by sample id for a media field when ``metadata.csv`` has no column for it
#: (the card's documented columns name neither the mask video nor the reference image). The card names only
#: the folders (``masks/``, ``ref_images/``); the file is ``<folder>/<id><ext>``, named by id like
#: ``annotations/<id>.json``, with the extensions of the spec's file types: a mask video ``.mp4``; an image,
#: format not stated, so PNG or JPEG (lower case). Nothing else is tried and no folder is listed.
LOOKUP_MEMBERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mask_video": ("masks", (".mp4",)),
    "ref_image": ("ref_images", (".png", ".jpg", ".jpeg")),
}
#: [card] Who is expected to have one: ``masks/`` holds 1,200 files, one per sample (``None``: every sample);
#: ``ref_images/`` holds 150, for the reference-guided (R) and instance-addition (C4; R3 is an R track) tracks.
LOOKUP_EXPECTED: dict[str, tuple[str, ...] | None] = {"mask_video": None, "ref_image": ("R", "C4")}
#: How many sample ids the lookup warning lists.
LOOKUP_WARN_IDS = 5


def lookup_fields(samples: Sequence[Sample]) -> tuple[str, ...]:
    """The media fields of :data:`LOOKUP_MEMBERS` that ``metadata.csv`` has no column for. A column that is
    there wins, even with empty cells (an empty cell means none)."""
    if not samples:
        return ()
    return tuple(f for f in LOOKUP_MEMBERS if samples[0].columns.get(f) is None)


def lookup_candidates(sample_id: str, fld: str) -> list[str]:
    """The member names tried for ``fld`` of one sample, in order (``masks/<id>.mp4``; ``ref_images/<id>.png``,
    ``.jpg``, ``.jpeg``), each checked by :func:`perckit.paths.check_relative` (through :func:`check_name`)."""
    folder, exts = LOOKUP_MEMBERS[fld]
    where = f"{METADATA}: sample {sample_id!r}: the {fld!r} member looked up by sample id"
    return [check_name(f"{folder}/{sample_id}{ext}", where) for ext in exts]


def lookup_wanted(samples: Sequence[Sample], fields: Sequence[str]) -> frozenset[str]:
    """Every member name the lookup may need, computed from the sample ids before any archive is read."""
    return frozenset(c for s in samples for fld in fields for c in lookup_candidates(s.sample_id, fld))


def expects_member(sample: Sample, fld: str) -> bool:
    """Whether the card expects ``sample`` to have a ``fld`` member (:data:`LOOKUP_EXPECTED`)."""
    codes = LOOKUP_EXPECTED[fld]
    if codes is None:
        return True
    code = sample.sub_track.split("_", 1)[0].upper()
    return any(code == c or (len(c) == 1 and code[:1] == c) for c in codes)


def apply_lookup(samples: Sequence[Sample], fields: Sequence[str], present: Callable[[str, Sample, str], bool]) -> list[Sample]:
    """The samples with the ``fields`` that ``metadata.csv`` has no column for filled by looking their member up
    by sample id (:func:`lookup_candidates`); ``present(member, sample, field)`` says whether a member exists
    (in a tar read, or on disk). No member: the value stays null. Two candidates of one sample present (e.g.
    ``ref_images/x.png`` and ``ref_images/x.jpg``): :class:`ReleaseFormatError`. One warning for the whole
    build lists, per field, how many of the samples expected to have one (:func:`expects_member`) have none,
    with a few of their ids; samples not expected to have one (a reference image outside R and C4) are not
    counted, and get one when it is there."""
    if not fields:
        return list(samples)
    out: list[Sample] = []
    none: dict[str, list[str]] = {f: [] for f in fields}
    expected: dict[str, int] = dict.fromkeys(fields, 0)
    for s in samples:
        s = dataclasses.replace(s, looked_up=tuple(fields))  # so that messages say where the path came from
        found: dict[str, str] = {}
        for fld in fields:
            hits = [c for c in lookup_candidates(s.sample_id, fld) if present(c, s, fld)]
            if len(hits) > 1:
                raise ReleaseFormatError(
                    f"{METADATA} line {s.line} (sample {s.sample_id!r}): no column for {fld!r}, and the lookup by sample "
                    f"id found {len(hits)} members {hits}; expected at most one"
                )
            if hits:
                found[fld] = hits[0]
            if expects_member(s, fld):
                expected[fld] += 1
                if not hits:
                    none[fld].append(s.sample_id)
        out.append(dataclasses.replace(s, **found) if found else s)
    parts = []
    for fld in fields:
        if none[fld]:
            folder, exts = LOOKUP_MEMBERS[fld]
            codes = LOOKUP_EXPECTED[fld]
            who = "samples" if codes is None else f"samples of the tracks expected to have one ({', '.join(codes)})"
            ids = ", ".join(repr(i) for i in none[fld][:LOOKUP_WARN_IDS]) + (", ..." if len(none[fld]) > LOOKUP_WARN_IDS else "")
            parts.append(f"{fld}: {len(none[fld])} of {expected[fld]} {who} have no {folder}/<id>{'|'.join(exts)} ({ids})")
    if parts:
        logger.warning("%s has no column for %s, so these members were looked up by sample id; %s; those values are null",
                       METADATA, list(fields), "; ".join(parts))
    return out


# ---------------------------------------------------------------- rows


def anchor_mask_from_png(data: bytes, threshold: int, where: str) -> dict:
    """The RLE of a binary mask image: foreground by :func:`perckit.images.mask_foreground` (any stored
    channel, alpha included, > ``threshold``; palette images compare their indices)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            mode = img.mode
            arr = np.asarray(img)
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as e:
        # DecompressionBombError: a header declaring more than 2 x Image.MAX_IMAGE_PIXELS pixels.
        raise ReleaseFormatError(f"{where}: expected a readable mask image (PNG), got: {e}") from None
    return rle_ops.encode(mask_foreground(arr, mode, threshold))


def build_row(sample: Sample, fields: Mapping, annotation_text: str | None, media: Callable[[str, str], bytes], threshold: int) -> dict:
    """One builder row. ``media(field, path)`` returns the bytes of a media path.

    Every media value is ``{"bytes": <file bytes>, "path": <release-relative path>}`` in both
    source modes, so archive and extracted builds are identical.
    """
    row: dict[str, Any] = {
        "sample_id": sample.sample_id,
        "category": sample.category,
        "sub_track": sample.sub_track,
        "instruction": sample.instruction,
        "language": sample.language,
        "orientation": sample.orientation,
    }
    for fld in MEDIA_FIELDS:
        path = getattr(sample, fld)
        row[fld] = {"bytes": media(fld, path), "path": path} if path else None
    mask_where = f"{sample.reason_visual_mask!r} (sample {sample.sample_id!r}, column 'reason_visual_mask')"
    row["anchor_mask"] = anchor_mask_from_png(row["reason_visual_mask"]["bytes"], threshold, mask_where)
    row["edit_window_s"] = fields.get("edit_window_s")
    row["edit_window_frames"] = fields.get("edit_window_frames")
    row["anchor_frame"] = fields.get("anchor_frame")
    row["selected_instance_index"] = fields.get("selected_instance_index")
    row["fps"] = fields.get("fps") if fields.get("fps") is not None else sample.fps
    row["num_frames"] = fields.get("num_frames") if fields.get("num_frames") is not None else sample.num_frames
    row["annotation_json"] = annotation_text
    return row
