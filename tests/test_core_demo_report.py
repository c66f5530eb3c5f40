"""The demo report reads on its own (issue 33): a summary and contents linking every section, each figure with one
caption (the page's, none drawn into the PNG) and a legend, notes on the numbers that look wrong, the skipped
av_edit_quality models as one compact table; and the page fits a phone's width in Chromium."""

import re
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from perckit import demo, rle
from perckit.draw import figures


def square(x=2, n=5, h=9, w=9):
    m = np.zeros((h, w), bool)
    m[2:2 + n, x:x + n] = True
    return rle.encode(m)


@pytest.fixture
def reports(tmp_path):
    """Two benchmarks' reports made by the demo's own ``_report`` (no preview: the rows have no preview column)."""
    import datasets

    ds = datasets.Dataset.from_dict({"x": [1, 2]})
    res = {"gt_as_prediction": {"miou": 1.0, "num_a_very_long_count_name_of_the_metric": 3},
           "perturbed": {"miou": 0.5, "num_a_very_long_count_name_of_the_metric": 3}}
    counted = {"gt_as_prediction": {"tiou": 1.0, "n_tiou": 7}, "perturbed": {"tiou": 1.0, "n_tiou": 4}}
    overlay = figures.mask_overlay(None, square(), square(x=4), scale=4)
    wave = figures.waveform_plot(np.sin(np.linspace(0, 60, 1600)).astype(np.float32), 16000, (0.02, 0.05), (0.03, 0.06))
    skipped = demo.skipped_models({"fvd": "no weights for fvd: pass models={'fvd': <path>} (https://example.org/x.pt)",
                                   "av_a": "imagebind.models.imagebind_model is not installed (ModuleNotFoundError: No module "
                                           "named 'imagebind'); pip install git+https://github.com/facebookresearch/ImageBind"})
    return tmp_path, [
        demo._report("refcoco_m", {"expressions": ds}, {"refer_iou": res}, tmp_path, "a", overlay, "Three masks.",
                     figures.MASK_LEGEND, "masks shifted.", {"refer_iou": {"num_a_very_long_count_name_of_the_metric": "a count."}}),
        demo._report("reason_av_edit", {"default": ds}, {"av_reasoning": counted}, tmp_path, "b", wave, "A waveform.",
                     figures.WINDOW_LEGEND, "windows shifted.", {"av_reasoning": {"tiou": "fewer samples."}}, tables=[skipped]),
    ]


def test_summary_and_contents_link_every_section(reports):
    out, reps = reports
    page = demo.render_html(reps, out)
    body = page[page.index("<body>"):]
    assert body.index("What was built.") < body.index("What was scored.") < body.index("<nav>")
    assert "Perturbed" in body and "masks shifted." in body and "windows shifted." in body  # each section's recipe
    nav, sections = body.split("</nav>")
    targets = re.findall(r"<h[23] id='([^']+)'", sections)
    assert re.findall(r"href='#([^']+)'", nav) == targets  # every section linked, in order, nothing else
    assert len(targets) == 2 + 2 + 3  # two benchmarks; their tables and figures
    ids = set(re.findall(r"id='([^']+)'", page))
    assert all(link in ids for link in re.findall(r"href='#([^']+)'", page))  # notes' links too


def test_each_figure_has_one_caption_and_a_legend_and_no_drawn_title(reports):
    out, reps = reports
    page = demo.render_html(reps, out)
    shown = re.findall(r"<figure.*?</figure>", page)
    assert len(shown) == sum(len(r["figures"]) for r in reps) == 2
    for fig, rep in zip(shown, reps):
        (f,) = rep["figures"]
        assert fig.count("<figcaption>") == 1 and f["caption"] in fig
        swatches = re.findall(r"<li><span class=sw style='background:rgb\(([\d, ]+)\);border-color:rgb\(([\d, ]+)\)'>", fig)
        assert [tuple(map(int, c.split(","))) for _, c in swatches] == [tuple(c) for _, c in f["legend"]]
        assert page.count(f["caption"]) == 1  # not also the image's alt text
        assert swatches and "predict" in fig and "ground" in fig
    for name, drawing in (("a", figures.mask_overlay(None, square(), square(x=4), scale=4)), ("b", None)):
        png = np.asarray(Image.open(out / "figures" / f"{name}.png").convert("RGB"))
        if drawing is not None:  # the PNG is the drawing, enlarged: no caption band, no legend strip
            assert np.array_equal(png, np.asarray(figures.enlarged(drawing)))
        else:
            assert png.shape[:2] == (162, 800)  # the waveform plot's own size (140 + its 22 px time axis)


