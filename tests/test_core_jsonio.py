"""``perckit.jsonio`` and ``perckit.prefetch`` helpers used by the builders."""

import gc
import os

from perckit.prefetch import gc_paused
from perckit.prefetch import read_ahead
from perckit.errors import ReleaseFormatError, ReleaseNotFoundError


def test_read_ahead_order_contents_and_errors(tmp_path):
    paths = []
    for i in range(40):
        p = tmp_path / f"{i:02d}.bin"
        p.write_bytes(bytes([i]) * (i * 100))
        paths.append(p)
    paths[5] = tmp_path / "missing.bin"
    paths[7] = tmp_path  # a folder
    got = list(read_ahead(paths, depth=4, limit=1 << 20))
    assert [p for p, _ in got] == paths
    for i, (p, data) in enumerate(got):
        if i == 5:
            assert isinstance(data, ReleaseNotFoundError) and isinstance(data, FileNotFoundError)
        elif i == 7:
            assert isinstance(data, ReleaseFormatError) and "a folder" in str(data)
        else:
            assert data == bytes([i]) * (i * 100)


def test_read_ahead_hints_within_its_window(tmp_path, monkeypatch):
    """Every regular file under the limit is hinted once, before it is read; never a file over the limit or a
    folder; and the files hinted and not yet read never hold more than ``ahead_bytes`` (plus the one file
    hinted into an empty window) nor number more than ``depth``."""
    import pytest

    if not hasattr(os, "posix_fadvise"):
        pytest.skip("this OS has no posix_fadvise: read_ahead gives no hints")
    sizes = [(i * 37) % 500 + 1 for i in range(60)]
    sizes[10] = 5000  # over the limit below: read (and refused) but never hinted
    paths = []
    for i, n in enumerate(sizes):
        p = tmp_path / f"{i:02d}.bin"
        p.write_bytes(b"x" * n)
        paths.append(p)
    paths[20] = tmp_path  # a folder: never hinted
    hinted: list[int] = []
    real = os.posix_fadvise

    def spy(fd, offset, length, advice):
        if advice == os.POSIX_FADV_WILLNEED:
            hinted.append(os.fstat(fd).st_size)
        return real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", spy)
    by_size = {n: i for i, n in enumerate(sizes)}
    assert len(by_size) == len(sizes)  # sizes name the files in this test
    read = 0
    for i, (p, data) in enumerate(read_ahead(paths, depth=8, limit=1000, ahead_bytes=1500)):
        assert p == paths[i]
        ahead = [by_size[n] for n in hinted if by_size[n] >= i]
        if i not in (10, 20):
            assert i in [by_size[n] for n in hinted], f"file {i} read before it was hinted"
            assert data == b"x" * sizes[i]
        else:
            assert isinstance(data, Exception)
        assert len(ahead) <= 8
        assert sum(sizes[k] for k in ahead) <= 1500
        read += 1
    assert read == len(paths)
    assert sorted(by_size[n] for n in hinted) == [i for i in range(len(paths)) if i not in (10, 20)]


def test_gc_paused_restores_state():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off: stays off
    finally:
        gc.enable()


def test_in_background_order_errors_and_early_close():
    import threading

    import pytest

    from perckit.prefetch import in_background

    assert list(in_background(iter(range(100)), depth=3)) == list(range(100))

    def failing():
        yield 1
        yield 2
        raise OSError("disk gone")

    got = []
    with pytest.raises(OSError, match="disk gone"):
        for x in in_background(failing(), depth=1):
            got.append(x)
    assert got == [1, 2]

    closed = threading.Event()

    def endless():
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    gen = in_background(endless(), depth=2)
    assert [next(gen) for _ in range(5)] == [0, 1, 2, 3, 4]
    gen.close()
    assert closed.wait(5)
    assert not any(t.name == "perckit-read-ahead" and t.is_alive() for t in threading.enumerate())


# ---------------------------------------------------------------- the one JSON Lines reader


def _lines(data, **kw):
    from perckit.jsonio import iter_json_lines

    return list(iter_json_lines(data, "'p.jsonl'", **kw))


