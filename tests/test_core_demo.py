"""`make demo` end to end: every benchmark converted, scored, pictured; the report exists and is clean."""

import json
import re
from pathlib import Path


def whole_sentence(line: str) -> bool:
    """The rule of every line of the demo's log (issue 33): a capital letter first, a full stop (or ! ?) last, and
    every bracket closed; a line cut mid-sentence ("...; perturbed prediction scored"), an empty line, a table row,
    a heading, a progress bar or another library's print fails it."""
    return (re.fullmatch(r"[A-Z][^\r]*[^\s;,:][.!?]", line) is not None
            and all(line.count(a) == line.count(b) for a, b in ("()", "[]", "{}")))


def test_the_sentence_rule_fails_on_what_the_demo_printed_before():
    assert whole_sentence("R4D-Bench: ground truth as prediction scores 1.0 on every metric; the perturbed prediction scores miou 0.588.")
    for line in ("R4D-Bench: ground truth as prediction scores 1.0 on every metric; perturbed prediction scored",
                 "r4d_bench: converted all_queries (89 rows) to build/demo/export/r4d_bench in 7.4s; loaded back with no script",
                 "", "# perckit demo report", "| miou | 1.0000 | 0.5879 |", "PTBTokenizer tokenized 743 tokens at 7365.42 tokens per second",
                 "Loading weights:  50%|#####     | 1/2 [00:00<00:00]", "M4Seg: scores (mIoU.", "Syn4D: the scores are;."):
        assert not whole_sentence(line), line


def test_demo_writes_the_report(tmp_path, capfd, monkeypatch):
    from perckit.demo import main
    from perckit.hf import cli
    from perckit.m4seg.metric.options import SEVEN

    monkeypatch.setattr(cli, "BAR_DELAY", 0)  # any bar left on would show at once
    monkeypatch.setattr(cli, "BARS", cli.ContextVar("bars_on_as_under_perckit_demo", default=True))
    assert main(tmp_path / "demo") == 0
    out = capfd.readouterr()  # file descriptors: a subprocess's print (the JVM of METEOR's tokenizer) is caught too
    # nothing on stderr: no progress bar of perckit, datasets, huggingface_hub or transformers, no warning, no other
    # library's print (issue 33); stdout is the log, one whole sentence a line
    assert out.err == ""
    lines = out.out.splitlines()
    assert [line for line in lines if not whole_sentence(line)] == []
    (m4seg,) = [line for line in lines if line.startswith("M4Seg: ground truth as prediction")]
    assert all(re.search(rf"\b{k}\b", m4seg) for k in SEVEN), m4seg  # the seven checked (or named as skipped)
    assert str(tmp_path / "demo" / "report.html") in lines[-1] and str(tmp_path / "demo" / "export") in lines[-1]
    reports = json.loads((tmp_path / "demo" / "report.json").read_text())
    names = [r["benchmark"] for r in reports]
    assert names == ["R4D-Bench", "Syn4D", "RefCOCO-M", "M4Seg", "ReasonAVEdit-Bench"]
    for rep in reports:
        for metric, res in rep["metrics"].items():
            assert res["gt_as_prediction"] != res["perturbed"], metric
        assert [Path(f["path"]).suffix for f in rep["figures"]][1:] == [".png"]
        assert rep["perturbed"] and all(f["caption"] and f["legend"] for f in rep["figures"])
    html = (tmp_path / "demo" / "report.html").read_text()
    for name, rep in zip(["r4d_bench", "syn4d", "refcoco_m", "m4seg", "reason_av_edit"], reports):
        (preview,) = (tmp_path / "demo" / "figures").glob(f"{name}_preview.*")  # one preview per benchmark
        assert rep["figures"][0]["path"] == str(preview) and "preview" in rep["figures"][0]["caption"]
        magic = {".png": b"\x89PNG\r\n\x1a\n", ".jpg": b"\xff\xd8\xff"}[preview.suffix]
        assert preview.read_bytes().startswith(magic)
        assert f"<img src='figures/{preview.name}'" in html
    # issue 33: the report reads on its own
    nav, body = html[html.index("<body>"):].split("</nav>")
    assert "What was built." in nav and "What was scored." in nav and "Perturbed" in nav
    from perckit.reason_av_edit.quality.metric import EditQualityOptions, build_models
    from perckit.reason_av_edit.quality.models import BY_KEY

    _, skipped = build_models(EditQualityOptions())  # what this machine lacks, as the demo's run found it
    sections = re.findall(r"<h[23] id='([^']+)'", body)
    assert re.findall(r"href='#([^']+)'", nav) == sections and len(sections) == 5 + 9 + bool(skipped) + 5  # benchmarks, tables, figures
    shown = re.findall(r"<figure.*?</figure>", body)
    assert len(shown) == 10 and all(f.count("<figcaption>") == 1 and f.count("<ul class=legend><li>") == 1 for f in shown)
    assert "rpe_<wbr>rotation_<wbr>mean_<wbr>deg<sup>" in body and "0.0048 degrees" in body  # the float32 rounding explained
    notes = [n for r in reports for t in [*r["notes"].values(), *(t.get("notes", {}) for t in r.get("tables", []))] for n in t]
    assert len(re.findall(r"<li id='[^']+-n\d+'", body)) == len(notes) >= 12  # every note on a key its table shows
    assert not (tmp_path / "demo" / "report.md").exists()
    tables = [t for t in reports[-1]["tables"] if t["title"].endswith("skipped model metrics")]
    assert len(tables) == bool(skipped) and "<li>skipped" not in html  # one table, not a list of reasons
    for t in tables:  # one row per model (its keys together), what is missing without URLs, the option that supplies it
        assert len(t["rows"]) == len({BY_KEY[k].name for k in skipped}) and all("--model " in r[2] for r in t["rows"])
        assert "http" not in " ".join(r[1] for r in t["rows"])
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
    [note] = [line for line in lines if line.startswith("M4Seg: ground truth as prediction")]
    assert note.startswith("M4Seg: ground truth as prediction scores 1.0 on 1 of the seven metrics (miou), ") and whole_sentence(note), note
    assert EXTRA_TEXT in note and EXTRA_METEOR in note and "Java" in note, note
