"""The scan of the native reader (:class:`perckit.m4seg.read.native.JsonItems`): the items it cuts from the
decompressed stream, parsed by :func:`~perckit.m4seg.read.native.parse_item`, against ``json.loads`` of the whole
document, over random nested JSON (escapes, backslash runs, unicode, quotes and brackets in strings, BOMs in
strings, long digit runs) laid out at random, read 1, 7 and 65,536 bytes at a time; random one-byte damage to a
valid document must be refused exactly when the reference refuses it; hand-made malformed separators."""

from __future__ import annotations

import io
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perckit.errors import ReleaseFormatError
from perckit.m4seg.read import native as m4native

READ_SIZES = (1, 7, 1 << 16)
BOM = b"\xef\xbb\xbf"

# strings rich in what the scan must get right: backslash runs before quotes, brackets, colons, commas, digits,
# non-ASCII text, U+FEFF (a BOM inside a string is a character)
_text = st.lists(
    st.sampled_from(['\\', '\\\\', '"', '\\"', '[', ']', '{', '}', ':', ',', ' ', 'a', 'é', '\ufeff', '\u2028', '0' * 19,
                     '9' * 25, '\n', '\x00', 'ß😀', 'u003a']),
    max_size=12,
).map("".join)
_ints = st.integers(-(1 << 63), (1 << 63) - 1) | st.sampled_from([0, -1, 10 ** 18, 1234567890123456789, -(1 << 63)])
_floats = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0.1234567890123456789, 1e300, -2.5e-300, 12.0])
_scalars = st.none() | st.booleans() | _ints | _floats | _text
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4), max_leaves=25)


def _layout(draw_value, ensure_ascii: bool, indent, seps) -> bytes:
    return json.dumps(draw_value, ensure_ascii=ensure_ascii, indent=indent, separators=seps).encode()


documents = st.builds(
    lambda top, ascii_, indent, seps, bom, pad: (BOM if bom else b"") + pad.encode() + _layout(top, ascii_, indent, seps) + pad.encode(),
    st.lists(_values, max_size=6) | st.dictionaries(_text, _values, max_size=6),
    st.booleans(),
    st.sampled_from([None, 0, 1, "\t"]),
    st.sampled_from([None, (",", ":"), (" ,\r\n", " : ")]),
    st.booleans(),
    st.sampled_from(["", " ", "\n\t \r"]),
)


def _walk_ok(v, depth=1) -> bool:
    """What the reader refuses although ``json`` reads it: an integer outside int64, an infinite float, a lone
    surrogate, nesting deeper than MAX_JSON_DEPTH."""
    if depth > m4native.MAX_JSON_DEPTH and isinstance(v, (dict, list)):
        return False
    if isinstance(v, bool) or v is None:
        return True
    if isinstance(v, int):
        return -(1 << 63) <= v < (1 << 63)
    if isinstance(v, float):
        return not math.isinf(v)
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(v, dict):
        return all(_walk_ok(k) and _walk_ok(x, depth + 1) for k, x in v.items())
    return all(_walk_ok(x, depth + 1) for x in v)


def reference(doc: bytes):
    """The top-level items of ``doc`` by ``json`` (a list of values, or of (key, value) for an object: every pair of
    the top-level object, a repeated key as often as it stands, as the reader gives them; the builder's id check
    refuses a repeated example id), or None where the reader must refuse it."""
    if doc.startswith(BOM):
        doc = doc[len(BOM):]
    objects: list = []  # the pairs of every object, innermost first: the top-level object's come last

    def pairs(items: list) -> dict:
        objects.append(items)
        return dict(items)

    try:
        text = doc.decode("utf-8")

        def no_constant(c):
            raise ValueError(c)

        value = json.loads(text, parse_constant=no_constant, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, (list, dict)):
        return None
    items = list(value) if isinstance(value, list) else objects[-1]
    values = items if isinstance(value, list) else [v for _, v in items]  # (with those a repeated key hides)
    if not _walk_ok(values) or not all(_walk_ok(k) for k in (value if isinstance(value, dict) else ())):
        return None
    if any(len(json.dumps(v).encode()) > m4native.MAX_EXAMPLE_BYTES for v in values):
        return None  # pragma: no cover - never this large here
    return items


def read(doc: bytes, size: int):
    """The reader's items of ``doc`` read ``size`` bytes at a time, each checked to be the bytes at its offset."""
    out = []
    for key, text, at, long_ints in m4native.JsonItems(io.BytesIO(doc), "w", read_bytes=size):
        assert doc[at:at + len(text)] == text
        v = m4native.parse_item(text, "w", len(out), at, key, long_ints)
        out.append(v if key is None else (key, v))
    return out


