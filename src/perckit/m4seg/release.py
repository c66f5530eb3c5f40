"""Readers of the M⁴Seg release: the Parquet shards and the native gzip JSON, both to one typed row.

Nothing here holds a split in memory. Parquet is read with ``iter_batches(batch_size=1000)``; the native
file is parsed item by item with ``ijson`` (its C backend when installed). Every [inferred] decision of the
native format lives in :func:`native_to_row` and its alias tables.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Mapping, Sequence

import numpy as np

from .. import rle as rle_ops
from ..errors import ReleaseFormatError, ReleaseNotFoundError, check_choice
from ..parquetio import check_column_chunk_sizes
from ..paths import check_relative, resolve_under
from ..errors import short_repr as _short
from ..jsonio import parse_int
from . import codes
from .native import FAST_KEYS as _FAST_KEYS
from .native import GZIP_ERRORS, MAX_EXAMPLE_BYTES, MAX_JSON_DEPTH  # noqa: F401
from .native import JsonGuard as _JsonGuard  # noqa: F401
from .native import fast_scan as _fast_scan  # tests replace release._fast_scan
from .native import gunzip as _gunzip
from .native import ijson_module as _ijson
from .native import iter_items
from .native import json_error as _json_error
from .native import pull_translating as _pull_translating
from .native import read_errors
from .native import reading_error as _reading_error
from .native import top_level_kind
from .features import SOURCE_GRANULARITY

logger = logging.getLogger(__name__)

SPLITS = ("train", "test")
SOURCES = ("auto", "native", "parquet")
SIZE_ORDERS = ("auto", "hw", "wh")
NATIVE_FILE = "annotations/m4seg_{split}.json.gz"
PARQUET_GLOB = "data/{split}-*.parquet"
BATCH_SIZE = 1000
#: Warnings of one kind shown per split before they are only counted.
MAX_WARNINGS = 5

# ---------------------------------------------------------------- alias tables [inferred]

#: Row field -> the native example keys that may hold it, first present wins.
EXAMPLE_ALIASES: dict[str, tuple[str, ...]] = {
    "example_id": ("example_id",),
    "pair_id": ("pair_id", "id"),
    "question": ("q", "question"),
    "answer": ("a", "answer"),
    "question_type": ("type", "question_type"),
    "dataset_name": ("dataset_name", "dataset", "source"),
    "granularity": ("granularity",),
}
#: Row grounding field -> the native grounding keys that may hold it.
GROUNDING_ALIASES: dict[str, tuple[str, ...]] = {
    "name": ("name", "label", "category"),
    "annotation_ids": ("annotation_ids", "annotation_id", "ann_id", "id"),
    "object_annotation_id": ("object_annotation_id", "object_id"),
    "mask": ("segmentation", "mask"),
    "answer_span": ("answer_span",),
}
#: The Parquet field names [card], with ours accepted too.
PARQUET_ALIASES: dict[str, tuple[str, ...]] = {
    "example_id": ("example_id",),
    "pair_id": ("pair_id",),
    "dataset_name": ("dataset_name",),
    "question_type": ("type", "question_type"),
    "granularity": ("granularity",),
    "question": ("q", "question"),
    "answer": ("a", "answer"),
}
PARQUET_GROUNDING_ALIASES: dict[str, tuple[str, ...]] = {
    "bbox_xywh": ("bbox", "bbox_xywh"),
    "mask": ("segmentation", "mask"),
}


#: isinstance against a tuple starting with dict short-circuits for the dicts ijson and pyarrow produce.
_MAPS = (dict, Mapping)


def _int(v: Any, where: str, field_: str = "") -> int:
    if type(v) is int:
        return v
    return parse_int(v, where + field_)


def _alias(d: Mapping, names: Sequence[str]) -> Any:
    for n in names:
        v = d.get(n)
        if v is not None:
            return v
    return None


def _str_or_none(v: Any) -> str | None:
    return None if v is None else str(v)


def _id_list(v: Any) -> list[str]:
    """Annotation ids as a list of str whatever the source type (scalar, list, null)."""
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v]
    return [str(v)]


# ---------------------------------------------------------------- files


def native_path(root: str | Path, split: str) -> Path:
    return Path(root) / NATIVE_FILE.format(split=split)


def parquet_paths(root: str | Path, split: str, glob_fn: Callable[[str], list] | None = None) -> list[str]:
    """``sorted(glob("data/{split}-*.parquet"))``; ``glob_fn`` is the (streaming-patched) ``glob.glob``."""
    import glob as _glob

    return sorted((glob_fn or _glob.glob)(str(Path(root) / PARQUET_GLOB.format(split=split))))


def confine_files(root: str | Path, files: Sequence[str], split: str, links: bool = True) -> None:
    """Every local release file a split reads (the native file, the shards the glob found) is a regular file
    (a FIFO named ``data/test-0.parquet`` would block the build on open) and, with ``links``, lies inside
    ``root`` after symbolic links: a shard or ``data/`` linked out of a user-given release folder raises
    :class:`ReleaseFormatError` naming it (``perckit.paths.resolve_under``). The builder passes ``links=True``
    for a ``data_dir`` release; a Hub snapshot's files are links into the Hub cache made by huggingface_hub."""
    import stat

    base = os.path.abspath(root)
    for p in files:
        if "://" in str(p):  # a remote (streaming) path: nothing local to follow
            continue
        rel = os.path.relpath(os.path.abspath(p), base).replace(os.sep, "/")
        where = f"M4Seg {split} split: release file {rel!r}"
        if links:
            resolve_under(root, rel, where)
        try:
            mode = os.stat(p).st_mode
        except OSError as e:
            raise ReleaseFormatError(f"{where}: cannot be read ({e})") from None
        if not stat.S_ISREG(mode):
            raise ReleaseFormatError(f"{where}: expected a regular file, got {'a folder' if stat.S_ISDIR(mode) else 'a FIFO, device or socket'}")


