"""`perckit report` (issue 31, "look at your own errors"): one self-contained HTML page of a run's own samples, worst
first by the metric's per-sample score, with a filter per group; written only over a page perckit wrote."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from perckit.__main__ import main
from perckit.draw.report import MARK

#: (metric, the export's benchmark, the per-sample list of the results file, its id, its score, its groups)
CASES = {"refer_iou": ("refcoco_m", "per_example", "expression_id", "iou", ("category", "supercategory")),
         "mask_temporal": ("r4d_bench", "per_query", "query_id", "miou", ("scene", "query_type"))}


@pytest.fixture(scope="module")
def runs(refcoco_release, r4d_release, tmp_path_factory):
    """The RefCOCO-M and R4D-Bench sample releases converted (R4D-Bench with its frames config) and the demo's
    imperfect predictions for each: ``{metric: (export, predictions file)}``."""
    from perckit.__main__ import load_rows
    from perckit.demo import perturb_masks, perturb_r4d
    from perckit.export import convert

    base = tmp_path_factory.mktemp("report")
    for name, release, configs in (("refcoco_m", refcoco_release.root, [None]), ("r4d_bench", r4d_release.root, ["all_queries", "frames"])):
        for config in configs:
            convert(name, release, config, base / name, cache_dir=base / "cache" / name, progress=False, log=lambda m: None)
    rows = load_rows(str(base / "refcoco_m"), None, None, "refcoco_m")[0].remove_columns(["image", "preview"]).to_list()
    preds = {"refer_iou": [{"expression_id": r["expression_id"], "mask": m} for r, m in zip(rows, perturb_masks([r["mask"] for r in rows]))],
             "mask_temporal": perturb_r4d(load_rows(str(base / "r4d_bench"), "all_queries", None, "r4d_bench")[0].to_list())[0]}
    out = {}
    for metric, rows in preds.items():
        path = base / f"{metric}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out[metric] = (base / CASES[metric][0], path)
    return out


def _sections(page: str) -> list[tuple[str, str, list[str]]]:
    """Each sample of a page: its id, its section's HTML and its group attributes in order."""
    found = re.findall(r"<section style='[^']*'((?: data-g\d+=\"[^\"]*\")*)><h2>#\d+ (\S+)", page)
    bodies = page.split("<section ")[1:]
    return [(sid, body, re.findall(r'data-g\d+="([^"]*)"', attrs)) for (attrs, sid), body in zip(found, bodies)]


@pytest.mark.parametrize("metric", sorted(CASES))
def test_the_page_shows_the_samples_worst_first_with_their_groups_inline(metric, runs, tmp_path, capsys):
    export, preds = runs[metric]
    _, per_sample, key, score, groups = CASES[metric]
    results, page_path = tmp_path / "r.json", tmp_path / "pages" / "report.html"
    extra = ["--option", "return_per_example=true"] if metric == "refer_iou" else []
    assert main(["evaluate", metric, "--predictions", str(preds), "--references", str(export), "--output", str(results), *extra]) == 0
    samples = json.loads(results.read_text())[per_sample]
    assert main(["report", metric, "--predictions", str(preds), "--references", str(export), "--output", str(page_path)]) == 0
    assert f"report of {len(samples)} samples" in capsys.readouterr().out
    page = page_path.read_text()
    shown = _sections(page)
    # worst first, by the metric's own per-sample score (ties by id), every sample once
    want = sorted(samples, key=lambda s: (s[score], s[key]))
    assert [sid for sid, _, _ in shown] == [s[key] for s in want]
    assert want[0][score] < want[-1][score]  # the perturbed predictions are imperfect
    for (sid, body, _), s in zip(shown, want):
        assert f"{score} {s[score]:.4f}</h2>" in body, sid
    # the groups: one select per group, each section carrying its values, the values those of the references
    rows = {r[key]: r for r in _export_rows(export, metric)}
    for i, g in enumerate(groups):
        options = re.search(rf"<label>{g} <select data-i={i}><option value=''>all</option>(.*?)</select>", page).group(1)
        assert set(re.findall(r"<option>([^<]*)</option>", options)) == {str(r[g]) for r in rows.values()}
        assert all(attrs[i] == str(rows[sid][g]) for sid, _, attrs in shown)
    # self-contained: pictures inline, no other file, no network
    sources = re.findall(r"<img src='([^']*)'", page)
    assert len(sources) >= len(shown) and all(s.startswith(("data:image/png;base64,", "data:image/jpeg;base64,")) for s in sources)
    assert not re.search(r"(?:src|href)\s*=\s*['\"]?(?:https?:)?//", page) and "http://" not in page and "https://" not in page
    assert "<link" not in page and "<script src" not in page and MARK in page
    # a shorter page keeps the worst
    assert main(["report", metric, "--predictions", str(preds), "--references", str(export), "--output", str(page_path),
                 "--max-samples", "5"]) == 0
    assert [sid for sid, _, _ in _sections(page_path.read_text())] == [s[key] for s in want[:5]]


