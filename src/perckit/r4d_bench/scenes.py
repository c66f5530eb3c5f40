"""One R4D-Bench scene: its COCO file and frames, its scene track JSON, and the ``frames`` config's tables (a
frame goes from its files to Arrow in this module: :func:`read_scene`, then :func:`frame_tables`).

Every [inferred] decision about a scene lives here in one named function: the frame id of a COCO image
(:func:`frame_id_of`), the track of an annotation (:func:`resolve_track_id`, where the COCO attribute and the
scene track JSON meet), the names and the shape of the scene track JSON (:func:`scene_track_json_names`,
:func:`scene_track_links`), the COCO file of a scene (:func:`find_coco_json`) and the folder of an image
(:func:`_image_name`).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .. import rle as rle_ops
from ..hf.builder import MEDIA_STORAGE, media_column
from ..errors import ReleaseFormatError, ReleaseNotFoundError, RLEError, check_choice
from ..errors import short_repr as _short
from ..io.images import check_encoded_image
from ..io.jsonio import parse_int, read_json
from ..io.paths import check_relative, resolve_under
from . import files
from .files import MAX_JSON_BYTES
from .layout import SCENE_ALIASES
from .layout import SCENES_DIR
from .layout import normalise_scene
from .layout import scene_folder

logger = logging.getLogger("perckit.r4d_bench.release")  # the release readers' one logger (its name is public)


# ---------------------------------------------------------------- COCO names [inferred]


def frame_id_of(image: Mapping[str, Any], pattern: str = r"(\d+)", where: str = "COCO image") -> int:
    """[inferred] frame id of a COCO image: first digit run of ``extra.name``, else of the file name's basename."""
    extra = image.get("extra") if isinstance(image.get("extra"), Mapping) else {}
    name = extra.get("name") or Path(str(image.get("file_name", ""))).name
    m = re.search(pattern, str(name))
    if not m:
        raise ReleaseFormatError(f"{where}: no frame id matching {pattern!r} in image name {name!r}")
    return int(m.group(1) if m.groups() else m.group(0))


#: [inferred] which source names the track of a COCO annotation when both do (option ``track_id_precedence``):
#: ``"coco"`` (default) the annotation's own attribute, ``"scene_json"`` the scene track JSON's link.
TRACK_ID_PRECEDENCES = ("coco", "scene_json")


def coco_track_id(annotation: Mapping[str, Any]) -> str | None:
    """[inferred] track id carried by a COCO annotation: ``track_id``, ``attributes.track_id``, ``instance_id``, else None."""
    if annotation.get("track_id") is not None:
        return str(annotation["track_id"])
    attrs = annotation.get("attributes")
    if isinstance(attrs, Mapping) and attrs.get("track_id") is not None:
        return str(attrs["track_id"])
    if annotation.get("instance_id") is not None:
        return str(annotation["instance_id"])
    return None


def resolve_track_id(
    annotation: Mapping[str, Any], scene_links: Mapping[int, str] | None = None, precedence: str = "coco",
    annotation_id: int | None = None,
) -> str | None:
    """[inferred] track id of a COCO annotation: the one place both sources meet.

    ``scene_links`` is the annotation id -> track id map of the scene track JSON (:func:`scene_track_links`).
    With ``precedence="coco"`` (default) the annotation's own attribute (:func:`coco_track_id`) wins and the
    scene track JSON fills the annotations that carry none; ``"scene_json"`` is the other way round. None when
    neither names a track.
    """
    return resolve_track_ids([annotation], [annotation_id], scene_links, precedence)[0]


def resolve_track_ids(
    annotations: Sequence[Mapping[str, Any]], annotation_ids: Sequence[int | None], scene_links: Mapping[int, str] | None = None,
    precedence: str = "coco",
) -> list[str | None]:
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
    names: list[str] = []
    for stem in stems:
        if f"{stem}.json" not in names:
            names.append(f"{stem}.json")
    return names