def resolve_source(root: str | Path, split: str, source: str, glob_fn: Callable | None = None) -> str:
    """``"auto"`` -> ``"parquet"`` when ``data/{split}-*.parquet`` exists, else ``"native"``.

    The Parquet files are the Hub's rows and carry the release's own ``example_id`` and ``image_id``; a native
    file without them gets derived ids (``pair_id``, ``pair_id#k``) and path-stem image ids, which need not be
    the Hub's. So ``"auto"`` prefers the Parquet wherever both exist (issue 14) and reads the native file only
    for a split that has no Parquet shard.

    Raises :class:`ReleaseNotFoundError` naming both expected paths when the split has neither file.
    """
    check_choice("source", source, SOURCES)
    has_native = native_path(root, split).is_file()
    has_parquet = bool(parquet_paths(root, split, glob_fn))
    expected = f"{NATIVE_FILE.format(split=split)!r} (native) or {PARQUET_GLOB.format(split=split)!r} (Parquet)"
    if source == "auto":
        if has_parquet:
            return "parquet"
        if has_native:
            return "native"
        raise ReleaseNotFoundError(f"M4Seg {split} split: neither {expected} found under the release root {str(root)!r}")
    if source == "native" and not has_native:
        raise ReleaseNotFoundError(
            f"M4Seg {split} split: source='native' but {NATIVE_FILE.format(split=split)!r} was not found under "
            f"{str(root)!r} (expected {expected}; source='auto' picks whichever exists)"
        )
    if source == "parquet" and not has_parquet:
        raise ReleaseNotFoundError(
            f"M4Seg {split} split: source='parquet' but no {PARQUET_GLOB.format(split=split)!r} was found under "
            f"{str(root)!r} (expected {expected}; source='auto' picks whichever exists)"
        )
    return source


# ---------------------------------------------------------------- conversion state


@dataclass
class ConvertState:
    """What a conversion remembers while it streams a split (warnings shown once or a few times)."""

    split: str
    file: str
    size_order: str = "auto"
    swapped_images: int = 0
    span_warnings: int = 0
    #: no warnings (the early check of a split's first example, converted again during generation)
    quiet: bool = False

    def __post_init__(self) -> None:
        check_choice("native_image_size_order", self.size_order, SIZE_ORDERS)

    def where(self, example_id: Any) -> str:
        if example_id is None:
            return f"M4Seg {self.split} split, {self.file}: an example without an id"
        return f"M4Seg {self.split} split, {self.file}: example {example_id!r}"

    def warn_spans(self, example_id: str, problems: list[str]) -> None:
        for p in problems:
            self.span_warnings += 1
            if self.span_warnings <= MAX_WARNINGS and not self.quiet:
                logger.warning("%s: %s (entity-code consistency, kept as released)", self.where(example_id), p)

    def finish(self) -> None:
        if self.span_warnings > MAX_WARNINGS:
            logger.warning(
                "M4Seg %s split, %s: %d entity-code consistency warnings in total (first %d shown)",
                self.split, self.file, self.span_warnings, MAX_WARNINGS,
            )
        if self.swapped_images > 1:
            logger.info("M4Seg %s split, %s: %d image sizes read as [W, H] and swapped", self.split, self.file, self.swapped_images)


def _check_span(span: Any, answer: str, where: str) -> list[int]:
    if not isinstance(span, (list, tuple)) or len(span) != 2:
        raise ReleaseFormatError(f"{where}.answer_span: expected [start, end) (2 ints), found {_short(span)}")
    s = _int(span[0], where, ".answer_span[0]")
    e = _int(span[1], where, ".answer_span[1]")
    if not 0 <= s <= e <= len(answer):
        raise ReleaseFormatError(
            f"{where}.answer_span: expected 0 <= start <= end <= {len(answer)} (the answer's length), found {[s, e]}"
        )
    return [s, e]


def _check_image_size(h: int, w: int, where: str) -> None:
    """An image's [H, W]: positive, and small enough that a mask of it could be decoded (``rle.MAX_PIXELS``)."""
    if h <= 0 or w <= 0:
        raise ReleaseFormatError(f"{where}: expected a positive height and width, found [H, W] = {[h, w]}")
    if h * w > rle_ops.MAX_PIXELS:
        raise ReleaseFormatError(
            f"{where}: [H, W] = {[h, w]} is {h * w} pixels, more than the limit of {rle_ops.MAX_PIXELS} "
            "(a decoded mask would need gigabytes)"
        )


def _check_image_index(k: Any, n_images: int, where: str) -> int:
    k = _int(k, where, ".image_index")
    if not 1 <= k <= n_images:
        raise ReleaseFormatError(f"{where}.image_index: expected 1..{n_images} (1-based, {n_images} image(s)), found {k}")
    return k


# ---------------------------------------------------------------- native JSON -> row


