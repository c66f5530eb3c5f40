"""Reading the R4D-Bench release (JSON + PNG folders) and the user's prediction files, through the checked
readers: every path the release (or a prediction file) names goes through :func:`perckit.io.paths.resolve_under`,
every file is read by :func:`perckit.io.jsonio.read_json` / :func:`perckit.io.paths.read_regular_file` /
:func:`perckit.io.prefetch.read_ahead` under a byte limit of :mod:`perckit.r4d_bench.layout`.

R4D-Bench here is the referring-segmentation benchmark on dynamic 4D scenes (Hub: ``LiYacheng/r4d-bench-qa``),
not NVIDIA's region-prompted VQA benchmark of the same name. Every [inferred] decision about the files lives
here in one named function: the frame id of a COCO image (:func:`frame_id_of`), the track of an annotation
(:func:`resolve_track_id`, where the COCO attribute and the scene track JSON meet), the names and the shape of
the scene track JSON (:func:`scene_track_json_names`, :func:`scene_track_links`), the COCO file of a scene
(:func:`find_coco_json`) and the folder of an image (:func:`_image_name`).

Sections: a scene (its COCO file and frames, its scene track JSON, its frame images), the query configs' files
(query metadata, track-ID and dense ground truth: :func:`open_query_release`), masks (a mask PNG under the one
foreground rule, the frame mask of a dense-GT frame) and the official prediction files. The rows are made from what
these return by :mod:`perckit.r4d_bench.rows`."""

from __future__ import annotations

import io
import logging
import operator
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from PIL import Image

from ..io import prefetch
from .. import rle as rle_ops
from ..errors import (
    InferredShapeError, InputNotFoundError, PredictionError, ReleaseFormatError, ReleaseNotFoundError, RLEError,
    check_choice, inferred_reading, short_repr as _short,
)
from ..io.images import check_encoded_image, mask_foreground
from ..io.jsonio import parse_int, read_json, require_file
from ..io.paths import MAX_PATH_CHARS, check_relative, read_regular_file, resolve_under
from . import layout
from .layout import (
    MAX_JSON_BYTES, MAX_MASK_PNG_BYTES, QUERIES_META, SCENE_ALIASES, SCENES_DIR, TRACK_GT, check_release_root,
    dense_gt_file, normalise_scene, scene_folder, scene_from_query_id,
)

logger = logging.getLogger("perckit.r4d_bench.release")  # the release readers' one logger (its name is public)


# ---------------------------------------------------------------- COCO names [inferred]


def warn_shapes(bad: Sequence[tuple[str, Any]], expected: str, where: str) -> None:
    """[inferred] readings: when ``bad`` (``(field, value)`` pairs of the file ``where`` whose shape is not
    ``expected``) is not empty, one warning naming ``where`` (:func:`perckit.errors.inferred_reading`) with their
    count and the first; the caller ignores them."""
    def check() -> None:
        if bad:
            raise InferredShapeError(f"{len(bad)} value(s) not {expected}, e.g. {bad[0][0]}: {_short(bad[0][1])}")
    inferred_reading(check, None, where, logger)


def is_track_id(value: Any) -> bool:
    """The shape of one track id: an int (not a bool) or a non-empty string."""
    return type(value) is int or (type(value) is str and value != "")


def _extra_ok(extra: Any) -> bool:
    """[inferred] The Roboflow ``extra`` of a COCO image has the shape read: an object whose ``name`` is a string
    (or absent). Another shape is ignored (:func:`frame_id_of`) with one warning per file (:func:`read_scene`)."""
    return isinstance(extra, Mapping) and isinstance(extra.get("name"), (str, type(None)))


def frame_id_of(image: Mapping[str, Any], pattern: str = r"(\d+)", where: str = "COCO image") -> int:
    """[inferred] frame id of a COCO image: first digit run of ``extra.name``, else of the file name's basename
    (an ``extra.name`` that is not a string is ignored)."""
    name = image["extra"].get("name") if _extra_ok(image.get("extra")) else None
    name = name or Path(str(image.get("file_name", ""))).name
    m = re.search(pattern, str(name))
    if not m:
        raise ReleaseFormatError(f"{where}: no frame id matching {pattern!r} in image name {name!r}")
    return int(m.group(1) if m.groups() else m.group(0))


#: [inferred] which source names the track of a COCO annotation when both do (option ``track_id_precedence``):
#: ``"coco"`` (default) the annotation's own attribute, ``"scene_json"`` the scene track JSON's link.
TRACK_ID_PRECEDENCES = ("coco", "scene_json")


def track_attributes(annotation: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, Any]]]:
    """[inferred] The track ids a COCO annotation carries, in precedence order (``track_id``,
    ``attributes.track_id``, ``instance_id``; each an int or a non-empty string, :func:`is_track_id`), and the
    ``(name, value)`` of those of another shape (and of an ``attributes`` that is not an object), which are ignored."""
    attrs = annotation.get("attributes")
    inner = attrs.get("track_id") if isinstance(attrs, Mapping) else None
    pairs = [("track_id", annotation.get("track_id")), ("attributes.track_id", inner), ("instance_id", annotation.get("instance_id"))]
    odd = [(k, v) for k, v in pairs if v is not None and not is_track_id(v)]
    return [str(v) for _, v in pairs if is_track_id(v)], odd + ([] if isinstance(attrs, (Mapping, type(None))) else [("attributes", attrs)])


