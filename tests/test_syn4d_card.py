"""Issue 30 for Syn4D: the rows keep the names the release card gives the NPY's arrays, and what the card does not
document (perckit's [inferred] readings, listed in builders/syn4d/README.md) never fails a build: each reading is
given three unexpected shapes (a list of scalars, an object without the keys, a nested object) on every config and
the file runner that read it, with the outcome the card's table documents."""

import json
import logging
import shutil

import numpy as np
import pytest
from helpers.common import SYN4D_PARITY
from helpers.harness import expect

from perckit.errors import ReleaseFormatError
from perckit.hf.entrypoints import build_split
from perckit.syn4d import evaluate as runner
from perckit.syn4d.features import reference_schema, to_metric_reference, to_numpy_row

#: The fields of the card's "Tracking NPY schema" table, in its order (Syn4D/Syn4D_Benchmark, benchmark/README.md).
CARD_NPY_FIELDS = ("schema", "sequence_id", "tracks_ref0", "visibility", "dynamic", "query_uv", "frame_indices", "intrinsics", "image_size")
SHAPES = {"list-of-scalars": [1, 2], "object-without-the-keys": {"x": 1}, "nested-object": {"a": {"b": 1}}}
SHAPE = pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
SEQ = "og/dream/seq_000000_0"
INDEX, SUMS, PROTOCOL = "benchmark/sequences.jsonl", "benchmark/SHA256SUMS", "benchmark/protocol.json"
CSV = "challenge_eval/og/dream/ground_truth/meta_exr_csv/seq_000000_0_camera.csv"
DEPTH = "challenge_eval/og/dream/exr_layers/depth/seq_000000_0"


@pytest.mark.parametrize("config", ["tracking", "challenge"])
def test_rows_keep_the_cards_field_names(tmp_path, config):
    rows = [to_numpy_row(r) for r in build_split("syn4d", config, SYN4D_PARITY, tmp_path)]
    assert set(CARD_NPY_FIELDS) <= set(rows[0]), sorted(set(CARD_NPY_FIELDS) - set(rows[0]))
    assert not {"tracks_ref0_m", "query_uv_px", "intrinsics_fx_fy_cx_cy", "image_size_hw"} & set(rows[0])
    for row in rows:  # code written against the NPYs reads the row unchanged
        npy = np.load(SYN4D_PARITY / "benchmark/data/tracking_gt" / f"{row['sequence_id']}.npy", allow_pickle=False)[()]
        for name in CARD_NPY_FIELDS:
            np.testing.assert_equal(np.asarray(row[name]), npy[name], err_msg=name)
    assert "tracks_ref0" in reference_schema("tracking") and "tracks_ref0" in to_metric_reference(rows[0], "tracking")


READERS = ["tracking", "challenge", "runner"]


@pytest.fixture
def small(tmp_path):
    from perckit.samples import write_release
    from perckit.samples.syn4d_predictions import write_predictions

    fx = write_release("syn4d", tmp_path / "plain", variants=("og",), scenes=("dream",), cameras=(0,), write_video=False)
    return fx.root, write_predictions(fx, tmp_path / "preds")


def _read(reader, root, preds, cache, verify=False, strict=True):
    """What one reader of a release gives: a config's rows, or the file runner's report."""
    if reader == "runner":
        return runner.evaluate_release(preds, root, strict=strict, verify_checksums=verify, notice=lambda line: None)
    return [to_numpy_row(r) for r in build_split("syn4d", reader, root, cache, verify_checksums=verify)]


def _equal(got, want, nulls=()):
    if isinstance(want, dict):  # the runner's report
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
        return
    for g, w in zip(got, want, strict=True):
        assert set(g) == set(w)
        for k in g:
            if k in nulls:  # a null ArrayXD value reads as None, or NaN (datasets 3.6)
                assert (g[k] is None or np.ndim(g[k]) == 0 and np.isnan(g[k])) and np.ndim(w[k]) > 0, k
            else:
                np.testing.assert_equal(g[k], w[k], err_msg=k)


