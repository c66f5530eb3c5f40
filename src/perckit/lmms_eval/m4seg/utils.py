"""The lmms-eval task ``m4seg_grounded``: M⁴Seg multi-image pixel-grounded reasoning scored by ``m4seg``.

One doc is one row of the export's default config (two or three ordered images, a question, the GT answer with
its groundings). The model sees the images in order and answers in GLaMM / PRIMA style: each object or part it
mentions is written ``<p>name</p> [SEG] (IMAGEk)``, and the i-th ``[SEG]`` takes the i-th mask
(:func:`perckit.m4seg.parse_grounded_answer`). The answer forms read (:func:`parse_answer`), in this order:

1. a JSON object ``{"answer": "... <p>chair</p> [SEG] (IMAGE1) ...", "masks": [RLE, ...]}`` (what the prompt
   asks for; masks are COCO RLE ``{"size": [H, W], "counts": "..."}``, one per ``[SEG]``), form ``json``;
2. a JSON object in ``m4seg``'s prediction schema (the rows' field names) ``{"a": str, "groundings":
   [{"image_index", "name", "segmentation"}]}``, form ``groundings``;
3. text with each ``[SEG] (IMAGEk)`` followed by its RLE JSON inline (the JSON is cut out of the answer text),
   form ``inline``;
4. text with no ``[SEG]``: a text-only answer with no groundings, form ``text`` (read, not a failure).

An answer whose groundings do not read (more ``[SEG]`` than masks, a ``[SEG]`` without ``(IMAGEk)``, a bad
RLE, an image index out of range) keeps its text with no groundings and counts in ``unparsed`` (form
``text-only``). A mask at another size than its image is resized with OpenCV's ``INTER_NEAREST`` (option
``resize_predictions="opencv"``, ``m4seg``'s rule: PRIMA's evaluation resizes none).

The images: the export's ``image_files`` column when it was built with ``image_root`` (``perckit.export.convert("m4seg", ...,
image_root=...)``: the pixels travel in the Parquet), else the files under the folder named by the environment
variable ``PERCKIT_M4SEG_IMAGE_ROOT`` (PRIMA's image layout: ``coco_2017/...``, ``Part_Segm/...``), read with the
same path guard as the builder. lmms-eval imports this file by its path: imports are absolute.
"""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Mapping
from typing import Any, Sequence

from perckit import lmms_eval as common
from perckit.errors import InputNotFoundError, PerckitError, PredictionError
from perckit.m4seg.metric.codes import resolve_answer
from perckit.m4seg.features import IMAGE_FILES, to_metric_reference
from perckit.m4seg.read.predictions import parse_grounded_answer, prediction_row

logger = logging.getLogger(__name__)

METRIC = "m4seg"
#: ``m4seg`` options of the task: the metric's defaults (MiniLM for the text metrics, METEOR through Java), except
#: that a missing encoder or Java leaves those metrics None with the reason logged (``skipped``) instead of failing
#: the run, masks at another size are resized (OpenCV's rule, see the module header), and no per-sample table is
#: built. Edit to change.
OPTIONS: dict[str, Any] = {"skip_unavailable": True, "resize_predictions": "opencv", "per_sample": False}
#: The environment variable naming the image root when the export holds no pixels.
IMAGE_ROOT_ENV = "PERCKIT_M4SEG_IMAGE_ROOT"

PROMPT = ("{images}Question: {question}\nAnswer the question. Mark every object or part you mention as "
          "<p>name</p> [SEG] (IMAGEk), where k is the number of the image it is in, and give one mask per [SEG], in "
          "order, as COCO run-length encoding at that image's size. Reply with JSON only: "
          "{{\"answer\": \"... <p>name</p> [SEG] (IMAGE1) ...\", \"masks\": [{{\"size\": [H, W], \"counts\": \"...\"}}]}}.")


def m4seg_doc_to_visual(doc: Mapping) -> list:
    """The doc's images in order, as RGB (see the module docstring for where they come from)."""
    from PIL import Image

    files = doc.get(IMAGE_FILES)
    if files:
        return [im.convert("RGB") for im in files]
    root = os.environ.get(IMAGE_ROOT_ENV)
    if not root:
        raise InputNotFoundError(
            f"M4Seg example {doc.get('example_id')!r}: no images: the export has no {IMAGE_FILES!r} column (convert with "
            f"perckit.export.convert(..., image_root=...) to embed them) and the environment variable {IMAGE_ROOT_ENV} names no image root")
    from perckit.m4seg.read.images import read_image_bytes

    where = f"M4Seg example {doc.get('example_id')!r}: images"
    return [Image.open(io.BytesIO(read_image_bytes(open, root, im["path"], f"{where}[{k}].path")["bytes"])).convert("RGB")
            for k, im in enumerate(doc["images"])]


def m4seg_doc_to_text(doc: Mapping, lmms_eval_specific_kwargs: Mapping | None = None) -> str:
    """``pre_prompt`` + the image list (number and size) + the question and answer format + ``post_prompt``."""
    kw = lmms_eval_specific_kwargs or {}
    images = "".join(f"(IMAGE{k}) is {int(im['width'])} x {int(im['height'])} pixels (H = {int(im['height'])}, "
                     f"W = {int(im['width'])}).\n" for k, im in enumerate(doc["images"], start=1))
    text = PROMPT.format(images=images, question=doc["q"])
    return f"{kw.get('pre_prompt', '')}{text}{kw.get('post_prompt', '')}"


def _tag(g: Mapping) -> str:
    return f"<p>{g['name']}</p> [SEG] (IMAGE{int(g['image_index'])})"


