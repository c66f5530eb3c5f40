"""The benchmark descriptor (perckit.benchmarks) agrees with the code it describes, and `perckit list` shows it."""

from __future__ import annotations

import json

import pytest

from perckit import benchmarks
from perckit.entrypoints import builder_class, script_path
from perckit.errors import OptionError


@pytest.mark.parametrize("name", benchmarks.NAMES)
def test_descriptor_matches_the_builder_and_the_metric_scripts(name):
    b = benchmarks.get(name)
    cls = builder_class(name)
    assert cls.BUILDER_CONFIG_CLASS().hub_repo_id == b.hub_repo
    assert b.configs()[0] == cls.DEFAULT_CONFIG_NAME and set(b.configs()) == {c.name for c in cls.BUILDER_CONFIGS}
    assert b.metrics, f"{name} has no metric"
    for m in b.metrics:
        assert script_path("metrics", m.name).is_file()
        assert callable(m.projector(m.configs[0] if m.configs else None))


def test_unknown_names_are_option_errors():
    with pytest.raises(OptionError, match=r"unknown benchmark 'nope': expected one of \['m4seg'"):
        benchmarks.get("nope")
    with pytest.raises(OptionError, match=r"unknown metric 'nope': expected one of \['av_reasoning'"):
        benchmarks.metric("nope")
    with pytest.raises(OptionError, match="metric 'syn4d' needs --config, one of"):
        benchmarks.metric("syn4d")[1].projector(None)


def test_perckit_list_shows_every_benchmark_config_split_and_metric(capsys):
    from perckit.__main__ import main

    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["benchmark"] for r in rows] == list(benchmarks.NAMES)
    by = {r["benchmark"]: r for r in rows}
    assert by["refcoco_m"]["splits"] == ["validation"] and by["m4seg"]["splits"] == ["train", "test"]
    assert by["r4d_bench"]["configs"] == ["all_queries", "subset_36", "frames"]
    assert {m["metric"] for m in by["r4d_bench"]["metrics"]} == {"mask_temporal", "track_id"}
    assert by["syn4d"]["metrics"][0]["configs"] == ["tracking", "depth", "pose"]
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    assert "configs: all_queries (default), subset_36, frames" in text and "metric:  refer_iou: scores expressions" in text