def coco_track_id(annotation: Mapping[str, Any]) -> str | None:
    """[inferred] track id carried by a COCO annotation: the first of :func:`track_attributes`, else None (an
    attribute of another shape is ignored: :func:`perckit.r4d_bench.rows.scene_annotations` warns once per file)."""
    return next(iter(track_attributes(annotation)[0]), None)


def resolve_track_id(annotation: Mapping[str, Any], scene_links: Mapping[int, str] | None = None,
                     precedence: str = "coco", annotation_id: int | None = None) -> str | None:
    """[inferred] track id of a COCO annotation: the one place both sources meet.

    ``scene_links`` is the annotation id -> track id map of the scene track JSON (:func:`scene_track_links`). With
    ``precedence="coco"`` (default) the annotation's own attribute (:func:`coco_track_id`) wins and the scene track
    JSON fills the annotations that carry none; ``"scene_json"`` is the other way round. None when neither names a
    track."""
    return resolve_track_ids([annotation], [annotation_id], scene_links, precedence)[0]


def resolve_track_ids(annotations: Sequence[Mapping[str, Any]], annotation_ids: Sequence[int | None],
                      scene_links: Mapping[int, str] | None = None, precedence: str = "coco") -> list[str | None]:
    """:func:`resolve_track_id` of each annotation (with its id), the precedence checked once for them all."""
    check_choice("track_id_precedence", precedence, TRACK_ID_PRECEDENCES)
    owns = list(map(coco_track_id, annotations))
    if not scene_links:
        return owns
    linked = [scene_links.get(i) if i is not None else None for i in annotation_ids]
    if precedence == "scene_json":
        return [lk if lk is not None else own for own, lk in zip(owns, linked)]
    return [own if own is not None else lk for own, lk in zip(owns, linked)]


# ---------------------------------------------------------------- scene track JSON


def scene_track_json_names(scene: str, aliases: Mapping[str, str] = SCENE_ALIASES) -> list[str]:
    """[inferred] the names the scene track JSON may have in ``data/scenes/<scene>/``: the folder name, its
    hyphen spelling (the card: ``americano.json``, ``cook-spinach.json``) and those of the upstream aliases
    of the scene (``torchocolate.json``)."""
    stems = [scene, scene.replace("_", "-")]
    stems += [a for a, target in aliases.items() if normalise_scene(target, aliases) == scene]
    stems += [a.replace("_", "-") for a in stems]
    return list(dict.fromkeys(f"{stem}.json" for stem in stems))  # each name once, in order


def find_scene_track_json(folder: Path, scene: str, aliases: Mapping[str, str] = SCENE_ALIASES) -> Path | None:
    """The scene track JSON of a scene folder, or None when the scene has none; more than one candidate is
    ambiguous and raises. The path goes through :func:`perckit.io.paths.resolve_under` (a symbolic link out of
    the scene folder is refused)."""
    where = f"scene folder {str(folder)!r}: scene track JSON"
    found = [n for n in scene_track_json_names(scene, aliases) if (folder / n).exists() or (folder / n).is_symlink()]
    if len(found) > 1:  # [inferred] names: ambiguous, the scene track JSON is ignored (read_scene_tracks)
        raise InferredShapeError(f"{where}: expected at most one of {scene_track_json_names(scene, aliases)}, got {found}")
    return resolve_under(folder, found[0], where) if found else None


def scene_track_links(data: Any) -> dict[int, str]:
    """[inferred] COCO annotation id -> track id, from a parsed scene track JSON.

    Neither the spec nor the card documents the fields of this file; this reads ``{"tracks": [...]}`` (or a bare
    list of tracks) where a track is an object with ``track_id`` (an int or a non-empty string) and
    ``annotation_ids`` (the COCO annotation ``id``s of its instance masks; other keys such as ``category`` are not
    read; a track without ``annotation_ids`` links nothing, but tracks none of which has them are another layout).
    Any other shape, or an annotation id claimed by two tracks, raises :class:`InferredShapeError` naming the
    field: :func:`read_scene_tracks` then warns once and ignores the file."""
    tracks = data.get("tracks") if isinstance(data, Mapping) else data
    if not isinstance(tracks, list) or (tracks and not any(isinstance(t, Mapping) and "annotation_ids" in t for t in tracks)):
        raise InferredShapeError(f"expected {{'tracks': [{{track_id, annotation_ids}}, ...]}} or a list of tracks, got {_short(data)}")
    links: dict[int, str] = {}
    for i, track in enumerate(tracks):
        if isinstance(track, Mapping) and "annotation_ids" not in track:
            continue
        if not isinstance(track, Mapping) or not is_track_id(tid := track.get("track_id")) or not isinstance(track["annotation_ids"], list):
            raise InferredShapeError(f"tracks[{i}]: expected {{track_id: an int or a string, annotation_ids: [...]}}, got {_short(track)}")
        for j, aid in enumerate(track["annotation_ids"]):
            aid = parse_int(aid, f"tracks[{i}].annotation_ids[{j}]", InferredShapeError)
            if links.setdefault(aid, str(tid)) != str(tid):
                raise InferredShapeError(f"tracks[{i}].annotation_ids[{j}]: expected each annotation in one track, got "
                                         f"annotation {aid} in track {links[aid]!r} and in track {str(tid)!r}")
    return links


