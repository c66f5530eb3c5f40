"""Every metric module refuses, through ``evaluate``, any input value its declared features would change.

``evaluate`` encodes each batch with the module's declared features, and that encoding coerces silently
(``Value("int32")`` stores 1.9 as 1, ``True`` as 1, ``"3"`` as 3; ``Value("string")`` stores 5 as
``"5"`` ...). ``perckit.hf.metric.PerckitMetric`` checks the raw batch first (``perckit.hf.feature_check``).

The field tables are derived from the declared features themselves: every integer, float, string, bool and
bytes leaf of the predictions and references schema of every metric (syn4d: each config) gets the bad values
of its type, through ``compute``, ``add_batch`` and ``add``; so a field added to a schema is covered without
editing this file. The option tables are derived from the option dataclasses / signatures the same way.

The tables are derived when the tests run, not while the suite is collected (that loads every metric module),
and each runs as a property test (tests/helpers/cases.py ``every_case``: hypothesis over the table, derandomised,
failing unless every case of it ran): one test id per kind of leaf value (770 field cases) and one per metric's
options, instead of one id per case.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import math
import re
from operator import attrgetter, itemgetter
from typing import NamedTuple

import numpy as np
import pytest
from helpers.cases import every_case
from helpers.common import REPO
from helpers.m4seg import S1_PRED, S1_REF

from perckit.errors import OptionError, PredictionError

NAN = float("nan")

# ---------------------------------------------------------------- one good example per metric (they score)

MT_REF = {
    "query_id": "q", "scene": "s", "query_type": "A", "is_negative": False,
    "frames": [{"frame_id": 1, "mask": {"size": [1, 4], "counts": "022"}}], "evaluated_frame_ids": [1], "scene_frame_ids": [1],
}
MT_PRED = {"query_id": "q", "frames": [{"frame_id": 1, "mask": {"size": [1, 4], "counts": "013"}}]}
TID_REF = {"query_id": "q", "scene": "s", "target_track_ids": ["1", "2"]}
TID_PRED = {"query_id": "q", "target_track_ids": ["1"]}
RI_REF = {"expression_id": "e1", "mask": {"size": [2, 3], "counts": "033"}, "category": "dog", "supercategory": "animal"}
RI_PRED = {"expression_id": "e1", "mask": {"size": [2, 3], "counts": "021O1"}}
# float32-exact, as the reference feature stores it (so the core on these lists and evaluate agree bit for bit)
_GT = (np.random.default_rng(0).normal(size=(3, 4, 3)) + np.array([0.0, 0.0, 5.0])).astype(np.float32).astype(np.float64)
_IDENT = {"sequence_id": "og/dream/a", "variant": "og", "scene": "dream"}
_POSES = np.tile(np.eye(4), (4, 1, 1))
_POSES[:, :3, 3] = [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]]
S4 = {
    "tracking": (
        {"sequence_id": "og/dream/a", "tracking_xyz": (_GT * 1.1).tolist(), "depth": None, "camera_c2w": None, "frame_indices": [0, 6, 12]},
        {**_IDENT, "frame_indices": [0, 6, 12], "tracks_ref0": _GT.tolist(), "visibility": [[True] * 4] * 3, "dynamic": [True, False, True, False]},
    ),
    "depth": (
        {"sequence_id": "og/dream/a", "tracking_xyz": None, "depth": [[[1.0, 2.0, 3.0], [8.0, 7.0, 1.0]]] * 2, "camera_c2w": None, "frame_indices": [0, 6]},
        {**_IDENT, "frame_indices": [0, 6], "depth_m": [[[1.0, 2.0, 3.0], [4.0, 1.0, 5.0]]] * 2},
    ),
    "pose": (
        {"sequence_id": "og/dream/a", "tracking_xyz": None, "depth": None, "camera_c2w": (_POSES * 0.5).tolist(), "frame_indices": [0, 1, 2, 3]},
        {**_IDENT, "frame_indices": [0, 1, 2, 3], "camera_c2w": _POSES.tolist()},
    ),
}


def _av():
    from perckit.reason_av_edit import features as feats

    ref = {
        "sample_id": "s", "category": "where_only", "sub_track": "W1_same_class_pair", "language": "en", "orientation": "portrait",
        "anchor_mask": {"size": [2, 4], "counts": "242"}, "reason_audio": dict(feats.NOT_PROVIDED_MEDIA),
        "mask_video": dict(feats.NOT_PROVIDED_MEDIA), "edit_window_s": [0.1, 0.5], "edit_window_frames": None,
        "fps": 25.0, "num_frames": 17, "selected_instance_index": 1,
    }
    return feats.make_prediction("s", anchor_mask={"size": [2, 4], "counts": "44"}), ref


def _av_quality():
    from helpers.edit_quality import box_region, clip, reference

    from perckit.reason_av_edit import make_quality_prediction

    ref = reference("s", clip(t=2, h=8, w=8), box_region(2, 8, 8, (2, 2, 5, 5)))
    return make_quality_prediction("s", ref["video"]["bytes"]), ref


M4_OPTIONS = {"embed_fn": "stub", "metrics": ["miou", "recall", "i_ss", "i_siou", "ss", "siou"]}

#: (metric, config) -> (prediction, reference, compute options)
GOOD = {
    ("mask_temporal", None): (MT_PRED, MT_REF, {}),
    ("track_id", None): (TID_PRED, TID_REF, {}),
    ("refer_iou", None): (RI_PRED, RI_REF, {}),
    **{("syn4d", task): (p, r, {}) for task, (p, r) in S4.items()},
    ("m4seg", None): (S1_PRED, S1_REF, M4_OPTIONS),
    ("av_reasoning", None): (*_av(), {}),
    ("av_edit_quality", None): (*_av_quality(), {"ssim_win_size": 3, "metrics": ["ssim", "psnr", "bg_psnr", "bg_ssim"]}),
}


_LOADED: dict = {}


def metric(name: str, config: str | None = None):
    """The loaded module, once per run; a copy left holding examples (a case or test that failed half-way) is
    replaced, so no later case sees them."""
    import evaluate

    m = _LOADED.get((name, config))
    if m is None or m.writer is not None or len(m):
        _LOADED[name, config] = evaluate.load(str(REPO / "metrics" / name), config)
    return _LOADED[name, config]


# ---------------------------------------------------------------- the fields, from the declared features


def _kind(feature) -> str | None:
    name = type(feature).__name__
    if isinstance(feature, dict):
        return "dict"
    if isinstance(feature, list) or name in ("Sequence", "List", "LargeList"):
        return "list"
    if name == "Value":
        d = feature.dtype
        return "int" if "int" in d else "float" if d.startswith("float") or d == "double" else {"string": "string", "bool": "bool", "binary": "binary"}.get(d)
    return None


def _item(feature):
    return feature[0] if isinstance(feature, list) else feature.feature


def synth(feature):
    """A value of ``feature`` with every list holding one item (so every leaf has a place)."""
    kind = _kind(feature)
    if kind == "dict":
        return {k: synth(v) for k, v in feature.items()}
    if kind == "list":
        return [synth(_item(feature))]
    return {"int": 1, "float": 0.5, "string": "s", "bool": True, "binary": b"x"}[kind]


def leaves(feature, path=()):
    """``(path, kind, dtype)`` of every leaf and every container (path items: keys and 0 for list items)."""
    kind = _kind(feature)
    if kind == "dict":
        yield path, "dict", None
        for k, v in feature.items():
            yield from leaves(v, path + (k,))
    elif kind == "list":
        yield path, "list", None
        yield from leaves(_item(feature), path + (0,))
    elif kind is not None:
        yield path, kind, feature.dtype


def put(row, path, value):
    out = copy.deepcopy(row)
    target = out
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value
    return out


def show(path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


BAD = {
    # kind -> [(id, value)]: each value is one evaluate's encoding would change or refuse unclearly
    "int": [("fraction", 1.9), ("bool", True), ("numeric-string", "3"), ("nan", NAN), ("beyond-int32", 2 ** 40), ("numpy-fraction", np.float64(2.5))],
    "float": [("numeric-string", "0.5"), ("bool", True), ("int-beyond-float", 10 ** 400)],
    "string": [("int", 5), ("float", 5.5), ("bool", True), ("bytes", b"ab")],
    "bool": [("int-1", 1), ("int-2", 2), ("word", "yes"), ("float", 1.0)],
    "binary": [("str", "abc"), ("int", 5)],
    "list": [("string", "12"), ("dict", {"a": 1}), ("number", 7)],
    "dict": [("string", "x"), ("list", [1]), ("unknown-key", "EXTRA")],
}
FLOAT32_BAD = [("overflows-float32", 1e300)]


class FieldCase(NamedTuple):
    id: str
    name: str
    config: str | None
    side: str
    path: tuple
    kind: str
    value: object


@functools.lru_cache(maxsize=None)
def field_cases() -> tuple[FieldCase, ...]:
    """Every leaf and container of the predictions and references schema of every metric (syn4d: each config),
    with each bad value of its kind: derived from the declared features when a test first asks (never while the
    suite is collected: it loads every metric module)."""
    out = []
    for name, config in GOOD:
        m = metric(name, config)
        for side in ("predictions", "references"):
            for path, kind, dtype in leaves(m.features[side]):
                if not path:
                    continue  # the row itself: tests/test_benchmarks_bad_inputs.py [missing-key], below [row-*]
                for vid, value in BAD[kind] + (FLOAT32_BAD if dtype == "float32" else []):
                    out.append(FieldCase(f"{name}{'-' + config if config else ''}-{side}{show(path)}-{vid}", name, config, side, path, kind, value))
    return tuple(out)


#: The cases each kind's property test runs first (explicit examples): the fields users fill in most.
FIRST_FIELDS = {
    "int": ["mask_temporal-predictions.frames[0].frame_id-fraction", "syn4d-tracking-predictions.frame_indices[0]-beyond-int32"],
    "float": ["syn4d-depth-predictions.depth[0][0][0]-numeric-string", "syn4d-depth-references.depth_m[0][0][0]-overflows-float32"],
    "string": ["refer_iou-predictions.expression_id-int", "track_id-predictions.target_track_ids[0]-int"],
    "bool": ["mask_temporal-references.is_negative-int-1"],
    "binary": [],
    "list": ["mask_temporal-predictions.frames-string"],
    "dict": ["refer_iou-predictions.mask-unknown-key"],
}


def _message_patterns(side: str, path, kind: str, value, entry: str) -> list[str]:
    where = (side[:-1] if entry == "add" else f"{side}[0]") + show(path)
    if kind == "dict" and value == "EXTRA":
        return [re.escape(where) + r": expected exactly the keys", r"unexpected \['EXTRA'\]"]
    got = repr(value) if not isinstance(value, int) or abs(value) < 10 ** 50 else "..."
    return [re.escape(where) + ": expected ", re.escape(got[:60]) if got != "..." else ""]


def _refused_on_every_entry(case: FieldCase) -> None:
    name, config, side, path, kind, value = case[1:]
    m = metric(name, config)
    pred, ref = synth(m.features["predictions"]), synth(m.features["references"])
    if kind == "dict" and value == "EXTRA":
        row = put(pred if side == "predictions" else ref, path + ("EXTRA",), 1)
    else:
        row = put(pred if side == "predictions" else ref, path, value)
    pred, ref = (row, ref) if side == "predictions" else (pred, row)
    calls = {
        "compute": lambda: m.compute(predictions=[pred], references=[ref]),
        "add_batch": lambda: m.add_batch(predictions=[pred], references=[ref]),
        "add": lambda: m.add(prediction=pred, reference=ref),
    }
    for entry, call in calls.items():
        with pytest.raises(PredictionError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(f"{name}: the input"), f"{case.id}: {msg}"
        for p in _message_patterns(side, path, kind, value, entry):
            assert re.search(p, msg), f"{case.id} {entry}: {p!r} not in {msg!r}"


@pytest.mark.parametrize("kind", list(BAD))
def test_every_field_refuses_a_value_the_encoding_would_change(kind):
    """One property test per kind of leaf value: every field of that kind of every metric's schema, with each of
    its bad values, refused through compute, add_batch and add (tests/helpers/cases.py: every case runs)."""
    cases = [c for c in field_cases() if c.kind == kind]
    by_id = {c.id: c for c in cases}
    every_case(cases, _refused_on_every_entry, key=attrgetter("id"), first=[by_id[i] for i in FIRST_FIELDS[kind]])


def test_the_field_tables_cover_every_metric_and_every_leaf_kind():
    cases = field_cases()
    assert {c.name for c in cases} == {"mask_temporal", "track_id", "refer_iou", "syn4d", "m4seg", "av_reasoning", "av_edit_quality"}
    assert {c.config for c in cases if c.name == "syn4d"} == {"tracking", "depth", "pose"}
    assert {c.kind for c in cases} == set(BAD) == set(FIRST_FIELDS)
    assert {c.side for c in cases} == {"predictions", "references"}
    assert any(c.path == ("frames", 0, "frame_id") for c in cases)  # R4D frame ids are in the table
    assert len(cases) == len({c.id for c in cases}) >= 770, len(cases)  # 770 when the tables became property tests


# ---------------------------------------------------------------- numpy arrays, vectorised


ARRAY_CASES = [
    # id, metric, config, side, field, value, patterns
    ("frame-indices-fractions", "syn4d", "tracking", "predictions", "frame_indices", np.array([0.0, 6.5, 12.0]),
     [r"predictions\[0\]\.frame_indices\[1\]: expected an integer, got 6\.5"]),
    ("frame-indices-bools", "syn4d", "tracking", "predictions", "frame_indices", np.array([True, False, True]),
     [r"predictions\[0\]\.frame_indices: expected integers \(int32\), got a numpy array of dtype bool"]),
    ("frame-indices-beyond-int32", "syn4d", "tracking", "predictions", "frame_indices", np.array([0, 6, 2 ** 40]),
     [r"predictions\[0\]\.frame_indices\[2\]: expected an integer in the int32 range", "1099511627776"]),
    ("tracking-strings", "syn4d", "tracking", "predictions", "tracking_xyz", np.full((3, 4, 3), "a"),
     [r"predictions\[0\]\.tracking_xyz: expected numbers \(float64\), got a numpy array of dtype <U1"]),
    ("tracking-of-two-dims", "syn4d", "tracking", "predictions", "tracking_xyz", np.zeros((3, 4)),
     [r"predictions\[0\]\.tracking_xyz: expected a 3-D array", r"shape \(3, 4\)"]),
    ("visibility-floats", "syn4d", "tracking", "references", "visibility", np.ones((3, 4)),
     [r"references\[0\]\.visibility: expected booleans, got a numpy array of dtype float64"]),
    ("depth-overflowing-float32", "syn4d", "depth", "predictions", "depth", np.array([[[1.0, 2.0, 1e300], [8.0, 7.0, 1.0]]] * 2),
     [r"predictions\[0\]\.depth\[0\]\[0\]\[2\]: expected a number that fits in float32", "1e\\+300"]),
    ("depth-of-bools", "syn4d", "depth", "references", "depth_m", np.ones((2, 2, 3), dtype=bool),
     [r"references\[0\]\.depth_m: expected numbers \(float32\), got a numpy array of dtype bool"]),
    ("frame-indices-a-string", "syn4d", "pose", "predictions", "frame_indices", "0123",
     [r"predictions\[0\]\.frame_indices: expected a list, got str: '0123'"]),
]


@pytest.mark.parametrize("name, config, side, field, value, patterns", [pytest.param(*c[1:], id=c[0]) for c in ARRAY_CASES])
def test_numpy_arrays_are_checked_whole(name, config, side, field, value, patterns):
    m = metric(name, config)
    pred, ref, _ = GOOD[name, config]
    row = {**(pred if side == "predictions" else ref), field: value}
    pred, ref = (row, ref) if side == "predictions" else (pred, row)
    calls = {"compute": lambda: m.compute(predictions=[pred], references=[ref]), "add": lambda: m.add(prediction=pred, reference=ref)}
    for entry, call in calls.items():
        with pytest.raises(PredictionError) as info:
            call()
        for p in patterns:
            if entry == "add":  # one example: named by the singular, without a row index
                p = p.replace(r"predictions\[0\]", "prediction").replace(r"references\[0\]", "reference")
            assert re.search(p, str(info.value)), f"{entry}: {p!r} not in {str(info.value)!r}"


def test_numpy_arrays_of_the_right_kind_score_as_lists():
    m = metric("syn4d", "tracking")
    pred, ref, _ = GOOD["syn4d", "tracking"]
    as_arrays = {**pred, "tracking_xyz": np.asarray(pred["tracking_xyz"], dtype=np.float64), "frame_indices": np.array([0, 6, 12], dtype=np.int64)}
    assert m.compute(predictions=[as_arrays], references=[ref])["overall"] == m.compute(predictions=[pred], references=[ref])["overall"]


# ---------------------------------------------------------------- rows and sides


ROW_CASES = [
    ("row-none", "refer_iou", lambda p, r: ([None], [r]), [r"predictions\[0\]: expected a dict with the keys \['expression_id', 'mask'\], got NoneType"]),
    ("row-extra-key", "refer_iou", lambda p, r: ([{**p, "score": 0.9}], [r]), [r"predictions\[0\]: expected exactly the keys", r"unexpected \['score'\]"]),
    ("nested-missing-key", "refer_iou", lambda p, r: ([{**p, "mask": {"size": [2, 3]}}], [r]), [r"predictions\[0\]\.mask: expected exactly the keys \['counts', 'size'\]", r"missing \['counts'\]"]),
    ("references-none", "refer_iou", lambda p, r: ([p], None), [r"references: expected a list of rows, got NoneType"]),
    ("references-a-dict", "refer_iou", lambda p, r: ([p], r), [r"references: expected a list of rows, got dict"]),
    ("second-row-bad", "track_id", lambda p, r: ([p, {**p, "query_id": 7}], [r, {**r, "query_id": "r"}]), [r"predictions\[1\]\.query_id: expected a string, got 7"]),
]


@pytest.mark.parametrize("name, make, patterns", [pytest.param(*c[1:], id=c[0]) for c in ROW_CASES])
def test_rows_and_sides(name, make, patterns):
    pred, ref, _ = GOOD[name, None]
    preds, refs = make(pred, ref)
    for call in ("compute", "add_batch"):
        with pytest.raises(PredictionError) as info:
            getattr(metric(name), call)(predictions=preds, references=refs)
        for p in patterns:
            assert re.search(p, str(info.value)), f"{p!r} not in {str(info.value)!r}"


# ---------------------------------------------------------------- good batches score as before


@pytest.mark.parametrize("name, config", list(GOOD))
def test_a_good_batch_scores_identically_on_every_entry_point(name, config):
    pred, ref, options = GOOD[name, config]
    m = metric(name, config)
    expected = m._compute([copy.deepcopy(pred)], [copy.deepcopy(ref)], **options)  # the module's core, no evaluate
    assert m.compute(predictions=[pred], references=[ref], **options) == expected
    m.add_batch(predictions=[pred], references=[ref])
    assert m.compute(**options) == expected
    m.add(prediction=pred, reference=ref)
    assert m.compute(**options) == expected


def test_lossless_forms_are_still_accepted():
    """2.0 for an int, a numpy integer, an int for a float, NaN for a float: stored unchanged, scored."""
    m = metric("mask_temporal")
    pred = put(MT_PRED, ("frames", 0, "frame_id"), 1.0)
    assert m.compute(predictions=[pred], references=[MT_REF])["miou"] == 0.5
    pred = put(MT_PRED, ("frames", 0, "frame_id"), np.int64(1))
    assert m.compute(predictions=[pred], references=[MT_REF])["miou"] == 0.5
    av_pred, av_ref = _av()
    out = metric("av_reasoning").compute(predictions=[av_pred], references=[{**av_ref, "fps": 25}])
    assert out["num_samples"] == 1


# ---------------------------------------------------------------- the cache: rows straight to Arrow, read back in batches


def _two(name, config):
    """Two good rows of the metric on each side (the second's id suffixed "-2")."""
    pred, ref, _ = GOOD[name, config]
    key = next(k for k in pred if k.endswith("_id"))
    return [pred, {**pred, key: pred[key] + "-2"}], [ref, {**ref, key: ref[key] + "-2"}]


def _edited(name, config, side, path, value, row=0):
    """:func:`_two` with ``path`` of row ``row`` on ``side`` set to ``value``."""
    rows = _two(name, config)
    where = rows[side == "references"]
    where[row] = put(where[row], path, value)
    return rows


#: (id, metric, config, (prediction, reference), whether PerckitMetric writes it straight to Arrow)
CACHE_CASES = [
    *((f"good-{name}-{config}", name, config, lambda n=name, c=config: _two(n, c), True) for name, config in GOOD),
    ("int-as-2.0", "mask_temporal", None, lambda: _edited("mask_temporal", None, "predictions", ("frames", 0, "frame_id"), 1.0), True),
    ("numpy-int", "mask_temporal", None, lambda: _edited("mask_temporal", None, "references", ("evaluated_frame_ids",), np.array([1])), True),
    ("int-for-float", "av_reasoning", None, lambda: _edited("av_reasoning", None, "references", ("fps",), 25), True),
    ("null-mask-later", "refer_iou", None, lambda: _edited("refer_iou", None, "predictions", ("mask",), None, row=1), True),
    ("null-string-later", "refer_iou", None, lambda: _edited("refer_iou", None, "references", ("category",), None, row=1), True),
    # evaluate refuses a None string, dict or list in a batch's first row (its _enforce_nested_string_type), and pyarrow
    # refuses the last two: evaluate's own add_batch takes these
    ("null-mask-first", "refer_iou", None, lambda: _edited("refer_iou", None, "predictions", ("mask",), None), False),
    ("empty-list", "track_id", None, lambda: _edited("track_id", None, "predictions", ("target_track_ids",), []), True),
    ("numpy-1d", "syn4d", "tracking", lambda: _edited("syn4d", "tracking", "predictions", ("frame_indices",), np.array([0, 6, 12])), True),
    ("numpy-3d", "syn4d", "tracking", lambda: _edited("syn4d", "tracking", "predictions", ("tracking_xyz",), np.asarray(_GT)), False),
    ("int-a-float32-rounds", "syn4d", "depth", lambda: _edited("syn4d", "depth", "predictions", ("depth", 0, 0, 0), 2 ** 60 + 1), False),
]


def _cache_table(name, config, preds, refs, direct):
    """The Arrow table evaluate's cache holds after one batch (kept in memory), written by PerckitMetric._write_direct
    or by evaluate's own add_batch (datasets' encode_batch); and what _write_direct returned."""
    import evaluate

    m = evaluate.load(str(REPO / "metrics" / name), config, keep_in_memory=True)
    batch = {"predictions": preds, "references": refs}
    wrote = m._write_direct(batch) if direct else evaluate.Metric.add_batch(m, **copy.deepcopy(batch))
    if wrote is False:
        return None, wrote
    m._finalize()
    table, m.buf_writer, m.data = m.data.data.table, None, None
    return table, wrote


@pytest.mark.parametrize("case", range(len(CACHE_CASES)), ids=[c[0] for c in CACHE_CASES])
def test_a_batch_written_straight_to_arrow_is_the_table_evaluate_writes(case):
    """PerckitMetric.add_batch skips datasets' per-value encoding where pyarrow builds the same table from the checked
    rows (perckit.hf.feature_check.arrow_direct): the cache holds the same table, schema and metadata included, as
    evaluate's own add_batch writes; rows pyarrow refuses go the evaluate way, nothing written first."""
    _, name, config, make, direct = CACHE_CASES[case]
    preds, refs = make()
    table, wrote = _cache_table(name, config, preds, refs, True)
    assert wrote is direct
    if direct:
        theirs, _ = _cache_table(name, config, preds, refs, False)
        assert table.equals(theirs, check_metadata=True)
        assert table.schema.metadata == theirs.schema.metadata


@pytest.mark.parametrize("keep_in_memory", [False, True], ids=["cache-file", "kept-in-memory"])
def test_compute_streams_the_cache_with_the_numbers_and_order_of_all_rows_at_once(keep_in_memory, monkeypatch):
    """compute reads the cache back a few rows at a time (ROWS_PER_UPDATE, 3 here), from the file with plain reads
    through the checked reader (not its memory map) or from the columns kept in memory, into Accumulator.update_all: the result, per_example's
    order included, is the core function's on all the rows, though every pair's halves lie in different batches."""
    import evaluate

    from perckit import rle
    from perckit.hf import accumulate, metric as hf_metric
    from perckit.refcoco_m.metric import refer_iou

    rng = np.random.default_rng(3)
    refs = [{**RI_REF, "expression_id": f"e{i}", "mask": rle.encode(rng.random((4, 5)) > 0.5), "category": "ab"[i % 2]} for i in range(11)]
    preds = [{"expression_id": f"e{i}", "mask": rle.encode(rng.random((4, 5)) > 0.5)} for i in reversed(range(11))]
    opened = []
    monkeypatch.setattr(accumulate, "ROWS_PER_UPDATE", 3)
    monkeypatch.setattr(hf_metric, "open_checked", lambda path, *a, _open=hf_metric.open_checked, **k: opened.append(path) or _open(path, *a, **k))
    m = evaluate.load(str(REPO / "metrics" / "refer_iou"), keep_in_memory=keep_in_memory)
    for i in range(0, 11, 4):
        m.add_batch(predictions=preds[i:i + 4], references=refs[i:i + 4])
    assert m.compute(return_per_example=True) == refer_iou(preds, refs, return_per_example=True)
    assert len(opened) == (0 if keep_in_memory else 1)


# ---------------------------------------------------------------- options: every option of every metric


def _option_fields(name: str) -> dict[str, str]:
    """``{option: annotation}`` of every compute option of the metric."""
    if name == "av_edit_quality":
        from perckit.reason_av_edit.quality.metric import EditQualityOptions

        return {f.name: str(f.type) for f in dataclasses.fields(EditQualityOptions)}
    if name in ("mask_temporal", "refer_iou", "m4seg", "av_reasoning", "syn4d"):
        from perckit.m4seg.metric.options import M4SegOptions
        from perckit.r4d_bench.metric import MaskTemporalOptions
        from perckit.reason_av_edit.metric import AVReasoningOptions
        from perckit.refcoco_m.metric import ReferIoUOptions
        from perckit.syn4d.metric import Syn4DOptions

        cls = {"mask_temporal": MaskTemporalOptions, "refer_iou": ReferIoUOptions, "m4seg": M4SegOptions,
               "av_reasoning": AVReasoningOptions, "syn4d": Syn4DOptions}[name]
        return {f.name: str(f.type) for f in dataclasses.fields(cls)}
    from perckit.r4d_bench.metric import track_id

    params = list(inspect.signature(track_id).parameters.values())[2:]
    return {p.name: str(p.annotation) for p in params if p.kind is p.KEYWORD_ONLY or p.kind is p.POSITIONAL_OR_KEYWORD}


def _wrong_values(annotation: str) -> list:
    a = annotation.replace(" ", "")
    if a == "bool":
        return [1, "yes", None]
    if a == "float":
        return ["0.5", True, None, [0.5]]
    if a == "int":
        return [1.5, "3", True, None]
    if a == "str":
        return [5, True, None]
    if a == "str|None":
        return [5, True, ["a"]]
    if a.startswith("tuple[str") or a.startswith("Sequence[str]") or a == "Sequence[str]|str|None":
        return [5, [1, 2], True]
    if a in ("tuple", "tuple|None"):
        return [5, True, "0.5"] if a == "tuple" else [5, True]
    if a == "Any":
        return [5]
    if a == "Mapping[str,Any]|None":
        return [5, ["fvd"], "fvd"]
    raise AssertionError(f"no wrong values for the annotation {annotation!r}: add them here")


OPTION_METRICS = ("mask_temporal", "track_id", "refer_iou", "syn4d", "m4seg", "av_reasoning", "av_edit_quality")


@functools.lru_cache(maxsize=None)
def option_cases(name: str) -> tuple[tuple[str, str, object], ...]:
    """``(id, option, value)``: every compute option of ``name`` with each wrong value of its annotation."""
    return tuple((f"{name}-{option}-{type(value).__name__}-{value!r}", option, value)
                 for option, annotation in _option_fields(name).items() for value in _wrong_values(annotation))


def _an_option_error(name: str):
    config = "tracking" if name == "syn4d" else None
    pred, ref, options = GOOD[name, config]

    def check(case):
        _, option, value = case
        with pytest.raises(OptionError) as info:
            metric(name, config).compute(predictions=[pred], references=[ref], **{**options, option: value})
        msg = str(info.value)
        assert f"'{option}'" in msg and "expected" in msg, msg
        assert repr(value)[:20] in msg, msg

    return check


@pytest.mark.parametrize("name", OPTION_METRICS)
def test_every_option_of_the_wrong_type_is_an_option_error(name):
    """One property test per metric: every compute option with each wrong value of its type (every case runs)."""
    cases = option_cases(name)
    every_case(cases, _an_option_error(name), key=itemgetter(0), first=cases[:1])


def test_a_refused_compute_leaves_no_cache_file_and_no_held_lock(tmp_path):
    # evaluate releases its cache files only after the scoring step returns: a refusal there left the module's
    # .arrow file and its held lock, and the next compute waited a second on that lock for another file name
    import evaluate
    from filelock import FileLock

    pred, ref, options = GOOD["refer_iou", None]
    m = evaluate.load(str(REPO / "metrics" / "refer_iou"), cache_dir=str(tmp_path))
    for _ in range(2):
        with pytest.raises(OptionError):
            m.compute(predictions=[pred], references=[ref], **{**options, "thresholds": "0.5"})
        assert sorted(p.name for p in tmp_path.rglob("*.arrow")) == []
        for lock in tmp_path.rglob("*.lock"):
            free = FileLock(str(lock))
            free.acquire(timeout=0)  # free: another lock could take it at once (a held one raises Timeout)
            free.release()
    assert m.compute(predictions=[pred], references=[ref], **options) == metric("refer_iou").compute(
        predictions=[pred], references=[ref], **options)


def test_every_metric_has_options_in_the_table():
    assert all(option_cases(name) for name in OPTION_METRICS)
    assert {c[1] for c in option_cases("mask_temporal")} >= {"strict", "only_queries", "iou_threshold"}


INIT_CASES = [
    ("compute-option-at-load", {"iou_threshold": 0.3}, [r"evaluate\.load\('metrics/mask_temporal'\): unknown option\(s\) \['iou_threshold'\]", r"compute\(\.\.\.\)"]),
    ("keep-in-memory-a-word", {"keep_in_memory": "yes"}, [r"option 'keep_in_memory': expected True or False, got str: 'yes'"]),
    ("num-process-a-string", {"num_process": "2"}, [r"option 'num_process': expected an integer, got str: '2'"]),
    ("seed-a-float", {"seed": 1.5}, [r"option 'seed': expected an integer or None, got float: 1\.5"]),
    ("timeout-a-string", {"timeout": "100"}, [r"option 'timeout': expected a number, got str"]),
    ("experiment-id-an-int", {"experiment_id": 5}, [r"option 'experiment_id': expected a string or None, got int: 5"]),
    ("config-name-an-int", {"config_name": 5}, [r"option 'config_name': expected a string or None, got int: 5"]),
]


@pytest.mark.parametrize("options, patterns", [pytest.param(*c[1:], id=c[0]) for c in INIT_CASES])
def test_load_options(options, patterns):
    import evaluate

    with pytest.raises(OptionError) as info:
        evaluate.load(str(REPO / "metrics" / "mask_temporal"), **options)
    for p in patterns:
        assert re.search(p, str(info.value)), f"{p!r} not in {str(info.value)!r}"


def test_syn4d_config_name_of_the_wrong_type():
    import evaluate

    with pytest.raises(OptionError, match=r"expected a string or None, got int: 5"):
        evaluate.load(str(REPO / "metrics" / "syn4d"), 5)


# ---------------------------------------------------------------- the shared checkers


def test_check_option_type_and_check_choice():
    from perckit.errors import check_choice, check_option_type

    assert check_option_type("x", 0.5, "number") == 0.5
    assert check_option_type("x", np.float32(0.5), "number") == np.float32(0.5)
    assert check_option_type("x", np.bool_(True), "bool")
    for value, kind in [(True, "number"), ("0.5", "number"), (1, "bool"), (np.int64(1), "bool"), (1.0, "int"), (["a", 1], "strs"), (None, "str")]:
        with pytest.raises(OptionError, match="option 'x': expected"):
            check_option_type("x", value, kind)
    check_choice("m", "a", ("a", None))
    for value in (True, 1.0, np.array([1, 2]), ["a"]):
        with pytest.raises(OptionError, match="option 'm': expected one of"):
            check_choice("m", value, (1, "a", None))


def test_feature_check_float_and_int_edges():
    import datasets

    from perckit.hf.feature_check import Refused, compile_feature

    f64, f32, i32, b = (compile_feature(datasets.Value(d)) for d in ("float64", "float32", "int32", "bool"))
    for ok, check in [(NAN, f64), (math.inf, f32), (3, f64), (np.float32(1.5), f64), (2.0, i32), (np.uint8(3), i32), (np.bool_(False), b), (None, i32)]:
        check(ok)
    for bad, check in [(1e39, f32), (10 ** 400, f64), (np.float64(1.5), i32), (-(2 ** 31) - 1, i32), (np.int64(2 ** 40), i32), (0, b), (math.inf, i32)]:
        with pytest.raises(Refused):
            check(bad)


# ---------------------------------------------------------------- perckit evaluate: the row files


def _cli_rows(path):
    from perckit.__main__ import _read_rows

    return _read_rows(str(path))


def _bounded(fn, seconds: float = 10.0):
    """``fn()`` in a thread that must finish within ``seconds`` (reading a FIFO would block forever)."""
    import threading

    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the reader blocked"
    if "error" in out:
        raise out["error"]
    return out["value"]


CLI_CASES = [
    # id, file name, content (None: a FIFO), patterns
    ("cli-jsonl-duplicate-key", "p.jsonl", '{"expression_id": "a", "mask": null}\n{"expression_id": "b", "expression_id": "c"}\n',
     [r"p\.jsonl' line 2: duplicate key 'expression_id' in a JSON object"]),
    ("cli-jsonl-duplicate-nested-key", "p.jsonl", '{"mask": {"size": [1, 2], "size": [2, 2]}}\n', [r"p\.jsonl' line 1: duplicate key 'size'"]),
    ("cli-json-duplicate-key", "p.json", '[{"query_id": "q", "query_id": "r"}]', [r"p\.json': duplicate key 'query_id'"]),
    ("cli-jsonl-a-fifo", "p.jsonl", None, [r"p\.jsonl", "expected a regular file, got a FIFO"]),
    ("cli-json-a-fifo", "p.json", None, [r"p\.json", "expected a regular file, got a FIFO"]),
]


@pytest.mark.parametrize("name, content, patterns", [pytest.param(*c[1:], id=c[0]) for c in CLI_CASES])
def test_cli_row_files(tmp_path, name, content, patterns):
    import os

    p = tmp_path / name
    if content is None:
        os.mkfifo(p)
    else:
        p.write_text(content, encoding="utf-8")
    with pytest.raises(PredictionError) as info:
        _bounded(lambda: _cli_rows(p))
    for pat in patterns:
        assert re.search(pat, str(info.value)), f"{pat!r} not in {str(info.value)!r}"


@pytest.mark.parametrize("name", ["p.jsonl", "p.json"])
def test_cli_row_files_skip_a_leading_bom(tmp_path, name):
    p = tmp_path / name
    row = '{"query_id": "q", "target_track_ids": []}'
    p.write_text("\ufeff" + (row + "\n" if name.endswith("l") else f"[{row}]"), encoding="utf-8")
    assert _cli_rows(p) == [{"query_id": "q", "target_track_ids": []}]
