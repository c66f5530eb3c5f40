"""The M4Seg native example converter of before issue 32, one example at a time with every mask converted as its
grounding is read (``rle.to_rle``) and the boxes computed per example: the reference the batch conversion
(``perckit.m4seg.rows.native_rows``) is tested against, row for row and message for message (tests/test_m4seg_native_reader.py,
tests/test_m4seg_fuzz.py). Test-only.
"""

from __future__ import annotations

import os
from contextlib import suppress
from typing import Any, Mapping

from perckit import rle as rle_ops
from perckit.errors import ReleaseFormatError, inferred_reading
from perckit.errors import short_repr as _short
from perckit.io.paths import check_relative
from perckit.m4seg.features import SOURCE_GRANULARITY
from perckit.m4seg.metric import codes
from perckit.m4seg.rows import (
    _IMG_INDEX, _MAPS, EXAMPLE_ALIASES, GROUNDING_ALIASES, ConvertState, _alias, _bboxes, _check_image_index, _check_span,
    _id_list, _image_ids, _image_stem, _plainly_relative, _str_or_none, resolve_image_sizes,
)


def native_to_row(example: Mapping[str, Any], state: ConvertState, example_id: str | None = None) -> dict:
    """One native example as a builder row (the only place the native format is interpreted).

    ``example_id``: the id to use when the example has none (the builder derives it from ``pair_id``). Masks may be
    compressed RLE (str or bytes counts), uncompressed RLE or polygons; the bbox is always recomputed from the mask;
    missing ``answer_span`` values are derived from the entity codes."""
    if not isinstance(example, _MAPS):
        raise ReleaseFormatError(f"M4Seg {state.split} split, {state.file}: expected each example to be an object, found {_short(example)}")
    eid = _alias(example, EXAMPLE_ALIASES["example_id"])
    eid = str(eid) if eid is not None else example_id
    pid = _str_or_none(_alias(example, EXAMPLE_ALIASES["pair_id"]))
    if eid is None:
        eid = pid
    if eid is None:
        raise ReleaseFormatError(f"{state.where(None)}: expected an 'example_id' or a 'pair_id'/'id', found neither (keys {sorted(example)})")
    where = state.where(eid)
    answer = _alias(example, EXAMPLE_ALIASES["a"])
    if not isinstance(answer, str):
        raise ReleaseFormatError(f"{where}: 'a'/'answer': expected a string, found {_short(answer)}")
    dataset_name = _str_or_none(_alias(example, EXAMPLE_ALIASES["dataset_name"]))
    granularity = _alias(example, EXAMPLE_ALIASES["granularity"])
    if granularity is None and dataset_name is not None:
        granularity = SOURCE_GRANULARITY.get(dataset_name)

    paths = example.get("image_paths")
    sizes = example.get("image_sizes")
    if not isinstance(paths, list) or not paths:
        raise ReleaseFormatError(f"{where}: 'image_paths': expected a non-empty list of paths, found {_short(paths)}")
    if not isinstance(sizes, list) or len(sizes) != len(paths):
        raise ReleaseFormatError(
            f"{where}: 'image_sizes': expected one size per image path ({len(paths)}), found {_short(sizes)}"
        )
    ids = example.get("image_ids")
    if ids is not None:  # [inferred]: the card names no native image ids; ids from the paths otherwise
        ids = inferred_reading(lambda: _image_ids(ids, len(paths)), None, f"{where}: 'image_ids'", state)
    n = len(paths)

    groups = example.get("groundings")
    if groups is None:
        groups = {}
    if isinstance(groups, list):
        # A flat list with image_index (our own format) is accepted too.
        by_key: dict[str, list] = {}
        for j, g in enumerate(groups):
            k = _check_image_index(g.get("image_index") if isinstance(g, _MAPS) else None, n, f"{where}: groundings[{j}]")
            by_key.setdefault(f"img_{k}", []).append(g)
        groups = by_key
    if not isinstance(groups, _MAPS):
        raise ReleaseFormatError(f"{where}: 'groundings': expected an object keyed 'img_1', 'img_2', ..., found {_short(groups)}")
    plain = [_IMG_INDEX.get(key) if type(key) is str else None for key in groups]
    if None not in plain:  # the common keys: sorted by their index without a regex (the same order)
        keyed = sorted(zip(plain, groups))
    else:
        keyed = [(codes.img_key_index(key), key) for key in codes.sorted_img_keys(groups.keys(), f"{where}: groundings")]
    per_image: dict[int, list] = {}
    key_of: dict[int, str] = {}
    for k, key in keyed:
        if not 1 <= k <= n:
            raise ReleaseFormatError(f"{where}: groundings.{key}: expected keys img_1..img_{n} ({n} image(s)), found {key!r}")
        if k in per_image:
            raise ReleaseFormatError(f"{where}: groundings: expected one key per image, found two keys for image {k} ({key_of[k]!r} and {key!r})")
        key_of[k] = key
        gs = groups[key]
        if not isinstance(gs, list):
            raise ReleaseFormatError(f"{where}: groundings.{key}: expected a list of groundings, found {_short(gs)}")
        per_image[k] = gs

    mask_sizes: list[set] = []
    mask_objs: dict[int, list] = {}  # each grounding's mask object, looked up once
    for k in range(1, n + 1):
        ms = set()
        objs = mask_objs[k] = []
        for g in per_image.get(k, ()):
            m = _alias(g, GROUNDING_ALIASES["segmentation"]) if isinstance(g, _MAPS) else None
            objs.append(m)
            if type(m) is dict:
                sz = m.get("size")
                if type(sz) is list and len(sz) == 2 and type(sz[0]) is int and type(sz[1]) is int:
                    ms.add((sz[0], sz[1]))
                    continue
            if isinstance(m, _MAPS) and isinstance(m.get("size"), (list, tuple)) and len(m["size"]) == 2:
                with suppress(TypeError, ValueError, OverflowError):
                    ms.add((int(m["size"][0]), int(m["size"][1])))
        mask_sizes.append(ms)
    hws = resolve_image_sizes(sizes, mask_sizes, state, where)
    images = []
    for i, (path, hw) in enumerate(zip(paths, hws)):
        # a path relative to the user's image_root: an absolute path or a '..' never reaches a row
        plain_path = _plainly_relative(path)
        if not plain_path:
            check_relative(path, f"{where}: image_paths[{i}]")
        if ids is not None:
            image_id = str(ids[i])
        else:
            image_id = _image_stem(path) if plain_path else os.path.splitext(os.path.basename(path))[0]
        images.append({"image_id": image_id, "path": path, "height": hw[0], "width": hw[1]})

    need = {k: len(gs) for k, gs in per_image.items() if any(not isinstance(g, _MAPS) or g.get("answer_span") is None for g in gs)}
    derived = codes.derive_spans(answer, need, where) if need else {}

    groundings = []
    masks = []  # for the bboxes
    name_keys = GROUNDING_ALIASES["name"]
    for k in sorted(per_image):
        hw = [images[k - 1]["height"], images[k - 1]["width"]]
        for i, g in enumerate(per_image[k]):
            # (the message prefix is built only where a check needs it)
            if not isinstance(g, _MAPS):
                raise ReleaseFormatError(f"{where}: groundings.img_{k}[{i}]: expected a grounding object, found {_short(g)}")
            mask_obj = mask_objs[k][i]
            if mask_obj is None:
                raise ReleaseFormatError(f"{where}: groundings.img_{k}[{i}].segmentation: expected a mask (RLE or polygons), found none")
            gw = f"{where}: groundings.img_{k}[{i}]"
            mask = rle_ops.to_rle(mask_obj, size=hw, where=f"{gw}.segmentation (image {k}, [H, W] = {hw})")
            span = g.get("answer_span")
            span = derived[k][i] if span is None else _check_span(span, answer, gw)
            groundings.append({
                "image_index": k,
                "name": _str_or_none(_alias(g, name_keys)),
                "annotation_ids": _id_list(_alias(g, GROUNDING_ALIASES["annotation_ids"])),
                "object_annotation_id": _str_or_none(_alias(g, GROUNDING_ALIASES["object_annotation_id"])),
                "answer_span": span,
                "bbox": None,
                "segmentation": mask,
            })
            masks.append(mask)
    for g, box in zip(groundings, _bboxes(masks)):
        g["bbox"] = box
    problems = codes.span_code_problems(answer, groundings)
    if problems:
        state.warn_spans(eid, problems)
    return {
        "example_id": eid,
        "pair_id": pid,
        "dataset_name": dataset_name,
        "type": _str_or_none(_alias(example, EXAMPLE_ALIASES["type"])),
        "granularity": _str_or_none(granularity),
        "q": _str_or_none(_alias(example, EXAMPLE_ALIASES["q"])),
        "a": answer,
        "images": images,
        "groundings": groundings,
    }
