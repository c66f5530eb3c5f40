"""Issue 14 for R4D-Bench: the drop-in command lines and the paper's numbers.

- ``python -m perckit.r4d_bench.evaluate_r4dgs`` (the official track-ID script's name) is the track-ID evaluator:
  same flags, same printed summary, same report, same exit codes;
- ``acc`` is the R4D-Bench-QA camera-ready protocol's Acc (``Trump0412/ReferGaussian:docs/METRICS.md``), the
  value of ``existence_acc``; ``viou`` is its vIoU; reports and ``--self-check`` lead with them;
- the scene track JSON (``<scene>.json`` / ``cook-spinach.json``) links the instance masks of ``frames`` rows to
  track ids where the COCO annotations carry none.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perckit import rle
from perckit.hf.entrypoints import build_split
from perckit.errors import OptionError, ReleaseFormatError
from perckit.samples import write_release
from perckit.r4d_bench import builder as r4d_builder
from perckit.r4d_bench import evaluate_mask_temporal as cli_mask
from perckit.r4d_bench import evaluate_r4dgs
from perckit.r4d_bench import evaluate_track_id
from perckit.r4d_bench import features as feats
from perckit.r4d_bench import layout as r4d_layout
from perckit.r4d_bench import metric as core
from perckit.r4d_bench import read as r4d_read
from perckit.r4d_bench import rows as r4d_rows

GT = "scripts/new_predictions_ground_truth_all_queries.json"
META = "evaluation/R4D-Bench_queries.json"
TRACKS = "evaluation/R4D-Bench_predictions.json"


# ---------------------------------------------------------------- evaluate_r4dgs


def _run(module: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture(scope="module")
def track_files(r4d_release, tmp_path_factory):
    """A track prediction file with some wrong, some missing and some extra ids (scores strictly between 0 and 1)."""
    meta = json.loads((r4d_release.root / META).read_text())
    preds = {}
    for i, m in enumerate(meta):
        if i % 5 == 4:
            continue  # missing query: an empty predicted set
        ids = list(m["target_track_ids"])
        preds[m["query_id"]] = ids[:1] + ([9] if i % 3 == 0 else [])
    path = tmp_path_factory.mktemp("tracks") / "my_tracks.json"
    path.write_text(json.dumps(preds))
    return path


def test_evaluate_r4dgs_is_the_track_id_evaluator_as_a_process(r4d_release, track_files, tmp_path):
    root = r4d_release.root
    out_alias, out_main = tmp_path / "alias.json", tmp_path / "main.json"
    alias = _run("perckit.r4d_bench.evaluate_r4dgs", "--queries", str(root / META), "--predictions", str(track_files),
                 "--output", str(out_alias))
    main = _run("perckit.r4d_bench.evaluate_track_id", "--queries", str(root / META), "--predictions", str(track_files),
                "--output", str(out_main))
    assert alias.returncode == main.returncode == 0, alias.stderr + main.stderr
    assert out_alias.read_bytes() == out_main.read_bytes()
    assert alias.stdout.replace(str(out_alias), "X") == main.stdout.replace(str(out_main), "X")
    report = json.loads(out_alias.read_text())
    assert 0.0 < report["f1"] < 1.0 and report["num_queries"] == len(json.loads((root / META).read_text()))
    assert report["num_missing_predictions"] > 0
    assert alias.stdout.lstrip().startswith("precision")


def test_evaluate_r4dgs_takes_the_card_command_line_from_the_release_root(r4d_release):
    """The card's quick-start step 3, run from the release root, with the module name swapped in."""
    out = "evaluation/track_id_eval_report_perckit_test.json"
    try:
        proc = _run("perckit.r4d_bench.evaluate_r4dgs", "--queries", META, "--predictions", TRACKS, "--output", out,
                    cwd=r4d_release.root)
        assert proc.returncode == 0, proc.stderr
        report = json.loads((r4d_release.root / out).read_text())
        assert report["f1"] == report["exact_match"] == report["micro_f1"] == 1.0  # the GT track sets as a demo
    finally:
        (r4d_release.root / out).unlink(missing_ok=True)


