"""The native reader (the scan of the decompressed stream into items, orjson per item) on the sample releases and on
hand-made edge cases: golden rows and messages, the same with the examples split into shards
(``num_proc`` > 1: the prepass, then each shard parses and drops the examples before it); and the
row-conversion shortcuts of :mod:`perckit.m4seg.rows` against the functions they stand for."""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import random

import pytest

from perckit.errors import ReleaseFormatError
from perckit.m4seg import layout as m4layout
from perckit.m4seg.read import native as m4native
from perckit.samples import write_release


def _rows(path, split="train", nproc=1, size_order="auto"):
    """(rows, error message) of reading ``path``, in shards as the builder makes them."""
    out = []
    try:
        scan = m4native.scan_native(open, str(path), split, need_count=nproc > 1, size_order=size_order)
        for shard in m4native.native_shards(str(path), scan, nproc):
            out.extend(m4native.iter_native(open, [shard], split, size_order))
    except ReleaseFormatError as e:
        return out, str(e)
    return out, None


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("m4seg_native")
    write_release("m4seg", root, seed=0, train_rows=300, test_rows=10, shards=2)
    return root


@pytest.mark.parametrize("split, count", [("train", 300), ("test", 10)])
def test_sample_rows_are_the_same_in_shards(sample, split, count):
    path = m4layout.native_path(sample, split)
    one, err = _rows(path, split, 1)
    assert err is None and len(one) == count
    assert len({r["example_id"] for r in one}) == count
    three, err = _rows(path, split, 3)
    assert err is None and three == one


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



_JSON = "invalid JSON at byte "
#: case -> (example ids read before the error, a fragment of the message or None); num_proc 1 and 3 agree
#: unless the third entry gives the num_proc=3 outcome (the prepass parses the whole file first: invalid JSON
#: anywhere is refused before any row, with the same message).
EDGE_OUTCOMES = {
    "plain": (["e0", "e1", "e2", "e3", "e4"], None),
    "bom": (["e0", "e1", "e2"], None),
    "blank_layout": (["e0", "e1", "e2"], None),
    "ascii_escapes": (["e0", "e1", "e2"], None),
    # (ijson read "\ud800" as "?" and a lone low surrogate as a UnicodeDecodeError; orjson refuses both)
    "lone_surrogate": ([], "example 0: " + _JSON + "265 of the decompressed JSON: no low surrogate in string (a lone UTF-16 surrogate escape"),
    "big_int": ([], "example 0: " + _JSON + "263 of the decompressed JSON: an integer of 23 digits ('12345678901234567890123') "
                "outside the signed 64-bit range (integer overflow)"),
    "u64_int": ([], "example 0: " + _JSON + "263 of the decompressed JSON: an integer of 20 digits ('18446744073709551615') "
                "outside the signed 64-bit range (integer overflow)"),
    "long_float": (["e0"], None),
    "colon_escape": (["e0"], None),
    "repeated_key": (["e0"], "example 1 ('e1'): a JSON object repeats the key 'q'; expected every key once"),
    "repeated_nested_key": ([], "example 0 ('e0'): a JSON object repeats the key 'name'; expected every key once"),
    "repeated_key_masked_by_escaped_colon": ([], "example 0 ('e0'): a JSON object repeats the key 'q'"),
    "not_an_object": (["e0"], "expected each example to be an object, found 3"),
    "missing_comma": (["e0"], _JSON + "255 of the decompressed JSON: after example 0, expected ',' or ']', found b'{\"example_id\": \"e1\",'",
                      ([], _JSON + "255 of the decompressed JSON: after example 0, expected ',' or ']'")),
    "trailing_garbage": (["e0"], _JSON + "257 of the decompressed JSON: after the closing bracket of the top level, expected nothing but "
                         "whitespace, found b'x'", ([], _JSON + "257 of the decompressed JSON: after the closing bracket")),
    "truncated_json": (["e0", "e1"], _JSON + "728 of the decompressed JSON: the JSON ends inside example 2, before the closing bracket "
                       "of the top level (a truncated file?)", ([], _JSON + "728 of the decompressed JSON: the JSON ends inside example 2")),
    "unclosed_list": (["e0"], _JSON + "255 of the decompressed JSON: the JSON ends after example 0, before the closing bracket",
                      ([], _JSON + "255 of the decompressed JSON: the JSON ends after example 0")),
    "empty_list": ([], None),
    "bad_json_late": (["e0", "e1", "e2"], "example 3: " + _JSON + "1022 of the decompressed JSON: unexpected character, expected ',' or '}'",
                      ([], "example 3: " + _JSON + "1022 of the decompressed JSON: unexpected character")),
    "bad_row_early": (["e0"], "example 'e1': image_paths[0]: expected a path relative to the release root, got the absolute path '/abs.jpg'"),
    "bad_row_then_bad_json": (["e0"], "example 'e1': image_paths[0]: expected a path relative to the release root",
                              ([], "example 2: " + _JSON + "513 of the decompressed JSON: unexpected character, expected a string key")),
    "bom_inside": ([], "a UTF-8 byte-order mark at byte 257 of the decompressed JSON, outside a string"),
    "deep": ([], "JSON nested more than 64 levels deep"),
    "control_char": ([], "example 0: " + _JSON + "263 of the decompressed JSON: unexpected control character in string"),
    "invalid_utf8": ([], "example 0: " + _JSON + "263 of the decompressed JSON: bytes that are not UTF-8 (b'\\xff\"}')"),
    # (the builder's id guard refuses the repeat at num_proc 1; the prepass does at num_proc > 1)
    "duplicate_ids": (["e0", "e0"], None, ([], "duplicate example_id 'e0' (example ids must be unique within a split)")),
}


