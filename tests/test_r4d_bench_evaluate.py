"""The evaluate modules: GT-as-prediction, API parity with the core, distributed mode with real processes."""

import json

import pytest
from helpers.distributed import batch_sizes, compute_in_batches, run_distributed
from helpers.r4d import V1_PREDS, V1_REFS

from perckit.r4d_bench import features as feats
from perckit.r4d_bench import metric as core
from perckit.core.schema import project


def _scalars(d):
    return {k: v for k, v in d.items() if not isinstance(v, (dict, list))}


def test_gt_as_prediction_every_metric_is_one(r4d_queries, mask_metric, track_metric):
    refs = [feats.to_metric_reference(r) for r in r4d_queries]
    out = mask_metric.compute(predictions=[feats.to_metric_prediction(r) for r in r4d_queries], references=refs)
    for k in core.GROUP_KEYS[:-1]:
        assert out[k] == 1.0, k
    assert out["num_queries"] == 89
    assert all(out["per_scene"][s]["miou"] == 1.0 for s in out["per_scene"])
    t = track_metric.compute(
        predictions=[feats.to_track_prediction(r) for r in r4d_queries],
        references=[feats.to_track_reference(r) for r in r4d_queries],
    )
    for k in ("precision", "recall", "f1", "exact_match", "micro_precision", "micro_recall", "micro_f1"):
        assert t[k] == 1.0, k


def test_v1_through_evaluate_equals_core(mask_metric):
    out = mask_metric.compute(predictions=V1_PREDS, references=V1_REFS, iou_threshold=0.5)
    assert out == core.mask_temporal(V1_PREDS, V1_REFS)
    assert out["miou"] == pytest.approx(1 / 3) and out["overall_iou"] == pytest.approx(1 / 7)


def test_to_metric_reference_projects_exactly_the_declared_keys(r4d_queries):
    ref = feats.to_metric_reference(r4d_queries[0])
    assert set(ref) == set(feats.reference_schema())
    assert set(ref["frames"][0]) == {"frame_id", "mask"}
    with pytest.raises(ValueError, match="missing the key"):
        project({"query_id": "x"}, feats.reference_schema())


def _perturbed(rows):
    """Drop every second frame and shift masks of every third query to the next frame."""
    preds = []
    for i, r in enumerate(rows):
        frames = [{"frame_id": f["frame_id"], "mask": f["mask"]} for j, f in enumerate(r["frames"]) if j % 2 == 0]
        if i % 3 == 0 and len(r["frames"]) > 1:
            frames = [{"frame_id": r["frames"][j + 1]["frame_id"], "mask": r["frames"][j]["mask"]} for j in range(len(r["frames"]) - 1)]
        preds.append({"query_id": r["query_id"], "frames": frames})
    return preds


def _track_inputs(rows):
    refs = [feats.to_track_reference(r) for r in rows]
    preds = [{"query_id": r["query_id"], "target_track_ids": r["target_track_ids"][:1] + (["7"] if i % 3 else [])} for i, r in enumerate(rows)]
    return preds, refs


@pytest.mark.parametrize("name, nproc", [("mask_temporal", 2), ("mask_temporal", 4), ("track_id", 2)])
def test_distributed_matches_single_process(r4d_queries, tmp_path, name, nproc, mask_metric, track_metric):
    if name == "mask_temporal":
        metric, refs, preds = mask_metric, [feats.to_metric_reference(r) for r in r4d_queries], _perturbed(r4d_queries)
    else:
        metric, (preds, refs) = track_metric, _track_inputs(r4d_queries)
    single = metric.compute(predictions=preds, references=refs)
    assert single["f1" if name == "track_id" else "miou"] < 1.0
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"predictions": preds, "references": refs}))
    dist = run_distributed(name, inputs, nproc, tmp_path, f"r4d-dist-{name}", 7, timeout=300 * nproc)
    # evaluate gathers shards in process order, so the per-query order differs; every number is identical.
    assert _scalars(dist) == _scalars(single)
    assert dist["per_scene"] == single["per_scene"] and dist["positive"] == single["positive"]
    assert dist["num_queries"] == len(refs)
    assert sorted(dist["per_query"], key=lambda r: r["query_id"]) == sorted(single["per_query"], key=lambda r: r["query_id"])


def test_add_batch_in_any_batch_sizes(r4d_queries, mask_metric):
    refs = [feats.to_metric_reference(r) for r in r4d_queries]
    preds = _perturbed(r4d_queries)
    whole = mask_metric.compute(predictions=preds, references=refs)
    for bs in (1, 10, 64):
        assert compute_in_batches(mask_metric, preds, refs, batch_sizes(len(refs), bs)) == whole
