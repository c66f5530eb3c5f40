"""`make demo` end to end: every benchmark converted, scored, pictured; the report exists and is clean."""

import json


def test_demo_writes_the_report(tmp_path, capsys, monkeypatch):
    from perckit.demo import main
    from perckit.hf import cli

    monkeypatch.setattr(cli, "BAR_DELAY", 0)  # any bar left on would show at once
    monkeypatch.setattr(cli, "BARS", cli.ContextVar("bars_on_as_under_perckit_demo", default=True))
    assert main(tmp_path / "demo") == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err and "Warning" not in out.out + out.err
    assert "\r" not in out.out + out.err  # no progress bar of perckit, datasets or huggingface_hub: a readable log (issue 33)
    reports = json.loads((tmp_path / "demo" / "report.json").read_text())
    names = [r["benchmark"] for r in reports]
    assert names == ["R4D-Bench", "Syn4D", "RefCOCO-M", "M4Seg", "ReasonAVEdit-Bench"]
    for rep in reports:
        for metric, res in rep["metrics"].items():
            assert res["gt_as_prediction"] != res["perturbed"], metric
        for fig, _ in rep["figures"]:
            assert (tmp_path / "demo" / "figures").is_dir() and fig.endswith(".png")
    html = (tmp_path / "demo" / "report.html").read_text()
    assert "<img src='figures/" in html
    for name, rep in zip(["r4d_bench", "syn4d", "refcoco_m", "m4seg", "reason_av_edit"], reports):
        (preview,) = (tmp_path / "demo" / "figures").glob(f"{name}_preview.*")  # one preview per benchmark
        assert rep["figures"][0][0] == str(preview) and "preview" in rep["figures"][0][1]
        magic = {".png": b"\x89PNG\r\n\x1a\n", ".jpg": b"\xff\xd8\xff"}[preview.suffix]
        assert preview.read_bytes().startswith(magic)
        assert f"<img src='figures/{preview.name}'" in html
    assert (tmp_path / "demo" / "export" / "r4d_bench" / "README.md").is_file()


def test_demo_skips_the_m4seg_metrics_whose_extras_are_absent(tmp_path):
    """make demo installs the text and meteor extras; perckit demo without them (a bare pip install, no Java) checks
    and reports the rest, with one line naming what it skipped and what supplies it (issue 33)."""
    import subprocess
    import sys

    from perckit.m4seg.metric.text import EXTRA_METEOR, EXTRA_TEXT

    code = ("import sys\nsys.modules['sentence_transformers'] = sys.modules['pycocoevalcap'] = None  # not installed\n"
            "from pathlib import Path\nfrom perckit import demo\nfrom perckit.hf.cli import progress_bars\n"
            f"out = Path({str(tmp_path / 'demo')!r})\ndemo.claim_output(out)\n"
            "with progress_bars(False):\n    rep = demo.run_m4seg(out, print)\n"
            "print(sorted(k for k, v in rep['metrics']['m4seg']['gt_as_prediction'].items() if v is None))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == str(sorted(["recall", "ss", "siou", "i_ss", "i_siou", "meteor"]))
    [note] = [line for line in lines if line.startswith("M4Seg: skipped ")]
    assert EXTRA_TEXT in note and EXTRA_METEOR in note and "Java" in note, note
    assert "M4Seg: ground truth as prediction scores 1.0 on miou; perturbed prediction scored" in lines