def test_a_drawn_figure_is_independent_of_its_caption(tmp_path):
    import datasets

    ds, fig = datasets.Dataset.from_dict({"x": [1]}), figures.mask_overlay(None, square(), None, scale=2)
    paths = [demo._report("refcoco_m", {"expressions": ds}, {}, tmp_path / n, "f", fig, caption, figures.MASK_LEGEND, "")
             ["figures"][0]["path"] for n, caption in (("one", "short"), ("two", "a much longer caption " * 20))]
    assert open(paths[0], "rb").read() == open(paths[1], "rb").read()


def test_notes_mark_their_keys(reports):
    out, reps = reports
    page = demo.render_html(reps, out)
    assert "num_<wbr>a_<wbr>very_<wbr>long" in page  # a long key breaks after its underscores on a phone
    assert re.search(r"tiou<sup><a href='#reason_av_edit-av_reasoning-n1'>1</a></sup>", page)
    assert "<li id='reason_av_edit-av_reasoning-n1'><b>tiou</b>: fewer samples.</li>" in page
    assert "<td data-h='n'>7\u00a0/\u00a04</td>" in page  # n_tiou folded into the n column, both counts where they differ
    assert "n_tiou" not in page
    assert len(re.findall(r"<li id='[^']+-n\d+'", page)) == sum(len(n) for r in reps for n in r["notes"].values())  # each shown


def test_skipped_models_are_one_row_each_with_what_is_missing_and_the_command():
    from perckit.reason_av_edit.quality.models import ENTRIES
    from perckit.reason_av_edit.quality.models.peavs import REASON

    reasons = {
        "fvd": "no weights for fvd: pass models={'fvd': <path>} (the state dict, https://example.org/i3d.pt; download it once)",
        "tv_a": "'openai/clip-vit-large-patch14' is not in the Hugging Face cache (LocalEntryNotFoundError); download it once "
                "with `huggingface-cli download openai/clip-vit-large-patch14` or pass models={'clip': <local path>}",
        "av_a": "imagebind.models.imagebind_model is not installed (ModuleNotFoundError: No module named 'imagebind'); pip install x",
        "pq": "this audiobox_aesthetics has no model.aes.AesMultiOutput; pip install --no-deps audiobox_aesthetics",
        "peavs": REASON,
    }
    reasons["tc"] = reasons["tv_a"]
    t = demo.skipped_models(reasons)
    assert t["columns"] == ["model (keys)", "missing here", "to score it"] and t["text"]
    assert [r[0] for r in t["rows"]] == ["fvd", "clip (tv_a, tc)", "av_a", "pq", "peavs"]  # one row per model, in ENTRIES order
    missing = {r[0]: r[1] for r in t["rows"]}
    assert missing == {"fvd": "no weights for fvd", "clip (tv_a, tc)": "'openai/clip-vit-large-patch14' is not in the Hugging Face cache",
                       "av_a": "imagebind.models.imagebind_model is not installed",
                       "pq": "this audiobox_aesthetics has no model.aes.AesMultiOutput", "peavs": "no PEAVS results.csv"}
    fix = {r[0]: r[2] for r in t["rows"]}
    assert fix["fvd"] == "`--model fvd=PATH`" and fix["peavs"] == "`--model peavs=PATH`"
    assert fix["clip (tv_a, tc)"] == "`huggingface-cli download openai/clip-vit-large-patch14` or `--model clip=FOLDER`"
    install = {e.name: e.install.split(" (")[0] for e in ENTRIES}
    assert fix["av_a"] == f"`{install['av_a']}`, then `--model av_a=PATH`"
    assert fix["pq"] == f"`{install['pq']}`, then `--model pq=PATH`"
    assert not any("http" in r[1] for r in t["rows"])


@pytest.mark.slow
def test_the_page_fits_a_phone_in_headless_chromium(reports, tmp_path):
    """At 390 px the page is no wider than the screen (tables wrap or stack, figures shrink). Headless Chromium's window
    is at least 500 px wide, so the page is laid out in a 390 px frame, which posts its scroll width to the window."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium on PATH: install it (Debian: apt-get install -y chromium) to lay out the demo report")
    out, reps = reports
    page = demo.render_html(reps, out).replace(
        "</body>", "<script>parent.postMessage(String(document.documentElement.scrollWidth), '*')</script></body>")
    (out / "report.html").write_text(page)
    widths = {}
    for width in (390, 1400):
        (out / "frame.html").write_text(
            f"<!doctype html><body style='margin:0'><iframe src='report.html' width={width} height=20000 style='border:0'>"
            "</iframe><p id=w></p><script>addEventListener('message', e => document.getElementById('w').dataset.w = e.data)"
            "</script></body>")
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars",
                 f"--window-size={width + 100},800", "--virtual-time-budget=5000", "--dump-dom"]
        done = subprocess.run([browser, *flags, (out / "frame.html").as_uri()], capture_output=True, text=True, timeout=180)
        found = re.search(r'data-w="(\d+)"', done.stdout)
        assert found, done.stderr[-2000:]
        widths[width] = int(found.group(1))
    assert widths == {390: 390, 1400: 1400}
