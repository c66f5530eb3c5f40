"""lmms-eval tasks scored by perckit's accumulators: RefCOCO-M referring segmentation by mask IoU, and M⁴Seg.

Each task is a folder beside this file (``refcoco_m/``, ``m4seg/``) holding the task YAML and its ``utils.py``
(``doc_to_visual``, ``doc_to_text``, ``doc_to_target``, ``process_results`` and one aggregation per reported
key). lmms-eval finds them with ``--include_path`` (:func:`task_dir`); :func:`write_task` writes a task YAML that
points the packaged one at a local export (``perckit convert``) or a pushed one (``perckit push``).

How a score is made (the same for both tasks):

- ``process_results(doc, results)`` parses the model's text (:func:`mask_from_text`, or M⁴Seg's grounded-answer
  parse), adds the one (prediction, reference) pair to a fresh accumulator (``perckit.hf.accumulate.accumulator``),
  which scores it at once (the mask geometry; M⁴Seg's text metrics wait for the reduce), and returns the same
  small JSON item under every reported key: ``{"state": <that accumulator's state_dict>, "parsed": bool,
  "form": str}``. lmms-eval gathers the items of every rank.
- each aggregation (:func:`reduce_items`) merges the items' states into one accumulator and returns one number
  of its ``compute()``: exactly the metric module's numbers for the same predictions. The merged result is kept
  for the next aggregation over the same items, so the reduce (M⁴Seg: one embedding pass and one METEOR call)
  runs once per task, not once per key.

A model output the parser cannot read is scored as "no output" (an empty mask; M⁴Seg: the answer text without
groundings) and counted by the ``unparsed`` key, so one bad answer never stops an evaluation."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import rle as rle_ops
from ..errors import InputNotFoundError, OptionError, PerckitError

#: The folder holding the task folders: ``lmms-eval --include_path`` this (or one task folder).
TASKS_DIR = Path(__file__).resolve().parent

#: benchmark -> (task folder, task YAML, export config, split)
TASKS: dict[str, tuple[str, str, str, str]] = {
    "refcoco_m": ("refcoco_m", "refcoco_m_mask.yaml", "expressions", "validation"),
    "m4seg": ("m4seg", "m4seg_grounded.yaml", "default", "test"),
}

#: The longest model answer parsed (a COCO RLE of a 4K mask is well under 1 MB); longer text is cut to this.
MAX_ANSWER_CHARS = 4 << 20
#: How many ``{`` / ``[`` positions of one answer are tried as the start of a JSON value.
MAX_JSON_STARTS = 64

#: The item keys ``process_results`` returns under each metric name.
ITEM_KEYS = ("state", "parsed", "form")


def task_dir(benchmark: str | None = None) -> Path:
    """The folder to pass to ``lmms-eval --include_path``: every perckit task, or one benchmark's."""
    return TASKS_DIR if benchmark is None else TASKS_DIR / _task(benchmark)[0]


def task_yaml(benchmark: str) -> Path:
    """The packaged task YAML of ``benchmark`` (``refcoco_m`` or ``m4seg``)."""
    folder, name, _, _ = _task(benchmark)
    return TASKS_DIR / folder / name


def _task(benchmark: str) -> tuple[str, str, str, str]:
    if benchmark not in TASKS:
        raise OptionError(f"lmms-eval task: expected a benchmark among {sorted(TASKS)}, got {benchmark!r}")
    return TASKS[benchmark]


# ---------------------------------------------------------------- reading answers


def json_values(text: str) -> Iterator[tuple[Any, int, int]]:
    """Every JSON object or array embedded in ``text``, left to right, as ``(value, start, end)``.

    A value may sit in prose or in a Markdown code fence. Scanning tries at most :data:`MAX_JSON_STARTS` opening
    brackets and reads at most :data:`MAX_ANSWER_CHARS` characters, so a hostile answer costs bounded time; a
    nesting too deep for Python's parser is skipped like any text that is not JSON."""
    text = (text or "")[:MAX_ANSWER_CHARS]
    decoder = json.JSONDecoder()
    pos, tried = 0, 0
    while tried < MAX_JSON_STARTS:
        starts = [i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0]
        if not starts:
            return
        start = min(starts)
        tried += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            pos = start + 1
            continue
        yield value, start, end
        pos = end


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _flat_polygon(poly: Any) -> list[float] | None:
    """``[x0, y0, x1, y1, ...]`` (>= 3 points) from a flat list or a list of ``[x, y]`` pairs, else None."""
    if not isinstance(poly, list):
        return None
    if all(_is_number(v) for v in poly):
        return [float(v) for v in poly] if len(poly) >= 6 and len(poly) % 2 == 0 else None
    if len(poly) >= 3 and all(isinstance(p, list) and len(p) == 2 and all(_is_number(v) for v in p) for p in poly):
        return [float(v) for p in poly for v in p]
    return None


