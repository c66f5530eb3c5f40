"""M⁴Seg's metric as a :class:`perckit.hf.contract.MetricCore`: ``m4seg``.

The per-sample record is the sample's geometry (:class:`perckit.m4seg.metric.geometry.SampleGeom`, from
:func:`perckit.m4seg.metric.geometry.sample_geometry`): the checked pair's per-image IoU matrices, mask pairings and
gIoU / cIoU pixel counts, with the texts the reduce needs (the cleaned predicted answer, the resolved GT answer,
the grounding names) and the group keys. Nothing text-dependent is scored per batch: the text metrics need one
embedding call over the distinct texts of all samples and METEOR is corpus-level, so the reduce is
:func:`perckit.m4seg.metric.reduce_geometries`, the very reduce half of :func:`perckit.m4seg.metric.compute`,
and an accumulator's numbers equal ``compute``'s exactly, whatever the batches, their order and the merges.

A missing prediction (``strict=False``) is scored as an empty one and counted in ``num_missing_predictions``. A
record is JSON-safe: IoU values are stored as Python floats, which JSON writes and reads back bit for bit. Read from
a state, it is checked against :data:`RECORD` and its invariants first (the images numbered in order, each IoU
matrix ``len(pred) x len(gt)`` with values in [0, 1], every pair inside its matrix with the matrix's IoU, ``inter <=
union``, every grounding in exactly one image)."""

from __future__ import annotations

from functools import partial
from typing import Any, Mapping

import numpy as np

from ..hf.contract import COUNT, TEXT, UNIT, MetricCore, RecordSchema, refuse, same_id
from ..errors import OptionError, make_options
from ..hf.feature_check import Positional, Scalar
from . import features as feats
from .metric import EMPTY_PREDICTION_HINT, reduce_geometries
from .metric.geometry import ImageGeom, SampleGeom, sample_geometry
from .metric.options import M4SegOptions

_TEXT_FIELDS = ("example_id", "type", "dataset_name", "granularity", "pred_text", "gt_text")


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


#: An index into a sample's predicted (or ground-truth) groundings.
INDEX = Scalar("int64", 0)
#: One image of a sample's geometry (:class:`~perckit.m4seg.metric.geometry.ImageGeom`): its 1-based number, the indices of
#: its predicted and ground-truth groundings, their IoU matrix, the mask pairing and the gIoU / cIoU pixel counts.
IMAGE = {
    "k": Scalar("int64", 1), "pred": [INDEX], "gt": [INDEX], "iou": [[UNIT]],
    "pairs": [Positional({"prediction": INDEX, "gt": INDEX, "iou": UNIT})], "inter": COUNT, "union": COUNT,
}
#: A sample's geometry as a state holds it (:func:`geometry_to_state`).
RECORD = {**{k: TEXT for k in _TEXT_FIELDS}, "pred_names": [TEXT], "gt_names": [TEXT], "images": [IMAGE]}


def _image_invariants(at: str, im: Mapping[str, Any], k: int) -> None:
    """One image: its number, the matrix's shape, ``inter <= union``, the pairing (indices inside the matrix, each
    row and column once, the matrix's own IoU, > 0 as the pairings keep)."""
    if im["k"] != k:
        raise refuse(f"{at}.k", f"{k} (the images in order)", im["k"])
    n_p, n_g = len(im["pred"]), len(im["gt"])
    iou = im["iou"]
    if len(iou) != n_p or any(len(row) != n_g for row in iou):
        raise refuse(f"{at}.iou", f"a {n_p} x {n_g} matrix (a row per predicted, a column per ground-truth grounding)", iou)
    if im["inter"] > im["union"]:
        raise refuse(f"{at}.inter", f"at most the union ({im['union']})", im["inter"])
    rows: set[int] = set()
    cols: set[int] = set()
    for j, (a, b, v) in enumerate(im["pairs"]):
        if a >= n_p or b >= n_g:
            raise refuse(f"{at}.pairs[{j}]", f"a cell of the {n_p} x {n_g} matrix", [a, b, v])
        if a in rows or b in cols:
            raise refuse(f"{at}.pairs[{j}]", "each prediction and ground truth in one pair at most", [a, b, v])
        if v != iou[a][b] or not v > 0:
            raise refuse(f"{at}.pairs[{j}].iou", f"the matrix's IoU {iou[a][b]!r}, > 0", v)
        rows.add(a)
        cols.add(b)


def _invariants(key: str, r: Mapping[str, Any]) -> None:
    same_id(".example_id", r["example_id"], key)
    if not r["images"]:
        raise refuse(".images", "at least one image", r["images"])
    for n, im in enumerate(r["images"]):
        _image_invariants(f".images[{n}]", im, n + 1)
    for side, names in (("pred", "pred_names"), ("gt", "gt_names")):
        found = sorted(i for im in r["images"] for i in im[side])
        if found != list(range(len(r[names]))):
            raise refuse(".images", f"the {side} indices 0..{len(r[names]) - 1} of {names}, each in one image", found)


SCHEMA = RecordSchema(RECORD, (_invariants,))


def geometry_from_state(state: Mapping[str, Any]) -> SampleGeom:
    """The :class:`SampleGeom` of a record :func:`geometry_to_state` wrote, once checked against :data:`RECORD`
    and its invariants (:data:`SCHEMA`)."""
    images = [
        ImageGeom(im["k"], list(im["pred"]), list(im["gt"]),
                  np.asarray(im["iou"], dtype=np.float64).reshape(len(im["pred"]), len(im["gt"])),
                  [(a, b, float(v)) for a, b, v in im["pairs"]], inter=im["inter"], union=im["union"])
        for im in state["images"]
    ]
    return SampleGeom(**{k: state[k] for k in _TEXT_FIELDS}, pred_names=list(state["pred_names"]),
                      gt_names=list(state["gt_names"]), images=images)


def m4seg_core(config: str | None = None) -> MetricCore:
    """The ``m4seg`` metric (no configs): records are sample geometries, reduced by ``reduce_geometries``."""
    if config is not None:
        raise OptionError(f"metric 'm4seg' has no configs, got config {config!r}")
    return MetricCore(
        name="m4seg", config=None, id_key="example_id", prepare=partial(make_options, "m4seg", M4SegOptions),
        score=sample_geometry, record_to_state=geometry_to_state, record_from_state=geometry_from_state,
        record_schema=lambda opts: SCHEMA, features=lambda: (feats.prediction_schema(), feats.reference_schema()),
        strict=lambda opts: opts.strict, empty_hint=EMPTY_PREDICTION_HINT, lax_option="strict=False",
        reduce=lambda items, opts: reduce_geometries([i.record for i in items], opts, sum(1 for i in items if not i.predicted)),
    )