def test_evaluate_r4dgs_self_check_help_and_errors_match(r4d_release, tmp_path):
    root = r4d_release.root
    alias = _run("perckit.r4d_bench.evaluate_r4dgs", "--queries", str(root / META), "--self-check")
    assert alias.returncode == 0 and "self-check passed" in alias.stdout, alias.stderr
    helps = [_run(f"perckit.r4d_bench.{m}", "--help") for m in ("evaluate_r4dgs", "evaluate_track_id")]
    assert "python -m perckit.r4d_bench.evaluate_r4dgs" in helps[0].stdout
    flags = [sorted(set(re.findall(r"--[a-z-]+", h.stdout))) for h in helps]
    assert flags[0] == flags[1] and {"--queries", "--predictions", "--output"} <= set(flags[0])
    missing = [_run(f"perckit.r4d_bench.{m}", "--queries", str(tmp_path / "nope.json"), "--self-check") for m in ("evaluate_r4dgs", "evaluate_track_id")]
    assert missing[0].returncode == missing[1].returncode == 2
    assert missing[0].stderr == missing[1].stderr and "nope.json" in missing[0].stderr
    usage = _run("perckit.r4d_bench.evaluate_r4dgs", "--predictions", "x.json")  # --queries is required
    assert usage.returncode == 2 and "--queries" in usage.stderr


def test_evaluate_r4dgs_holds_no_logic_of_its_own():
    assert evaluate_r4dgs.run is evaluate_track_id.run
    assert evaluate_r4dgs.build_parser is evaluate_track_id.build_parser
    source = Path(evaluate_r4dgs.__file__).read_text()
    assert "track_id(" not in source and "load_track_predictions" not in source


# ---------------------------------------------------------------- acc / viou (METRICS.md)

R = lambda c: {"size": [1, 4], "counts": c}  # noqa: E731
GG, G1, G34, E = R("022"), R("013"), R("22"), R("4")  # [1,1,0,0], [1,0,0,0], [0,0,1,1], empty


def _ref(qid, frames, evaluated, negative=False):
    return {"query_id": qid, "scene": "s", "query_type": "A", "is_negative": negative,
            "frames": [{"frame_id": t, "mask": m} for t, m in frames], "evaluated_frame_ids": evaluated,
            "scene_frame_ids": sorted(set(evaluated) | {9})}


def _pred(qid, frames):
    return {"query_id": qid, "frames": [{"frame_id": t, "mask": m} for t, m in frames]}


def test_acc_and_viou_golden_query():
    """F_q = {1..5} on 1x4 masks. T*_q (GT active) = {1, 2, 3}; T_q (predicted active) = {1, 2, 4}.

    t1: G = P = [1,1,0,0]          IoU 1     agree
    t2: G = [1,1,0,0], P = [1,0,0,0] IoU 1/2   agree
    t3: G = [1,1,0,0], no P         IoU 0     disagree
    t4: G = masks [], P = [0,0,1,1]  IoU 0     disagree
    t5: G = masks [], no P          IoU 1     agree

    Acc = 3/5. vIoU = (1 + 1/2) / |{1, 2, 3, 4}| = 3/8. tIoU = 2/4, temporal P = R = 2/3, miou = 2.5/5.
    """
    ref = _ref("q", [(1, GG), (2, GG), (3, GG), (4, E), (5, E)], [1, 2, 3, 4, 5])
    out = core.mask_temporal([_pred("q", [(1, GG), (2, G1), (4, G34)])], [ref])
    q = out["per_query"][0]
    assert q["acc"] == q["existence_acc"] == pytest.approx(3 / 5)
    assert q["viou"] == pytest.approx(3 / 8)
    assert q["tiou"] == pytest.approx(1 / 2)
    assert q["temporal_precision"] == q["temporal_recall"] == pytest.approx(2 / 3)
    assert q["miou"] == pytest.approx(1 / 2)
    assert out["acc"] == pytest.approx(3 / 5) and out["viou"] == pytest.approx(3 / 8)
    assert out["positive"]["acc"] == pytest.approx(3 / 5) and out["negative"]["acc"] is None
    assert out["per_scene"]["s"]["acc"] == pytest.approx(3 / 5)