def _first_centre_from(t: float, n: int) -> int:
    """The smallest i in [0, n] whose pixel centre i + 0.5 is >= t (n: none is), compared in floats as numpy does."""
    if not t > 0.5:
        return 0
    if not t <= n - 0.5:
        return n
    i = min(max(math.ceil(t - 0.5), 0), n)
    while i > 0 and (i - 1) + 0.5 >= t:
        i -= 1
    while i < n and not i + 0.5 >= t:
        i += 1
    return i


def box_mask(box: Sequence[float], height: int, width: int) -> rle_ops.RLE:
    """The mask of an ``[x1, y1, x2, y2]`` pixel box: the pixels whose centre lies inside it (clipped to the image).

    Built in the RLE domain (the rows and columns of the box, then one run per column): no H x W array, whatever
    size the image declares."""
    x1, y1, x2, y2 = (float(v) for v in box)
    h, w = rle_ops._check_size([height, width], "box mask")
    r0, r1 = _first_centre_from(y1, h), _first_centre_from(y2, h)
    c0, c1 = _first_centre_from(x1, w), _first_centre_from(x2, w)
    if r1 <= r0 or c1 <= c0:
        return rle_ops.empty(h, w)
    n = r1 - r0
    if n == h:  # whole columns: one run of foreground
        runs = np.array([c0 * h, (c1 - c0) * h, (w - c1) * h], dtype=np.int64)
    else:  # column-major: background up to the first column's rows, then per column n in, h - n out
        runs = np.empty(2 * (c1 - c0) + 1, dtype=np.int64)
        runs[0] = c0 * h + r0
        runs[1::2] = n
        runs[2::2] = h - n
        runs[-1] = (h - r1) + (w - c1) * h
    if runs[-1] == 0:
        runs = runs[:-1]  # pycocotools' encode ends on the last non-empty run
    return rle_ops.from_uncompressed({"size": [h, w], "counts": runs}, "box mask")


_RLE_KEYS = ("mask", "segmentation", "rle")
_POLYGON_KEYS = ("polygons", "polygon", "points")
_BOX_KEYS = ("bbox_2d", "bbox", "box")


def mask_from_value(value: Any, height: int, width: int) -> tuple[rle_ops.RLE, str] | None:
    """A mask of the ``height`` x ``width`` image from one JSON value a model wrote, and its form, else None.

    Read, in this order: a COCO RLE ``{"size": [H, W], "counts": str | [int]}`` (form ``rle``; its own size,
    which the metric resizes when it differs); an object whose ``mask`` / ``segmentation`` / ``rle`` holds any
    of these forms; polygons in pixels, ``{"polygons": [[x0, y0, x1, y1, ...], ...]}`` (also ``polygon`` /
    ``points``, a flat list, a list of ``[x, y]`` pairs, or a bare list of polygons; form ``polygons``, their
    union); a pixel box ``[x1, y1, x2, y2]`` (``{"bbox_2d": ...}``, ``bbox``, ``box`` or a bare list of four
    numbers; form ``box``, the box filled); a list of such objects (the first that reads). Coordinates are
    pixels of the original image; normalised (0-1 or 0-1000) coordinates are not guessed."""
    if isinstance(value, Mapping):
        if "counts" in value and "size" in value:
            try:
                return rle_ops.to_rle(dict(value), where="answer"), "rle"
            except PerckitError:
                return None
        found = _first(mask_from_value(value[key], height, width) for key in _RLE_KEYS + _POLYGON_KEYS if key in value)
        if found is not None:
            return found
        for key in _BOX_KEYS:
            if key in value:
                return _box(value[key], height, width)
        return None
    if not isinstance(value, list) or not value:
        return None
    if len(value) == 4 and all(_is_number(v) for v in value):
        return _box(value, height, width)
    one = _flat_polygon(value)
    polys = [one] if one is not None else [_flat_polygon(p) for p in value]
    if polys and all(p is not None for p in polys):
        try:
            return rle_ops.from_polygons(polys, height, width, where="answer"), "polygons"
        except PerckitError:
            return None
    return _first(mask_from_value(v, height, width) for v in value if isinstance(v, Mapping))