def _check_outcome(path, got, want):
    rows, err = got
    ids, fragment = want
    assert [r["example_id"] for r in rows] == ids
    if fragment is None:
        assert err is None
    else:
        assert err is not None and err.startswith(f"M4Seg train split, {path.name}: ") and fragment in err, err


def test_edge_cases_cover_every_outcome():
    assert sorted(EDGE_OUTCOMES) == sorted(EDGE_CASES)


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
def test_edge_cases_give_golden_rows_and_messages(tmp_path, case):
    path = _write(tmp_path, EDGE_CASES[case])
    want = EDGE_OUTCOMES[case]
    _check_outcome(path, _rows(path), want[:2])
    _check_outcome(path, _rows(path, nproc=3), want[2] if len(want) > 2 else want[:2])
    if want[1] is None and want[0]:
        rows = _rows(path)[0]
        assert rows[0]["groundings"][0]["segmentation"] == {"size": [4, 6], "counts": "32c0"}
        assert rows[0]["groundings"][0]["bbox"] == [0.0, 0.0, 2.0, 4.0]


@pytest.mark.parametrize("case, ids, fragment", [
    ("trailing_gzip_bytes", [], "unreadable gzip data (BadGzipFile: Not a gzipped file (b'ju'))"),
    ("two_members", ["e0", "e1"], None),  # (gzip reads concatenated members as one stream)
    ("cut_gzip", [], "expected a gzip-compressed JSON file, found unreadable data (EOFError: Compressed file ended"),
    ("corrupt_gzip", [], "expected a gzip-compressed JSON file, found unreadable data (error: Error -3 while decompressing"),
])
def test_gzip_damage_gives_golden_messages(tmp_path, case, ids, fragment):
    body = gzip.compress(_dump([_example(i) for i in range(50)]))
    data = {
        "trailing_gzip_bytes": body + b"junk",
        "two_members": gzip.compress(_dump([_example(0)])[:-1] + b",") + gzip.compress(json.dumps(_example(1)).encode() + b"]"),
        "cut_gzip": body[: len(body) // 2],
        "corrupt_gzip": body[:20] + bytes(b ^ 0x55 for b in body[20:40]) + body[40:],
    }[case]
    path = tmp_path / "m4seg_train.json.gz"
    path.write_bytes(data)
    _check_outcome(path, _rows(path), (ids, fragment))


def test_examples_of_any_length_read_in_shards(tmp_path):
    examples = [_example(i, a="The cat_101 is here. " + "x" * (i * 37 % 500)) for i in range(200)]
    path = _write(tmp_path, b"\xef\xbb\xbf" + _dump(examples))
    one, err = _rows(path)
    assert err is None and [r["example_id"] for r in one] == [f"e{i}" for i in range(200)]
    assert [r["a"] for r in one] == [e["a"] for e in examples]
    assert _rows(path, nproc=4) == (one, None)


def test_warnings_are_logged_once_before_an_error(tmp_path, caplog):
    swapped = _example(0, image_sizes=[[6, 4]])
    path = _write(tmp_path, _dump([swapped, _example(1), _example(2, image_paths=["/abs.jpg"])]))
    with caplog.at_level(logging.WARNING, logger="perckit.m4seg.release"):
        rows, err = _rows(path)
    assert "absolute path" in err and [r["example_id"] for r in rows] == ["e0", "e1"]
    assert sum("matches its masks' size only as [W, H]" in r.getMessage() for r in caplog.records) == 1


def _random_json(rng, depth=0):
    """(JSON text that may repeat keys, the key repeated first in document order or None)."""
    r = rng.random()
    if depth > 4 or r < 0.35:
        return rng.choice(['1', '2.5', 'null', 'true', '"s"', '"a:b{[\\"}"', '"x\\u003ay"', '"' + "z" * rng.randrange(0, 3000) + '"']), None
    first = None
    if r < 0.6:
        parts = []
        for _ in range(rng.randrange(0, 6)):
            text, rep = _random_json(rng, depth + 1)
            parts.append(text)
            first = first or rep
        return "[" + ", ".join(parts) + "]", first
    keys = rng.sample("abcdefghij", rng.randrange(0, 5))
    if keys and rng.random() < 0.03:  # a repeat, rarely
        keys.insert(rng.randrange(len(keys) + 1), rng.choice(keys))
    parts, seen = [], set()
    for k in keys:
        if k in seen and first is None:
            first = k
        seen.add(k)
        text, rep = _random_json(rng, depth + 1)
        parts.append(f'"{k}" : {text}')
        first = first or rep
    return "{" + ", ".join(parts) + "}", first


@pytest.mark.parametrize("kind", ["list", "object"])
def test_read_examples_refuses_exactly_the_items_that_repeat_a_key(tmp_path, kind):
    """The key count (the colons of the text against those of the example's orjson.dumps) finds the first item that
    repeats a key anywhere in it, through reads of 64 KB, scalar items, strings with colons and braces, and both
    top-level kinds; the message names the item and a key it repeats."""
    rng = random.Random(32)
    for trial in range(40):
        items = [_random_json(rng) for _ in range(rng.randrange(1, 60))]
        first = next((i for i, (_, rep) in enumerate(items) if rep), None)
        body = ", ".join(t if kind == "list" else f'"k{i}": {t}' for i, (t, _) in enumerate(items))
        path = _write(tmp_path, ("[" + body + "]" if kind == "list" else "{" + body + "}").encode())
        got = []
        with pytest.raises(ReleaseFormatError) if first is not None else contextlib.nullcontext() as info:
            for _, ex in m4native.read_examples(open, str(path), "w"):
                got.append(ex)
        want = [json.loads(t) for t, _ in items[:first]]
        assert got == want, trial
        if first is not None:
            assert f"w: example {first}" in str(info.value) and "a JSON object repeats the key" in str(info.value)
            key = str(info.value).split("repeats the key ")[1][1]
            assert f'"{key}" :' in items[first][0], trial


def test_plainly_relative_never_accepts_what_check_relative_refuses():
    import random

    from perckit.m4seg import rows
    from perckit.io.paths import check_relative

    rng = random.Random(0)
    alphabet = ["a", "Z", "0", "_", "-", ".", "/", "\\", ":", " ", "\x00", "é", "..", "~"]
    accepted = 0
    for _ in range(20000):
        p = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        if rows._plainly_relative(p):
            accepted += 1
            check_relative(p, "fuzz")  # never raises
    assert accepted > 100
    for p in ("coco_2017/train2017/000000001844.jpg", "Part_Segm/PASCAL-Part/VOCdevkit/2008_004292.jpg", "a-b/c.d"):
        assert rows._plainly_relative(p)
    for p in ("/abs.jpg", "../x.jpg", "a/../b", "C:/x", "a\\b", "./a", "", "x" * 5000, 3, None):
        assert not rows._plainly_relative(p)


def test_batched_bboxes_equal_rle_to_bbox(sample):
    from perckit import rle
    from perckit.m4seg import rows

    masks = [g["segmentation"] for row in _rows(m4layout.native_path(sample, "train"))[0] for g in row["groundings"]]
    assert len(masks) > 255
    assert rows._bboxes(masks) == [rle.to_bbox(m) for m in masks]
    assert rows._bboxes([]) == []


def test_image_stem_equals_os_path():
    import os

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from perckit.m4seg import rows

    @settings(max_examples=500, deadline=None)
    @given(st.text("ab./_-", max_size=12))
    def check(path):
        if rows._plainly_relative(path):
            assert rows._image_stem(path) == os.path.splitext(os.path.basename(path))[0]

    check()
    for p in ("a/b.c.d", "a/.b", "a/..b", "a/b.", "a/b", "a/...", "a.b/c", "x/.b.c"):
        assert rows._image_stem(p) == os.path.splitext(os.path.basename(p))[0]


def test_img_index_equals_img_key_index():
    from perckit.m4seg.metric import codes
    from perckit.m4seg import rows

    for key, k in rows._IMG_INDEX.items():
        assert codes.img_key_index(key) == k
    for key in ("img_0", "img_01", "img_1\n", "img_1000", "img_x", " img_1"):
        assert key not in rows._IMG_INDEX or codes.img_key_index(key) == rows._IMG_INDEX[key]


_QUIRK_BASE = {"pair_id": "p", "q": "q?", "a": "the cat_101 here", "image_paths": ["a/b.jpg"], "image_sizes": [[4, 6]],
               "groundings": {"img_1": [{"name": "cat", "segmentation": {"size": [4, 6], "counts": [3, 2, 19]}, "answer_span": [4, 11]}]}}
_CAT = {"size": [4, 6], "counts": "32c0"}, [0.0, 0.0, 2.0, 4.0]
_TRIANGLE = {"size": [4, 6], "counts": "4131;"}, [1.0, 0.0, 2.0, 2.0]


def _grounding(seg, span):
    return {"groundings": {"img_1": [{"name": "cat", "segmentation": seg, "answer_span": span}]}}


#: (variant of the base example, golden (image_id, answer_span, mask, bbox) or a fragment of the message)
QUIRKS = [
    ({}, ("b", [4, 11], *_CAT)),
    ({"groundings": {"img_01": _QUIRK_BASE["groundings"]["img_1"]}}, ("b", [4, 11], *_CAT)),
    ({"groundings": {"img_1\n": _QUIRK_BASE["groundings"]["img_1"]}}, ("b", [4, 11], *_CAT)),
    ({"image_sizes": [[4.0, 6]]}, ("b", [4, 11], *_CAT)),
    ({"image_sizes": [["4", 6]]}, ("b", [4, 11], *_CAT)),
    ({"image_sizes": [[0, 6]]}, "example 'p': image_sizes[0]: expected a positive height and width, found [H, W] = [0, 6]"),
    (_grounding([[0, 0, True, 0, 3, 3]], [4, 11]), ("b", [4, 11], {"size": [4, 6], "counts": "h0"}, [0.0, 0.0, 0.0, 0.0])),
    (_grounding([[0, 0, 3, 0, 3, 3]], [4, 12]), ("b", [4, 12], *_TRIANGLE)),
    (_grounding([0, 0, 3, 0, 3, 3], [4.0, 11]), ("b", [4, 11], *_TRIANGLE)),
    (_grounding({"size": [4, 6], "counts": [3, 2, 19]}, [11, 4]),
     "example 'p': groundings.img_1[0].answer_span: expected 0 <= start <= end <= 16 (the answer's length), found [11, 4]"),
    ({"image_paths": ["a\\b.jpg"]}, ("a\\b", [4, 11], *_CAT)),
    ({"image_paths": ["a/.hidden"]}, (".hidden", [4, 11], *_CAT)),
]


@pytest.mark.parametrize("variant, want", QUIRKS)
def test_native_to_row_quirks(tmp_path, variant, want):
    """Odd img keys, float or string sizes, bool polygon coordinates, float spans, backslash and hidden paths:
    golden rows or messages."""
    path = tmp_path / "m4seg_train.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump([{**_QUIRK_BASE, **variant}, {**_QUIRK_BASE, **variant, "pair_id": "p2"}], f)
    rows, err = _rows(path)
    if isinstance(want, str):
        assert rows == [] and err == f"M4Seg train split, {path.name}: {want}"
        return
    assert err is None and [r["example_id"] for r in rows] == ["p", "p2"]
    g = rows[0]["groundings"][0]
    assert (rows[0]["images"][0]["image_id"], g["answer_span"], g["segmentation"], g["bbox"]) == want

