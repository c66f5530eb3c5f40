"""Smoke test of an installed perckit wheel, run from a temporary folder outside any checkout (``make test-wheel``).

Every step is what a pip user does first; each one must work with only the wheel and its dependencies installed
(the newest datasets 5.x): the version, the list of benchmarks, a sample release, a conversion to Parquet,
``perckit.load_dataset``, ``perckit.load_metric``, ``perckit.accumulator`` / ``merge_files``, ``perckit evaluate`` on a predictions file, and
ReasonAVEdit's ``av_edit_quality`` on the sample release. Exits non-zero,
naming the step, at the first failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def run(*args: str) -> str:
    print("$", " ".join(args), flush=True)
    done = subprocess.run(args, capture_output=True, text=True)
    sys.stdout.write(done.stdout[-2000:])
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"wheel smoke test: {' '.join(args)!r} exited {done.returncode}")
    return done.stdout


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="perckit-wheel-smoke-"))
    os.chdir(work)
    os.environ.update(HF_HOME=str(work / "hf"), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_EVALUATE_OFFLINE="1")
    exe = shutil.which("perckit") or str(Path(sys.executable).with_name("perckit"))

    import perckit

    where = Path(perckit.__file__).resolve()
    if "site-packages" not in where.parts:
        raise SystemExit(f"wheel smoke test: perckit imported from {where}, not from an installed wheel")
    version = run(exe, "--version")
    if perckit.__version__ not in version:
        raise SystemExit(f"wheel smoke test: --version printed {version!r}, expected {perckit.__version__}")
    listing = run(exe, "list")
    for name in ("r4d_bench", "syn4d", "refcoco_m", "m4seg", "reason_av_edit", "refer_iou", "mask_temporal", "av_edit_quality"):
        if name not in listing:
            raise SystemExit(f"wheel smoke test: 'perckit list' does not name {name}")
    run(exe, "write-sample", "refcoco_m", "rc")
    run(exe, "convert", "refcoco_m", "--data-dir", "rc", "--output", "exp")

    import datasets

    rows = perckit.load_dataset("refcoco_m", "expressions", data_dir="rc", split="validation")
    exported = datasets.load_dataset(str(work / "exp"), "expressions", split="validation")
    if rows.num_rows == 0 or rows.num_rows != exported.num_rows:
        raise SystemExit(f"wheel smoke test: load_dataset gave {rows.num_rows} rows, the export {exported.num_rows}")

    from perckit.refcoco_m.features import to_metric_prediction, to_metric_reference

    predictions = [to_metric_prediction(r) for r in rows]
    result = perckit.load_metric("refer_iou").compute(predictions=predictions, references=[to_metric_reference(r) for r in rows])
    if result["miou"] != 1.0:
        raise SystemExit(f"wheel smoke test: GT as predictions scored miou={result['miou']}, expected 1.0")
    # The accumulator from the wheel, in two halves saved to files and merged (issue 19).
    halves = [perckit.accumulator("refer_iou") for _ in range(2)]
    references = [to_metric_reference(r) for r in rows]
    for i, acc in enumerate(halves):
        acc.update(predictions=predictions[i::2], references=references[i::2]).save(work / f"state{i}.json")
    merged = perckit.merge_files([work / "state0.json", work / "state1.json"]).compute()
    if merged != result:
        raise SystemExit("wheel smoke test: the merged accumulator files gave other numbers than the refer_iou module")
    with open("preds.jsonl", "w", encoding="utf-8") as f:
        for p in predictions:
            f.write(json.dumps(p) + "\n")
    out = run(exe, "evaluate", "refer_iou", "--predictions", "preds.jsonl", "--references", "exp",
              "--dataset-config", "expressions", "--output", "results.json")
    report = json.loads((work / "results.json").read_text(encoding="utf-8"))
    numbers = report.get("results", report)
    if numbers.get("miou") != 1.0:
        raise SystemExit(f"wheel smoke test: perckit evaluate wrote miou={numbers.get('miou')}, expected 1.0:\n{out}")
    # ReasonAVEdit edit quality (model-free, core dependencies only): the source clip as the edit scores perfect,
    # and every model metric is skipped with a reason (no weights, nothing downloaded).
    from perckit.reason_av_edit import make_quality_prediction, to_quality_reference

    run(exe, "write-sample", "reason_av_edit", "rav")
    rav = perckit.load_dataset("reason_av_edit", data_dir="rav", split="test")
    refs = [to_quality_reference(r) for r in rav.select(range(3))]
    quality = perckit.load_metric("av_edit_quality").compute(
        predictions=[make_quality_prediction(r["sample_id"], r["video"]) for r in refs], references=refs)
    if (quality["ssim"], quality["bg_ssim"]) != (1.0, 1.0) or quality["fvd"] is not None or "fvd" not in quality["skipped"]:
        raise SystemExit(f"wheel smoke test: av_edit_quality of the source as the edit gave ssim={quality['ssim']}, "
                         f"bg_ssim={quality['bg_ssim']}, fvd={quality['fvd']}, skipped={sorted(quality['skipped'])}")
    print(f"wheel smoke test passed in {work} (datasets {datasets.__version__}, perckit {perckit.__version__} from {where.parent})")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