@pytest.mark.parametrize("frames, acc, viou", [
    ([], 1.0, 1.0),                          # empty throughout the evaluated timeline: Acc = vIoU = 1
    ([(1, E), (2, E), (3, E)], 1.0, 1.0),    # all-zero masks are "empty"
    ([(9, G1)], 1.0, 1.0),                   # foreground only outside F_q: ignored, still empty on F_q
    ([(2, G1)], 2 / 3, 0.0),                 # active on one sentinel frame of three
    ([(1, G1), (2, G1), (3, GG)], 0.0, 0.0), # active throughout
])
def test_zero_target_query_acc_and_viou_are_one_only_when_empty_throughout(frames, acc, viou):
    ref = _ref("n", [(1, E), (2, E)], [1, 2, 3], negative=True)  # sentinel frames 1, 2, 3
    q = core.mask_temporal([_pred("n", frames)], [ref])["per_query"][0]
    assert q["acc"] == pytest.approx(acc) and q["viou"] == pytest.approx(viou)
    assert q["acc"] == q["existence_acc"]


def _protocol_acc_viou(pred_frames: dict[int, np.ndarray], gt_frames: dict[int, np.ndarray], F: list[int], shape):
    """METRICS.md, written from its formulas (not from perckit): T_q / T*_q the frames of F_q with a non-empty
    predicted / GT mask; Acc = mean_t 1[t in T_q] == 1[t in T*_q]; vIoU = sum_{T_q & T*_q} IoU / |T_q | T*_q|."""
    empty = np.zeros(shape, bool)
    P = {t: pred_frames.get(t, empty) for t in F}
    G = {t: gt_frames.get(t, empty) for t in F}
    T = {t for t in F if P[t].any()}
    Ts = {t for t in F if G[t].any()}
    acc = sum((t in T) == (t in Ts) for t in F) / len(F)
    union = T | Ts
    if not union:
        return acc, 1.0
    s = sum((P[t] & G[t]).sum() / (P[t] | G[t]).sum() for t in T & Ts)
    return acc, s / len(union)


def test_acc_and_viou_equal_the_protocol_formulas_on_the_sample_release(r4d_queries):
    rows = [r for i, r in enumerate(r4d_queries) if i % 3 == 0]
    preds, expected = [], {}
    for i, r in enumerate(rows):
        gt = {f["frame_id"]: rle.decode(f["mask"]).astype(bool) for f in r["frames"]}
        shape = next(iter(gt.values())).shape if gt else (24, 32)
        pf: dict[int, np.ndarray] = {}
        for j, t in enumerate(r["evaluated_frame_ids"]):
            m = gt.get(t, np.zeros(shape, bool))
            if (i + j) % 4 == 1:
                m = np.roll(m, 5, axis=1)          # shifted
            elif (i + j) % 4 == 2:
                continue                           # missing
            elif (i + j) % 4 == 3 and not m.any():
                m = np.zeros(shape, bool)
                m[:3, :3] = True                   # false activation
            pf[t] = m
        preds.append({"query_id": r["query_id"], "frames": [{"frame_id": t, "mask": rle.encode(m)} for t, m in pf.items()]})
        expected[r["query_id"]] = _protocol_acc_viou(pf, gt, list(r["evaluated_frame_ids"]), shape)
    out = core.mask_temporal(preds, [feats.to_metric_reference(r) for r in rows])
    for q in out["per_query"]:
        acc, viou = expected[q["query_id"]]
        assert q["acc"] == pytest.approx(acc, abs=1e-12) and q["viou"] == pytest.approx(viou, abs=1e-12), q["query_id"]
        assert q["acc"] == q["existence_acc"]
    assert 0.0 < out["acc"] < 1.0 and 0.0 < out["viou"] < 1.0
    assert out["acc"] == pytest.approx(np.mean([a for a, _ in expected.values()]))
    assert out["viou"] == pytest.approx(np.mean([v for _, v in expected.values()]))


