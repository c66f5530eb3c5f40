"""Issue 13 for M4Seg: no path of a release leaves its root, hostile compressed files stay bounded, a JSON
object that repeats a key is an error, and a UTF-8 BOM is skipped only at the start of a stream.

Builder cases run on the two-example test split of tests/helpers/m4seg.py (``m4_small``; native and Parquet give
identical rows); every case id is a row of docs/errors.md (``m4trust::``)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.common import REPO
from helpers.harness import check, documented_error
from helpers.m4seg import NATIVE, SHARD, build_test_split, parquet_records, small_examples, write_parquet

from perckit.errors import InputNotFoundError, PredictionError, ReleaseFormatError, ReleaseNotFoundError
from perckit.m4seg.read import images as m4images
from perckit.m4seg.read import predictions as m4io
from perckit.m4seg.read import native as m4native

PRE, GEN = "before generation", "during generation"
EX0 = r"M4Seg test split, m4seg_test\.json\.gz: example '7'"
ROW0 = r"M4Seg test split, test-00000-of-00001\.parquet: example '7'"


def write_native(root: Path, examples: list, raw: bytes | None = None) -> None:
    (root / NATIVE).write_bytes(gzip.compress(raw if raw is not None else json.dumps(examples).encode()))


def with_examples(fn):
    def edit(root: Path, tmp: Path) -> dict:
        ex = small_examples()
        fn(ex)
        write_native(root, ex)
        write_parquet(root / SHARD, _parquet_records_unchecked(ex))
        return {}
    return edit


def _parquet_records_unchecked(examples: list) -> list:
    """The Parquet records of ``examples`` whose image paths may be hostile (the native converter refuses them)."""
    paths = [list(e["image_paths"]) for e in examples]
    safe = [dict(e, image_paths=[f"x/{k}.jpg" for k in range(len(e["image_paths"]))]) for e in examples]
    recs = parquet_records(safe)
    for r, ps in zip(recs, paths):
        for im, p in zip(r["images"], ps):
            im["path"] = p
    return recs


def set_path(i: int, k: int, value: str):
    def fn(ex: list) -> None:
        ex[i]["image_paths"][k] = value
    return fn


def expect_build(root: Path, tmp: Path, source: str, options: dict, error: type, stage: str, patterns) -> BaseException:
    with pytest.raises(Exception) as info:
        build_test_split(root, tmp / "cache", source, **options)
    err = documented_error(info.value)
    check(err, error, patterns)
    if stage == PRE:
        assert info.value is err, f"expected {error.__name__} before generation, got it wrapped in {type(info.value).__name__}"
    return err


@pytest.fixture
def rel(m4_small, tmp_path) -> Path:
    root = tmp_path / "release"
    shutil.copytree(m4_small, root)
    return root


# ================================================================ section 2: paths stay inside their root

PATH_CASES = [
    ("image-path-absolute", "/etc/passwd", "the absolute path '/etc/passwd'"),
    ("image-path-dotdot", "../../../etc/passwd", r"a '\.\.' component leaves it"),
    ("image-path-backslash-dotdot", "coco_2017\\..\\..\\..\\etc\\passwd", r"a '\.\.' component leaves it"),
    ("image-path-drive-letter", "C:/Windows/win.ini", "the absolute path 'C:/Windows/win.ini'"),
    ("image-path-nul", "coco_2017/a\x00.jpg", "a NUL byte"),
]


@pytest.mark.parametrize("source", ["native", "parquet"])
@pytest.mark.parametrize("value, says", [pytest.param(*c[1:], id=c[0]) for c in PATH_CASES])
@pytest.mark.parametrize("with_image_root", [False, True], ids=["no-image-root", "image-root"])
def test_image_path_leaving_the_root(rel, tmp_path, source, value, says, with_image_root):
    """An image path that is absolute or climbs out is refused before generation, naming the file, the example
    and the field, whether or not the build embeds images (it never reaches a row)."""
    with_examples(set_path(0, 1, value))(rel, tmp_path)
    options = {"image_root": str(tmp_path)} if with_image_root else {}
    field = r"image_paths\[1\]" if source == "native" else r"images\[1\]\.path"
    expect_build(rel, tmp_path, source, options, ReleaseFormatError, PRE, [EX0 if source == "native" else ROW0, field, says])


def _image_root_with(tmp_path: Path, plant) -> Path:
    """An image root holding every image of the small release, then edited by ``plant(root)``."""
    root = tmp_path / "images"
    for ex in small_examples():
        for p in ex["image_paths"]:
            (root / p).parent.mkdir(parents=True, exist_ok=True)
            (root / p).write_bytes(b"\xff\xd8\xff\xe0 jpeg")
    plant(root)
    return root


def _link_folder_out(root: Path) -> None:
    outside = root.parent / "outside" / "val2017"
    outside.mkdir(parents=True)
    (outside / "000000000001.jpg").write_bytes(b"SECRET")
    (outside / "000000000002.jpg").write_bytes(b"SECRET")
    shutil.rmtree(root / "coco_2017" / "val2017")
    os.symlink(outside, root / "coco_2017" / "val2017")


def _link_file_out(root: Path) -> None:
    secret = root.parent / "secret.txt"
    secret.write_bytes(b"SECRET")
    (root / "coco_2017/val2017/000000000002.jpg").unlink()
    os.symlink(secret, root / "coco_2017/val2017/000000000002.jpg")


def _link_dev_zero(root: Path) -> None:
    (root / "coco_2017/val2017/000000000002.jpg").unlink()
    os.symlink("/dev/zero", root / "coco_2017/val2017/000000000002.jpg")


def _fifo(root: Path) -> None:
    (root / "coco_2017/val2017/000000000002.jpg").unlink()
    os.mkfifo(root / "coco_2017/val2017/000000000002.jpg")


IMAGE_ROOT_CASES = [
    ("image-folder-symlinked-out", _link_folder_out, ReleaseFormatError, [r"image_paths\[0\]", "a symbolic link leaves the root"]),
    ("image-file-symlinked-out", _link_file_out, ReleaseFormatError, [r"image_paths\[1\]", "a symbolic link leaves the root"]),
    ("image-symlinked-to-dev-zero", _link_dev_zero, ReleaseFormatError, [r"image_paths\[1\]", "resolves to '/dev/zero'"]),
    ("image-a-fifo", _fifo, ReleaseFormatError, [r"image_paths\[1\]", "expected a regular image file under image_root"]),
]


@pytest.mark.parametrize("plant, error, patterns", [pytest.param(*c[1:], id=c[0]) for c in IMAGE_ROOT_CASES])
def test_image_root_planted_files(rel, tmp_path, plant, error, patterns):
    """Symbolic links out of image_root, /dev/zero and a FIFO planted as images are refused before generation
    (quickly: nothing is opened for reading), naming the file, the example and the field; no bytes of a file
    outside the root reach a row."""
    image_root = _image_root_with(tmp_path, plant)
    t = time.monotonic()
    expect_build(rel, tmp_path, "native", {"image_root": str(image_root)}, error, PRE,
                 [r"M4Seg test split, m4seg_test\.json\.gz: example 0 \(7\)", *patterns])
    assert time.monotonic() - t < 60


def test_read_image_bytes_refuses_before_reading(tmp_path, monkeypatch):
    """The generation-time reader (a second line behind the check of every path before generation): links out,
    FIFOs, devices and files over MAX_IMAGE_BYTES are refused without reading them; a good image is read."""
    root = tmp_path / "img"
    root.mkdir()
    (root / "ok.jpg").write_bytes(b"JPEG")
    os.mkfifo(root / "fifo.jpg")
    os.symlink("/dev/zero", root / "zero.jpg")
    os.symlink("/etc/hostname", root / "out.jpg")
    (root / "big.jpg").write_bytes(b"x" * 100)
    w = "M4Seg test split: example '7': images[0].path"
    assert m4images.read_image_bytes(open, root, "ok.jpg", w) == {"path": "ok.jpg", "bytes": b"JPEG"}
    with pytest.raises(ReleaseFormatError, match="got a FIFO"):
        m4images.read_image_bytes(open, root, "fifo.jpg", w)
    with pytest.raises(ReleaseFormatError, match="a symbolic link leaves the root"):
        m4images.read_image_bytes(open, root, "zero.jpg", w)
    with pytest.raises(ReleaseFormatError, match="a symbolic link leaves the root"):
        m4images.read_image_bytes(open, root, "out.jpg", w)
    with pytest.raises(ReleaseFormatError, match=r"images\[0\]\.path.*the absolute path"):
        m4images.read_image_bytes(open, root, "/etc/hostname", w)
    monkeypatch.setattr(m4images, "MAX_IMAGE_BYTES", 10)
    with pytest.raises(ReleaseFormatError, match="holds 100 bytes, more than the limit of 10 bytes"):
        m4images.read_image_bytes(open, root, "big.jpg", w)
    with pytest.raises(ReleaseNotFoundError, match="source image 'nope.jpg' not found under image_root"):
        m4images.read_image_bytes(open, root, "nope.jpg", w)


def _shard_linked_out(root: Path, tmp: Path) -> None:
    outside = tmp / "elsewhere.parquet"
    shutil.move(root / SHARD, outside)
    os.symlink(outside, root / SHARD)


def _data_linked_out(root: Path, tmp: Path) -> None:
    shutil.move(root / "data", tmp / "elsewhere")
    os.symlink(tmp / "elsewhere", root / "data")


def _native_linked_out(root: Path, tmp: Path) -> None:
    shutil.move(root / NATIVE, tmp / "elsewhere.json.gz")
    os.symlink(tmp / "elsewhere.json.gz", root / NATIVE)


def _shard_a_fifo(root: Path, tmp: Path) -> None:
    (root / SHARD).unlink()
    os.mkfifo(root / SHARD)


RELEASE_FILE_CASES = [
    ("shard-symlinked-out", "parquet", _shard_linked_out, [r"release file 'data/test-00000-of-00001\.parquet'", "a symbolic link leaves the root"]),
    ("data-folder-symlinked-out", "parquet", _data_linked_out, [r"release file 'data/test-00000-of-00001\.parquet'", "a symbolic link leaves the root"]),
    ("native-file-symlinked-out", "native", _native_linked_out, [r"release file 'annotations/m4seg_test\.json\.gz'", "a symbolic link leaves the root"]),
    ("shard-a-fifo", "parquet", _shard_a_fifo, [r"release file 'data/test-00000-of-00001\.parquet'", "expected a regular file, got a FIFO"]),
]


@pytest.mark.parametrize("source, edit, patterns", [pytest.param(*c[1:], id=c[0]) for c in RELEASE_FILE_CASES])
def test_release_files_stay_inside_data_dir(rel, tmp_path, source, edit, patterns):
    """A shard (or data/, or the native file) linked out of the data_dir folder, or a FIFO named like a shard,
    is refused before anything is read."""
    edit(rel, tmp_path)
    expect_build(rel, tmp_path, source, {}, ReleaseFormatError, PRE, patterns)


# ================================================================ section 3: the prepass stays bounded

_PREPASS_CHILD = textwrap.dedent("""
    import gzip, json, sys, tracemalloc
    from perckit.m4seg.read import native as m4native
    # warm up (lazy imports: pycocotools) on a one-example copy, then trace the real prepass
    small = sys.argv[1] + ".small.gz"
    with gzip.open(small, "wb") as f:
        f.write(json.dumps([json.loads(sys.argv[2])]).encode())
    m4native.scan_native(open, small, "test", need_count=True)
    tracemalloc.start()
    scan = m4native.scan_native(open, sys.argv[1], "test", need_count=True)
    print(tracemalloc.get_traced_memory()[1], scan.count)
