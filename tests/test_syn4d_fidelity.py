"""Issue 14 for Syn4D: the file runner takes the official ``evaluate.py`` command line as it is and prints
what it prints; it verifies SHA256SUMS and checks protocol.json before scoring; the card's baseline table
ships as data and a run can be shown beside it; the builder's checksum errors come before generation."""

import json
import re
import warnings

import numpy as np
import pytest
from helpers.common import REPO, SYN4D_PARITY
from helpers.syn4d import assert_official_equal

from perckit.hf.entrypoints import build_split
from perckit.errors import OptionError, ReleaseFormatError, ReleaseNotFoundError
from perckit.syn4d.metric import baselines as published
from perckit.syn4d import evaluate as runner
from perckit.syn4d.metric import protocol as proto
from perckit.syn4d.read import read_depth_exr

STRICT = json.loads((SYN4D_PARITY / "summary_strict.json").read_text())
LAX = json.loads((SYN4D_PARITY / "summary_lax.json").read_text())
PARITY_IDS = ["mixed/antiquity/seq_000000_0", "og/dream/seq_000001_1", "sim/office/seq_000002_0"]


def _run(capsys, *argv, predictions="predictions", data_root=SYN4D_PARITY):
    code = runner.main(["--predictions", str(SYN4D_PARITY / predictions), "--data-root", str(data_root), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ------------------------------------------------------------------ the official command line


def test_official_comma_separated_syntax_gives_the_official_report(tmp_path, capsys):
    out = tmp_path / "summary.json"
    code, _, err = _run(
        capsys, "--tasks", "tracking,depth,pose", "--variants", "mixed,og,sim", "--scenes", "antiquity,dream,office",
        "--cameras", "0,1", "--depth-align", "scale", "--limit", "0", "--strict", "--output", str(out),
    )
    assert code == 0, err
    assert_official_equal(json.loads(out.read_text()), STRICT)
    # the space-separated form still works and writes the same bytes
    out2 = tmp_path / "summary2.json"
    code, _, err = _run(capsys, "--tasks", "tracking", "depth", "pose", "--cameras", "0", "1", "--strict", "--output", str(out2))
    assert code == 0, err
    assert out2.read_bytes() == out.read_bytes()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--variants", "og,sim"], PARITY_IDS[1:]),
        (["--variants", "og", "sim"], PARITY_IDS[1:]),
        (["--variants", ""], PARITY_IDS),  # official: an empty string selects everything
        (["--cameras", "0"], [PARITY_IDS[0], PARITY_IDS[2]]),
        (["--cameras", "0,1"], PARITY_IDS),
        (["--scenes", "office,dream", "--cameras", "1"], [PARITY_IDS[1]]),
        (["--limit", "2"], PARITY_IDS[:2]),
        (["--limit", "-1"], PARITY_IDS),  # official: `if args.limit > 0`, so a negative limit keeps all
        (["--tasks", "pose,"], PARITY_IDS),
    ],
)
def test_filters_take_the_official_syntax(tmp_path, capsys, argv, expected):
    out = tmp_path / "s.json"
    code, stdout, err = _run(capsys, *argv, "--output", str(out))
    assert code == 0, err
    report = json.loads(out.read_text())
    assert report["requested_sequences"] == len(expected)
    scored = {r["sequence_id"] for block in report["tasks"].values() for r in block["sequences"]}
    assert scored == set(expected)
    assert [line.split(" ", 1)[1] for line in stdout.splitlines() if line.startswith("[")] == expected


def test_the_task_list_is_the_official_one(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert _run(capsys, "--tasks", "pose,tracking", "--output", str(out))[0] == 0
    assert sorted(json.loads(out.read_text())["tasks"]) == ["pose", "tracking"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tasks", "tracking,segmentation"], "unknown task(s) ['segmentation']"),
        (["--tasks", ","], "expected at least one of tracking,depth,pose"),
        (["--cameras", "0,left"], "expected comma-separated integers"),
        (["--depth-align", "median"], "invalid choice: 'median'"),
    ],
)
def test_bad_command_lines_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        runner.main(["--predictions", str(SYN4D_PARITY / "predictions"), "--data-root", str(SYN4D_PARITY), *argv])
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_progress_and_closing_lines_are_the_official_ones(tmp_path, capsys):
    out = tmp_path / "summary.json"
    code, stdout, err = _run(capsys, "--tasks", "tracking,depth,pose", "--output", str(out), predictions="predictions_lax")
    assert code == 0, err
    lines = stdout.splitlines()
    # the official loop prints [i/N] only for records whose NPZ exists (a missing one `continue`s first)
    assert [line for line in lines if line.startswith("[")] == ["[2/3] og/dream/seq_000001_1", "[3/3] sim/office/seq_000002_0"]
    assert lines[-1] == f"wrote {out}; failures=2"
    start = lines.index("{")
    printed = json.loads("\n".join(lines[start:-1]))
    report = json.loads(out.read_text())
    assert printed == {t: b["overall"] for t, b in report["tasks"].items()}
    assert_official_equal(report, LAX)
    # tasks in the order of their first scored row, as the official defaultdict: record 2 has no depth
    assert list(printed) == ["pose", "tracking", "depth"]
    assert "\n".join(lines[start:-1]) == json.dumps(printed, indent=2)