def read_scene_tracks(folder: Path, scene: str, aliases: Mapping[str, str] = SCENE_ALIASES) -> tuple[Path | None, dict[int, str]]:
    """The scene track JSON of a scene (path, annotation id -> track id); ``(None, {})`` when there is none.
    Read with :func:`perckit.io.jsonio.read_json` (repeated keys refused, a BOM skipped, capped): a broken file
    raises; one of another layout (or two candidates) is one warning, then ignored (:func:`scene_track_links`)."""
    where = f"R4D-Bench: scene folder {str(folder)!r}: scene track JSON"
    path = inferred_reading(lambda: find_scene_track_json(folder, scene, aliases), None, where, logger)
    if path is None:
        return None, {}
    data = read_json(path, limit=MAX_JSON_BYTES)
    return path, inferred_reading(lambda: scene_track_links(data), {}, f"R4D-Bench: scene track JSON {str(path)!r}", logger)


# ---------------------------------------------------------------- scenes


@dataclass
class FrameInfo:
    frame_id: int
    coco_image_id: int
    #: Relative to the scene folder, resolved under it; None when :func:`read_scene` ran with ``image_names=False``.
    file_name: str | None
    height: int
    width: int
    #: The COCO ``images[].file_name`` as written (the ``frames`` rows' ``file_name``).
    coco_file_name: str | None = None


@dataclass
class SceneInfo:
    name: str
    folder: Path
    coco_path: Path
    coco: dict
    frames: dict[int, FrameInfo] = field(default_factory=dict)
    #: The scene track JSON read (``read_tracks=True``) and its annotation id -> track id links.
    track_json_path: Path | None = None
    track_links: dict[int, str] = field(default_factory=dict)

    def frame_size(self, frame_id: int) -> tuple[int, int] | None:
        """The frame's size, else the size all the scene's frames share (None when they differ)."""
        fr = self.frames.get(frame_id)
        sizes = {(f.height, f.width) for f in self.frames.values()} if fr is None else {(fr.height, fr.width)}
        return next(iter(sizes)) if len(sizes) == 1 else None


def find_coco_json(scene_dir: Path, coco_json_name: str | None = None) -> Path:
    """[inferred] The scene's COCO file: ``coco_json_name`` where the scene has it, else the single ``_annotations*.coco.json``."""
    if coco_json_name and (scene_dir / coco_json_name).is_file():
        return resolve_under(scene_dir, coco_json_name, f"scene folder {str(scene_dir)!r}: option coco_json_name")
    matches = sorted(scene_dir.glob("_annotations*.coco.json"))
    found = [m.name for m in matches]
    if len(matches) != 1:
        if coco_json_name:
            raise ReleaseNotFoundError(f"scene folder {str(scene_dir)!r}: no {coco_json_name!r} (coco_json_name) and not "
                                       f"exactly one '_annotations*.coco.json' to fall back on: found {found}")
        raise ReleaseNotFoundError(
            f"scene folder {str(scene_dir)!r}: expected exactly one '_annotations*.coco.json', found {found}; "
            "pick one with the config option coco_json_name"
        )
    return resolve_under(scene_dir, found[0], f"scene folder {str(scene_dir)!r}: COCO file")


def read_scene(root: Path, scene: str, coco_json_name: str | None = None, frame_id_pattern: str = r"(\d+)",
               read_tracks: bool = False, aliases: Mapping[str, str] = SCENE_ALIASES,
               image_names: bool = True) -> SceneInfo:
    """A scene's COCO file and frames; with ``read_tracks`` also its scene track JSON (the ``frames`` config).

    ``image_names=False`` (the query configs, which read no image) leaves every frame's ``file_name`` None
    instead of resolving it under the scene folder (two ``lstat`` calls per frame)."""
    folder = scene_folder(root, scene, f"R4D-Bench release {str(root)!r}: scene {scene!r}")
    if not folder.is_dir():
        raise ReleaseNotFoundError(f"scene folder {SCENES_DIR + '/' + scene!r} not found under {str(root)!r}")
    coco_path = find_coco_json(folder, coco_json_name)
    coco = read_json(coco_path, limit=MAX_JSON_BYTES)
    if not isinstance(coco, Mapping) or not isinstance(coco.get("images"), list):
        raise ReleaseFormatError(f"{str(coco_path)!r}: expected a COCO object with an 'images' list")
    info = SceneInfo(scene, folder, coco_path, coco)
    # (the scene folder and its images/ folder resolved once: each name then costs one lstat per component)
    real = (os.path.realpath(folder), os.path.realpath(folder / "images")) if image_names else None
    odd_names = []  # [inferred] extra.name of another shape: ignored (frame_id_of), one warning below
    for i, img in enumerate(coco["images"]):
        where = f"{str(coco_path)!r}: images[{i}]"
        if not isinstance(img, Mapping):
            raise ReleaseFormatError(f"{where}: expected an object, got {_short(img)}")
        if img.get("extra") is not None and not _extra_ok(img["extra"]):
            odd_names.append((f"images[{i}].extra", img["extra"]))
        fid = frame_id_of(img, frame_id_pattern, where)
        if fid in info.frames:
            raise ReleaseFormatError(f"{where}: frame id {fid} appears twice in the scene {scene!r}")
        try:
            h, w, iid = int(img["height"]), int(img["width"]), int(img["id"])
        except (KeyError, TypeError, ValueError):
            raise ReleaseFormatError(f"{where}: expected int 'id', 'height' and 'width'") from None
        name = _image_name(folder, real, img.get("file_name"), f"{where}.file_name") if real else None
        info.frames[fid] = FrameInfo(fid, iid, name, h, w, img.get("file_name"))
    warn_shapes(odd_names, "an object with a string 'name'", f"R4D-Bench: {str(coco_path)!r}: images[].extra.name")
    if read_tracks:
        info.track_json_path, info.track_links = read_scene_tracks(folder, scene, aliases)
    return info


