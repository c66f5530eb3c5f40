"""Readers of the R4D-Bench release layout (JSON + PNG folders) and the row builders.

R4D-Bench here is the referring-segmentation benchmark on dynamic 4D scenes
(Hub: ``LiYacheng/r4d-bench-qa``), not NVIDIA's region-prompted VQA benchmark
of the same name. Every decision marked [inferred] in the spec lives in one
named function or option of this module.
"""

from __future__ import annotations

import io
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from .. import rle as rle_ops
from ..errors import ReleaseFormatError, ReleaseNotFoundError, RLEError, check_choice
from ..images import check_encoded_image, mask_foreground
from ..errors import short_repr as _short
from ..jsonio import parse_int, read_json, require_file
from ..paths import read_regular_file, resolve_under
from . import files
from .files import MAX_JSON_BYTES, MAX_MASK_PNG_BYTES

logger = logging.getLogger(__name__)

SCENES = (
    "americano", "coffee_martini", "cook_spinach", "cut_lemon", "cut_roasted_beef", "espresso",
    "flame_salmon", "flame_steak", "keyboard", "sear_steak", "split_cookie", "torchchocolate",
)
#: [inferred] upstream capture spellings -> release folder names.
SCENE_ALIASES = {"torchocolate": "torchchocolate", "cut-lemon1": "cut_lemon", "cut_lemon1": "cut_lemon"}

QUERIES_META = "evaluation/R4D-Bench_queries.json"
TRACK_GT = "evaluation/R4D-Bench_predictions.json"
DENSE_GT_STEM = {
    "all_queries": "scripts/new_predictions_ground_truth_all_queries",
    "subset_36": "scripts/new_predictions_ground_truth_final",
}
SCENES_DIR = "data/scenes"
MASK_SOURCES = ("segmentation", "mask_image")
KNOWN_QUERY_KEYS = frozenset({
    "query_id", "scene", "text_en", "text_zh", "target_track_ids", "target_count", "query_type",
    "requires_motion_understanding", "temporal_relation", "expected_temporal_anchor", "distractor", "note",
})
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


# ---------------------------------------------------------------- naming


def normalise_scene(name: str, aliases: Mapping[str, str] = SCENE_ALIASES) -> str:
    """Folder spelling of a scene name: aliases first, then ``-`` -> ``_``."""
    name = aliases.get(name, name)
    name = name.replace("-", "_")
    return aliases.get(name, name)


def scene_from_query_id(query_id: str, aliases: Mapping[str, str] = SCENE_ALIASES) -> str:
    """``cook-spinach_q3`` -> ``cook_spinach``: prefix before the last ``_``, hyphens to underscores, aliases."""
    return normalise_scene(query_id.rsplit("_", 1)[0], aliases)


def dense_gt_file(config_name: str, mask_source: str) -> str:
    """The dense GT JSON a query config reads (the ``_with_paths`` file for PNG masks)."""
    check_choice("mask_source", mask_source, MASK_SOURCES)
    stem = DENSE_GT_STEM[config_name]
    return f"{stem}_with_paths.json" if mask_source == "mask_image" else f"{stem}.json"


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
    check_choice("track_id_precedence", precedence, TRACK_ID_PRECEDENCES)
    own = coco_track_id(annotation)
    linked = scene_links.get(annotation_id) if scene_links and annotation_id is not None else None
    if precedence == "scene_json":
        return linked if linked is not None else own
    return own if own is not None else linked


# ---------------------------------------------------------------- release files


def check_release_root(root: str | Path, required: Sequence[str] = ("evaluation", "scripts")) -> Path:
    root = Path(root)
    if not root.is_dir():
        raise ReleaseNotFoundError(
            f"R4D-Bench release folder {str(root)!r} does not exist; pass data_dir=<the release root> "
            "(the folder that holds evaluation/, scripts/ and data/)"
        )
    for sub in required:
        if not (root / sub).is_dir():
            raise ReleaseNotFoundError(
                f"R4D-Bench release {str(root)!r}: expected the folder {sub + '/'!r} under the release root, not found"
            )
    return root


