"""The fast native reader (chunked zlib + a compiled item scanner + orjson) against the reference (ijson):
the same rows on the sample releases and on hand-made edge cases, the same messages where it falls back."""

from __future__ import annotations

import gzip
import json
import logging

import pytest

from perckit.errors import ReleaseFormatError
from perckit.m4seg import native_fast
from perckit.m4seg import native_reader
from perckit.m4seg import release
from perckit.sample_releases import write_release

pytestmark = pytest.mark.skipif(not native_fast.available(), reason="the fast native path needs numba")


def _rows(path, split="train", nproc=1, fast=True, size_order="auto"):
    """(rows, error message) of reading ``path`` with the fast path on or off, shards as the builder makes."""
    old = native_reader.FAST_NATIVE
    native_reader.FAST_NATIVE = fast
    out = []
    try:
        scan = release.scan_native(open, str(path), split, need_count=nproc > 1, size_order=size_order)
        for shard in release.native_shards(str(path), scan, nproc):
            out.extend(release.iter_native(open, [shard], split, size_order))
    except ReleaseFormatError as e:
        return out, str(e)
    finally:
        native_reader.FAST_NATIVE = old
    return out, None


def _fallbacks(monkeypatch):
    calls = []
    orig = native_reader._reference_rows

    def spy(opener, ctx, convert_from):
        calls.append(convert_from)
        return orig(opener, ctx, convert_from)

    monkeypatch.setattr(native_reader, "_reference_rows", spy)
    return calls


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("m4seg_fast")
    write_release("m4seg", root, seed=0, train_rows=300, test_rows=10, shards=2)
    return root


@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("nproc", [1, 3])
def test_fast_rows_equal_the_reference_on_the_sample(sample, split, nproc, monkeypatch):
    path = release.native_path(sample, split)
    ref, err = _rows(path, split, nproc, fast=False)
    assert err is None
    calls = _fallbacks(monkeypatch)
    fast, err = _rows(path, split, nproc, fast=True)
    assert err is None
    assert fast == ref
    assert calls == []  # the sample never needs the reference reader


def _write(tmp_path, payload: bytes, name="m4seg_train.json.gz"):
    path = tmp_path / name
    path.write_bytes(gzip.compress(payload))
    return path


def _example(i, **extra):
    ex = {
        "example_id": f"e{i}", "q": "Where is the cat?", "a": "The cat_101 is here.",
        "image_paths": [f"img/{i}.jpg"], "image_sizes": [[4, 6]],
        "groundings": {"img_1": [{"name": "cat", "segmentation": {"size": [4, 6], "counts": [3, 2, 19]},
                                  "answer_span": [4, 11]}]},
    }
    ex.update(extra)
    return ex


def _dump(examples, sep=",\n"):
    return ("[" + sep.join(json.dumps(e, ensure_ascii=False) for e in examples) + "]").encode()