def test_official_paths_data_root_tracking_gt_and_manifest(tmp_path, capsys, monkeypatch):
    """The official invocation: --data-root is the challenge tree, the NPYs and the manifest given apart."""
    out = tmp_path / "s.json"
    argv = ["--tracking-gt", str(SYN4D_PARITY / "benchmark/data/tracking_gt"), "--manifest", str(SYN4D_PARITY / "manifest.jsonl"),
            "--strict", "--output", str(out)]
    assert _run(capsys, *argv, data_root=SYN4D_PARITY / "challenge_eval")[0] == 0
    assert_official_equal(json.loads(out.read_text()), STRICT)
    # SYN4D_DATA_ROOT and SYN4D_TRACKING_GT are the defaults of --data-root and --tracking-gt, as upstream
    monkeypatch.setenv("SYN4D_DATA_ROOT", str(SYN4D_PARITY / "challenge_eval"))
    monkeypatch.setenv("SYN4D_TRACKING_GT", str(tmp_path / "no_tracking_gt"))
    out2 = tmp_path / "s2.json"
    code = runner.main(["--predictions", str(SYN4D_PARITY / "predictions"), "--manifest", str(SYN4D_PARITY / "manifest.jsonl"), "--output", str(out2)])
    assert code == 0
    report = json.loads(out2.read_text())
    assert "tracking" not in report["tasks"] and report["tasks"]["depth"]["overall"]["num_sequences"] == 3
    assert [(f["task"], f["reason"].split(":")[0]) for f in report["failures"]] == [("tracking", "ReleaseNotFoundError")] * 3


# ------------------------------------------------------------------ checksums in the file runner


@pytest.fixture
def small(tmp_path):
    from perckit.samples import write_release
    from perckit.samples.syn4d_predictions import write_predictions

    fx = write_release("syn4d", tmp_path / "rel", variants=("og",), scenes=("dream",), cameras=(0,), write_video=False)
    return fx, write_predictions(fx, tmp_path / "preds")


SEQ = "og/dream/seq_000000_0"
NPY = "benchmark/data/tracking_gt/og/dream/seq_000000_0.npy"
EXR = "challenge_eval/og/dream/exr_layers/depth/seq_000000_0/seq_000000_0_0006_depth.exr"
CSV = "challenge_eval/og/dream/ground_truth/meta_exr_csv/seq_000000_0_camera.csv"


def _tamper(root, rel_path):
    path = root / rel_path
    if rel_path.endswith(".npy"):
        rec = np.load(path, allow_pickle=False)
        rec["query_uv"] = rec["query_uv"] + 1
        np.save(path, rec, allow_pickle=False)
    elif rel_path.endswith(".exr"):
        from perckit.samples.syn4d import write_exr

        write_exr(path, read_depth_exr(path) * 100 + 1)
    else:
        path.write_text(path.read_text() + "\n")  # still a valid CSV, other bytes
    return path


@pytest.mark.parametrize("target, task", [(NPY, "tracking"), (EXR, "depth"), (CSV, "pose")])
@pytest.mark.parametrize("strict", [True, False])
def test_runner_refuses_a_file_that_mismatches_sha256sums(small, target, task, strict):
    fx, preds = small
    path = _tamper(fx.root, target)
    with pytest.raises(ReleaseFormatError) as info:
        runner.evaluate_release(preds, fx.root, strict=strict)
    assert str(path) in str(info.value) and "SHA-256 mismatch" in str(info.value) and "SHA256SUMS" in str(info.value)
    # a task that does not read the file does not verify it
    others = [t for t in ("tracking", "depth", "pose") if t != task]
    assert runner.evaluate_release(preds, fx.root, tasks=others, strict=strict)["failures"] == []
    # the check can be turned off
    out = runner.evaluate_release(preds, fx.root, strict=strict, verify_checksums=False)
    assert sorted(out["tasks"]) == ["depth", "pose", "tracking"]