def load_queries_meta(path: str | Path) -> dict[str, dict]:
    """``R4D-Bench_queries.json``: an array of entries or ``{"queries": [...]}``; keyed by ``query_id``."""
    data = read_json(path, limit=MAX_JSON_BYTES)
    if isinstance(data, Mapping) and isinstance(data.get("queries"), list):
        data = data["queries"]
    if not isinstance(data, list):
        raise ReleaseFormatError(f"{str(path)!r}: expected a JSON array of queries (or an object with 'queries'), got {type(data).__name__}")
    out: dict[str, dict] = {}
    for i, entry in enumerate(data):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("query_id"), str):
            raise ReleaseFormatError(f"{str(path)!r}: entry {i}: expected an object with a string 'query_id', got {_short(entry)}")
        qid = entry["query_id"]
        if qid in out:
            raise ReleaseFormatError(f"{str(path)!r}: duplicate query_id {qid!r}")
        out[qid] = dict(entry)
    return out


def load_track_gt(path: str | Path) -> dict[str, list[str]]:
    """``R4D-Bench_predictions.json``: ``{query_id: [ids]}`` or ``{query_id: {"target_track_ids": [...]}}``."""
    data = read_json(path, limit=MAX_JSON_BYTES)
    if not isinstance(data, Mapping):
        raise ReleaseFormatError(f"{str(path)!r}: expected a JSON object query_id -> target_track_ids, got {type(data).__name__}")
    return {str(k): track_id_list(v, f"{path}: {k!r}") for k, v in data.items()}


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


def load_dense_gt(path: str | Path) -> list[dict]:
    """Dense GT: an array of entries or an object keyed by ``query_id``. Checks ids, ``ground_truth`` and frame ids."""
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
    seen: set[str] = set()
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("query_id"), str):
            raise ReleaseFormatError(f"{str(path)!r}: entry {i}: expected an object with a string 'query_id', got {_short(entry)}")
        qid = entry["query_id"]
        where = f"{str(path)!r}: query {qid!r}"
        if qid in seen:
            raise ReleaseFormatError(f"{str(path)!r}: duplicate query_id {qid!r}")
        seen.add(qid)
        gt = entry.get("ground_truth")
        if not isinstance(gt, Mapping):
            raise ReleaseFormatError(f"{where}: expected a 'ground_truth' object, got {_short(gt)}")
        frames = gt.get("frames") or []
        if not isinstance(frames, list):
            raise ReleaseFormatError(f"{where}: expected 'ground_truth.frames' to be a list, got {_short(frames)}")
        fids: set[int] = set()
        norm_frames = []
        for j, fr in enumerate(frames):
            if not isinstance(fr, Mapping):
                raise ReleaseFormatError(f"{where}: frames[{j}]: expected an object, got {_short(fr)}")
            fid = parse_int(fr.get("frame_id"), f"{where}: frames[{j}].frame_id")
            if fid in fids:
                raise ReleaseFormatError(f"{where}: duplicate frame_id {fid} in ground_truth.frames")
            fids.add(fid)
            masks = fr.get("masks") or []
            if not isinstance(masks, list):
                raise ReleaseFormatError(f"{where}: frame {fid}: expected 'masks' to be a list, got {_short(masks)}")
            norm_frames.append({**fr, "frame_id": fid, "masks": masks})
        existence = [parse_int(f, f"{where}: ground_truth.existence_frames") for f in (gt.get("existence_frames") or [])]
        out.append({**entry, "ground_truth": {**gt, "frames": sorted(norm_frames, key=lambda f: f["frame_id"]), "existence_frames": existence}})
    return out


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
    file_name: str  # relative to the scene folder
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


def scene_folder(root: Path, scene: object, where: str) -> Path:
    """``<root>/data/scenes/<scene>`` for a scene name taken from the release (a query's ``scene``, its id, a
    folder of ``data/scenes/``): refused when it leaves ``data/scenes/`` (``..``, an absolute path, a
    symbolic link out of the release)."""
    return resolve_under(Path(root) / SCENES_DIR, scene, where)


def read_scene(
    root: Path, scene: str, coco_json_name: str | None = None, frame_id_pattern: str = r"(\d+)",
    read_tracks: bool = False, aliases: Mapping[str, str] = SCENE_ALIASES,
) -> SceneInfo:
    """A scene's COCO file and frames; with ``read_tracks`` also its scene track JSON (the ``frames`` config)."""
    folder = scene_folder(root, scene, f"R4D-Bench release {str(root)!r}: scene {scene!r}")
    if not folder.is_dir():
        raise ReleaseNotFoundError(f"scene folder {SCENES_DIR + '/' + scene!r} not found under {str(root)!r}")
    coco_path = find_coco_json(folder, coco_json_name)
    coco = read_json(coco_path, limit=MAX_JSON_BYTES)
    if not isinstance(coco, Mapping) or not isinstance(coco.get("images"), list):
        raise ReleaseFormatError(f"{str(coco_path)!r}: expected a COCO object with an 'images' list")
    info = SceneInfo(scene, folder, coco_path, coco)
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
        info.frames[fid] = FrameInfo(fid, iid, _resolve_image_name(folder, img.get("file_name"), f"{where}.file_name"), h, w)
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


