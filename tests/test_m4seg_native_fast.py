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


def test_plainly_relative_never_accepts_what_check_relative_refuses():
    import random

    from perckit.m4seg import rows
    from perckit.paths import check_relative

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

    masks = [g["mask"] for row in _rows(release.native_path(sample, "train"))[0] for g in row["groundings"]]
    assert len(masks) > 255
    assert rows._bboxes(masks) == [rle.to_bbox(m) for m in masks]
    assert rows._bboxes([]) == []


def _mask_cases(sample):
    import ijson

    with open(release.native_path(sample, "train"), "rb") as f:
        for _, ex in native_fast.fast_items(ijson, f, "sample"):
            for k, gs in ex["groundings"].items():
                size = ex["image_sizes"][int(k[4:]) - 1]
                for g in gs:
                    m = g.get("segmentation", g.get("mask"))
                    yield m, list(size)
                    yield m, list(size[::-1])
    good = {"size": [4, 6], "counts": [3, 2, 19]}
    for m in (good, {"size": [4, 6], "counts": [3, 2, 18]}, {"size": [4, 6], "counts": [3, -2, 23]},
              {"size": [4, 6], "counts": [3, True, 20]}, {"size": [4, 6], "counts": []}, {"size": [4, 6], "counts": "31"},
              {"size": [4, 6], "counts": "3"}, {"size": [4, 6], "counts": "é"}, {"size": [4, 6], "counts": ""},
              {"size": [4, 6.0], "counts": [3, 2, 19]}, {"size": [0, 6], "counts": [0]}, {"size": [4, 6]},
              {"size": [1 << 16, 1 << 16], "counts": [1 << 32]}, {"counts": [24]}, [[0, 0, 3, 0, 3, 3]], None):
        yield m, [4, 6]
        yield m, [6, 4]


def test_native_mask_fast_path_equals_rle_to_rle(sample):
    from perckit import rle
    from perckit.m4seg import rows

    n = 0
    for m, hw in _mask_cases(sample):
        try:
            want = ("ok", rle.to_rle(m, size=hw, where="g.segmentation (image 1, [H, W] = %s)" % hw))
        except Exception as e:  # noqa: BLE001 - the same error is wanted
            want = (type(e), str(e))
        try:
            got = ("ok", rows._to_rle(m, hw, "g", 1))
        except Exception as e:  # noqa: BLE001
            got = (type(e), str(e))
        assert got == want, (m, hw)
        n += 1
    assert n > 500


def _structure_reference(data_parts, queries_of):
    """native._Structure.feed asked one query at a time, each from the state before the part."""
    from perckit.m4seg import native

    st = native._Structure()
    out = []
    for part in data_parts:
        qs = queries_of(st.pos, part)
        probe = native._Structure()
        probe.__dict__.update(vars(st))
        answers = []
        for q in qs:
            one = native._Structure()
            one.__dict__.update(vars(probe))
            answers.extend(one.feed(part, [q]))
        st.feed(part, [])
        out.append(answers)
    return out


def test_structure_feed_answers_all_queries_like_one_at_a_time():
    import random

    from perckit.m4seg import native

    rng = random.Random(1)
    alpha = b'{}[]"\\ a:,'
    for _ in range(2000):
        data = bytes(rng.choice(alpha) for _ in range(rng.randint(0, 40)))
        cuts = sorted(rng.randint(0, len(data)) for _ in range(2))
        parts = [data[: cuts[0]], data[cuts[0] : cuts[1]], data[cuts[1] :]]
        plans = {}

        def queries_of(pos, part):
            key = (pos, part)
            if key not in plans:
                plans[key] = sorted(rng.sample(range(pos, pos + len(part)), min(len(part), rng.randint(0, 5)))) if part else []
            return plans[key]

        want = _structure_reference(parts, queries_of)
        st = native._Structure()
        got = [st.feed(part, queries_of(st.pos, part)) for part in parts]
        assert got == want, data


def test_spans_are_codes_only_when_span_code_problems_is_silent(sample):
    from perckit.m4seg import codes
    from perckit.m4seg import rows

    cases = [(row["answer"], row["groundings"]) for row in _rows(release.native_path(sample, "train"))[0]]
    answer = "The cat_101 and leg_20103, dog_1x, ٣at_٣01 and img_1002."
    for span, k in (([4, 11], 1), ([16, 25], 2), ([16, 25], 1), ([27, 33], 1), ([0, 3], 1), ([35, 42], 3), ([47, 55], 10), ([4, 4], 1)):
        cases.append((answer, [{"answer_span": span, "image_index": k}]))
    silent = 0
    for answer, groundings in cases:
        fast = rows._spans_are_codes(answer, groundings)
        assert not fast or codes.span_code_problems(answer, groundings) == []
        silent += fast
    assert silent > 10


def _poly_cases():
    """Polygon masks: plain, nested, flat, with bools, NaN, too short, odd, far outside, numpy, tuples."""
    import numpy as np

    sq = [0.0, 0.0, 3.0, 0.0, 3.0, 3.0]
    yield [sq]
    yield sq
    yield [sq, [1, 1, 4, 1, 4, 3, 1, 3]]
    yield [[0, 0, 3, 0, 3]]
    yield [[0, 0, 3, 0, 3, 3, 1]]
    yield [[0, 0, True, 0, 3, 3]]
    yield [[0, 0, float("nan"), 0, 3, 3]]
    yield [[0, 0, 100, 0, 3, 3]]
    yield [[-7, 0, 3, 0, 3, 3]]
    yield [(0, 0, 3, 0, 3, 3)]
    yield [np.array(sq)]
    yield [[0, 0, "3", 0, 3, 3]]
    yield []
    yield [[]]
    yield [1]
    yield ["a"]


