"""Syn4D parity with the official evaluator: the evaluate module on builder rows and the file runner."""

import json

import pytest
from helpers.common import REPO, SYN4D_PARITY
from helpers.distributed import run_distributed
from helpers.syn4d import assert_official_equal

from perckit.syn4d import evaluate as runner
from perckit.syn4d.read import load_prediction_rows
from perckit.syn4d import metric as core
from perckit.syn4d.features import to_metric_reference

OFFICIAL = {True: "summary_strict.json", False: "summary_lax.json"}
PRED_DIR = {True: "predictions", False: "predictions_lax"}


@pytest.fixture(scope="module")
def syn4d_metrics():
    import evaluate

    return {t: evaluate.load(str(REPO / "metrics" / "syn4d"), t) for t in core.TASKS}


@pytest.mark.parametrize("strict", [True, False])
def test_metric_module_reproduces_the_official_summary(syn4d_parity_rows, syn4d_metrics, strict):
    ids = [r["sequence_id"] for r in syn4d_parity_rows]
    preds = load_prediction_rows(SYN4D_PARITY / PRED_DIR[strict], ids)
    if not strict:
        assert all(preds[0][k] is None for k in ("tracking_xyz", "depth", "camera_c2w"))  # no NPZ
        assert preds[1]["depth"] is None and isinstance(preds[1]["tracking_xyz"], list)  # NPZ without the depth key
    results = {
        task: syn4d_metrics[task].compute(
            predictions=preds, references=[to_metric_reference(r, task) for r in syn4d_parity_rows], strict=strict
        )
        for task in core.TASKS
    }
    official = json.loads((SYN4D_PARITY / OFFICIAL[strict]).read_text())
    assert_official_equal(core.to_official_summary(results), official)


@pytest.mark.parametrize("strict", [True, False])
def test_file_runner_reproduces_the_official_summary(strict):
    out = runner.evaluate_release(SYN4D_PARITY / PRED_DIR[strict], SYN4D_PARITY, strict=strict)
    assert_official_equal(out, json.loads((SYN4D_PARITY / OFFICIAL[strict]).read_text()))


def test_spec_fixture_values():
    out = runner.evaluate_release(SYN4D_PARITY / "predictions", SYN4D_PARITY, strict=True)
    t, d, p = (out["tasks"][k]["overall"] for k in ("tracking", "depth", "pose"))
    assert t["score"] == pytest.approx(0.5107623904694486, rel=1e-12)
    assert d["abs_rel"] == pytest.approx(0.15649763604719716, rel=1e-12)
    assert p["ate_rmse"] == pytest.approx(0.05009775290159404, rel=1e-12)
    seq = out["tasks"]["tracking"]["sequences"][0]
    assert (seq["count"], seq["dynamic_count"]) == (3936, 1887)
    assert out["tasks"]["depth"]["sequences"][0]["valid_pixels"] == 440226


def test_strict_mode_raises_on_missing_prediction():
    with pytest.raises(FileNotFoundError, match="missing prediction .*seq_000000_0.npz"):
        runner.evaluate_release(SYN4D_PARITY / "predictions_lax", SYN4D_PARITY, strict=True)


def test_cli_writes_the_official_report(tmp_path, capsys):
    out = tmp_path / "summary.json"
    code = runner.main(["--predictions", str(SYN4D_PARITY / "predictions_lax"), "--data-root", str(SYN4D_PARITY), "--output", str(out)])
    assert code == 0
    assert_official_equal(json.loads(out.read_text()), json.loads((SYN4D_PARITY / "summary_lax.json").read_text()))
    assert out.read_text().endswith("}\n")
    # issue 14: the official closing line replaces the former "2 failure(s)" line
    assert capsys.readouterr().out.endswith(f"wrote {out}; failures=2\n")
    assert runner.main(["--predictions", str(SYN4D_PARITY / "predictions_lax"), "--data-root", str(SYN4D_PARITY), "--strict"]) == 2


def test_gt_as_prediction_on_the_synthetic_release(syn4d_release, tmp_path):
    from perckit.samples.syn4d_predictions import write_predictions

    preds = write_predictions(syn4d_release, tmp_path / "gt")
    out = runner.evaluate_release(preds, syn4d_release.root)
    assert out["tasks"]["tracking"]["overall"]["score"] == 1.0
    assert out["tasks"]["depth"]["overall"]["abs_rel"] < 1e-6 and out["tasks"]["depth"]["overall"]["delta1"] == 1.0
    assert out["tasks"]["pose"]["overall"]["ate_rmse"] < 1e-5
    assert out["tasks"]["tracking"]["overall"]["num_sequences"] == 16 and out["failures"] == []


def test_filters_limit_and_env_root(syn4d_release, tmp_path, monkeypatch):
    from perckit.samples.syn4d_predictions import write_predictions

    preds = write_predictions(syn4d_release, tmp_path / "p", noise=0.05)
    out = runner.evaluate_release(preds, syn4d_release.root, tasks=["tracking"], variants=["sim"], limit=1)
    assert out["requested_sequences"] == 1 and list(out["tasks"]) == ["tracking"]
    monkeypatch.setenv("SYN4D_DATA_ROOT", str(syn4d_release.root))
    assert runner.main(["--predictions", str(preds), "--tasks", "pose", "--scenes", "office", "--cameras", "1"]) == 0


@pytest.mark.parametrize("task", ["tracking", "pose"])
def test_distributed_two_processes_match_one(syn4d_release, tmp_path, syn4d_metrics, task):
    from perckit.hf.entrypoints import build_split
    from perckit.samples.syn4d_predictions import write_predictions

    rows = build_split("syn4d", "challenge", syn4d_release.root, tmp_path / "c").to_list()
    refs = [to_metric_reference(r, task) for r in rows]
    preds = load_prediction_rows(write_predictions(syn4d_release, tmp_path / "p", noise=0.05), [r["sequence_id"] for r in rows])
    single = syn4d_metrics[task].compute(predictions=preds, references=refs)
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"predictions": preds, "references": refs}))
    dist = run_distributed("syn4d", inputs, 2, tmp_path, f"syn4d-{task}", 3, config=task, timeout=600)
    assert dist["overall"] == json.loads(json.dumps(single["overall"]))
    assert dist["by_scene"] == json.loads(json.dumps(single["by_scene"]))


def test_data_root_may_be_the_challenge_tree(syn4d_release, tmp_path):
    """The official SYN4D_DATA_ROOT is benchmark/challenge_eval (challenge tree inside benchmark/)."""
    from perckit.samples import write_release
    from perckit.samples.syn4d_predictions import write_predictions

    fx = write_release("syn4d", tmp_path / "r", variants=("og",), scenes=("dream",), challenge_inside=True, write_video=False)
    preds = write_predictions(fx, tmp_path / "p")
    out = runner.evaluate_release(preds, fx.root / "benchmark" / "challenge_eval")
    assert out["failures"] == [] and out["tasks"]["depth"]["overall"]["num_sequences"] == 2
    assert out["tasks"]["tracking"]["overall"]["score"] == 1.0
