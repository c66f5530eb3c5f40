"""perckit.core.segmentation, the generic per-mask IoU core: golden values, dense-numpy properties, order independence."""

from __future__ import annotations

import logging
import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pycocotools import mask as _coco

from perckit import rle
from perckit.core import segmentation as seg
from perckit.errors import OptionError, PredictionError, RLEError, check_choice

from oracles import masks as oracle

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# The spec's 2x3 masks (rows as written; RLE runs are column-major).
GT = np.array([[1, 1, 0], [1, 0, 0]], dtype=bool)
A = np.array([[1, 0, 0], [1, 1, 0]], dtype=bool)
FULL = np.ones((2, 3), dtype=bool)
EMPTY = np.zeros((2, 3), dtype=bool)
TABLE = [(GT, "033"), (A, "021O1"), (FULL, "06"), (EMPTY, "6")]


def R(counts, size=(2, 3)):
    return {"size": list(size), "counts": counts}


def dense_counts(p: np.ndarray, g: np.ndarray) -> tuple[int, int]:
    return int((p & g).sum()), int((p | g).sum())


def count_matrix(preds, gts, *, resize=None, where="masks"):
    """``(I, U)`` of every (prediction, ground truth) pair, row i = prediction i: :func:`seg.rle_count_matrix` when
    all masks have one size, else each pair through :func:`seg.fit_prediction` (one row budget for the call) and
    :func:`rle.rle_pair_counts` (the former ``perckit.core.segmentation.count_matrix``, used by these tests only)."""
    check_choice("resize", resize, seg.RESIZE_MODES)
    ps = [seg.as_rle(p, f"{where}: prediction {i}") for i, p in enumerate(preds)]
    gs = [seg.as_rle(g, f"{where}: ground truth {j}") for j, g in enumerate(gts)]
    if len({tuple(m["size"]) for m in ps + gs}) <= 1:
        inter, union = seg.rle_count_matrix(ps, gs, where)
        return [[(int(inter[i, j]), int(union[i, j])) for j in range(len(gs))] for i in range(len(ps))]
    budget = seg.row_budget()
    out = []
    for i, p in enumerate(ps):
        row = []
        for j, g in enumerate(gs):
            pair = f"{where}: prediction {i} vs ground truth {j}"
            counts = rle.rle_pair_counts(seg.fit_prediction(p, g["size"], resize=resize, where=pair, budget=budget), g, pair)
            row.append((counts.intersection, counts.union))
        out.append(row)
    return out


@pytest.mark.parametrize("mask, counts", TABLE)
def test_rle_table_decodes_and_reencodes(mask, counts):
    assert rle.encode(mask) == R(counts)
    assert (rle.decode(rle.validate(R(counts))) == mask).all()


@pytest.mark.parametrize(
    "pred, expected",
    [("021O1", (2, 4)), ("033", (3, 3)), ("06", (3, 6)), ("6", (0, 3))],  # M1 e1..e3 and M2
)
def test_golden_pair_counts(pred, expected):
    assert seg.pair_counts(R(pred), R("033")) == expected
    counts = seg.pair_counts(R(pred), R("033"))
    assert all(type(v) is int for v in counts)


def test_m1_reduction():
    scores = [seg.score_pair(R(p), R("033")) for p in ("021O1", "033", "06")]
    assert [s.iou for s in scores] == [0.5, 1.0, 0.5]
    out = seg.reduce_iou(scores)
    assert out["miou"] == pytest.approx(2 / 3) and out["ciou"] == pytest.approx(8 / 13)
    assert out["precision@0.5"] == 1.0  # >= is inclusive
    for t in ("0.6", "0.7", "0.8", "0.9"):
        assert out[f"precision@{t}"] == pytest.approx(1 / 3)
    assert out["num_examples"] == 3
    assert list(out) == ["miou", "ciou", "precision@0.5", "precision@0.6", "precision@0.7", "precision@0.8", "precision@0.9", "num_examples"]


def test_empty_union_rule():
    assert seg.pair_counts(R("6"), R("6")) == (0, 0)
    assert seg.score_pair(R("6"), R("6")).iou == 1.0
    assert seg.score_pair(R("6"), R("6"), empty_union_iou=0.0).iou == 0.0
    assert seg.reduce_iou([seg.score_pair(R("6"), R("6"))])["ciou"] == 1.0  # sum U = 0


def test_no_scores():
    out = seg.reduce_iou([])
    assert out["num_examples"] == 0 and out["miou"] is None and out["ciou"] is None and out["precision@0.5"] is None


