"""Issue 13 for R4D-Bench: every path a release or a prediction file supplies stays inside its root, files are
read as capped regular files (a FIFO never hangs a build), and a repeated JSON key is an error.

Each case names what the code did before: an absolute ``file_name`` or ``mask_image`` embedded the bytes of any
local file into the rows, a FIFO planted as a frame image or mask PNG hung the build forever.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from pathlib import Path

import datasets
import numpy as np
import pytest
from helpers.harness import deadline, expect
from helpers.bad_inputs import link_out
from PIL import Image

from perckit.hf.entrypoints import build_split
from perckit.errors import InputNotFoundError, PredictionError, ReleaseFormatError, ReleaseNotFoundError
from perckit.samples import write_release
from perckit.r4d_bench import evaluate_mask_temporal as cli_mask
from perckit.r4d_bench import read as r4d_read
from perckit.r4d_bench import rows as r4d_rows

GT = "scripts/new_predictions_ground_truth_all_queries.json"
GTP = "scripts/new_predictions_ground_truth_all_queries_with_paths.json"
META = "evaluation/R4D-Bench_queries.json"
COCO = "data/scenes/americano/_annotations.coco.json"
SCENE = "data/scenes/americano"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_release("r4d_bench", tmp_path_factory.mktemp("r4d_trust"), queries_per_scene={"americano": 2}).root


@pytest.fixture
def root(small, tmp_path):
    dest = tmp_path / "release"
    shutil.copytree(small, dest)
    return dest


@pytest.fixture
def secret(tmp_path):
    """A file outside the release whose bytes must never reach a row (a valid JPEG, so nothing else stops it)."""
    path = tmp_path / "outside" / "secret.jpg"
    path.parent.mkdir()
    buf = io.BytesIO()
    Image.fromarray(np.full((24, 32, 3), 7, np.uint8)).save(buf, format="JPEG")
    path.write_bytes(buf.getvalue())
    return path


def _edit_json(path: Path, fn) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    fn(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def _first_file_name(root: Path) -> str:
    return json.loads((root / COCO).read_text())["images"][0]["file_name"]


def _set_file_name(root: Path, value) -> None:
    _edit_json(root / COCO, lambda d: d["images"][0].update(file_name=value))


def _frames(root: Path, tmp_path: Path):
    return build_split("r4d_bench", "frames", root, tmp_path / "cache")


# ---------------------------------------------------------------- COCO file_name


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "backslash-dotdot", "drive-letter"])
def test_coco_file_name_leaving_the_scene_is_refused(root, tmp_path, secret, kind):
    value = {
        "absolute": str(secret),
        "dotdot": os.path.relpath(secret, root / SCENE / "images"),
        "backslash-dotdot": "..\\..\\..\\..\\outside\\secret.jpg",
        "drive-letter": "C:\\outside\\secret.jpg",
    }[kind]
    _set_file_name(root, value)
    expect(lambda: _frames(root, tmp_path), ReleaseFormatError, r"_annotations\.coco\.json': images\[0\]\.file_name", re.escape(repr(value)[1:20]))


def test_query_configs_read_no_image_so_resolve_no_image_name(root, tmp_path, secret):
    """The query configs read no frame image: a COCO ``file_name`` is not resolved there (nothing of it reaches a
    row), while the ``frames`` config, which reads the images, still refuses it."""
    _set_file_name(root, str(secret))
    ds = build_split("r4d_bench", "all_queries", root, tmp_path / "cache_q")
    assert len(ds) > 0 and str(secret) not in json.dumps(ds[:], default=str)
    info = r4d_read.read_scene(root, "americano", image_names=False)
    assert {fr.file_name for fr in info.frames.values()} == {None}
    with pytest.raises(ValueError, match="image_names=False"):
        r4d_rows.frame_tables(info).__next__()
    expect(lambda: _frames(root, tmp_path), ReleaseFormatError, r"images\[0\]\.file_name")


def test_coco_file_name_through_a_symlink_out_of_the_release_is_refused(root, tmp_path, secret):
    name = _first_file_name(root)
    img = root / SCENE / "images" / name
    img.unlink()
    img.symlink_to(secret)
    expect(lambda: _frames(root, tmp_path), ReleaseFormatError, r"images\[0\]\.file_name", "symbolic link leaves the root")


def test_coco_file_name_that_is_not_a_string_is_refused(root, tmp_path):
    _set_file_name(root, 5)
    expect(lambda: _frames(root, tmp_path), ReleaseFormatError, r"images\[0\]\.file_name: expected a relative path string, got 5")


def test_frame_image_fifo_is_refused_at_once(root, tmp_path):
    img = root / SCENE / "images" / _first_file_name(root)
    img.unlink()
    os.mkfifo(img)
    with deadline():
        expect(lambda: _frames(root, tmp_path), ReleaseFormatError, r"image 0 \(frame 0\)", "expected a regular file, got a FIFO")


def test_frame_image_over_the_cap_is_refused_before_it_is_read(root, monkeypatch):
    from perckit.r4d_bench import layout as r4d_layout

    monkeypatch.setattr(r4d_layout, "MAX_IMAGE_BYTES", 100)
    scene = r4d_read.read_scene(root, "americano")
    expect(lambda: list(r4d_rows.frame_tables(scene)), ReleaseFormatError, r"image 0 \(frame 0\)", "more than the limit of 100 bytes")


def test_frames_of_a_clean_release_still_build(root, tmp_path):
    ds = _frames(root, tmp_path)
    assert len(ds) == 4 and ds.cast_column("image", datasets.Image(decode=False))[0]["image"]["path"].startswith("images/")


# ---------------------------------------------------------------- mask PNG paths of the _with_paths GT


def _set_mask_image(root: Path, value, key="mask_image") -> None:
    def fn(d):
        frame = d[0]["ground_truth"]["frames"][0]
        if key == "mask_image":
            frame["masks"][0]["mask_image"] = value
        else:
            for m in frame["masks"]:
                m.pop("mask_image", None)
            frame["combined_mask_image"] = value
    _edit_json(root / GTP, fn)


def _queries_png(root: Path, tmp_path: Path):
    return build_split("r4d_bench", "all_queries", root, tmp_path / "cache", mask_source="mask_image")


@pytest.mark.parametrize("key", ["mask_image", "combined_mask_image"])
@pytest.mark.parametrize("kind", ["absolute", "dotdot"])
def test_mask_png_path_leaving_the_release_is_refused(root, tmp_path, key, kind):
    outside = tmp_path / "outside.png"
    Image.fromarray(np.full((24, 32), 255, np.uint8)).save(outside)
    value = str(outside) if kind == "absolute" else os.path.relpath(outside, root)
    _set_mask_image(root, value, key)
    field = r"masks\[0\]\.mask_image" if key == "mask_image" else "combined_mask_image"
    expect(lambda: _queries_png(root, tmp_path), ReleaseFormatError, r"query 'americano_q1': frame 0: " + field,
           "absolute path" if kind == "absolute" else "'..' component")


def test_mask_png_symlink_out_of_the_release_is_refused(root, tmp_path):
    outside = tmp_path / "outside.png"
    Image.fromarray(np.full((24, 32), 255, np.uint8)).save(outside)
    rel = json.loads((root / GTP).read_text())[0]["ground_truth"]["frames"][0]["masks"][0]["mask_image"]
    (root / rel).unlink()
    (root / rel).symlink_to(outside)
    expect(lambda: _queries_png(root, tmp_path), ReleaseFormatError, r"masks\[0\]\.mask_image", "symbolic link leaves the root")


def test_mask_png_fifo_is_refused_at_once(root, tmp_path):
    rel = json.loads((root / GTP).read_text())[0]["ground_truth"]["frames"][0]["masks"][0]["mask_image"]
    (root / rel).unlink()
    os.mkfifo(root / rel)
    with deadline():
        expect(lambda: _queries_png(root, tmp_path), ReleaseFormatError, r"masks\[0\]\.mask_image: mask PNG", "got a FIFO")


# ---------------------------------------------------------------- scene names, scene folders, fixed files


def test_scene_name_leaving_data_scenes_is_refused(root, tmp_path):
    outside = tmp_path / "elsewhere"
    shutil.copytree(root / SCENE, outside)  # a folder with a COCO file the build would read
    rel = os.path.relpath(outside, root / "data" / "scenes")
    _edit_json(root / META, lambda d: d[0].update(scene=rel))
    expect(lambda: r4d_read.open_query_release(root), ReleaseFormatError, r"query 'americano_q1': scene", "'..' component")


def test_scene_folder_symlinked_out_of_the_release_is_refused(root, tmp_path):
    outside = tmp_path / "elsewhere"
    link_out(root / SCENE, outside)
    expect(lambda: _frames(root, tmp_path), ReleaseFormatError, r"data/scenes/americano", "symbolic link leaves the root")
    expect(lambda: r4d_read.open_query_release(root), ReleaseFormatError, "americano", "symbolic link leaves the root")


@pytest.mark.parametrize("rel", [COCO, META, GT])
def test_release_json_symlinked_out_of_the_release_is_refused(root, tmp_path, rel):
    outside = tmp_path / "outside.json"
    link_out(root / rel, outside)
    expect(lambda: r4d_read.open_query_release(root), ReleaseFormatError, "symbolic link leaves the root")


def test_release_json_fifo_is_refused_at_once(root):
    (root / COCO).unlink()
    os.mkfifo(root / COCO)  # found by the scene's '_annotations*.coco.json' glob
    with deadline():
        expect(lambda: r4d_read.open_query_release(root), ReleaseFormatError, r"_annotations\.coco\.json", "got a FIFO")
    (root / META).unlink()
    os.mkfifo(root / META)  # a fixed name: not a file, so not found
    with deadline():
        expect(lambda: r4d_read.open_query_release(root), ReleaseNotFoundError, r"R4D-Bench_queries\.json", "not found")


# ---------------------------------------------------------------- repeated JSON keys, BOM


def test_dense_gt_keyed_by_query_id_with_a_repeated_id_is_refused(root):
    entries = json.loads((root / GT).read_text())
    a, b = entries[0], entries[1]
    body = ", ".join(f"{json.dumps(e['query_id'])}: {json.dumps({k: v for k, v in e.items() if k != 'query_id'})}" for e in (a, b, a))
    (root / GT).write_text("{" + body + "}")
    expect(lambda: r4d_read.open_query_release(root), ReleaseFormatError, r"new_predictions_ground_truth_all_queries\.json",
           "duplicate key 'americano_q1'")


def test_coco_json_with_a_repeated_key_is_refused(root):
    text = (root / COCO).read_text()
    (root / COCO).write_text(text.replace('"images":', '"images": [], "images":', 1))
    expect(lambda: r4d_read.read_scene(root, "americano"), ReleaseFormatError, r"_annotations\.coco\.json", "duplicate key 'images'")


def test_json_files_with_a_bom_are_read(root, tmp_path):
    for rel in (GT, META, COCO):
        (root / rel).write_bytes(b"\xef\xbb\xbf" + (root / rel).read_bytes())
    rel = r4d_read.open_query_release(root)
    assert len(rel.entries) == 2 and "americano" in rel.scenes


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True])
def test_coco_bbox_non_finite_or_bool_is_refused(root, tmp_path, value):
    _edit_json(root / COCO, lambda d: d["annotations"][0].update(bbox=[value, 1, 2, 3]))
    expect(lambda: _frames(root, tmp_path), ReleaseFormatError, r"annotation \d+\.bbox: expected finite numbers")


# ---------------------------------------------------------------- prediction files


def _prediction(tmp_path: Path, mask_path: str) -> Path:
    path = tmp_path / "preds.json"
    path.write_text(json.dumps({"q": {"frames": {"1": mask_path}}}))
    return path


@pytest.fixture
def png(tmp_path):
    p = tmp_path / "masks" / "m.png"
    p.parent.mkdir()
    Image.fromarray(np.eye(4, dtype=np.uint8) * 255).save(p)
    return p


def test_prediction_mask_path_absolute_is_accepted(tmp_path, png):
    """Issue 30: as the card says, mask paths resolve relative to --repo-root unless absolute; the prediction file
    is the user's own. allow_absolute_paths=False still refuses them (a file from someone else)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    pred = _prediction(tmp_path, str(png))
    [row] = r4d_read.load_mask_predictions(pred, repo)
    assert row["frames"][0]["mask"]["size"] == [4, 4]
    assert r4d_read.load_mask_predictions(pred, repo, allow_absolute_paths=True) == [row]
    expect(lambda: r4d_read.load_mask_predictions(pred, repo, allow_absolute_paths=False), PredictionError,
           r"query 'q': frame 1: mask path", "absolute path", "allow_absolute_paths=False")