def _size_orders(sizes: Sequence[Any], mask_sizes: Sequence[set], where: str) -> list[tuple[int, int, str | None]]:
    """Per image: (a, b, what its masks say): "hw", "wh", None (no mask, or square) or "neither"."""
    out = []
    for k, (size, ms) in enumerate(zip(sizes, mask_sizes)):
        w = f"{where}: image_sizes[{k}]"
        if not isinstance(size, (list, tuple)) or len(size) != 2:
            raise ReleaseFormatError(f"{w}: expected [H, W] (2 ints), found {_short(size)}")
        a, b = parse_int(size[0], w), parse_int(size[1], w)
        _check_image_size(a, b, w)
        if not ms or (a == b and ms == {(a, b)}):
            says = None
        elif ms == {(a, b)}:
            says = "hw"
        elif ms == {(b, a)}:
            says = "wh"
        else:
            says = "neither"
        out.append((a, b, says))
    return out


def resolve_image_sizes(sizes: Sequence[Any], mask_sizes: Sequence[set], state: ConvertState, where: str) -> list[list[int]]:
    """[H, W] of every image from ``image_sizes`` under ``native_image_size_order``.

    "auto" takes each size as [H, W] and compares it with the size of that image's RLE masks: when it matches
    only reversed it is swapped (one warning per file); when it matches neither it raises. An image without a
    decisive mask (none, polygons only, or square) follows the other images of the same example, else [H, W].
    """
    orders = _size_orders(sizes, mask_sizes, where)
    if state.size_order == "hw":
        return [[a, b] for a, b, _ in orders]
    if state.size_order == "wh":
        return [[b, a] for a, b, _ in orders]
    decided = [s for _, _, s in orders if s in ("hw", "wh")]
    fallback = decided[0] if decided else "hw"
    out = []
    for k, (a, b, says) in enumerate(orders):
        if says == "neither":
            raise ReleaseFormatError(
                f"{where}: image_sizes[{k}] = {[a, b]} matches neither [H, W] nor [W, H] of its masks' size(s) "
                f"{sorted(list(s) for s in mask_sizes[k])}"
            )
        order = says or fallback
        if order == "wh" and a != b:
            state.swapped_images += 1
            if state.swapped_images == 1 and not state.quiet:
                logger.warning(
                    "%s: image_sizes[%d] = %s matches its masks' size only as [W, H]; native image sizes are read as "
                    "[W, H] wherever the masks say so (native_image_size_order='auto'; this warning is shown once per file)",
                    where, k, [a, b],
                )
        out.append([b, a] if order == "wh" else [a, b])
    return out


def native_to_row(
    example: Mapping[str, Any],
    state: ConvertState,
    example_id: str | None = None,
) -> dict:
    """One native example as a builder row (the only place the native format is interpreted).

    ``example_id``: the id to use when the example has none (the builder derives it from ``pair_id``).
    Masks may be compressed RLE (str or bytes counts), uncompressed RLE or polygons; the bbox is always
    recomputed from the mask; missing ``answer_span`` values are derived from the entity codes.
    """
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
    answer = _alias(example, EXAMPLE_ALIASES["answer"])
    if not isinstance(answer, str):
        raise ReleaseFormatError(f"{where}: 'a'/'answer': expected a string, found {_short(answer)}")
    question = _alias(example, EXAMPLE_ALIASES["question"])
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
    if ids is not None and (not isinstance(ids, list) or len(ids) != len(paths)):
        raise ReleaseFormatError(f"{where}: 'image_ids': expected one id per image path ({len(paths)}), found {_short(ids)}")
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
    keys = codes.sorted_img_keys(groups.keys(), f"{where}: groundings")
    per_image: dict[int, list] = {}
    key_of: dict[int, str] = {}
    for key in keys:
        k = codes.img_key_index(key)
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
    for k in range(1, n + 1):
        ms = set()
        for g in per_image.get(k, ()):
            m = _alias(g, GROUNDING_ALIASES["mask"]) if isinstance(g, _MAPS) else None
            if isinstance(m, _MAPS) and isinstance(m.get("size"), (list, tuple)) and len(m["size"]) == 2:
                try:
                    ms.add((int(m["size"][0]), int(m["size"][1])))
                except (TypeError, ValueError, OverflowError):
                    pass
        mask_sizes.append(ms)
    hws = resolve_image_sizes(sizes, mask_sizes, state, where)
    images = []
    for k in range(1, n + 1):
        hw = hws[k - 1]
        # a path relative to the user's image_root: an absolute path or a '..' never reaches a row
        path = paths[k - 1]
        check_relative(path, f"{where}: image_paths[{k - 1}]")
        image_id = str(ids[k - 1]) if ids is not None else os.path.splitext(os.path.basename(path))[0]
        images.append({"image_id": image_id, "path": path, "height": hw[0], "width": hw[1]})

    derived: dict[int, list[list[int]]] = {}
    need = {k: len(gs) for k, gs in per_image.items() if any(not isinstance(g, _MAPS) or g.get("answer_span") is None for g in gs)}
    if need:
        derived = codes.derive_spans(answer, need, where)

    groundings = []
    for k in sorted(per_image):
        hw = [images[k - 1]["height"], images[k - 1]["width"]]
        for i, g in enumerate(per_image[k]):
            gw = f"{where}: groundings.img_{k}[{i}]"
            if not isinstance(g, _MAPS):
                raise ReleaseFormatError(f"{gw}: expected a grounding object, found {_short(g)}")
            mask_obj = _alias(g, GROUNDING_ALIASES["mask"])
            if mask_obj is None:
                raise ReleaseFormatError(f"{gw}.segmentation: expected a mask (RLE or polygons), found none")
            mask = rle_ops.to_rle(mask_obj, size=hw, where=f"{gw}.segmentation (image {k}, [H, W] = {hw})")
            span = g.get("answer_span")
            span = _check_span(span, answer, gw) if span is not None else derived[k][i]
            name = _alias(g, GROUNDING_ALIASES["name"])
            groundings.append({
                "image_index": k,
                "name": None if name is None else str(name),
                "annotation_ids": _id_list(_alias(g, GROUNDING_ALIASES["annotation_ids"])),
                "object_annotation_id": _str_or_none(_alias(g, GROUNDING_ALIASES["object_annotation_id"])),
                "answer_span": span,
                "bbox_xywh": rle_ops.to_bbox(mask),
                "mask": mask,
            })
    problems = codes.span_code_problems(answer, groundings)
    if problems:
        state.warn_spans(eid, problems)
    return {
        "example_id": eid,
        "pair_id": pid,
        "dataset_name": dataset_name,
        "question_type": _str_or_none(_alias(example, EXAMPLE_ALIASES["question_type"])),
        "granularity": _str_or_none(granularity),
        "question": None if question is None else str(question),
        "answer": answer,
        "images": images,
        "groundings": groundings,
    }