def test_size_mismatch_raises_or_resizes(caplog):
    with pytest.raises(PredictionError, match=r"expression 'e1'.*\[3, 2\].*\[2, 3\]"):
        seg.pair_counts(R("6", (3, 2)), R("033"), where="expression 'e1'")
    big = np.repeat(np.repeat(A, 2, axis=0), 2, axis=1)  # 4x6 nearest upsampling of A
    with caplog.at_level(logging.WARNING, logger="perckit.core.segmentation"):
        assert seg.score_pair(rle.encode(big), R("033"), resize="opencv", where="e1").iou == 0.5
    assert "e1" in caplog.text and "[4, 6]" in caplog.text and "[2, 3]" in caplog.text
    with pytest.raises(OptionError, match="resize"):
        seg.pair_counts(R("033"), R("033"), resize="bilinear")


def test_bad_masks_are_refused_before_pycocotools():
    with pytest.raises(RLEError, match="e7: predicted mask.*sum to 5"):
        seg.pair_counts(R("5"), R("033"), where="e7")
    with pytest.raises(RLEError, match="e7: ground-truth mask.*size"):
        seg.pair_counts(R("033"), {"size": [2], "counts": "033"}, where="e7")


def test_every_input_form_gives_the_same_counts():
    forms = [
        A,
        A.astype(np.uint8) * 255,
        R("021O1"),
        {"size": [2, 3], "counts": b"021O1"},  # pycocotools output
        {"size": [2, 3], "counts": [0, 2, 1, 1, 2]},  # uncompressed RLE
    ]
    for f in forms:
        assert seg.pair_counts(f, GT) == (2, 4)
        assert seg.as_rle(f) == R("021O1")


def test_large_counts_do_not_overflow():
    big = 3_000_000_000  # beyond uint32
    scores = [seg.PairScore(big, big + 1, big / (big + 1)) for _ in range(4)]
    out = seg.reduce_iou(scores)
    assert out["ciou"] == (4 * big) / (4 * (big + 1))


def test_thresholds_and_keys():
    assert seg.precision_key(0.5) == "precision@0.5" and seg.precision_key(0.75) == "precision@0.75"
    assert seg.check_thresholds([0.5, 1]) == (0.5, 1.0)
    out = seg.reduce_iou([seg.PairScore(1, 2, 0.5)], thresholds=(0.25, 0.5, 0.75))
    assert out["precision@0.25"] == 1.0 and out["precision@0.5"] == 1.0 and out["precision@0.75"] == 0.0
    for bad in ([], [1.5], ["x"], [0.5, 0.5], [True]):
        with pytest.raises(OptionError, match="thresholds"):
            seg.check_thresholds(bad)


def test_groups():
    scores = [seg.PairScore(1, 2, 0.5), seg.PairScore(3, 3, 1.0), seg.PairScore(0, 4, 0.0)]
    out = seg.reduce_groups(scores, ["b", "a", "b"])
    assert list(out) == ["a", "b"]
    assert out["a"] == {"miou": 1.0, "ciou": 1.0, "num_examples": 1}
    assert out["b"] == {"miou": 0.25, "ciou": 1 / 6, "num_examples": 2}
    with pytest.raises(ValueError, match="3 scores but 2 group labels"):
        seg.reduce_groups(scores, ["a", "b"])


def test_count_matrix():
    m = count_matrix([R("021O1"), R("6")], [R("033"), R("06")])
    assert m == [[(2, 4), (3, 6)], [(0, 3), (0, 6)]]


def test_match_by_id():
    refs = [{"k": "a"}, {"k": "b"}]
    assert [r["k"] for _, r in seg.match_by_id([{"k": "b"}, {"k": "a"}], refs, "k")] == ["a", "b"]
    with pytest.raises(PredictionError, match="duplicate k 'a'"):
        seg.match_by_id([{"k": "a"}, {"k": "a"}], refs, "k")
    with pytest.raises(PredictionError, match=r"unknown to the references.*'c'"):
        seg.match_by_id([{"k": "a"}, {"k": "b"}, {"k": "c"}], refs, "k")
    with pytest.raises(PredictionError, match=r"no prediction for 1 reference k.*'b'"):
        seg.match_by_id([{"k": "a"}], refs, "k")


# ---------------------------------------------------------------- properties against dense numpy

shapes = st.tuples(st.integers(1, 12), st.integers(1, 12))