# ---------------------------------------------------------------- masks


def png_mask(path: Path, where: str) -> rle_ops.RLE:
    """A PNG mask as RLE; foreground by :func:`perckit.images.mask_foreground` (any channel > 0).

    The file is read by :func:`perckit.paths.read_regular_file` under :data:`files.MAX_MASK_PNG_BYTES`:
    a FIFO, a device or a folder is refused at once, an oversize file before it is read."""
    data = read_regular_file(path, f"{where}: mask PNG", MAX_MASK_PNG_BYTES, ReleaseFormatError, ReleaseNotFoundError)
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            mode = im.mode
            arr = np.asarray(im)
    except FileNotFoundError:
        raise ReleaseNotFoundError(f"{where}: mask PNG {str(path)!r} not found") from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise ReleaseFormatError(f"{where}: cannot open mask PNG {str(path)!r}: {e}") from None
    return rle_ops.encode(mask_foreground(arr, mode, 0))


def frame_mask_from_segmentations(masks: Sequence[Mapping], size: tuple[int, int] | None, where: str) -> rle_ops.RLE:
    """OR of the ``segmentation`` of every mask of one frame; RLE sizes win, polygons use ``size``."""
    segs = [m.get("segmentation") if isinstance(m, Mapping) else None for m in masks]
    # Only well-formed sizes (two ints) vote here; anything else is reported by rle.to_rle below.
    rle_sizes = set()
    for s in segs:
        if isinstance(s, Mapping):
            sz = s.get("size")
            if isinstance(sz, (list, tuple)) and len(sz) == 2 and type(sz[0]) is int and type(sz[1]) is int:
                rle_sizes.add((sz[0], sz[1]))
    if len(rle_sizes) > 1:
        raise ReleaseFormatError(f"{where}: masks of one frame have different sizes {sorted(rle_sizes)}")
    if rle_sizes:
        rsize = next(iter(rle_sizes))
        if size is not None and tuple(size) != rsize:
            raise ReleaseFormatError(f"{where}: RLE size {list(rsize)} differs from the frame size {list(size)} of the COCO image")
        size = rsize
    parts = []
    for k, seg in enumerate(segs):
        if seg is None or (isinstance(seg, (list, dict)) and len(seg) == 0):
            continue
        if isinstance(seg, list) and size is None:
            raise ReleaseFormatError(f"{where}: masks[{k}] is a polygon and the frame size is unknown (no COCO image, no RLE)")
        parts.append(rle_ops.to_rle(seg, size=size, where=f"{where}: masks[{k}].segmentation"))
    if size is None:
        raise ReleaseFormatError(f"{where}: cannot build the frame mask: frame size unknown (no COCO image and no RLE)")
    return rle_ops.union(parts, size=size, where=where)


def frame_mask_from_pngs(root: Path, frame: Mapping, size: tuple[int, int] | None, where: str) -> rle_ops.RLE:
    """OR of the per-mask ``mask_image`` PNGs, else the frame's ``combined_mask_image``."""
    masks = frame.get("masks") or []
    paths = [m.get("mask_image") for m in masks if isinstance(m, Mapping)]
    if masks and all(isinstance(p, str) for p in paths):
        parts = []
        for k, p in enumerate(paths):
            kwhere = f"{where}: masks[{k}].mask_image"
            parts.append(png_mask(resolve_under(root, p, kwhere), kwhere))
    elif isinstance(frame.get("combined_mask_image"), str):
        cwhere = f"{where}: combined_mask_image"
        parts = [png_mask(resolve_under(root, frame["combined_mask_image"], cwhere), cwhere)]
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


# ---------------------------------------------------------------- rows


@dataclass
class QueryRelease:
    """Everything a query config reads, parsed and checked (done in ``_split_generators``)."""

    root: Path
    gt_path: Path
    entries: list[dict]
    meta: dict[str, dict]
    track_gt: dict[str, list[str]]
    scenes: dict[str, SceneInfo]