def test_prediction_mask_path_absolute_is_still_read_through_the_checked_reader(tmp_path, png, monkeypatch):
    """An absolute path skips only the repo-root rule: a FIFO, a folder, an oversize file, a NUL are refused."""
    os.mkfifo(tmp_path / "fifo.png")
    with deadline():
        expect(lambda: r4d_read.load_mask_predictions(_prediction(tmp_path, str(tmp_path / "fifo.png")), tmp_path / "masks"),
               PredictionError, r"query 'q': frame 1", "got a FIFO")
    expect(lambda: r4d_read.load_mask_predictions(_prediction(tmp_path, str(tmp_path)), tmp_path / "masks"),
           PredictionError, r"query 'q': frame 1", "got a folder")
    expect(lambda: r4d_read.load_mask_predictions(_prediction(tmp_path, str(png) + "\x00x"), tmp_path / "masks"),
           PredictionError, r"query 'q': frame 1: mask path", "NUL byte")
    expect(lambda: r4d_read.load_mask_predictions(_prediction(tmp_path, "/" + "a" * 5000), tmp_path / "masks"),
           PredictionError, r"query 'q': frame 1: mask path", "at most 4096 characters, got 5001")
    monkeypatch.setattr(r4d_read, "MAX_MASK_PNG_BYTES", 10)
    expect(lambda: r4d_read.load_mask_predictions(_prediction(tmp_path, str(png)), tmp_path / "masks"),
           PredictionError, r"query 'q': frame 1", "more than the limit of 10 bytes")