def test_runner_checksum_flag_and_missing_sums(small, tmp_path, capsys):
    fx, preds = small
    path = _tamper(fx.root, NPY)
    base = ["--predictions", str(preds), "--data-root", str(fx.root), "--output", str(tmp_path / "s.json")]
    assert runner.main(base) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "SHA-256 mismatch" in err
    assert runner.main(base + ["--no-verify-checksums"]) == 0
    assert capsys.readouterr().out.endswith("failures=0\n")
    (fx.root / "benchmark/SHA256SUMS").unlink()
    assert runner.evaluate_release(preds, fx.root)["failures"] == []  # no SHA256SUMS: nothing to verify
    with pytest.raises(ReleaseNotFoundError, match="verify_checksums=True but .*SHA256SUMS' does not exist"):
        runner.evaluate_release(preds, fx.root, verify_checksums=True)


def test_runner_verifies_the_index_and_protocol_it_reads(small):
    fx, preds = small
    index = fx.root / "benchmark/sequences.jsonl"
    index.write_text(index.read_text() + "\n")
    with pytest.raises(ReleaseFormatError, match="sequences.jsonl': SHA-256 mismatch"):
        runner.evaluate_release(preds, fx.root)


# ------------------------------------------------------------------ issue 30: SHA256SUMS where the card puts it


def _apart(fx, preds, tmp_path, *extra):
    """The official invocation on a release: --data-root the challenge tree beside benchmark/, the tracking GT and
    the index given apart (no SHA256SUMS under --data-root: only the one beside data/tracking_gt)."""
    root = fx.root
    assert not (root / "challenge_eval/SHA256SUMS").exists() and (root / "benchmark/SHA256SUMS").is_file()
    return ["--predictions", str(preds), "--data-root", str(root / "challenge_eval"),
            "--tracking-gt", str(root / "benchmark/data/tracking_gt"), "--manifest", str(root / "benchmark/sequences.jsonl"),
            "--output", str(tmp_path / "s.json"), *extra]


def test_runner_apart_is_verified_and_says_nothing(small, tmp_path, capsys):
    fx, preds = small
    assert runner.main(_apart(fx, preds, tmp_path)) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.endswith("failures=0\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", runner.UnverifiedReleaseWarning)
        runner.evaluate_release(preds, fx.root / "challenge_eval", tracking_gt=fx.root / "benchmark/data/tracking_gt",
                                manifest=fx.root / "benchmark/sequences.jsonl")


@pytest.mark.parametrize("target", [NPY, EXR, CSV, "benchmark/sequences.jsonl"])
def test_runner_apart_refuses_a_tampered_file(small, tmp_path, capsys, target):
    """Issue 30: --data-root and --tracking-gt given separately: the SHA256SUMS beside data/tracking_gt verifies
    the files read (before: none was found under --data-root and the run was not verified, silently)."""
    fx, preds = small
    path = _tamper(fx.root, target) if target != "benchmark/sequences.jsonl" else fx.root / target
    if target == "benchmark/sequences.jsonl":
        path.write_text(path.read_text() + "\n")
    assert runner.main(_apart(fx, preds, tmp_path)) == 2
    err = capsys.readouterr().err
    sums = fx.root / "benchmark/SHA256SUMS"
    assert err.startswith("error: ") and f"{str(path)!r}: SHA-256 mismatch with {str(sums)!r}" in err, err
    assert not (tmp_path / "s.json").exists()
    with pytest.raises(ReleaseFormatError, match=re.escape(f"{str(path)!r}: SHA-256 mismatch with {str(sums)!r}")):
        runner.evaluate_release(preds, fx.root / "challenge_eval", tracking_gt=fx.root / "benchmark/data/tracking_gt",
                                manifest=fx.root / "benchmark/sequences.jsonl", strict=False)


