"""R4D-Bench ``frames`` rows written as Arrow tables column by column (what the builder writes).

:func:`perckit.r4d_bench.scenes.frame_rows` is the reference rule of a ``frames`` row. For a batch of frames
whose annotations are all plain (see :func:`_plain_annotation_column`), :func:`frame_tables` builds the same
table without a Python dict per row or per annotation: each field of every annotation of the batch is one
list, checked by type at C speed (``set(map(type, ...))``), the batch's polygons are rasterised in one
pycocotools call per frame size, and the columns go to Arrow directly. Any other batch is made from the
reference rows, which give the same table or raise the precise error. The tests compare both on the sample
releases and on hand-made quirks.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa

from .. import rle as rle_ops
from ..builder_base import media_column
from ..builder_base import rows_to_table
from ..errors import ReleaseFormatError, RLEError
from .scenes import FrameInfo
from .scenes import SceneInfo
from .scenes import _frame_row
from .scenes import _json_text
from .scenes import frame_image_paths
from .scenes import frame_images
from .scenes import read_ahead
from .scenes import reference_annotations
from .scenes import resolve_track_ids
from .scenes import scene_annotations

_PLAIN = frozenset((float, int))
_BY_ID = operator.itemgetter("id")


def scenes_frame_tables(
    infos: Sequence[SceneInfo], track_id_precedence: str, schema: pa.Schema, rows_per_table: int = 64
) -> Iterator[tuple[str, pa.Table]]:
    """:func:`frame_tables` of every scene in turn, the images read through one :func:`scenes.read_ahead`
    across all of them (the read-ahead window runs on into the next scene instead of starting empty)."""
    per_scene = [frame_image_paths(info) for info in infos]
    images = read_ahead([p for paths in per_scene for p in paths])
    for info, paths in zip(infos, per_scene):
        yield from frame_tables(info, track_id_precedence, schema, rows_per_table, itertools.islice(images, len(paths)))


def frame_tables(
    info: SceneInfo, track_id_precedence: str, schema: pa.Schema, rows_per_table: int = 64,
    images: Iterator[tuple[Path, bytes | Exception]] | None = None,
) -> Iterator[tuple[str, pa.Table]]:
    """The scene's :func:`scenes.frame_rows` as tables of ``schema`` (the ``frames`` features' Arrow schema), up
    to ``rows_per_table`` frames each, keyed by their first row's key; the same checks and errors."""
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


def _batch_table(info: SceneInfo, scene, cat_names: dict, batch: list, precedence: str, schema: pa.Schema) -> tuple[str, pa.Table]:
    key = f"{info.name}/{batch[0][0]:06d}"
    frames = [(fr, scene.by_image.get(fr.coco_image_id, [])) for _, fr, _, _, _ in batch]
    annotations = _plain_annotation_column(frames, cat_names, info.track_links, precedence, scene.checked, schema.field("annotations").type)
    image = media_column([{"bytes": data, "path": fr.file_name} for _, fr, _, data, _ in batch]) if annotations is not None else None
    if annotations is None or image is None:  # the reference rows: the same table, or the precise error
        rows = [_frame_row(info, fid, fr, data, reference_annotations(info, scene, fr, precedence, where)) for fid, fr, _, data, where in batch]
        return key, rows_to_table(rows, schema)
    values = {
        "scene": [info.name] * len(batch),
        "frame_id": [fid for fid, *_ in batch],
        "image_file_name": [fr.file_name for _, fr, *_ in batch],
        "coco_image_id": [fr.coco_image_id for _, fr, *_ in batch],
        "height": [fr.height for _, fr, *_ in batch],
        "width": [fr.width for _, fr, *_ in batch],
    }
    columns = [image if f.name == "image" else annotations if f.name == "annotations" else pa.array(values[f.name], f.type) for f in schema]
    return key, pa.Table.from_arrays(columns, schema=schema)


