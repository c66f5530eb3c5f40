"""One R4D-Bench scene: its COCO file and frames, its scene track JSON, and the rows of the ``frames`` config.

Every [inferred] decision about a scene lives here in one named function: the frame id of a COCO image
(:func:`frame_id_of`), the track of an annotation (:func:`resolve_track_id`, where the COCO attribute and the
scene track JSON meet), the names and the shape of the scene track JSON (:func:`scene_track_json_names`,
:func:`scene_track_links`), the COCO file of a scene (:func:`find_coco_json`) and the folder of an image
(:func:`_resolve_image_name`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import rle as rle_ops
from ..errors import ReleaseFormatError, ReleaseNotFoundError, check_choice
from ..errors import short_repr as _short
from ..images import check_encoded_image
from ..jsonio import parse_int, read_json
from ..paths import resolve_under
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
    ambiguous and raises. The path goes through :func:`perckit.paths.resolve_under` (a symbolic link out of
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
    Read with :func:`perckit.jsonio.read_json` (repeated keys refused, a BOM skipped, capped)."""
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
    plain_dirs = image_names and _plain_scene_dirs(folder)
    listing = _scene_listing(folder) if plain_dirs else None
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
        name = _plain_image_name(folder, img.get("file_name"), listing) if plain_dirs else None
        if name is None and image_names:  # anything but a plain file name in plain folders: the reference rule and its errors
            name = _resolve_image_name(folder, img.get("file_name"), f"{where}.file_name")
        info.frames[fid] = FrameInfo(fid, iid, name, h, w)
    if read_tracks:
        info.track_json_path, info.track_links = read_scene_tracks(folder, scene, aliases)
    return info


def _resolve_image_name(folder: Path, file_name: object, where: str = "COCO image file_name") -> str:
    """[inferred] ``file_name`` resolves under ``images/`` first, then under the scene folder; either way it
    must stay inside the scene folder (:func:`perckit.paths.resolve_under`: no absolute path, no ``..``, no
    symbolic link out of it), else :class:`ReleaseFormatError` naming ``where``."""
    resolve_under(folder, file_name, where)
    if resolve_under(folder / "images", file_name, where).exists():  # a FIFO there is refused by the reader
        return f"images/{file_name}"
    return str(file_name)


#: A file name of one component that :func:`perckit.paths.check_relative` accepts as it is (no separator, no
#: ``.`` / ``..``, no NUL, not absolute, short): what real COCO files hold.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,254}")


def _plain_scene_dirs(folder: Path) -> bool:
    """True when neither the scene folder's ``images/`` nor the scene folder itself resolves anywhere unexpected:
    ``images`` is absent or a real folder (not a symbolic link), so that ``realpath(folder/images/x)`` is
    ``realpath(folder)/images/x`` for any ``x`` that is not itself a link (what :func:`_plain_image_name` relies on)."""
    try:
        st = os.lstat(folder / "images")
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode)


def _scene_listing(folder: Path) -> tuple[dict[str, bool], set[str]] | None:
    """What :func:`_plain_image_name` looks up instead of two ``lstat`` calls per frame: the entries of the scene's
    ``images/`` folder (name -> is a symbolic link) and the case-folded names in the scene folder itself; None
    when either cannot be listed."""
    try:
        with os.scandir(folder / "images") as it:
            images = {e.name: e.is_symlink() for e in it}
        with os.scandir(folder) as it:
            top = {e.name.casefold() for e in it}
    except OSError:
        return None
    return images, top


def _plain_image_name(folder: Path, file_name: object, listing: tuple[dict[str, bool], set[str]] | None = None) -> str | None:
    """:func:`_resolve_image_name` for the common case, without resolving every path component: a plain file
    name (:data:`_PLAIN_NAME`) whose ``images/<name>`` and ``<name>`` in the scene folder are not symbolic
    links stays inside the folder by construction (the folder's ``images`` is checked by
    :func:`_plain_scene_dirs`), so only one ``lstat`` per candidate decides. None for anything else (a link,
    another name, an unreadable entry): the caller then takes the reference rule, which raises its errors."""
    if type(file_name) is not str or not _PLAIN_NAME.fullmatch(file_name):
        return None
    if listing is not None and listing[0].get(file_name) is False and file_name.casefold() not in listing[1]:
        # (:func:`_scene_listing`) ``images/<name>`` is listed, not a link, and no entry of the scene folder can be
        # ``<name>`` even on a case-insensitive file system: what the two lstat calls below would decide
        return f"images/{file_name}"
    found = []
    base = os.fspath(folder)
    for candidate in (os.path.join(base, "images", file_name), os.path.join(base, file_name)):
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            found.append(False)
            continue
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return None
        found.append(True)
    return f"images/{file_name}" if found[0] else file_name