def _export_rows(export, metric):
    from perckit.__main__ import load_rows
    from perckit.hf.benchmark import metric as lookup

    bench, spec = lookup(metric)
    return list(map(spec.projector(None), load_rows(str(export), None, None, bench.name)[0]))


def test_the_page_is_written_only_over_a_page_perckit_wrote(runs, tmp_path, capsys):
    export, preds = runs["refer_iou"]
    mine = tmp_path / "notes.html"
    mine.write_text("<html><head><title>my notes</title></head><body>perckit report</body></html>")
    args = ["report", "refer_iou", "--references", str(export), "--output", str(mine)]
    assert main([*args, "--predictions", str(tmp_path / "never-read.jsonl")]) == 2  # checked before anything is read
    err = capsys.readouterr().err
    assert "got a file perckit did not write" in err and "never-read" not in err
    assert mine.read_text().startswith("<html><head><title>my notes")
    ours = tmp_path / "ours.html"
    assert main([*args[:-1], str(ours), "--predictions", str(preds)]) == 0
    first = ours.read_text()
    assert main([*args[:-1], str(ours), "--predictions", str(preds), "--max-samples", "3"]) == 0  # recognised, replaced
    assert ours.read_text() != first and len(_sections(ours.read_text())) == 3
    assert main([*args[:-1], str(ours), "--predictions", str(preds), "--max-samples", "0"]) == 2
    assert "--max-samples 0: expected at least 1" in capsys.readouterr().err


def test_reference_rows_without_an_export_draw_on_a_neutral_canvas(runs, tmp_path):
    export, preds = runs["refer_iou"]
    refs = tmp_path / "refs.jsonl"
    refs.write_text("".join(json.dumps(r) + "\n" for r in _export_rows(export, "refer_iou")))
    out = tmp_path / "r.html"
    assert main(["report", "refer_iou", "--predictions", str(preds), "--references", str(refs), "--output", str(out)]) == 0
    page = out.read_text()
    assert len(_sections(page)) == len(refs.read_text().splitlines()) == page.count("<img src='data:image/")  # a picture each
    assert page.count("<ul class=legend><li><span class=sw") == 1  # the colours' legend, as text beside swatches


@pytest.mark.slow
@pytest.mark.parametrize("width", [1400, 390])
def test_the_page_renders_offline_in_headless_chromium(width, runs, tmp_path):
    """The page in the machine's Chromium (skipped without one), at a desktop and a phone width: a screenshot that is
    not blank, taken with the network features off."""
    from PIL import Image

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium on PATH: install it (Debian: apt-get install -y chromium) to render the report page")
    export, preds = runs["mask_temporal"]
    page, shot = tmp_path / "report.html", tmp_path / "shot.png"
    assert main(["report", "mask_temporal", "--predictions", str(preds), "--references", str(export), "--output", str(page)]) == 0
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars",
             f"--screenshot={shot}", f"--window-size={width},1600"]
    done = subprocess.run([browser, *flags, page.as_uri()], capture_output=True, text=True, timeout=180)
    assert shot.is_file(), done.stderr[-2000:]
    im = Image.open(shot).convert("RGB")
    assert im.size == (width, 1600)
    assert len(im.getcolors(1 << 20) or []) > 50  # text, swatches and frames, not an empty page