def _first(found: Iterator[tuple[rle_ops.RLE, str] | None]) -> tuple[rle_ops.RLE, str] | None:
    """The first mask of ``found`` (read lazily, in order) that is not None, else None."""
    return next((f for f in found if f is not None), None)


def _box(box: Any, height: int, width: int) -> tuple[rle_ops.RLE, str] | None:
    if not (isinstance(box, list) and len(box) == 4 and all(_is_number(v) for v in box)) or box[2] < box[0] or box[3] < box[1]:
        return None
    return box_mask(box, height, width), "box"


def mask_from_text(text: str, height: int, width: int) -> tuple[rle_ops.RLE, str] | None:
    """The first mask :func:`mask_from_value` reads among the JSON values of ``text``, with its form; else None."""
    return _first(mask_from_value(value, height, width) for value, _, _ in json_values(text))


def first_text(results: Sequence[Any]) -> str:
    """The model's answer from lmms-eval's ``results`` list (the first response; ``None`` and no response are "")."""
    if isinstance(results, str):
        return results
    if not results:
        return ""
    first = results[0]
    if isinstance(first, list):  # lmms-eval nests the responses of a repeated request
        first = first[0] if first else ""
    return first if isinstance(first, str) else ""


# ---------------------------------------------------------------- the accumulator items


def item(metric: str, options: Mapping[str, Any], prediction: Mapping, reference: Mapping, parsed: bool, form: str) -> dict:
    """One ``process_results`` value: the one-pair accumulator's state (scored at once) and the parse verdict."""
    from ..hf.accumulate import accumulator

    acc = accumulator(metric, **dict(options)).update(predictions=[prediction], references=[reference])
    return {"state": acc.state_dict(), "parsed": bool(parsed), "form": str(form)}


def merged(metric: str, options: Mapping[str, Any], items: Sequence[Mapping]):
    """One accumulator holding every item's state (:meth:`~perckit.hf.accumulate.Accumulator.merge`: an item scored
    twice, or with other options, is refused)."""
    from ..hf.accumulate import accumulator

    total = accumulator(metric, **dict(options))
    for k, x in enumerate(items):
        if not isinstance(x, Mapping) or set(x) != set(ITEM_KEYS):
            raise OptionError(f"aggregation item {k}: expected a perckit process_results item with the keys "
                              f"{list(ITEM_KEYS)}, got {type(x).__name__ if not isinstance(x, Mapping) else sorted(x)}")
        total.merge(accumulator(metric, **dict(options)).load_state_dict(x["state"], where=f"aggregation item {k}"))
    return total


_CACHE: dict[str, tuple[str, dict]] = {}


def _fingerprint(metric: str, options: Mapping[str, Any], items: Sequence[Mapping]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([metric, dict(options)], sort_keys=True, default=repr).encode())
    for x in items:
        h.update(json.dumps(x, sort_keys=True, default=repr, allow_nan=True).encode())
        h.update(b"\n")
    return h.hexdigest()


def reduce_items(metric: str, options: Mapping[str, Any], items: Sequence[Mapping]) -> dict:
    """The merged accumulator's ``compute()`` plus ``unparsed`` (the fraction of answers not read; None for no
    items). The last result per metric is kept and reused while the items are the same (every key of a task
    aggregates the same items)."""
    key = _fingerprint(metric, options, items)
    cached = _CACHE.get(metric)
    if cached is not None and cached[0] == key:
        return cached[1]
    out = dict(merged(metric, options, items).compute())
    out["unparsed"] = (sum(1 for x in items if not x["parsed"]) / len(items)) if items else None
    _CACHE[metric] = (key, out)
    return out


def aggregation(name: str, key: str, result: Callable[[Sequence[Mapping]], Mapping], doc: str) -> Callable:
    """The aggregation ``name`` of a task's ``utils.py`` (``!function utils.<name>`` in its YAML):
    ``result(items)[key]``."""

    def aggregate(items: Sequence[Mapping]) -> float | None:
        return result(items)[key]

    aggregate.__name__ = aggregate.__qualname__ = name
    aggregate.__module__, aggregate.__doc__ = result.__module__, doc
    return aggregate


def aggregations(result: Callable[[Sequence[Mapping]], Mapping], docs: Mapping[str, tuple[str, str]]) -> dict[str, Callable]:
    """``{key: aggregation(name, key, result, doc)}`` for every ``key: (name, doc)`` of ``docs``, in order."""
    return {key: aggregation(name, key, result, doc) for key, (name, doc) in docs.items()}