# ---------------------------------------------------------------- frame rows


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
    (:func:`perckit.images.check_encoded_image`; the image is not decoded)."""
    check_encoded_image(data, f"{where}: image file {str(path)!r}")


def read_ahead(paths: Sequence[str | Path]) -> Iterator[tuple[Path, bytes | Exception]]:
    """The frame images' bytes, each a regular file under :data:`files.MAX_IMAGE_BYTES` (:func:`files.read_ahead`)."""
    return files.read_ahead(paths, files.MAX_IMAGE_BYTES)


def frame_image_paths(info: SceneInfo) -> list[Path]:
    """The scene's frame image files in the order :func:`frame_rows` reads them (by frame id)."""
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
                continue  # reported with its frame by frame_rows
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
    """A scene's annotations as :func:`frame_rows` and :func:`perckit.r4d_bench.frame_tables.frame_tables` read
    them (:func:`scene_annotations`): category names by id, annotations by COCO image id, and the ``id()`` of the
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


def frame_rows(
    info: SceneInfo, track_id_precedence: str = "coco", images: Iterator[tuple[Path, bytes | Exception]] | None = None
) -> Iterator[tuple[str, dict]]:
    """Yield ``("<scene>/<frame_id:06d>", row)`` for every COCO image of a scene, by frame id: the reference
    rule (every check, every message) of the ``frames`` rows, which the builder writes through
    :func:`perckit.r4d_bench.frame_tables.frame_tables` (the same rows as Arrow tables; the tests compare).

    An annotation's ``track_id`` comes from :func:`resolve_track_id` (its COCO attribute and the scene track
    JSON links read by :func:`read_scene` with ``read_tracks=True``; ``track_id_precedence`` picks the winner).
    ``images``: as for :func:`frame_images`."""
    scene = scene_annotations(info, track_id_precedence)
    for fid, fr, _path, data, where in frame_images(info, images):
        anns = reference_annotations(info, scene, fr, track_id_precedence, where)
        yield f"{info.name}/{fid:06d}", _frame_row(info, fid, fr, data, anns)


def reference_annotations(info: SceneInfo, scene: SceneAnnotations, fr: FrameInfo, track_id_precedence: str, where: str) -> list[dict]:
    """The ``annotations`` of one frame row, by annotation id, every value checked (errors name ``where``)."""
    hashable = (int, str)
    cats = scene.cats
    anns = []
    for a in sorted(scene.by_image.get(fr.coco_image_id, []), key=lambda a: _annotation_int(a, "id", where)):
        awhere = f"{where}: annotation {a.get('id')}"
        seg = a.get("segmentation")
        mask = None
        if seg not in (None, [], {}):
            mask = rle_ops.to_rle(seg, size=(fr.height, fr.width), where=f"{awhere}.segmentation")
        anns.append({
            "annotation_id": _annotation_int(a, "id", where),
            "category_id": _annotation_int(a, "category_id", where),
            "category_name": _json_text(cats.get(a.get("category_id")) if isinstance(a.get("category_id"), hashable) else None),
            "track_id": resolve_track_id(a, info.track_links, track_id_precedence, _annotation_int(a, "id", where)),
            "bbox_xywh": _annotation_numbers(a.get("bbox") or [], f"{awhere}.bbox"),
            "area": _annotation_numbers([a["area"]], f"{awhere}.area")[0] if a.get("area") is not None else None,
            "iscrowd": bool(a.get("iscrowd", 0)),
            "mask": mask,
        })
    return anns


def _frame_row(info: SceneInfo, fid: int, fr: FrameInfo, data: bytes, anns: list[dict]) -> dict:
    return {
        "scene": info.name,
        "frame_id": fid,
        "image": {"bytes": data, "path": fr.file_name},
        "image_file_name": fr.file_name,
        "coco_image_id": fr.coco_image_id,
        "height": fr.height,
        "width": fr.width,
        "annotations": anns,
    }