# ---------------------------------------------------------------- Parquet record -> row


def parquet_to_row(rec: Mapping[str, Any], state: ConvertState) -> dict:
    """One Parquet row (as ``to_pylist`` gives it) as a builder row: renamed, ids as str, every list checked."""
    if not isinstance(rec, _MAPS):
        raise ReleaseFormatError(f"M4Seg {state.split} split, {state.file}: expected each row to be a record, found {_short(rec)}")
    eid = _alias(rec, PARQUET_ALIASES["example_id"])
    if eid is None:
        raise ReleaseFormatError(f"{state.where(None)}: expected a non-null 'example_id', found {_short(eid)}")
    eid = str(eid)
    where = state.where(eid)
    answer = _alias(rec, PARQUET_ALIASES["answer"])
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
        mask_obj = _alias(g, PARQUET_GROUNDING_ALIASES["mask"])
        if mask_obj is None:
            raise ReleaseFormatError(f"{gw}.segmentation: expected a compressed RLE {{size, counts}}, found none")
        mask = rle_ops.to_rle(mask_obj, size=hw, where=f"{gw}.segmentation (image {k}, [H, W] = {hw})")
        bbox = _alias(g, PARQUET_GROUNDING_ALIASES["bbox_xywh"])
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
            "bbox_xywh": [float(v) for v in bbox],
            "mask": mask,
        })
    problems = codes.span_code_problems(answer, groundings)
    if problems:
        state.warn_spans(eid, problems)
    question = _alias(rec, PARQUET_ALIASES["question"])
    return {
        "example_id": eid,
        "pair_id": _str_or_none(_alias(rec, PARQUET_ALIASES["pair_id"])),
        "dataset_name": _str_or_none(_alias(rec, PARQUET_ALIASES["dataset_name"])),
        "question_type": _str_or_none(_alias(rec, PARQUET_ALIASES["question_type"])),
        "granularity": _str_or_none(_alias(rec, PARQUET_ALIASES["granularity"])),
        "question": None if question is None else str(question),
        "answer": answer,
        "images": images,
        "groundings": groundings,
    }


# ---------------------------------------------------------------- duplicate ids in flat memory


class IdGuard:
    """Raises on a repeated example id, keeping 8 bytes per id (a sorted int64 array of hashes).

    Ids are checked in blocks of 10,000 against the sorted array, so memory stays flat-ish (6 MB for the
    743k train ids) and the cost is linear. A 64-bit hash collision would be reported as a duplicate
    (probability about 1e-8 for the whole train split).
    """

    BLOCK = 10_000

    def __init__(self, where: str) -> None:
        self.where = where
        self._sorted = np.empty(0, dtype=np.int64)
        self._pending: dict[int, str] = {}
        self.count = 0

    def _dup(self, eid: str) -> ReleaseFormatError:
        return ReleaseFormatError(f"{self.where}: duplicate example_id {eid!r} (example ids must be unique within a split)")

    def add(self, eid: str) -> None:
        h = hash(eid)
        if h in self._pending:
            raise self._dup(eid)
        self._pending[h] = eid
        self.count += 1
        if len(self._pending) >= self.BLOCK:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        arr = np.fromiter(self._pending.keys(), dtype=np.int64, count=len(self._pending))
        arr.sort()
        pos = np.searchsorted(self._sorted, arr)
        if self._sorted.size:
            hit = self._sorted[np.minimum(pos, self._sorted.size - 1)] == arr
            if hit.any():
                raise self._dup(self._pending[int(arr[int(np.argmax(hit))])])
        self._sorted = np.insert(self._sorted, pos, arr)
        self._pending.clear()


def occurrence_index(pair_ids: Sequence[str] | np.ndarray) -> np.ndarray:
    """Per example: -1 when its pair_id is unique in the split, else its 0-based occurrence in file order."""
    h = np.asarray([hash(p) for p in pair_ids] if not isinstance(pair_ids, np.ndarray) else pair_ids, dtype=np.int64)
    out = np.full(h.size, -1, dtype=np.int32)
    if h.size == 0:
        return out
    order = np.argsort(h, kind="stable")
    hs = h[order]
    starts = np.flatnonzero(np.concatenate(([True], hs[1:] != hs[:-1])))
    lengths = np.diff(np.concatenate((starts, [hs.size])))
    run_start = np.repeat(starts, lengths)
    rank = np.arange(hs.size) - run_start
    dup = np.repeat(lengths > 1, lengths)
    out[order[dup]] = rank[dup]
    return out