def test_plain_mask_equals_to_rle(sample):
    """rows._plain_mask gives what rows._to_rle gives (and the same pycocotools form as rle._to_c of it), or None."""
    from perckit import rle
    from perckit.m4seg import rows

    taken = 0
    cases = list(_mask_cases(sample)) + [(p, hw) for p in _poly_cases() for hw in ([4, 6], [6, 4])]
    for m, hw in cases:
        fast = rows._plain_mask(m, hw)
        if fast is None:
            continue
        taken += 1
        assert fast[0] == rows._to_rle(m, hw, "g", 1), (m, hw)
        assert repr(fast[0]) == repr(rows._to_rle(m, hw, "g", 1))
        assert fast[1] == rle._to_c(fast[0])
    assert taken > 300


def test_plain_mask_random_polygons():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from perckit.m4seg import rows

    coord = st.one_of(st.integers(-30, 60), st.floats(-30, 60), st.sampled_from([float("nan"), float("inf"), True]))
    poly = st.lists(coord, min_size=0, max_size=12)

    @settings(max_examples=300, deadline=None)
    @given(st.lists(poly, min_size=1, max_size=3), st.integers(1, 20), st.integers(1, 20))
    def check(polys, h, w):
        fast = rows._plain_mask(polys, [h, w])
        try:
            want = rows._to_rle(polys, [h, w], "g", 1)
        except Exception:  # noqa: BLE001 - then the fast path must have declined
            assert fast is None
            return
        if fast is not None:
            assert fast[0] == want

    check()


def test_plain_span_equals_check_span():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from perckit.m4seg import rows

    value = st.one_of(st.integers(-3, 12), st.booleans(), st.floats(-1, 12), st.text("0123456789 ", max_size=3), st.none())
    span = st.one_of(st.lists(value, min_size=0, max_size=3), st.tuples(value, value), value)

    @settings(max_examples=500, deadline=None)
    @given(span, st.text(max_size=10))
    def check(sp, answer):
        fast = rows._plain_span(sp, len(answer))
        if fast is not None:
            assert fast == rows._check_span(sp, answer, "g")
            assert fast is not sp

    check()
    assert rows._plain_span([0, 3], 3) == [0, 3]


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
    from perckit.m4seg import codes
    from perckit.m4seg import rows

    for key, k in rows._IMG_INDEX.items():
        assert codes.img_key_index(key) == k
    for key in ("img_0", "img_01", "img_1\n", "img_1000", "img_x", " img_1"):
        assert key not in rows._IMG_INDEX or codes.img_key_index(key) == rows._IMG_INDEX[key]


def test_size_orders_plain_sizes_equal_reference():
    """_size_orders with plain [H, W] lists gives what parse_int + _check_image_size give, and the same errors."""
    from perckit import rle
    from perckit.m4seg import rows

    big = rle.MAX_PIXELS
    for size in ([3, 4], [1, 1], [0, 4], [-1, 4], [big, 1], [big, 2], [3, True], [3.0, 4], ["3", 4], (3, 4), [3]):
        try:
            got = rows._size_orders([size], [set()], "w")
        except ReleaseFormatError as e:
            got = str(e)
        try:
            w = "w: image_sizes[0]"
            if not isinstance(size, (list, tuple)) or len(size) != 2:
                raise ReleaseFormatError(f"{w}: expected [H, W] (2 ints), found {size!r}")
            a, b = rows.parse_int(size[0], w), rows.parse_int(size[1], w)
            rows._check_image_size(a, b, w)
            want = [(a, b, None)]
        except ReleaseFormatError as e:
            want = str(e)
        assert got == want, size


def test_native_to_row_quirks_same_as_reference_reader(tmp_path):
    """Examples that take each shortcut's way out (odd img keys, float sizes, tuple-free odd spans, bool polygon
    coordinates, backslash paths) give the reference reader's rows or message."""
    base = {"pair_id": "p", "q": "q?", "a": "the cat_101 here", "image_paths": ["a/b.jpg"], "image_sizes": [[4, 6]],
            "groundings": {"img_1": [{"name": "cat", "segmentation": {"size": [4, 6], "counts": [3, 2, 19]}, "answer_span": [4, 11]}]}}
    variants = [
        {},
        {"groundings": {"img_01": base["groundings"]["img_1"]}},
        {"groundings": {"img_1\n": base["groundings"]["img_1"]}},
        {"image_sizes": [[4.0, 6]]},
        {"image_sizes": [["4", 6]]},
        {"image_sizes": [[0, 6]]},
        {"groundings": {"img_1": [{"name": "cat", "segmentation": [[0, 0, True, 0, 3, 3]], "answer_span": [4, 11]}]}},
        {"groundings": {"img_1": [{"name": "cat", "segmentation": [[0, 0, 3, 0, 3, 3]], "answer_span": [4, 12]}]}},
        {"groundings": {"img_1": [{"name": "cat", "segmentation": [0, 0, 3, 0, 3, 3], "answer_span": [4.0, 11]}]}},
        {"groundings": {"img_1": [{"name": "cat", "segmentation": {"size": [4, 6], "counts": [3, 2, 19]}, "answer_span": [11, 4]}]}},
        {"image_paths": ["a\\b.jpg"]},
        {"image_paths": ["a/.hidden"]},
    ]
    for j, v in enumerate(variants):
        path = tmp_path / f"v{j}.json.gz"
        with gzip.open(path, "wt") as f:
            json.dump([{**base, **v}, {**base, **v, "pair_id": "p2"}], f)
        assert _rows(path, fast=True) == _rows(path, fast=False), v
