"""The bad-input matrix of docs/errors.md, as tests: every builder and every metric.

Each case feeds one bad input to a builder (through ``build_split``: ``load_dataset`` on datasets 3.6,
the plain builder class on 5.x) or to a metric (through its ``evaluate`` module, or through its core
function where ``evaluate``'s own schema check would refuse the input first) and checks that

- the exception is one of the documented types of :mod:`perckit.errors` (an error raised while
  ``datasets`` generates rows arrives wrapped in its ``DatasetGenerationError``: the documented
  error must then be in the cause chain, and nothing else may escape);
- its message names the file or the field, and says what was expected.

Cases already covered by other test modules are not repeated; docs/errors.md lists them with their
test names. M4Seg is covered by tests/test_m4seg_errors.py.
"""

from __future__ import annotations

import io
import json
import logging
import math
import re
import shutil
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest
from helpers.bad_inputs import (DEEP_JSON, HUGE_INT_JSON, HUGE_RLE, NAN, NOT_UTF8, bomb_png, chain, copy_release, edit_json, expect,
                                 far_apart_polygon, png_bytes, put, truncate, unlink)
from helpers.common import REPO

from perckit import rle
from perckit.hf.entrypoints import build_split
from perckit.errors import (
    InputNotFoundError,
    OptionError,
    PredictionError,
    ReleaseFormatError,
    ReleaseNotFoundError,
    RLEError,
)
from perckit.samples import write_release


# ================================================================ builders


# ---------------------------------------------------------------- r4d_bench

R4D_GT = "scripts/new_predictions_ground_truth_all_queries.json"
R4D_GTP = "scripts/new_predictions_ground_truth_all_queries_with_paths.json"
R4D_META = "evaluation/R4D-Bench_queries.json"
R4D_TRACK = "evaluation/R4D-Bench_predictions.json"
R4D_COCO = "data/scenes/americano/_annotations.coco.json"
R4D_PNG = "data/scenes/americano/query_masks/frame_000000/americano_q1/americano_e001.png"


def _first_image(root: Path) -> str:
    coco = json.loads((root / R4D_COCO).read_text())
    return f"data/scenes/americano/images/{coco['images'][0]['file_name']}"


def _set_seg(query: int, seg, frame: int = 0, mask: int = 0, name: str = R4D_GT):
    def fn(d):
        d[query]["ground_truth"]["frames"][frame]["masks"][mask]["segmentation"] = seg
    return edit_json(name, fn)


def _set_first_seg(qid: str, seg):
    """The segmentation of the first mask of the first frame (with a mask) of query ``qid``."""
    def fn(d):
        entry = next(e for e in d if e["query_id"] == qid)
        frame = next(f for f in entry["ground_truth"]["frames"] if f["masks"])
        frame["masks"][0]["segmentation"] = seg
    return edit_json(R4D_GT, fn)


def _set_ann(key, value):
    def fn(d):
        d["annotations"][0][key] = value
    return edit_json(R4D_COCO, fn)


def _image_edit(kind):
    def edit(root):
        rel = _first_image(root)
        if kind == "unlink":
            unlink(rel)(root)
        elif kind == "garbage":
            put(rel, b"not an image at all")(root)
        else:
            truncate(rel)(root)
    return edit


R4D_CASES = [
    # id, config, edit, options, error, patterns
    ("queries-file-missing", "all_queries", unlink(R4D_META), {}, ReleaseNotFoundError, [r"R4D-Bench_queries\.json", "not found"]),
    ("queries-json-truncated", "all_queries", truncate(R4D_META), {}, ReleaseFormatError, [r"R4D-Bench_queries\.json", "expected valid JSON"]),
    ("queries-json-wrong-top-type", "all_queries", put(R4D_META, "42"), {}, ReleaseFormatError, [r"R4D-Bench_queries\.json", "expected a JSON array of queries"]),
    ("queries-track-ids-a-string", "all_queries", edit_json(R4D_META, lambda d: d[0].update(target_track_ids="1,2")), {},
     ReleaseFormatError, [r"americano_q1.*target_track_ids", "expected a list of track ids", "'1,2'"]),
    ("gt-not-utf8", "all_queries", put(R4D_GT, NOT_UTF8), {}, ReleaseFormatError, [r"new_predictions_ground_truth_all_queries\.json", "expected valid JSON"]),
    ("gt-nested-100000-deep", "all_queries", put(R4D_GT, DEEP_JSON), {}, ReleaseFormatError, [r"ground_truth_all_queries\.json", "expected valid JSON", "RecursionError"]),
    ("gt-integer-of-5000-digits", "all_queries", put(R4D_GT, HUGE_INT_JSON), {}, ReleaseFormatError, [r"ground_truth_all_queries\.json", "expected valid JSON", "digits"]),
    ("gt-frame-id-nan", "all_queries", edit_json(R4D_GT, lambda d: d[0]["ground_truth"]["frames"][0].update(frame_id=NAN)), {},
     ReleaseFormatError, [r"americano_q1.*frames\[0\]\.frame_id", "expected an integer", "nan"]),
    ("gt-existence-frames-strings", "all_queries", edit_json(R4D_GT, lambda d: d[0]["ground_truth"].update(existence_frames=["first"])), {},
     ReleaseFormatError, [r"americano_q1.*existence_frames", "expected an integer", "'first'"]),
    ("gt-rle-size-not-ints", "all_queries", _set_seg(0, {"size": ["24", "x"], "counts": "0"}), {},
     RLEError, [r"americano_q1.*frame 0.*masks\[0\]\.segmentation", r"expected 'size' = \[H, W\]", r"\['24', 'x'\]"]),
    ("gt-rle-size-disagrees-with-image", "all_queries", _set_seg(0, rle.empty(48, 64)), {},
     ReleaseFormatError, [r"americano_q1.*frame 0", r"RLE size \[48, 64\] differs from the frame size \[24, 32\]"]),
    ("gt-rle-huge-declared-size", "all_queries", chain(lambda root: shutil.rmtree(root / "data/scenes/espresso"), _set_first_seg("espresso_q1", HUGE_RLE)), {},
     RLEError, [r"espresso_q1.*frame \d+.*masks\[0\]\.segmentation", "exceeds the limit", "gigabytes"]),
    ("gt-rle-counts-not-ascii", "all_queries", _set_seg(0, {"size": [24, 32], "counts": "é"}), {},
     RLEError, [r"americano_q1.*segmentation", "ASCII"]),
    ("gt-polygon-far-apart-vertices", "all_queries", _set_seg(0, [far_apart_polygon(24, 32)]), {},
     RLEError, [r"americano_q1.*frame 0.*masks\[0\]\.segmentation", "expected polygons whose outline", "at most 65536 pixels long for a 24x32 image"]),
    ("track-gt-truncated", "all_queries", truncate(R4D_TRACK), {}, ReleaseFormatError, [r"R4D-Bench_predictions\.json", "expected valid JSON"]),
    ("track-gt-wrong-top-type", "all_queries", put(R4D_TRACK, "[1, 2]"), {}, ReleaseFormatError, [r"R4D-Bench_predictions\.json", "expected a JSON object"]),
    ("coco-json-truncated", "all_queries", truncate(R4D_COCO), {}, ReleaseFormatError, [r"_annotations\.coco\.json", "expected valid JSON"]),
    ("coco-images-not-a-list", "frames", edit_json(R4D_COCO, lambda d: d.update(images={})), {}, ReleaseFormatError, [r"_annotations\.coco\.json", "'images' list"]),
    ("coco-image-without-height", "frames", edit_json(R4D_COCO, lambda d: d["images"][0].pop("height")), {},
     ReleaseFormatError, [r"_annotations\.coco\.json.*images\[0\]", "expected int 'id', 'height' and 'width'"]),
    ("coco-annotations-not-a-list", "frames", edit_json(R4D_COCO, lambda d: d.update(annotations=5)), {},
     ReleaseFormatError, [r"_annotations\.coco\.json", "'annotations' to be a list"]),
    ("coco-annotation-id-a-word", "frames", _set_ann("id", "one"), {}, ReleaseFormatError, [r"_annotations\.coco\.json.*'id'", "expected an integer", "'one'"]),
    ("coco-bbox-strings", "frames", _set_ann("bbox", ["x", 1, 2, 3]), {}, ReleaseFormatError, [r"annotation 1\.bbox", "expected numbers"]),
    ("coco-polygon-nan", "frames", _set_ann("segmentation", [[0, 0, NAN, 0, 4, 4]]), {}, RLEError, [r"annotation 1\.segmentation", "NaN or infinite"]),
    ("coco-polygon-vertex-far-outside", "frames", _set_ann("segmentation", [[0, 0, 1e9, 0, 1e9, 1e9]]), {},
     RLEError, [r"annotation 1\.segmentation", "far outside the 24x32 image", r"x in \[-32, 64\]"]),
    ("coco-rle-huge-declared-size", "frames", _set_ann("segmentation", HUGE_RLE), {}, RLEError, [r"annotation 1\.segmentation", "exceeds the limit"]),
    ("coco-polygon-far-apart-vertices", "frames", _set_ann("segmentation", [far_apart_polygon(24, 32)]), {},
     RLEError, [r"annotation 1\.segmentation", "expected polygons whose outline", "at most 65536 pixels long for a 24x32 image"]),
    ("frame-image-missing", "frames", _image_edit("unlink"), {}, ReleaseNotFoundError, [r"image file .*\.jpg", "not found"]),
    ("frame-image-truncated", "frames", _image_edit("truncate"), {}, ReleaseFormatError, [r"image file .*\.jpg", "expected a complete JPEG, got a truncated one"]),
    ("frame-image-not-an-image", "frames", _image_edit("garbage"), {}, ReleaseFormatError, [r"image file .*\.jpg", "expected a readable image"]),
    ("mask-png-missing", "all_queries", unlink(R4D_PNG), {"mask_source": "mask_image"}, ReleaseNotFoundError, [r"americano_e001\.png", "not found"]),
    ("mask-png-truncated", "all_queries", truncate(R4D_PNG), {"mask_source": "mask_image"}, ReleaseFormatError, [r"cannot open mask PNG .*americano_e001\.png"]),
    ("mask-png-decompression-bomb", "all_queries", put(R4D_PNG, bomb_png()), {"mask_source": "mask_image"},
     ReleaseFormatError, [r"cannot open mask PNG .*americano_e001\.png", "decompression bomb"]),
]


