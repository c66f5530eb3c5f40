"""`make demo` end to end: every benchmark converted, scored, pictured; the report exists and is clean."""

import json
import re
from pathlib import Path


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