def find_scene_track_json(folder: Path, scene: str, aliases: Mapping[str, str] = SCENE_ALIASES) -> Path | None:
    """The scene track JSON of a scene folder, or None when the scene has none; more than one candidate is
    ambiguous and raises. The path goes through :func:`perckit.io.paths.resolve_under` (a symbolic link out of
    the scene folder is refused)."""
    where = f"scene folder {str(folder)!r}: scene track JSON"
    found = [n for n in scene_track_json_names(scene, aliases) if (folder / n).exists() or (folder / n).is_symlink()]
    if len(found) > 1:
        raise ReleaseFormatError(f"{where}: expected at most one of {scene_track_json_names(scene, aliases)}, got {found}")
    return resolve_under(folder, found[0], where) if found else None


def scene_track_links(data: Any, where: str) -> dict[int, str] | None:
    """[inferred] COCO annotation id -> track id, from a parsed scene track JSON.

    Neither the spec nor the card documents the fields of this file; this reads ``{"tracks": [...]}`` (or a
    bare list of tracks) where a track is an object with ``track_id`` (an int or a string) and
    ``annotation_ids`` (the COCO annotation ``id``s of its instance masks). A track without
    ``annotation_ids`` links nothing (other keys such as ``category`` are not read). A file of another
    shape returns None (the caller warns and keeps the COCO attributes); a ``tracks`` list that breaks these
    rules, or an annotation id claimed by two tracks, raises :class:`ReleaseFormatError` naming ``where``.
    """
    if isinstance(data, Mapping):
        if "tracks" not in data:
            return None
        data = data["tracks"]
        if not isinstance(data, list):
            raise ReleaseFormatError(f"{where}: tracks: expected a list of tracks, got {_short(data)}")
    elif not isinstance(data, list):
        return None
    links: dict[int, str] = {}
    for i, track in enumerate(data):
        twhere = f"{where}: tracks[{i}]"
        if not isinstance(track, Mapping):
            raise ReleaseFormatError(f"{twhere}: expected an object {{track_id, annotation_ids}}, got {_short(track)}")
        if "annotation_ids" not in track:
            continue
        tid = track.get("track_id")
        if isinstance(tid, bool) or not isinstance(tid, (int, str)) or tid == "":
            raise ReleaseFormatError(f"{twhere}.track_id: expected an int or a non-empty string, got {_short(tid)}")
        ids = track["annotation_ids"]
        if not isinstance(ids, list):
            raise ReleaseFormatError(f"{twhere}.annotation_ids: expected a list of COCO annotation ids, got {_short(ids)}")
        for j, aid in enumerate(ids):
            aid = parse_int(aid, f"{twhere}.annotation_ids[{j}]")
            if aid in links and links[aid] != str(tid):
                raise ReleaseFormatError(
                    f"{twhere}.annotation_ids[{j}]: expected each annotation in one track, got annotation {aid} "
                    f"in track {links[aid]!r} and in track {str(tid)!r}"
                )
            links[aid] = str(tid)
    return links


def read_scene_tracks(folder: Path, scene: str, aliases: Mapping[str, str] = SCENE_ALIASES) -> tuple[Path | None, dict[int, str]]:
    """The scene track JSON of a scene (path, annotation id -> track id); ``(None, {})`` when there is none.
    Read with :func:`perckit.io.jsonio.read_json` (repeated keys refused, a BOM skipped, capped)."""
    path = find_scene_track_json(folder, scene, aliases)
    if path is None:
        return None, {}
    links = scene_track_links(read_json(path, limit=MAX_JSON_BYTES), repr(str(path)))
    if links is None:
        logger.warning("R4D-Bench: %s: not a {'tracks': [...]} scene track JSON; track ids come from the COCO annotations only", path)
        return path, {}
    return path, links


# ---------------------------------------------------------------- scenes


@dataclass
class FrameInfo:
    frame_id: int
    coco_image_id: int
    #: Relative to the scene folder, resolved under it; None when :func:`read_scene` ran with ``image_names=False``.
    file_name: str | None
    height: int
    width: int


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

    @property
    def common_size(self) -> tuple[int, int] | None:
        sizes = {(f.height, f.width) for f in self.frames.values()}
        return next(iter(sizes)) if len(sizes) == 1 else None

    def frame_size(self, frame_id: int) -> tuple[int, int] | None:
        fr = self.frames.get(frame_id)
        return (fr.height, fr.width) if fr else self.common_size