@st.composite
def mask_pairs(draw):
    h, w = draw(shapes)
    p = draw(hnp.arrays(bool, (h, w)))
    g = draw(hnp.arrays(bool, (h, w)))
    return p, g


@FAST
@given(mask_pairs())
def test_pair_counts_equal_dense_numpy(pair):
    p, g = pair
    assert seg.pair_counts(rle.encode(p), rle.encode(g)) == dense_counts(p, g)
    # and pycocotools' own encoding (bytes counts) agrees
    coco = _coco.encode(np.asfortranarray(p.astype(np.uint8)))
    assert seg.pair_counts(coco, g) == dense_counts(p, g)


@FAST
@given(st.lists(mask_pairs(), min_size=1, max_size=8), st.floats(0.0, 1.0))
def test_reduction_equals_dense_numpy(pairs, empty_iou):
    scores = [seg.score_pair(rle.encode(p), rle.encode(g), empty_union_iou=empty_iou) for p, g in pairs]
    inter = np.array([(p & g).sum() for p, g in pairs], dtype=np.int64)
    union = np.array([(p | g).sum() for p, g in pairs], dtype=np.int64)
    ious = np.where(union > 0, inter / np.maximum(union, 1), empty_iou)
    out = seg.reduce_iou(scores)
    assert out["miou"] == pytest.approx(float(ious.mean()), rel=1e-12, abs=1e-15)
    assert out["ciou"] == (inter.sum() / union.sum() if union.sum() else 1.0)
    for t in seg.DEFAULT_THRESHOLDS:
        assert out[seg.precision_key(t)] == float((ious >= t).mean())
    assert out["num_examples"] == len(pairs)


@FAST
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=30), st.randoms())
def test_reduction_does_not_depend_on_order(counts, rnd):
    scores = [seg.PairScore(min(i, u), u, rle.pair_iou(min(i, u), u)) for i, u in counts]
    shuffled = list(scores)
    rnd.shuffle(shuffled)
    assert seg.reduce_iou(shuffled) == seg.reduce_iou(scores)
    assert math.fsum(s.iou for s in scores) == math.fsum(s.iou for s in shuffled)


def test_resize_nearest_matches_dense_indexing():
    rng = random.Random(0)
    for _ in range(20):
        h, w, H, W = (rng.randint(1, 9) for _ in range(4))
        p = np.array([[rng.random() < 0.5 for _ in range(w)] for _ in range(h)])
        g = np.array([[rng.random() < 0.5 for _ in range(W)] for _ in range(H)])
        for rule in rle.RESIZE_RULES:
            expected = dense_counts(oracle.library_resize(p, (H, W), rule), g)
            assert seg.pair_counts(p, g, resize=rule) == expected


# ---------------------------------------------------------------- the one mask-pair core: fast paths and rules


def test_fit_prediction_is_the_one_resize_rule(caplog):
    p = R("021O1")
    assert seg.fit_prediction(p, [2, 3], resize=None, where="w") is p  # same size: untouched
    with pytest.raises(PredictionError) as info:
        seg.fit_prediction(R("6", (3, 2)), [2, 3], resize=None, where="expression 'e1'")
    assert str(info.value) == (
        "expression 'e1': predicted mask size [3, 2] differs from the ground-truth size [2, 3] "
        "([H, W]; pass resize_predictions='nearest' to resize predictions)"
    )
    with pytest.raises(PredictionError, match=r"^g\.mask: predicted mask size \[3, 2\] differs from the size of image 2 \[2, 3\]"):
        seg.fit_prediction(R("6", (3, 2)), [2, 3], resize=None, where="g.mask", target="the size of image 2")
    big = rle.encode(np.repeat(np.repeat(A, 2, axis=0), 2, axis=1))
    with caplog.at_level(logging.WARNING, logger="perckit.core.segmentation"):
        assert seg.fit_prediction(big, [2, 3], resize="pil", where="w1") == R("021O1")
        assert seg.fit_prediction(big, (2, 3), resize="opencv", where="w2", warn=False) == R("021O1")
    assert "w1: resizing the predicted mask from [4, 6] to [2, 3] (nearest neighbour, pil rule)" in caplog.text
    assert "w2" not in caplog.text
    with pytest.raises(OptionError, match=r"option 'resize': expected one of \[None, 'pil', 'opencv'\], got 'nearest'"):
        seg.pair_counts(big, R("033"), resize="nearest")  # the core takes a rule; "nearest" is a metric's option
    assert seg.resize_rule("nearest", "pil") == "pil" and seg.resize_rule("opencv", "pil") == "opencv"
    assert seg.resize_rule(None, "pil") is None
    assert seg.RESIZE_OPTION == "resize_predictions" and seg.EMPTY_UNION_OPTION == "empty_union_iou"