def _image_name(folder: Path, real: tuple[str, str], file_name: object, where: str = "COCO image file_name") -> str:
    """[inferred] ``file_name`` resolves under ``images/`` first, then under the scene folder; either way it
    must stay inside the scene folder, and ``images/<file_name>`` inside ``images/`` (the rule of
    :func:`perckit.io.paths.resolve_under`: no absolute path, no ``..``, no symbolic link out of it), else
    :class:`ReleaseFormatError` naming ``where``. ``real``: the resolved scene folder and ``images/`` folder.

    A joined path resolves to its resolved folder plus its own components unless one of them is a symbolic
    link, so each candidate costs one ``lstat`` per component of ``file_name``; where one is a link,
    :func:`perckit.io.paths.resolve_under` resolves it (and accepts a Hub cache blob, or raises)."""
    parts = check_relative(file_name, where).parts
    linked, _ = _walk(real[0], parts)
    if linked:
        resolve_under(folder, file_name, where)
    linked, exists = _walk(real[1], parts)
    if linked:
        exists = resolve_under(folder / "images", file_name, where).exists()  # a FIFO there is refused by the reader
    return f"images/{file_name}" if exists else str(file_name)


def _walk(real_root: str, parts: Sequence[str]) -> tuple[bool, bool]:
    """(some component of ``real_root/parts`` is a symbolic link, the path exists), by one ``lstat`` per
    component up to the first link (a component that cannot be read counts as no link, as ``realpath`` reads it)."""
    if not parts:
        return False, os.path.exists(real_root)
    path, exists = real_root, True
    for part in parts:
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except OSError:
            exists = False
            continue
        if stat.S_ISLNK(st.st_mode):
            return True, True
    return False, exists


# ---------------------------------------------------------------- frame images


def read_ahead(paths: Sequence[str | Path]) -> Iterator[tuple[Path, bytes | Exception]]:
    """:func:`perckit.io.prefetch.read_ahead` of the frame images, each a regular file under
    :data:`layout.MAX_IMAGE_BYTES`."""
    return prefetch.read_ahead(paths, limit=layout.MAX_IMAGE_BYTES, what="image file")


def frame_image_paths(info: SceneInfo) -> list[Path]:
    """The scene's frame image files in the order :func:`perckit.r4d_bench.rows.frame_tables` reads them (by frame id)."""
    names = [info.frames[fid].file_name for fid in sorted(info.frames)]
    if None in names:
        raise ValueError(f"scene {info.name!r} was read with image_names=False: its frame images cannot be read")
    return [info.folder / name for name in names]


def frame_images(
    info: SceneInfo, images: Iterator[tuple[Path, bytes | Exception]] | None = None
) -> Iterator[tuple[int, FrameInfo, Path, bytes, str]]:
    """``(frame id, frame, image path, image bytes, where)`` of every COCO image of a scene, by frame id, each image
    checked (:func:`perckit.io.images.check_encoded_image`: its header opens, a JPEG / PNG is not cut short; the
    image is not decoded); an image that cannot be read raises naming its COCO image. ``images``: the ``(path, bytes
    or error)`` of :func:`frame_image_paths`, in order (default: read here by :func:`read_ahead`)."""
    fids = sorted(info.frames)
    if images is None:
        images = read_ahead(frame_image_paths(info))
    for fid, (path, data) in zip(fids, images):
        fr = info.frames[fid]
        where = f"{str(info.coco_path)!r}: image {fr.coco_image_id} (frame {fid})"
        if isinstance(data, (FileNotFoundError, IsADirectoryError, NotADirectoryError, ReleaseNotFoundError)):
            raise ReleaseNotFoundError(f"{where}: image file {str(path)!r} not found")
        if isinstance(data, OSError):
            raise ReleaseFormatError(f"{where}: image file {str(path)!r} cannot be read: {data}")
        if isinstance(data, Exception):  # not a regular file, or over layout.MAX_IMAGE_BYTES
            raise ReleaseFormatError(f"{where}: {data}")
        check_encoded_image(data, f"{where}: image file {str(path)!r}")
        yield fid, fr, path, data, where


# ---------------------------------------------------------------- the query configs' files


def load_queries_meta(path: str | Path) -> dict[str, dict]:
    """``R4D-Bench_queries.json``: an array of entries or ``{"queries": [...]}``; keyed by ``query_id``."""
    data = read_json(path, limit=MAX_JSON_BYTES)
    if isinstance(data, Mapping) and isinstance(data.get("queries"), list):
        data = data["queries"]
    if not isinstance(data, list):
        raise ReleaseFormatError(f"{str(path)!r}: expected a JSON array of queries (or an object with 'queries'), got {type(data).__name__}")
    return {qid: dict(entry) for qid, entry in _query_entries(path, data)}