""")


def test_prepass_memory_is_bounded_when_the_key_stops_appearing(tmp_path):
    """A gzip of a few hundred KB that decompresses to 256 MiB, with no key after the first example (JSON
    whitespace between the examples, which the per-example size cap does not count): peak traced memory of
    the prepass in a fresh process stays far below the stream size (a regex prepass once kept everything
    after the last key between reads)."""
    first = small_examples()[0]
    first["example_id"] = "7"
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(b"[" + json.dumps(first).encode())
        blank = b" " * (1 << 20)
        for _ in range(256):
            f.write(blank)
        f.write(b"]")
    assert path.stat().st_size < 1_000_000
    out = subprocess.run([sys.executable, "-c", _PREPASS_CHILD, str(path), json.dumps(first)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    peak, count = out.stdout.split()
    assert count == "1"
    assert int(peak) < 48 << 20, f"the prepass peaked at {int(peak) >> 20} MiB of traced memory"


# ================================================================ section 4: repeated keys are errors


def _dup(example: int, key_json: str, insert_after: str):
    """Write the native file with ``key_json`` inserted before the first ``insert_after`` of example ``example``."""
    def edit(root: Path, tmp: Path) -> dict:
        parts = json.dumps(small_examples()).split('{"pair_id"')  # parts[1], parts[2]: the two examples
        parts[example + 1] = parts[example + 1].replace(insert_after, key_json + insert_after, 1)
        write_native(root, [], raw='{"pair_id"'.join(parts).encode())
        return {}
    return edit


DUP_CASES = [
    ("repeated-example-id", 0, '"example_id": "a", "example_id": "b", ', '"q": ', r"example 0 \('b'\)", PRE, "example_id"),
    ("repeated-image-paths-example-1", 1, '"image_paths": ["x.jpg"], ', '"q": ', r"example 1 \('pas_0000008'\)", GEN, "image_paths"),
    ("repeated-image-paths-example-0", 0, '"image_paths": ["x.jpg"], ', '"q": ', r"example 0 \(7\)", PRE, "image_paths"),
    ("repeated-key-in-a-grounding", 0, '"name": "stool", ', '"name": ', r"example 0 \(7\)", PRE, "name"),
]


@pytest.mark.parametrize("example, key_json, after, where, stage, key", [pytest.param(*c[1:], id=c[0]) for c in DUP_CASES])
@pytest.mark.parametrize("num_proc", [1, 2])
def test_native_repeated_keys(rel, tmp_path, example, key_json, after, where, stage, key, num_proc):
    """A native example (or any object in it) that repeats a key is a ReleaseFormatError naming the example and
    the key (orjson keeps the last value silently); with num_proc=2 too, where the prepass reads the ids first."""
    _dup(example, key_json, after)(rel, tmp_path)
    from perckit.hf.entrypoints import builder_class

    patterns = [where, f"a JSON object repeats the key '{key}'", "expected every key once"]
    if num_proc == 1:
        expect_build(rel, tmp_path, "native", {}, ReleaseFormatError, stage, patterns)
        return
    b = builder_class("m4seg")(config_name="default", data_dir=str(rel), cache_dir=str(tmp_path / "c2"), source="native", splits=("test",))
    with pytest.raises(Exception) as info:
        b.download_and_prepare(num_proc=2)
    if stage == PRE:
        check(documented_error(info.value), ReleaseFormatError, patterns)
    else:
        # raised in a worker process (datasets keeps only its traceback text); the prepass saw two examples
        assert "DatasetGenerationError" in type(info.value).__name__ or isinstance(info.value, ReleaseFormatError)
        scan = m4native.scan_native(open, str(rel / NATIVE), "test", need_count=True)
        assert scan.count == 2


def test_prediction_jsonl_repeated_key(tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_text('{"example_id": "s1", "a": "", "groundings": [], "example_id": "s2"}\n')
    with pytest.raises(PredictionError, match=r"p\.jsonl' line 1: duplicate key 'example_id' in a JSON object"):
        m4io.load_predictions_jsonl(p)


# ================================================================ section 5: BOM


def test_native_with_a_leading_bom_builds_the_same_rows(rel, m4_small, tmp_path):
    write_native(rel, [], raw=b"\xef\xbb\xbf" + json.dumps(small_examples()).encode())
    assert build_test_split(rel, tmp_path / "bom", "native").to_list() == build_test_split(m4_small, tmp_path / "plain", "native").to_list()
    scan = m4native.scan_native(open, str(rel / NATIVE), "test", need_count=True)  # the prepass skips the BOM too
    assert scan.count == 2 and scan.occurrence is not None


def test_native_bom_in_the_middle_is_refused_with_its_offset(rel, tmp_path):
    text = json.dumps(small_examples())
    cut = text.index('{"pair_id": "pas_0000008"')
    write_native(rel, [], raw=text[:cut].encode() + b"\xef\xbb\xbf" + text[cut:].encode())
    expect_build(rel, tmp_path, "native", {}, ReleaseFormatError, GEN,
                 [r"m4seg_test\.json\.gz: a UTF-8 byte-order mark at byte " + str(len(text[:cut].encode())) +
                  " of the decompressed JSON, outside a string"])


def test_native_bom_inside_a_string_is_a_character(rel, tmp_path):
    ex = small_examples()
    ex[0]["q"] = "\ufeffWhich objects?"
    write_native(rel, [], raw=json.dumps(ex, ensure_ascii=False).encode())
    assert build_test_split(rel, tmp_path / "c", "native")[0]["q"] == "\ufeffWhich objects?"


def test_prediction_jsonl_bom(tmp_path):
    line = '{"example_id": "s1", "a": "a", "groundings": []}'
    p = tmp_path / "p.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + line.encode() + b"\n" + line.replace("s1", "s2").encode() + b"\n")
    assert [r["example_id"] for r in m4io.load_predictions_jsonl(p)] == ["s1", "s2"]
    p.write_bytes(line.encode() + b"\n\xef\xbb\xbf" + line.replace("s1", "s2").encode() + b"\n")
    with pytest.raises(PredictionError, match=r"p\.jsonl' line 2: expected a JSON object, got a byte-order mark \(U\+FEFF\) at the start of the line"):
        m4io.load_predictions_jsonl(p)
    os.unlink(p)
    os.mkfifo(p)
    with pytest.raises(PredictionError, match="expected a regular file, got a FIFO"):
        m4io.load_predictions_jsonl(p)
    with pytest.raises(InputNotFoundError, match="not found"):
        m4io.load_predictions_jsonl(tmp_path / "nope.jsonl")


def test_every_trust_case_is_documented():
    text = "\n".join(line for line in (REPO / "docs" / "errors.md").read_text(encoding="utf-8").splitlines() if "m4trust::" in line)
    ids = [c[0] for c in PATH_CASES + IMAGE_ROOT_CASES + RELEASE_FILE_CASES + DUP_CASES]
    missing = [i for i in ids if f"[{i}]" not in text]
    assert not missing, f"cases not in docs/errors.md: {missing}"