def test_rle_pair_counts_fast_path():
    c = rle.rle_pair_counts(R("021O1"), R("033"))
    assert c == (2, 4, 3, 3) and (c.intersection, c.union, c.pred_area, c.gt_area) == (2, 4, 3, 3)
    assert all(type(v) is int for v in c)
    assert rle.rle_pair_counts(None, R("033")) == (0, 3, 0, 3)  # None is the empty mask
    assert rle.rle_pair_counts(R("06"), None) == (0, 6, 6, 0)
    assert rle.rle_pair_counts(None, None) == (0, 0, 0, 0)
    assert rle.rle_pair_counts({"size": (2, 3), "counts": "033"}, R("033")) == (3, 3, 3, 3)  # a tuple size is the same size
    with pytest.raises(RLEError, match="where: mask 1 has size"):
        rle.rle_pair_counts(R("6"), R("6", (3, 2)), "where")  # never pycocotools' silent empty merge, even for empty masks
    # rle.intersection_union / rle.iou are thin aliases of it
    assert rle.intersection_union(R("021O1"), R("033")) == (2, 4)
    assert rle.iou(R("6"), R("6"), empty_iou=0.25) == rle.pair_iou(0, 0, 0.25) == 0.25


def test_iou_matrix_is_the_scalar_rule_cell_by_cell():
    inter = np.array([[0, 2], [3, 0]])
    union = np.array([[0, 4], [7, 5]])
    for empty in (1.0, 0.0, 0.25):
        m = seg.iou_matrix(inter, union, empty)
        assert m.dtype == np.float64
        assert m.tolist() == [[rle.pair_iou(int(i), int(u), empty) for i, u in zip(ri, ru)] for ri, ru in zip(inter, union)]
    assert seg.iou_matrix(np.zeros((0, 3), int), np.zeros((0, 3), int)).shape == (0, 3)


@FAST
@given(st.tuples(st.integers(1, 8), st.integers(1, 8)).flatmap(
    lambda hw: st.tuples(st.lists(hnp.arrays(bool, hw), max_size=4), st.lists(hnp.arrays(bool, hw), max_size=4))))
def test_rle_count_matrix_equals_dense_numpy(masks):
    ps, gs = masks
    inter, union = seg.rle_count_matrix([rle.encode(p) for p in ps], [rle.encode(g) for g in gs])
    assert inter.shape == union.shape == (len(ps), len(gs))
    for i, p in enumerate(ps):
        for j, g in enumerate(gs):
            assert (int(inter[i, j]), int(union[i, j])) == dense_counts(p, g)
    assert count_matrix(ps, gs) == [[dense_counts(p, g) for g in gs] for p in ps]


def test_count_matrix_with_masks_of_several_sizes():
    big = rle.encode(np.repeat(np.repeat(A, 2, axis=0), 2, axis=1))
    assert count_matrix([big], [R("033"), rle.encode(np.repeat(np.repeat(GT, 2, 0), 2, 1))], resize="opencv") == [[(2, 4), (8, 16)]]
    with pytest.raises(PredictionError, match=r"masks: prediction 0 vs ground truth 0: predicted mask size \[4, 6\]"):
        count_matrix([big], [R("033")])


def test_dense_pair_counts_agree_with_the_rle_counts():
    """The dense counterpart (audio time-frequency masks, frame vectors) counts exactly what the RLE path counts."""
    rng = np.random.default_rng(3)
    for shape, p_on, g_on in [((5, 7), 0.4, 0.6), ((1, 9), 0.0, 0.5), ((4, 4), 0.0, 0.0), ((3, 6), 1.0, 0.2)]:
        p = rng.random(shape) < p_on
        g = rng.random(shape) < g_on
        dense = seg.dense_pair_counts(p, g)
        assert dense == rle.rle_pair_counts(rle.encode(p.astype(np.uint8)), rle.encode(g.astype(np.uint8)))
        assert dense.intersection == int((p & g).sum()) and dense.union == int((p | g).sum())
    with pytest.raises(ValueError, match=r"tf: the two masks differ in shape, \[2, 3\] vs \[3, 2\]"):
        seg.dense_pair_counts(np.zeros((2, 3), bool), np.zeros((3, 2), bool), "tf")