def _query_entries(path: str | Path, entries: Sequence[Any]) -> Iterator[tuple[str, Mapping]]:
    """``(query_id, entry)`` of each entry in turn; an entry that is not an object with a string ``query_id``, or
    repeats one, raises :class:`ReleaseFormatError`."""
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("query_id"), str):
            raise ReleaseFormatError(f"{str(path)!r}: entry {i}: expected an object with a string 'query_id', got {_short(entry)}")
        if entry["query_id"] in seen:
            raise ReleaseFormatError(f"{str(path)!r}: duplicate query_id {entry['query_id']!r}")
        seen.add(entry["query_id"])
        yield entry["query_id"], entry


def load_track_gt(path: str | Path) -> dict[str, list[str]]:
    """``R4D-Bench_predictions.json``: ``{query_id: [ids]}`` [card] or ``{query_id: {"target_track_ids": [...]}}``
    [inferred: an object of another shape is one warning for the file, and its query is left out]."""
    data = _json_object(path, "target_track_ids")
    odd = {k: v for k, v in data.items() if isinstance(v, Mapping) and not _ids_ok(v.get("target_track_ids", v.get("track_ids")))}
    warn_shapes([(repr(k), v) for k, v in odd.items()], "a list of track ids or an object with one under 'target_track_ids'",
                f"R4D-Bench: {str(path)!r}: query values")
    return {str(k): track_id_list(v, f"{path}: {k!r}") for k, v in data.items() if k not in odd}


def _ids_ok(value: Any) -> bool:
    return isinstance(value, list) and all(map(is_track_id, value))


def track_id_list(value: Any, where: str, error: type[Exception] = ReleaseFormatError) -> list[str]:
    """A list of track ids (or ``{"target_track_ids": [...]}``) as sorted, deduplicated strings."""
    if isinstance(value, Mapping):
        value = value.get("target_track_ids", value.get("track_ids"))
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set)):
        raise error(f"{where}: expected a list of track ids, got {_short(value)}")
    out = set()
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise error(f"{where}: expected track ids to be ints or strings, got {_short(v)}")
        out.add(str(v))
    return sorted(out)


_BY_FRAME_ID = operator.itemgetter("frame_id")


def load_dense_gt(path: str | Path) -> list[dict]:
    """Dense GT: an array of entries or an object keyed by ``query_id``. Checks ids, ``ground_truth`` and frame ids;
    a ``target_entity_ids`` [inferred] that is not a list of ids is one warning for the file, then left out."""
    data = read_json(path, limit=MAX_JSON_BYTES)
    if isinstance(data, Mapping):
        entries = []
        for qid, entry in data.items():
            if not isinstance(entry, Mapping):
                raise ReleaseFormatError(f"{str(path)!r}: {qid!r}: expected an object, got {_short(entry)}")
            entries.append({"query_id": qid, **entry})
    elif isinstance(data, list):
        entries = list(data)
    else:
        raise ReleaseFormatError(f"{str(path)!r}: expected a JSON array of queries or an object keyed by query_id, got {type(data).__name__}")
    out = []
    odd = []  # [inferred] ground_truth.target_entity_ids (read when target_tracks is absent) of another shape: dropped
    for qid, entry in _query_entries(path, entries):
        where = f"{str(path)!r}: query {qid!r}"
        gt = entry.get("ground_truth")
        if not isinstance(gt, Mapping):
            raise ReleaseFormatError(f"{where}: expected a 'ground_truth' object, got {_short(gt)}")
        frames = gt.get("frames") or []
        if not isinstance(frames, list):
            raise ReleaseFormatError(f"{where}: expected 'ground_truth.frames' to be a list, got {_short(frames)}")
        fids: set[int] = set()
        norm_frames = []
        for j, fr in enumerate(frames):
            # already in normal form (an int frame id, a masks list): kept as it is; else normalised into a copy
            plain = type(fr) is dict and type(fid := fr.get("frame_id")) is int and type(fr.get("masks")) is list
            if not plain:
                if not isinstance(fr, Mapping):
                    raise ReleaseFormatError(f"{where}: frames[{j}]: expected an object, got {_short(fr)}")
                fid = parse_int(fr.get("frame_id"), f"{where}: frames[{j}].frame_id")
            if fid in fids:
                raise ReleaseFormatError(f"{where}: duplicate frame_id {fid} in ground_truth.frames")
            fids.add(fid)
            if not plain:
                masks = fr.get("masks") or []
                if not isinstance(masks, list):
                    raise ReleaseFormatError(f"{where}: frame {fid}: expected 'masks' to be a list, got {_short(masks)}")
                fr = {**fr, "frame_id": fid, "masks": masks}
            norm_frames.append(fr)
        existence = gt.get("existence_frames") or []
        if type(existence) is not list or not set(map(type, existence)) <= {int}:  # else each parsed (or refused)
            existence = [parse_int(f, f"{where}: ground_truth.existence_frames") for f in existence]
        gt = {**gt, "frames": sorted(norm_frames, key=_BY_FRAME_ID), "existence_frames": list(existence)}
        if gt.get("target_tracks") is None and gt.get("target_entity_ids") is not None and not _ids_ok(gt["target_entity_ids"]):
            odd.append((f"query {qid!r}", gt.pop("target_entity_ids")))
        out.append({**entry, "ground_truth": gt})
    warn_shapes(odd, "a list of ids", f"R4D-Bench: {str(path)!r}: ground_truth.target_entity_ids")
    return out


@dataclass
class QueryRelease:
    """Everything a query config reads, parsed and checked (done in ``_split_generators``)."""

    root: Path
    gt_path: Path
    entries: list[dict]
    meta: dict[str, dict]
    track_gt: dict[str, list[str]]
    scenes: dict[str, SceneInfo]


