"""perckit.hf.cli: the one scaffold of the command lines (perckit and the drop-ins): the error line, the exit codes,
the report writer, the official list syntax."""

from __future__ import annotations

import argparse
import json

import pytest

from perckit.hf import cli
from perckit.errors import InputNotFoundError, OptionError, PredictionError, ReleaseFormatError, ReleaseNotFoundError


def test_error_line_is_one_line_with_a_cause_it_does_not_already_say():
    assert cli.error_line(PredictionError("'p.json' line 2:\nexpected a JSON object")) == "error: 'p.json' line 2: expected a JSON object"
    assert cli.error_line(OSError()) == "error: OSError"
    try:
        try:
            raise ValueError("no valid depth pixels")
        except ValueError as e:
            raise RuntimeError("v/s/a depth failed") from e
    except RuntimeError as e:
        assert cli.error_line(e) == "error: v/s/a depth failed (caused by ValueError: no valid depth pixels)"
    inner = KeyError("x")
    outer = PredictionError(f"syn4d: the input does not match: KeyError: {inner}")
    outer.__cause__ = inner
    assert "caused by" not in cli.error_line(outer)  # the message already says it


@pytest.mark.parametrize("error, code", [
    (OptionError("--split 'x'"), 2), (InputNotFoundError("'p.jsonl': file not found"), 2),
    (ReleaseNotFoundError("release folder"), 1), (ReleaseFormatError("bad"), 1), (PermissionError("no"), 1),
    (ValueError("bad"), 1),
])
def test_exit_codes(error, code):
    assert cli.exit_code(error) == code
    assert cli.drop_in_exit_code(error) == cli.EXIT_USAGE


def test_run_guarded_prints_the_line_and_keeps_unexpected_errors(capsys):
    args = argparse.Namespace()

    def fails(exc):
        def command(_):
            raise exc
        return command

    assert cli.run_guarded(lambda a: 0, args) == 0
    assert cli.run_guarded(fails(ReleaseFormatError("'x.npy': bad")), args) == 2
    assert cli.run_guarded(fails(ReleaseFormatError("'x.npy': bad")), args, cli.exit_code) == 1
    assert capsys.readouterr().err == "error: 'x.npy': bad\nerror: 'x.npy': bad\n"
    with pytest.raises(TypeError):
        cli.run_guarded(fails(TypeError("a bug")), args)


def test_write_json_replaces_in_one_step(tmp_path):
    out = tmp_path / "sub" / "report.json"
    cli.write_json(out, {"b": 1, "a": [1.5]})
    assert out.read_text() == '{\n  "a": [\n    1.5\n  ],\n  "b": 1\n}\n'
    with pytest.raises(TypeError):
        cli.write_json(out, {"x": object()})
    assert json.loads(out.read_text()) == {"a": [1.5], "b": 1}  # the earlier report is intact
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.json"]  # no temporary file left
    cli.write_json(out, {"x": object()}, default=lambda o: "obj")
    assert json.loads(out.read_text()) == {"x": "obj"}


def test_split_list_takes_commas_spaces_and_both():
    assert cli.split_list(["tracking,depth", "pose"]) == ["tracking", "depth", "pose"]
    assert cli.split_list(["a, b", ",", ""]) == ["a", "b"]
    assert cli.split_list(None) == []


def test_predictions_or_self_check():
    ns = argparse.Namespace
    assert cli.predictions_or_self_check(ns(self_check=True, predictions="p"), lambda: "gt", lambda p: p) == "gt"
    assert cli.predictions_or_self_check(ns(self_check=False, predictions="p"), lambda: "gt", lambda p: p + "!") == "p!"
    with pytest.raises(OptionError, match=r"--predictions is required \(or pass --self-check\)"):
        cli.predictions_or_self_check(ns(self_check=False, predictions=None), lambda: "gt", lambda p: p)


def test_finish_prints_writes_and_checks(tmp_path, capsys):
    report = {"acc": 1.0, "viou": 0.5, "n": 3}
    assert cli.finish(report, str(tmp_path / "r.json"), True, ("acc", "viou", "n"), ("viou",), ("acc",)) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[:3] == [f"{'acc':>36s}  1.000000", f"{'viou':>36s}  0.500000", f"{'n':>36s}  3"]
    assert out.splitlines()[-1] == f"report written to {tmp_path / 'r.json'}" and "self-check FAILED: ['viou'] are not 1.0" in err
    assert json.loads((tmp_path / "r.json").read_text()) == report
    assert cli.finish({"acc": 1.0}, None, True, ("acc",), ("acc",)) == 0
    assert capsys.readouterr().out.endswith("self-check passed: every metric is 1.0\n")
    assert cli.finish({"acc": 1.0}, str(tmp_path / "r.json"), True, ("acc",), ("acc",)) == 0  # the file named last
    assert capsys.readouterr().out.endswith(f"self-check passed: every metric is 1.0\nreport written to {tmp_path / 'r.json'}\n")