@pytest.mark.parametrize("value", ["../masks/m.png", "sub/../../masks/m.png", "..\\masks\\m.png", "C:\\masks\\m.png", "a\x00b"])
def test_prediction_mask_path_leaving_the_repo_root_is_refused(tmp_path, png, value):
    repo = tmp_path / "repo"
    repo.mkdir()
    pred = _prediction(tmp_path, value)
    expect(lambda: r4d_read.load_mask_predictions(pred, repo), PredictionError, r"query 'q': frame 1: mask path")
    expect(lambda: r4d_read.load_mask_predictions(pred, repo, allow_absolute_paths=True), PredictionError, r"query 'q': frame 1: mask path")


def test_prediction_mask_symlink_out_of_the_repo_root_is_refused(tmp_path, png):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "m.png").symlink_to(png)
    expect(lambda: r4d_read.load_mask_predictions(_prediction(tmp_path, "m.png"), repo), PredictionError, "symbolic link leaves the root")


def test_prediction_mask_fifo_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "m.png")
    with deadline():
        expect(lambda: r4d_read.load_mask_predictions(_prediction(tmp_path, "m.png"), tmp_path), PredictionError, "got a FIFO")


def test_prediction_mask_relative_path_inside_the_root_still_works(tmp_path, png):
    [row] = r4d_read.load_mask_predictions(_prediction(tmp_path, "masks/m.png"), tmp_path)
    assert row["query_id"] == "q" and row["frames"][0]["frame_id"] == 1