def _release_file(root: Path, name: str, override: str | Path | None, what: str) -> Path:
    """``name`` under the release ``root`` (a regular file that stays under it), or the ``override`` path the
    command line gave (which must exist)."""
    if override is None:
        path = require_file(root, name, f"R4D-Bench {what}")
        resolve_under(root, name, f"R4D-Bench release {str(root)!r}: {what}")
        return path
    path = Path(override)
    if not path.is_file():
        raise ReleaseNotFoundError(f"{what} {str(path)!r} not found")
    return path


def open_query_release(root: str | Path, config_name: str = "all_queries", mask_source: str = "segmentation",
                       coco_json_name: str | None = None, frame_id_pattern: str = r"(\d+)",
                       aliases: Mapping[str, str] = SCENE_ALIASES, gt_file: str | Path | None = None,
                       queries_file: str | Path | None = None) -> QueryRelease:
    """Read and check the files of a query config. ``gt_file``/``queries_file`` override the default paths (CLI)."""
    root = Path(root)
    if gt_file is None:
        root = check_release_root(root)
    gt_path = _release_file(root, dense_gt_file(config_name, mask_source), gt_file, "dense ground truth")
    meta_path = _release_file(root, QUERIES_META, queries_file, "query metadata")
    if gt_file is not None and not (root / SCENES_DIR).is_dir():
        # The official layout keeps the GT under <root>/scripts/: find the scenes from there.
        candidate = gt_path.resolve().parent.parent
        if (candidate / SCENES_DIR).is_dir():
            root = candidate
    meta = load_queries_meta(meta_path)
    track_path = resolve_under(root, TRACK_GT, f"R4D-Bench release {str(root)!r}: track-ID ground truth")
    track_gt = load_track_gt(track_path) if track_path.is_file() else {}
    entries = load_dense_gt(gt_path)
    scenes: dict[str, SceneInfo] = {}
    for entry in entries:
        scene = entry_scene(entry, meta, aliases)
        where = f"{gt_path.name}: query {entry['query_id']!r}: scene {scene!r} (from {QUERIES_META} or the query id)"
        if scene not in scenes and scene_folder(root, scene, where).is_dir():
            scenes[scene] = read_scene(root, scene, coco_json_name, frame_id_pattern, image_names=False)  # no image is read
    return QueryRelease(root, gt_path, entries, meta, track_gt, scenes)


def entry_scene(entry: Mapping, meta: Mapping[str, Mapping], aliases: Mapping[str, str] = SCENE_ALIASES) -> str:
    m = meta.get(entry["query_id"])
    if m and isinstance(m.get("scene"), str) and m["scene"]:
        return normalise_scene(m["scene"], aliases)
    return scene_from_query_id(entry["query_id"], aliases)


# ---------------------------------------------------------------- masks


def png_mask(path: Path, where: str, error: type[Exception] = ReleaseFormatError,
             not_found: type[Exception] = ReleaseNotFoundError) -> rle_ops.RLE:
    """A PNG mask as RLE; foreground by :func:`perckit.io.images.mask_foreground` (any channel > 0).

    The file is read by :func:`perckit.io.paths.read_regular_file` under :data:`layout.MAX_MASK_PNG_BYTES`:
    a FIFO, a device or a folder is refused at once, an oversize file before it is read. A missing file raises
    ``not_found``, anything else ``error`` (a prediction file's masks: ``InputNotFoundError`` / ``PredictionError``)."""
    data = read_regular_file(path, f"{where}: mask PNG", MAX_MASK_PNG_BYTES, error, not_found)
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            mode = im.mode
            arr = np.asarray(im)
    except FileNotFoundError:
        raise not_found(f"{where}: mask PNG {str(path)!r} not found") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise error(f"{where}: cannot open mask PNG {str(path)!r}: {e}") from None
    return rle_ops.encode(mask_foreground(arr, mode, 0))


