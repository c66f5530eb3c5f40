"""RefCOCO-M: the refer_iou metric (the spec's test vectors, bad input, options, dense parity, evaluate's distributed mode)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.distributed import batch_sizes, compute_in_batches, run_distributed
from helpers.refcoco_m import REF, PRED

from perckit import rle
from perckit.errors import OptionError, PredictionError, RLEError
from perckit.refcoco_m import features as feats
from perckit.refcoco_m import to_metric_reference
from perckit.refcoco_m import metric as core


# ---------------------------------------------------------------- metric: test vectors


M1_REFS = [REF("e1", "033"), REF("e2", "033"), REF("e3", "033", category="cat")]
M1_PREDS = [PRED("e3", "06"), PRED("e1", "021O1"), PRED("e2", "033")]  # matched by id, not position


def test_m1_through_evaluate(refer_metric):
    out = refer_metric.compute(predictions=M1_PREDS, references=M1_REFS, return_per_example=True)
    assert out["miou"] == pytest.approx(2 / 3) and out["ciou"] == pytest.approx(8 / 13)
    assert out["precision@0.5"] == 1.0
    for t in ("0.6", "0.7", "0.8", "0.9"):
        assert out[f"precision@{t}"] == pytest.approx(1 / 3)
    assert out["num_examples"] == 3
    assert out["per_example"] == [
        {"expression_id": "e1", "iou": 0.5, "intersection": 2, "union": 4},
        {"expression_id": "e2", "iou": 1.0, "intersection": 3, "union": 3},
        {"expression_id": "e3", "iou": 0.5, "intersection": 3, "union": 6},
    ]
    assert out["per_category"] == {"cat": {"miou": 0.5, "ciou": 0.5, "num_examples": 1},
                                   "dog": {"miou": 0.75, "ciou": 5 / 7, "num_examples": 2}}
    assert out["per_supercategory"] == {"animal": {"miou": out["miou"], "ciou": out["ciou"], "num_examples": 3}}
    assert out == core.refer_iou(M1_PREDS, M1_REFS, return_per_example=True)
    json.dumps(out, sort_keys=True, indent=2)  # the report is plain JSON


def test_m2_empty_prediction():
    out = core.refer_iou([PRED("e", "6")], [REF("e", "033")], return_per_example=True)
    assert out["per_example"] == [{"expression_id": "e", "iou": 0.0, "intersection": 0, "union": 3}]


def test_m3_empty_gt_and_empty_prediction(refer_metric):
    assert refer_metric.compute(predictions=[PRED("e", "6")], references=[REF("e", "6")])["miou"] == 1.0
    assert core.refer_iou([PRED("e", "6")], [REF("e", "6")], empty_union_iou=0.0)["miou"] == 0.0


def test_m4_wrong_size_raises_or_resizes(refer_metric):
    with pytest.raises(PredictionError, match=r"expression 'e1'.*\[3, 2\].*\[2, 3\]"):
        refer_metric.compute(predictions=[PRED("e1", "6", (3, 2))], references=[REF("e1", "033")])
    big = np.repeat(np.repeat(np.array([[1, 0, 0], [1, 1, 0]], dtype=bool), 2, axis=0), 2, axis=1)
    out = refer_metric.compute(predictions=[{"expression_id": "e1", "mask": rle.encode(big)}], references=[REF("e1", "033")],
                               resize_predictions="nearest")
    assert out["miou"] == 0.5


def test_gt_as_prediction_is_one(rcm_expressions, refer_metric):
    refs = [to_metric_reference(r) for r in rcm_expressions.remove_columns("image")]
    assert set(refs[0]) == {"expression_id", "mask", "category", "supercategory"}
    preds = [feats.to_metric_prediction(r) for r in refs]
    out = refer_metric.compute(predictions=preds, references=refs)
    assert out["miou"] == out["ciou"] == 1.0
    assert all(out[f"precision@{t}"] == 1.0 for t in ("0.5", "0.6", "0.7", "0.8", "0.9"))
    assert out["num_examples"] == rcm_expressions.num_rows
    assert all(b["miou"] == 1.0 for b in out["per_category"].values())
    assert sum(b["num_examples"] for b in out["per_supercategory"].values()) == rcm_expressions.num_rows


# ---------------------------------------------------------------- metric: bad input


@pytest.mark.parametrize(
    "preds, refs, error, match",
    [
        ([PRED("e1", "033"), PRED("e1", "033")], [REF("e1", "033")], PredictionError, "duplicate expression_id 'e1'"),
        ([PRED("e1", "033"), PRED("zz", "033")], [REF("e1", "033")], PredictionError, r"unknown to the references.*'zz'"),
        ([PRED("e1", "033")], [REF("e1", "033"), REF("e2", "033")], PredictionError, r"no prediction for 1 reference expression_id.*'e2'"),
        ([PRED("e1", "033")], [REF("e1", "033"), REF("e1", "033")], PredictionError, "references: duplicate expression_id 'e1'"),
        ([PRED("e1", "5")], [REF("e1", "033")], RLEError, r"expression 'e1': predicted mask.*sum to 5"),
        ([PRED("e1", "033")], [REF("e1", "03")], RLEError, r"expression 'e1': ground-truth mask.*sum to 3"),
    ],
)
def test_metric_errors(preds, refs, error, match):
    with pytest.raises(error, match=match):
        core.refer_iou(preds, refs)


@pytest.mark.parametrize("option, value", [("thresholds", [1.5]), ("empty_union_iou", -1), ("resize_predictions", "bilinear"), ("return_per_example", "yes")])
def test_metric_bad_options(option, value):
    with pytest.raises(OptionError, match=option):
        core.refer_iou([PRED("e", "033")], [REF("e", "033")], **{option: value})


def test_metric_thresholds_option(refer_metric):
    out = refer_metric.compute(predictions=M1_PREDS, references=M1_REFS, thresholds=[0.25, 0.75])
    assert out["precision@0.25"] == 1.0 and out["precision@0.75"] == pytest.approx(1 / 3)
    assert "precision@0.5" not in out


def _dense_report(preds, gts):
    inter = [int((p & g).sum()) for p, g in zip(preds, gts)]
    union = [int((p | g).sum()) for p, g in zip(preds, gts)]
    ious = [i / u if u else 1.0 for i, u in zip(inter, union)]
    return ious, sum(inter) / sum(union)


def test_metric_rle_equals_dense_numpy():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.integers(1, 6).flatmap(lambda n: st.tuples(st.integers(1, 9), st.integers(1, 9)).flatmap(
        lambda hw: st.lists(st.tuples(hnp.arrays(bool, hw), hnp.arrays(bool, hw)), min_size=n, max_size=n))))
    def check(pairs):
        gts = [g for _, g in pairs]
        preds = [p for p, _ in pairs]
        refs = [{"expression_id": f"{i}:0", "mask": rle.encode(g), "category": "c", "supercategory": "s"} for i, g in enumerate(gts)]
        # predictions in the other accepted forms: binary arrays and pycocotools' bytes counts
        pr = [{"expression_id": f"{i}:0", "mask": p if i % 2 else {**rle.encode(p), "counts": rle.encode(p)["counts"].encode()}}
              for i, p in enumerate(preds)]
        out = core.refer_iou(pr, refs)
        ious, ciou = (None, None) if not any((p | g).any() for p, g in pairs) else _dense_report(preds, gts)
        if ious is not None:
            assert out["miou"] == pytest.approx(float(np.mean(ious)), rel=1e-12)
            assert out["ciou"] == ciou
        assert out["num_examples"] == len(pairs)

    check()


# ---------------------------------------------------------------- evaluate distributed mode


def _perturbed(refs):
    preds = []
    for i, r in enumerate(refs):
        m = rle.decode(r["mask"])
        if i % 3 == 1:
            m = np.roll(m, 2, axis=1)
        elif i % 3 == 2:
            m = np.zeros_like(m)
        preds.append({"expression_id": r["expression_id"], "mask": rle.encode(m)})
    return preds


def test_distributed_matches_single_process(rcm_expressions, refer_metric, tmp_path):
    refs = [to_metric_reference(r) for r in rcm_expressions.remove_columns("image")]
    preds = _perturbed(refs)
    options = {"return_per_example": True}
    single = refer_metric.compute(predictions=preds, references=refs, **options)
    assert 0 < single["miou"] < 1
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"predictions": preds, "references": refs, "options": options}))
    dist = run_distributed("refer_iou", inputs, 2, tmp_path, "refer-iou-dist", 5, timeout=600)
    # evaluate gathers the shards in process order: the per-example order differs, every number is identical.
    per_example = dist.pop("per_example")
    expected = dict(single)
    assert sorted(per_example, key=lambda r: r["expression_id"]) == sorted(expected.pop("per_example"), key=lambda r: r["expression_id"])
    assert dist == json.loads(json.dumps(expected))


def test_add_batch_in_any_batch_sizes(rcm_expressions, refer_metric):
    refs = [to_metric_reference(r) for r in rcm_expressions.remove_columns("image")]
    preds = _perturbed(refs)
    whole = refer_metric.compute(predictions=preds, references=refs)
    for bs in (1, 16):
        assert compute_in_batches(refer_metric, preds, refs, batch_sizes(len(refs), bs)) == whole


def test_compute_and_add_batch_pause_the_collector_and_restore_it(refer_metric, monkeypatch):
    """compute and add_batch run with the cyclic collector paused (a pass over their acyclic rows finds nothing
    and took half of compute's time) and leave it as they found it, also when they raise."""
    import gc

    from perckit.refcoco_m import metric as metrics

    ref, pred = REF("1:0", "033"), PRED("1:0", "021O1")
    score = metrics.score_expression
    seen = []
    monkeypatch.setattr(metrics, "score_expression", lambda *a, **k: seen.append(gc.isenabled()) or score(*a, **k))
    assert gc.isenabled()
    assert refer_metric.compute(predictions=[pred], references=[ref])["miou"] == 0.5
    assert seen[0] is False and gc.isenabled()
    with pytest.raises(PredictionError):
        refer_metric.add_batch(predictions=[{"expression_id": 5, "mask": pred["mask"]}], references=[ref])
    assert gc.isenabled()