def test_prediction_file_with_a_repeated_key_is_refused(tmp_path, png):
    pred = tmp_path / "preds.json"
    pred.write_text('{"q": {"frames": {"1": "masks/m.png"}}, "q": {"frames": {}}}')
    expect(lambda: r4d_read.load_mask_predictions(pred, tmp_path), PredictionError, "duplicate key 'q'")
    track = tmp_path / "tracks.json"
    track.write_text('{"q": [1], "q": [2]}')
    expect(lambda: r4d_read.load_track_predictions(track), PredictionError, "duplicate key 'q'")


def _absolute_predictions(rows, folder: Path) -> dict:
    """Each query's reference masks as PNGs under ``folder``, named by absolute paths."""
    from perckit import rle

    preds = {}
    for r in rows:
        frames = {}
        for f in r["frames"]:
            p = folder / r["query_id"] / f"{f['frame_id']}.png"
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rle.decode(f["mask"]).astype(np.uint8) * 255).save(p)
            frames[str(f["frame_id"])] = str(p)
        preds[r["query_id"]] = {"frames": frames}
    return preds


def test_cli_scores_absolute_mask_paths_without_a_flag(small, tmp_path, capsys):
    """Issue 30: the card's command line as it is, with absolute mask paths outside --repo-root: scored."""
    rows = build_split("r4d_bench", "all_queries", small, tmp_path / "c")
    preds = _absolute_predictions(rows, tmp_path / "abs")
    assert all(Path(p).is_absolute() and not Path(p).is_relative_to(small)
               for q in preds.values() for p in q["frames"].values())
    pred = tmp_path / "abs.json"
    pred.write_text(json.dumps(preds))
    args = ["--predictions", str(pred), "--ground-truth", str(small / GT), "--queries-meta", str(small / META), "--repo-root", str(small)]
    out = tmp_path / "report.json"
    assert cli_mask.main(args + ["--output", str(out)]) == 0, capsys.readouterr().err
    report = json.loads(out.read_text())
    assert report["num_queries"] == len(rows) and report["num_missing_predictions"] == 0
    assert report["acc"] == report["viou"] == report["miou"] == 1.0
    # --allow-absolute-paths is still accepted (a no-op): the same report
    out2 = tmp_path / "report2.json"
    assert cli_mask.main(args + ["--allow-absolute-paths", "--output", str(out2)]) == 0
    assert json.loads(out2.read_text()) == report
    [flag] = [a for a in cli_mask.build_parser()._actions if "--allow-absolute-paths" in a.option_strings]
    assert "always accepted now" in flag.help


