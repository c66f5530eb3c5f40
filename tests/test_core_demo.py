"""`make demo` end to end: every benchmark converted, scored, pictured; the report exists and is clean."""

import json
import re


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