def test_runner_verifies_a_tracking_gt_of_another_release_against_its_own_sums(small, tmp_path):
    """--data-root one release (with its SHA256SUMS), --tracking-gt the data/tracking_gt of another copy: the copy's
    NPYs are verified against the SHA256SUMS beside them (before: B's list did not name them, so nothing was)."""
    import shutil

    fx, preds = small
    copy = tmp_path / "copy"
    shutil.copytree(fx.root, copy)
    path = _tamper(copy, NPY)
    with pytest.raises(ReleaseFormatError) as info:
        runner.evaluate_release(preds, fx.root, tracking_gt=copy / "benchmark/data/tracking_gt")
    assert f"{str(path)!r}: SHA-256 mismatch with {str(copy / 'benchmark/SHA256SUMS')!r}" in str(info.value)
    # the release's own files are still verified against its own list
    _tamper(fx.root, EXR)
    with pytest.raises(ReleaseFormatError, match=re.escape(str(fx.root / EXR)) + ".*SHA-256 mismatch"):
        runner.evaluate_release(preds, fx.root, tasks="depth", tracking_gt=copy / "benchmark/data/tracking_gt")


def _unverified_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "not verified" in line]


def test_an_unverified_run_prints_exactly_one_line(tmp_path, capsys):
    """Issue 30: no SHA256SUMS where the card puts it: one line on stderr, naming where it looked."""
    code, out, err = _run(capsys, "--output", str(tmp_path / "s.json"))
    assert code == 0
    looked = SYN4D_PARITY / "benchmark/SHA256SUMS"
    assert not looked.exists()
    assert err.splitlines() == [(
        f"warning: this Syn4D run is not verified against SHA256SUMS: no SHA256SUMS at {str(looked)!r}, beside "
        "data/tracking_gt where the card puts it"
    )]
    assert "not verified" not in out
    # the official invocation on the parity fixture (challenge tree as --data-root, the GT apart): the same
    argv = ["--tracking-gt", str(SYN4D_PARITY / "benchmark/data/tracking_gt"), "--manifest", str(SYN4D_PARITY / "manifest.jsonl")]
    code, _, err = _run(capsys, *argv, data_root=SYN4D_PARITY / "challenge_eval")
    assert code == 0 and len(err.splitlines()) == 1 and f"no SHA256SUMS at {str(looked)!r}" in err


def test_an_unverified_run_says_why(small, tmp_path, capsys):
    import shutil

    fx, preds = small
    base = ["--predictions", str(preds), "--data-root", str(fx.root)]
    # verification turned off
    assert runner.main(base + ["--no-verify-checksums"]) == 0
    assert _unverified_lines(capsys.readouterr().err) == [
        "warning: this Syn4D run is not verified against SHA256SUMS: checksum verification is off"]
    # a tracking GT folder that is not a data/tracking_gt folder: the card puts no SHA256SUMS beside it
    gt = tmp_path / "my_gt"
    shutil.copytree(fx.root / "benchmark/data/tracking_gt", gt)
    assert runner.main(base + ["--tracking-gt", str(gt)]) == 0
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and _unverified_lines(err) == [(
        f"warning: this Syn4D run is not verified against SHA256SUMS: the tracking GT folder {str(gt)!r} is not a "
        f"'data/tracking_gt' folder, beside which the card puts SHA256SUMS (only the files listed in "
        f"{str(fx.root / 'benchmark/SHA256SUMS')!r} are verified)")]
    # without tracking, the release's own SHA256SUMS is the run's: verified, silent
    assert runner.main(base + ["--tracking-gt", str(gt), "--tasks", "depth,pose"]) == 0
    assert capsys.readouterr().err == ""
    # a data/tracking_gt folder apart without SHA256SUMS beside it
    apart = tmp_path / "apart"
    shutil.copytree(fx.root / "benchmark/data", apart / "data")
    assert runner.main(base + ["--tracking-gt", str(apart / "data/tracking_gt")]) == 0
    assert _unverified_lines(capsys.readouterr().err) == [(
        f"warning: this Syn4D run is not verified against SHA256SUMS: no SHA256SUMS at {str(apart / 'SHA256SUMS')!r}, "
        f"beside data/tracking_gt where the card puts it (only the files listed in "
        f"{str(fx.root / 'benchmark/SHA256SUMS')!r} are verified)")]
    # Python: one UnverifiedReleaseWarning, or the line handed to notice; verify_checksums=True requires the file
    with pytest.warns(runner.UnverifiedReleaseWarning, match=re.escape(str(apart / "SHA256SUMS"))) as caught:
        runner.evaluate_release(preds, fx.root, tracking_gt=apart / "data/tracking_gt")
    assert len([w for w in caught if issubclass(w.category, runner.UnverifiedReleaseWarning)]) == 1
    lines = []
    runner.evaluate_release(preds, fx.root, tracking_gt=apart / "data/tracking_gt", notice=lines.append)
    assert len(lines) == 1 and str(apart / "SHA256SUMS") in lines[0]
    with pytest.raises(ReleaseNotFoundError, match=re.escape(f"verify_checksums=True but {str(apart / 'SHA256SUMS')!r} does not exist")):
        runner.evaluate_release(preds, fx.root, tracking_gt=apart / "data/tracking_gt", verify_checksums=True)
    with pytest.raises(ReleaseNotFoundError, match="is not a 'data/tracking_gt' folder"):
        runner.evaluate_release(preds, fx.root, tracking_gt=gt, verify_checksums=True)


