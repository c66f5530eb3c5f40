"""The schema contract (issue 15): for every metric of every benchmark, the references it declares are a subset of
its builder's features, and ``to_metric_reference`` of real builder rows (the sample releases) passes the metric's
own feature check; the ground-truth predictions pass its prediction check."""

from __future__ import annotations

import pytest

import perckit
from perckit.hf import benchmark as benchmarks
from perckit.hf.feature_check import check_side, compile_rows
from perckit.samples import write_release

#: (metric, metric config) -> (dataset config, split) it scores (the descriptor's ``scores`` text, as data)
SCORED = {
    ("mask_temporal", None): ("all_queries", "test"),
    ("track_id", None): ("all_queries", "test"),
    ("syn4d", "tracking"): ("tracking", "test"),
    ("syn4d", "depth"): ("challenge", "test"),
    ("syn4d", "pose"): ("challenge", "test"),
    ("refer_iou", None): ("expressions", "validation"),
    ("m4seg", None): ("default", "test"),
    ("av_reasoning", None): ("default", "test"),
    ("av_edit_quality", None): ("default", "test"),
}


def test_the_table_covers_every_metric_of_the_descriptor():
    declared = {(m.name, c) for _, m in benchmarks.metrics().values() for c in (m.configs or (None,))}
    assert declared == set(SCORED)


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    return tmp_path_factory.mktemp("contract")


@pytest.mark.parametrize("metric_name, config", sorted(SCORED, key=str))
def test_builder_rows_meet_the_metric_schemas(metric_name, config, releases):
    bench, spec = benchmarks.metric(metric_name)
    release = releases / bench.name
    if not release.exists():
        write_release(bench.name, release)
    dataset_config, split = SCORED[(metric_name, config)]
    rows = perckit.load_dataset(bench.name, dataset_config, data_dir=release, split=split, cache_dir=releases / "cache")
    metric = perckit.load_metric(metric_name, config)
    pred_schema, ref_schema = metric.schemas()
    missing = sorted(set(ref_schema) - set(rows.features))
    assert not missing, f"{metric_name} references need {missing}, which the {bench.name}/{dataset_config} rows lack"
    refs = [spec.projector(config)(r) for r in rows]
    assert refs and check_side(compile_rows(ref_schema), refs, "references") is None
    assert (spec.gt_prediction is None) != (spec.folder is None)  # gt-predictions writes JSON Lines or a folder
    if spec.gt_prediction:
        preds = [spec.gt_prediction(r) for r in rows]
        assert check_side(compile_rows(pred_schema), preds, "predictions") is None