def derived_example_id(pair_id: str, occurrence: int) -> str:
    """[inferred] id of a native example without ``example_id``: ``pair_id`` when unique, else ``pair_id#k``."""
    return pair_id if occurrence < 0 else f"{pair_id}#{occurrence}"


# ---------------------------------------------------------------- native streaming




@dataclass
class NativeScan:
    """What the prepass over a native file learnt (only run when needed: see the builder)."""

    kind: str  #: "list" or "object"
    count: int | None = None
    #: per example: -1 or the occurrence of a repeated pair_id (only when the examples have no example_id)
    occurrence: np.ndarray | None = None
    id_key: str | None = None  #: the key the prepass read ("example_id" or a pair-id alias)
    #: stable_hash of that key's value for every example: the readers check they see the same examples
    id_hashes: np.ndarray | None = field(default=None, repr=False)
    #: offset in the decompressed stream of every example's "image_paths" key (fast prepass only)
    key_offsets: np.ndarray | None = field(default=None, repr=False)


def _iter_items(ijson_mod: Any, gz: BinaryIO, kind: str, where: str = "native M4Seg file", first: int = 0) -> Iterator[tuple[str | None, Any]]:
    """Top-level items, a repeated key in any object refused (:func:`perckit.m4seg.native.iter_items`)."""
    return iter_items(ijson_mod, gz, kind, where, first)


def first_example(opener: Callable, path: str, where: str) -> tuple[str, Mapping | None, str | None]:
    """(top-level kind, the first example or None, its key when the top level is an object)."""
    ijson = _ijson()
    with opener(path, "rb") as f:
        kind = top_level_kind(f, where)
    with opener(path, "rb") as f:
        with read_errors(ijson, where):
            for key, ex in _iter_items(ijson, _gunzip(f, where), kind, where):
                return kind, ex, None if key is None else str(key)
    return kind, None, None


