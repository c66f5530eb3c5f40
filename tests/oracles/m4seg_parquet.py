"""The M4Seg Parquet record converter of before issue 29, record by record: the reference the column path
(``perckit.m4seg.read.parquet``) is tested against, row for row and message for message.

``parquet_to_row`` takes one record as ``to_pylist`` gives it and returns the builder row (ids as str, card
names mapped to ours, every list checked) or raises the precise error. It uses the field rules of
``perckit.m4seg.rows`` as the builder did; test-only.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from perckit import rle as rle_ops
from perckit.errors import ReleaseFormatError
from perckit.errors import short_repr as _short
from perckit.m4seg.metric import codes
from perckit.m4seg.rows import PARQUET_ALIASES, PARQUET_GROUNDING_ALIASES, ConvertState
from perckit.m4seg.rows import _alias, _check_image_index, _check_image_size, _check_span, _id_list, _int, _str_or_none
from perckit.io.paths import check_relative

_MAPS = (dict, Mapping)



def parquet_to_row(rec: Mapping[str, Any], state: ConvertState) -> dict:
    """One Parquet row (as ``to_pylist`` gives it) as a builder row: renamed, ids as str, every list checked."""
    if not isinstance(rec, _MAPS):
        raise ReleaseFormatError(f"M4Seg {state.split} split, {state.file}: expected each row to be a record, found {_short(rec)}")
    eid = _alias(rec, PARQUET_ALIASES["example_id"])
    if eid is None:
        raise ReleaseFormatError(f"{state.where(None)}: expected a non-null 'example_id', found {_short(eid)}")
    eid = str(eid)
    where = state.where(eid)
    answer = _alias(rec, PARQUET_ALIASES["a"])
    if not isinstance(answer, str):
        raise ReleaseFormatError(f"{where}: 'a': expected a string, found {_short(answer)}")
    images_in = rec.get("images")
    if not isinstance(images_in, list) or not images_in:
        raise ReleaseFormatError(f"{where}: 'images': expected a non-empty list of {{image_id, path, height, width}}, found {_short(images_in)}")
    images = []
    for k, im in enumerate(images_in):
        iw = f"{where}: images[{k}]"
        if not isinstance(im, _MAPS):
            raise ReleaseFormatError(f"{iw}: expected {{image_id, path, height, width}}, found {_short(im)}")
        h, w = _int(im.get("height"), iw, ".height"), _int(im.get("width"), iw, ".width")
        _check_image_size(h, w, iw)
        path = _str_or_none(im.get("path"))
        if path is not None:  # relative to the user's image_root: an absolute path or a '..' never reaches a row
            check_relative(path, f"{iw}.path")
        images.append({"image_id": _str_or_none(im.get("image_id")), "path": path, "height": h, "width": w})
    n = len(images)
    groundings = []
    groundings_in = rec.get("groundings")
    if groundings_in is None:
        groundings_in = []
    if not isinstance(groundings_in, list):
        raise ReleaseFormatError(f"{where}: 'groundings': expected a list of groundings, found {_short(groundings_in)}")
    for j, g in enumerate(groundings_in):
        gw = f"{where}: groundings[{j}]"
        if not isinstance(g, _MAPS):
            raise ReleaseFormatError(f"{gw}: expected a grounding object, found {_short(g)}")
        k = _check_image_index(g.get("image_index"), n, gw)
        hw = [images[k - 1]["height"], images[k - 1]["width"]]
        mask_obj = _alias(g, PARQUET_GROUNDING_ALIASES["segmentation"])
        if mask_obj is None:
            raise ReleaseFormatError(f"{gw}.segmentation: expected a compressed RLE {{size, counts}}, found none")
        mask = rle_ops.to_rle(mask_obj, size=hw, where=f"{gw}.segmentation (image {k}, [H, W] = {hw})")
        bbox = _alias(g, PARQUET_GROUNDING_ALIASES["bbox"])
        if bbox is None:
            bbox = rle_ops.to_bbox(mask)
        elif (
            not isinstance(bbox, (list, tuple)) or len(bbox) != 4
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in bbox)
        ):
            raise ReleaseFormatError(f"{gw}.bbox: expected [x, y, width, height] (4 numbers, all finite), found {_short(bbox)}")
        groundings.append({
            "image_index": k,
            "name": _str_or_none(g.get("name")),
            "annotation_ids": _id_list(g.get("annotation_ids")),
            "object_annotation_id": _str_or_none(g.get("object_annotation_id")),
            "answer_span": _check_span(g.get("answer_span"), answer, gw),
            "bbox": [float(v) for v in bbox],
            "segmentation": mask,
        })
    problems = codes.span_code_problems(answer, groundings)
    if problems:
        state.warn_spans(eid, problems)
    question = _alias(rec, PARQUET_ALIASES["q"])
    return {
        "example_id": eid,
        "pair_id": _str_or_none(_alias(rec, PARQUET_ALIASES["pair_id"])),
        "dataset_name": _str_or_none(_alias(rec, PARQUET_ALIASES["dataset_name"])),
        "type": _str_or_none(_alias(rec, PARQUET_ALIASES["type"])),
        "granularity": _str_or_none(_alias(rec, PARQUET_ALIASES["granularity"])),
        "q": None if question is None else str(question),
        "a": answer,
        "images": images,
        "groundings": groundings,
    }