EDGE_CASES = {
    "plain": _dump([_example(i) for i in range(5)]),
    "bom": b"\xef\xbb\xbf" + _dump([_example(i) for i in range(3)]),
    "blank_layout": b" \n\t[ " + _dump([_example(i) for i in range(3)], sep=" ,\r\n ")[1:-1] + b" ]\n ",
    "ascii_escapes": ("[" + ",".join(json.dumps(_example(i, q="caf\u00e9 \"x\" \\ y: {[", a="The cat_101 is \u00e9 here.")) for i in range(3)) + "]").encode(),
    "lone_surrogate": b'[' + json.dumps(_example(0)).encode()[:-1] + b', "note": "\\ud800 x"}]',
    "big_int": b'[' + json.dumps(_example(0)).encode()[:-1] + b', "big": 12345678901234567890123}]',
    "u64_int": b'[' + json.dumps(_example(0)).encode()[:-1] + b', "big": 18446744073709551615}]',
    "long_float": b'[' + json.dumps(_example(0)).encode()[:-1] + b', "f": 0.12345678901234567890123}]',
    "colon_escape": b'[' + json.dumps(_example(0, q="a\\u003ab")).encode().replace(b"\\\\u003a", b"\\u003a") + b"]",
    "repeated_key": b'[' + json.dumps(_example(0)).encode() + b"," + json.dumps(_example(1)).encode()[:-1] + b', "q": "again"}]',
    "repeated_nested_key": b"[" + json.dumps(_example(0)).encode().replace(b'"name": "cat"', b'"name": "cat", "name": "dog"') + b"]",
    "repeated_key_masked_by_escaped_colon": b"[" + json.dumps(_example(0)).encode()[:-1] + b', "q": "x\\u003ay"}]',
    "not_an_object": b"[" + json.dumps(_example(0)).encode() + b", 3]",
    "missing_comma": b"[" + json.dumps(_example(0)).encode() + json.dumps(_example(1)).encode() + b"]",
    "trailing_garbage": _dump([_example(0)]) + b" x",
    "truncated_json": _dump([_example(i) for i in range(3)])[:-40],
    "unclosed_list": _dump([_example(0)])[:-1],
    "empty_list": b"[]",
    "bad_json_late": _dump([_example(i) for i in range(4)])[:-2] + b"tru}]",
    "bad_row_early": _dump([_example(0), _example(1, image_paths=["/abs.jpg"]), _example(2)]),
    "bad_row_then_bad_json": _dump([_example(0), _example(1, image_paths=["/abs.jpg"])])[:-1] + b", {]",
    "bom_inside": _dump([_example(0)])[:-1] + b", \xef\xbb\xbf" + json.dumps(_example(1)).encode() + b"]",
    "deep": b"[" + json.dumps(_example(0)).encode()[:-1] + b', "deep": ' + b"[" * 70 + b"]" * 70 + b"}]",
    "control_char": b"[" + json.dumps(_example(0)).encode()[:-1] + b', "q": "a\tb"}]',
    "invalid_utf8": b"[" + json.dumps(_example(0)).encode()[:-1] + b', "q": "a\xff"}]',
    "duplicate_ids": _dump([_example(0), _example(0)]),
}


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_fast_path_equals_the_reference_on_edge_cases(tmp_path, case, monkeypatch):
    path = _write(tmp_path, EDGE_CASES[case])
    ref = _rows(path, fast=False)
    fast = _rows(path, fast=True)
    assert fast[1] == ref[1]
    if ref[1] is None:
        assert fast[0] == ref[0]


@pytest.mark.parametrize("case", ["trailing_gzip_bytes", "two_members", "cut_gzip", "corrupt_gzip"])
def test_fast_path_equals_the_reference_on_gzip_damage(tmp_path, case):
    body = gzip.compress(_dump([_example(i) for i in range(50)]))
    data = {
        "trailing_gzip_bytes": body + b"junk",
        "two_members": gzip.compress(_dump([_example(0)])[:-1] + b",") + gzip.compress(json.dumps(_example(1)).encode() + b"]"),
        "cut_gzip": body[: len(body) // 2],
        "corrupt_gzip": body[:20] + bytes(b ^ 0x55 for b in body[20:40]) + body[40:],
    }[case]
    path = tmp_path / "m4seg_train.json.gz"
    path.write_bytes(data)
    ref = _rows(path, fast=False)
    fast = _rows(path, fast=True)
    assert fast[1] == ref[1]
    if ref[1] is None:
        assert fast[0] == ref[0]


def test_examples_split_across_chunks_and_small_reads(tmp_path, monkeypatch):
    examples = [_example(i, a="The cat_101 is here. " + "x" * (i * 37 % 500)) for i in range(200)]
    path = _write(tmp_path, b"\xef\xbb\xbf" + _dump(examples))
    ref = _rows(path, fast=False)
    monkeypatch.setattr(native_fast, "CHUNK_BYTES", 97)
    monkeypatch.setattr(native_fast, "READ_BYTES", 13)
    calls = _fallbacks(monkeypatch)
    for nproc in (1, 4):
        assert _rows(path, nproc=nproc, fast=True) == ref
    assert calls == []


def test_an_example_longer_than_the_fast_limit_is_read_by_the_reference(tmp_path, monkeypatch):
    path = _write(tmp_path, _dump([_example(0), _example(1, q="y" * 5000), _example(2)]))
    monkeypatch.setattr(native_fast, "MAX_FAST_EXAMPLE", 1000)
    monkeypatch.setattr(native_fast, "CHUNK_BYTES", 512)
    ref = _rows(path, fast=False)
    calls = _fallbacks(monkeypatch)
    assert _rows(path, fast=True) == ref
    assert calls == [1]


def test_warnings_are_logged_once_across_a_fallback(tmp_path, caplog):
    swapped = _example(0, image_sizes=[[6, 4]])
    path = _write(tmp_path, _dump([swapped, _example(1), _example(2, image_paths=["/abs.jpg"])]))
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg.release"):
        rows, err = _rows(path, fast=True)
    assert "absolute path" in err
    assert sum("matches its masks' size only as [W, H]" in r.getMessage() for r in caplog.records) == 1