def stable_hash(text: str) -> int:
    """A 64-bit hash of a str that is the same in every process (``hash()`` is salted per interpreter)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little", signed=True)




def scan_native(opener: Callable, path: str, split: str, need_count: bool = False, size_order: str = "auto") -> NativeScan:
    """The prepass over a native file, run only when it is needed.

    It reads the first example. When the examples have an ``example_id`` and no count is needed
    (``num_proc`` <= 1), that is all. Otherwise it reads one field per example, keeping 8 bytes per
    example: the ``example_id`` (checked unique over the whole split) or, without ids, the pair id, from
    which the occurrence of every repeated pair_id is derived. The field is read with a regex over the
    decompressed bytes (cross-checked against the number of examples) or, when that check fails, with
    ijson's prefix filter. The readers verify every example against the prepass (``id_hashes``).
    """
    ijson = _ijson()
    where = f"M4Seg {split} split, {Path(path).name}"
    kind, first, first_key = first_example(opener, path, where)
    if first is not None and not isinstance(first, Mapping):
        raise ReleaseFormatError(f"{where}: example 0: expected an object, found {_short(first)}")
    if first is not None:
        # The first example converted (and dropped) here: a file of another format fails before generation.
        native_to_row(first, ConvertState(split, Path(path).name, size_order, quiet=True), first_key)
    if kind != "list" or first is None:
        return NativeScan(kind=kind, count=None if first is not None else 0)
    if first.get("example_id") is not None:
        if not need_count:
            return NativeScan(kind=kind)
        key = "example_id"
    else:
        key = next((k for k in EXAMPLE_ALIASES["pair_id"] if first.get(k) is not None), None)
        if key is None:
            raise ReleaseFormatError(f"{where}: example 0: expected an 'example_id' or a 'pair_id'/'id', found neither (keys {sorted(first)})")

    def collect(fast: bool) -> tuple[_Int64Buffer | None, _Int64Buffer | None, ReleaseFormatError | None]:
        hashes, offsets = _Int64Buffer(), _Int64Buffer()
        guard = IdGuard(where)
        dup: list[ReleaseFormatError] = []

        def on_value(v: str) -> None:
            hashes.append(stable_hash(v))
            if key == "example_id" and not dup:
                try:
                    guard.add(v)
                except ReleaseFormatError as e:
                    dup.append(e)

        if fast:
            try:
                if not _fast_scan(opener, path, key, on_value, offsets.append, where):
                    return None, None, None
            except GZIP_ERRORS as e:
                raise ReleaseFormatError(f"{where}: unreadable gzip data ({type(e).__name__}: {e})") from None
        else:
            offsets = None
            with opener(path, "rb") as f:
                try:
                    for v in ijson.items(_gunzip(f, where), f"item.{key}"):
                        on_value(str(v))
                except ijson.JSONError as e:
                    raise ReleaseFormatError(f"{where}: invalid JSON: {_json_error(e)}") from None
                except GZIP_ERRORS as e:
                    raise ReleaseFormatError(f"{where}: unreadable gzip data ({type(e).__name__}: {e})") from None
        if key == "example_id" and not dup:
            try:
                guard.flush()
            except ReleaseFormatError as e:
                dup.append(e)
        return hashes, offsets, (dup[0] if dup else None)

    hashes, offsets, dup = collect(fast=True) if key in _FAST_KEYS else (None, None, None)
    if hashes is None:
        hashes, offsets, dup = collect(fast=False)
    if dup is not None:
        raise dup
    arr = hashes.array()
    occ = occurrence_index(arr) if key != "example_id" else None
    return NativeScan(kind=kind, count=int(arr.size), occurrence=occ, id_key=key, id_hashes=arr,
                      key_offsets=None if offsets is None else offsets.array())


class _Int64Buffer:
    """A growable int64 array (8 bytes per value, amortised appends)."""

    def __init__(self) -> None:
        self._chunks: list[np.ndarray] = []
        self._cur: list[int] = []

    def append(self, v: int) -> None:
        self._cur.append(v)
        if len(self._cur) >= 65536:
            self._chunks.append(np.asarray(self._cur, dtype=np.int64))
            self._cur = []

    def array(self) -> np.ndarray:
        parts = self._chunks + ([np.asarray(self._cur, dtype=np.int64)] if self._cur else [])
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


@dataclass
class NativeShard:
    """Examples ``[start, stop)`` of one native file (``stop=None``: to the end)."""

    path: str
    start: int = 0
    stop: int | None = None
    kind: str = "list"
    #: occurrence of repeated pair_ids for examples start..stop (None: ids come from the file)
    occurrence: np.ndarray | None = field(default=None, repr=False)
    #: the key the prepass read and the stable_hash of its value for examples start..stop
    id_key: str | None = None
    id_hashes: np.ndarray | None = field(default=None, repr=False)
    #: offset of example start-1's "image_paths" key in the decompressed stream: reading starts there
    seek_from: int | None = None


class _Prefixed:
    """A read-only binary stream: ``head`` bytes, then the rest of ``raw`` (what ijson reads)."""

    def __init__(self, head: bytes, raw: BinaryIO) -> None:
        self._head, self._raw = head, raw

    def read(self, size: int = -1) -> bytes:
        if self._head:
            if size is None or size < 0:
                out, self._head = self._head + self._raw.read(), b""
                return out
            out, self._head = self._head[:size], self._head[size:]
            return out
        return self._raw.read(size)


def _seek_item(gz: BinaryIO, key_offset: int, where: str) -> bytes:
    """Discard the decompressed stream up to ``key_offset`` (a key of the example before the wanted one),
    find the end of that example with a string-aware bracket scan, and return the bytes that follow its
    comma (the wanted example starts there; the stream continues after them)."""
    remaining = key_offset
    while remaining > 0:
        b = gz.read(min(remaining, 1 << 20))
        if not b:
            raise ReleaseFormatError(f"{where}: the file ends before byte {key_offset} the prepass recorded")
        remaining -= len(b)
    depth, in_str, esc, closed = 2, False, False, False  # inside the list (1) and the example object (2)
    while True:
        chunk = gz.read(1 << 16)
        if not chunk:
            raise ReleaseFormatError(f"{where}: the file ends inside the example before a shard")
        for i, c in enumerate(chunk):
            if closed:
                if c in b" \t\r\n":
                    continue
                if c == 0x2C:  # ","
                    return chunk[i + 1 :]
                raise ReleaseFormatError(f"{where}: expected ',' between examples at a shard start, found {chr(c)!r}")
            if in_str:
                if esc:
                    esc = False
                elif c == 0x5C:  # backslash
                    esc = True
                elif c == 0x22:  # quote
                    in_str = False
            elif c == 0x22:
                in_str = True
            elif c in b"{[":
                depth += 1
            elif c in b"}]":
                depth -= 1
                if depth == 1:
                    closed = True


def iter_native(opener: Callable, shards: Sequence[NativeShard], split: str, size_order: str = "auto") -> Iterator[dict]:
    """Rows of contiguous shards of one native file, parsed item by item in one pass.

    A shard with ``seek_from`` skips the examples before it by decompressing only; otherwise they are
    parsed and dropped. Every example is checked against the prepass's id hashes when there are some.
    """
    if not shards:
        return
    ijson = _ijson()
    path = shards[0].path
    start, stop = shards[0].start, shards[-1].stop
    occ_parts = [s.occurrence for s in shards]
    occurrence = np.concatenate(occ_parts) if all(o is not None for o in occ_parts) else None
    hash_parts = [s.id_hashes for s in shards]
    id_hashes = np.concatenate(hash_parts) if all(h is not None for h in hash_parts) else None
    id_key = shards[0].id_key
    state = ConvertState(split, Path(path).name, size_order)
    where = f"M4Seg {split} split, {Path(path).name}"

    def rows(f: BinaryIO) -> Iterator[dict]:
        gz = _gunzip(f, where)
        first = 0
        if shards[0].seek_from is not None and start > 0 and shards[0].kind == "list":
            gz = _Prefixed(b"[" + _seek_item(gz, shards[0].seek_from, where), gz)
            first = start
        for i, (key, ex) in enumerate(_iter_items(ijson, gz, shards[0].kind, where, first), first):
            if i < start:
                continue
            if stop is not None and i >= stop:
                break
            j = i - start
            if id_hashes is not None and isinstance(ex, _MAPS):
                v = ex.get(id_key)
                if j >= len(id_hashes) or v is None or stable_hash(str(v)) != id_hashes[j]:
                    raise ReleaseFormatError(
                        f"{where}: example {i} does not have the {id_key} the prepass read there ({v!r}); the file "
                        "changed during the build or defeats the prepass: build it with num_proc=1"
                    )
            fallback = None
            if key is not None:
                fallback = str(key)
            elif isinstance(ex, _MAPS) and ex.get("example_id") is None:
                pid = _alias(ex, EXAMPLE_ALIASES["pair_id"])
                if pid is not None:
                    if occurrence is None:
                        raise ReleaseFormatError(
                            f"{state.where(str(pid))}: has no 'example_id' while the file's first example has one; "
                            "give every example an example_id or none"
                        )
                    fallback = derived_example_id(str(pid), int(occurrence[j]))
            yield native_to_row(ex, state, fallback)

    # The parse runs in ``rows``; only pulling the next row translates reading errors, and the ``yield`` is
    # outside any ``try`` (native.pull_translating): a consumer that never exhausts the iterator leaves it
    # suspended until interpreter exit, and closing it then must not evaluate ``except`` clauses.
    errors, convert = _reading_error(ijson, where)
    with opener(path, "rb") as f:
        yield from _pull_translating(rows(f), errors, convert)
    state.finish()


#: Cost of skipping an example before a shard, relative to converting it: parsing it with ijson (about
#: 0.06-0.12 measured), or only decompressing it when the prepass recorded byte offsets (about 0.01).
SKIP_COST_PARSE = 0.08
SKIP_COST_SEEK = 0.01


def shard_bounds(n: int, num_shards: int, skip_cost: float = SKIP_COST_PARSE) -> list[int]:
    """Boundaries of ``num_shards`` contiguous ranges over ``n`` examples with equal expected work.

    Shard j skips its ``b_j`` predecessors (cost ``skip_cost`` each) and converts its own: equal work T
    gives len_j = T - skip_cost * b_j, so b_{j+1} = (1 - r) b_j + T and T = n r / (1 - (1 - r)^num_shards).
    """
    r = float(skip_cost)
    t = n / num_shards if r <= 0 else n * r / (1 - (1 - r) ** num_shards)
    bounds, b = [0], 0.0
    for _ in range(num_shards - 1):
        b = (1 - r) * b + t
        bounds.append(int(round(b)))
    bounds.append(n)
    return bounds


def native_shards(path: str, scan: NativeScan | None, num_shards: int) -> list[NativeShard]:
    """Split a native file into ``num_shards`` contiguous example ranges (one shard when the count is unknown).

    The last range is open-ended, so every example is read even if the count were off.
    """
    kind = scan.kind if scan else "list"
    occ = scan.occurrence if scan else None
    hashes = scan.id_hashes if scan else None
    key = scan.id_key if scan else None
    if scan is None or scan.count is None or num_shards <= 1 or scan.count < 2 or kind != "list":
        return [NativeShard(path, 0, None, kind, occ, key, hashes)]
    n = scan.count
    offsets = scan.key_offsets
    bounds = shard_bounds(n, min(num_shards, n), SKIP_COST_SEEK if offsets is not None else SKIP_COST_PARSE)
    shards = []
    for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        shards.append(NativeShard(
            path, a, None if j == len(bounds) - 2 else b, kind,
            None if occ is None else occ[a:b], key, None if hashes is None else hashes[a:b],
            int(offsets[a - 1]) if offsets is not None and a > 0 else None,
        ))
    return shards


# ---------------------------------------------------------------- Parquet streaming


@dataclass
class ParquetShard:
    """Row groups ``[rg_start, rg_stop)`` of one Parquet file (``rg_stop=None``: every row group)."""

    path: str
    rg_start: int = 0
    rg_stop: int | None = None


#: Columns (one of the names) and nested fields every M4Seg Parquet shard must have [card].
PARQUET_COLUMNS: dict[str, tuple[str, ...]] = {
    "example_id": ("example_id",),
    "a": ("a", "answer"),
    "images": ("images",),
    "groundings": ("groundings",),
}
PARQUET_IMAGE_FIELDS = ("height", "width")
PARQUET_GROUNDING_FIELDS: dict[str, tuple[str, ...]] = {
    "image_index": ("image_index",),
    "answer_span": ("answer_span",),
    "segmentation": PARQUET_GROUNDING_ALIASES["mask"],
}
#: What pyarrow raises on a corrupt or truncated file (a bad footer, a bad data page).
PARQUET_ERRORS = (OSError, EOFError, ValueError)


def open_parquet(f: BinaryIO, where: str) -> Any:
    """``pyarrow.parquet.ParquetFile(f)``; an unreadable file raises :class:`ReleaseFormatError` naming it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(f)
    except (pa.ArrowException, *PARQUET_ERRORS) as e:  # ArrowInvalid on a bad footer, OSError on a cut file
        raise ReleaseFormatError(f"{where}: not a readable Parquet file ({type(e).__name__}: {e})") from None
    check_column_chunk_sizes(pf, where, source=f)  # the footer and the page headers (a footer can lie)
    return pf