def frame_mask_from_segmentations(
    masks: Sequence[Mapping], size: tuple[int, int] | None, where: str, checked: Mapping[int, Mapping] = MappingProxyType({})
) -> rle_ops.RLE:
    """OR of the ``segmentation`` of every mask of one frame; RLE sizes win, polygons use ``size``.

    Every mask goes through :func:`perckit.rle.to_rle` (``size`` checked, errors naming ``where: masks[k]``),
    then :func:`perckit.rle.union`, except that the polygons of the frame's masks are rasterised by one
    :func:`perckit.rle.polygon_unions` call (each mask's lists of polygons; its guard decides, and when it
    refuses, :func:`perckit.rle.to_rle` names the first refused mask) and an RLE whose ``id()`` is in
    ``checked`` (accepted by :func:`perckit.rle.valid_many`, see :func:`checked_rles`) is not validated again.
    The first bad mask (in order) raises."""
    segs = [m.get("segmentation") if isinstance(m, Mapping) else None for m in masks]
    # Only well-formed sizes (two ints) vote here; anything else is reported by rle.to_rle below.
    rle_sizes = {(sz[0], sz[1]) for s in segs if isinstance(s, Mapping) and isinstance(sz := s.get("size"), (list, tuple))
                 and len(sz) == 2 and type(sz[0]) is int and type(sz[1]) is int}
    if len(rle_sizes) > 1:
        raise ReleaseFormatError(f"{where}: masks of one frame have different sizes {sorted(rle_sizes)}")
    if rle_sizes:
        rsize = next(iter(rle_sizes))
        if size is not None and tuple(size) != rsize:
            raise ReleaseFormatError(f"{where}: RLE size {list(rsize)} differs from the frame size {list(size)} of the COCO image")
        size = rsize
    plain = size is not None and all(type(v) is int and v > 0 for v in size) and size[0] * size[1] <= rle_ops.MAX_PIXELS
    parts: list = []
    polygons: list[tuple[int, int, list]] = []  # (index in parts, k, the mask's polygons) rasterised together below
    for k, seg in enumerate(segs):
        if seg is None or (isinstance(seg, (list, dict)) and len(seg) == 0):
            continue
        if isinstance(seg, list) and size is None:
            _name_refused_polygons(polygons, size, where)
            raise ReleaseFormatError(f"{where}: masks[{k}] is a polygon and the frame size is unknown (no COCO image, no RLE)")
        done = checked.get(id(seg)) if plain else None
        if done is not None and done["size"] == [size[0], size[1]]:  # an RLE as rle.validate returns it, or a union
            parts.append({"size": [size[0], size[1]], "counts": done["counts"]})
        elif plain and type(seg) is list and all(type(p) is list for p in seg):
            polygons.append((len(parts), k, seg))
            parts.append(None)
        else:
            try:
                parts.append(rle_ops.to_rle(seg, size=size, where=f"{where}: masks[{k}].segmentation"))
            except (RLEError, ReleaseFormatError):
                _name_refused_polygons(polygons, size, where)  # a polygon before it was refused first
                raise
    if size is None:
        raise ReleaseFormatError(f"{where}: cannot build the frame mask: frame size unknown (no COCO image and no RLE)")
    if polygons:
        h, w = size
        try:
            unions = rle_ops.polygon_unions([seg for _, _, seg in polygons], h, w)
        except RLEError:
            _name_refused_polygons(polygons, size, where)
            raise
        for (i, _, _), one in zip(polygons, unions):
            parts[i] = one  # (pycocotools form, bytes counts: what rle.union merges)
        if len(parts) == 1:
            return {"size": [h, w], "counts": parts[0]["counts"].decode("ascii")}
    return rle_ops.union(parts, size=size, where=where)


def _name_refused_polygons(polygons: Sequence[tuple[int, int, list]], size: tuple[int, int] | None, where: str) -> None:
    """Raise the :func:`perckit.rle.to_rle` error of the first mask of ``polygons`` the polygon guard refuses, if any."""
    for _, k, seg in polygons:
        rle_ops.to_rle(seg, size=size, where=f"{where}: masks[{k}].segmentation")


def checked_rles(frames: Any, frame_size: Callable[[int], tuple[int, int] | None] | None = None) -> dict[int, Mapping]:
    """The masks of a whole query's dense-GT ``frames`` (``[{"frame_id": ..., "masks": [{"segmentation": ...}]}]``)
    decided at once, by the ``id()`` of their segmentation: every compressed RLE that :func:`perckit.rle.valid_many`
    accepts (one compiled scan), as it is, and, with ``frame_size`` (frame id -> [H, W] or None), every mask of
    polygons of a frame of known size that :func:`perckit.rle.to_rles` rasterises (one guarded call per size: when
    the guard refuses, none of that size is taken). Anything odd is skipped, not refused: the frame-by-frame path
    checks it and raises the precise error. The ids are valid while ``frames`` is alive (the caller's entry)."""
    segs, polygons, sizes = [], [], []
    for fr in frames if type(frames) is list else ():
        fid = fr.get("frame_id") if type(fr) is dict else None
        size = frame_size(fid) if frame_size is not None and type(fid) is int else None
        for m in (fr.get("masks") if type(fr) is dict else None) or ():
            seg = m.get("segmentation") if type(m) is dict else None
            if type(seg) is dict:
                segs.append(seg)
            elif size is not None and type(seg) is list:
                polygons.append(seg)
                sizes.append([size[0], size[1]])
    done: dict[int, Mapping] = {id(seg): seg for seg, ok in zip(segs, rle_ops.valid_many(segs)) if ok}
    done.update((id(seg), mask) for seg, mask in zip(polygons, rle_ops.to_rles(polygons, sizes)) if mask is not None)
    return done


def frame_mask_from_pngs(root: Path, frame: Mapping, size: tuple[int, int] | None, where: str) -> rle_ops.RLE:
    """OR of the per-mask ``mask_image`` PNGs, else the frame's ``combined_mask_image``."""
    masks = frame.get("masks") or []
    paths = [m.get("mask_image") for m in masks if isinstance(m, Mapping)]

    def png(rel: str, at: str) -> rle_ops.RLE:  # a mask PNG the release names, resolved under its root
        return png_mask(resolve_under(root, rel, at), at)
    if masks and all(isinstance(p, str) for p in paths):
        parts = [png(p, f"{where}: masks[{k}].mask_image") for k, p in enumerate(paths)]
    elif isinstance(frame.get("combined_mask_image"), str):
        parts = [png(frame["combined_mask_image"], f"{where}: combined_mask_image")]
    elif not masks:
        parts = []
    else:
        raise ReleaseFormatError(f"{where}: mask_source='mask_image' needs 'mask_image' on every mask or a 'combined_mask_image'")
    if parts:
        psize = tuple(parts[0]["size"])
        if size is not None and psize != tuple(size):
            raise ReleaseFormatError(f"{where}: mask PNG size {list(psize)} differs from the frame size {list(size)}")
        size = psize
    if size is None:
        raise ReleaseFormatError(f"{where}: cannot build the frame mask: frame size unknown")
    return rle_ops.union(parts, size=size, where=where)