# ------------------------------------------------------------------ protocol.json


def test_the_fixture_writes_the_official_protocol_layout(small):
    fx, preds = small
    data = json.loads((fx.root / "benchmark/protocol.json").read_text())
    assert sorted(data) == ["aggregation", "depth", "input", "name", "pose", "tracking", "version"]
    assert sorted(data["input"]) == ["cameras", "frames", "root", "scenes", "variants"]
    assert data["tracking"]["thresholds_m"] == [0.1, 0.3, 0.5, 1.0] and data["depth"]["valid_range_m"] == [0.001, 300.0]
    proto.check_protocol(data, "fixture")  # agrees with what perckit implements
    baselines = json.loads((fx.root / "benchmark/baselines.json").read_text())
    assert all(sorted(v) == ["display_name", "official_repo", "revision", "runner", "tasks"] for v in baselines.values())


def _edit(data, dotted, value):
    *parents, last = dotted.split(".")
    node = data
    for p in parents:
        node = node[p]
    node[last] = value


@pytest.mark.parametrize(
    "field, value",
    [
        ("tracking.thresholds_m", [0.1, 0.25, 0.5, 1.0]),
        ("tracking.thresholds_m", [0.1, 0.3, 0.5]),
        ("tracking.dynamic_threshold_m", 0.05),
        ("tracking.alignment", "one median scale per frame"),
        ("tracking.score", "0.7 * APD(all valid) + 0.3 * APD(dynamic valid)"),
        ("depth.valid_range_m", [0.01, 300.0]),
        ("depth.alignment", "least-squares scale and shift per sequence"),
        ("depth.units", "centimeters"),
        ("pose.alignment", "one Sim(3) per sequence"),
        ("input.frames", list(range(0, 192, 4))),
        ("input.cameras", [0, 1, 2]),
        ("aggregation", "micro average over frames"),
    ],
)
def test_a_protocol_that_disagrees_is_refused(small, field, value):
    fx, preds = small
    path = fx.root / "benchmark/protocol.json"
    data = json.loads(path.read_text())
    _edit(data, field, value)
    path.write_text(json.dumps(data))
    with pytest.raises(ReleaseFormatError) as info:
        runner.evaluate_release(preds, fx.root, verify_checksums=False)
    msg = str(info.value)
    assert str(path) in msg and f"field '{field}" in msg and "expected" in msg and "got" in msg, msg
    assert runner.evaluate_release(preds, fx.root, verify_checksums=False, check_protocol=False)["failures"] == []


def test_protocol_text_rules_ignore_case_and_spacing_and_sets_ignore_order():
    from perckit.samples.syn4d import protocol_json

    data = protocol_json()
    data["pose"]["alignment"] = "  Normalize to frame 0,  then one Sim(3) per sequence "
    data["input"]["variants"] = ["mixed", "og", "mixed_no_bedlam", "sim"]
    proto.check_protocol(data, "p")
    data["tracking"]["thresholds_m"] = [1.0, 0.5, 0.3, 0.1]  # thresholds are an ordered list
    with pytest.raises(ReleaseFormatError, match="field 'tracking.thresholds_m'"):
        proto.check_protocol(data, "p")