def test_cli_still_refuses_a_relative_path_escaping_the_repo_root(small, tmp_path, capsys):
    rows = build_split("r4d_bench", "all_queries", small, tmp_path / "c")
    preds = _absolute_predictions(rows, tmp_path / "abs")
    qid, q = next(iter(preds.items()))
    fid, absolute = next(iter(q["frames"].items()))
    q["frames"][fid] = os.path.relpath(absolute, small)  # ../.../abs/<q>/<f>.png: the same file, by a '..' path
    assert q["frames"][fid].startswith("..")
    pred = tmp_path / "escape.json"
    pred.write_text(json.dumps(preds))
    args = ["--predictions", str(pred), "--ground-truth", str(small / GT), "--queries-meta", str(small / META), "--repo-root", str(small)]
    for extra in ([], ["--allow-absolute-paths"]):
        assert cli_mask.main(args + extra) == 2
        err = capsys.readouterr().err
        assert f"query {qid!r}: frame {fid}: mask path" in err and "'..' component" in err, err


def test_cli_still_refuses_an_absolute_path_from_the_release(root, tmp_path, capsys):
    """Only the user's own predictions file may name absolute paths: a mask_image of the release may not."""
    outside = tmp_path / "outside.png"
    Image.fromarray(np.full((24, 32), 255, np.uint8)).save(outside)
    _set_mask_image(root, str(outside), "mask_image")
    args = ["--self-check", "--ground-truth", str(root / GTP), "--queries-meta", str(root / META), "--repo-root", str(root),
            "--mask-source", "mask_image"]
    for extra in ([], ["--allow-absolute-paths"]):
        assert cli_mask.main(args + extra) == 2
        err = capsys.readouterr().err
        assert r"masks[0].mask_image" in err and "absolute path" in err, err


def test_missing_prediction_png_is_still_input_not_found(tmp_path):
    expect(lambda: r4d_read.load_mask_predictions(_prediction(tmp_path, "nope.png"), tmp_path), InputNotFoundError, "nope.png", "not found")