# ---------------------------------------------------------------- pointing a task at an export


def _yaml_scalar(value: Any) -> str:
    return json.dumps(value)  # a JSON string or number is a YAML scalar


#: the first line of every task YAML :func:`write_task` writes (the mark that lets it replace its own file)
_TASK_MARK = "# written by perckit.lmms_eval.write_task"


def write_task(benchmark: str, dataset: str | os.PathLike, output: str | os.PathLike, task: str | None = None,
               split: str | None = None, config: str | None = None) -> Path:
    """Write ``<output>/<task>.yaml``: the packaged task of ``benchmark`` (by ``include``) reading ``dataset``.

    ``dataset`` is a local export folder (written by ``perckit convert``, or a ``snapshot_download`` of a pushed one)
    or a Hub repository id of a pushed export (``dataset_path`` the id, ``dataset_name`` the config). A local folder
    gives ``dataset_path: parquet`` with the split's files as ``data_files`` (absolute paths, glob characters
    escaped: :func:`perckit.export.state.literal_data_files`), listed by the one
    lister of an export's files (:func:`perckit.export.state.export_layout`: the record's list, else the card's
    ``data_files``; every path inside the folder, every shard a regular Parquet file past the size guard and with
    its media bytes), never the folder itself, whose card lmms-eval's ``load_dataset`` would follow anywhere.
    ``config`` / ``split`` default to the task's (RefCOCO-M ``expressions`` / ``validation``, M⁴Seg ``default`` /
    ``test``); ``task`` to ``<packaged task>_<folder or repo name>``. Run ``lmms-eval --include_path <output>
    --tasks <task>``. An existing file is replaced (in one step: :func:`perckit.io.paths.write_atomic`) only if this
    function wrote it: its first line, read with the checked reader, says so."""
    from ..export.state import export_layout, literal_data_files
    from ..io.paths import open_regular_file, write_atomic

    folder, name, default_config, default_split = _task(benchmark)
    config = config or default_config
    split = split or default_split
    base = name[: -len(".yaml")]
    src = Path(dataset)
    lines = [f"{_TASK_MARK}: the perckit {benchmark} task reading {str(dataset)!r}",
             f"include: {_yaml_scalar(str(task_yaml(benchmark)))}"]
    if src.is_dir():
        layout = export_layout(src)
        if layout.benchmark is not None and layout.benchmark != benchmark:
            raise OptionError(f"dataset {str(dataset)!r}: expected an export of {benchmark}, got one of {layout.benchmark}")
        # checked (inside the folder), resolved and escaped: lmms-eval's load_dataset takes each entry as a glob pattern
        paths = literal_data_files(layout.files(config, [split]), real=True)[split]
        lines += ["dataset_path: parquet", "dataset_name: null",
                  "dataset_kwargs:", "  data_files:", f"    {_yaml_scalar(split)}:"] + [f"      - {_yaml_scalar(p)}" for p in paths]
        label = src.resolve().name
    elif os.path.isabs(str(dataset)) or str(dataset).startswith("."):
        raise InputNotFoundError(f"dataset {str(dataset)!r}: expected an export folder or a Hub repository id, got a path that does not exist")
    else:
        lines += [f"dataset_path: {_yaml_scalar(str(dataset))}", f"dataset_name: {_yaml_scalar(config)}", "dataset_kwargs: {}"]
        label = str(dataset).rsplit("/", 1)[-1]
    task = task or f"{base}_{''.join(c if c.isalnum() else '_' for c in label)}"
    lines += [f"task: {_yaml_scalar(task)}", f"test_split: {_yaml_scalar(split)}"]
    out_dir = Path(output)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{task}.yaml"
    where = f"write_task: {str(path)!r}"
    if os.path.lexists(path):
        head = b""
        if not os.path.islink(path):
            with open_regular_file(path, where, None, OptionError) as f:
                head = f.read(len(_TASK_MARK))
        if head != _TASK_MARK.encode():
            raise OptionError(f"{where} exists and was not written by write_task; choose another output or task name")
    write_atomic(path, "\n".join(lines) + "\n", where)
    return path


__all__ = [
    "MAX_ANSWER_CHARS", "MAX_JSON_STARTS", "TASKS", "TASKS_DIR", "aggregation", "aggregations", "box_mask", "first_text", "item",
    "json_values", "mask_from_text", "mask_from_value", "merged", "reduce_items", "task_dir", "task_yaml", "write_task",
]