def test_protocol_cli_flag_and_bad_files(small, tmp_path, capsys):
    fx, preds = small
    path = fx.root / "benchmark/protocol.json"
    base = ["--predictions", str(preds), "--data-root", str(fx.root), "--no-verify-checksums"]
    path.write_text(path.read_text().replace("0.3,", "0.35,", 1))
    assert runner.main(base) == 2
    assert "field 'tracking.thresholds_m'" in capsys.readouterr().err
    assert runner.main(base + ["--no-check-protocol"]) == 0
    path.write_text('{"name": "a", "name": "b"}')
    with pytest.raises(ReleaseFormatError, match="duplicate key 'name'"):
        runner.evaluate_release(preds, fx.root, verify_checksums=False)
    path.write_text("{not json")  # broken, not of another shape (test_syn4d_card.py): refused
    with pytest.raises(ReleaseFormatError, match="protocol.json"):
        runner.evaluate_release(preds, fx.root, verify_checksums=False)


# ------------------------------------------------------------------ the published baselines


CARD_COLUMNS = ["Track score", "APD", "Dynamic APD", "EPE (m)", "Depth AbsRel", "Depth delta1", "Pose ATE (m)",
                "RPE trans. (m)", "RPE rot. (deg)"]


def _card_table(text):
    rows = [line for line in text.splitlines() if line.startswith("| ") and "|" in line[1:]]
    start = next(i for i, line in enumerate(rows) if line.startswith("| Method | Track score"))
    header = [c.strip() for c in rows[start].strip("|").split("|")]
    body = [[c.strip() for c in line.strip("|").split("|")] for line in rows[start + 2:start + 9]]
    return header, body


def test_the_shipped_table_is_the_cards():
    table = published.published_baselines()
    assert [c["label"] for c in table["columns"]] == CARD_COLUMNS
    assert [m["method"] for m in table["methods"]] == ["Open-D4RT", "4RC", "V-DPM", "Any4D", "TraceAnything", "St4RTrack", "SpaTrackerV2"]
    assert table["methods"][0]["values"] == [0.3043, 0.3631, 0.2317, 2.3298, 0.1290, 0.8408, 0.0676, 0.0355, 0.3872]
    assert table["methods"][4]["values"][4:] == [None] * 5 and table["methods"][5]["values"][4:] == [None] * 5
    assert table["methods"][6]["values"] == [0.4334, 0.5452, 0.2960, 1.6163, 0.0727, 0.9210, 0.0444, 0.0332, 0.1569]
    # our card reprints the table: both agree cell for cell, as printed (4 decimals, '-' for none)
    header, body = _card_table((REPO / "builders/syn4d/README.md").read_text())
    assert header == ["Method", *CARD_COLUMNS]
    for row, method in zip(body, table["methods"]):
        assert row == [method["method"], *("-" if v is None else f"{v:.4f}" for v in method["values"])]
    # the metric keys are the ones the evaluator reports
    keys = {t: set(b["overall"]) for t, b in STRICT["tasks"].items()}
    assert all(c["metric"] in keys[c["task"]] for c in table["columns"])


def test_runner_adds_the_comparison_only_when_asked(tmp_path, capsys):
    plain = runner.evaluate_release(SYN4D_PARITY / "predictions", SYN4D_PARITY)
    assert "baselines" not in plain
    report = runner.evaluate_release(SYN4D_PARITY / "predictions", SYN4D_PARITY, compare_baselines=True)
    comp = report.pop("baselines")
    assert report == plain
    assert comp["columns"] == CARD_COLUMNS and len(comp["rows"]) == 8
    run = comp["rows"][-1]
    o = STRICT["tasks"]
    assert run["method"] == "this run" and run["num_sequences"] == {"depth": 3, "pose": 3, "tracking": 3}
    assert run["values"][0] == pytest.approx(o["tracking"]["overall"]["score"], rel=1e-9)
    assert run["values"][4] == pytest.approx(o["depth"]["overall"]["abs_rel"], rel=1e-9)
    assert run["values"][8] == pytest.approx(o["pose"]["overall"]["rpe_rotation_mean_deg"], rel=1e-9)
    # the CLI prints the table before the closing line and writes it into the report
    out = tmp_path / "s.json"
    code, stdout, err = _run(capsys, "--compare-baselines", "--output", str(out))
    assert code == 0, err
    lines = stdout.splitlines()
    assert "| Open-D4RT | 0.3043 | 0.3631 | 0.2317 | 2.3298 | 0.1290 | 0.8408 | 0.0676 | 0.0355 | 0.3872 |" in lines
    assert "| TraceAnything | 0.2206 | 0.3240 | 0.1003 | 2.3577 | - | - | - | - | - |" in lines
    assert "| this run | 0.5108 | 0.5120 | 0.5095 |" in "\n".join(lines)
    assert lines[-1] == f"wrote {out}; failures=0"
    assert json.loads(out.read_text())["baselines"]["rows"][-1]["method"] == "this run"