def open_query_release(
    root: str | Path,
    config_name: str = "all_queries",
    mask_source: str = "segmentation",
    coco_json_name: str | None = None,
    frame_id_pattern: str = r"(\d+)",
    aliases: Mapping[str, str] = SCENE_ALIASES,
    gt_file: str | Path | None = None,
    queries_file: str | Path | None = None,
) -> QueryRelease:
    """Read and check the files of a query config. ``gt_file``/``queries_file`` override the default paths (CLI)."""
    root = Path(root)
    if gt_file is None:
        root = check_release_root(root)
        gt_name = dense_gt_file(config_name, mask_source)
        gt_path = require_file(root, gt_name, "R4D-Bench dense ground truth")
        resolve_under(root, gt_name, f"R4D-Bench release {str(root)!r}: dense ground truth")
    else:
        gt_path = Path(gt_file)
        if not gt_path.is_file():
            raise ReleaseNotFoundError(f"dense ground truth {str(gt_path)!r} not found")
    if queries_file is None:
        meta_path = require_file(root, QUERIES_META, "R4D-Bench query metadata")
        resolve_under(root, QUERIES_META, f"R4D-Bench release {str(root)!r}: query metadata")
    else:
        meta_path = Path(queries_file)
        if not meta_path.is_file():
            raise ReleaseNotFoundError(f"query metadata {str(meta_path)!r} not found")
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
            scenes[scene] = read_scene(root, scene, coco_json_name, frame_id_pattern)
    return QueryRelease(root, gt_path, entries, meta, track_gt, scenes)


def entry_scene(entry: Mapping, meta: Mapping[str, Mapping], aliases: Mapping[str, str] = SCENE_ALIASES) -> str:
    m = meta.get(entry["query_id"])
    if m and isinstance(m.get("scene"), str) and m["scene"]:
        return normalise_scene(m["scene"], aliases)
    return scene_from_query_id(entry["query_id"], aliases)


