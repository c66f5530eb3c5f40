"""Reading the RefCOCO-M release (Parquet shards, one row per image) and building the rows, and the prediction
files of other tools (JSON Lines, per-image rows) as ``refer_iou`` prediction rows.

The release (Hub: ``moondream/refcoco-m``) is ``data/validation-*.parquet``: one row per image
with the embedded image bytes and the nested ``samples`` (one referred instance each, with its
sentences and one compressed COCO RLE mask). Shards are read with pyarrow in record batches of
64 rows, so memory stays flat in the number of rows. Every row and sample is validated before it
is yielded; errors name the shard, the row, the ``image_id`` and the sample ``id``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

import pyarrow.parquet as pq

from .. import rle as rle_ops
from ..core import segmentation as seg
from ..errors import (InputNotFoundError, PredictionError, ReleaseFormatError, ReleaseNotFoundError, optional_field,
                      short_repr as _short)
from ..io.parquetio import check_column_chunk_sizes
from ..io.paths import relative_label, resolve_under
from ..io.jsonio import iter_json_lines, parse_int
from ..io.images import check_encoded_image
from .features import to_metric_prediction

logger = logging.getLogger(__name__)

SPLIT = "validation"
SHARD_PATTERN = f"data/{SPLIT}-*.parquet"
#: Record batch size of the Parquet reader (rows; each carries one image's bytes).
BATCH_SIZE = 64
#: Top-level columns the builder reads. ``image_meta`` (named in the card prose, absent from its
#: ``dataset_info``) and any other extra column are ignored.
REQUIRED_COLUMNS = ("image", "image_id", "file_name", "samples")
#: Fields of every ``samples`` item, as in the card's ``dataset_info``.
SAMPLE_FIELDS = ("id", "image_id", "category", "supercategory", "label", "sentences", "bbox", "mask")
MASK_FIELDS = ("counts", "size")
IMAGE_FIELDS = ("bytes", "path")


@dataclass
class ReadOptions:
    """What the builder config asks of the reader."""

    allow_empty_masks: bool = False
    check_image_size: bool = True
    #: Read the image column (needed for the rows that carry images and for ``check_image_size``).
    read_images: bool = True


@dataclass
class SplitState:
    """Cross-row checks of one pass over the split: sample ids and image ids seen so far."""

    sample_ids: dict[int, int] = field(default_factory=dict)  # sample id -> image_id
    image_ids: dict[int, str] = field(default_factory=dict)  # image_id -> "shard row i"


# ---------------------------------------------------------------- shards and schema


def find_shards(root: str | Path) -> list[Path]:
    """``sorted(root.glob("data/validation-*.parquet"))``; a missing root or no shard raises naming the pattern."""
    root = Path(root)
    if not root.is_dir():
        raise ReleaseNotFoundError(
            f"RefCOCO-M release folder {str(root)!r} does not exist (expected the release root, the folder that "
            f"holds data/; pass it as data_dir=...)"
        )
    shards = sorted(root.glob(SHARD_PATTERN))
    if not shards:
        raise ReleaseNotFoundError(f"RefCOCO-M: no Parquet shard matches {SHARD_PATTERN!r} under {str(root)!r}")
    # A shard (or the data/ folder) that is a symbolic link out of the release root is refused: its rows,
    # image bytes included, would come from an arbitrary file of this machine.
    return [resolve_under(root, p.relative_to(root).as_posix(), f"RefCOCO-M shard {p.relative_to(root).as_posix()!r}") for p in shards]


def _struct_fields(arrow_type: Any) -> list[str] | None:
    import pyarrow as pa

    return [arrow_type.field(i).name for i in range(arrow_type.num_fields)] if pa.types.is_struct(arrow_type) else None


def check_schema(schema: Any, shard: str) -> None:
    """The Arrow schema of a shard has every required column and nested field (extra ones are fine)."""
    import pyarrow as pa

    names = set(schema.names)
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise ReleaseFormatError(
            f"{shard}: missing column(s) {missing}; the RefCOCO-M release has the columns {list(REQUIRED_COLUMNS)} "
            f"(found {schema.names})"
        )
    image_fields = _struct_fields(schema.field("image").type) or []
    if any(f not in image_fields for f in IMAGE_FIELDS):
        raise ReleaseFormatError(
            f"{shard}: column 'image' must be a struct with fields {list(IMAGE_FIELDS)}, found {schema.field('image').type}"
        )
    samples_type = schema.field("samples").type
    item = samples_type.value_type if pa.types.is_list(samples_type) or pa.types.is_large_list(samples_type) else None
    fields = _struct_fields(item) if item is not None else None
    if fields is None:
        raise ReleaseFormatError(f"{shard}: column 'samples' must be a list of structs, found {samples_type}")
    missing = [f for f in SAMPLE_FIELDS if f not in fields]
    if missing:
        raise ReleaseFormatError(
            f"{shard}: 'samples' items lack the field(s) {missing}; expected {list(SAMPLE_FIELDS)} (found {fields})"
        )
    mask_fields = _struct_fields(item.field("mask").type) or []
    if any(f not in mask_fields for f in MASK_FIELDS):
        raise ReleaseFormatError(
            f"{shard}: 'samples.mask' must be a struct with fields {list(MASK_FIELDS)}, found {item.field('mask').type}"
        )


def open_shard(f: IO[bytes], shard: str) -> Any:
    """The ``pyarrow.parquet.ParquetFile`` of an open shard, its footer, column chunks and schema checked
    (:func:`check_schema`); an unreadable file raises naming the shard."""
    try:
        pf = pq.ParquetFile(f)
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError on a corrupt footer
        raise ReleaseFormatError(f"{shard}: not a readable Parquet file ({type(e).__name__}: {e})") from None
    check_column_chunk_sizes(pf, shard, source=f)
    check_schema(pf.schema_arrow, shard)
    return pf


def iter_records(f: IO[bytes], shard: str, read_images: bool = True) -> Iterator[tuple[int, dict]]:
    """``(row index, row dict)`` of one open shard, read in record batches of :data:`BATCH_SIZE` rows."""
    import pyarrow as pa

    pf = open_shard(f, shard)
    columns = [c for c in REQUIRED_COLUMNS if read_images or c != "image"]
    i = 0
    batches = pf.iter_batches(batch_size=BATCH_SIZE, columns=columns)
    while True:
        try:
            rows = next(batches).to_pylist()
        except StopIteration:
            return
        except (pa.ArrowException, OSError, ValueError, EOFError) as e:
            # A corrupt or truncated data page behind an intact footer.
            raise ReleaseFormatError(
                f"{shard}: rows from {i} on cannot be read (corrupt or truncated Parquet data; {type(e).__name__}: {e})"
            ) from None
        for row in rows:
            yield i, row
            i += 1


# ---------------------------------------------------------------- validation


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReleaseFormatError(f"{where}: expected an integer, got {_short(value)}")
    return value


def check_image_bytes(image: Any, where: str) -> None:
    """The embedded image must carry its bytes. An ``image`` struct with only a ``path`` would make
    ``datasets`` read that path (any file of this machine) when the row is decoded, pushed or converted."""
    data = image.get("bytes") if isinstance(image, Mapping) else None
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise ReleaseFormatError(
            f"{where}: 'image': expected the embedded image {{'bytes', 'path'}} with its bytes, got {_short(image)} "
            "(a path alone is never read)"
        )


def image_size_hw(image: Mapping, where: str) -> list[int]:
    """``[H, W]`` from the header of the embedded image bytes (:func:`check_image_bytes` found them; not decoded);
    a truncated JPEG / PNG raises (:func:`perckit.io.images.check_encoded_image`)."""
    try:
        h, w = check_encoded_image(bytes(image["bytes"]), "image")
    except ReleaseFormatError as e:
        raise ReleaseFormatError(f"{where}: cannot open the embedded image ({e})") from None
    return [h, w]


#: Largest magnitude a ``bbox`` value may have: the column is stored as float32.
_FLOAT32_MAX = 3.4028234663852886e38


def check_bbox(bbox: Any, where: str) -> list[float]:
    """``[x, y, w, h]``: four finite numbers (no bool, no string, no null, within float32), ``w`` and ``h`` >= 0."""
    if not isinstance(bbox, (list, tuple)) or len(bbox) != 4:
        n = len(bbox) if isinstance(bbox, (list, tuple)) else type(bbox).__name__
        raise ReleaseFormatError(f"{where}: 'bbox' must be [x, y, w, h] (4 numbers), got {n} value(s): {_short(bbox)}")
    for k, v in enumerate(bbox):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ReleaseFormatError(f"{where}: 'bbox'[{k}]: expected a number, got {_short(v)} in {_short(bbox)}")
        if not math.isfinite(v) or abs(v) > _FLOAT32_MAX:
            raise ReleaseFormatError(f"{where}: 'bbox'[{k}]: expected a finite number, got {v!r} in {_short(bbox)}")
    if bbox[2] < 0 or bbox[3] < 0:
        raise ReleaseFormatError(f"{where}: 'bbox' [x, y, w, h]: expected w >= 0 and h >= 0, got {_short(bbox)}")
    return [float(v) for v in bbox]


def validate_sample(sample: Any, where: str, image_id: int, options: ReadOptions) -> dict:
    """One ``samples`` item checked and normalised (mask as ``{"size": [H, W], "counts": str}``)."""
    if not isinstance(sample, Mapping):
        raise ReleaseFormatError(f"{where}: expected a sample struct, got {_short(sample)}")
    sid = _int(sample.get("id"), f"{where}: 'id'")
    where = f"{where} (id {sid})"
    sample_image_id = sample.get("image_id")
    if sample_image_id is not None and sample_image_id != image_id:
        raise ReleaseFormatError(f"{where}: 'image_id' is {sample_image_id!r}, expected the row's image_id {image_id}")
    for key in ("category", "supercategory", "label"):
        optional_field(sample.get(key), None, str, "a string (or null)", f"{where}: {key!r}", ReleaseFormatError)
    sentences = optional_field(sample.get("sentences"), [], list, "a list of strings", f"{where}: 'sentences'",
                               ReleaseFormatError)
    if not all(isinstance(s, str) for s in sentences):
        raise ReleaseFormatError(f"{where}: 'sentences': expected a list of strings, found {_short(sentences)}")
    check_bbox(sample.get("bbox"), where)
    mask = rle_ops.validate(sample.get("mask"), where=f"{where}: mask")
    if not options.allow_empty_masks and rle_ops.area(mask) == 0:
        raise ReleaseFormatError(
            f"{where}: the mask has zero area; every RefCOCO-M instance mask is non-empty "
            "(pass allow_empty_masks=True to accept it)"
        )
    out = dict(sample)
    out.update(id=sid, sentences=sentences, mask=mask)
    return out


def validate_row(row: Mapping, shard: str, index: int, options: ReadOptions, state: SplitState | None = None) -> dict:
    """One image row checked and normalised: types, per-sample checks, one mask size per image, the image
    size against the masks (``check_image_size``), and split-wide unique image ids and sample ids."""
    where = f"{shard}: row {index}"
    image_id = _int(row.get("image_id"), f"{where}: 'image_id'")
    where = f"{where} (image_id {image_id})"
    file_name = row.get("file_name")
    if not isinstance(file_name, str):
        raise ReleaseFormatError(f"{where}: 'file_name' must be a string, got {_short(file_name)}")
    samples = optional_field(row.get("samples"), [], list, "a list", f"{where}: 'samples'", ReleaseFormatError)
    if state is not None:
        if image_id in state.image_ids:
            raise ReleaseFormatError(f"{where}: duplicate image_id {image_id} (first seen at {state.image_ids[image_id]})")
        state.image_ids[image_id] = f"{shard}: row {index}"
    if options.read_images:
        check_image_bytes(row.get("image"), where)
    out_samples = [validate_sample(s, f"{where}: sample {j}", image_id, options) for j, s in enumerate(samples)]
    if state is not None:
        for s in out_samples:
            if s["id"] in state.sample_ids:
                raise ReleaseFormatError(
                    f"{where}: duplicate sample id {s['id']} (already used under image_id {state.sample_ids[s['id']]}); "
                    "sample ids, and so the expression ids '<sample_id>:<k>', must be unique across the split"
                )
            state.sample_ids[s["id"]] = image_id
    if out_samples:
        size = out_samples[0]["mask"]["size"]
        for s in out_samples[1:]:
            if s["mask"]["size"] != size:
                raise ReleaseFormatError(
                    f"{where}: sample id {s['id']} has mask size {s['mask']['size']}, but sample id "
                    f"{out_samples[0]['id']} of the same image has {size} ([H, W])"
                )
        if options.check_image_size and options.read_images:
            hw = image_size_hw(row.get("image"), where)
            if hw != size:
                raise ReleaseFormatError(
                    f"{where}: the mask size {size} differs from the image size {hw} ([H, W]; "
                    "pass check_image_size=False to skip this check)"
                )
    out = dict(row)
    out.update(image_id=image_id, samples=out_samples)
    return out


# ---------------------------------------------------------------- rows


def expression_id(sample_id: int, sentence_index: int) -> str:
    """The key of one (image, sample, sentence) example: ``"<sample_id>:<sentence_index>"``."""
    return f"{sample_id}:{sentence_index}"


def image_row(row: Mapping) -> dict:
    """A validated release row as the ``images`` config yields it (as released; extra columns dropped)."""
    return {
        "image": row.get("image"),
        "image_id": row["image_id"],
        "file_name": row["file_name"],
        "samples": [{k: s.get(k) for k in SAMPLE_FIELDS} for s in row["samples"]],
    }


def expression_rows(row: Mapping, with_images: bool = True) -> Iterator[tuple[str, dict]]:
    """``(expression_id, row)`` for every (sample, sentence) of a validated image row, in release order.

    A sample with no sentence yields nothing and logs a warning with its id.
    """
    for s in row["samples"]:
        sentences = s["sentences"]
        if not sentences:
            logger.warning("RefCOCO-M: image_id %s, sample id %s has no sentence; it yields no expression row", row["image_id"], s["id"])
            continue
        h, w = s["mask"]["size"]
        for k, sentence in enumerate(sentences):
            eid = expression_id(s["id"], k)
            out: dict[str, Any] = {"expression_id": eid}
            if with_images:
                out["image"] = row.get("image")
            out.update(
                image_id=row["image_id"], file_name=row["file_name"], sample_id=s["id"],
                category=s.get("category"), supercategory=s.get("supercategory"), label=s.get("label"),
                sentence=sentence, sentence_index=k, num_sentences=len(sentences),
                bbox=s.get("bbox"), mask=s["mask"], height=h, width=w,
            )
            yield eid, out


def read_rows(
    f: IO[bytes], shard: str, options: ReadOptions, state: SplitState | None = None
) -> Iterator[dict]:
    """The validated image rows of one open shard, in row order."""
    for i, row in iter_records(f, shard, options.read_images):
        yield validate_row(row, shard, i, options, state)


def shard_label(path: str | Path, root: str | Path | None = None) -> str:
    """How errors name a shard: its path relative to the release root when possible."""
    return relative_label(path, root) or str(path)


# ---------------------------------------------------------------- prediction files of other tools

def _expression_id(obj: Mapping, where: str) -> str:
    """``expression_id``, or ``"<sample_id>:<sentence_index>"``; the two must agree when both are given."""
    has_pair = "sample_id" in obj or "sentence_index" in obj
    eid = obj.get("expression_id")
    if has_pair:
        if "sample_id" not in obj or "sentence_index" not in obj:
            raise PredictionError(f"{where}: 'sample_id' and 'sentence_index' go together, got only one of them")
        built = expression_id(
            parse_int(obj["sample_id"], f"{where}: 'sample_id'", PredictionError),
            parse_int(obj["sentence_index"], f"{where}: 'sentence_index'", PredictionError),
        )
        if eid is not None and eid != built:
            raise PredictionError(f"{where}: 'expression_id' {eid!r} disagrees with sample_id:sentence_index {built!r}")
        return built
    if isinstance(eid, str) and eid:
        return eid
    if eid is not None:
        raise PredictionError(f"{where}: 'expression_id' must be a non-empty string, got {_short(eid)}")
    if "sentence" in obj:
        raise PredictionError(
            f"{where}: a prediction keyed by sentence text is ambiguous (one sentence can occur under several samples); "
            "give 'expression_id' or 'sample_id' + 'sentence_index'"
        )
    raise PredictionError(f"{where}: expected 'expression_id' or 'sample_id' + 'sentence_index', got the keys {sorted(obj)}")


def _check_unique(rows: list[dict], where_of: list[str]) -> None:
    seen: dict[str, str] = {}
    for row, where in zip(rows, where_of):
        eid = row["expression_id"]
        if eid in seen:
            raise PredictionError(f"{where}: duplicate expression_id {eid!r} (first at {seen[eid]})")
        seen[eid] = where


#: Largest prediction file read: the 5,598 expressions of the release need a few MB.
MAX_PREDICTIONS_BYTES = 1 << 30


def load_predictions_jsonl(path: str | Path) -> list[dict]:
    """Read one prediction per line into ``refer_iou`` prediction rows ``{expression_id, mask}``.

    Each JSON object carries ``expression_id``, or ``sample_id`` plus ``sentence_index``, and
    ``mask`` as a COCO RLE dict (``counts`` a str, or a list of ints for uncompressed RLE).
    Blank lines are skipped. Errors name the file and the line.
    """
    path = Path(path)
    if not path.exists() or path.is_dir():
        raise InputNotFoundError(f"{str(path)!r}: prediction file not found")
    # The one JSON Lines reader (perckit.io.jsonio.iter_json_lines): a regular file under MAX_PREDICTIONS_BYTES,
    # a leading UTF-8 BOM skipped, one JSON object a line, a repeated key refused.
    rows, wheres = [], []
    for _, where, obj in iter_json_lines(path, error=PredictionError, limit=MAX_PREDICTIONS_BYTES, not_found=InputNotFoundError):
        eid = _expression_id(obj, where)
        if not isinstance(obj.get("mask"), Mapping):
            raise PredictionError(f"{where}: expected 'mask' as a COCO RLE dict {{'size': [H, W], 'counts': ...}}, got {_short(obj.get('mask'))}")
        rows.append({"expression_id": eid, "mask": seg.prediction_rle(obj["mask"], f"{where}: mask")})
        wheres.append(where)
    _check_unique(rows, wheres)
    return rows


def flatten_image_predictions(rows: Iterable[Mapping]) -> list[dict]:
    """Per-image predictions ``{"image_id", "samples": [{"id", "masks": [mask per sentence]}]}`` to expression rows.

    ``masks[k]`` is the prediction for sentence k of sample ``id`` (expression ``"<id>:<k>"``);
    masks may be RLE dicts (str, bytes or list counts) or 2-D binary arrays.
    """
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise PredictionError(f"predictions: expected a list of per-image rows {{'image_id', 'samples'}}, got {type(rows).__name__}")
    out, wheres = [], []
    for i, row in enumerate(rows):
        where = f"predictions[{i}]"
        if not isinstance(row, Mapping):
            raise PredictionError(f"{where}: expected {{'image_id', 'samples'}}, got {type(row).__name__}")
        if "image_id" in row:
            where = f"{where} (image_id {row['image_id']})"
        samples = row.get("samples")
        if not isinstance(samples, (list, tuple)):
            raise PredictionError(f"{where}: expected 'samples' as a list of {{'id', 'masks'}}, got {_short(samples)}")
        for j, s in enumerate(samples):
            if not isinstance(s, Mapping) or "id" not in s:
                raise PredictionError(f"{where}: samples[{j}]: expected {{'id', 'masks'}}, got {_short(s)}")
            sid = parse_int(s["id"], f"{where}: samples[{j}].id", PredictionError)
            masks = s.get("masks")
            if not isinstance(masks, (list, tuple)):
                raise PredictionError(f"{where}: sample id {sid}: expected 'masks' as a list (one mask per sentence), got {_short(masks)}")
            for k, m in enumerate(masks):
                swhere = f"{where}: sample id {sid}: masks[{k}]"
                out.append({"expression_id": expression_id(sid, k), "mask": seg.prediction_rle(m, swhere)})
                wheres.append(swhere)
    _check_unique(out, wheres)
    return out


def gt_as_predictions(rows: Iterable[Mapping]) -> list[dict]:
    """``expressions`` rows as predictions (the ground truth scored against itself)."""
    return [to_metric_prediction(r) for r in rows]