def find_coco_json(scene_dir: Path, coco_json_name: str | None = None) -> Path:
    """[inferred] The scene's COCO file: ``coco_json_name`` where the scene has it, else the single ``_annotations*.coco.json``."""
    if coco_json_name and (scene_dir / coco_json_name).is_file():
        return resolve_under(scene_dir, coco_json_name, f"scene folder {str(scene_dir)!r}: option coco_json_name")
    matches = sorted(scene_dir.glob("_annotations*.coco.json"))
    if len(matches) != 1:
        if coco_json_name:
            raise ReleaseNotFoundError(
                f"scene folder {str(scene_dir)!r}: no {coco_json_name!r} (coco_json_name) and not exactly one "
                f"'_annotations*.coco.json' to fall back on: found {[m.name for m in matches]}"
            )
        found = [m.name for m in matches]
        raise ReleaseNotFoundError(
            f"scene folder {str(scene_dir)!r}: expected exactly one '_annotations*.coco.json', found {found}; "
            "pick one with the config option coco_json_name"
        )
    return resolve_under(scene_dir, matches[0].name, f"scene folder {str(scene_dir)!r}: COCO file")


def read_scene(
    root: Path, scene: str, coco_json_name: str | None = None, frame_id_pattern: str = r"(\d+)",
    read_tracks: bool = False, aliases: Mapping[str, str] = SCENE_ALIASES, image_names: bool = True,
) -> SceneInfo:
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
    for i, img in enumerate(coco["images"]):
        where = f"{str(coco_path)!r}: images[{i}]"
        if not isinstance(img, Mapping):
            raise ReleaseFormatError(f"{where}: expected an object, got {_short(img)}")
        fid = frame_id_of(img, frame_id_pattern, where)
        if fid in info.frames:
            raise ReleaseFormatError(f"{where}: frame id {fid} appears twice in the scene {scene!r}")
        try:
            h, w, iid = int(img["height"]), int(img["width"]), int(img["id"])
        except (KeyError, TypeError, ValueError):
            raise ReleaseFormatError(f"{where}: expected int 'id', 'height' and 'width'") from None
        name = _image_name(folder, real, img.get("file_name"), f"{where}.file_name") if real else None
        info.frames[fid] = FrameInfo(fid, iid, name, h, w)
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


# ---------------------------------------------------------------- the frames tables


def _json_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _annotation_int(a: Mapping, key: str, where: str) -> int:
    """An integer field of a COCO annotation (default 0; digit strings accepted); anything else raises naming it."""
    return parse_int(a.get(key, 0), f"{where}: annotation {a.get('id')!r}: {key!r}")


def _annotation_numbers(values: Any, where: str) -> list[float]:
    """A list of numbers (bbox, area) as floats; anything ``float()`` refuses raises naming ``where``."""
    if not isinstance(values, (list, tuple)):
        raise ReleaseFormatError(f"{where}: expected a list of numbers, got {_short(values)}")
    try:
        out = [float(v) for v in values]
    except (TypeError, ValueError, OverflowError):
        raise ReleaseFormatError(f"{where}: expected numbers, got {_short(values)}") from None
    if not all(np.isfinite(out)) or any(isinstance(v, bool) for v in values):
        raise ReleaseFormatError(f"{where}: expected finite numbers, got {_short(values)}")
    return out


def check_image_bytes(data: bytes, path: Path, where: str) -> None:
    """A frame image that is stored as bytes: its header must open and a JPEG / PNG must not be cut short
    (:func:`perckit.io.images.check_encoded_image`; the image is not decoded)."""
    check_encoded_image(data, f"{where}: image file {str(path)!r}")


def read_ahead(paths: Sequence[str | Path]) -> Iterator[tuple[Path, bytes | Exception]]:
    """The frame images' bytes, each a regular file under :data:`files.MAX_IMAGE_BYTES` (:func:`files.read_ahead`)."""
    return files.read_ahead(paths, files.MAX_IMAGE_BYTES)


def frame_image_paths(info: SceneInfo) -> list[Path]:
    """The scene's frame image files in the order :func:`frame_tables` reads them (by frame id)."""
    names = [info.frames[fid].file_name for fid in sorted(info.frames)]
    if None in names:
        raise ValueError(f"scene {info.name!r} was read with image_names=False: its frame images cannot be read")
    return [info.folder / name for name in names]


