"""lmms-eval tasks scored by perckit's accumulators: RefCOCO-M referring segmentation by mask IoU, and M⁴Seg.

Each task is a folder beside this file (``refcoco_m/``, ``m4seg/``) holding the task YAML and its ``utils.py``
(``doc_to_visual``, ``doc_to_text``, ``doc_to_target``, ``process_results`` and one aggregation per reported
key). lmms-eval finds them with ``--include_path`` (:func:`task_dir`); :func:`write_task` writes a task folder that
points the packaged task at a local export (``perckit convert``) or a pushed one (``perckit push``), with no
absolute path in it.

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
import re
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


#: the first line of both files :func:`write_task` writes (the mark that lets it replace its own files)
_TASK_MARK = "# written by perckit.lmms_eval.write_task"
#: the keys of the packaged task YAML that :func:`write_task` replaces
_REPLACED = ("task", "test_split", "dataset_path", "dataset_name", "dataset_kwargs")


def local_data_files(module_file: str | os.PathLike, files: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """The ``data_files`` of a task folder :func:`write_task` wrote, computed when lmms-eval loads its YAML: ``files``
    (``{split: [paths relative to the folder of module_file]}``) as absolute paths with the glob characters escaped
    (:func:`perckit.export.state.literal_data_files`, which also checks that datasets reads exactly those files)."""
    from ..export.state import literal_data_files

    here = Path(module_file).resolve().parent
    return literal_data_files({split: [here / p for p in paths] for split, paths in files.items()}, real=True)


def write_task(benchmark: str, dataset: str | os.PathLike, output: str | os.PathLike, task: str | None = None,
               split: str | None = None, config: str | None = None) -> Path:
    """Write the task folder ``output``: ``<task>.yaml``, the packaged task YAML of ``benchmark`` with its name and data
    replaced, and ``<task>.py``, the module its ``!function`` entries name (the packaged ``utils.py``'s functions and
    the data files). Neither holds an absolute path: the folder moves (with the export, for a local one).

    ``dataset`` is a local export folder (``perckit convert``, or a ``snapshot_download`` of a pushed one) or the Hub
    id of a pushed export (``dataset_path`` the id, ``dataset_name`` the config). A local folder gives ``dataset_path:
    parquet`` and ``data_files: !function <task>.data_files``: the split's files as the one lister of an export's
    files checks them (:func:`perckit.export.state.export_layout`), never the folder (whose card ``load_dataset``
    would follow anywhere), written relative to ``output`` and made absolute by :func:`local_data_files` when
    lmms-eval loads the YAML (it hands ``data_files`` to ``load_dataset``, which resolves them against its working
    folder). ``config`` / ``split`` default to the task's; ``task`` (letters, digits, ``_``, ``.``, ``-``) to
    ``<packaged task>_<folder or repo name>``. A file is replaced (atomically) only if its first line, read with the
    checked reader, says this function wrote it."""
    from ..export.state import export_layout
    from ..io.paths import open_regular_file, read_regular_file, write_atomic

    folder, name, default_config, default_split = _task(benchmark)
    config, split = config or default_config, split or default_split
    src, out_dir = Path(dataset), Path(output)
    files = None
    if src.is_dir():
        layout = export_layout(src)
        if layout.benchmark is not None and layout.benchmark != benchmark:
            raise OptionError(f"dataset {str(dataset)!r}: expected an export of {benchmark}, got one of {layout.benchmark}")
        here = os.path.realpath(out_dir)
        files = {split: [os.path.relpath(os.path.realpath(p), here) for p in layout.files(config, [split])[split]]}
        label, reading = src.resolve().name, os.path.relpath(os.path.realpath(src), here)
    elif os.path.isabs(str(dataset)) or str(dataset).startswith("."):
        raise InputNotFoundError(f"dataset {str(dataset)!r}: expected an export folder or a Hub repository id, got a path that does not exist")
    else:
        label, reading = str(dataset).rsplit("/", 1)[-1], str(dataset)
    task = task or f"{name[: -len('.yaml')]}_{''.join(c if c.isascii() and c.isalnum() else '_' for c in label)}"
    if not isinstance(task, str) or not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", task):
        raise OptionError(f"write_task: expected a task name of letters, digits, '_', '.' and '-', got {task!r}")
    data = ["dataset_path: parquet", "dataset_name: null", "dataset_kwargs:", f"  data_files: !function {task}.data_files"]
    if not files:
        data = [f"dataset_path: {_yaml_scalar(str(dataset))}", f"dataset_name: {_yaml_scalar(config)}", "dataset_kwargs: {}"]
    lines = [f"{_TASK_MARK}: the perckit {benchmark} task reading {reading!r}", f"task: {_yaml_scalar(task)}",
             f"test_split: {_yaml_scalar(split)}", *data]
    skip = False
    for line in read_regular_file(task_yaml(benchmark), "write_task: the packaged task", 1 << 20).decode("utf-8").splitlines():
        if line and not line[0].isspace():  # a top-level key or comment: the packaged comments and data lines are left out
            skip = line.startswith("#") or line.split(":", 1)[0] in _REPLACED
        if not skip:
            lines.append(line.replace("!function utils.", f"!function {task}."))
    module = [f"{_TASK_MARK}: the functions of the perckit {benchmark} task and its data files, relative to this folder",
              f"from perckit.lmms_eval.{folder}.utils import *"]
    if files:
        module += ["from perckit.lmms_eval import local_data_files", "",
                   f"data_files = local_data_files(__file__, {json.dumps(files)})"]
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {out_dir / f"{task}.yaml": lines, out_dir / f"{task}.py": module}
    for path in written:
        head, where = b"", f"write_task: {str(path)!r}"
        if os.path.lexists(path) and not os.path.islink(path):
            with open_regular_file(path, where, None, OptionError) as f:
                head = f.read(len(_TASK_MARK))
        if os.path.lexists(path) and head != _TASK_MARK.encode():
            raise OptionError(f"{where} exists and was not written by write_task; choose another output or task name")
    for path, text in written.items():
        write_atomic(path, "\n".join(text) + "\n", f"write_task: {str(path)!r}")
    return out_dir / f"{task}.yaml"


__all__ = [
    "MAX_ANSWER_CHARS", "MAX_JSON_STARTS", "TASKS", "TASKS_DIR", "aggregation", "aggregations", "box_mask", "first_text", "item",
    "json_values", "local_data_files", "mask_from_text", "mask_from_value", "merged", "reduce_items", "task_dir", "task_yaml",
    "write_task",
]
