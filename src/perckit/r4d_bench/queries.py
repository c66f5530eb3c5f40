"""The query configs of R4D-Bench (``all_queries``, ``subset_36``): the query metadata, the track-ID ground
truth and the dense ground truth read and checked, and one row per query.

Each file is read by :func:`perckit.io.jsonio.read_json` under :data:`perckit.r4d_bench.files.MAX_JSON_BYTES`;
the scenes the queries name are read by :func:`perckit.r4d_bench.scenes.read_scene`, their masks built by
:mod:`perckit.r4d_bench.masks`.
"""

from __future__ import annotations

import json
import logging
import operator
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ReleaseFormatError, ReleaseNotFoundError
from ..errors import short_repr as _short
from ..io.jsonio import parse_int, read_json, require_file
from ..io.paths import resolve_under
from .files import MAX_JSON_BYTES
from .layout import QUERIES_META
from .layout import SCENE_ALIASES
from .layout import SCENES_DIR
from .layout import TRACK_GT
from .layout import check_release_root
from .layout import dense_gt_file
from .layout import normalise_scene
from .layout import scene_folder
from .layout import scene_from_query_id
from .masks import checked_rles
from .masks import frame_mask_from_pngs
from .masks import frame_mask_from_segmentations
from .scenes import SceneInfo
from .scenes import _json_text
from .scenes import read_scene

logger = logging.getLogger("perckit.r4d_bench.release")  # the release readers' one logger (its name is public)

KNOWN_QUERY_KEYS = frozenset({
    "query_id", "scene", "text_en", "text_zh", "target_track_ids", "target_count", "query_type",
    "requires_motion_understanding", "temporal_relation", "expected_temporal_anchor", "distractor", "note",
})
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


# ---------------------------------------------------------------- evaluation files


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


_BY_FRAME_ID = operator.itemgetter("frame_id")


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
        else:
            existence = list(existence)
        out.append({**entry, "ground_truth": {**gt, "frames": sorted(norm_frames, key=_BY_FRAME_ID), "existence_frames": existence}})
    return out


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
    checked = checked_rles(gt["frames"]) if mask_source != "mask_image" else frozenset()
    for fr in gt["frames"]:
        fid = fr["frame_id"]
        size = info.frame_size(fid) if info else None
        fwhere = f"{where}: frame {fid}"
        if mask_source == "mask_image":
            mask = frame_mask_from_pngs(rel.root, fr, size, fwhere)
        else:
            mask = frame_mask_from_segmentations(fr["masks"], size, fwhere, checked)
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