def _edited(small, tmp_path, path, content):
    root = tmp_path / "release"
    shutil.copytree(small[0], root)
    if callable(content):
        content(root / path)
    else:
        (root / path).write_text(content)
    return root


def _warns_once_and_reads(small, tmp_path, caplog, reader, path, content, nulls=(), verify=False):
    """The documented outcome "one warning naming the file, then ignored": the reader succeeds, with exactly one
    warning naming ``path``, and gives what it gives on the plain release (``nulls``: fields then null)."""
    root = _edited(small, tmp_path, path, content)
    with caplog.at_level(logging.WARNING):
        got = _read(reader, root, small[1], tmp_path / "c1", verify)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and str(root / path) in r.getMessage()]
    assert len(warned) == 1 and "ignored" in warned[0], warned
    _equal(got, _read(reader, small[0], small[1], tmp_path / "c2", verify), nulls)


def _line(small, **keys):
    return json.dumps({**json.loads((small[0] / INDEX).read_text()), **keys}) + "\n"


# ---------------------------------------------------------------- sequences.jsonl


@SHAPE
@pytest.mark.parametrize("reader", READERS)
def test_index_keys_of_another_shape_warn_once_and_the_cards_layout_is_read(small, tmp_path, caplog, reader, shape):
    """[inferred] keys of an index line (camera, depth_dir, camera_csv) of another shape, beside keys that are never
    read (frame_indices, variant, scene, sequence, width, height, ...): one warning naming the file for all."""
    keys = ("camera", "frame_indices", "depth_dir", "camera_csv", "variant", "scene", "sequence", "width", "height", "rgb_dir")
    _warns_once_and_reads(small, tmp_path, caplog, reader, INDEX, _line(small, **dict.fromkeys(keys, shape)))


@pytest.mark.parametrize("line, message", [
    ("[1, 2]", "expected a JSON object, got list"),
    ('{"x": 1}', "expected 'sequence_id'"),
    ('{"sequence_id": {"a": {"b": 1}}}', "expected 'sequence_id'"),
], ids=list(SHAPES))
@pytest.mark.parametrize("reader", READERS)
def test_an_index_line_without_a_sequence_is_the_documented_error(small, tmp_path, reader, line, message):
    """Required to build: the index is the list of the sequences read (the card names the file)."""
    root = _edited(small, tmp_path, INDEX, line + "\n")
    expect(lambda: _read(reader, root, small[1], tmp_path / "c"), ReleaseFormatError, r"sequences\.jsonl' line 1", message)


# ---------------------------------------------------------------- camera CSV and depth EXRs


#: the CSV's header a list of scalars, a header without the columns, a cell holding a nested object; a NaN pose
CSV_SHAPES = {"list-of-scalars": "1,2,3\n4,5,6\n", "object-without-the-keys": "frame,tx,ty,tz\nseq_000000_0_0000.png,1,2,3\n",
              "nested-object": lambda p: p.write_text(p.read_text().replace("\nseq_000000_0_0000.png,", '\nseq_000000_0_0000.png,"{""a"": {""b"": 1}}",', 1)),
              "nan-value": lambda p: p.write_text(p.read_text().replace("\nseq_000000_0_0006.png,", "\nseq_000000_0_0006.png,nan,", 1))}


def _exr(channels=(), rename=False):
    def edit(folder):
        import Imath
        import OpenEXR

        for p in sorted(folder.iterdir()):
            if rename:  # the 32 frames under other names
                p.rename(p.with_name(p.name.replace("_depth", "")))
                continue
            header = OpenEXR.Header(32, 18)
            header["channels"] = {c: Imath.Channel(Imath.PixelType(Imath.PixelType.FLOAT)) for c in channels}
            out = OpenEXR.OutputFile(str(p), header)
            out.writePixels({c: np.ones((18, 32), np.float32).tobytes() for c in channels})
            out.close()
    return edit