def test_keys_lead_with_the_papers_and_existence_acc_stays():
    assert core.PAPER_KEYS == ("acc", "viou")
    assert core.GROUP_KEYS[:2] == core.PAPER_KEYS and core.QUERY_KEYS[:2] == core.PAPER_KEYS
    assert "existence_acc" in core.GROUP_KEYS and set(core.DIAGNOSTIC_KEYS) == {"tiou", "temporal_precision", "temporal_recall"}


def test_self_check_and_summary_lead_with_acc_and_viou(r4d_release, capsys, tmp_path):
    root = r4d_release.root
    out = tmp_path / "r.json"
    assert cli_mask.main(["--self-check", "--ground-truth", str(root / GT), "--queries-meta", str(root / META),
                          "--repo-root", str(root), "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines[:2]] == ["acc", "viou"]
    assert all(ln.split()[1] == "1.000000" for ln in lines[:2])
    assert "self-check passed: acc = 1.0, viou = 1.0 and every other metric is 1.0" in lines
    report = json.loads(out.read_text())
    assert report["acc"] == report["viou"] == report["existence_acc"] == 1.0
    assert all(q["acc"] == 1.0 for q in report["per_query"])


def test_self_check_failure_names_acc_first(monkeypatch, r4d_release, capsys):
    root = r4d_release.root
    real = core.reduce_mask_temporal

    def spoiled(scores):
        out = real(scores)
        out["acc"] = out["temporal_acc"] = 0.5
        return out

    monkeypatch.setattr(core, "reduce_mask_temporal", spoiled)
    assert cli_mask.main(["--self-check", "--ground-truth", str(root / GT), "--queries-meta", str(root / META),
                          "--repo-root", str(root)]) == 1
    assert "self-check FAILED: ['acc', 'temporal_acc'] are not 1.0" in capsys.readouterr().err


def test_acc_through_evaluate_equals_core(mask_metric):
    ref = _ref("q", [(1, GG), (2, GG), (3, GG), (4, E), (5, E)], [1, 2, 3, 4, 5])
    preds = [_pred("q", [(1, GG), (2, G1), (4, G34)])]
    out = mask_metric.compute(predictions=preds, references=[ref])
    assert out == core.mask_temporal(preds, [ref])
    assert out["acc"] == pytest.approx(3 / 5) and out["viou"] == pytest.approx(3 / 8)


# ---------------------------------------------------------------- the scene track JSON


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_release("r4d_bench", tmp_path_factory.mktemp("r4d_tracks"),
                         queries_per_scene={"americano": 1, "cook_spinach": 1, "cut_lemon": 1}).root


@pytest.fixture
def root(small, tmp_path):
    dest = tmp_path / "release"
    shutil.copytree(small, dest)
    return dest


def _track_file(root: Path, scene: str) -> Path:
    folder = root / r4d_layout.SCENES_DIR / scene
    (path,) = [folder / n for n in r4d_read.scene_track_json_names(scene) if (folder / n).exists()]
    return path


def _edit(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def _rows(root: Path, scene: str, precedence: str = "coco") -> list[dict]:
    info = r4d_read.read_scene(root, scene, read_tracks=True)
    return [row for _, table in r4d_rows.frame_tables(info, precedence) for row in table.to_pylist()]


def _links(root: Path, scene: str) -> dict[int, str]:
    data = json.loads(_track_file(root, scene).read_text())
    return {a: str(t["track_id"]) for t in data["tracks"] for a in t["annotation_ids"]}


def test_scene_json_links_annotations_that_carry_no_track_id(small):
    coco = json.loads((small / "data/scenes/cut_lemon/_annotations.coco.json").read_text())
    assert coco["annotations"] and all(r4d_read.coco_track_id(a) is None for a in coco["annotations"])
    links = _links(small, "cut_lemon")
    rows = _rows(small, "cut_lemon")
    anns = [a for r in rows for a in r["annotations"]]
    assert len(anns) == len(coco["annotations"]) and len(set(links.values())) >= 3
    assert all(a["track_id"] == links[a["id"]] for a in anns)  # before: every one was null


def test_frames_builder_reads_the_scene_json(small, tmp_path):
    ds = build_split("r4d_bench", "frames", small, tmp_path / "cache")
    links = _links(small, "cut_lemon")
    cut = [a for r in ds if r["scene"] == "cut_lemon" for a in r["annotations"]]
    assert cut and all(a["track_id"] == links[a["id"]] for a in cut)
    # americano: both sources agree, the COCO attribute is kept
    am = [a for r in ds if r["scene"] == "americano" for a in r["annotations"] if a["segmentation"] is not None]
    assert am and all(a["track_id"] == _links(small, "americano")[a["id"]] for a in am)


def test_hyphen_named_scene_json_is_read(root):
    """cook_spinach ships cook-spinach.json: drop the COCO attributes and the links still resolve."""
    assert _track_file(root, "cook_spinach").name == "cook-spinach.json"
    coco = root / "data/scenes/cook_spinach/_annotations.coco.json"
    _edit(coco, lambda d: [a.pop("track_id", None) or a.get("attributes", {}).pop("track_id", None) for a in d["annotations"]])
    links = _links(root, "cook_spinach")
    anns = [a for r in _rows(root, "cook_spinach") for a in r["annotations"]]
    assert anns and all(a["track_id"] == links[a["id"]] for a in anns)


def test_coco_attribute_wins_by_default_and_the_option_switches(root, caplog):
    path = _track_file(root, "americano")
    _edit(path, lambda d: d["tracks"][0]["annotation_ids"].remove(1) or d["tracks"][-1]["annotation_ids"].append(1))
    coco = json.loads((root / "data/scenes/americano/_annotations.coco.json").read_text())
    own = r4d_read.coco_track_id(next(a for a in coco["annotations"] if a["id"] == 1))
    linked = _links(root, "americano")[1]
    assert own != linked
    with caplog.at_level(logging.WARNING, logger="perckit.r4d_bench.release"):
        rows = _rows(root, "americano")
    assert next(a for r in rows for a in r["annotations"] if a["id"] == 1)["track_id"] == own
    assert "name another track" in caplog.text and "keeping the COCO one" in caplog.text
    rows = _rows(root, "americano", "scene_json")
    assert next(a for r in rows for a in r["annotations"] if a["id"] == 1)["track_id"] == linked


def test_without_a_scene_json_the_coco_attributes_are_used(root):
    _track_file(root, "americano").unlink()
    _track_file(root, "cut_lemon").unlink()
    assert all(a["track_id"] is not None for r in _rows(root, "americano") for a in r["annotations"] if a["segmentation"] is not None)
    assert all(a["track_id"] is None for r in _rows(root, "cut_lemon") for a in r["annotations"])


def test_scene_json_of_another_shape_is_ignored_with_a_warning(root, caplog):
    _track_file(root, "cut_lemon").write_text(json.dumps({"scene": "cut_lemon", "objects": [{"id": 1}]}))
    with caplog.at_level(logging.WARNING, logger="perckit.r4d_bench.release"):
        rows = _rows(root, "cut_lemon")
    assert all(a["track_id"] is None for r in rows for a in r["annotations"])
    assert "cut_lemon.json': ignored: its layout is not documented by the release card" in caplog.text


def test_scene_json_link_to_an_unknown_annotation_warns(root, caplog):
    _edit(_track_file(root, "cut_lemon"), lambda d: d["tracks"][0]["annotation_ids"].append(999))
    with caplog.at_level(logging.WARNING, logger="perckit.r4d_bench.release"):
        _rows(root, "cut_lemon")
    assert "links 1 annotation id(s)" in caplog.text and "999" in caplog.text


ODD = r"expected \{track_id: an int or a string, annotation_ids: \[\.\.\.\]\}, got "
BAD_TRACKS = [
    ("tracks-not-a-list", lambda d: d.update(tracks={"1": [1]}), r"expected \{'tracks': \[\{track_id, annotation_ids\}, \.\.\.\]\} or a list of tracks, got \{"),
    ("track-not-an-object", lambda d: d["tracks"].append(5), r"tracks\[\d\]: " + ODD + "5"),
    ("track-id-a-bool", lambda d: d["tracks"][0].update(track_id=True), r"tracks\[0\]: " + ODD + r"\{.*'track_id': True"),
    ("track-id-missing", lambda d: d["tracks"][0].pop("track_id"), r"tracks\[0\]: " + ODD),
    ("annotation-ids-a-string", lambda d: d["tracks"][0].update(annotation_ids="1,2"), r"tracks\[0\]: " + ODD + r"\{.*'1,2'"),
    ("annotation-id-a-word", lambda d: d["tracks"][0].update(annotation_ids=["one"]), r"tracks\[0\]\.annotation_ids\[0\]: expected an integer"),
    ("annotation-in-two-tracks", lambda d: d["tracks"][1]["annotation_ids"].append(d["tracks"][0]["annotation_ids"][0]),
     r"tracks\[1\]\.annotation_ids\[\d+\]: expected each annotation in one track, got annotation 1 in track '1' and in track '2'"),
]


@pytest.mark.parametrize("case, edit, pattern", BAD_TRACKS, ids=[c[0] for c in BAD_TRACKS])
def test_scene_json_of_another_layout_is_one_warning_naming_the_field(root, caplog, case, edit, pattern):
    """[inferred] layout (issue 30): the file is ignored with one warning naming it and the field, never refused."""
    path = _track_file(root, "cut_lemon")
    _edit(path, edit)
    with caplog.at_level(logging.WARNING, logger="perckit.r4d_bench.release"):
        info = r4d_read.read_scene(root, "cut_lemon", read_tracks=True)
    assert info.track_links == {} and len(caplog.records) == 1
    assert "cut_lemon.json" in caplog.text and "ignored" in caplog.text and re.search(pattern, caplog.text)


def test_scene_json_repeated_key_bom_symlink_and_fifo(root, tmp_path):
    path = _track_file(root, "cut_lemon")
    text = path.read_text()
    path.write_text(text.rstrip()[:-1] + ', "tracks": []}')
    with pytest.raises(ReleaseFormatError, match="duplicate key 'tracks'"):
        r4d_read.read_scene(root, "cut_lemon", read_tracks=True)
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert r4d_read.read_scene(root, "cut_lemon", read_tracks=True).track_links == _links_from(text)
    outside = tmp_path / "outside.json"
    outside.write_text(text)
    path.unlink()
    path.symlink_to(outside)
    with pytest.raises(ReleaseFormatError, match="symbolic link leaves the root"):
        r4d_read.read_scene(root, "cut_lemon", read_tracks=True)
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(ReleaseFormatError, match="expected a regular file, got a FIFO"):
        r4d_read.read_scene(root, "cut_lemon", read_tracks=True)


def _links_from(text: str) -> dict[int, str]:
    return {a: str(t["track_id"]) for t in json.loads(text)["tracks"] for a in t["annotation_ids"]}


def test_query_configs_do_not_read_the_scene_json(root):
    _track_file(root, "cut_lemon").write_text("{broken")
    rel = r4d_read.open_query_release(root)
    assert rel.scenes["cut_lemon"].track_json_path is None and rel.scenes["cut_lemon"].track_links == {}


def test_scene_json_names_and_hub_patterns():
    assert r4d_read.scene_track_json_names("americano") == ["americano.json"]
    assert r4d_read.scene_track_json_names("cook_spinach")[:2] == ["cook_spinach.json", "cook-spinach.json"]
    assert "torchocolate.json" in r4d_read.scene_track_json_names("torchchocolate")
    pats = r4d_builder.hub_patterns(r4d_builder.R4DBenchConfig(name="frames"))
    assert "data/scenes/cook_spinach/cook-spinach.json" in pats and "data/scenes/americano/americano.json" in pats
    assert not any("cook-spinach.json" in p for p in r4d_builder.hub_patterns(r4d_builder.R4DBenchConfig(name="all_queries")))


def test_track_id_precedence_option_is_checked(small):
    info = r4d_read.read_scene(small, "cut_lemon", read_tracks=True)
    with pytest.raises(OptionError, match=r"track_id_precedence.*\['coco', 'scene_json'\].*'json'"):
        next(r4d_rows.frame_tables(info, "json"))
    with pytest.raises(OptionError, match="track_id_precedence"):
        r4d_read.resolve_track_id({"track_id": 1}, {}, "first")