def test_iter_json_lines_rules(tmp_path):
    import pytest

    from perckit.errors import InputNotFoundError, PredictionError, ReleaseFormatError, ReleaseNotFoundError
    from perckit.jsonio import iter_json_lines

    # a leading BOM skipped; blank lines (also "\r\n" ones) skipped but counted; "\r\n" endings accepted
    data = b'\xef\xbb\xbf{"a": 1}\r\n\r\n  \n{"b": "x\xe2\x80\xa8y"}\n'
    assert _lines(data) == [(1, "'p.jsonl' line 1", {"a": 1}), (4, "'p.jsonl' line 4", {"b": "x\u2028y"})]
    assert _lines(b"") == [] and _lines(b"\n\n") == []
    p = tmp_path / "p.jsonl"
    p.write_bytes(data)
    assert [n for n, _, _ in iter_json_lines(p)] == [1, 4]
    assert list(iter_json_lines(p))[0][1] == f"{str(p)!r} line 1"  # where defaults to the path's repr
    cases = [
        (b'{"a": 1}\n\xef\xbb\xbf{"a": 2}\n', r"'p\.jsonl' line 2: expected a JSON object, got a byte-order mark \(U\+FEFF\)"),
        (b'{"a": 1, "a": 2}\n', r"'p\.jsonl' line 1: duplicate key 'a' in a JSON object"),
        (b'{"a": {"b": 1, "b": 1}}\n', r"line 1: duplicate key 'b'"),
        (b'{"a": 1}\n{"a"\n', r"'p\.jsonl' line 2: expected a JSON object, got a parse error: JSONDecodeError"),
        (b'{"a": 1' + b"0" * 5000 + b"}\n", r"line 1: expected a JSON object, got a parse error: ValueError: .*digits"),
        (b"[" * 100_000 + b"]" * 100_000, r"line 1: expected a JSON object, got a parse error: RecursionError"),
        (b"[1, 2]\n", r"'p\.jsonl' line 1: expected a JSON object, got list: \[1, 2\]"),
        (b'{"a": 1}\n"s"\n', r"line 2: expected a JSON object, got str: 's'"),
        (b'{"a": "\xff"}\n', r"'p\.jsonl' line 1: expected UTF-8 JSON lines, got undecodable bytes"),
    ]
    for raw, pattern in cases:
        with pytest.raises(ReleaseFormatError, match=pattern):
            _lines(raw)
    with pytest.raises(PredictionError, match="line 1: expected a JSON object"):
        _lines(b"5\n", error=PredictionError)
    # files: missing, a folder, over the cap, a FIFO
    with pytest.raises(ReleaseNotFoundError, match=r"nope\.jsonl': file not found"):
        list(iter_json_lines(tmp_path / "nope.jsonl"))
    with pytest.raises(InputNotFoundError, match="file not found"):
        list(iter_json_lines(tmp_path / "nope.jsonl", error=PredictionError, not_found=InputNotFoundError))
    with pytest.raises(PredictionError, match="expected a regular file, got a folder"):
        list(iter_json_lines(tmp_path, error=PredictionError))
    with pytest.raises(ReleaseFormatError, match="more than the limit of 4 bytes"):
        list(iter_json_lines(p, limit=4))
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(ReleaseFormatError, match="expected a regular file, got a FIFO"):
        list(iter_json_lines(fifo))


def test_prefetch_helpers_stay_importable_from_jsonio():
    """Their old home keeps the names (builders and scripts imported them from ``perckit.jsonio``)."""
    from perckit import jsonio
    from perckit import prefetch

    for name in ("gc_paused", "read_ahead", "in_background"):
        assert getattr(jsonio, name) is getattr(prefetch, name)


# ---------------------------------------------------------------- loads: the orjson fast path against the reference

import json  # noqa: E402
import math  # noqa: E402

import pytest  # noqa: E402
from hypothesis import example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from perckit import jsonio  # noqa: E402

#: Number literals where json and orjson part ways (big ints, overflow, NaN) or agree only by care.
_NUMBERS = st.sampled_from([
    "0", "-0", "-0.0", "1", "1.5", "1e22", "1E+3", "2.5e-324", "5e-325", "0.30000000000000004", "9007199254740993.0",
    "9223372036854775807", "-9223372036854775808", "18446744073709551615", "18446744073709551616",
    "123456789012345678901234567890", "1e400", "-1e400", "NaN", "Infinity", "-Infinity", "01", "1.",
])
_TEXT = st.text(alphabet=st.sampled_from(list("ab:{}[],\"\\ é\u4e2d\t\n") + ["\ud800", "\x00", "\U0001f600"]), max_size=8)


def _string(s: str, ascii_only: bool) -> str:
    try:
        return json.dumps(s, ensure_ascii=ascii_only)
    except UnicodeEncodeError:
        return json.dumps(s)


