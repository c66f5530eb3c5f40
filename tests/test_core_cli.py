"""The perckit command line as a pip user meets it (issue 16): --version, exit codes, evaluate's split and results file,
offline errors that name the flag; every metric scored from its native files and gt-predictions for each (issue 31)."""

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


#: The sample releases (conftest fixtures) converted for the command line: benchmark -> (fixture, configs converted).
RELEASES = {"r4d_bench": ("r4d_release", [None]), "m4seg": ("m4_release", [None]), "syn4d": ("syn4d_release", [None, "challenge"]),
            "reason_av_edit": ("reason_av_edit_release", [None])}
#: metric -> its config, the export's config, its options and numbers of a perfect run (the seven GT round trips)
PERFECT = {
    "mask_temporal": (None, None, [], {"miou": 1.0, "acc": 1.0}),
    "track_id": (None, None, [], {"f1": 1.0, "exact_match": 1.0}),
    "refer_iou": (None, None, [], {"miou": 1.0}),
    "m4seg": (None, None, ['metrics=["miou"]'], {"miou": 1.0}),
    "syn4d:tracking": ("tracking", None, [], {"score": 1.0, "epe": 0.0, "apd": 1.0}),
    "syn4d:depth": ("depth", "challenge", [], {"delta1": 1.0, "abs_rel": 0.0}),
    "syn4d:pose": ("pose", "challenge", [], {"auc_5deg": 1.0, "ate_rmse": 0.0}),
    "av_reasoning": (None, None, [], {"visual_iou": 1.0, "which_acc": 1.0, "audio_tiou": 1.0, "video_tiou": 1.0}),
    "av_edit_quality": (None, None, ['metrics=["ssim", "psnr", "bg_psnr", "bg_ssim"]'], {"ssim": 1.0, "psnr": 100.0, "bg_ssim": 1.0}),
}


@pytest.fixture(scope="module")
def export_of(request, rc_export, tmp_path_factory):
    """``export_of(benchmark)``: its sample release converted once for this module (RefCOCO-M: ``rc_export``)."""
    from perckit.export import convert

    base = tmp_path_factory.mktemp("exports")
    made = {"refcoco_m": rc_export[0]}

    def get(benchmark):
        if benchmark not in made:
            fixture, configs = RELEASES[benchmark]
            release = request.getfixturevalue(fixture).root
            for config in configs:
                convert(benchmark, release, config, base / benchmark, cache_dir=base / "cache", progress=False, log=lambda m: None)
            made[benchmark] = base / benchmark
        return made[benchmark]

    return get


@pytest.fixture(scope="module")
def gt_run(export_of, tmp_path_factory):
    """``gt_run(case)``: ``(argv of evaluate, the export)`` for the predictions ``perckit gt-predictions`` wrote for the
    case (a key of :data:`PERFECT`), each written once: a .jsonl file, or a folder for syn4d and ReasonAVEdit."""
    from perckit.hf.benchmark import metric as lookup

    base = tmp_path_factory.mktemp("gt")
    made = {}

    def get(case):
        metric = case.split(":")[0]
        config, dataset_config, options, _ = PERFECT[case]
        bench, spec = lookup(metric)
        export = export_of(bench.name)
        dataset = ["--dataset-config", dataset_config] if dataset_config else []
        out = base / (f"{metric}-{dataset_config}" + ("" if spec.folder else ".jsonl"))
        if out not in made:
            assert main(["gt-predictions", metric, "--references", str(export), *dataset, "--output", str(out)]) == 0
            made[out] = True
        argv = ["evaluate", metric, "--predictions", str(out), "--references", str(export), *dataset]
        argv += (["--config", config] if config else []) + [a for o in options for a in ("--option", o)]
        return argv, export

    return get


@pytest.mark.parametrize("case", sorted(PERFECT))
def test_gt_predictions_score_perfect_from_the_command_line(case, gt_run, tmp_path, capsys):
    """The seven metrics' ground truth in their own formats (JSON Lines; Syn4D's NPZs, ReasonAVEdit's folders), written
    by perckit gt-predictions and fed back to perckit evaluate: a perfect score."""
    argv, _ = gt_run(case)
    out = tmp_path / "r.json"
    assert main([*argv, "--output", str(out)]) == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    numbers = result.get("overall", result)
    assert {k: numbers[k] for k in PERFECT[case][3]} == pytest.approx(PERFECT[case][3], abs=1e-9)
    assert result.get("failures", []) == [] and result.get("num_missing", 0) == 0
    if case.startswith("syn4d"):
        assert result["requested_sequences"] == numbers["num_sequences"] == 16