def _as_bool(value: Any) -> bool | None:
    """JSON bools as they are; "true"/"false"/"yes"/"no"/"1"/"0" strings read as such; null stays null."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "yes", "y", "1"):
            return True
        if v in ("false", "no", "n", "0", ""):
            return False
    return bool(value)


def _json_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def query_rows(rel: QueryRelease, mask_source: str = "segmentation", aliases: Mapping[str, str] = SCENE_ALIASES) -> Iterator[tuple[str, dict]]:
    """Yield ``(query_id, row)`` for every dense-GT entry, in file order."""
    for entry in rel.entries:
        yield entry["query_id"], query_row(rel, entry, mask_source, aliases)


def query_row(rel: QueryRelease, entry: Mapping, mask_source: str = "segmentation", aliases: Mapping[str, str] = SCENE_ALIASES) -> dict:
    qid = entry["query_id"]
    where = f"{rel.gt_path.name}: query {qid!r}"
    gt = entry["ground_truth"]
    scene = entry_scene(entry, rel.meta, aliases)
    info = rel.scenes.get(scene)
    meta = rel.meta.get(qid)
    if meta is None:
        logger.warning("R4D-Bench: query %r is in %s but not in %s; its texts are null", qid, rel.gt_path.name, QUERIES_META)
        meta = {}
        question = entry.get("question")
        text_en, text_zh = None, (question if isinstance(question, str) and _CJK.search(question) else None)
    else:
        text_en, text_zh = _json_text(meta.get("text_en")), _json_text(meta.get("text_zh"))
    gt_tracks = gt.get("target_tracks")
    if "target_track_ids" in meta:
        targets = track_id_list(meta.get("target_track_ids"), f"{QUERIES_META}: {qid!r}.target_track_ids")
    else:
        targets = track_id_list(gt_tracks if gt_tracks is not None else gt.get("target_entity_ids"), f"{where}: ground_truth.target_tracks")
    _check_target_consistency(qid, targets, rel.track_gt.get(qid), gt_tracks)
    count = meta.get("target_count")
    if count is not None and count != len(targets):
        logger.warning("R4D-Bench: query %r has target_count=%r but %d distinct target_track_ids", qid, count, len(targets))
    frames = []
    for fr in gt["frames"]:
        fid = fr["frame_id"]
        size = info.frame_size(fid) if info else None
        fwhere = f"{where}: frame {fid}"
        if mask_source == "mask_image":
            mask = frame_mask_from_pngs(rel.root, fr, size, fwhere)
        else:
            mask = frame_mask_from_segmentations(fr["masks"], size, fwhere)
        frames.append({"frame_id": fid, "mask": mask, "num_instance_masks": len(fr["masks"])})
    existence = sorted(set(gt["existence_frames"]))
    annotated = {f["frame_id"] for f in frames}
    missing = [t for t in existence if t not in annotated]
    if missing and targets:
        logger.info("R4D-Bench: query %r has %d existence frame(s) without a mask entry: %s", qid, len(missing), missing[:5])
    extra = {k: v for k, v in meta.items() if k not in KNOWN_QUERY_KEYS}
    rmu = meta.get("requires_motion_understanding")
    return {
        "query_id": qid,
        "scene": scene,
        "text_en": text_en,
        "text_zh": text_zh,
        "target_track_ids": targets,
        "target_count": int(count) if isinstance(count, int) and not isinstance(count, bool) else len(targets),
        "is_negative": len(targets) == 0,
        "query_type": _json_text(meta.get("query_type")),
        "requires_motion_understanding": _as_bool(rmu),
        "temporal_relation": _json_text(meta.get("temporal_relation")),
        "expected_temporal_anchor": _json_text(meta.get("expected_temporal_anchor")),
        "distractor": _json_text(meta.get("distractor")),
        "note": _json_text(meta.get("note")),
        "existence_frame_ids": existence,
        "frames": frames,
        "evaluated_frame_ids": sorted(annotated | set(existence)),
        "scene_frame_ids": sorted(info.frames) if info else [],
        "extra_metadata_json": json.dumps(extra, sort_keys=True, ensure_ascii=False),
    }


def _check_target_consistency(qid: str, targets: list[str], track_gt: list[str] | None, gt_tracks: Any) -> None:
    """Warn when the queries file, the track-ID GT and ``ground_truth.target_tracks`` disagree (queries file wins)."""
    if track_gt is not None and set(track_gt) != set(targets):
        logger.warning("R4D-Bench: query %r: %s has target ids %s, %s has %s (using the queries file)", qid, TRACK_GT, track_gt, QUERIES_META, targets)
    if isinstance(gt_tracks, list):
        gt_set = {str(t) for t in gt_tracks}
        if gt_set != set(targets):
            logger.warning("R4D-Bench: query %r: ground_truth.target_tracks %s differ from %s %s", qid, sorted(gt_set), QUERIES_META, targets)


def scene_names(root: Path) -> list[str]:
    folder = Path(root) / SCENES_DIR
    if not folder.is_dir():
        raise ReleaseNotFoundError(f"R4D-Bench release {str(root)!r}: expected the folder {SCENES_DIR + '/'!r}, not found")
    names = sorted(p.name for p in folder.iterdir() if p.is_dir())
    for name in names:  # a folder that is a symbolic link out of the release is refused
        scene_folder(root, name, f"R4D-Bench release {str(root)!r}: {SCENES_DIR}/{name}")
    return names


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


def read_ahead(paths: Sequence[str | Path], depth: int = 16) -> Iterator[tuple[Path, bytes | Exception]]:
    """The frame images' bytes, each a regular file under :data:`files.MAX_IMAGE_BYTES` (:func:`files.read_ahead`)."""
    return files.read_ahead(paths, files.MAX_IMAGE_BYTES, depth)


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


def frame_rows(info: SceneInfo, track_id_precedence: str = "coco") -> Iterator[tuple[str, dict]]:
    """Yield ``("<scene>/<frame_id:06d>", row)`` for every COCO image of a scene, by frame id.

    An annotation's ``track_id`` comes from :func:`resolve_track_id` (its COCO attribute and the scene track
    JSON links read by :func:`read_scene` with ``read_tracks=True``; ``track_id_precedence`` picks the winner)."""
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
    fids = sorted(info.frames)
    images = read_ahead([info.folder / info.frames[fid].file_name for fid in fids])
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
        anns = []
        for a in sorted(by_image.get(fr.coco_image_id, []), key=lambda a: _annotation_int(a, "id", where)):
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
        yield f"{info.name}/{fid:06d}", {
            "scene": info.name,
            "frame_id": fid,
            "image": {"bytes": data, "path": fr.file_name},
            "image_file_name": fr.file_name,
            "coco_image_id": fr.coco_image_id,
            "height": fr.height,
            "width": fr.width,
            "annotations": anns,
        }


# Re-exported for callers that catch mask errors from this module.
__all__ = [
    "RLEError", "SCENES", "SCENE_ALIASES", "QueryRelease", "SceneInfo", "frame_rows", "load_dense_gt",
    "load_queries_meta", "load_track_gt", "open_query_release", "query_rows", "read_scene", "read_scene_tracks", "resolve_track_id",
    "scene_from_query_id", "scene_names",
]