def _check_track_links(info: SceneInfo, annotations: Sequence[Mapping], precedence: str) -> None:
    """Warn (once per scene) about scene track JSON links to unknown annotations and about annotations whose
    COCO attribute and scene track JSON name different tracks (``precedence`` says which one is kept)."""
    if not info.track_links:
        return
    known: dict[int, Mapping] = {}
    for a in annotations:
        if isinstance(a, Mapping):
            try:
                known[parse_int(a.get("id"), "annotation id")] = a
            except ReleaseFormatError:
                continue  # reported with its frame by frame_tables
    unknown = sorted(set(info.track_links) - set(known))
    if unknown:
        logger.warning("R4D-Bench: %s links %d annotation id(s) that %s does not have, e.g. %s",
                       info.track_json_path, len(unknown), info.coco_path.name, unknown[:5])
    clash = [(aid, own, info.track_links[aid]) for aid, a in known.items()
             if aid in info.track_links and (own := coco_track_id(a)) is not None and own != info.track_links[aid]]
    if clash:
        aid, own, linked = clash[0]
        logger.warning("R4D-Bench: scene %r: %d annotation(s) name another track in %s than in %s (e.g. annotation %d: "
                       "%r vs %r); keeping the %s one (track_id_precedence=%r)", info.name, len(clash), info.coco_path.name,
                       info.track_json_path.name if info.track_json_path else "the scene track JSON", aid, own, linked,
                       "COCO" if precedence == "coco" else "scene track JSON", precedence)


@dataclass
class SceneAnnotations:
    """A scene's annotations as :func:`frame_tables` reads them (:func:`scene_annotations`): category names by id, annotations by COCO image id, and the ``id()`` of the
    RLE segmentations :func:`perckit.rle.valid_many` accepted (checked in one scan for the scene)."""

    cats: dict
    by_image: dict
    checked: AbstractSet[int]


def scene_annotations(info: SceneInfo, track_id_precedence: str = "coco") -> SceneAnnotations:
    """Check the scene's COCO lists, group its annotations and warn about its track links (once per scene)."""
    check_choice("track_id_precedence", track_id_precedence, TRACK_ID_PRECEDENCES)
    coco = info.coco
    for key in ("categories", "annotations"):
        if not isinstance(coco.get(key, []), list):
            raise ReleaseFormatError(f"{str(info.coco_path)!r}: expected {key!r} to be a list, got {_short(coco.get(key))}")
    hashable = (int, str)
    cats = {c.get("id"): c.get("name") for c in coco.get("categories", []) if isinstance(c, Mapping) and isinstance(c.get("id"), hashable)}
    by_image: dict[int, list[Mapping]] = {}
    for a in coco.get("annotations", []):
        if isinstance(a, Mapping) and isinstance(a.get("image_id"), hashable):
            by_image.setdefault(a.get("image_id"), []).append(a)
    _check_track_links(info, coco.get("annotations", []), track_id_precedence)
    rles = [seg for a in coco.get("annotations", []) if type(a) is dict and type(seg := a.get("segmentation")) is dict]
    checked = {id(seg) for seg, ok in zip(rles, rle_ops.valid_many(rles)) if ok}
    return SceneAnnotations(cats, by_image, checked)


def frame_images(
    info: SceneInfo, images: Iterator[tuple[Path, bytes | Exception]] | None = None
) -> Iterator[tuple[int, FrameInfo, Path, bytes, str]]:
    """``(frame id, frame, image path, image bytes, where)`` of every COCO image of a scene, by frame id, each
    image checked (:func:`check_image_bytes`); an image that cannot be read raises naming its COCO image.
    ``images``: the ``(path, bytes or error)`` of :func:`frame_image_paths`, in order (default: read here by
    :func:`read_ahead`)."""
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
        if isinstance(data, Exception):  # not a regular file, or over files.MAX_IMAGE_BYTES
            raise ReleaseFormatError(f"{where}: {data}")
        check_image_bytes(data, path, where)
        yield fid, fr, path, data, where