def _plain_annotation_column(
    frames: Sequence[tuple[FrameInfo, Sequence]], cat_names: dict, links: dict, precedence: str, checked, list_type: pa.ListType
) -> pa.Array | None:
    """The ``annotations`` column of a batch of frames (``(frame, its COCO annotations)``), as the reference rows
    make it, or None (the caller then makes the reference rows, which give the same values or the error).

    Taken when every frame size is two positive ints within :data:`perckit.rle.MAX_PIXELS` and every annotation
    is a ``dict`` whose ``id`` and ``category_id`` are ints (exact type), whose ``bbox`` (if truthy) is a list
    and ``area`` (if not None) a number, of finite floats / ints (not bools), and whose segmentation is absent /
    empty, a list of polygons that the polygon guard of :func:`perckit.rle.polygon_unions` accepts (rasterised in
    one pycocotools call per frame size, merged per annotation as :func:`perckit.rle.from_polygons` does), an RLE dict that the
    scene's scan accepted (``checked``) of the frame's size (taken as it is), or anything
    :func:`perckit.rle.to_rle` accepts without an error. Track ids come from :func:`scenes.resolve_track_ids`
    (``links``: the scene track JSON's); ``cat_names``: the scene's category names as row text."""
    flat: list = []
    offsets = [0]
    for fr, anns in frames:
        h, w = fr.height, fr.width
        if type(h) is not int or type(w) is not int or h <= 0 or w <= 0 or h * w > rle_ops.MAX_PIXELS:
            return None
        if anns and (set(map(type, anns)) != {dict} or set(map(type, map(dict.get, anns, itertools.repeat("id")))) != {int}):
            return None  # (sorting by id needs int ids)
        flat.extend(sorted(anns, key=_BY_ID) if len(anns) > 1 else anns)
        offsets.append(len(flat))
    ids = [a["id"] for a in flat]
    cids = [a.get("category_id") for a in flat]
    if flat and set(map(type, cids)) != {int}:
        return None
    boxes = [a.get("bbox") or [] for a in flat]
    if flat and set(map(type, boxes)) != {list}:
        return None
    coords = list(itertools.chain.from_iterable(boxes))
    areas = [a.get("area") for a in flat]
    present = [v for v in areas if v is not None]
    if not set(map(type, coords)) <= _PLAIN or not set(map(type, present)) <= _PLAIN:
        return None
    try:  # an int too large for a float overflows here: the reference names it
        coords = list(map(float, coords))
        areas = [None if v is None else float(v) for v in areas]
    except OverflowError:
        return None
    if not all(map(math.isfinite, coords)) or not all(math.isfinite(v) for v in areas if v is not None):
        return None
    tracks = resolve_track_ids(flat, ids, links, precedence)
    struct_type = list_type.value_type
    types = {f.name: f.type for f in struct_type}
    masks = _plain_masks(frames, flat, offsets, checked, types["mask"])
    if masks is None:
        return None
    try:
        struct = pa.StructArray.from_arrays([
            pa.array(ids, types["annotation_id"]),
            pa.array(cids, types["category_id"]),
            pa.array([cat_names.get(c) for c in cids], types["category_name"]),
            pa.array(tracks, types["track_id"]),
            pa.ListArray.from_arrays(pa.array(_offsets(map(len, boxes)), pa.int32()), pa.array(coords, types["bbox_xywh"].value_type),
                                     type=types["bbox_xywh"]),
            pa.array(areas, types["area"]),
            pa.array([bool(a.get("iscrowd", 0)) for a in flat], types["iscrowd"]),
            masks,
        ], fields=list(struct_type))
        return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), struct, type=list_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # a value out of an Arrow type's range: the reference
        return None


def _plain_masks(
    frames: Sequence[tuple[FrameInfo, Sequence]], flat: list, offsets: list[int], checked, mask_type: pa.StructType
) -> pa.StructArray | None:
    """Each annotation's mask as the reference makes it (``{size, counts}`` of ``mask_type``, or null), or None
    (see :func:`_plain_annotation_column`)."""
    masks: list = [None] * len(flat)
    pending: dict[tuple[int, int], list[int]] = {}  # frame size -> the annotations whose polygons to rasterise
    for (fr, _), start, end in zip(frames, offsets, offsets[1:]):
        h, w = fr.height, fr.width
        for i in range(start, end):
            seg = flat[i].get("segmentation")
            if seg in (None, [], {}):
                continue
            if type(seg) is list and all(type(p) is list for p in seg):  # polygons: the guard checks them below
                pending.setdefault((h, w), []).append(i)
            elif id(seg) in checked and seg["size"] == [h, w]:  # what to_rle returns for it
                masks[i] = (h, w, seg["counts"])
            else:
                try:
                    rle = rle_ops.to_rle(seg, size=(h, w), where="annotation")
                except (RLEError, ReleaseFormatError):
                    return None
                masks[i] = (h, w, rle["counts"])
    for (h, w), items in pending.items():  # one pycocotools call for all the polygons of a frame size
        try:  # the polygon guard (rle.check_polygons) decides; its refusal is the reference rows' to name
            unions = rle_ops.polygon_unions([flat[i]["segmentation"] for i in items], h, w)
        except RLEError:
            return None
        for i, one in zip(items, unions):
            masks[i] = (h, w, one["counts"].decode("ascii"))
    null = [m is None for m in masks]
    sizes = pa.array([None if m is None else [m[0], m[1]] for m in masks], mask_type.field("size").type)
    counts = pa.array([None if m is None else m[2] for m in masks], mask_type.field("counts").type)
    return pa.StructArray.from_arrays([sizes, counts], fields=list(mask_type), mask=pa.array(null, pa.bool_()))


def _offsets(lengths) -> list[int]:
    return [0, *itertools.accumulate(lengths)]