#: files named as a list of frames only, EXRs without the channels, channels nested in a layer
EXR_SHAPES = {"list-of-scalars": _exr(rename=True), "object-without-the-keys": _exr(("G", "B")), "nested-object": _exr(("depth.V", "depth.Z"))}


@pytest.mark.parametrize("path, content, nulls", [
    *[pytest.param(CSV, c, ("camera_c2w", "camera_unreal"), id=f"csv-{k}") for k, c in CSV_SHAPES.items()],
    *[pytest.param(DEPTH, c, ("depth_m",), id=f"exr-{k}") for k, c in EXR_SHAPES.items()],
])
def test_challenge_rows_of_a_camera_csv_or_depth_of_another_shape(small, tmp_path, caplog, path, content, nulls):
    """[inferred] camera CSV (columns, row names, values) and depth EXRs (file names, channels): the ``challenge``
    build (the one config that reads them) gives that sequence a null modality, with one warning naming the file."""
    _warns_once_and_reads(small, tmp_path, caplog, "challenge", path, content, nulls)


@pytest.mark.parametrize("path, content, task", [
    *[pytest.param(CSV, c, "pose", id=f"csv-{k}") for k, c in CSV_SHAPES.items()],
    *[pytest.param(DEPTH, c, "depth", id=f"exr-{k}") for k, c in EXR_SHAPES.items()],
])
def test_the_runner_cannot_score_a_task_without_its_ground_truth(small, tmp_path, path, content, task):
    """Required to score: the file runner's depth / pose task of that sequence is the documented error (strict),
    a failure of that task naming the file (lax); the other tasks are scored."""
    root = _edited(small, tmp_path, path, content)
    name = path.rsplit("/", 1)[-1].replace(".", r"\.")
    expect(lambda: _read("runner", root, small[1], None), ReleaseFormatError, name, find=lambda e: e.__cause__)  # TaskFailedError
    report = _read("runner", root, small[1], None, strict=False)
    assert [(f["sequence_id"], f["task"], f["reason"].split(":")[0]) for f in report["failures"]] == [(SEQ, task, "InferredShapeError")]
    assert str(root / path) in report["failures"][0]["reason"] and set(report["tasks"]) == {"tracking", "depth", "pose"} - {task}


# ---------------------------------------------------------------- SHA256SUMS and protocol.json


@SHAPE
@pytest.mark.parametrize("reader", READERS)
def test_checksum_lines_of_another_shape_warn_once_and_the_others_are_verified(small, tmp_path, caplog, reader, shape):
    """Lines perckit does not read (JSON here) are ignored with one warning, as ``sha256sum --check`` does."""
    content = lambda p: p.write_text(p.read_text() + json.dumps(shape) + "\n" + json.dumps([shape]) + "\n")
    _warns_once_and_reads(small, tmp_path, caplog, reader, SUMS, content, verify=None)
    npy = tmp_path / "release/benchmark/data/tracking_gt/og/dream/seq_000000_0.npy"
    npy.write_bytes(npy.read_bytes()[:-4] + b"\0\0\0\1")
    expect(lambda: _read(reader, tmp_path / "release", small[1], tmp_path / "c3", None), ReleaseFormatError, "SHA-256 mismatch")


@pytest.mark.parametrize("content", [
    "[1, 2]", '{"x": 1}', lambda p: p.write_text(p.read_text().replace('"thresholds_m": [', '"thresholds_m": {"a": {"b": 1}}, "was": [', 1)),
], ids=list(SHAPES))
def test_a_protocol_of_another_shape_warns_once_and_is_not_checked(small, tmp_path, caplog, content):
    """``protocol.json`` (runner only): a file that is not an object, or fields missing or of another type."""
    _warns_once_and_reads(small, tmp_path, caplog, "runner", PROTOCOL, content)