def scenes_frame_tables(
    infos: Sequence[SceneInfo], track_id_precedence: str, schema: pa.Schema, rows_per_table: int = 64
) -> Iterator[tuple[str, pa.Table]]:
    """:func:`frame_tables` of every scene in turn, the images read through one :func:`read_ahead` across all
    of them (the read-ahead window runs on into the next scene instead of starting empty)."""
    per_scene = [frame_image_paths(info) for info in infos]
    images = read_ahead([p for paths in per_scene for p in paths])
    for info, paths in zip(infos, per_scene):
        yield from frame_tables(info, track_id_precedence, schema, rows_per_table, itertools.islice(images, len(paths)))


def frame_tables(
    info: SceneInfo, track_id_precedence: str = "coco", schema: pa.Schema | None = None, rows_per_table: int = 64,
    images: Iterator[tuple[Path, bytes | Exception]] | None = None,
) -> Iterator[tuple[str, pa.Table]]:
    """The ``frames`` rows of a scene (one per COCO image, by frame id) as tables of ``schema`` (the ``frames``
    features' Arrow schema), up to ``rows_per_table`` frames each, keyed ``"<scene>/<frame_id:06d>"`` by their
    first row. Each table is made column by column (no Python dict per row or per annotation): see
    :func:`_annotation_column`. An annotation's ``track_id`` comes from :func:`resolve_track_ids` (its COCO
    attribute and the scene track JSON links read by :func:`read_scene` with ``read_tracks=True``;
    ``track_id_precedence`` picks the winner). ``schema``: default the ``frames`` features'. ``images``: as for
    :func:`frame_images`."""
    if schema is None:
        from .features import frame_features

        schema = frame_features().arrow_schema
    scene = scene_annotations(info, track_id_precedence)
    cat_names = {k: _json_text(v) for k, v in scene.cats.items()}
    batch: list = []
    for item in frame_images(info, images):
        batch.append(item)
        if len(batch) == rows_per_table:
            yield _batch_table(info, scene, cat_names, batch, track_id_precedence, schema)
            batch = []
    if batch:
        yield _batch_table(info, scene, cat_names, batch, track_id_precedence, schema)


def _batch_table(info: SceneInfo, scene: SceneAnnotations, cat_names: dict, batch: list, precedence: str,
                 schema: pa.Schema) -> tuple[str, pa.Table]:
    frames = [(fr, scene.by_image.get(fr.coco_image_id, []), where) for _, fr, _, _, where in batch]
    annotations = _annotation_column(frames, cat_names, info.track_links, precedence, scene.checked, schema.field("annotations").type)
    media = [{"bytes": data, "path": fr.file_name} for _, fr, _, data, _ in batch]
    image = media_column(media)
    if image is None:  # more than 2 GiB of images in one table: Arrow's own conversion (chunked) or its error
        image = pa.chunked_array([pa.array([m], MEDIA_STORAGE) for m in media], MEDIA_STORAGE)
    values = {
        "scene": [info.name] * len(batch),
        "frame_id": [fid for fid, *_ in batch],
        "image_file_name": [fr.file_name for _, fr, *_ in batch],
        "coco_image_id": [fr.coco_image_id for _, fr, *_ in batch],
        "height": [fr.height for _, fr, *_ in batch],
        "width": [fr.width for _, fr, *_ in batch],
    }
    columns = [image if f.name == "image" else annotations if f.name == "annotations" else pa.array(values[f.name], f.type) for f in schema]
    return f"{info.name}/{batch[0][0]:06d}", pa.Table.from_arrays(columns, schema=schema)


class _FirstError:
    """The error a row-by-row reading would meet first: the least ``(annotation index, field rank)`` noted
    (the annotations of a batch in row order, each frame's by id; ranks: the frame's ids -1, segmentation 0,
    category_id 1, bbox 2, area 3)."""

    def __init__(self) -> None:
        self.key: tuple[int, int] | None = None
        self.error: Exception | None = None

    def note(self, index: int, rank: int, error: Exception) -> None:
        if self.key is None or (index, rank) < self.key:
            self.key, self.error = (index, rank), error

    def before(self, index: int) -> bool:
        """Whether an error was noted at an annotation before ``index`` (a later check need not look past it)."""
        return self.key is not None and self.key[0] < index


