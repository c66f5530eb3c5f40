"""The rows of the R4D-Bench builder, made from what :mod:`perckit.r4d_bench.read` returns, with their field checks:
one row per query for the query configs (``all_queries``, ``subset_36``: :func:`query_rows`), and the ``frames``
config's Arrow tables (a frame goes from :func:`perckit.r4d_bench.read.read_scene` to Arrow in :func:`frame_tables`,
column by column). Also the ground-truth rows the drop-in command lines score against."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence, Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .. import rle as rle_ops
from ..hf.builder import MEDIA_STORAGE, batched, media_column
from ..errors import ReleaseFormatError, RLEError, check_choice, short_repr as _short
from ..io.jsonio import parse_int
from .features import frame_features
from .layout import QUERIES_META, SCENE_ALIASES, TRACK_GT
from .read import (
    TRACK_ID_PRECEDENCES, FrameInfo, QueryRelease, SceneInfo, checked_rles, coco_track_id, entry_scene,
    frame_image_paths, frame_images, frame_mask_from_pngs, frame_mask_from_segmentations, load_queries_meta, logger,
    open_query_release, read_ahead, resolve_track_ids, track_attributes, track_id_list, warn_shapes,
)

KNOWN_QUERY_KEYS = frozenset({
    "query_id", "scene", "text_en", "text_zh", "target_track_ids", "target_count", "query_type",
    "requires_motion_understanding", "temporal_relation", "expected_temporal_anchor", "distractor", "note",
})
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


# ---------------------------------------------------------------- query rows


def _json_text(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)


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
    checked = checked_rles(gt["frames"], info.frame_size if info else None) if mask_source != "mask_image" else {}
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
    return {
        "query_id": qid,
        "scene": scene,
        "text_en": text_en,
        "text_zh": text_zh,
        "target_track_ids": targets,
        "target_count": int(count) if isinstance(count, int) and not isinstance(count, bool) else len(targets),
        "is_negative": len(targets) == 0,
        "query_type": _json_text(meta.get("query_type")),
        "requires_motion_understanding": _as_bool(meta.get("requires_motion_understanding")),
        **{k: _json_text(meta.get(k)) for k in ("temporal_relation", "expected_temporal_anchor", "distractor", "note")},
        "existence_frames": existence,
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


def ground_truth_rows(ground_truth: str | Path, queries_meta: str | Path, repo_root: str | Path = ".", mask_source: str = "segmentation") -> list[dict]:
    """Builder query rows from an explicit dense-GT JSON and query-metadata JSON (what the CLIs score against)."""
    rel = open_query_release(repo_root, mask_source=mask_source, gt_file=ground_truth, queries_file=queries_meta)
    return [row for _, row in query_rows(rel, mask_source)]


def track_ground_truth_rows(queries_meta: str | Path) -> list[dict]:
    """``track_id`` reference rows from the query-metadata JSON (the official track evaluator reads ``--queries``)."""
    meta = load_queries_meta(queries_meta)  # (each entry's query_id is its key: entry_scene finds the entry)
    return [{"query_id": qid, "scene": entry_scene(m, meta), "target_track_ids": track_id_list(
                m.get("target_track_ids"), f"{str(queries_meta)!r}: query {qid!r}.target_track_ids")}
            for qid, m in meta.items()]


# ---------------------------------------------------------------- the frames tables


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
    """Check the scene's COCO lists, group its annotations and warn about its track links and its track attributes
    of another shape (once per scene)."""
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
    odd = [(f"annotation {a.get('id')!r}: {k}", v) for a in coco.get("annotations", []) if isinstance(a, Mapping)
           for k, v in track_attributes(a)[1]]  # [inferred]: ignored by coco_track_id
    warn_shapes(odd, "a track id (an int or a string)", f"R4D-Bench: {str(info.coco_path)!r}: annotations[].track_id / attributes.track_id / instance_id")
    rles = [seg for a in coco.get("annotations", []) if type(a) is dict and type(seg := a.get("segmentation")) is dict]
    checked = {id(seg) for seg, ok in zip(rles, rle_ops.valid_many(rles)) if ok}
    return SceneAnnotations(cats, by_image, checked)


def scenes_frame_tables(
    infos: Sequence[SceneInfo], track_id_precedence: str, schema: pa.Schema, rows_per_table: int = 64
) -> Iterator[tuple[str, pa.Table]]:
    """:func:`frame_tables` of every scene in turn, the images read through one :func:`read_ahead` across all
    of them (the read-ahead window runs on into the next scene instead of starting empty)."""
    per_scene = [frame_image_paths(info) for info in infos]
    images = read_ahead([p for paths in per_scene for p in paths])
    for info, paths in zip(infos, per_scene):
        yield from frame_tables(info, track_id_precedence, schema, rows_per_table, itertools.islice(images, len(paths)))


def frame_tables(info: SceneInfo, track_id_precedence: str = "coco", schema: pa.Schema | None = None,
                 rows_per_table: int = 64,
                 images: Iterator[tuple[Path, bytes | Exception]] | None = None) -> Iterator[tuple[str, pa.Table]]:
    """The ``frames`` rows of a scene (one per COCO image, by frame id) as tables of ``schema`` (the ``frames``
    features' Arrow schema), up to ``rows_per_table`` frames each, keyed ``"<scene>/<frame_id:06d>"`` by their
    first row. Each table is made column by column (no Python dict per row or per annotation): see
    :func:`_annotation_column`. An annotation's ``track_id`` comes from :func:`perckit.r4d_bench.read.resolve_track_ids`
    (its COCO attribute and the scene track JSON links read by :func:`perckit.r4d_bench.read.read_scene` with
    ``read_tracks=True``; ``track_id_precedence`` picks the winner). ``schema``: default the ``frames`` features'.
    ``images``: as for :func:`perckit.r4d_bench.read.frame_images`."""
    if schema is None:
        schema = frame_features().arrow_schema
    scene = scene_annotations(info, track_id_precedence)
    cat_names = {k: _json_text(v) for k, v in scene.cats.items()}
    for batch in batched(frame_images(info, images), rows_per_table):
        yield _batch_table(info, scene, cat_names, batch, track_id_precedence, schema)


#: The ``frames`` columns read from each frame's :class:`~perckit.r4d_bench.read.FrameInfo` attribute.
_FRAME_ATTRS = {"frame_id": "frame_id", "file_name": "coco_file_name", "id": "coco_image_id", "height": "height",
                "width": "width"}


def _batch_table(info: SceneInfo, scene: SceneAnnotations, cat_names: dict, batch: list, precedence: str,
                 schema: pa.Schema) -> tuple[str, pa.Table]:
    frames = [(fr, scene.by_image.get(fr.coco_image_id, []), where) for _, fr, _, _, where in batch]
    annotations = _annotation_column(frames, cat_names, info.track_links, precedence, scene.checked, schema.field("annotations").type)
    media = [{"bytes": data, "path": fr.file_name} for _, fr, _, data, _ in batch]
    image = media_column(media)
    if image is None:  # more than 2 GiB of images in one table: Arrow's own conversion (chunked) or its error
        image = pa.chunked_array([pa.array([m], MEDIA_STORAGE) for m in media], MEDIA_STORAGE)
    values = {"scene": [info.name] * len(batch), **{k: [getattr(fr, a) for _, fr, *_ in batch] for k, a in _FRAME_ATTRS.items()}}
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


def _annotation_column(frames: Sequence[tuple[FrameInfo, Sequence[Mapping], str]], cat_names: dict,
                       links: Mapping[int, str], precedence: str, checked: AbstractSet[int],
                       list_type: pa.ListType) -> pa.Array:
    """The ``annotations`` column of a batch of frames (``(frame, its COCO annotations, where)``): per frame a
    list of ``{id, category_id, category_name, track_id, bbox, area, iscrowd, segmentation}`` (the COCO keys) by
    annotation id (a missing ``id`` / ``category_id`` is 0).

    Each field of every annotation of the batch is one list, checked at once by its values' types (``int`` ids,
    lists of finite ``float`` / ``int`` numbers): what a release holds. Anything else in a field (a digit string, a
    tuple, a bool, NaN...) goes value by value through the field's converter (:func:`parse_int`,
    :func:`_annotation_numbers`, :func:`perckit.rle.to_rle`), which converts it or raises naming the frame
    (``where``), the annotation and the field; the error raised is the first in row order (:class:`_FirstError`).
    ``cat_names``: the scene's category names as row text; ``links``: the scene track JSON's."""
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

    masks = _mask_column(usable, flat, offsets, checked, where_of, first, list_type.value_type.field("segmentation").type)
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
        pa.array(ids, types["id"]),
        pa.array(cids, types["category_id"]),
        pa.array(names, types["category_name"]),
        pa.array(resolve_track_ids(flat, ids, links, precedence), types["track_id"]),
        pa.ListArray.from_arrays(pa.array([0, *itertools.accumulate(box_lengths)], pa.int32()),
                                 pa.array(coords, types["bbox"].value_type), type=types["bbox"]),
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


def _mask_column(frames: Sequence[FrameInfo], flat: Sequence[Mapping], offsets: Sequence[int],
                 checked: AbstractSet[int], where_of, first: _FirstError,
                 mask_type: pa.StructType) -> pa.StructArray | None:
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