# ---------------------------------------------------------------- prediction files


def _json_object(path: str | Path, values: str, error: type[Exception] = ReleaseFormatError,
                 not_found: type[Exception] = ReleaseNotFoundError) -> Mapping:
    """The JSON object ``query_id -> <values>`` of ``path`` (:func:`perckit.io.jsonio.read_json`, capped); another
    JSON value raises ``error``."""
    data = read_json(path, error, not_found, limit=MAX_JSON_BYTES)
    if not isinstance(data, Mapping):
        raise error(f"{str(path)!r}: expected a JSON object query_id -> {values}, got {type(data).__name__}")
    return data


def mask_file(repo_root: str | Path, mask_path: Any, where: str, allow_absolute_paths: bool = True) -> Path:
    """The PNG a prediction file names, as the card says: "paths resolve relative to ``--repo-root`` unless
    absolute". A relative path must stay under ``repo_root`` (:func:`perckit.io.paths.resolve_under`: no ``..``
    component, no drive letter, no symbolic link out of it); an absolute path is taken as it is (the prediction
    file is the user's own: its absolute paths name the user's files), unless ``allow_absolute_paths=False``,
    which refuses it (for a file from someone else). Either way the file is then read by :func:`png_mask` (a
    regular file under :data:`layout.MAX_MASK_PNG_BYTES`). Paths taken from release data never come here:
    they go through ``resolve_under``, which refuses an absolute path."""
    if isinstance(mask_path, str) and Path(mask_path).is_absolute():
        if "\x00" in mask_path:
            raise PredictionError(f"{where}: expected a path, got one with a NUL byte: {mask_path[:200]!r}")
        if len(mask_path) > MAX_PATH_CHARS:
            raise PredictionError(f"{where}: expected a path of at most {MAX_PATH_CHARS} characters, got {len(mask_path)}")
        if not allow_absolute_paths:
            raise PredictionError(
                f"{where}: expected a mask path relative to the repo root {str(repo_root)!r}, got the absolute path "
                f"{mask_path[:200]!r} (refused by allow_absolute_paths=False)"
            )
        return Path(mask_path)
    return resolve_under(repo_root, mask_path, where, PredictionError)


def _frame_items(value: Any, where: str) -> list[tuple[Any, Any]]:
    """``(frame key, mask path)`` pairs of one query, from either official shape."""
    if isinstance(value, Mapping) and "frames" in value:
        value = value["frames"]
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, list):
        items = []
        for i, item in enumerate(value):
            if not isinstance(item, Mapping) or "frame_id" not in item or "mask_path" not in item:
                raise PredictionError(f"{where}: item {i}: expected {{'frame_id', 'mask_path'}}, got {item!r}"[:300])
            items.append((item["frame_id"], item["mask_path"]))
        return items
    raise PredictionError(
        f"{where}: expected {{'frames': {{'<frame_id>': 'mask.png'}}}} or a list of {{'frame_id', 'mask_path'}}, "
        f"got {type(value).__name__}"
    )


def load_mask_predictions(path: str | Path, repo_root: str | Path = ".", allow_absolute_paths: bool = True) -> list[dict]:
    """Read an official mask-prediction JSON into ``mask_temporal`` prediction rows.

    Shapes: ``{query_id: {"frames": {"1": "mask.png"}}}`` or ``{query_id: [{"frame_id": 1, "mask_path": "..."}]}``.
    Relative paths resolve against ``repo_root`` and must stay under it; absolute paths are taken as they are
    (``allow_absolute_paths=False`` refuses them; see :func:`mask_file`); every PNG is read as a capped regular
    file; foreground is any pixel value > 0."""
    data = _json_object(path, "frames", PredictionError, InputNotFoundError)
    root = Path(repo_root)
    rows = []
    for qid, value in data.items():
        where = f"{str(path)!r}: query {qid!r}"
        frames: dict[int, dict] = {}
        for key, mask_path in _frame_items(value, where):
            fid = parse_int(key, f"{where}: frame key", PredictionError)
            if fid in frames:
                raise PredictionError(f"{where}: duplicate frame_id {fid}")
            if not isinstance(mask_path, str) or not mask_path:
                raise PredictionError(f"{where}: frame {fid}: expected a mask path string, got {mask_path!r}")
            p = mask_file(root, mask_path, f"{where}: frame {fid}: mask path", allow_absolute_paths)
            frames[fid] = {"frame_id": fid, "mask": png_mask(p, f"{where}: frame {fid}", PredictionError, InputNotFoundError)}
        rows.append({"query_id": str(qid), "frames": [frames[k] for k in sorted(frames)]})
    return rows


def load_track_predictions(path: str | Path) -> list[dict]:
    """Read ``{query_id: [ids]}`` or ``{query_id: {"target_track_ids": [...]}}`` into ``track_id`` prediction rows (ids as str)."""
    data = _json_object(path, "track ids", PredictionError, InputNotFoundError)
    return [
        {"query_id": str(qid), "target_track_ids": track_id_list(v, f"{str(path)!r}: query {qid!r}", PredictionError)}
        for qid, v in data.items()
    ]