@pytest.mark.parametrize("case", ["refer_iou", "av_edit_quality", "av_reasoning", "syn4d:tracking"])
def test_evaluate_scores_through_the_accumulator_without_importing_evaluate(case, gt_run, tmp_path):
    """perckit evaluate is a thin door onto the scoring engine: from an export and rows or the benchmark's own
    prediction folder it imports neither evaluate nor torch nor transformers (av_edit_quality: its model-free keys)
    (issue 31), and the numbers are the evaluate module's on what the benchmark's reader reads."""
    import subprocess
    import sys

    from perckit.__main__ import load_rows
    from perckit.hf.benchmark import metric as lookup

    argv, export = gt_run(case)
    out = tmp_path / "r.json"
    code = ("import sys; from perckit.__main__ import main; "
            f"rc = main({[*argv, '--output', str(out)]!r}); "
            "print(rc, sorted(m for m in ('evaluate', 'torch', 'transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout + done.stderr
    result = {k: v for k, v in json.loads(out.read_text()).items() if k != RUN_KEY}
    metric = case.split(":")[0]
    bench, spec = lookup(metric)
    config, _, options, _ = PERFECT[case]
    refs = [spec.projector(config)(r) for r in load_rows(str(export), None, None, bench.name)[0]]
    predictions = argv[argv.index("--predictions") + 1]
    if spec.folder is None:
        rows = [json.loads(line) for line in open(predictions).read().splitlines()]
    else:  # what the benchmark's folder reader reads (Syn4D's as nested lists, as evaluate's Arrow writer wants)
        from perckit.syn4d.read import load_prediction_rows

        read = (lambda f, ids: load_prediction_rows(f, ids)) if metric == "syn4d" else spec.folder.read
        rows = read(predictions, [r[spec.folder.key] for r in refs])
    kwargs = {k: v for o in options for k, v in [(o.split("=")[0], json.loads(o.split("=", 1)[1]))]}
    assert result == perckit.load_metric(metric, config).compute(predictions=rows, references=refs, **kwargs)


def test_evaluate_syn4d_gives_the_numbers_of_the_official_runner(export_of, syn4d_release, tmp_path, capsys):
    """perckit evaluate syn4d on an official NPZ folder (perturbed, one sequence missing) gives the official runner's
    numbers on the same folder with the same options: every block of each task, and the failing sequences."""
    from perckit.samples.syn4d_predictions import write_predictions
    from perckit.syn4d import evaluate as runner

    skipped = syn4d_release.sequence_ids[3]
    preds = write_predictions(syn4d_release, tmp_path / "p", noise=0.05, skip=[skipped])
    official = tmp_path / "official.json"
    assert runner.main(["--predictions", str(preds), "--data-root", str(syn4d_release.root), "--depth-align",
                        "scale_shift", "--output", str(official)]) == 0
    report = json.loads(official.read_text())
    for task in ("tracking", "depth", "pose"):
        out = tmp_path / f"{task}.json"
        assert main(["evaluate", "syn4d", "--config", task, "--predictions", str(preds), "--references", str(export_of("syn4d")),
                     "--dataset-config", "challenge", "--option", "strict=false", "--option", "depth_align=scale_shift",
                     "--output", str(out)]) == 0
        result = json.loads(out.read_text())
        assert {k: result[k] for k in ("overall", "by_variant", "by_scene", "sequences")} == report["tasks"][task]
        assert [f["sequence_id"] for f in result["failures"]] == [skipped]
        assert result["requested_sequences"] == report["requested_sequences"] == 16
    assert [f["sequence_id"] for f in report["failures"]] == [skipped]


def test_gt_predictions_writes_folders_only_where_nothing_is(export_of, tmp_path, capsys):
    """A prediction folder goes into a new or empty folder only: a folder with files, or a file, is refused in one line
    before anything is read, and left as it was."""
    export = str(export_of("reason_av_edit"))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    (tmp_path / "file").write_text("mine")
    for target, says in ((mine, "got a folder with files"), (tmp_path / "file", "got a file")):
        assert main(["gt-predictions", "av_edit_quality", "--references", export, "--output", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "expected a new or empty folder" in err and says in err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and (tmp_path / "file").read_text() == "mine"
    (tmp_path / "empty").mkdir()
    assert main(["gt-predictions", "av_edit_quality", "--references", export, "--output", str(tmp_path / "empty")]) == 0
    assert sorted(p.suffix for p in (tmp_path / "empty").iterdir()) == [".mp4"] * 16 + [".wav"] * 16


def test_evaluate_av_edit_quality_with_num_proc(gt_run, tmp_path, capsys):
    """--option num_proc=2 scores the clips' model-free metrics in two processes: the numbers and per-sample rows of
    one process; a clip that cannot be decoded in a worker is one line and exit code 1, as in one process."""
    import shutil

    argv, _ = gt_run("av_edit_quality")
    outs = []
    for n in (1, 2):
        outs.append(tmp_path / f"n{n}.json")
        assert main([*argv, "--option", "return_per_sample=true", "--option", f"num_proc={n}", "--output", str(outs[-1])]) == 0
    one, two = ({k: v for k, v in json.loads(o.read_text()).items() if k != RUN_KEY} for o in outs)
    assert two == one and len(one["per_sample"]) == 16
    folder = argv[argv.index("--predictions") + 1]
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    victim = sorted(broken.glob("*.mp4"))[5]
    victim.write_bytes(b"not a video")
    capsys.readouterr()
    at = argv.index("--predictions") + 1
    assert main([*argv[:at], str(broken), *argv[at + 1:], "--option", "num_proc=2"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: prediction sample {victim.stem!r}: edited_video") and "Traceback" not in err


def test_model_weights_go_to_av_edit_quality_only(rc_export, tmp_path, capsys):
    export, preds = rc_export
    base = ["--predictions", str(preds), "--references", str(export)]
    assert main(["evaluate", "refer_iou", *base, "--model", "fvd=w.pt"]) == 2
    assert "--model: expected the metric av_edit_quality" in capsys.readouterr().err
    for bad in (["--model", "fvd"], ["--model", "fvd=a", "--model", "fvd=b"], ["--model", "fvd=a", "--option", 'models={"fvd": "a"}']):
        assert main(["evaluate", "av_edit_quality", *base, *bad]) == 2
        assert "--model" in capsys.readouterr().err


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
    # never over an existing file
    assert main(["gt-predictions", "refer_iou", "--references", str(export), "--output", str(preds)]) == 2
    assert "expected a new file" in capsys.readouterr().err


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


def test_every_command_that_writes_files_ends_with_a_line_naming_them(tmp_path, capsys):
    """write-sample, convert, gt-predictions, evaluate --output and report: the last line on stdout says what was
    written and where, with --quiet too (it silences progress bars only) (issue 33). push, the demo and
    python -m perckit.lmms_eval: tests/test_core_push.py, test_core_demo.py, test_core_lmms_eval.py."""
    release, export, preds = tmp_path / "release", tmp_path / "export", tmp_path / "gt.jsonl"
    results, page = tmp_path / "r.json", tmp_path / "page.html"
    refs = ["--references", str(export)]
    for quiet, argv, says in (
        ([], ["write-sample", "refcoco_m", str(release), "--seed", "2"],
         f"wrote 3 files of the refcoco_m sample release (synthetic, seed 2) to {release}"),
        (["--quiet"], ["convert", "refcoco_m", "--data-dir", str(release), "--output", str(export), "--cache-dir", str(tmp_path / "c")],
         f"export ready in {export} "),
        (["--quiet"], ["gt-predictions", "refer_iou", *refs, "--output", str(preds)], f" to {preds}; perckit evaluate refer_iou"),
        ([], ["evaluate", "refer_iou", "--predictions", str(preds), *refs, "--output", str(results)], f"results written to {results} "),
        (["--quiet"], ["report", "refer_iou", "--predictions", str(preds), *refs, "--output", str(page)], f"written to {page} ("),
    ):
        assert main([*quiet, *argv]) == 0, capsys.readouterr().err
        last = capsys.readouterr().out.splitlines()[-1]
        assert says in last, (argv[0], last)
    assert all(p.exists() for p in (release / "README.md", export / "README.md", preds, results, page))


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