def test_comparison_of_one_metric_result_leaves_the_other_tasks_blank():
    result = {"task": "tracking", "overall": dict(STRICT["tasks"]["tracking"]["overall"])}
    text = published.format_comparison(result)
    row = text.splitlines()[-2]
    assert row.startswith("| this run | 0.5108 |") and row.endswith("| - | - | - | - | - |")
    assert "this run: tracking 3 sequence(s)" in text.splitlines()[-1]
    with pytest.raises(OptionError, match="expected a report with 'tasks'"):
        published.comparison({"score": 1.0})


# ------------------------------------------------------------------ the builder's checksum errors


@pytest.mark.parametrize("config, target", [("tracking", NPY), ("challenge", NPY), ("challenge", EXR), ("challenge", CSV)])
def test_builder_checksum_mismatch_is_its_own_error(small, tmp_path, config, target):
    fx, _ = small
    path = _tamper(fx.root, target)
    with pytest.raises(ReleaseFormatError) as info:
        build_split("syn4d", config, fx.root, tmp_path / "cache")
    assert type(info.value).__name__ == "ReleaseFormatError"  # not datasets' DatasetGenerationError
    assert re.search(rf"{re.escape(repr(str(path)))}: SHA-256 mismatch with .*SHA256SUMS': expected [0-9a-f]{{64}}, got [0-9a-f]{{64}}", str(info.value))
    assert build_split("syn4d", config, fx.root, tmp_path / "c2", verify_checksums=False).num_rows == 1


def test_builder_tracking_config_does_not_hash_challenge_files(small, tmp_path):
    fx, _ = small
    _tamper(fx.root, EXR)
    _tamper(fx.root, CSV)
    assert build_split("syn4d", "tracking", fx.root, tmp_path / "cache").num_rows == 1


# ------------------------------------------------------------------ perckit evaluate syn4d --compare-baselines


def _jsonl(path, rows):
    def plain(v):
        return v.tolist() if isinstance(v, np.ndarray) else v

    path.write_text("".join(json.dumps({k: plain(v) for k, v in r.items()}) + "\n" for r in rows))
    return path


def test_perckit_evaluate_syn4d_compare_baselines(syn4d_parity_rows, tmp_path, capsys):
    from perckit.__main__ import main
    from perckit.syn4d.read import load_prediction_rows
    from perckit.syn4d.features import to_metric_reference

    ids = [r["sequence_id"] for r in syn4d_parity_rows]
    preds = _jsonl(tmp_path / "p.jsonl", load_prediction_rows(SYN4D_PARITY / "predictions", ids))
    refs = _jsonl(tmp_path / "r.jsonl", [to_metric_reference(r, "tracking") for r in syn4d_parity_rows])
    argv = ["evaluate", "syn4d", "--config", "tracking", "--predictions", str(preds), "--references", str(refs)]
    assert main(argv + ["--compare-baselines"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "| SpaTrackerV2 | 0.4334 | 0.5452 | 0.2960 | 1.6163 | 0.0727 | 0.9210 | 0.0444 | 0.0332 | 0.1569 |" in lines
    run = next(line for line in lines if line.startswith("| this run |"))
    o = STRICT["tasks"]["tracking"]["overall"]
    assert run == "| this run | " + " | ".join(f"{o[k]:.4f}" for k in ("score", "apd", "dynamic_apd", "epe")) + " | - | - | - | - | - |"
    assert main(argv) == 0
    assert "| Method |" not in capsys.readouterr().out  # only when asked
    assert main(["evaluate", "refer_iou", "--predictions", str(preds), "--references", str(refs), "--compare-baselines"]) == 2
    assert "--compare-baselines: expected the metric syn4d" in capsys.readouterr().err


def test_python_runner_takes_comma_separated_strings_too():
    out = runner.evaluate_release(SYN4D_PARITY / "predictions", SYN4D_PARITY, tasks="pose,tracking", variants="og,sim", cameras="0")
    assert sorted(out["tasks"]) == ["pose", "tracking"] and out["requested_sequences"] == 1
    assert out["tasks"]["pose"]["sequences"][0]["sequence_id"] == "sim/office/seq_000002_0"
