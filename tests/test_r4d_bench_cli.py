"""The official-format command lines give the same numbers as the Python API."""

import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from perckit import rle
from perckit.errors import InputNotFoundError, PredictionError
from perckit.r4d_bench import evaluate_mask_temporal as cli_mask
from perckit.r4d_bench import evaluate_track_id as cli_track
from perckit.r4d_bench import features as feats
from perckit.r4d_bench import read as r4d_read

GT = "scripts/new_predictions_ground_truth_all_queries.json"
META = "evaluation/R4D-Bench_queries.json"


def _write_png_predictions(root, rows, shape="dict", shift=True):
    """Official-shape predictions: PNG files + JSON; every other frame shifted right by 3 pixels."""
    preds = {}
    for i, r in enumerate(rows):
        entries = []
        for j, f in enumerate(r["frames"]):
            m = rle.decode(f["mask"])
            if shift and (i + j) % 2:
                m = np.roll(m, 3, axis=1)
            rel = f"preds/{r['query_id']}/{f['frame_id']:06d}.png"
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(m.astype(np.uint8) * 255).save(root / rel)
            entries.append((f["frame_id"], rel))
        if shape == "dict":
            preds[r["query_id"]] = {"frames": {str(fid): p for fid, p in entries}}
        else:
            preds[r["query_id"]] = [{"frame_id": fid, "mask_path": p} for fid, p in entries]
    path = root / f"preds_{shape}.json"
    path.write_text(json.dumps(preds))
    return path


@pytest.mark.parametrize("shape", ["dict", "list"])
def test_cli_equals_python_api(r4d_release, r4d_queries, mask_metric, tmp_path, shape):
    root = r4d_release.root
    pred_path = _write_png_predictions(tmp_path, r4d_queries, shape)
    report_path = tmp_path / "report.json"
    code = cli_mask.main([
        "--predictions", str(pred_path), "--ground-truth", str(root / GT), "--queries-meta", str(root / META),
        "--repo-root", str(tmp_path), "--output", str(report_path),
    ])
    assert code == 0
    report = json.loads(report_path.read_text())
    preds = r4d_read.load_mask_predictions(pred_path, tmp_path)
    api = mask_metric.compute(predictions=preds, references=[feats.to_metric_reference(r) for r in r4d_queries])
    assert report == json.loads(json.dumps(api))
    assert 0.0 < report["miou"] < 1.0


def test_cli_self_check_and_filters(r4d_release, capsys):
    root = r4d_release.root
    args = ["--ground-truth", str(root / GT), "--queries-meta", str(root / META), "--repo-root", str(root)]
    assert cli_mask.main(args + ["--self-check"]) == 0
    assert "self-check passed" in capsys.readouterr().out
    assert cli_mask.main(args + ["--self-check", "--only-query-prefix", "cook-spinach", "--debug-query", "cook-spinach_q1"]) == 0
    out = capsys.readouterr().out
    assert "query cook-spinach_q1" in out and "num_queries  7" in out


def test_cli_module_runs_as_a_process(r4d_release, tmp_path):
    root = r4d_release.root
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "perckit.r4d_bench.evaluate_mask_temporal", "--self-check", "--ground-truth", str(root / GT),
         "--queries-meta", str(root / META), "--repo-root", str(root), "--only-queries", "americano_q1,americano_q2",
         "--iou-threshold", "0.7", "--output", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["num_queries"] == 2


def test_track_cli(r4d_release, r4d_queries, track_metric, tmp_path):
    root = r4d_release.root
    preds = {r["query_id"]: ([int(t) for t in r["target_track_ids"]] + ([9] if i % 4 == 0 and r["target_track_ids"] else [])) for i, r in enumerate(r4d_queries)}
    path = tmp_path / "tracks.json"
    path.write_text(json.dumps(preds))
    report_path = tmp_path / "t.json"
    assert cli_track.main(["--queries", str(root / META), "--predictions", str(path), "--output", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    api = track_metric.compute(predictions=r4d_read.load_track_predictions(path), references=[feats.to_track_reference(r) for r in r4d_queries])
    assert report == json.loads(json.dumps(api))
    assert report["exact_match"] < 1.0 and report["recall"] == 1.0
    assert cli_track.main(["--queries", str(root / META), "--self-check"]) == 0


def test_prediction_file_errors(tmp_path, r4d_release):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PredictionError, match="bad.json.*valid JSON"):
        r4d_read.load_mask_predictions(bad, tmp_path)
    bad.write_text(json.dumps({"q": {"frames": {"one": "x.png"}}}))
    with pytest.raises(PredictionError, match="frame key.*'one'"):
        r4d_read.load_mask_predictions(bad, tmp_path)
    bad.write_text('{"q": {"frames": {}}, "q": {"frames": {}}}')
    with pytest.raises(PredictionError, match="duplicate key 'q'"):
        r4d_read.load_mask_predictions(bad, tmp_path)
    bad.write_text(json.dumps({"q": {"frames": {"1": "missing.png"}}}))
    with pytest.raises(InputNotFoundError, match="missing.png"):
        r4d_read.load_mask_predictions(bad, tmp_path)
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    bad.write_text(json.dumps({"q": {"frames": {"1": "broken.png"}}}))
    with pytest.raises(PredictionError, match="broken.png"):
        r4d_read.load_mask_predictions(bad, tmp_path)
    with pytest.raises(InputNotFoundError, match="nope.json"):
        r4d_read.load_mask_predictions(tmp_path / "nope.json")
    bad.write_text(json.dumps({"unknown_q": {"frames": {}}}))
    code = cli_mask.main(["--predictions", str(bad), "--ground-truth", str(r4d_release.root / GT), "--queries-meta", str(r4d_release.root / META), "--repo-root", str(tmp_path)])
    assert code == 2