def _annotation_column(
    frames: Sequence[tuple[FrameInfo, Sequence[Mapping], str]], cat_names: dict, links: Mapping[int, str], precedence: str,
    checked: AbstractSet[int], list_type: pa.ListType,
) -> pa.Array:
    """The ``annotations`` column of a batch of frames (``(frame, its COCO annotations, where)``): per frame a
    list of ``{annotation_id, category_id, category_name, track_id, bbox_xywh, area, iscrowd, mask}`` by
    annotation id (a missing ``id`` / ``category_id`` is 0).

    Each field of every annotation of the batch is one list, checked at once by its values' types (``int``
    ids, lists of finite ``float`` / ``int`` numbers): what a release holds. Anything else in a field (a digit
    string, a tuple, a bool, NaN...) goes value by value through the field's converter (:func:`parse_int`,
    :func:`_annotation_numbers`, :func:`perckit.rle.to_rle`), which converts it or raises naming the frame
    (``where``), the annotation and the field; the error raised is the first in row order
    (:class:`_FirstError`). ``cat_names``: the scene's category names as row text; ``links``: the scene
    track JSON's."""
    first = _FirstError()
    flat: list[Mapping] = []
    ids: list[int] = []
    wheres: list[str] = []
    offsets = [0]
    usable = []
    for fr, anns, where in frames:
        keys = [a.get("id", 0) for a in anns]
        if not set(map(type, keys)) <= _INT:
            try:
                keys = [_annotation_int(a, "id", where) for a in anns]
            except ReleaseFormatError as e:  # raised before any annotation of this frame: later frames are not read
                first.note(len(flat), -1, e)
                break
        order = sorted(range(len(anns)), key=keys.__getitem__) if len(anns) > 1 else range(len(anns))
        flat.extend(anns[i] for i in order)
        ids.extend(keys[i] for i in order)
        wheres.extend([where] * len(anns))
        offsets.append(len(flat))
        usable.append(fr)
    n = len(flat)

    def where_of(i: int) -> str:  # (an error's: as the rows name an annotation)
        return f"{wheres[i]}: annotation {flat[i].get('id')}"

    masks = _mask_column(usable, flat, offsets, checked, where_of, first, list_type.value_type.field("mask").type)
    raw_cids = [a.get("category_id", 0) for a in flat]
    cids = raw_cids
    if not set(map(type, cids)) <= _INT:
        cids = list(cids)
        for i, a in enumerate(flat):
            if first.before(i):
                break
            try:
                cids[i] = _annotation_int(a, "category_id", wheres[i])
            except ReleaseFormatError as e:
                first.note(i, 1, e)
                break
    boxes = [a.get("bbox") or [] for a in flat]
    coords, box_lengths = _number_lists(boxes, lambda i: f"{where_of(i)}.bbox", 2, first)
    raw_areas = [a.get("area") for a in flat]
    present = [i for i, v in enumerate(raw_areas) if v is not None]
    area_values, _ = _number_lists([[raw_areas[i]] for i in present], lambda k: f"{where_of(present[k])}.area", 3, first, present)
    if first.error is not None:
        raise first.error
    areas: list = [None] * n
    for i, v in zip(present, area_values):
        areas[i] = v
    struct_type = list_type.value_type
    types = {f.name: f.type for f in struct_type}
    if cids is raw_cids:  # (all ints: each its own key)
        names = list(map(cat_names.get, cids))
    else:  # the category of the value as given (a digit string is looked up as a string)
        names = [cat_names.get(c) if isinstance(c, (int, str)) else None for c in (a.get("category_id") for a in flat)]
    struct = pa.StructArray.from_arrays([
        pa.array(ids, types["annotation_id"]),
        pa.array(cids, types["category_id"]),
        pa.array(names, types["category_name"]),
        pa.array(resolve_track_ids(flat, ids, links, precedence), types["track_id"]),
        pa.ListArray.from_arrays(pa.array([0, *itertools.accumulate(box_lengths)], pa.int32()),
                                 pa.array(coords, types["bbox_xywh"].value_type), type=types["bbox_xywh"]),
        pa.array(areas, types["area"]),
        pa.array([bool(a.get("iscrowd", 0)) for a in flat], types["iscrowd"]),
        masks,
    ], fields=list(struct_type))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), struct, type=list_type)


_INT = frozenset((int,))
_NUMBER = frozenset((float, int))


