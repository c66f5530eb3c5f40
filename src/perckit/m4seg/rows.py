"""One M⁴Seg example to one typed builder row, from either source, with every check of its fields.

:func:`native_to_row` is the only place the native format is interpreted (its [inferred] alias tables are below);
the Parquet records are converted a record batch at a time by :mod:`perckit.m4seg.read.parquet`, which uses the
field rules here (``_check_span``, ``_check_image_size``, ``_check_image_index``, ``_id_list``) to name a refused
value. Each takes a :class:`ConvertState`, which names the split and file in every message and counts the warnings
of a split. No I/O here: the readers (:mod:`perckit.m4seg.read.native`, :mod:`perckit.m4seg.read.parquet`) hand the
examples in."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .. import rle as rle_ops
from ..errors import InferredShapeError, PerckitError, ReleaseFormatError, check_choice, inferred_reading, short_repr as _short
from ..io.jsonio import parse_int
from ..io.paths import MAX_PATH_CHARS, check_relative
from .metric import codes
from .features import SOURCE_GRANULARITY

logger = logging.getLogger("perckit.m4seg.release")  # the release readers' one logger (its name is public: kept as it was)

SIZE_ORDERS = ("auto", "hw", "wh")
#: Warnings of one kind shown per split before they are only counted.
MAX_WARNINGS = 5
#: Image paths a :class:`ConvertState` remembers the stem of (a few MB of strings at most).
MAX_STEMS = 1 << 16

# ---------------------------------------------------------------- alias tables [inferred]

#: Row field -> the native example keys that may hold it, first present wins.
EXAMPLE_ALIASES: dict[str, tuple[str, ...]] = {
    "example_id": ("example_id",),
    "pair_id": ("pair_id", "id"),
    "q": ("q", "question"),
    "a": ("a", "answer"),
    "type": ("type", "question_type"),
    "dataset_name": ("dataset_name", "dataset", "source"),
    "granularity": ("granularity",),
}
#: Row grounding field -> the native grounding keys that may hold it.
GROUNDING_ALIASES: dict[str, tuple[str, ...]] = {
    "name": ("name", "label", "category"),
    "annotation_ids": ("annotation_ids", "annotation_id", "ann_id", "id"),
    "object_annotation_id": ("object_annotation_id", "object_id"),
    "segmentation": ("segmentation", "mask"),
    "answer_span": ("answer_span",),
}
#: The Parquet field names [card], with ours accepted too.
PARQUET_ALIASES: dict[str, tuple[str, ...]] = {
    "example_id": ("example_id",),
    "pair_id": ("pair_id",),
    "dataset_name": ("dataset_name",),
    "type": ("type", "question_type"),
    "granularity": ("granularity",),
    "q": ("q", "question"),
    "a": ("a", "answer"),
}
PARQUET_GROUNDING_ALIASES: dict[str, tuple[str, ...]] = {
    "bbox": ("bbox", "bbox_xywh"),
    "segmentation": ("segmentation", "mask"),
}


#: isinstance against a tuple starting with dict short-circuits for the dicts orjson and pyarrow produce; the
#: ``collections.abc`` class, not ``typing``'s alias of it, whose ``__instancecheck__`` is Python code.
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
        return list(map(str, v))
    return [str(v)]


# ---------------------------------------------------------------- conversion state


@dataclass
class ConvertState:
    """What a conversion remembers while it streams a split (warnings shown once or a few times)."""

    split: str
    file: str
    size_order: str = "auto"
    swapped_images: int = 0
    span_warnings: int = 0
    inferred_warnings: int = 0
    #: no warnings (the early check of a split's first example, converted again during generation)
    quiet: bool = False
    #: path -> :func:`_image_stem` of the image paths :func:`_plainly_relative` accepted so far (the same images come
    #: back in many examples: 5,542 distinct paths in the 120,234 of the bench's 50,000 examples); at most
    #: :data:`MAX_STEMS` kept
    stems: dict = field(default_factory=dict, repr=False, compare=False)

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

    def warning(self, msg: str, *args: Any) -> None:
        """How :func:`perckit.errors.inferred_reading` warns for this split: the first :data:`MAX_WARNINGS` shown."""
        self.inferred_warnings += 1
        if self.inferred_warnings <= MAX_WARNINGS and not self.quiet:
            logger.warning(msg, *args)

    def finish(self) -> None:
        for count, what in ((self.inferred_warnings, "inferred readings ignored"),
                            (self.span_warnings, "entity-code consistency warnings")):
            if count > MAX_WARNINGS:
                logger.warning("M4Seg %s split, %s: %d %s in total (first %d shown)", self.split, self.file, count, what, MAX_WARNINGS)
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
        a, b = _int(size[0], w), _int(size[1], w)
        _check_image_size(a, b, w)
        one = len(ms) == 1  # (``ms == {(a, b)}`` without building the set)
        if not ms or (a == b and one and (a, b) in ms):
            says = None
        elif one and (a, b) in ms:
            says = "hw"
        elif one and (b, a) in ms:
            says = "wh"
        else:
            says = "neither"
        out.append((a, b, says))
    return out


def resolve_image_sizes(sizes: Sequence[Any], mask_sizes: Sequence[set], state: ConvertState, where: str) -> list[list[int]]:
    """[H, W] of every image from ``image_sizes`` under ``native_image_size_order``.

    "auto" takes each size as [H, W] and compares it with the size of that image's RLE masks: when it matches only
    reversed it is swapped (one warning per file); when it matches neither it raises. An image without a decisive
    mask (none, polygons only, or square) follows the other images of the same example, else [H, W]."""
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


#: Paths :func:`perckit.io.paths.check_relative` always accepts: no leading '/' or '.', no ':' (a drive), no
#: backslash, NUL or other character outside this set, and (checked apart) no '..' anywhere.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_\-./]*")


def _plainly_relative(path: Any) -> bool:
    """True when ``path`` is a path ``check_relative`` accepts, proved by one regex (False: ask it)."""
    return type(path) is str and len(path) <= MAX_PATH_CHARS and ".." not in path and _PLAIN_PATH.fullmatch(path) is not None


def _bboxes(masks: list) -> list[list[float]]:
    """``rle.to_bbox`` of every validated mask (int sizes, str counts, which pycocotools encodes itself), with one
    pycocotools call per 255 masks."""
    out: list[list[float]] = []
    for i in range(0, len(masks), 255):
        part = masks[i : i + 255]
        out.extend(rle_ops._mask.toBbox(part).reshape(len(part), 4).tolist())
    return out


def _image_ids(ids: Any, n: int) -> list:
    """The native ``image_ids`` [inferred]: one string or integer per image path."""
    if not isinstance(ids, list) or len(ids) != n or not all(type(i) in (str, int) for i in ids):
        raise InferredShapeError(f"expected one id (a string or an integer) per image path ({n}), found {_short(ids)}")
    return ids


def _image_stem(path: str) -> str:
    """``os.path.splitext(os.path.basename(path))[0]`` of a path :func:`_plainly_relative` accepted."""
    base = path.rpartition("/")[2]
    i = base.rfind(".")
    return base[:i] if i > 0 and base[:i].lstrip(".") else base


#: ``codes.img_key_index`` of the plain keys img_1 .. img_999 (a dict lookup instead of a regex).
_IMG_INDEX = {f"img_{k}": k for k in range(1, 1000)}


def native_to_row(example: Mapping[str, Any], state: ConvertState, example_id: str | None = None) -> dict:
    """One native example as a builder row: :func:`native_rows` of its :func:`native_parts`."""
    return next(native_rows([native_parts(example, state, example_id)], state))


class NativeParts(NamedTuple):
    """One native example read by :func:`native_parts`: everything but its masks and boxes."""

    #: the builder row, each grounding's ``segmentation`` and ``bbox`` still None
    row: dict
    #: ``(grounding, mask object, [H, W], k, i)`` of each grounding read (``groundings.img_k[i]``), in order
    masks: list
    #: the refusal of a grounding (raised once the masks before it are converted), or None
    error: Exception | None
    #: whether some grounding gave its ``answer_span`` (a derived span is a code of its image: no warning to look for)
    spans_given: bool


def mask_where(state: ConvertState, example_id: str, k: int, i: int, hw: list) -> str:
    """The name of the mask of ``groundings.img_k[i]`` in a message."""
    return f"{state.where(example_id)}: groundings.img_{k}[{i}].segmentation (image {k}, [H, W] = {hw})"


def native_parts(example: Mapping[str, Any], state: ConvertState, example_id: str | None = None) -> NativeParts:
    """One native example read as a builder row but for its masks and boxes (the only place the native format is
    interpreted), which :func:`native_rows` converts for many examples together; a refusal before the groundings
    raises.

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
    need: dict[int, int] = {}  # image k -> its number of groundings, where one has no answer_span
    seg_keys = GROUNDING_ALIASES["segmentation"]
    for k in range(1, n + 1):
        ms = set()
        objs = mask_objs[k] = []
        gs = per_image.get(k, ())
        for g in gs:
            if isinstance(g, _MAPS):
                m = _alias(g, seg_keys)
                if k not in need and g.get("answer_span") is None:
                    need[k] = len(gs)
            else:
                m = None
                need[k] = len(gs)
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
    images, stems = [], state.stems
    for i, (path, hw) in enumerate(zip(paths, hws)):
        # a path relative to the user's image_root: an absolute path or a '..' never reaches a row
        stem = stems.get(path) if type(path) is str else None  # (a path seen before was checked then)
        if stem is None:
            if _plainly_relative(path):
                stem = _image_stem(path)
                if len(stems) < MAX_STEMS:
                    stems[path] = stem
            else:
                check_relative(path, f"{where}: image_paths[{i}]")
                stem = os.path.splitext(os.path.basename(path))[0]
        images.append({"image_id": stem if ids is None else str(ids[i]), "path": path, "height": hw[0], "width": hw[1]})

    derived = codes.derive_spans(answer, need, where) if need else {}

    groundings, masks, error, given = [], [], None, False
    name_keys, id_keys, object_keys = (GROUNDING_ALIASES[f] for f in ("name", "annotation_ids", "object_annotation_id"))
    try:
        for k in sorted(per_image):
            hw, objs, spans = hws[k - 1], mask_objs[k], derived.get(k)
            for i, g in enumerate(per_image[k]):
                # (the message prefix is built only where a check needs it)
                if not isinstance(g, _MAPS):
                    raise ReleaseFormatError(f"{where}: groundings.img_{k}[{i}]: expected a grounding object, found {_short(g)}")
                mask_obj = objs[i]
                if mask_obj is None:
                    raise ReleaseFormatError(f"{where}: groundings.img_{k}[{i}].segmentation: expected a mask (RLE or polygons), found none")
                row_g = {
                    "image_index": k,
                    "name": _str_or_none(_alias(g, name_keys)),
                    "annotation_ids": _id_list(_alias(g, id_keys)),
                    "object_annotation_id": _str_or_none(_alias(g, object_keys)),
                    "answer_span": None,
                    "bbox": None,
                    "segmentation": None,
                }
                groundings.append(row_g)
                masks.append((row_g, mask_obj, hw, k, i))
                span = g.get("answer_span")
                if span is None:
                    row_g["answer_span"] = spans[i]
                else:
                    given = True
                    row_g["answer_span"] = _check_span(span, answer, f"{where}: groundings.img_{k}[{i}]")
    except PerckitError as e:  # after the masks read before it
        error = e
    return NativeParts({
        "example_id": eid,
        "pair_id": pid,
        "dataset_name": dataset_name,
        "type": _str_or_none(_alias(example, EXAMPLE_ALIASES["type"])),
        "granularity": _str_or_none(granularity),
        "q": _str_or_none(_alias(example, EXAMPLE_ALIASES["q"])),
        "a": answer,
        "images": images,
        "groundings": groundings,
    }, masks, error, given)


