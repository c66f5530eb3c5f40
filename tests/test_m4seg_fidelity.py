"""Issue 14, M4Seg: gIoU / cIoU pool the per-image union masks over every image of a sample (golden values by
hand), source="auto" gives the Hub Parquet's ids and rows, and an unclosed streaming iterator exits quietly."""

import subprocess
import sys
import textwrap

import pytest
from conftest import DS_MAJOR, REPO, build_split
from test_m4seg_common import NO_METEOR, R, g_pred, g_ref, ref_row

from perckit.m4seg import metrics as core
from perckit.segmentation import reduce_iou

# ---------------------------------------------------------------- gIoU / cIoU (metric card, "Extras")


def _score(preds, refs):
    return core.compute(preds, refs, **NO_METEOR, per_sample=True)


def _pred(eid, groundings):
    return {"example_id": eid, "answer": "", "groundings": groundings}


# A: image 1 (1x2) predicted perfectly; image 2 (1x4) has no GT but a false full-image mask.
#    Per image: (I, U) = (2, 2) and (0, 4), so gIoU = 2 / 6 = 1/3 (before issue 14: image 2 was skipped, 1.0).
A_REF = ref_row("a", "cup_101", [(1, 2), (1, 4)], [g_ref(1, "cup", (0, 7), R("02", (1, 2)))])
A_PRED = _pred("a", [g_pred(1, "cup", R("02", (1, 2))), g_pred(2, "cup", R("04", (1, 4)))])
# B: image 1 predicted perfectly; image 2 has GT [[0,1,1,0]] and no prediction: (2, 2) + (0, 2), gIoU 2/4.
B_REF = ref_row("b", "cup_101 and cup_201", [(1, 2), (1, 4)], [
    g_ref(1, "cup", (0, 7), R("02", (1, 2))), g_ref(2, "cup", (12, 19), R("121", (1, 4)))])
B_PRED = _pred("b", [g_pred(1, "cup", R("02", (1, 2)))])
# C: image 1 GT [[1,0]] predicted perfectly; image 2 has neither GT nor prediction: (1, 1) + (0, 0), gIoU 1.
C_REF = ref_row("c", "cup_101", [(1, 2), (1, 4)], [g_ref(1, "cup", (0, 7), R("011", (1, 2)))])
C_PRED = _pred("c", [g_pred(1, "cup", R("011", (1, 2)))])
# D: one GT grounding whose mask is empty, no prediction: the pooled union is empty; gIoU 1 (refer_iou's rule).
D_REF = ref_row("d", "cup_101", [(1, 4)], [g_ref(1, "cup", (0, 7), R("4", (1, 4)))])
D_PRED = _pred("d", [])
# N: no GT grounding at all, a predicted mask: left out of gIoU and cIoU (unchanged).
N_REF = ref_row("n", "Nothing here.", [(1, 4)], [])
N_PRED = _pred("n", [g_pred(1, "cup", R("04", (1, 4)))])


def test_giou_counts_a_false_mask_in_an_image_without_gt():
    out = _score([A_PRED], [A_REF])
    assert out["giou"] == pytest.approx(1 / 3) and out["ciou"] == pytest.approx(1 / 3)
    row = out["per_sample"][0]
    assert (row["inter"], row["union"]) == (2, 6)
    assert out["miou"] == 1.0  # the mIoU pairing is per image and unchanged: the false mask has no GT to pair


def test_giou_image_with_gt_only():
    out = _score([B_PRED], [B_REF])
    assert out["giou"] == pytest.approx(0.5) and out["ciou"] == pytest.approx(0.5)
    assert (out["per_sample"][0]["inter"], out["per_sample"][0]["union"]) == (2, 4)


def test_giou_image_with_neither_adds_nothing():
    out = _score([C_PRED], [C_REF])
    assert out["giou"] == 1.0 and out["ciou"] == 1.0
    assert (out["per_sample"][0]["inter"], out["per_sample"][0]["union"]) == (1, 1)


def test_giou_and_ciou_of_an_empty_union_are_1_as_refer_iou():
    out = _score([D_PRED], [D_REF])
    assert (out["per_sample"][0]["inter"], out["per_sample"][0]["union"]) == (0, 0)
    assert out["giou"] == 1.0 and out["ciou"] == 1.0  # cIoU was 0.0 before issue 14
    assert reduce_iou([core.seg.PairScore(0, 0, 1.0)], ())["ciou"] == out["ciou"]  # the rule refer_iou reduces with
    assert out["miou"] == 0.0 and out["miou_strict"] == 0.0  # nothing paired: mIoU's own rule is unchanged


def test_giou_and_ciou_pooled_over_samples():
    out = _score([A_PRED, B_PRED, C_PRED, D_PRED, N_PRED], [A_REF, B_REF, C_REF, D_REF, N_REF])
    assert out["num_samples_without_groundings"] == 1  # N is not in gIoU / cIoU
    assert out["giou"] == pytest.approx((1 / 3 + 1 / 2 + 1 + 1) / 4)
    assert out["ciou"] == pytest.approx((2 + 2 + 1 + 0) / (6 + 4 + 1 + 0))
    pct = core.compute([A_PRED], [A_REF], **NO_METEOR, as_percent=True)
    assert pct["giou"] == pytest.approx(100 / 3) and pct["ciou"] == pytest.approx(100 / 3)


def test_giou_groups_pool_the_same_way():
    b_ref = dict(B_REF, question_type="counting")
    out = _score([A_PRED, B_PRED], [A_REF, b_ref])
    assert out["per_question_type"]["spatial"]["giou"] == pytest.approx(1 / 3)
    assert out["per_question_type"]["counting"]["ciou"] == pytest.approx(0.5)


def test_union_mask_counts_directly():
    full, left = R("04", (1, 4)), R("022", (1, 4))
    assert core.union_mask_counts([full], [], [1, 4], "x") == (0, 4)
    assert core.union_mask_counts([], [left], [1, 4], "x") == (0, 2)
    assert core.union_mask_counts([], [], [1, 4], "x") == (0, 0)
    assert core.union_mask_counts([left, R("211", (1, 4))], [full], [1, 4], "x") == (3, 4)