def _list_of_struct_fields(arrow_type: Any) -> list[str] | None:
    import pyarrow as pa

    if not (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)):
        return None
    item = arrow_type.value_type
    return [item.field(i).name for i in range(item.num_fields)] if pa.types.is_struct(item) else None


def check_parquet_schema(schema: Any, where: str) -> None:
    """Every column and nested field :func:`parquet_to_row` needs is there (extra ones are fine; types are checked per row)."""
    names = list(schema.names)
    missing = [" or ".join(repr(a) for a in aliases) for aliases in PARQUET_COLUMNS.values() if not any(a in names for a in aliases)]
    if missing:
        raise ReleaseFormatError(
            f"{where}: missing column(s) {', '.join(missing)}; expected the M4Seg columns example_id, pair_id, "
            f"dataset_name, type, granularity, q, a, images, groundings (found {names})"
        )
    for column, required in (("images", {f: (f,) for f in PARQUET_IMAGE_FIELDS}), ("groundings", PARQUET_GROUNDING_FIELDS)):
        arrow_type = schema.field(column).type
        fields = _list_of_struct_fields(arrow_type)
        if fields is None:
            raise ReleaseFormatError(f"{where}: column {column!r}: expected a list of structs, found {arrow_type}")
        lacking = [name for name, aliases in required.items() if not any(a in fields for a in aliases)]
        if lacking:
            raise ReleaseFormatError(
                f"{where}: column {column!r}: its items lack the field(s) {lacking}; expected {sorted(required)} (found {fields})"
            )