def _number_lists(
    lists: list, where_of, rank: int, first: _FirstError, index: Sequence[int] | None = None
) -> tuple[list[float], list[int]]:
    """The numbers of ``lists`` (each a bbox, or an area as a one-item list) as one flat list of floats, and each
    list's length. Lists of finite ``float`` / ``int`` values are converted at once; anything else goes list by
    list through :func:`_annotation_numbers` (which converts digit strings and tuples, or raises naming
    ``where_of(k)``; the first such error is noted in ``first`` at annotation ``index[k]`` (default ``k``))."""
    flat = list(itertools.chain.from_iterable(lists)) if set(map(type, lists)) <= {list} else None
    if flat is not None and set(map(type, flat)) <= _NUMBER:
        try:
            out = list(map(float, flat))
        except OverflowError:  # an int too large for a float: named below
            out = None
        if out is not None and all(map(math.isfinite, out)):
            return out, list(map(len, lists))
    out, lengths = [], []
    for k, values in enumerate(lists):
        i = index[k] if index is not None else k
        if first.before(i):
            break
        try:
            numbers = _annotation_numbers(values, where_of(k))
        except ReleaseFormatError as e:
            first.note(i, rank, e)
            break
        out.extend(numbers)
        lengths.append(len(numbers))
    return out, lengths


def _mask_column(
    frames: Sequence[FrameInfo], flat: Sequence[Mapping], offsets: Sequence[int], checked: AbstractSet[int], where_of,
    first: _FirstError, mask_type: pa.StructType,
) -> pa.StructArray | None:
    """Each annotation's ``segmentation`` as ``{size, counts}`` of ``mask_type`` (null when absent or empty): an
    RLE dict that the scene's scan accepted (``checked``) of the frame's size as it is; the lists of polygons
    of every frame of one size rasterised by one :func:`perckit.rle.polygon_unions` call (its guard decides;
    when it refuses, the first refused annotation is found by :func:`perckit.rle.to_rle`, which names it);
    anything else through :func:`perckit.rle.to_rle` (``size`` = the frame's), which converts or raises naming
    the annotation's ``segmentation``. Errors are noted in ``first``; None when one was."""
    masks: list = [None] * len(flat)
    pending: dict[tuple[int, int], list[int]] = {}  # frame size -> the annotations whose polygons to rasterise
    stop = False
    for fr, start, end in zip(frames, offsets, offsets[1:]):
        h, w = fr.height, fr.width
        fits = h > 0 and w > 0 and h * w <= rle_ops.MAX_PIXELS  # else rle.to_rle names the frame size
        for i in range(start, end):
            seg = flat[i].get("segmentation")
            if seg is None or (type(seg) in (list, dict) and not seg):
                continue
            if fits and type(seg) is list and all(type(p) is list for p in seg):
                pending.setdefault((h, w), []).append(i)
            elif fits and id(seg) in checked and seg["size"] == [h, w]:  # what rle.to_rle returns for it
                masks[i] = (h, w, seg["counts"])
            else:
                try:
                    rle = rle_ops.to_rle(seg, size=(h, w), where=f"{where_of(i)}.segmentation")
                except (RLEError, ReleaseFormatError) as e:
                    first.note(i, 0, e)
                    stop = True
                    break
                masks[i] = (rle["size"][0], rle["size"][1], rle["counts"])
        if stop:
            break
    for (h, w), items in pending.items():
        try:
            unions = rle_ops.polygon_unions([flat[i]["segmentation"] for i in items], h, w)
        except RLEError as batch_error:
            for i in items:  # the first refused annotation, named as rle.to_rle names it
                try:
                    rle_ops.to_rle(flat[i]["segmentation"], size=(h, w), where=f"{where_of(i)}.segmentation")
                except (RLEError, ReleaseFormatError) as e:
                    first.note(i, 0, e)
                    break
            else:
                first.note(items[0], 0, batch_error)
            continue
        for i, one in zip(items, unions):
            masks[i] = (h, w, one["counts"].decode("ascii"))
    if first.error is not None:
        return None
    null = [m is None for m in masks]
    sizes = pa.array([None if m is None else [m[0], m[1]] for m in masks], mask_type.field("size").type)
    counts = pa.array([None if m is None else m[2] for m in masks], mask_type.field("counts").type)
    return pa.StructArray.from_arrays([sizes, counts], fields=list(mask_type), mask=pa.array(null, pa.bool_()))