def native_rows(parts: Sequence[NativeParts], state: ConvertState) -> Iterator[dict]:
    """The rows of :func:`native_parts` in order, their masks converted together (:func:`rle.to_rles`; a mask it
    leaves goes to :func:`rle.to_rle`, which gives it or the precise error) and their boxes computed together. The
    first refusal (a mask, or the part's own error) is raised after the rows before it; each row's entity-code
    warnings are given once its masks are read."""
    jobs = [job for part in parts for job in part.masks]
    converted = iter(rle_ops.to_rles([job[1] for job in jobs], [job[2] for job in jobs]))
    rows, error = [], None
    for row, masks, err, spans_given in parts:
        try:
            for (g, obj, hw, k, i), mask in zip(masks, converted):
                g["segmentation"] = mask or rle_ops.to_rle(obj, size=hw, where=mask_where(state, row["example_id"], k, i, hw))
            if err is not None:
                raise err
        except PerckitError as e:
            error = e
            break
        problems = codes.span_code_problems(row["a"], row["groundings"]) if spans_given else None
        if problems:
            state.warn_spans(row["example_id"], problems)
        rows.append(row)
    groundings = [g for row in rows for g in row["groundings"]]
    for g, box in zip(groundings, _bboxes([g["segmentation"] for g in groundings])):
        g["bbox"] = box
    yield from rows
    if error is not None:
        raise error