@pytest.fixture(scope="module")
def r4d_small(tmp_path_factory):
    return write_release("r4d_bench", tmp_path_factory.mktemp("r4d_small"), queries_per_scene={"americano": 3, "espresso": 2}).root


@pytest.mark.parametrize("config, edit, options, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in R4D_CASES])
def test_r4d_bench_builder(r4d_small, tmp_path, config, edit, options, error, patterns):
    root = copy_release(r4d_small, tmp_path)
    edit(root)
    expect(lambda: build_split("r4d_bench", config, root, tmp_path / "cache", **options), error, *patterns)


def test_r4d_bench_non_string_texts_are_kept_as_json_text(r4d_small, tmp_path):
    root = copy_release(r4d_small, tmp_path)
    edit_json(R4D_META, lambda d: d[0].update(text_en=5, text_zh=["a", "b"]))(root)
    row = build_split("r4d_bench", "all_queries", root, tmp_path / "cache")[0]
    assert (row["query_id"], row["text_en"], row["text_zh"]) == ("americano_q1", "5", '["a", "b"]')


# ---------------------------------------------------------------- syn4d

S4_NPY = "benchmark/data/tracking_gt/og/dream/seq_000000_0.npy"
S4_INDEX = "benchmark/sequences.jsonl"
S4_SUMS = "benchmark/SHA256SUMS"
S4_EXR = "challenge_eval/og/dream/exr_layers/depth/seq_000000_0/seq_000000_0_0000_depth.exr"
S4_CSV = "challenge_eval/og/dream/ground_truth/meta_exr_csv/seq_000000_0_camera.csv"


def _npy_header(shape, descr="<f4") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _npy_field_as_strings(field: str):
    def edit(root):
        p = root / S4_NPY
        rec = np.load(p, allow_pickle=False)
        dtype = [(n, ("<U4", rec.dtype[n].shape) if n == field else rec.dtype[n]) for n in rec.dtype.names]
        out = np.zeros((), dtype=dtype)
        for n in rec.dtype.names:
            out[n] = rec[n].astype(str) if n == field else rec[n]
        np.save(p, out, allow_pickle=False)
    return edit


def _npz_in_place_of_npy(root):
    with open(root / S4_NPY, "wb") as f:
        np.savez(f, tracks_ref0=np.zeros((32, 4, 3)))


def _exr_window(width: int, height: int):
    def edit(root):
        p = root / S4_EXR
        b = bytearray(p.read_bytes())
        for key in (b"dataWindow", b"displayWindow"):
            i = b.find(key) + len(key) + 1 + len(b"box2i") + 1 + 4  # name\0 type\0 size
            b[i : i + 16] = struct.pack("<iiii", 0, 0, width - 1, height - 1)
        p.write_bytes(bytes(b))
    return edit


def _csv_edit(fn):
    def edit(root):
        p = root / S4_CSV
        p.write_text(fn(p.read_text()))
    return edit


SYN4D_CASES = [
    ("npy-missing", "tracking", unlink(S4_NPY), {}, ReleaseNotFoundError, ["tracking NPY", "missing", "og/dream/seq_000000_0"]),
    ("npy-truncated", "tracking", truncate(S4_NPY), {}, ReleaseFormatError, [r"seq_000000_0\.npy", "truncated", "the file holds"]),
    ("npy-random-bytes", "tracking", put(S4_NPY, b"\x00garbage" * 40), {}, ReleaseFormatError, [r"seq_000000_0\.npy", "expected a NumPy .npy array"]),
    ("npy-huge-declared-shape", "tracking", put(S4_NPY, _npy_header((10**6, 10**6, 3)) + b"\0" * 64), {},
     ReleaseFormatError, [r"seq_000000_0\.npy", r"declares shape \(1000000, 1000000, 3\)", "more than the limit"]),
    ("npy-is-an-npz", "tracking", _npz_in_place_of_npy, {}, ReleaseFormatError, [r"seq_000000_0\.npy", "expected a NumPy .npy array"]),
    ("npy-tracks-as-strings", "tracking", _npy_field_as_strings("tracks_ref0"), {}, ReleaseFormatError, [r"seq_000000_0\.npy", "tracks_ref0 to be numeric"]),
    ("index-line-truncated", "tracking", truncate(S4_INDEX, 0.6), {}, ReleaseFormatError, [r"sequences\.jsonl' line 1", "expected a JSON object"]),
    ("index-nested-100000-deep", "tracking", put(S4_INDEX, DEEP_JSON), {}, ReleaseFormatError, [r"sequences\.jsonl' line 1", "RecursionError"]),
    ("index-integer-of-5000-digits", "tracking", put(S4_INDEX, HUGE_INT_JSON), {}, ReleaseFormatError, [r"sequences\.jsonl' line 1", "digits"]),
    ("index-not-utf8", "tracking", put(S4_INDEX, NOT_UTF8), {}, ReleaseFormatError, [r"sequences\.jsonl", "UTF-8"]),
    ("exr-truncated", "challenge", truncate(S4_EXR, 0.9), {}, ReleaseFormatError, [r"seq_000000_0_0000_depth\.exr", "cannot read channel 'Depth'"]),
    ("exr-huge-data-window", "challenge", _exr_window(200_000, 200_000), {}, ReleaseFormatError, [r"_0000_depth\.exr", "dataWindow declares 200000 x 200000", "at most"]),
    ("csv-not-utf8", "challenge", put(S4_CSV, b"name,x,y,z,yaw,pitch,roll\n" + NOT_UTF8), {}, ReleaseFormatError, [r"_camera\.csv", "UTF-8"]),
    ("csv-field-over-131072-chars", "challenge", _csv_edit(lambda t: t + "x" * 200_000 + "\n"), {}, ReleaseFormatError, [r"_camera\.csv", "parse error", "field larger than field limit"]),
    ("checksums-not-utf8", "tracking", put(S4_SUMS, NOT_UTF8), {"verify_checksums": None}, ReleaseFormatError, ["SHA256SUMS", "UTF-8"]),
    ("checksums-required-but-absent", "tracking", unlink(S4_SUMS), {"verify_checksums": True}, ReleaseNotFoundError, ["verify_checksums=True", r"SHA256SUMS.*does not exist"]),
]


@pytest.fixture(scope="module")
def syn4d_small(tmp_path_factory):
    return write_release("syn4d", tmp_path_factory.mktemp("syn4d_small"), variants=("og",), scenes=("dream",), cameras=(0,), write_video=False).root


@pytest.mark.parametrize("config, edit, options, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in SYN4D_CASES])
def test_syn4d_builder(syn4d_small, tmp_path, config, edit, options, error, patterns):
    root = copy_release(syn4d_small, tmp_path)
    edit(root)
    options = {"verify_checksums": False, **options}
    if options["verify_checksums"] is None:
        options.pop("verify_checksums")
    expect(lambda: build_split("syn4d", config, root, tmp_path / "cache", **options), error, *patterns)


# ---------------------------------------------------------------- refcoco_m

RCM_SHARD = "data/validation-00000-of-00001.parquet"


def _rcm_rows(fn, schema_free: bool = False):
    """Edit the rows of the one shard; ``schema_free`` writes them with an inferred Arrow schema."""
    def edit(root):
        import pyarrow as pa
        import pyarrow.parquet as pq

        from helpers.refcoco_m import read_shard
        from perckit.samples import refcoco_m as fx

        rows = read_shard(root / RCM_SHARD)
        fn(rows)
        if schema_free:
            pq.write_table(pa.Table.from_pylist(rows), root / RCM_SHARD)
        else:
            fx.write_shard(root / RCM_SHARD, rows)
    return edit


def _zero_data_pages(root):
    """Keep the magic and the footer; zero every byte in between (page headers and data)."""
    p = root / RCM_SHARD
    b = bytearray(p.read_bytes())
    footer = struct.unpack("<I", b[-8:-4])[0] + 8
    b[4 : len(b) - footer] = bytes(len(b) - footer - 4)
    p.write_bytes(bytes(b))


def _set_image(data: bytes):
    return _rcm_rows(lambda rows: rows[0].update(image={"bytes": data, "path": rows[0]["image"]["path"]}))


def _truncated_image(rows):
    data = rows[0]["image"]["bytes"]
    rows[0]["image"] = {"bytes": data[: len(data) // 2], "path": rows[0]["image"]["path"]}


REFCOCO_CASES = [
    ("shard-truncated", truncate(RCM_SHARD), ReleaseFormatError, [r"validation-00000-of-00001\.parquet", "not a readable Parquet file"]),
    ("shard-data-pages-zeroed", _zero_data_pages, ReleaseFormatError, [r"validation-00000-of-00001\.parquet", "cannot be read", "corrupt or truncated Parquet data"]),
    ("mask-rle-huge-declared-size", _rcm_rows(lambda rows: rows[0]["samples"][0].update(mask=dict(HUGE_RLE))),
     RLEError, [r"validation-00000-of-00001\.parquet: row 0 \(image_id \d+\): sample 0 \(id \d+\): mask", "exceeds the limit"]),
    ("image-truncated", _rcm_rows(_truncated_image), ReleaseFormatError, [r"row 0 \(image_id \d+\)", "cannot open the embedded image", "expected a complete JPEG, got a truncated one"]),
    ("image-decompression-bomb", _set_image(bomb_png()), ReleaseFormatError, [r"row 0 \(image_id \d+\)", "cannot open the embedded image", "decompression bomb"]),
    ("image-id-a-string-column", _rcm_rows(lambda rows: [r.update(image_id=str(r["image_id"])) for r in rows], schema_free=True),
     ReleaseFormatError, [r"row 0: 'image_id'", "expected an integer"]),
    ("category-an-int-column", _rcm_rows(lambda rows: [s.update(category=7) for r in rows for s in r["samples"]], schema_free=True),
     ReleaseFormatError, [r"row 0 \(image_id \d+\): sample 0 \(id \d+\): 'category'", "expected a string"]),
]


@pytest.fixture(scope="module")
def refcoco_small(tmp_path_factory):
    return write_release("refcoco_m", tmp_path_factory.mktemp("refcoco_small"), num_images=4, shards=1).root


@pytest.mark.parametrize("edit, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in REFCOCO_CASES])
def test_refcoco_m_builder(refcoco_small, tmp_path, edit, error, patterns):
    root = copy_release(refcoco_small, tmp_path)
    edit(root)
    expect(lambda: build_split("refcoco_m", "expressions", root, tmp_path / "cache", split="validation"), error, *patterns)


# ---------------------------------------------------------------- reason_av_edit

RAV_CSV = "metadata.csv"


def _rewrite_member(tar_rel: str, member: str, data: bytes):
    def edit(root):
        path = root / tar_rel
        members = []
        with tarfile.open(path) as tar:
            for m in tar.getmembers():
                members.append((m.name, data if m.name == member else tar.extractfile(m).read()))
        with tarfile.open(path, "w") as tar:
            for name, blob in members:
                info = tarfile.TarInfo(name)
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
    return edit


def _truncated_member(tar_rel: str, member: str):
    def edit(root):
        with tarfile.open(root / tar_rel) as tar:
            data = tar.extractfile(member).read()
        _rewrite_member(tar_rel, member, data[: len(data) // 2])(root)
    return edit


def _csv_text(fn):
    def edit(root):
        p = root / RAV_CSV
        p.write_text(fn(p.read_text(encoding="utf-8")), encoding="utf-8")
    return edit


def _csv_cut_last_row(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    return "\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 3] + "\n"


def _csv_add_column(name: str, value: str):
    def fn(text: str) -> str:
        lines = text.rstrip("\n").split("\n")
        return "\n".join([lines[0] + f",{name}"] + [line + f",{value}" for line in lines[1:]]) + "\n"
    return fn


def _csv_long_instruction(text: str) -> str:
    lines = text.split("\n")
    lines[1] = lines[1].replace("Replace the", "Replace " + "very " * 40_000 + "the", 1)
    return "\n".join(lines)


RAV_CASES = [
    ("csv-cut-mid-row", _csv_text(_csv_cut_last_row), ReleaseFormatError, [r"metadata\.csv line 3", "expected 13 fields like the header"]),
    ("csv-not-utf8", put(RAV_CSV, NOT_UTF8), ReleaseFormatError, [r"metadata\.csv", "expected UTF-8 text"]),
    ("csv-field-over-131072-chars", _csv_text(_csv_long_instruction), ReleaseFormatError, [r"metadata\.csv", "expected CSV", "field larger than field limit"]),
    ("annotation-nested-100000-deep", put("annotations/w1_0000.json", DEEP_JSON), ReleaseFormatError, [r"w1_0000\.json", "expected valid JSON", "RecursionError"]),
    ("annotation-integer-of-5000-digits", put("annotations/w1_0000.json", HUGE_INT_JSON), ReleaseFormatError, [r"w1_0000\.json", "expected valid JSON", "digits"]),
    ("annotation-not-utf8", put("annotations/w1_0000.json", NOT_UTF8), ReleaseFormatError, [r"w1_0000\.json", "expected UTF-8 JSON"]),
    ("tar-random-bytes", put("archives/masks.tar", b"\x01garbage" * 200), ReleaseFormatError, [r"archive 'archives/masks\.tar' is truncated or corrupt"]),
    ("mask-png-truncated", _truncated_member("archives/reason_visual_mask.tar", "reason_visual_mask/w1_0000.png"),
     ReleaseFormatError, [r"reason_visual_mask/w1_0000\.png.*sample 'w1_0000'.*column 'reason_visual_mask'", "expected a readable mask image", "truncated"]),
    ("mask-png-decompression-bomb", _rewrite_member("archives/reason_visual_mask.tar", "reason_visual_mask/w1_0000.png", bomb_png()),
     ReleaseFormatError, [r"reason_visual_mask/w1_0000\.png", "expected a readable mask image", "decompression bomb"]),
]


@pytest.fixture(scope="module")
def rav_small(tmp_path_factory):
    return write_release("reason_av_edit", tmp_path_factory.mktemp("rav_small"), sub_tracks=("W1", "T1")).root


@pytest.mark.parametrize("edit, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in RAV_CASES])
def test_reason_av_edit_builder(rav_small, tmp_path, edit, error, patterns):
    root = copy_release(rav_small, tmp_path)
    edit(root)
    expect(lambda: build_split("reason_av_edit", "default", root, tmp_path / "cache"), error, *patterns)


#: [inferred] ReasonAVEdit readings (the card names neither the annotation JSON's keys nor these CSV columns), each in
#: unexpected shapes: a list of scalars, an object without the keys, a nested object, and values of another type.
#: Each is one warning naming the file (and line / column), then ignored: the build succeeds.
RAV_INFERRED = {
    "annotation-a-list-of-scalars": ("annotations/t1_0000.json", put("annotations/t1_0000.json", "[1, 2]")),
    "annotation-an-object-without-the-keys": ("annotations/t1_0000.json", put("annotations/t1_0000.json", '{"foo": 1}')),
    "annotation-a-nested-object": ("annotations/t1_0000.json",
                                   edit_json("annotations/t1_0000.json", lambda d: d.update(edit_window_s={"start": 0.1, "end": 0.5}))),
    "annotation-window-nan": ("annotations/t1_0000.json", edit_json("annotations/t1_0000.json", lambda d: d.update(edit_window_s=[NAN, 0.5]))),
    "annotation-anchor-frame-a-word": ("annotations/t1_0000.json", edit_json("annotations/t1_0000.json", lambda d: d.update(anchor_frame="eleven"))),
    "csv-fps-a-list-of-scalars": ("column 'fps'", _csv_text(_csv_add_column("fps", '"[25, 30]"'))),
    "csv-fps-an-object-without-the-keys": ("column 'fps'", _csv_text(_csv_add_column("fps", '"{}"'))),
    "csv-fps-a-nested-object": ("column 'fps'", _csv_text(_csv_add_column("fps", '"{""a"": {""b"": 1}}"'))),
    "csv-fps-nan": ("column 'fps'", _csv_text(_csv_add_column("fps", "nan"))),
    "csv-num-frames-inf": ("column 'num_frames'", _csv_text(_csv_add_column("num_frames", "inf"))),
    "csv-num-frames-a-list-of-scalars": ("column 'num_frames'", _csv_text(_csv_add_column("num_frames", '"[1, 2]"'))),
    "csv-num-frames-an-object-without-the-keys": ("column 'num_frames'", _csv_text(_csv_add_column("num_frames", '"{}"'))),
    "csv-num-frames-a-nested-object": ("column 'num_frames'", _csv_text(_csv_add_column("num_frames", '"{""a"": [1]}"'))),
}


@pytest.mark.parametrize("named, edit", list(RAV_INFERRED.values()), ids=list(RAV_INFERRED))
def test_reason_av_edit_inferred_readings_warn_and_are_ignored(rav_small, tmp_path, caplog, named, edit):
    root = copy_release(rav_small, tmp_path)
    edit(root)
    with caplog.at_level(logging.WARNING, logger="perckit"):
        rows = build_split("reason_av_edit", "default", root, tmp_path / "cache").to_list()
    plain = {r["sample_id"]: r for r in build_split("reason_av_edit", "default", rav_small, tmp_path / "plain").to_list()}
    warned = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage() and named in r.getMessage()]
    assert len(warned) == 1, warned
    if named.startswith("column"):  # metadata.csv: the first ignored cell named, the rows as without the column
        assert "metadata.csv line 2" in warned[0] and "(and 1 more cells like it)" in warned[0], warned
        assert rows == list(plain.values())
        return
    for r in rows:
        if r["sample_id"] == "t1_0000":
            assert r["edit_window_s"] is r["anchor_frame"] is r["edit_window_frames"] is None  # the annotation ignored
        else:
            assert r == plain[r["sample_id"]]


def test_reason_av_edit_extract_archives_truncated_tar(rav_small, tmp_path):
    from perckit.reason_av_edit.read.archives import extract_archives

    root = copy_release(rav_small, tmp_path)
    truncate("archives/videos.tar", 0.3)(root)
    expect(lambda: extract_archives(root, tmp_path / "out"), ReleaseFormatError, r"archive 'archives/videos\.tar'", "truncated")


# ================================================================ metrics


def _evaluate(name: str, config: str | None = None):
    import evaluate

    return evaluate.load(str(REPO / "metrics" / name), config)


# ---------------------------------------------------------------- mask_temporal

MT_REF = {
    "query_id": "q", "scene": "s", "query_type": "A", "is_negative": False,
    "frames": [{"frame_id": 1, "mask": {"size": [1, 4], "counts": "022"}}],
    "evaluated_frame_ids": [1], "scene_frame_ids": [1],
}


def mt_pred(mask, qid="q", frame_id=1):
    return {"query_id": qid, "frames": [{"frame_id": frame_id, "mask": mask}]}


MASK_TEMPORAL_CASES = [
    # id, through evaluate?, predictions, error, patterns
    ("counts-outside-the-alphabet", True, [mt_pred({"size": [1, 4], "counts": "0~~"})], PredictionError, [r"prediction query 'q': frame 1 mask", "outside the COCO alphabet"]),
    ("counts-truncated", True, [mt_pred({"size": [1, 4], "counts": "0P"})], PredictionError, [r"prediction query 'q': frame 1 mask", "truncated"]),
    ("rle-huge-declared-size", True, [mt_pred(dict(HUGE_RLE))], PredictionError, [r"frame 1 mask", "exceeds the limit"]),
    ("rle-size-of-three", True, [mt_pred({"size": [1, 4, 1], "counts": "04"})], PredictionError, [r"frame 1 mask", r"expected 'size' = \[H, W\]"]),
    ("rle-size-negative", True, [mt_pred({"size": [-1, 4], "counts": "04"})], PredictionError, [r"frame 1 mask", "two positive ints"]),
    ("frame-id-nan", False, [{"query_id": "q", "frames": [{"frame_id": NAN, "mask": MT_REF["frames"][0]["mask"]}]}],
     PredictionError, [r"prediction query 'q': frames\[0\]\.frame_id", "expected an integer", "nan"]),
    ("frames-not-a-list", False, [{"query_id": "q", "frames": 5}], PredictionError, [r"prediction query 'q'", "'frames' to be a list"]),
    ("mask-a-string", False, [mt_pred("022")], PredictionError, [r"frame 1 mask", "expected an RLE dict, polygons or a 2-D array, got str"]),
    ("row-not-a-dict", False, [["q"]], PredictionError, [r"predictions\[0\]", "string 'query_id'"]),
]


@pytest.mark.parametrize("via_evaluate, preds, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in MASK_TEMPORAL_CASES])
def test_mask_temporal_metric(mask_metric, via_evaluate, preds, error, patterns):
    from perckit.r4d_bench import metric as core

    fn = (lambda: mask_metric.compute(predictions=preds, references=[MT_REF])) if via_evaluate else (lambda: core.mask_temporal(preds, [MT_REF]))
    expect(fn, error, *patterns)


# ---------------------------------------------------------------- track_id

TID_REF = {"query_id": "q", "scene": "s", "target_track_ids": ["1"]}

TRACK_ID_CASES = [
    # through evaluate, predictions and references must be as many (evaluate's rule): two of each here
    ("unknown-id", True, [{"query_id": "q", "target_track_ids": ["1"]}, {"query_id": "zz", "target_track_ids": []}],
     PredictionError, ["query_id 'zz' is unknown to the references"]),
    ("duplicate-id", True, [{"query_id": "q", "target_track_ids": ["1"]}] * 2, PredictionError, ["predictions: duplicate query_id 'q'"]),
    ("ids-a-string", False, [{"query_id": "q", "target_track_ids": "12"}], PredictionError, [r"prediction query 'q': target_track_ids", "expected a list of track ids"]),
    ("id-nan", False, [{"query_id": "q", "target_track_ids": [NAN]}], PredictionError, [r"target_track_ids\[0\]", "expected a track id", "nan"]),
    ("id-nested-list", False, [{"query_id": "q", "target_track_ids": [["1"]]}], PredictionError, [r"target_track_ids\[0\]", "expected a track id"]),
    ("id-a-bool", False, [{"query_id": "q", "target_track_ids": [True]}], PredictionError, [r"target_track_ids\[0\]", "expected a track id", "True"]),
]
TID_REFS = [TID_REF, {**TID_REF, "query_id": "r", "target_track_ids": []}]


@pytest.mark.parametrize("via_evaluate, preds, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in TRACK_ID_CASES])
def test_track_id_metric(track_metric, via_evaluate, preds, error, patterns):
    from perckit.r4d_bench import metric as core

    refs = TID_REFS[: len(preds)]
    fn = (lambda: track_metric.compute(predictions=preds, references=refs)) if via_evaluate else (lambda: core.track_id(preds, refs))
    expect(fn, error, *patterns)


# ---------------------------------------------------------------- syn4d

_GT = np.random.default_rng(0).normal(size=(3, 4, 3)) + np.array([0.0, 0.0, 5.0])
S4_REF = {
    "sequence_id": "og/dream/a", "variant": "og", "scene": "dream", "frame_indices": [0, 6, 12],
    "tracks_ref0": _GT.tolist(), "visibility": [[True] * 4] * 3, "dynamic": [True, False, True, False],
}


def s4_pred(tracking):
    return {"sequence_id": "og/dream/a", "tracking_xyz": tracking, "depth": None, "camera_c2w": None, "frame_indices": [0, 6, 12]}


SYN4D_METRIC_CASES = [
    # id, through evaluate?, tracking_xyz, the strict RuntimeError's cause, the lax failure reason
    ("all-nan", True, np.full((3, 4, 3), NAN).tolist(), ValueError, r"^ValueError: sequence has no finite valid tracking correspondences$"),
    ("all-inf", True, np.full((3, 4, 3), np.inf).tolist(), ValueError, r"no finite valid tracking correspondences"),
    ("wrong-shape", True, np.zeros((3, 4, 2)).tolist(), ValueError, r"^ValueError: tracking arrays must match \[T,Q,3\], got \(3, 4, 3\) and \(3, 4, 2\)$"),
    ("strings", False, [[["a", "b", "c"]] * 4] * 3, ValueError, r"^ValueError: prediction 'tracking_xyz': expected a numeric array"),
    ("ragged", False, [[[1.0, 2.0, 3.0]], [[1.0, 2.0]]], ValueError, r"^ValueError: prediction 'tracking_xyz': expected a numeric array"),
]


@pytest.fixture(scope="module")
def syn4d_tracking_metric():
    return _evaluate("syn4d", "tracking")


@pytest.mark.parametrize("via_evaluate, tracking, cause, reason", [pytest.param(*c[1:], id=c[0]) for c in SYN4D_METRIC_CASES])
def test_syn4d_metric(syn4d_tracking_metric, via_evaluate, tracking, cause, reason):
    """Strict mode (the default, the official ``--strict``) raises the official ``RuntimeError("<id> <task> failed")``
    whose ``__cause__`` names the field and the problem; lax mode records that text as the failure reason."""
    from perckit.syn4d import metric as core

    def run(strict):
        if via_evaluate:
            return syn4d_tracking_metric.compute(predictions=[s4_pred(tracking)], references=[S4_REF], strict=strict)
        return core.compute_task([s4_pred(tracking)], [S4_REF], "tracking", core.Syn4DOptions(strict=strict))

    with pytest.raises(RuntimeError, match=r"^og/dream/a tracking failed$") as info:
        run(True)
    assert isinstance(info.value.__cause__, cause)
    assert re.search(reason, core.failure_reason(info.value.__cause__))
    out = run(False)
    assert out["overall"]["num_sequences"] == 0
    [failure] = out["failures"]
    assert failure["sequence_id"] == "og/dream/a" and failure["task"] == "tracking" and re.search(reason, failure["reason"])


def test_syn4d_metric_non_finite_points_are_left_out(syn4d_tracking_metric):
    pred = (_GT * 2).copy()
    pred[0, 0] = np.inf
    pred[1, 2, 1] = NAN
    from perckit.syn4d.metric import LowCoverageWarning

    with pytest.warns(LowCoverageWarning, match=r"10 of 12 GT-valid points scored"):  # left out, and said so
        out = syn4d_tracking_metric.compute(predictions=[s4_pred(pred.tolist())], references=[S4_REF])
    assert out["overall"]["count"] == 10 and out["overall"]["acc_0.1m"] == 1.0 and out["failures"] == []


# ---------------------------------------------------------------- refer_iou

RI_REF = {"expression_id": "e1", "mask": {"size": [2, 3], "counts": "033"}, "category": "dog", "supercategory": "animal"}

REFER_IOU_CASES = [
    ("counts-empty", True, {"size": [2, 3], "counts": ""}, RLEError, [r"expression 'e1': predicted mask", "'counts' is empty"]),
    ("counts-run-misread-by-pycocotools", True, {"size": [2, 3], "counts": "P" * 6 + "2"}, RLEError, [r"expression 'e1': predicted mask", "7-character run"]),
    ("rle-huge-declared-size", True, dict(HUGE_RLE), RLEError, [r"expression 'e1': predicted mask", "exceeds the limit"]),
    ("rle-size-negative", True, {"size": [-2, 3], "counts": "033"}, RLEError, [r"predicted mask", "two positive ints"]),
    ("rle-size-nan", False, {"size": [NAN, 3], "counts": "033"}, RLEError, [r"predicted mask", r"expected 'size' = \[H, W\]"]),
    ("mask-a-string", False, "033", RLEError, [r"predicted mask", "expected an RLE dict"]),
    ("mask-a-3d-array", False, np.zeros((2, 3, 1), dtype=bool), RLEError, ["expected a 2-D array"]),
]


@pytest.fixture(scope="module")
def refer_metric():
    return _evaluate("refer_iou")


@pytest.mark.parametrize("via_evaluate, mask, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in REFER_IOU_CASES])
def test_refer_iou_metric(refer_metric, via_evaluate, mask, error, patterns):
    from perckit.refcoco_m import metric as core

    preds = [{"expression_id": "e1", "mask": mask}]
    fn = (lambda: refer_metric.compute(predictions=preds, references=[RI_REF])) if via_evaluate else (lambda: core.refer_iou(preds, [RI_REF]))
    expect(fn, error, *patterns)


# ---------------------------------------------------------------- av_reasoning


def _wav(x, sr=16000, subtype="FLOAT") -> bytes:
    from perckit.reason_av_edit.features import encode_wav

    return encode_wav(np.asarray(x, dtype=np.float64), sr, subtype=subtype)


def _sine(seconds=1.0, sr=16000):
    t = np.arange(int(seconds * sr)) / sr
    return 0.5 * np.sin(2 * np.pi * 440 * t)


def _mp4(total=10):
    from perckit.samples.reason_av_edit import encode_mp4

    frames = np.zeros((total, 32, 32, 3), dtype=np.uint8)
    frames[3, 8:24, 8:24] = 255
    return encode_mp4(frames, lossless=True)


def av_ref(**kw):
    from perckit.reason_av_edit import features as feats

    out = {
        "sample_id": "s", "category": "where_only", "sub_track": "W1_same_class_pair", "language": "zh", "orientation": "landscape",
        "anchor_mask": {"size": [2, 4], "counts": "242"}, "reason_audio": dict(feats.NOT_PROVIDED_MEDIA),
        "mask_video": dict(feats.NOT_PROVIDED_MEDIA), "edit_window_s": [0.1, 0.5], "edit_window_frames": None,
        "fps": 25.0, "num_frames": 17, "selected_instance_index": 1,
    }
    out.update(kw)
    return out


def av_pred(**kw):
    from perckit.reason_av_edit import features as feats

    out = feats.make_prediction("s")
    out.update(kw)
    return out


def _bytes(data):
    return {"bytes": data, "path": ""}


AV_CASES = [
    # id, through evaluate?, prediction (a callable: media are made lazily), reference, error, patterns
    ("window-nan", True, lambda: av_pred(edit_window_s=[NAN, 0.5]), av_ref, PredictionError, [r"prediction sample 's': edit_window_s", "expected finite numbers"]),
    ("window-inf", True, lambda: av_pred(edit_window_s=[0.1, math.inf]), av_ref, PredictionError, [r"prediction sample 's': edit_window_s", "expected finite numbers"]),
    ("window-of-three", True, lambda: av_pred(edit_window_s=[0.1, 0.2, 0.3]), av_ref, PredictionError, [r"edit_window_s", r"expected a \[start, end\) pair"]),
    ("window-a-number", False, lambda: av_pred(edit_window_s=0.5), av_ref, PredictionError, [r"edit_window_s", r"expected a \[start, end\) pair"]),
    ("anchor-mask-huge-declared-size", True, lambda: av_pred(anchor_mask=dict(HUGE_RLE)), av_ref, RLEError, [r"prediction sample 's': anchor_mask", "exceeds the limit"]),
    ("anchor-mask-counts-malformed", True, lambda: av_pred(anchor_mask={"size": [2, 4], "counts": "5"}), av_ref, RLEError, [r"anchor_mask", "sum to 5"]),
    ("wav-truncated-inside-header", True, lambda: av_pred(reason_audio=_bytes(_wav(_sine())[:30])), av_ref, PredictionError, [r"prediction sample 's': reason_audio", "expected a decodable WAV"]),
    ("wav-nan-samples", True, lambda: av_pred(reason_audio=_bytes(_wav(np.where(np.arange(16000) == 99, NAN, _sine())))), av_ref,
     PredictionError, [r"prediction sample 's': reason_audio", "expected finite samples", "sample 99"]),
    ("wav-1-hz-rate", True, lambda: av_pred(reason_audio=_bytes(_wav(np.zeros(2000), sr=1, subtype="PCM_16"))), av_ref,
     PredictionError, [r"reason_audio", "2000 samples at 1 Hz", "more than the limit of 600 s"]),
    ("mp4-truncated", True, lambda: av_pred(mask_video=_bytes(_mp4()[:600])), lambda: av_ref(category="when_only", mask_video=_bytes(_mp4()), num_frames=10),
     PredictionError, [r"prediction sample 's': mask_video", "cannot be opened"]),
    ("reference-wav-truncated", True, lambda: av_pred(), lambda: av_ref(reason_audio=_bytes(_wav(_sine())[:30])), PredictionError, [r"reference sample 's': reason_audio", "decodable WAV"]),
    ("reference-fps-nan", False, lambda: av_pred(edit_window_s=[0.1, 0.5]), lambda: av_ref(fps=NAN, edit_window_s=None), PredictionError, ["reference sample 's'", "finite fps"]),
    ("instance-index-a-string", False, lambda: av_pred(selected_instance_index="1"), av_ref, PredictionError, [r"prediction sample 's': selected_instance_index", "expected an integer or null", "'1'"]),
    ("media-a-string", False, lambda: av_pred(reason_audio="a.wav"), av_ref, PredictionError, [r"prediction sample 's': reason_audio", r"expected a media value"]),
]


@pytest.fixture(scope="module")
def av_metric():
    return _evaluate("av_reasoning")


@pytest.mark.parametrize("via_evaluate, pred, reference, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in AV_CASES])
def test_av_reasoning_metric(av_metric, via_evaluate, pred, reference, error, patterns):
    from perckit.reason_av_edit import metric as core

    preds, refs = [pred()], [reference()]
    fn = (lambda: av_metric.compute(predictions=preds, references=refs)) if via_evaluate else (lambda: core.av_reasoning(preds, refs))
    expect(fn, error, *patterns)


# ---------------------------------------------------------------- every metric: the declared features

SCHEMA_CASES = [
    # evaluate encodes every batch with the module's declared features before perckit's code runs; the modules
    # (perckit.hf.metric.PerckitMetric) turn its errors into a PredictionError naming the row and the field.
    ("frame-id-a-word", "mask_temporal", [{"query_id": "q", "frames": [{"frame_id": "one", "mask": MT_REF["frames"][0]["mask"]}]}], [MT_REF],
     [r"mask_temporal: .*predictions\[0\]\.frames: expected", "int32", "'one'"]),
    ("counts-an-int", "mask_temporal", [mt_pred({"size": [1, 4], "counts": 5})], [MT_REF], [r"predictions\[0\]\.frames: expected", "Expected type str"]),
    ("track-id-a-float", "track_id", [{"query_id": "q", "target_track_ids": [1.5]}], [TID_REF], [r"track_id: .*predictions\[0\]\.target_track_ids: expected", r"\[1\.5\]"]),
    ("missing-key", "track_id", [{"query_id": "q"}], [TID_REF], [r"predictions\[0\]: expected exactly the keys \['query_id', 'target_track_ids'\]", r"missing \['target_track_ids'\]"]),
    ("reference-scene-an-int", "track_id", [{"query_id": "q", "target_track_ids": ["1"]}], [{**TID_REF, "scene": 5}], [r"references\[0\]\.scene: expected", "got 5"]),
    ("fewer-predictions-than-references", "track_id", [{"query_id": "q", "target_track_ids": ["1"]}], "TID_REFS",
     ["expected as many predictions as references", "1 predictions and 2 references"]),
    ("tracking-strings", "syn4d", [s4_pred([[["a", "b", "c"]] * 4] * 3)], [S4_REF], [r"syn4d: .*predictions\[0\]\.tracking_xyz: expected", "'a'"]),
    ("mask-size-words", "refer_iou", [{"expression_id": "e1", "mask": {"size": ["two", "3"], "counts": "033"}}], [RI_REF], [r"refer_iou: .*predictions\[0\]\.mask: expected", "'two'"]),
    ("instance-index-a-word", "av_reasoning", "AV_BAD_INDEX", "AV_REFS", [r"av_reasoning: .*predictions\[0\]\.selected_instance_index: expected", "'first'"]),
]


@pytest.mark.parametrize("name, preds, refs, patterns", [pytest.param(*c[1:], id=c[0]) for c in SCHEMA_CASES])
def test_declared_features(name, preds, refs, patterns, mask_metric, track_metric, syn4d_tracking_metric, refer_metric, av_metric):
    metric = {"mask_temporal": mask_metric, "track_id": track_metric, "syn4d": syn4d_tracking_metric, "refer_iou": refer_metric, "av_reasoning": av_metric}[name]
    preds = [av_pred(selected_instance_index="first")] if preds == "AV_BAD_INDEX" else preds
    refs = {"TID_REFS": TID_REFS, "AV_REFS": [av_ref()]}.get(refs, refs) if isinstance(refs, str) else refs
    expect(lambda: metric.compute(predictions=preds, references=refs), PredictionError, *patterns)


# ================================================================ prediction files


def _write(tmp_path, name, data):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


def _npz_member(name: str, data: bytes) -> bytes:
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(name, data)
    return buf.getvalue()


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _r4d_mask_file(tmp_path, png: bytes) -> Path:
    _write(tmp_path, "m.png", png)
    return _write(tmp_path, "p.json", json.dumps({"q": {"frames": {"1": "m.png"}}}))


def _rav_dir(tmp_path, files: dict) -> Path:
    for name, data in files.items():
        _write(tmp_path / "preds", name, data)
    return tmp_path / "preds"


FILE_CASES = [
    # id, parser(tmp_path) -> callable, error, patterns
    ("r4d-mask-json-nested-deep", lambda t: lambda: _r4d_io().load_mask_predictions(_write(t, "p.json", DEEP_JSON), t), PredictionError, [r"p\.json", "expected valid JSON", "RecursionError"]),
    ("r4d-mask-json-integer-of-5000-digits", lambda t: lambda: _r4d_io().load_mask_predictions(_write(t, "p.json", HUGE_INT_JSON), t), PredictionError, [r"p\.json", "digits"]),
    ("r4d-mask-png-decompression-bomb", lambda t: lambda: _r4d_io().load_mask_predictions(_r4d_mask_file(t, bomb_png()), t), PredictionError, [r"query 'q': frame 1", r"m\.png", "decompression bomb"]),
    ("r4d-mask-png-truncated", lambda t: lambda: _r4d_io().load_mask_predictions(_r4d_mask_file(t, png_bytes(np.eye(8) * 255)[:40]), t), PredictionError, [r"m\.png", "cannot open mask PNG"]),
    ("r4d-track-json-not-utf8", lambda t: lambda: _r4d_io().load_track_predictions(_write(t, "t.json", NOT_UTF8)), PredictionError, [r"t\.json", "expected valid JSON"]),
    ("r4d-track-ids-a-number", lambda t: lambda: _r4d_io().load_track_predictions(_write(t, "t.json", '{"q": 5}')), PredictionError, [r"t\.json.*query 'q'", "expected a list of track ids"]),
    ("syn4d-npz-missing", lambda t: lambda: _s4_io().read_npz(t / "nope.npz"), InputNotFoundError, [r"nope\.npz", "not found"]),
    ("syn4d-npz-truncated", lambda t: lambda: _s4_io().read_npz(_write(t, "p.npz", _npz(tracking_xyz=np.zeros((3, 4, 3)))[:200])), PredictionError, [r"p\.npz", "expected a readable .npz"]),
    ("syn4d-npz-random-bytes", lambda t: lambda: _s4_io().read_npz(_write(t, "p.npz", b"\x01garbage" * 30)), PredictionError, [r"p\.npz", "expected a readable .npz"]),
    ("syn4d-npz-a-single-npy", lambda t: lambda: _s4_io().read_npz(_write(t, "p.npz", _npy_header((2,), "<f8") + bytes(16))), PredictionError, [r"p\.npz", "expected an .npz archive, got a single array"]),
    ("syn4d-npz-member-huge-declared-shape", lambda t: lambda: _s4_io().read_npz(_write(t, "p.npz", _npz_member("depth.npy", _npy_header((32, 10**5, 10**5)) + bytes(64)))),
     PredictionError, [r"p\.npz': member 'depth\.npy'", r"declares shape \(32, 100000, 100000\)", "more than the limit"]),
    ("syn4d-npz-member-truncated", lambda t: lambda: _s4_io().read_npz(_write(t, "p.npz", _npz_member("depth.npy", _npy_header((3, 4, 5)) + bytes(8)))),
     PredictionError, [r"member 'depth\.npy'", "truncated", "holds 8"]),
    ("syn4d-npz-member-strings", lambda t: lambda: _s4_io().read_npz(_write(t, "p.npz", _npz(tracking_xyz=np.array(["a", "b"])))), PredictionError, [r"p\.npz", "'tracking_xyz' must be numeric"]),
    ("refcoco-jsonl-integer-of-5000-digits", lambda t: lambda: _rcm_io().load_predictions_jsonl(_write(t, "p.jsonl", HUGE_INT_JSON)), PredictionError, [r"p\.jsonl' line 1", "digits"]),
    ("refcoco-jsonl-nested-deep", lambda t: lambda: _rcm_io().load_predictions_jsonl(_write(t, "p.jsonl", DEEP_JSON)), PredictionError, [r"p\.jsonl' line 1", "RecursionError"]),
    ("refcoco-jsonl-not-utf8", lambda t: lambda: _rcm_io().load_predictions_jsonl(_write(t, "p.jsonl", NOT_UTF8)), PredictionError, [r"p\.jsonl", "expected UTF-8"]),
    ("refcoco-jsonl-mask-huge-size", lambda t: lambda: _rcm_io().load_predictions_jsonl(_write(t, "p.jsonl", json.dumps({"expression_id": "1:0", "mask": HUGE_RLE}))),
     PredictionError, [r"p\.jsonl' line 1: mask", "exceeds the limit"]),
    ("rav-dir-missing", lambda t: lambda: _rav_io().load_predictions_dir(t / "nope"), InputNotFoundError, ["predictions folder", "nope", "does not exist"]),
    ("rav-png-truncated", lambda t: lambda: _rav_io().load_predictions_dir(_rav_dir(t, {"s_anchor_mask.png": png_bytes(np.eye(8) * 255)[:40]})),
     PredictionError, [r"s_anchor_mask\.png", "expected a readable mask image"]),
    ("rav-png-decompression-bomb", lambda t: lambda: _rav_io().load_predictions_dir(_rav_dir(t, {"s_anchor_mask.png": bomb_png()})),
     PredictionError, [r"s_anchor_mask\.png", "decompression bomb"]),
    ("rav-json-integer-of-5000-digits", lambda t: lambda: _rav_io().load_predictions_dir(_rav_dir(t, {"s.json": HUGE_INT_JSON})), PredictionError, [r"s\.json", "digits"]),
    ("rav-json-window-a-string", lambda t: lambda: _rav_io().load_predictions_dir(_rav_dir(t, {"s.json": '{"edit_window_s": "0.1-0.5"}'})),
     PredictionError, [r"edit_window_s", "0.1-0.5"]),
    ("cli-jsonl-not-utf8", lambda t: lambda: _cli_rows(_write(t, "p.jsonl", NOT_UTF8)), PredictionError, [r"p\.jsonl", "expected UTF-8"]),
    ("cli-jsonl-line-not-an-object", lambda t: lambda: _cli_rows(_write(t, "p.jsonl", '{"a": 1}\n[1, 2]\n')), PredictionError, [r"p\.jsonl' line 2", "expected a JSON object"]),
    ("cli-jsonl-nested-deep", lambda t: lambda: _cli_rows(_write(t, "p.jsonl", DEEP_JSON)), PredictionError, [r"p\.jsonl' line 1", "RecursionError"]),
    ("cli-json-not-an-array", lambda t: lambda: _cli_rows(_write(t, "p.json", '{"a": 1}')), PredictionError, [r"p\.json", "expected a JSON array of rows"]),
    ("cli-json-row-not-an-object", lambda t: lambda: _cli_rows(_write(t, "p.json", '[{"a": 1}, 5]')), PredictionError, [r"p\.json", "row 1", "expected a JSON object"]),
    ("cli-json-truncated", lambda t: lambda: _cli_rows(_write(t, "p.json", '[{"a": 1}, {"b"')), PredictionError, [r"p\.json", "expected valid JSON"]),
    ("cli-file-missing", lambda t: lambda: _cli_rows(t / "nope.json"), InputNotFoundError, [r"nope\.json", "not found"]),
]


def _r4d_io():
    from perckit.r4d_bench import read as m

    return m


def _s4_io():
    from perckit.syn4d import read as m

    return m


def _rcm_io():
    from perckit.refcoco_m import read as m

    return m


def _rav_io():
    from perckit.reason_av_edit.read import predictions as m

    return m


def _cli_rows(path):
    from perckit.__main__ import _read_rows

    return _read_rows(str(path))


@pytest.mark.parametrize("make, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in FILE_CASES])
def test_prediction_files(tmp_path, make, error, patterns):
    expect(make(tmp_path), error, *patterns)


# ================================================================ options and missing ids


@pytest.mark.parametrize("name", ["mask_temporal", "track_id", "syn4d", "refer_iou", "av_reasoning"])
def test_unknown_option_name(name, mask_metric, track_metric, syn4d_tracking_metric, refer_metric, av_metric):
    """A misspelt option is an OptionError naming it, not a TypeError from deep inside."""
    metric, preds, refs = {
        "mask_temporal": (mask_metric, [mt_pred(MT_REF["frames"][0]["mask"])], [MT_REF]),
        "track_id": (track_metric, [{"query_id": "q", "target_track_ids": ["1"]}], [TID_REF]),
        "syn4d": (syn4d_tracking_metric, [s4_pred((_GT * 2).tolist())], [S4_REF]),
        "refer_iou": (refer_metric, [{"expression_id": "e1", "mask": RI_REF["mask"]}], [RI_REF]),
        "av_reasoning": (av_metric, [av_pred()], [av_ref()]),
    }[name]
    expect(lambda: metric.compute(predictions=preds, references=refs, strcit=True), OptionError, rf"{name}: unknown option\(s\) \['strcit'\]", "expected some of")


def test_mask_temporal_missing_id_strict_by_default_lax_scores_empty_and_counts():
    from perckit.r4d_bench import metric as core

    refs = [MT_REF, {**MT_REF, "query_id": "r"}]
    preds = [mt_pred(MT_REF["frames"][0]["mask"])]
    expect(lambda: core.mask_temporal(preds, refs), PredictionError, r"no prediction for 1 reference query_id.*'r'", "strict=False")
    out = core.mask_temporal(preds, refs, strict=False)
    assert out["num_missing_predictions"] == 1 and out["num_queries"] == 2
    rows = {r["query_id"]: r for r in out["per_query"]}
    assert rows["q"]["miou"] == 1.0 and rows["r"]["miou"] == 0.0  # no row = an empty mask on every frame
    assert out["miou"] == 0.5


def test_track_id_missing_id_lax_by_default_scores_empty_and_counts_strict_raises():
    from perckit.r4d_bench import metric as core

    refs = [TID_REF, {**TID_REF, "query_id": "r"}]
    preds = [{"query_id": "q", "target_track_ids": ["1"]}]
    out = core.track_id(preds, refs)
    assert out["num_missing_predictions"] == 1 and out["num_queries"] == 2
    rows = {r["query_id"]: r for r in out["per_query"]}
    assert (rows["r"]["num_pred"], rows["r"]["f1"]) == (0, 0.0) and out["f1"] == 0.5  # no row = the empty id set
    expect(lambda: core.track_id(preds, refs, strict=True), PredictionError, r"no prediction for 1 reference query_id.*'r'")


def test_syn4d_missing_id_strict_by_default_lax_records_a_failure():
    from perckit.syn4d import metric as core

    refs = [S4_REF, {**S4_REF, "sequence_id": "og/dream/b"}]
    preds = [s4_pred((_GT * 2).tolist())]
    expect(lambda: core.compute_task(preds, refs, "tracking"), PredictionError, r"^og/dream/b: missing prediction$")
    out = core.compute_task(preds, refs, "tracking", core.Syn4DOptions(strict=False))
    assert out["failures"] == [{"sequence_id": "og/dream/b", "reason": "missing prediction"}]
    assert out["overall"]["num_sequences"] == 1 and out["requested_sequences"] == 2


def test_refer_iou_and_av_reasoning_have_no_lax_mode():
    from perckit.reason_av_edit import metric as av_core
    from perckit.refcoco_m import metric as ri_core

    preds, refs = [{"expression_id": "e1", "mask": RI_REF["mask"]}], [RI_REF, {**RI_REF, "expression_id": "e2"}]
    expect(lambda: ri_core.refer_iou(preds, refs), PredictionError, r"no prediction for 1 reference expression_id.*'e2'")
    expect(lambda: ri_core.refer_iou(preds, refs, strict=False), OptionError, r"unknown option\(s\) \['strict'\]")
    expect(lambda: av_core.av_reasoning([av_pred()], [av_ref(), av_ref(sample_id="t")]), PredictionError, r"no prediction for 1 reference sample_id.*'t'")
