"""M⁴Seg's metric as a :class:`perckit.accumulate.MetricCore`: ``m4seg``.

The per-sample record is the sample's geometry (:class:`perckit.m4seg.geometry.SampleGeom`, from
:func:`perckit.m4seg.metrics.sample_geometry`): the checked pair's per-image IoU matrices, mask pairings and
gIoU / cIoU pixel counts, with the texts the reduce needs (the cleaned predicted answer, the resolved GT answer,
the grounding names) and the group keys. Nothing text-dependent is scored per batch: the text metrics need one
embedding call over the distinct texts of all samples and METEOR is corpus-level, so the reduce is
:func:`perckit.m4seg.metrics.reduce_geometries`, the very reduce half of :func:`perckit.m4seg.metrics.compute`,
and an accumulator's numbers equal ``compute``'s exactly, whatever the batches, their order and the merges.

A missing prediction (``strict=False``) is scored as an empty one and counted in ``num_missing_predictions``.
A record is JSON-safe: IoU values are stored as Python floats, which JSON writes and reads back bit for bit.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..accumulate import Item, MetricCore
from ..errors import OptionError, check_options
from . import metrics as m
from .geometry import ImageGeom, SampleGeom

_TEXT_FIELDS = ("example_id", "question_type", "dataset_name", "granularity", "pred_text", "gt_text")


def _options(options: Mapping[str, Any]) -> m.M4SegOptions:
    """The checked options (those of :func:`perckit.m4seg.metrics.compute`)."""
    check_options("m4seg", options, m.M4SegOptions.__dataclass_fields__)
    return m.M4SegOptions(**options)


def _score(prediction: Mapping | None, reference: Mapping, opts: m.M4SegOptions) -> SampleGeom:
    """One sample's record: its checked geometry (``prediction`` None: an empty prediction)."""
    return m.sample_geometry(prediction, reference, opts)


def _reduce(items: list[Item], opts: m.M4SegOptions) -> dict:
    """The metric over the records: :func:`perckit.m4seg.metrics.reduce_geometries`."""
    return m.reduce_geometries([item.record for item in items], opts, sum(1 for item in items if not item.predicted))


def geometry_to_state(geom: SampleGeom) -> dict:
    """A sample's geometry as JSON data (lists, ints, floats and strings)."""
    out: dict[str, Any] = {k: getattr(geom, k) for k in _TEXT_FIELDS}
    out["pred_names"] = list(geom.pred_names)
    out["gt_names"] = list(geom.gt_names)
    out["images"] = [
        {"k": int(im.k), "pred": [int(i) for i in im.pred], "gt": [int(j) for j in im.gt],
         "iou": np.asarray(im.iou, dtype=np.float64).tolist(),
         "pairs": [[int(i), int(j), float(v)] for i, j, v in im.pairs],
         "inter": int(im.inter), "union": int(im.union)}
        for im in geom.images
    ]
    return out


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what}: expected a string, got {type(value).__name__}")
    return value


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: expected an integer, got {type(value).__name__}")
    return value


def _float(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what}: expected a number, got {type(value).__name__}")
    return float(value)


def _list(value: Any, what: str) -> list:
    if not isinstance(value, list):
        raise TypeError(f"{what}: expected a list, got {type(value).__name__}")
    return value


def _image_from_state(state: Mapping[str, Any], where: str) -> ImageGeom:
    if not isinstance(state, Mapping):
        raise TypeError(f"{where}: expected an object, got {type(state).__name__}")
    pred = [_int(i, f"{where}.pred") for i in _list(state["pred"], f"{where}.pred")]
    gt = [_int(j, f"{where}.gt") for j in _list(state["gt"], f"{where}.gt")]
    iou = np.asarray(_list(state["iou"], f"{where}.iou"), dtype=np.float64)
    shape = (len(pred), len(gt))
    if iou.shape != shape and not (iou.size == 0 == shape[0] * shape[1]):  # an empty matrix's list form loses its shape
        raise ValueError(f"{where}.iou: expected a {shape[0]} x {shape[1]} matrix, got shape {iou.shape}")
    pairs = []
    for p in _list(state["pairs"], f"{where}.pairs"):
        if not isinstance(p, list) or len(p) != 3:
            raise TypeError(f"{where}.pairs: expected [prediction, gt, iou] triples, got {p!r}")
        pairs.append((_int(p[0], f"{where}.pairs"), _int(p[1], f"{where}.pairs"), _float(p[2], f"{where}.pairs")))
    return ImageGeom(_int(state["k"], f"{where}.k"), pred, gt, iou.reshape(shape), pairs,
                     inter=_int(state["inter"], f"{where}.inter"), union=_int(state["union"], f"{where}.union"))


def geometry_from_state(state: Mapping[str, Any]) -> SampleGeom:
    """The :class:`SampleGeom` :func:`geometry_to_state` wrote (a TypeError / ValueError / KeyError naming the
    field for anything else; the accumulator reports it as a bad state)."""
    if not isinstance(state, Mapping):
        raise TypeError(f"expected an object, got {type(state).__name__}")
    texts = {k: _str(state[k], k) for k in _TEXT_FIELDS}
    names = {k: [_str(v, k) for v in _list(state[k], k)] for k in ("pred_names", "gt_names")}
    images = [_image_from_state(im, f"images[{i}]") for i, im in enumerate(_list(state["images"], "images"))]
    return SampleGeom(**texts, **names, images=images)


def m4seg_core(config: str | None = None) -> MetricCore:
    """The ``m4seg`` metric (no configs): records are sample geometries, reduced by ``reduce_geometries``."""
    if config is not None:
        raise OptionError(f"metric 'm4seg' has no configs, got config {config!r}")
    return MetricCore(
        name="m4seg", config=None, id_key="example_id", prepare=_options, score=_score, reduce=_reduce,
        record_to_state=geometry_to_state, record_from_state=geometry_from_state,
        strict=lambda opts: opts.strict, empty_hint=m.EMPTY_PREDICTION_HINT, lax_option="strict=False",
    )
