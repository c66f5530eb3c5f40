"""``perckit.io.jsonio`` and ``perckit.io.prefetch`` helpers used by the builders."""

import gc
import os

from perckit.io.prefetch import gc_paused
from perckit.io.prefetch import read_ahead
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

    from perckit.io.prefetch import in_background

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
    from perckit.io.jsonio import iter_json_lines

    return list(iter_json_lines(data, "'p.jsonl'", **kw))


def test_iter_json_lines_rules(tmp_path):
    import pytest

    from perckit.errors import InputNotFoundError, PredictionError, ReleaseFormatError, ReleaseNotFoundError
    from perckit.io.jsonio import iter_json_lines

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


# ---------------------------------------------------------------- loads: the one JSON loader


def test_loads_values_types_and_repeated_keys():
    """``loads`` is ``json``'s parse (every type kept: a big integer stays an int, ``NaN`` and ``Infinity`` read
    as floats, a long mantissa rounds as ``json`` rounds it) with a repeated key refused at any depth, also one
    spelt with an escape, and a leading BOM skipped from ``str``, ``bytes`` and ``bytearray``."""
    import math

    import pytest

    from perckit.io.jsonio import UTF8_BOM, DuplicateKeyError, loads

    text = '{"a": [18446744073709551616, 1, 1.0, true, null, "x:y", "\\u003a"], "b": {"a": 2}, "c": [NaN, -Infinity, 0.1000000000000000055511151231257827]}'
    for form in (text, text.encode(), bytearray(text.encode()), "\ufeff" + text, UTF8_BOM + text.encode(), bytearray(UTF8_BOM + text.encode())):
        v = loads(form)
        assert list(v) == ["a", "b", "c"] and v["b"] == {"a": 2}
        assert [(type(x).__name__, x) for x in v["a"]] == [
            ("int", 18446744073709551616), ("int", 1), ("float", 1.0), ("bool", True), ("NoneType", None), ("str", "x:y"), ("str", ":")]
        assert math.isnan(v["c"][0]) and v["c"][1:] == [-math.inf, 0.1]
    for bad, key in (('{"a": 1, "a": 2}', "a"), ('[1, {"a": [2, {"b": 3, "c": {"b": 4}, "b": 5}]}]', "b"),
                     ('{"k": 1, "\\u006b": 2}', "k"), (b'{"a": "x:y", "a": 1}', "a")):
        with pytest.raises(DuplicateKeyError, match=f"duplicate key '{key}' in a JSON object"):
            loads(bad)
    with pytest.raises(ValueError, match="Expecting"):
        loads('{"a" 1}')
    with pytest.raises(ValueError, match="Unexpected UTF-8 BOM"):
        loads("\ufeff\ufeff[]")  # only one leading BOM is skipped