def _same(a, b) -> bool:
    """Equal, floats bit for bit and ints as ints (1 is not 1.0 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def _outcome(doc: bytes, size: int):
    try:
        return read(doc, size)
    except ReleaseFormatError as e:
        assert str(e).startswith("w: "), e
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents)
def test_items_are_the_values_json_reads(doc):
    want = reference(doc)
    assert want is not None
    for size in READ_SIZES:
        got = _outcome(doc, size)
        assert got is not None and _same(got, want), (size, doc[:300])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, where=st.floats(0, 1), edit=st.sampled_from(["insert", "delete", "replace"]),
       byte=st.sampled_from(list(b' ,:"\\[]{}0-.e1a\t\x00\xff\xc3') + [0xEF]))
def test_damaged_documents_are_refused_exactly_when_json_refuses_them(doc, where, edit, byte):
    i = int(where * len(doc))
    b = bytes([byte])
    doc = {"insert": doc[:i] + b + doc[i:], "delete": doc[:i] + doc[i + 1:], "replace": doc[:i] + b + doc[i + 1:]}[edit]
    want = reference(doc)
    for size in READ_SIZES:
        got = _outcome(doc, size)
        if want is None:
            assert got is None, (size, doc[:300])
        else:
            assert got is not None and _same(got, want), (size, doc[:300])


MALFORMED = {
    "missing comma": b'[{"a": 1} {"b": 2}]',
    "two commas": b'[{"a": 1},, {"b": 2}]',
    "leading comma": b'[, {"a": 1}]',
    "trailing comma": b'[{"a": 1},]',
    "a colon in a list": b'[{"a": 1}: {"b": 2}]',
    "garbage between items": b'[{"a": 1}, x {"b": 2}]',
    "a number and an item without a comma": b'[1 {"a": 1}]',
    "two numbers without a comma": b"[1 2]",
    "a semicolon": b'[{"a": 1}; {"b": 2}]',
    "a vertical tab": b'[{"a": 1},\x0b{"b": 2}]',
    "a BOM between items": b'[{"a": 1},' + BOM + b'{"b": 2}]',
    "trailing garbage": b'[{"a": 1}] x',
    "a second top level": b'[{"a": 1}] []',
    "a closing brace for a list": b'[{"a": 1}}',
    "a closing bracket for an object": b'{"k": {"a": 1}]',
    "an object key not a string": b'{k: {"a": 1}}',
    "an object without a colon": b'{"k" {"a": 1}}',
    "an object with two colons": b'{"k":: {"a": 1}}',
    "an object with a trailing comma": b'{"k": {"a": 1},}',
    "an unterminated key": b'{"k: {"a": 1}}',
    "truncated in an item": b'[{"a": 1}, {"b": ',
    "truncated between items": b'[{"a": 1},',
    "truncated in a string": b'[{"a": "x',
    "only a bracket": b"[",
    "nothing": b"",
    "a scalar top level": b"3",
    "mismatched inside an item": b'[{"a": [1}]',
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
@pytest.mark.parametrize("size", READ_SIZES)
def test_malformed_separators_are_refused(name, size):
    doc = MALFORMED[name]
    assert reference(doc) is None
    with pytest.raises(ReleaseFormatError, match="invalid JSON|byte-order mark"):
        read(doc, size)


@pytest.mark.parametrize("size", READ_SIZES)
def test_a_long_run_of_backslashes_across_reads(size):
    """Runs of 1..40 backslashes before a quote, in keys and values of an object file, cut by every read size."""
    items = {("\\" * n) + '"' + str(n): ["\\" * n, {"k" + "\\" * n: '"' * (n % 3)}] for n in range(1, 41)}
    doc = json.dumps(items).encode()
    assert _same(read(doc, size), list(items.items()))


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 8, 9, 13, 16, 19, 23, 1 << 16])
def test_integers_beyond_64_bits_are_refused_wherever_the_reads_cut_them(size):
    """orjson reads an integer past int64 as an unsigned value or a float: the scan flags every run of 19 digits or
    more outside strings, also one that the reads cut, and the item is refused naming the byte; in range, in a
    string or with a fraction or an exponent, the same digits are read."""
    for big in (b"9223372036854775808", b"-9223372036854775809", b"18446744073709551616", b"1" * 40):
        for doc in (b'[{"a": [0, ' + big + b"]}]", b"[1, " + big + b"]", b'{"k": ' + big + b"}", b'[{"x": "' + b"0" * 30 + b'", "a": ' + big + b"}]"):
            with pytest.raises(ReleaseFormatError, match=r"outside the signed 64-bit range \(integer overflow\)"):
                read(doc, size)
    fine = b'[{"a": [9223372036854775807, -9223372036854775808, "' + b"9" * 40 + b'", 1.' + b"5" * 30 + b", 1" + b"0" * 25 + b'e-5]}]'
    assert _same(read(fine, size), reference(fine))


def test_a_repeated_top_level_key_is_given_each_time():
    """An object file gives every pair, a repeated key as often as it stands (the builder's id check refuses the
    repeat); ``json`` would keep one. The reference above reads the pairs the same way."""
    doc = b'{"a": 1, "b": [2], "a": {"c": 3}}'
    want = [("a", 1), ("b", [2]), ("a", {"c": 3})]
    assert reference(doc) == want
    for size in READ_SIZES:
        assert read(doc, size) == want


@pytest.mark.parametrize("size", READ_SIZES)
def test_many_items_and_long_digit_runs_in_one_read(size):
    """A read that holds hundreds of top-level items and of 19-digit runs (the scan's buffers grow past their first
    size: 64 events and 4 runs a read), in a list file and an object file; one run beyond 64 bits near the end must
    still be refused, naming its byte."""
    items = [{"a": 1234567890123456789 + i, "b": [-9223372036854775808, "1" * 19], "c": {"d": [i]}} for i in range(300)]
    for doc in (json.dumps(items).encode(), json.dumps({f"k{i}": v for i, v in enumerate(items)}).encode()):
        assert _same(read(doc, size), reference(doc))
    big = json.dumps(items[:299]).encode()[:-1] + b', {"a": 9223372036854775808}]'
    at = big.rindex(b"9223372036854775808")
    with pytest.raises(ReleaseFormatError, match=f"example 299: invalid JSON at byte {at} of the decompressed JSON: an integer of 19 digits"):
        read(big, size)
