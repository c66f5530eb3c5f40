"""perckit.hf.tables: a metric's result as tables a person reads, and runs side by side (issue 31), on
hand-checkable results."""

from __future__ import annotations

import json

import pytest

from perckit.errors import OptionError
from perckit.hf import tables

RESULT = {
    "miou": 0.5, "ciou": 0.25, "num_examples": 4, "options": {"thresholds": [0.5]},
    "per_category": {"cat": {"miou": 1.0, "num_examples": 1}, "dog": {"miou": 1 / 3, "num_examples": 3}},
    "per_example": [{"expression_id": "e", "iou": 0.5}],
}


def test_headline_and_blocks_read_every_metric_the_same_way():
    assert tables.headline(RESULT) == {"miou": 0.5, "ciou": 0.25, "num_examples": 4}
    assert tables.blocks(RESULT) == {"per_category": {"cat": {"miou": 1.0, "num_examples": 1}, "dog": {"miou": 1 / 3, "num_examples": 3}}}
    syn4d = {"overall": {"ate": 0.125, "num_sequences": 2}, "by_scene": {"s1": {"ate": 0.25}}, "sequences": [{}]}
    assert tables.headline(syn4d) == {"ate": 0.125, "num_sequences": 2}
    assert tables.headline({**syn4d, "requested_sequences": 3}) == {"ate": 0.125, "num_sequences": 2, "requested_sequences": 3}
    assert list(tables.blocks(syn4d)) == ["by_scene"]  # overall is the headline, not a block of groups


def test_render_text_markdown_latex_json():
    lines = tables.render(RESULT, "text", "refer_iou").splitlines()
    assert [line.split() for line in lines[:5]] == [["refer_iou"], ["metric", "value"], ["miou", "0.5000"], ["ciou", "0.2500"],
                                                    ["num_examples", "4"]]
    assert len({len(line) for line in lines[1:5]}) == 1  # aligned columns
    assert [line.split() for line in lines[6:10]] == [["per_category"], ["per_category", "miou", "num_examples"],
                                                      ["cat", "1.0000", "1"], ["dog", "0.3333", "3"]]
    md = tables.render(RESULT, "markdown")
    assert "| per_category | miou | num_examples |" in md and "| dog | 0.3333 | 3 |" in md
    tex = tables.render(RESULT, "latex")
    assert r"\begin{tabular}{lrr}" in tex and r"num\_examples & 4 \\" in tex and r"\bottomrule" in tex
    assert json.loads(tables.render(RESULT, "json")) == RESULT
    with pytest.raises(OptionError, match=r"--format 'html': expected one of \['text', 'markdown', 'latex', 'json'\]"):
        tables.render(RESULT, "html")


def _run(result, fingerprint="f1", options=None, metric="refer_iou"):
    return {**result, tables.RUN_KEY: {"metric": metric, "config": None, "options": options or {}, "dataset_fingerprint": fingerprint}}


def test_compare_gives_deltas_against_the_first_and_marks_another_dataset():
    a, b = _run(RESULT), _run({**RESULT, "miou": 0.75, "num_examples": 5}, fingerprint="f2")
    out = tables.compare([a, b], ["a.json", "b.json"])
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:5]}
    assert rows == {"miou": ["0.5000", "0.7500", "(+0.2500)"], "ciou": ["0.2500", "0.2500", "(+0.0000)"], "num_examples": ["4", "5", "(+1)"]}
    assert "b.json *" in out and "* b.json: scored on another dataset (fingerprint 'f2', first run 'f1')" in out
    assert json.loads(tables.compare([a, b], ["a.json", "b.json"], "json"))["metrics"]["miou"] == [0.5, 0.75]


def test_compare_refuses_runs_that_are_not_comparable():
    with pytest.raises(OptionError, match=r"b.json: options \{'thresholds': \[0.7\]\} differs from a.json's \{\}"):
        tables.compare([_run(RESULT), _run(RESULT, options={"thresholds": [0.7]})], ["a.json", "b.json"])
    with pytest.raises(OptionError, match=r"b.json: metric 'm4seg' differs"):
        tables.compare([_run(RESULT), _run(RESULT, metric="m4seg")], ["a.json", "b.json"])
    with pytest.raises(OptionError, match=r"b.json: expected a perckit results file"):
        tables.compare([_run(RESULT), RESULT], ["a.json", "b.json"])