def m4seg_doc_to_target(doc: Mapping) -> str:
    """The answer of a perfect model in the form the prompt asks for: the GT answer with each grounding's code
    (its ``answer_span``) written ``<p>name</p> [SEG] (IMAGEk)`` and every other code resolved to its name (so
    the answer's clean text is the resolved GT answer), and the GT masks in ``[SEG]`` order. A grounding whose
    span is unusable (missing, out of the answer, overlapping an earlier one) is tagged at the end."""
    groundings = list(doc.get("groundings") or [])
    answer = doc.get("a") or ""
    placed, rest, end = [], [], -1
    spans = []
    for g in groundings:
        span = g.get("answer_span") or []
        ok = len(span) == 2 and 0 <= int(span[0]) <= int(span[1]) <= len(answer)
        (spans if ok else rest).append(((int(span[0]), int(span[1])) if ok else (0, 0), g))
    for (s, e), g in sorted(spans, key=lambda x: x[0]):
        (placed if s >= end else rest).append(g)
        end = max(end, e) if s >= end else end
    tagged = [dict(g, name=_tag(g)) for g in placed]
    text = resolve_answer(answer, tagged)
    if rest:
        text = f"{text} {' '.join(_tag(g) for g in rest)}"
    masks = [{"size": list(g["segmentation"]["size"]), "counts": g["segmentation"]["counts"]} for g in placed + rest]
    return json.dumps({"answer": text, "masks": masks})


def _inline(text: str) -> tuple[str, list] | None:
    """Text with RLE JSON objects inline: (the text with them cut out, the RLEs in order); None without any."""
    masks, spans = [], []
    for value, start, end in common.json_values(text):
        if isinstance(value, Mapping) and "counts" in value and "size" in value:
            masks.append(dict(value))
            spans.append((start, end))
    if not masks:
        return None
    pieces, pos = [], 0
    for start, end in spans:
        pieces.append(text[pos:start])
        pos = end
    pieces.append(text[pos:])
    return " ".join(pieces), masks


def parse_answer(text: str, example_id: str) -> tuple[dict, bool, str]:
    """``(prediction, parsed, form)``: the ``m4seg`` prediction row the answer reads as (module docstring)."""
    eid = str(example_id)
    for value, _, _ in common.json_values(text):
        if isinstance(value, Mapping) and isinstance(value.get("a"), str) and "groundings" in value:
            try:
                return prediction_row({"example_id": eid, "a": value["a"], "groundings": value["groundings"]},
                                      f"answer of {eid!r}"), True, "groundings"
            except PerckitError:
                return {"example_id": eid, "a": value["a"], "groundings": []}, False, "text-only"
        if isinstance(value, Mapping) and isinstance(value.get("answer"), str):
            try:
                return parse_grounded_answer(value["answer"], value.get("masks") or [], eid), True, "json"
            except PerckitError:
                return {"example_id": eid, "a": value["answer"], "groundings": []}, False, "text-only"
    inline = _inline(text)
    answer, masks = inline if inline is not None else (text, [])
    try:
        row = parse_grounded_answer(answer, masks, eid)
    except PerckitError:
        return {"example_id": eid, "a": answer, "groundings": []}, False, "text-only"
    return row, True, ("inline" if inline is not None else "text")


def m4seg_process_results(doc: Mapping, results: Sequence[Any]) -> dict:
    """The doc scored into a one-pair ``m4seg`` accumulator (its geometry; the text metrics wait for the reduce);
    the same item under every reported key."""
    prediction, parsed, form = parse_answer(common.first_text(results), doc["example_id"])
    reference = to_metric_reference(doc)
    try:
        one = common.item(METRIC, OPTIONS, prediction, reference, parsed, form)
    except PredictionError as e:  # the groundings do not fit the doc (image index, mask): keep the text only
        if not prediction["groundings"]:
            raise
        logger.warning("M4Seg %r: the answer's groundings are dropped: %s", doc["example_id"], e)
        prediction = {"example_id": prediction["example_id"], "a": prediction["a"], "groundings": []}
        one = common.item(METRIC, OPTIONS, prediction, reference, False, "text-only")
    return {key: one for key in KEYS}


_LOGGED: list = [None]


def _result(items: Sequence[Mapping]) -> dict:
    out = common.reduce_items(METRIC, OPTIONS, items)
    if out.get("skipped") and _LOGGED[0] is not out:  # once per reduce, not once per key
        _LOGGED[0] = out
        logger.warning("M4Seg: metrics not computed: %s", out["skipped"])
    return out


#: reported key -> its aggregation (the YAML's metric_list names the same functions, defined here by name)
AGGREGATIONS = common.aggregations(_result, {
    "miou": ("m4seg_miou", "mIoU (GLaMM's, per image: greedy mask pairing), mean over samples with groundings."),
    "recall": ("m4seg_recall",
               "Recall: mask IoU >= 0.5 and name similarity >= 0.5 (GLaMM's loop with its early break), micro."),
    "ss": ("m4seg_ss", "SS (reconstructed): answer-text similarity."),
    "siou": ("m4seg_siou", "SIoU (reconstructed): name-set IoU by text similarity."),
    "i_ss": ("m4seg_i_ss", "I-SS (reconstructed): per-image name similarity."),
    "i_siou": ("m4seg_i_siou", "I-SIoU (reconstructed): per-image name-set IoU."),
    "meteor": ("m4seg_meteor", "METEOR (corpus level, GLaMM's pipeline; needs Java)."),
    "giou": ("m4seg_giou", "gIoU: the mean per-sample IoU of the union masks."),
    "ciou": ("m4seg_ciou", "cIoU: pooled intersections over pooled unions."),
    "unparsed": ("m4seg_unparsed", "The fraction of answers whose groundings did not read (scored as text only)."),
})
globals().update({fn.__name__: fn for fn in AGGREGATIONS.values()})
KEYS = tuple(AGGREGATIONS)
