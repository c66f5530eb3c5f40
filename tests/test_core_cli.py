"""The perckit command line as a pip user meets it (issue 16): --version, exit codes, evaluate's split and results file,
offline errors that name the flag."""

from __future__ import annotations

import json

import pytest

import perckit
from perckit.__main__ import RUN_KEY, main


@pytest.fixture(scope="module")
def rc_export(tmp_path_factory):
    """A RefCOCO-M sample release converted once (its only split is validation) and GT-as-predictions for it."""
    from perckit.export import convert
    from perckit.samples import write_release
    from perckit.refcoco_m.features import to_metric_prediction

    base = tmp_path_factory.mktemp("rc")
    release = write_release("refcoco_m", base / "release").root
    convert("refcoco_m", release, None, base / "export", cache_dir=base / "cache", progress=False, log=lambda m: None)
    rows = perckit.load_dataset("refcoco_m", data_dir=release, split="validation", cache_dir=base / "cache2")
    preds = base / "preds.jsonl"
    preds.write_text("".join(json.dumps(to_metric_prediction(r)) + "\n" for r in rows))
    return base / "export", preds


def test_version_names_perckit_and_the_libraries(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"perckit {perckit.__version__} (datasets ") and "evaluate " in out


def test_usage_errors_exit_2_and_data_errors_exit_1(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["convert"])  # argparse: the benchmark is missing
    assert e.value.code == 2
    assert main(["evaluate", "nope", "--predictions", "p.jsonl", "--references", "r.jsonl"]) == 2  # OptionError
    assert main(["evaluate", "refer_iou", "--predictions", str(tmp_path / "missing.jsonl"), "--references", "r.jsonl"]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert main(["evaluate", "refer_iou", "--predictions", str(bad), "--references", str(bad)]) == 1  # PredictionError
    err = capsys.readouterr().err
    assert "unknown metric 'nope'" in err and "missing.jsonl" in err and "bad.jsonl' line 1" in err


def test_evaluate_scores_through_the_accumulator_without_importing_evaluate(rc_export, tmp_path):
    """perckit evaluate is a thin door onto the accumulator: scoring refer_iou from an export imports neither
    evaluate nor torch (issue 31), and the numbers are the evaluate module's."""
    import subprocess
    import sys

    export, preds = rc_export
    out = tmp_path / "r.json"
    code = ("import sys; from perckit.__main__ import main; "
            f"rc = main(['evaluate', 'refer_iou', '--predictions', {str(preds)!r}, '--references', {str(export)!r}, "
            f"'--output', {str(out)!r}]); print(rc, sorted(m for m in ('evaluate', 'torch', 'transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout + done.stderr
    result = {k: v for k, v in json.loads(out.read_text()).items() if k != RUN_KEY}
    rows = [json.loads(line) for line in preds.read_text().splitlines()]
    from perckit.__main__ import load_rows

    refs = [perckit.refcoco_m.to_metric_reference(r) for r in load_rows(str(export), None, None)[0]]
    assert result == perckit.load_metric("refer_iou").compute(predictions=rows, references=refs)


def test_evaluate_picks_the_only_split_and_writes_a_results_file(rc_export, tmp_path, capsys):
    export, preds = rc_export
    out = tmp_path / "results" / "refer_iou.json"
    assert main(["evaluate", "refer_iou", "--predictions", str(preds), "--references", str(export),
                 "--dataset-config", "expressions", "--output", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["miou"] == 1.0  # the numbers stay at the top level
    run = report[RUN_KEY]
    assert run["perckit"] == perckit.__version__ and run["datasets"] and run["evaluate"] == "0.4.6"
    assert run["split"] == "validation" and run["metric"] == "refer_iou" and run["dataset_config"] == "expressions"
    assert isinstance(run["dataset_fingerprint"], str) and len(run["dataset_fingerprint"]) >= 16
    assert run["time"].endswith("+00:00") and run["options"] == {}
    # an earlier results file is replaced; the fingerprint is the same for the same data
    assert main(["evaluate", "refer_iou", "--predictions", str(preds), "--references", str(export),
                 "--dataset-config", "expressions", "--option", "empty_union_iou=0.0", "--output", str(out)]) == 0
    again = json.loads(out.read_text())[RUN_KEY]
    assert again["options"] == {"empty_union_iou": 0.0} and again["dataset_fingerprint"] == run["dataset_fingerprint"]


def test_evaluate_refuses_an_unknown_split_naming_the_choices(rc_export, capsys):
    export, preds = rc_export
    assert main(["evaluate", "refer_iou", "--predictions", str(preds), "--references", str(export), "--split", "test"]) == 2
    err = capsys.readouterr().err
    assert "--split 'test'" in err and "has the splits ['validation']" in err


@pytest.mark.parametrize("case", ["a-user-file", "a-json-string-naming-the-key", "a-folder", "read-only-folder"])
def test_evaluate_checks_its_output_before_scoring(case, tmp_path, capsys):
    """The --output check comes first: the (missing) predictions are never read, and a user's file is never replaced."""
    import os

    if case in ("a-user-file", "a-json-string-naming-the-key"):
        out = tmp_path / "notes.json"
        out.write_text('{"mine": true}' if case == "a-user-file" else '"perckit_run: my notes"')
        says = "got a file perckit did not write"
    elif case == "a-folder":
        out = tmp_path
        says = "got a folder"
    else:
        (tmp_path / "ro").mkdir()
        out = tmp_path / "ro" / "sub" / "r.json"
        os.chmod(tmp_path / "ro", 0o555)
        says = "cannot be written"
    try:
        code = main(["evaluate", "refer_iou", "--predictions", str(tmp_path / "never-read.jsonl"), "--references", "r.jsonl", "--output", str(out)])
        err = capsys.readouterr().err
    finally:
        os.chmod(tmp_path / "ro", 0o755) if (tmp_path / "ro").exists() else None
    assert code == 2 and says in err and "never-read" not in err
    if case == "a-user-file":
        assert out.read_text() == '{"mine": true}'


def test_offline_errors_name_the_flag_on_the_cli_and_the_argument_in_python(tmp_path, monkeypatch, capsys):
    from perckit.hf import hub

    def offline(**kwargs):
        raise ConnectionError("no network here")

    monkeypatch.setattr(hub, "snapshot_download", offline)
    assert main(["convert", "refcoco_m", "--output", str(tmp_path / "e"), "--cache-dir", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err
    assert "ConnectionError: no network here" in err and "pass --data-dir /path/to/release" in err and "data_dir=" not in err
    with pytest.raises(perckit.errors.ReleaseNotFoundError, match=r"data_dir=<release root>, e\.g\. perckit\.load_dataset\('refcoco_m'"):
        perckit.load_dataset("refcoco_m", cache_dir=tmp_path / "c2")


def test_gt_predictions_writes_a_file_that_scores_perfect(rc_export, tmp_path, capsys):
    export, _ = rc_export
    preds = tmp_path / "gt.jsonl"
    assert main(["gt-predictions", "refer_iou", "--references", str(export), "--output", str(preds)]) == 0
    lines = preds.read_text().splitlines()
    first = json.loads(lines[0])
    assert set(first) == {"expression_id", "mask"} and set(first["mask"]) == {"size", "counts"}
    out = tmp_path / "r.json"
    assert main(["evaluate", "refer_iou", "--predictions", str(preds), "--references", str(export), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["miou"] == 1.0 and json.loads(out.read_text())["num_examples"] == len(lines)
    # never over an existing file; metrics whose predictions are folders say so
    assert main(["gt-predictions", "refer_iou", "--references", str(export), "--output", str(preds)]) == 2
    assert "expected a new file" in capsys.readouterr().err
    assert main(["gt-predictions", "syn4d", "--references", str(export), "--output", str(tmp_path / "s.jsonl")]) == 2
    assert "per-sequence NPZ" in capsys.readouterr().err


def test_every_subcommand_and_option_has_help_text():
    import argparse

    from perckit.__main__ import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in subs._choices_actions}
    assert set(helps) == set(subs.choices) and all(helps.values()), helps
    for name, sub in [("perckit", parser), *subs.choices.items()]:
        for action in sub._actions:
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                assert action.help, f"{name} {action.option_strings or action.dest} has no help text"


def test_write_sample_writes_only_into_a_new_or_empty_folder(tmp_path, capsys):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "README.md").write_text("my notes")
    assert main(["write-sample", "refcoco_m", str(user)]) == 2
    assert "expected a new or empty folder" in capsys.readouterr().err
    assert [p.name for p in user.iterdir()] == ["README.md"] and (user / "README.md").read_text() == "my notes"
    (tmp_path / "empty").mkdir()
    assert main(["write-sample", "refcoco_m", str(tmp_path / "empty")]) == 0
    assert main(["write-sample", "refcoco_m", str(tmp_path / "new" / "rc")]) == 0


def test_option_values_follow_the_json_rules():
    from perckit.__main__ import _kv
    from perckit.errors import OptionError

    assert _kv(["iou_threshold=0.7", "thresholds=[0.5, 0.9]", "name=plain text"]) == {
        "iou_threshold": 0.7, "thresholds": [0.5, 0.9], "name": "plain text"}
    with pytest.raises(OptionError, match="expected each option once, got 'k' again"):
        _kv(["k=1", "k=2"])
    with pytest.raises(OptionError, match="duplicate key 'a'"):
        _kv(['k={"a": 1, "a": 2}'])


def test_evaluate_prints_tables_and_compare_puts_runs_side_by_side(rc_export, tmp_path, capsys):
    export, preds = rc_export
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["evaluate", "refer_iou", "--predictions", str(preds), "--references", str(export), "--output", str(a),
                 "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "| metric | value |" in out and "| miou | 1.0000 |" in out and "| per_category | miou | ciou | num_examples |" in out
    assert main(["evaluate", "refer_iou", "--predictions", str(preds), "--references", str(export), "--output", str(b),
                 "--option", "thresholds=[0.5]"]) == 0
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 2  # other options: refused, one line
    assert "options {'thresholds': [0.5]} differs" in capsys.readouterr().err
    assert main(["compare", str(a), str(a)]) == 0
    assert "miou" in capsys.readouterr().out


def test_quiet_leaves_stderr_empty_where_bars_show_without_it(rc_export, monkeypatch, capsys):
    """Bars on stderr for reading and scoring (issue 31); ``perckit --quiet`` prints none, and the results are the same.
    BAR_DELAY 0: a bar shows at once (by default only a step that runs past 2 seconds shows one)."""
    import datasets

    from perckit.hf import cli

    monkeypatch.setattr(cli, "BAR_DELAY", 0)
    bars_were_on = not datasets.utils.are_progress_bars_disabled()
    export, preds = rc_export
    args = ["evaluate", "refer_iou", "--predictions", str(preds), "--references", str(export)]
    try:
        assert main(args) == 0
        loud = capsys.readouterr()
        assert main(["--quiet", *args]) == 0
        quiet = capsys.readouterr()
    finally:
        if bars_were_on:  # --quiet turned datasets' switch off (it was imported): on again for the other tests
            datasets.utils.enable_progress_bars()
    assert "scoring refer_iou" in loud.err and f"reading {export}" in loud.err  # the scoring loop and the projection
    assert quiet.err == "" and quiet.out == loud.out
    assert not cli.BARS.get()  # off again once main returns
    with pytest.raises(SystemExit) as e:  # a global option: before the command, not after it
        main([*args, "--quiet"])
    assert e.value.code == 2


def test_quiet_silences_datasets_and_hub_bars_without_importing_them():
    """Not yet imported: the environment variables datasets and huggingface_hub read on import, set for the block only.
    Already imported: their own switches."""
    import os
    import subprocess
    import sys

    check = "print(datasets.utils.are_progress_bars_disabled(), hub.are_progress_bars_disabled())\n"
    later = ("import os, sys\nfrom perckit.hf.cli import progress_bars\n"
             "with progress_bars(False):\n"
             "    print('datasets' in sys.modules or 'huggingface_hub' in sys.modules)\n"
             "    import datasets, huggingface_hub.utils as hub\n"
             "    " + check + "print(sorted(k for k in os.environ if k.endswith('DISABLE_PROGRESS_BARS')))\n")
    first = ("import datasets, huggingface_hub.utils as hub\nfrom perckit.hf.cli import progress_bars\n" + check
             + "with progress_bars(False):\n    " + check)
    env = {k: v for k, v in os.environ.items() if not k.endswith("DISABLE_PROGRESS_BARS")}
    for code, expected in ((later, ["False", "True True", "[]"]), (first, ["False False", "True True"])):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
        assert done.stdout.splitlines() == expected, done.stdout + done.stderr