@st.composite
def _json_text(draw, depth: int = 3) -> str:
    """JSON text (sometimes invalid) with repeated keys, escapes, colons in strings and odd numbers."""
    ascii_only = draw(st.booleans())
    kind = draw(st.sampled_from(["num", "str", "lit", "list", "obj", "obj", "raw"] if depth else ["num", "str", "lit"]))
    if kind == "num":
        return draw(_NUMBERS | st.integers(-10**25, 10**25).map(str) | st.floats(allow_nan=False).map(repr))
    if kind == "str":
        return _string(draw(_TEXT), ascii_only)
    if kind == "lit":
        return draw(st.sampled_from(["true", "false", "null"]))
    if kind == "raw":  # escapes written by hand: \u escapes of a colon, a lone surrogate, a backslash pair
        return draw(st.sampled_from(['"\\u003a"', '"\\ud800"', '"a\\\\u"', '"\\/"', '"x:y"', '"\\"::\\""']))
    if kind == "list":
        items = draw(st.lists(_json_text(depth - 1), max_size=4))
        return "[" + ",".join(items) + "]"
    keys = draw(st.lists(_TEXT, max_size=4))
    if keys and draw(st.booleans()):
        keys.append(draw(st.sampled_from(keys)))  # a repeated key
    sep = draw(st.sampled_from([":", " : ", ":\n"]))
    return "{" + ", ".join(_string(k, ascii_only) + sep + draw(_json_text(depth - 1)) for k in keys) + "}"


def _outcome(fn, text):
    try:
        value = fn(text)
    except (ValueError, RecursionError) as e:
        return ("error", type(e).__name__, str(e))
    return ("value", _typed(value))


def _typed(v):
    """The value with the type of every leaf spelt out (1 and 1.0 and True differ; NaN equals itself)."""
    if isinstance(v, dict):
        return ("dict", [(k, _typed(x)) for k, x in v.items()])
    if isinstance(v, list):
        return ("list", [_typed(x) for x in v])
    if isinstance(v, float) and math.isnan(v):
        return ("float", "nan")
    return (type(v).__name__, v)


@settings(max_examples=600, deadline=None)
@given(_json_text(), st.sampled_from(["str", "bytes", "bom"]))
@example('{"a": 1, "a": 2}', "bytes")
@example('{"a": "x:y", "a": 1}', "str")
@example('{"k": "\\u003a", "k": 1}', "bytes")
@example('{"k": 1, "k": "\\u003a"}', "bytes")  # the escaped colon of the kept value makes up for the dropped key
@example("18446744073709551616", "bytes")
@example('[1, {"a": [2, {"b": 3, "c": {"b": 4}}]}]', "bom")
def test_loads_fast_path_equals_the_reference(text, form):
    """``loads`` gives the reference parse's value (types included: an int stays an int) or its exact error, on
    valid and invalid text, repeated keys at any depth, colons and \\u escapes in strings, big and odd numbers."""
    data = text if form == "str" else (jsonio.UTF8_BOM if form == "bom" else b"") + text.encode("utf-8", "surrogatepass")
    reference = _outcome(jsonio.loads_reference, data)
    assert _outcome(jsonio.loads, data) == reference
    # the fast path itself (loads takes it only from FAST_MIN_CHARS on): the reference's value, or no answer
    fast = jsonio._fast_loads(data[len(jsonio.UTF8_BOM):] if form == "bom" else data)
    if fast is not jsonio._NOT_PROVEN:
        assert reference == ("value", _typed(fast))


def test_loads_takes_the_fast_path_on_large_text(monkeypatch):
    """From FAST_MIN_CHARS on, loads answers with the fast path (orjson), with the reference's value."""
    import orjson

    text = json.dumps([{"id": i, "counts": "0O2O" * 5 + str(10**18 + i), "x": i / 3, "t": "a:b"} for i in range(3000)]).encode()
    assert len(text) >= jsonio.FAST_MIN_CHARS
    calls = []
    monkeypatch.setattr(jsonio, "_orjson", lambda: type("O", (), {"loads": lambda t: calls.append(1) or orjson.loads(t),
                                                                 "dumps": orjson.dumps, "JSONDecodeError": orjson.JSONDecodeError,
                                                                 "JSONEncodeError": orjson.JSONEncodeError}))
    assert _typed(jsonio.loads(text)) == _typed(jsonio.loads_reference(text))
    assert calls == [1]


def test_loads_fast_path_is_taken_and_refuses_what_it_cannot_prove():
    """The fast path answers plain JSON, and leaves repeated keys, \\u escapes and 19-digit runs to the reference."""
    assert jsonio._fast_loads(b'{"a": [1, 2.5, "x:y", "1234567890123456789"], "b": {"c": true}}') == {
        "a": [1, 2.5, "x:y", "1234567890123456789"], "b": {"c": True}}  # long digit runs inside strings are fine
    for text in (b'{"a": 1, "a": 2}', b'{"a": {"b": 1, "b": 1}}', b'{"a": "\\u003a", "a": 1}', b"[1234567890123456789]",
                 b"[0.1000000000000000055511151231257827]", b"NaN"):
        assert jsonio._fast_loads(text) is jsonio._NOT_PROVEN, text
    with pytest.raises(jsonio.DuplicateKeyError, match="duplicate key 'b'"):
        jsonio.loads(b'{"a": {"b": 1, "b": 1}}')
