"""The M4Seg rows of the bad-input matrix of docs/errors.md: the builder (native JSON.gz and Parquet), the
metric (through ``evaluate`` and its core), and the prediction parsers.

Same contract as tests/test_benchmarks_bad_inputs.py (helpers: tests/helpers/bad_inputs.py): the exception is one of the documented types of
:mod:`perckit.errors` (for an error raised while ``datasets`` generates rows: in the cause chain of its
``DatasetGenerationError``, and nothing else may escape) and its message names the file or the field and
says what was expected. Builder cases marked ``PRE`` must reach the caller unwrapped: they are found before
generation (file-level problems, and anything wrong in the first example of a native file or the first row
of a Parquet shard, which the builder converts while planning the splits).

The test split of a small synthetic release is replaced by two hand-written examples (written both as the
native ``annotations/m4seg_test.json.gz`` and as the Parquet shard, which give identical rows), so every
message below is predictable.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from helpers.bad_inputs import DEEP_JSON, HUGE_INT_JSON, HUGE_RLE, NAN, NOT_UTF8, expect, far_apart_polygon, put, truncate, unlink
from helpers.common import REPO
from helpers.harness import check, documented_error
from helpers.m4seg import NATIVE, SHARD, S1_PRED, S1_REF, R, build_test_split, small_examples, write_parquet

from perckit.hf.entrypoints import build_split
from perckit.errors import InputNotFoundError, OptionError, PerckitError, PredictionError, ReleaseFormatError, ReleaseNotFoundError, RLEError
from perckit.m4seg.read import predictions as m4io
from perckit.m4seg import metric as core

NATIVE_NAME = r"m4seg_test\.json\.gz"
SHARD_NAME = r"test-00000-of-00001\.parquet"
MIB_70 = 70 << 20  # more than perckit.m4seg.read.native.MAX_EXAMPLE_BYTES


# ================================================================ the release


def test_the_two_sources_of_the_small_release_give_identical_rows(m4_small, tmp_path):
    native, parquet = build_test_split(m4_small, tmp_path / "n", "native"), build_test_split(m4_small, tmp_path / "p", "parquet")
    assert native.to_list() == parquet.to_list()
    assert native["example_id"] == ["7", "pas_0000008"]
    assert native[1]["images"][0]["height"] == 2 and native[1]["groundings"][1]["answer_span"] == [16, 25]


# ---------------------------------------------------------------- edits


def native(fn):
    """Edit the list of native examples in place (``fn(examples)``) and write it back gzip-compressed."""
    def edit(root: Path) -> None:
        p = root / NATIVE
        data = json.loads(gzip.decompress(p.read_bytes()))
        fn(data)
        p.write_bytes(gzip.compress(json.dumps(data).encode()))
    return edit


def native_bytes(data: bytes | str):
    """Replace the decompressed content of the native file."""
    raw = data.encode() if isinstance(data, str) else data
    return lambda root: (root / NATIVE).write_bytes(gzip.compress(raw))


def native_text_sub(old: str, new: str):
    """Replace text in the decompressed JSON (for literals ``json.dumps`` cannot write, such as 1e999)."""
    def edit(root: Path) -> None:
        p = root / NATIVE
        text = gzip.decompress(p.read_bytes()).decode()
        assert old in text
        p.write_bytes(gzip.compress(text.replace(old, new, 1).encode()))
    return edit


def ex(i: int, **kw):
    return native(lambda d: d[i].update(kw))


def drop(i: int, key: str):
    return native(lambda d: d[i].pop(key))


def ground(i: int, key: str, j: int, **kw):
    return native(lambda d: d[i]["groundings"][key][j].update(kw))


def groups(i: int, value):
    return native(lambda d: d[i].update(groundings=value))


def parquet(fn, schema_free: bool = False):
    """Edit the Parquet records in place (``fn(records)``) and rewrite the shard (``schema_free``: inferred types)."""
    def edit(root: Path) -> None:
        records = pq.read_table(root / SHARD).to_pylist()
        fn(records)
        write_parquet(root / SHARD, records, schema_free)
    return edit


def rec(i: int, **kw):
    return parquet(lambda r: r[i].update(kw))


def rec_ground(i: int, j: int, schema_free: bool = False, **kw):
    return parquet(lambda r: r[i]["groundings"][j].update(kw), schema_free)


def rec_image(i: int, k: int, schema_free: bool = False, **kw):
    return parquet(lambda r: r[i]["images"][k].update(kw), schema_free)


def drop_column(name: str):
    def edit(root: Path) -> None:
        t = pq.read_table(root / SHARD)
        pq.write_table(t.drop_columns([name]), root / SHARD)
    return edit


def corrupt_gzip_middle(root: Path) -> None:
    p = root / NATIVE
    b = bytearray(p.read_bytes())
    for i in range(12, len(b) - 8):
        b[i] ^= 0x5A
    p.write_bytes(bytes(b))


def zero_data_pages(root: Path) -> None:
    import struct

    p = root / SHARD
    b = bytearray(p.read_bytes())
    footer = struct.unpack("<I", b[-8:-4])[0] + 8
    b[4 : len(b) - footer] = bytes(len(b) - footer - 4)
    p.write_bytes(bytes(b))


def rmtree_root(root: Path) -> None:
    shutil.rmtree(root)


def deep_counts(depth: int) -> str:
    return "[" * depth + "0" + "]" * depth


# ================================================================ builder cases

PRE, GEN = "pre", "gen"  # raised before generation (unwrapped) / may arrive wrapped in DatasetGenerationError
EX0 = rf"M4Seg test split, {NATIVE_NAME}: example '7'"
EX1 = rf"M4Seg test split, {NATIVE_NAME}: example 'pas_0000008'"
ROW0 = rf"M4Seg test split, {SHARD_NAME}: example '7'"
ROW1 = rf"M4Seg test split, {SHARD_NAME}: example 'pas_0000008'"

NATIVE_CASES = [
    # id, edit, options, error, stage, patterns
    ("release-folder-missing", rmtree_root, {}, ReleaseNotFoundError, PRE, ["M4Seg release folder", "does not exist", "data_dir="]),
    ("native-file-missing", unlink(NATIVE), {}, ReleaseNotFoundError, PRE, ["source='native'", NATIVE_NAME, "was not found"]),
    ("native-and-parquet-missing", lambda r: (unlink(NATIVE)(r), unlink(SHARD)(r)), {"source": "auto"},
     ReleaseNotFoundError, PRE, ["test split: neither", NATIVE_NAME, r"data/test-\*\.parquet"]),
    ("native-not-gzip", put(NATIVE, json.dumps(small_examples())), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "expected a gzip-compressed JSON file", "BadGzipFile|Not a gzipped"]),
    ("native-random-bytes", put(NATIVE, b"\x1f\x8b\x08\x00" + b"\x01garbage" * 40), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "gzip"]),
    ("native-gzip-truncated", truncate(NATIVE, 0.5), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "unreadable", "EOFError"]),
    ("native-gzip-corrupt", corrupt_gzip_middle, {}, ReleaseFormatError, PRE, [NATIVE_NAME, "gzip"]),
    ("native-gzip-of-nothing", native_bytes(b""), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "expected a JSON list of examples or an object of examples, found b''"]),
    ("native-not-json", native_bytes("hello world"), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "expected a JSON list of examples", "b'hello world'"]),
    ("native-top-level-a-number", native_bytes("42"), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "expected a JSON list of examples or an object"]),
    ("native-not-utf8", native_bytes(b'[{"pair_id": "\xff\xfe", "a": "x"}]'), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "invalid JSON", "bytes that are not UTF-8"]),
    ("native-json-truncated-in-example-0", native_bytes(json.dumps(small_examples())[:200]), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "invalid JSON"]),
    ("native-json-truncated-in-example-1", native_bytes(json.dumps(small_examples())[:-60]), {}, ReleaseFormatError, GEN, [NATIVE_NAME, "invalid JSON"]),
    ("native-nested-100000-deep", native_bytes(DEEP_JSON), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "nested more than 64 levels deep"]),
    ("native-counts-nested-100000-deep", native_text_sub('"counts": [0, 4, 2]', '"counts": ' + deep_counts(100_000)), {}, ReleaseFormatError, PRE,
     [NATIVE_NAME, "nested more than 64 levels deep"]),
    ("native-integer-of-5000-digits", native_bytes('[{"pair_id": 1' + "0" * 5000 + ', "a": "x"}]'), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "invalid JSON", "integer overflow"]),
    ("native-string-of-70-mib", native_bytes(b'[{"pair_id": 1, "a": "' + b"a" * MIB_70 + b'"}]'), {}, ReleaseFormatError, PRE,
     [NATIVE_NAME, "a JSON string is longer than 67108864 bytes", "decompression bomb"]),
    ("native-example-of-70-mib", native_bytes(b'[{"pair_id": 1, "x": [' + b"0," * (MIB_70 // 2) + b'0]}]'), {}, ReleaseFormatError, PRE,
     [NATIVE_NAME, "an example is longer than 67108864 bytes"]),
    ("native-size-1e999", native_text_sub("[[1, 4], [1, 2]]", "[[1e999, 4], [1, 2]]"), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "invalid JSON", "overflow"]),
    ("native-example-a-number", native_bytes("[5]"), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "example 0: expected an object, found 5"]),
    ("native-object-value-a-number", native_bytes('{"7": 5}'), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "example 0: expected an object, found 5"]),
    ("example-without-ids", drop(0, "pair_id"), {}, ReleaseFormatError, PRE, [NATIVE_NAME, "expected an 'example_id' or a 'pair_id'/'id', found neither"]),
    ("example-id-on-example-0-only", ex(0, example_id="e7"), {}, ReleaseFormatError, GEN,
     [EX1, "has no 'example_id' while the file's first example has one"]),
    ("duplicate-example-id", native(lambda d: [e.update(example_id="same") for e in d]), {}, ReleaseFormatError, GEN,
     ["M4Seg test split", "duplicate example_id 'same'"]),
    ("answer-a-number", ex(0, a=5), {}, ReleaseFormatError, PRE, [EX0, r"'a'/'answer': expected a string, found 5"]),
    ("answer-a-number-in-example-1", ex(1, a=5), {}, ReleaseFormatError, GEN, [EX1, r"'a'/'answer': expected a string, found 5"]),
    ("image-paths-missing", drop(0, "image_paths"), {}, ReleaseFormatError, PRE, [EX0, "'image_paths': expected a non-empty list of paths, found None"]),
    ("image-sizes-a-number", ex(0, image_sizes=5), {}, ReleaseFormatError, PRE, [EX0, r"'image_sizes': expected one size per image path \(2\), found 5"]),
    ("image-sizes-of-three", ex(0, image_sizes=[[1, 4, 1], [1, 2]]), {}, ReleaseFormatError, PRE, [EX0, r"image_sizes\[0\]: expected \[H, W\] \(2 ints\)"]),
    ("image-sizes-words", ex(0, image_sizes=[["one", "four"], [1, 2]]), {}, ReleaseFormatError, PRE, [EX0, r"image_sizes\[0\]: expected an integer", "'one'"]),
    ("image-sizes-fractions", ex(0, image_sizes=[[1.5, 4], [1, 2]]), {}, ReleaseFormatError, PRE, [EX0, r"image_sizes\[0\]: expected an integer", "1.5"]),
    ("image-size-zero", ex(1, image_sizes=[[3, 2], [0, 2]]), {}, ReleaseFormatError, GEN, [EX1, r"image_sizes\[1\]: expected a positive height and width"]),
    ("image-size-of-2^40-pixels", ex(0, image_sizes=[[1, 4], [1 << 20, 1 << 20]]), {"native_image_size_order": "hw"}, ReleaseFormatError, PRE,
     [EX0, r"image_sizes\[1\]", "more than the limit of 1073741824", "gigabytes"]),
    ("groundings-a-string", groups(0, "chair"), {}, ReleaseFormatError, PRE, [EX0, "'groundings': expected an object keyed 'img_1', 'img_2'"]),
    ("groundings-key-not-img-k", groups(0, {"image_1": []}), {}, ReleaseFormatError, PRE, [EX0, "expected keys 'img_1', 'img_2', ..., found 'image_1'"]),
    ("groundings-key-beyond-the-images", native(lambda d: d[0]["groundings"].update(img_3=[])), {}, ReleaseFormatError, PRE,
     [EX0, r"groundings\.img_3: expected keys img_1\.\.img_2 \(2 image\(s\)\)"]),
    ("groundings-two-keys-for-one-image", native(lambda d: d[0]["groundings"].update(img_01=[])), {}, ReleaseFormatError, PRE,
     [EX0, "expected one key per image, found two keys for image 1"]),
    ("groundings-img-k-a-dict", native(lambda d: d[0]["groundings"].update(img_2={"name": "cup"})), {}, ReleaseFormatError, PRE,
     [EX0, r"groundings\.img_2: expected a list of groundings"]),
    ("grounding-a-number", native(lambda d: d[0]["groundings"]["img_2"].__setitem__(0, 5)), {}, ReleaseFormatError, PRE,
     [EX0, r"groundings\.img_2\[0\]: expected a grounding object, found 5"]),
    ("grounding-without-mask", native(lambda d: d[0]["groundings"]["img_2"][0].pop("segmentation")), {}, ReleaseFormatError, PRE,
     [EX0, r"groundings\.img_2\[0\]\.segmentation: expected a mask \(RLE or polygons\), found none"]),
    ("rle-counts-outside-the-alphabet", ground(0, "img_1", 0, segmentation=R("0~2", (1, 4))), {}, RLEError, PRE,
     [EX0, r"groundings\.img_1\[0\]\.segmentation \(image 1, \[H, W\] = \[1, 4\]\)", "outside the COCO alphabet"]),
    ("rle-counts-not-summing", ground(0, "img_1", 0, segmentation=R("05", (1, 4))), {}, RLEError, PRE, [EX0, r"img_1\[0\]\.segmentation", "sum to 5"]),
    ("rle-counts-a-number", ground(0, "img_1", 0, segmentation={"size": [1, 4], "counts": 5}), {}, RLEError, PRE, [EX0, r"img_1\[0\]\.segmentation", "counts"]),
    ("rle-counts-in-example-1", ground(1, "img_1", 0, segmentation={"size": [2, 3], "counts": [0, 4, 9]}), {}, RLEError, GEN,
     [EX1, r"img_1\[0\]\.segmentation", "sum to 13"]),
    ("rle-uncompressed-counts-huge", ground(1, "img_1", 0, segmentation={"size": [2, 3], "counts": [10**15]}), {}, RLEError, GEN,
     [EX1, r"img_1\[0\]\.segmentation"]),
    ("rle-size-disagrees-with-image", ground(0, "img_1", 0, segmentation=R("011", (1, 2))), {}, ReleaseFormatError, PRE,
     [EX0, r"image_sizes\[0\] = \[1, 4\] matches neither \[H, W\] nor \[W, H\] of its masks' size\(s\)"]),
    ("rle-size-disagrees-with-image-hw", ground(0, "img_1", 0, segmentation=R("011", (1, 2))), {"native_image_size_order": "hw"}, RLEError, PRE,
     [EX0, r"img_1\[0\]\.segmentation", r"expected size \[1, 4\], got \[1, 2\]"]),
    ("rle-huge-declared-size", ground(0, "img_1", 0, segmentation=dict(HUGE_RLE)), {"native_image_size_order": "hw"}, RLEError, PRE,
     [EX0, r"img_1\[0\]\.segmentation", "exceeds the limit", "gigabytes"]),
    ("rle-size-words", ground(0, "img_1", 0, segmentation={"size": ["one", 4], "counts": "022"}), {}, RLEError, PRE,
     [EX0, r"img_1\[0\]\.segmentation", r"expected 'size' = \[H, W\]"]),
    ("polygon-vertex-far-outside", ground(0, "img_1", 0, segmentation=[[0, 0, 1e9, 0, 1e9, 1e9]]), {}, RLEError, PRE,
     [EX0, r"img_1\[0\]\.segmentation", "far outside"]),
    ("polygon-of-words", ground(0, "img_1", 0, segmentation=[["a", "b", "c", "d", "e", "f"]]), {}, RLEError, PRE, [EX0, r"img_1\[0\]\.segmentation"]),
    ("polygon-far-apart-vertices", ground(0, "img_1", 0, segmentation=[far_apart_polygon(1, 4)]), {}, RLEError, PRE,
     [EX0, r"img_1\[0\]\.segmentation", "expected polygons whose outline", "at most 65536 pixels long for a 1x4 image"]),
    ("answer-span-out-of-range", ground(0, "img_1", 0, answer_span=[0, 99]), {}, ReleaseFormatError, PRE,
     [EX0, r"img_1\[0\]\.answer_span: expected 0 <= start <= end <= 36 \(the answer's length\), found \[0, 99\]"]),
    ("answer-span-words", ground(0, "img_1", 0, answer_span=["zero", "nine"]), {}, ReleaseFormatError, PRE,
     [EX0, r"answer_span\[0\]: expected an integer", "'zero'"]),
    ("answer-span-of-three", ground(0, "img_1", 0, answer_span=[0, 9, 9]), {}, ReleaseFormatError, PRE, [EX0, r"answer_span: expected \[start, end\) \(2 ints\)"]),
    ("answer-spans-not-derivable", ex(1, a="a dog and its leg"), {}, ReleaseFormatError, GEN,
     [EX1, "cannot derive spans for image 1: expected 2 distinct entity code", "found 0"]),
]


def expect_build(release: Path, tmp_path: Path, edit, options: dict, error: type, stage: str, patterns) -> None:
    """Build a copy of ``release`` edited by ``edit``: it raises ``error`` matching ``patterns``, unwrapped for a
    ``PRE`` case (found before generation)."""
    root = tmp_path / "release"
    shutil.copytree(release, root)
    edit(root)
    with pytest.raises(Exception) as info:
        build_test_split(root, tmp_path / "cache", **options)
    err = documented_error(info.value)
    check(err, error, patterns)
    if stage == PRE:
        assert info.value is err, f"expected {error.__name__} before generation, got it wrapped in {type(info.value).__name__}"


@pytest.mark.parametrize("edit, options, error, stage, patterns", [pytest.param(*c[1:], id=c[0]) for c in NATIVE_CASES])
def test_m4seg_builder_native(m4_small, tmp_path, edit, options, error, stage, patterns):
    expect_build(m4_small, tmp_path, edit, {"source": "native", **options}, error, stage, patterns)


#: [inferred] native ``image_ids`` (the card names no native image ids) in three unexpected shapes: a list of scalars of
#: another length, an object without the ids, nested objects. Each is one warning naming the file and the field;
#: the example's image ids then come from its paths.
INFERRED_IMAGE_IDS = {"list-of-scalars": ["a"], "object-without-the-keys": {"x": 1}, "nested-objects": [{"id": 1}, {"id": 2}]}


@pytest.mark.parametrize("ids", list(INFERRED_IMAGE_IDS.values()), ids=list(INFERRED_IMAGE_IDS))
def test_m4seg_inferred_image_ids_of_another_shape_warn_and_are_ignored(m4_small, tmp_path, caplog, ids):
    root = tmp_path / "release"
    shutil.copytree(m4_small, root)
    ex(0, image_ids=ids)(root)
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg.release"):
        rows = build_test_split(root, tmp_path / "cache", source="native").to_list()
    plain = build_test_split(m4_small, tmp_path / "plain", source="native").to_list()
    assert rows == plain  # the ids from the paths, as without image_ids
    warned = [r.getMessage() for r in caplog.records if "'image_ids'" in r.getMessage()]
    assert len(warned) == 1 and Path(NATIVE).name in warned[0] and "ignored" in warned[0], warned


PARQUET_CASES = [
    ("no-shard", unlink(SHARD), {}, ReleaseNotFoundError, PRE, ["source='parquet'", r"no 'data/test-\*\.parquet' was found"]),
    ("shard-truncated", truncate(SHARD), {}, ReleaseFormatError, PRE, [SHARD_NAME, "not a readable Parquet file"]),
    ("shard-random-bytes", put(SHARD, b"PAR1" + b"\x01garbage" * 40), {}, ReleaseFormatError, PRE, [SHARD_NAME, "not a readable Parquet file"]),
    ("shard-empty", put(SHARD, b""), {}, ReleaseFormatError, PRE, [SHARD_NAME, "not a readable Parquet file"]),
    ("shard-a-gzip-json", lambda r: shutil.copy(r / NATIVE, r / SHARD), {}, ReleaseFormatError, PRE, [SHARD_NAME, "not a readable Parquet file"]),
    ("shard-data-pages-zeroed", zero_data_pages, {}, ReleaseFormatError, PRE, [SHARD_NAME, "the example_id column cannot be read", "corrupt or truncated Parquet data"]),
    ("column-images-missing", drop_column("images"), {}, ReleaseFormatError, PRE, [SHARD_NAME, r"missing column\(s\) 'images'", "expected the M4Seg columns"]),
    ("column-a-missing", drop_column("a"), {}, ReleaseFormatError, PRE, [SHARD_NAME, r"missing column\(s\) 'a' or 'answer'"]),
    ("column-images-of-strings", parquet(lambda r: [x.update(images="a.jpg") for x in r], schema_free=True), {}, ReleaseFormatError, PRE,
     [SHARD_NAME, "column 'images': expected a list of structs, found string"]),
    ("groundings-without-segmentation", parquet(lambda r: [g.pop("segmentation") for x in r for g in x["groundings"]], schema_free=True), {},
     ReleaseFormatError, PRE, [SHARD_NAME, r"column 'groundings': its items lack the field\(s\) \['segmentation'\]"]),
    ("example-id-null", rec(0, example_id=None), {}, ReleaseFormatError, PRE, [SHARD_NAME, "expected a non-null 'example_id', found None"]),
    ("duplicate-example-id", rec(1, example_id="7"), {}, ReleaseFormatError, PRE, ["M4Seg test split", "duplicate example_id '7'"]),
    ("answer-an-int-column", parquet(lambda r: [x.update(a=i) for i, x in enumerate(r)], schema_free=True), {}, ReleaseFormatError, PRE,
     [ROW0, "'a': expected a string, found 0"]),
    ("images-empty", rec(0, images=[]), {}, ReleaseFormatError, PRE, [ROW0, "'images': expected a non-empty list"]),
    ("image-height-a-word", parquet(lambda r: [im.update(height="tall") for x in r for im in x["images"]], schema_free=True), {},
     ReleaseFormatError, PRE, [ROW0, r"images\[0\]\.height: expected an integer", "'tall'"]),
    ("image-height-nan", parquet(lambda r: [im.update(height=NAN) for x in r for im in x["images"]], schema_free=True), {},
     ReleaseFormatError, PRE, [ROW0, r"images\[0\]\.height: expected an integer", "nan"]),
    ("image-height-inf", parquet(lambda r: [im.update(height=float("inf")) for x in r for im in x["images"]], schema_free=True), {},
     ReleaseFormatError, PRE, [ROW0, r"images\[0\]\.height: expected an integer", "inf"]),
    ("image-height-negative", rec_image(1, 1, height=-2), {}, ReleaseFormatError, GEN, [ROW1, r"images\[1\]: expected a positive height and width", r"\[-2, 2\]"]),
    ("image-of-2^40-pixels", rec_image(1, 1, height=1 << 20, width=1 << 20), {}, ReleaseFormatError, GEN, [ROW1, r"images\[1\]", "more than the limit of 1073741824"]),
    ("image-index-zero", rec_ground(0, 0, image_index=0), {}, ReleaseFormatError, PRE, [ROW0, r"groundings\[0\]\.image_index: expected 1\.\.2", "found 0"]),
    ("image-index-a-word", parquet(lambda r: [g.update(image_index="one") for x in r for g in x["groundings"]], schema_free=True), {},
     ReleaseFormatError, PRE, [ROW0, r"groundings\[0\]\.image_index: expected an integer", "'one'"]),
    ("groundings-a-string-column", parquet(lambda r: [x.update(groundings="chair") for x in r], schema_free=True), {}, ReleaseFormatError, PRE,
     [SHARD_NAME, "column 'groundings': expected a list of structs, found string"]),
    ("segmentation-null", rec_ground(0, 0, segmentation=None), {}, ReleaseFormatError, PRE, [ROW0, r"groundings\[0\]\.segmentation: expected a compressed RLE"]),
    ("segmentation-counts-outside-the-alphabet", rec_ground(0, 0, segmentation=R("0~2", (1, 4))), {}, RLEError, PRE,
     [ROW0, r"groundings\[0\]\.segmentation \(image 1, \[H, W\] = \[1, 4\]\)", "outside the COCO alphabet"]),
    ("segmentation-counts-truncated", rec_ground(1, 0, segmentation=R("0P", (2, 3))), {}, RLEError, GEN, [ROW1, r"groundings\[0\]\.segmentation", "truncated"]),
    ("segmentation-counts-an-int", parquet(lambda r: [g.update(segmentation={"size": g["segmentation"]["size"], "counts": 5}) for x in r for g in x["groundings"]],
                                           schema_free=True), {}, RLEError, PRE, [ROW0, r"groundings\[0\]\.segmentation", "counts"]),
    ("segmentation-size-disagrees-with-image", rec_ground(0, 0, segmentation=R("011", (1, 2))), {}, RLEError, PRE,
     [ROW0, r"groundings\[0\]\.segmentation", r"expected size \[1, 4\], got \[1, 2\]"]),
    ("segmentation-huge-declared-size", rec_ground(0, 0, segmentation=dict(HUGE_RLE)), {}, RLEError, PRE,
     [ROW0, r"groundings\[0\]\.segmentation", "exceeds the limit", "gigabytes"]),
    ("segmentation-size-negative", rec_ground(0, 0, segmentation={"size": [-1, 4], "counts": "04"}), {}, RLEError, PRE,
     [ROW0, r"groundings\[0\]\.segmentation", "two positive ints"]),
    ("bbox-of-three", rec_ground(0, 0, bbox=[0.0, 0.0, 2.0]), {}, ReleaseFormatError, PRE, [ROW0, r"groundings\[0\]\.bbox: expected \[x, y, width, height\] \(4 numbers"]),
    ("bbox-nan", rec_ground(0, 0, bbox=[0.0, NAN, 2.0, 1.0]), {}, ReleaseFormatError, PRE, [ROW0, r"groundings\[0\]\.bbox", "all finite", "nan"]),
    ("bbox-strings", parquet(lambda r: [g.update(bbox=["x", "y", "w", "h"]) for x in r for g in x["groundings"]], schema_free=True), {},
     ReleaseFormatError, PRE, [ROW0, r"groundings\[0\]\.bbox", "'x'"]),
    ("answer-span-null", rec_ground(0, 0, answer_span=None), {}, ReleaseFormatError, PRE, [ROW0, r"groundings\[0\]\.answer_span: expected \[start, end\) \(2 ints\), found None"]),
    ("answer-span-out-of-range", rec_ground(1, 1, answer_span=[16, 99]), {}, ReleaseFormatError, GEN, [ROW1, r"groundings\[1\]\.answer_span", "found \\[16, 99\\]"]),
]


@pytest.mark.parametrize("edit, options, error, stage, patterns", [pytest.param(*c[1:], id=c[0]) for c in PARQUET_CASES])
def test_m4seg_builder_parquet(m4_small, tmp_path, edit, options, error, stage, patterns):
    expect_build(m4_small, tmp_path, edit, {"source": "parquet", **options}, error, stage, patterns)


IMAGE_AND_OPTION_CASES = [
    ("image-root-missing", lambda root, tmp: {"image_root": str(tmp / "nowhere")}, ReleaseNotFoundError, ["image_root", "nowhere", "is not a folder"]),
    ("image-missing", lambda root, tmp: {"image_root": str(tmp)}, ReleaseNotFoundError,
     [r"4 of 4 image path\(s\) not found under image_root", "coco_2017/val2017/000000000001.jpg"]),
    ("source-unknown", lambda root, tmp: {"source": "csv"}, OptionError, [r"option 'source': expected one of \['auto', 'native', 'parquet'\], got 'csv'"]),
    ("size-order-unknown", lambda root, tmp: {"native_image_size_order": "xy"}, OptionError, ["option 'native_image_size_order'", "got 'xy'"]),
    ("split-unknown", lambda root, tmp: {"splits": ("validation",)}, OptionError, ["option 'splits'", "got 'validation'"]),
]


@pytest.mark.parametrize("make_options, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in IMAGE_AND_OPTION_CASES])
def test_m4seg_builder_images_and_options(m4_small, tmp_path, make_options, error, patterns):
    options = {"source": "parquet", **make_options(m4_small, tmp_path)}
    splits = options.pop("splits", ("test",))
    expect(lambda: build_split("m4seg", "default", m4_small, tmp_path / "cache", split="test", splits=splits, **options), error, *patterns)


# ================================================================ metric cases

IMAGES = [{"height": 1, "width": 4}, {"height": 1, "width": 2}]


def edited(row: dict, grounding: int | None = None, **kw) -> dict:
    """A deep copy of ``row`` with ``kw`` set on it, or on its grounding number ``grounding``."""
    out = copy.deepcopy(row)
    (out if grounding is None else out["groundings"][grounding]).update(kw)
    return out


pred = functools.partial(edited, S1_PRED)
pred_ground = functools.partial(edited, S1_PRED, 0)
ref = functools.partial(edited, S1_REF)
ref_ground = functools.partial(edited, S1_REF, 0)
S2_REF = ref(example_id="s2")
STUB = {"embed_fn": "stub", "metrics": ["miou", "recall", "i_ss", "i_siou", "ss", "siou"]}
P0 = r"prediction 's1': groundings\[0\]"
G0 = r"reference 's1': groundings\[0\]"

METRIC_CASES = [
    # id, through evaluate?, predictions, references, options, error, patterns
    ("unknown-id", True, [S1_PRED, pred(example_id="zz")], [S1_REF, S2_REF], {}, PredictionError, ["predictions: example_id 'zz' is unknown to the references"]),
    ("duplicate-prediction-id", True, [S1_PRED, S1_PRED], [S1_REF, S2_REF], {}, PredictionError, ["predictions: duplicate example_id 's1'"]),
    ("duplicate-reference-id", True, [S1_PRED, pred(example_id="s2")], [S1_REF, S1_REF], {}, PredictionError, ["references: duplicate example_id 's1'"]),
    ("missing-id-strict", False, [S1_PRED], [S1_REF, S2_REF], {}, PredictionError,
     [r"no prediction for 1 reference example_id\(s\), e\.g\. \['s2'\]", "strict=False"]),
    ("fewer-predictions-than-references", True, [S1_PRED], [S1_REF, S2_REF], {}, PredictionError,
     ["m4seg: the inputs do not match", "expected as many predictions as references", "1 predictions and 2 references"]),
    ("row-not-a-dict", False, [["s1"]], [S1_REF], {}, PredictionError, [r"predictions\[0\]: expected a dict with a string 'example_id', got list"]),
    ("example-id-an-int", False, [pred(example_id=1)], [S1_REF], {}, PredictionError, [r"predictions\[0\]\.example_id: expected a string, got 1"]),
    ("predictions-not-a-list", False, "s1", [S1_REF], {}, PredictionError, ["predictions: expected a list of rows, got 's1'"]),
    ("answer-an-int", False, [pred(a=5)], [S1_REF], {}, PredictionError, ["prediction 's1': a: expected a string, found 5"]),
    ("answer-an-int-via-evaluate", True, [pred(a=5)], [S1_REF], {}, PredictionError, [r"m4seg: .*predictions\[0\]\.a: expected", "got 5"]),
    ("groundings-a-dict", False, [pred(groundings={"image_index": 1})], [S1_REF], {}, PredictionError, ["prediction 's1': groundings: expected a list of"]),
    ("grounding-a-string", False, [pred(groundings=["chair"])], [S1_REF], {}, PredictionError, [P0 + ": expected {image_index, name, segmentation}, found 'chair'"]),
    ("image-index-nan", False, [pred_ground(image_index=NAN)], [S1_REF], {}, PredictionError, [P0 + r"\.image_index: expected an integer", "nan"]),
    ("image-index-a-word", True, [pred_ground(image_index="one")], [S1_REF], {}, PredictionError, [r"m4seg: .*predictions\[0\]\.groundings: expected", "'one'"]),
    ("image-index-zero", True, [pred_ground(image_index=0)], [S1_REF], {}, PredictionError, [P0 + r"\.image_index: expected 1\.\.2 \(the reference has 2 image\(s\)\), found 0"]),
    ("image-index-beyond-the-images", True, [pred_ground(image_index=3)], [S1_REF], {}, PredictionError, [P0 + r"\.image_index: expected 1\.\.2", "found 3"]),
    ("name-an-int", False, [pred_ground(name=7)], [S1_REF], {}, PredictionError, [P0 + r"\.name: expected a string, found 7"]),
    ("name-an-int-via-evaluate", True, [pred_ground(name=7)], [S1_REF], {}, PredictionError, [r"predictions\[0\]\.groundings: expected", "Expected type str|7"]),
    ("mask-counts-outside-the-alphabet", True, [pred_ground(segmentation=R("0~3", (1, 4)))], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", "outside the COCO alphabet"]),
    ("mask-counts-not-summing", True, [pred_ground(segmentation=R("9", (1, 4)))], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", "sum to 9"]),
    ("mask-counts-truncated", True, [pred_ground(segmentation=R("0P", (1, 4)))], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", "truncated"]),
    ("mask-counts-empty", True, [pred_ground(segmentation=R("", (1, 4)))], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", "'counts' is empty"]),
    ("mask-huge-declared-size", True, [pred_ground(segmentation=dict(HUGE_RLE))], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", "exceeds the limit", "gigabytes"]),
    ("mask-size-of-three", True, [pred_ground(segmentation={"size": [1, 4, 1], "counts": "04"})], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", r"expected 'size' = \[H, W\]"]),
    ("mask-size-negative", True, [pred_ground(segmentation={"size": [-1, 4], "counts": "04"})], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", "two positive ints"]),
    ("mask-size-nan", False, [pred_ground(segmentation={"size": [NAN, 4], "counts": "04"})], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", r"expected 'size' = \[H, W\]"]),
    ("mask-size-words", True, [pred_ground(segmentation={"size": ["one", "four"], "counts": "04"})], [S1_REF], {}, PredictionError, [r"m4seg: .*predictions\[0\]\.groundings", "'one'"]),
    ("mask-size-differs-from-the-image", True, [pred_ground(segmentation=R("02", (1, 2)))], [S1_REF], {}, PredictionError,
     [P0 + r"\.segmentation: predicted mask size \[1, 2\] differs from the size of image 1 \[1, 4\]", "resize_predictions='nearest'"]),
    ("mask-a-string", False, [pred_ground(segmentation="022")], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", "expected an RLE dict, polygons or a 2-D array, got str"]),
    ("mask-a-3d-array", False, [pred_ground(segmentation=np.zeros((1, 4, 1), dtype=bool))], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", "expected a 2-D array"]),
    ("mask-a-polygon", False, [pred_ground(segmentation=[[0, 0, 1, 0, 1, 1]])], [S1_REF], {}, PredictionError, [P0 + r"\.segmentation", "polygon segmentation has no size"]),
    ("reference-mask-malformed", True, [S1_PRED], [ref_ground(segmentation=R("0!", (1, 4)))], {}, PredictionError, [G0 + r"\.segmentation", "outside the COCO alphabet"]),
    ("reference-mask-size-differs", True, [S1_PRED], [ref_ground(segmentation=R("011", (1, 2)))], {}, PredictionError, [G0 + r"\.segmentation: expected the size of image 1"]),
    ("reference-answer-span-of-one", True, [S1_PRED], [ref_ground(answer_span=[0])], {}, PredictionError, [G0 + r"\.answer_span: expected \[start, end\) \(2 ints\)"]),
    ("reference-answer-span-out-of-range", True, [S1_PRED], [ref_ground(answer_span=[30, 99])], {}, PredictionError, [G0 + r"\.answer_span", r"found \[30, 99\]"]),
    ("reference-answer-span-words", False, [S1_PRED], [ref_ground(answer_span=["zero", "nine"])], {}, PredictionError, [G0 + r"\.answer_span\[0\]: expected an integer"]),
    ("reference-answer-an-int", False, [S1_PRED], [ref(a=5)], {}, PredictionError, ["reference 's1': a: expected a string, found 5"]),
    ("reference-images-empty", True, [S1_PRED], [ref(images=[])], {}, PredictionError, [r"reference 's1': images: expected at least one \{height, width\}"]),
    ("reference-image-height-nan", False, [S1_PRED], [ref(images=[{"height": NAN, "width": 4}, IMAGES[1]])], {}, PredictionError,
     [r"reference 's1': images\[0\]\.height: expected an integer", "nan"]),
    ("reference-image-height-zero", True, [S1_PRED], [ref(images=[{"height": 0, "width": 4}, IMAGES[1]])], {}, PredictionError,
     [r"reference 's1': images\[0\]: expected a positive height and width", r"\[0, 4\]"]),
    ("reference-image-of-2^40-pixels-with-resize", True, [S1_PRED], [ref(images=[{"height": 1 << 20, "width": 1 << 20}, IMAGES[1]], groundings=[])],
     {"resize_predictions": "nearest"}, PredictionError, [r"reference 's1': images\[0\]", "at most 1073741824 pixels"]),
    ("reference-grounding-a-number", False, [S1_PRED], [ref(groundings=[5])], {}, PredictionError, [G0 + ": expected {image_index, name, answer_span, segmentation}, found 5"]),
]


@pytest.fixture(scope="module")
def m4_metric():
    import evaluate

    return evaluate.load(str(REPO / "metrics" / "m4seg"))


@pytest.mark.parametrize("via_evaluate, preds, refs, options, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in METRIC_CASES])
def test_m4seg_metric(m4_metric, via_evaluate, preds, refs, options, error, patterns):
    options = {**STUB, **options}
    if via_evaluate:
        fn = lambda: m4_metric.compute(predictions=preds, references=refs, **options)  # noqa: E731
    else:
        fn = lambda: core.compute(preds, refs, **options)  # noqa: E731
    expect(fn, error, *patterns)


def _bad_embed(kind):
    def embed(texts):
        if kind == "nan":
            return np.full((len(texts), 3), NAN)
        if kind == "shape":
            return np.ones((len(texts) + 1, 3))
        return ["not", "numbers"][: len(texts)] + ["x"] * max(0, len(texts) - 2)
    return embed


OPTION_CASES = [
    ("misspelt-option", {"strcit": True}, OptionError, [r"m4seg: unknown option\(s\) \['strcit'\]", "expected some of"]),
    ("matching-unknown", {"matching": "optimal"}, OptionError, [r"option 'matching': expected one of \['greedy', 'hungarian'\], got 'optimal'"]),
    ("miou-unit-unknown", {"miou_unit": "pixel"}, OptionError, ["option 'miou_unit'", "'pixel'"]),
    ("ss-level-unknown", {"ss_level": "word"}, OptionError, ["option 'ss_level'", "'word'"]),
    ("i-mode-unknown", {"i_mode": "x"}, OptionError, ["option 'i_mode'"]),
    ("recall-encoder-unknown", {"recall_text_encoder": "t5"}, OptionError, ["option 'recall_text_encoder'", "'t5'"]),
    ("resize-unknown", {"resize_predictions": "bilinear"}, OptionError, ["option 'resize_predictions'", "'bilinear'"]),
    ("name-style-unknown", {"resolved_name_style": "code"}, OptionError, ["option 'resolved_name_style'", "'code'"]),
    ("metrics-unknown", {"metrics": ["bleu"]}, OptionError, ["option 'metrics'", "'bleu'"]),
    ("metrics-a-number", {"metrics": 5}, OptionError, ["option 'metrics': expected a list of some of", "got 5"]),
    ("threshold-above-one", {"siou_threshold": 2}, OptionError, [r"option 'siou_threshold': expected a number in \[-1, 1\], got 2"]),
    ("threshold-nan", {"recall_iou_threshold": NAN}, OptionError, ["option 'recall_iou_threshold'", "nan"]),
    ("threshold-inf", {"recall_text_threshold": float("inf")}, OptionError, ["option 'recall_text_threshold'", "inf"]),
    ("threshold-a-string", {"siou_threshold": "0.5"}, OptionError, ["option 'siou_threshold'", "'0.5'"]),
    ("flag-a-string", {"as_percent": "yes"}, OptionError, ["option 'as_percent': expected True or False, got 'yes'"]),
    ("strict-a-number", {"strict": 1}, OptionError, ["option 'strict': expected True or False, got 1"]),
    ("embed-fn-unknown-name", {"embed_fn": "glove"}, OptionError, ["option 'embed_fn': expected a callable or one of", "'glove'"]),
    ("embed-fn-returns-nan", {"embed_fn": _bad_embed("nan")}, OptionError, ["option 'embed_fn': the encoder returned a NaN or infinite value"]),
    ("embed-fn-returns-wrong-shape", {"embed_fn": _bad_embed("shape")}, OptionError, [r"option 'embed_fn': the encoder returned shape \(\d+, 3\), expected \[\d+, d\]"]),
    ("embed-fn-returns-words", {"embed_fn": _bad_embed("words")}, OptionError, ["option 'embed_fn': the encoder returned list, expected a numeric array"]),
    ("recall-embed-fn-returns-nan", {"recall_embed_fn": _bad_embed("nan"), "metrics": ["recall"]}, OptionError, ["option 'recall_embed_fn': the encoder returned a NaN"]),
    ("meteor-fn-not-callable", {"meteor_fn": 5, "metrics": ["meteor"]}, OptionError, ["option 'meteor_fn': expected a callable, got 5"]),
    ("meteor-fn-returns-nan", {"meteor_fn": lambda c, r: NAN, "metrics": ["meteor"]}, OptionError, ["option 'meteor_fn': expected a finite number", "nan"]),
    ("text-model-path-not-a-folder", {"embed_fn": None, "text_model_path": "/nonexistent/minilm", "metrics": ["ss"]}, PerckitError,
     ["text_model_path='/nonexistent/minilm' is not a folder", "all-MiniLM-L6-v2"]),
    ("bert-model-path-missing", {"recall_text_encoder": "bert-base-uncased-meanpool", "bert_model_path": None, "metrics": ["recall"]}, PerckitError,
     ["bert_model_path=<folder>", "M4SEG_BERT_MODEL"]),
]


@pytest.mark.parametrize("options, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in OPTION_CASES])
def test_m4seg_metric_options(m4_metric, monkeypatch, options, error, patterns):
    monkeypatch.delenv("M4SEG_BERT_MODEL", raising=False)
    options = {**STUB, **options}
    expect(lambda: m4_metric.compute(predictions=[S1_PRED], references=[S1_REF], **options), error, *patterns)


def test_m4seg_missing_id_strict_by_default_lax_scores_empty_and_counts():
    refs = [S1_REF, S2_REF]
    expect(lambda: core.compute([S1_PRED], refs, **STUB), PredictionError, r"no prediction for 1 reference example_id.*'s2'", "strict=False")
    out = core.compute([S1_PRED], refs, strict=False, **STUB)
    empty = core.compute([S1_PRED, {"example_id": "s2", "a": "", "groundings": []}], refs, **STUB)
    assert out["num_missing_predictions"] == 1 and empty["num_missing_predictions"] == 0 and out["num_samples"] == 2
    rows = {r["example_id"]: r for r in out["per_sample"]}
    assert rows["s2"]["miou"] == 0.0 and rows["s2"]["num_pred"] == 0 and rows["s2"]["ss"] == 0.0  # scored as an empty prediction
    assert {k: v for k, v in out.items() if k not in ("num_missing_predictions", "options")} == {
        k: v for k, v in empty.items() if k not in ("num_missing_predictions", "options")}
    # an unknown or duplicated id raises in both modes
    for strict in (True, False):
        expect(lambda: core.compute([S1_PRED, pred(example_id="zz")], refs, strict=strict, **STUB), PredictionError, "'zz' is unknown")
        expect(lambda: core.compute([S1_PRED, S1_PRED], refs, strict=strict, **STUB), PredictionError, "duplicate example_id 's1'")


def test_m4seg_metric_lax_mode_through_evaluate(m4_metric):
    """Through evaluate every reference has a row, so lax mode changes nothing there: the count is 0."""
    out = m4_metric.compute(predictions=[S1_PRED], references=[S1_REF], strict=False, **STUB)
    assert out["num_missing_predictions"] == 0 and out["miou"] == 0.75


def test_m4seg_non_finite_values_have_no_float_field_to_hide_in():
    """Predictions carry no float: every number (image_index, mask sizes) is an int, so NaN / inf are refused
    (cases image-index-nan, mask-size-nan); non-finite embeddings and METEOR scores are refused too."""
    from perckit.m4seg.features import prediction_schema, reference_schema

    def dtypes(schema):
        out = []
        for v in (schema.values() if isinstance(schema, dict) else [schema]):
            if isinstance(v, list):
                out += dtypes(v[0])
            elif isinstance(v, dict):
                out += dtypes(v)
            else:
                out.append(v.dtype)
        return out

    assert not {d for d in dtypes(prediction_schema()) + dtypes(reference_schema()) if "float" in d}


# ================================================================ prediction files and model output


def _write(tmp_path: Path, name: str, data) -> Path:
    p = tmp_path / name
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    return p


def _line(**kw) -> str:
    row = {"example_id": "s1", "a": "chair", "groundings": [{"image_index": 1, "name": "chair", "segmentation": R("022", (1, 4))}]}
    row.update(kw)
    return json.dumps(row)


A = np.zeros((1, 4), dtype=bool)
TEXT = "The <p> red chair </p> [SEG] (IMAGE1) is near <p>the cup</p> [SEG](IMAGE2)."

FILE_CASES = [
    # id, make(tmp_path) -> callable, error, patterns
    ("jsonl-missing", lambda t: lambda: m4io.load_predictions_jsonl(t / "nope.jsonl"), InputNotFoundError, [r"predictions file .*nope\.jsonl.* not found"]),
    ("jsonl-a-folder", lambda t: lambda: m4io.load_predictions_jsonl(t), InputNotFoundError, ["predictions file", "not found"]),
    ("jsonl-not-utf8", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", NOT_UTF8)), PredictionError, [r"p\.jsonl' line 1", "expected UTF-8 JSON lines"]),
    ("jsonl-line-truncated", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", _line() + "\n" + _line()[:30])), PredictionError,
     [r"p\.jsonl' line 2: expected a JSON object, got a parse error: JSONDecodeError"]),
    ("jsonl-nested-deep", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", DEEP_JSON)), PredictionError, [r"p\.jsonl' line 1", "RecursionError"]),
    ("jsonl-integer-of-5000-digits", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", HUGE_INT_JSON)), PredictionError, [r"p\.jsonl' line 1", "digits"]),
    ("jsonl-line-an-array", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", "[1, 2]")), PredictionError,
     [r"p\.jsonl' line 1: expected a JSON object, got list: \[1, 2\]"]),
    ("jsonl-example-id-a-list", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", _line(example_id=["s1"]))), PredictionError,
     [r"line 1: example_id: expected a string, found \['s1'\]"]),
    ("jsonl-answer-a-number", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", _line(a=5))), PredictionError, ["line 1: a: expected a string, found 5"]),
    ("jsonl-groundings-a-dict", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", _line(groundings={}))), PredictionError, ["line 1: groundings: expected a list"]),
    ("jsonl-image-index-nan", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", _line().replace('"image_index": 1', '"image_index": NaN'))),
     PredictionError, [r"line 1: groundings\[0\]\.image_index: expected an integer", "nan"]),
    ("jsonl-name-a-number", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", _line(groundings=[{"image_index": 1, "name": 3, "segmentation": R("04", (1, 4))}]))),
     PredictionError, [r"line 1: groundings\[0\]\.name: expected a string, found 3"]),
    ("jsonl-mask-huge-size", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", _line(groundings=[{"image_index": 1, "segmentation": HUGE_RLE}]))),
     PredictionError, [r"line 1: groundings\[0\]\.segmentation", "exceeds the limit"]),
    ("jsonl-mask-counts-malformed", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", _line(groundings=[{"image_index": 1, "segmentation": R("9", (1, 4))}]))),
     PredictionError, [r"line 1: groundings\[0\]\.segmentation", "sum to 9"]),
    ("jsonl-duplicate-id", lambda t: lambda: m4io.load_predictions_jsonl(_write(t, "p.jsonl", _line() + "\n" + _line())), PredictionError,
     [r"line 2: duplicate example_id 's1' \(first on line 1\)"]),
    ("answer-text-bytes", lambda t: lambda: m4io.parse_grounded_answer(TEXT.encode(), [A, A], "s1"), PredictionError, ["prediction 's1': text: expected the model's output as a string"]),
    ("answer-masks-a-number", lambda t: lambda: m4io.parse_grounded_answer(TEXT, 5, "s1"), PredictionError, ["prediction 's1': masks: expected a list of masks", "got 5"]),
    ("answer-masks-one-rle", lambda t: lambda: m4io.parse_grounded_answer(TEXT, R("022", (1, 4)), "s1"), PredictionError, ["prediction 's1': masks: expected a list of masks"]),
    ("answer-masks-a-2d-array", lambda t: lambda: m4io.parse_grounded_answer(TEXT, A, "s1"), PredictionError, [r"masks: expected a list of masks or an \[N, H, W\] array, got an array of shape \(1, 4\)"]),
    ("answer-more-seg-than-masks", lambda t: lambda: m4io.parse_grounded_answer(TEXT, [A], "s1"), PredictionError, [r"2 \[SEG\] token\(s\) but only 1 mask\(s\)"]),
    ("answer-seg-without-image-tag", lambda t: lambda: m4io.parse_grounded_answer("<p>x</p> [SEG] here", [A], "s1"), PredictionError,
     [r"prediction 's1': \[SEG\] #1 \(offset 9\) has no \(IMAGEk\) tag"]),
    ("answer-image-tag-of-5000-digits", lambda t: lambda: m4io.parse_grounded_answer("<p>x</p> [SEG] (IMAGE" + "9" * 5000 + ")", [A], "s1"), PredictionError,
     [r"\[SEG\] #1 \(offset 9\): expected an image index in its \(IMAGEk\) tag, got 5000 digits"]),
    ("answer-mask-a-string", lambda t: lambda: m4io.parse_grounded_answer(TEXT, ["022", A], "s1"), PredictionError, ["prediction 's1': mask 0", "expected an RLE dict"]),
    ("answer-mask-huge-size", lambda t: lambda: m4io.parse_grounded_answer(TEXT, [dict(HUGE_RLE), A], "s1"), PredictionError, ["prediction 's1': mask 0", "exceeds the limit"]),
    ("answer-mask-counts-malformed", lambda t: lambda: m4io.parse_grounded_answer(TEXT, [{"size": [1, 4], "counts": b"0~"}, A], "s1"), PredictionError,
     ["prediction 's1': mask 0", "outside the COCO alphabet"]),
]


@pytest.mark.parametrize("make, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in FILE_CASES])
def test_m4seg_prediction_files(tmp_path, make, error, patterns):
    expect(make(tmp_path), error, *patterns)


def test_m4seg_parse_grounded_answer_accepts_an_array_of_masks_and_leaves_image_0_to_the_metric():
    masks = np.zeros((2, 1, 4), dtype=bool)
    masks[0, 0, :2] = True
    row = m4io.parse_grounded_answer("<p>a</p> [SEG] (IMAGE1) <p>b</p> [SEG] (IMAGE0)", masks, "s1")
    assert [(g["image_index"], g["name"]) for g in row["groundings"]] == [(1, "a"), (0, "b")]
    assert row["groundings"][0]["segmentation"] == R("022", (1, 4))
    err = expect(lambda: core.compute([row], [S1_REF], **STUB), PredictionError, r"groundings\[1\]\.image_index: expected 1\.\.2", "found 0")
    check(err, PredictionError, ["prediction 's1'"])


def test_m4seg_every_case_is_documented():
    """docs/errors.md names every case id of this module in its rows citing ``m4bad::`` (the matrix is the contract)."""
    text = "\n".join(line for line in (REPO / "docs" / "errors.md").read_text(encoding="utf-8").splitlines() if "m4bad::" in line)
    ids = [c[0] for c in NATIVE_CASES + PARQUET_CASES + IMAGE_AND_OPTION_CASES + METRIC_CASES + OPTION_CASES + FILE_CASES]
    missing = [i for i in ids if f"[{i}]" not in text]
    assert not missing, f"cases not in docs/errors.md: {missing}"