def first_row(pf: Any, where: str, state: ConvertState) -> dict | None:
    """The first row of an open Parquet file, converted (None for a file without rows)."""
    import pyarrow as pa

    try:
        batch = next(pf.iter_batches(batch_size=1), None)
    except (pa.ArrowException, *PARQUET_ERRORS) as e:
        raise ReleaseFormatError(f"{where}: rows from 0 on cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})") from None
    if batch is None or batch.num_rows == 0:
        return None
    return parquet_to_row(batch.to_pylist()[0], state)


def parquet_shards(opener: Callable, paths: Sequence[str], rows_per_shard: int = 20_000, split: str = "") -> list[ParquetShard]:
    """One shard per file, or per run of row groups of about ``rows_per_shard`` rows (finer ``num_proc`` shards).

    Reads every file's footer and converts its first row: an unreadable file, a missing column or a file of
    another format raises here, before generation.
    """
    out = []
    for p in paths:
        where = f"M4Seg {split} split, {Path(p).name}"
        with opener(p, "rb") as f:
            pf = open_parquet(f, where)
            check_parquet_schema(pf.schema_arrow, where)
            md = pf.metadata
            first_row(pf, where, ConvertState(split, Path(p).name, quiet=True))
        acc, start = 0, 0
        for rg in range(md.num_row_groups):
            acc += md.row_group(rg).num_rows
            if acc >= rows_per_shard and rg + 1 < md.num_row_groups:
                out.append(ParquetShard(p, start, rg + 1))
                start, acc = rg + 1, 0
        out.append(ParquetShard(p, start, None if start == 0 else md.num_row_groups))
    return out


def iter_parquet(opener: Callable, shards: Sequence[ParquetShard], split: str) -> Iterator[dict]:
    """Rows of Parquet shards in order: ``ParquetFile(open(path, "rb")).iter_batches(batch_size=1000)``."""
    import pyarrow as pa

    for shard in shards:
        name = Path(shard.path).name
        where = f"M4Seg {split} split, {name}"
        state = ConvertState(split, name)
        with opener(shard.path, "rb") as f:
            pf = open_parquet(f, where)
            check_parquet_schema(pf.schema_arrow, where)
            stop = pf.metadata.num_row_groups if shard.rg_stop is None else shard.rg_stop
            groups = list(range(shard.rg_start, stop))
            if not groups:
                continue
            first = sum(pf.metadata.row_group(g).num_rows for g in range(shard.rg_start))
            batches = pf.iter_batches(batch_size=BATCH_SIZE, row_groups=groups)
            i = first
            while True:
                try:
                    batch = next(batches)
                    records = batch.to_pylist()
                except StopIteration:
                    break
                except (pa.ArrowException, *PARQUET_ERRORS) as e:
                    # A corrupt or truncated data page behind an intact footer.
                    raise ReleaseFormatError(
                        f"{where}: rows from {i} on cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})"
                    ) from None
                del batch
                for rec in records:
                    yield parquet_to_row(rec, state)
                i += len(records)
                # Hand Arrow's freed buffers back to the OS so the RSS stays flat over a long split.
                pa.default_memory_pool().release_unused()
        state.finish()


def scan_parquet_ids(opener: Callable, paths: Sequence[str], split: str) -> int:
    """Check example_id uniqueness over every shard of a split (the ``example_id`` column only); returns the count."""
    import pyarrow as pa

    guard = IdGuard(f"M4Seg {split} split, {PARQUET_GLOB.format(split=split)}")
    for p in paths:
        where = f"M4Seg {split} split, {Path(p).name}"
        with opener(p, "rb") as f:
            pf = open_parquet(f, where)
            check_parquet_schema(pf.schema_arrow, where)
            try:
                for batch in pf.iter_batches(batch_size=65536, columns=["example_id"]):
                    for v in batch.column(0).to_pylist():
                        guard.add(str(v))
            except (pa.ArrowException, *PARQUET_ERRORS) as e:
                raise ReleaseFormatError(
                    f"{where}: the example_id column cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})"
                ) from None
    guard.flush()
    return guard.count


# ---------------------------------------------------------------- source images (images.py)

from .images import MAX_IMAGE_BYTES, iter_image_paths, missing_images, read_image_bytes  # noqa: E402,F401


__all__ = [
    "ConvertState", "IdGuard", "NativeScan", "NativeShard", "ParquetShard", "iter_native", "iter_parquet",
    "native_shards", "native_to_row", "occurrence_index", "parquet_shards", "parquet_to_row", "resolve_source",
    "scan_native", "scan_parquet_ids",
]
