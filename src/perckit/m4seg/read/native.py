"""The native M⁴Seg file (``annotations/m4seg_{split}.json.gz``) read as rows: the bounded stream and its
parse, the prepass (:func:`scan_native`), the split into contiguous shards for ``num_proc``
(:func:`native_shards`) and the row iterator (:func:`iter_native`).

One reader parses the file, whatever its layout (one example per line or not, a list or an object of examples):
:class:`JsonItems` cuts the decompressed stream into its top-level items by one scan per read, and ``orjson``
parses each item (:func:`parse_item`; one call per example). :func:`read_examples` gives the examples, rows come
from :func:`perckit.m4seg.rows.native_rows`, 1,000 examples at a time. A shard after the first skips the examples
before it on the scan alone, without parsing them (:data:`SKIP_COST_PARSE` sizes the shards for that).

The scan (:meth:`JsonItems._scan`: one compiled loop over the bytes of each read of :data:`READ_BYTES`,
:func:`_scan_read`, which carries its state from read to read) follows the strings: a backslash escapes the byte
after it (so a backslash run of odd length escapes the next byte, also when the run ends a read), an unescaped
quote opens or closes a string. Outside strings the depth is the running count of the brackets and braces, and the
scan gives the grammar the brackets and colons at depth 1 and the brackets that open depth 2. Every byte of the file
is then checked by one of:

- the top-level grammar of :class:`_TopLevel` (``[`` items separated by one comma ``]``, or ``{`` string keys,
  colons and items ``}``; only JSON whitespace around them; nothing but whitespace after the end);
- ``orjson.loads`` of each item (an object, a list, a string or a scalar) and of each key.

The concatenation of valid pieces under that grammar is valid JSON whose items are the pieces' values, so a scan
that cut an item wrongly could only make the file refused, never read differently
(tests/test_m4seg_native_scan.py checks the items against ``json.loads`` of the whole document).

Everything here is bounded by documented limits, whatever the file holds:

- nesting deeper than :data:`MAX_JSON_DEPTH` is refused by the scan, and an item or a string longer than
  :data:`MAX_EXAMPLE_BYTES` before it is buffered (an item cut by a read is carried over, at most that long);
  whitespace between items is never buffered;
- one UTF-8 byte-order mark at the very start of the stream is skipped (the project's one BOM rule,
  :data:`perckit.io.jsonio.UTF8_BOM`); one anywhere else outside a string is refused, naming its byte offset (one
  that two reads cut, as invalid JSON);
- what ``orjson`` would read differently from the JSON text is refused: an integer outside the signed 64-bit range
  (``orjson`` would give a float or an unsigned value; the scan flags every run of 19 digits or more outside a
  string), a lone UTF-16 surrogate escape, bytes that are not UTF-8;
- :func:`read_examples` refuses a JSON object that repeats a key (``orjson``, like ``json``, would keep only the
  last value): the ``orjson.dumps`` of the parsed example must hold as many colons as its text
  (:func:`_keys_match`); only when it does not, ``json`` reads the example again to name the key.
"""

from __future__ import annotations

import collections
import gzip
import itertools
import json
import re
from array import array
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any, BinaryIO, Callable, Iterator, Sequence

import numpy as np
import orjson

from ...errors import PerckitError, ReleaseFormatError, short_repr as _short
from ...io.jsonio import UTF8_BOM
from ...core import counts as _kernels
from ..rows import EXAMPLE_ALIASES, ConvertState, _alias, _MAPS, native_parts, native_rows, native_to_row
from .ids import IdGuard, derived_example_id, occurrence_index, stable_hash

#: Deepest JSON nesting accepted in a native file (an example is about 7 levels deep).
MAX_JSON_DEPTH = 64
#: Largest decompressed JSON accepted for one example (one top-level item), and for one string (real examples are
#: a few KB).
MAX_EXAMPLE_BYTES = 64 << 20
#: Bytes of the decompressed stream read and scanned at a time.
READ_BYTES = 1 << 20
#: Errors of a corrupt or truncated gzip stream (``BadGzipFile`` is an ``OSError``, a cut stream an ``EOFError``).
GZIP_ERRORS = (OSError, EOFError, zlib.error)

#: JSON's whitespace (``bytes.strip()`` would take \x0b and \x0c too).
_WS = b" \t\n\r"
_INT64 = (-(1 << 63), (1 << 63) - 1)


def pull_translating(items: Iterator, errors: tuple, convert: Callable[[BaseException], Exception]) -> Iterator:
    """The items of ``items``; an exception of ``errors`` raised while *pulling* the next item is raised as
    ``convert(e)``. The ``yield`` sits outside the ``try``: an exception the consumer throws in (GeneratorExit when
    it closes the iterator) is never matched against ``errors``, so it passes through unchanged, and a reader left
    suspended until interpreter exit (a streaming ``next(iter(ds))``) closes quietly. (A ``yield`` inside ``try ...
    except SomeError`` evaluates that clause at finalisation, when module globals are already None: "Exception
    ignored ... TypeError: catching classes that do not inherit from BaseException".)"""
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except errors as e:
            raise convert(e) from None
        yield item


def reading_error(where: str) -> tuple[tuple, Callable[[BaseException], Exception]]:
    """``(errors, convert)`` for :func:`pull_translating`: gzip's errors as :class:`ReleaseFormatError` naming
    ``where`` (the reader raises its JSON errors as ReleaseFormatError itself)."""

    def convert(e: BaseException) -> Exception:
        return ReleaseFormatError(f"{where}: unreadable gzip data ({type(e).__name__}: {e})")

    return GZIP_ERRORS, convert


def _found(text: bytes) -> str:
    return repr(text[:20] + (b"..." if len(text) > 20 else b""))


# ---------------------------------------------------------------- the top level


_BEGIN, _L_FIRST, _L_SEP, _L_VALUE, _O_FIRST, _O_COLON, _O_VALUE, _O_SEP, _O_KEY, _END = range(10)
#: state -> the state once a value ends there (absent: no value may start there)
_AFTER_VALUE = {_L_FIRST: _L_SEP, _L_VALUE: _L_SEP, _O_VALUE: _O_SEP}
#: what the top level holds between the brackets the scan finds: a string (escapes included), a run of other
#: bytes (a number, true, false, null, or garbage), a comma, or a quote that opens no complete string
_GAP_PART = re.compile(rb'"(?:[^"\\]|\\.)*"|[^ \t\n\r,"]+|,|"', re.S)


class _TopLevel:
    """The grammar of the top level: ``[`` value (``,`` value)* ``]`` or ``{`` key ``:`` value (``,`` key ``:``
    value)* ``}``, then only whitespace. :class:`JsonItems` gives it the brackets and colons it finds at depth 1, the
    items (between brackets at depth 2 and 1) and the bytes in between (:meth:`gap`: commas, keys, scalar items).
    Errors name the byte offset in the decompressed stream, what was expected and what was found."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.state = _BEGIN
        self.count = 0  # items given so far
        self.key: str | None = None  # the key of the item to come (an object file)

    def error(self, at: int, what: str) -> ReleaseFormatError:
        return ReleaseFormatError(f"{self.where}: invalid JSON at byte {at} of the decompressed JSON: {what}")

    def _after(self) -> str:
        return f"after example {self.count - 1}" + (f" ({self.key!r})" if self.key is not None else "")

    def unexpected(self, at: int, found: bytes) -> ReleaseFormatError:
        what = {
            _BEGIN: "expected '[' (a list of examples) or '{' (an object of examples)",
            _L_FIRST: "after '[', expected an example or ']'",
            _L_SEP: f"{self._after()}, expected ',' or ']'",
            _L_VALUE: f"after the ',' that follows example {self.count - 1}, expected an example",
            _O_FIRST: "after '{', expected a string key or '}'",
            _O_COLON: f"after the key {self.key!r}, expected ':'",
            _O_VALUE: f"after the key {self.key!r} and ':', expected an example",
            _O_SEP: f"{self._after()}, expected ',' or '}}'",
            _O_KEY: f"after the ',' that follows example {self.count - 1}, expected a string key",
            _END: "after the closing bracket of the top level, expected nothing but whitespace",
        }[self.state]
        return self.error(at, f"{what}, found {_found(found)}")

    def bracket(self, at: int, byte: int) -> None:
        """A bracket at depth 1: the top level opens or closes."""
        s = self.state
        if s == _BEGIN and byte in b"[{":
            self.state = _L_FIRST if byte == 0x5B else _O_FIRST
        elif (byte == 0x5D and s in (_L_FIRST, _L_SEP)) or (byte == 0x7D and s in (_O_FIRST, _O_SEP)):
            self.state = _END
        else:
            raise self.unexpected(at, bytes([byte]))

    def colon(self, at: int) -> None:
        if self.state != _O_COLON:
            raise self.unexpected(at, b":")
        self.state = _O_VALUE

    def item_starts(self, at: int, found: bytes) -> None:
        if self.state not in _AFTER_VALUE:
            raise self.unexpected(at, found)

    def item_ends(self) -> None:
        self.state = _AFTER_VALUE[self.state]
        self.count += 1

    def gap(self, text: bytes, at: int) -> list[tuple[str | None, bytes, int]]:
        """``(key, text, offset)`` of the string and scalar items of ``text`` (bytes between two brackets or colons of
        the top level, at offset ``at``); its commas and keys go to the grammar."""
        items = []
        for m in _GAP_PART.finditer(text):
            part, p = m.group(), at + m.start()
            s = self.state
            if part == b",":
                if s == _L_SEP:
                    self.state = _L_VALUE
                elif s == _O_SEP:
                    self.state = _O_KEY
                else:
                    raise self.unexpected(p, text[m.start():])
            elif part[:1] == b'"' and s in (_O_FIRST, _O_KEY):
                self.key = _parse_key(part, self.where, p)
                self.state = _O_COLON
            else:
                self.item_starts(p, text[m.start():])
                items.append((self.key, part, p))
                self.item_ends()
        return items

    def end(self, at: int, inside: bool) -> None:
        """The stream ends at byte ``at`` (``inside``: in the middle of an item or a string)."""
        if self.state == _END and not inside:
            return
        if self.state == _BEGIN and not inside:
            raise self.error(at, "expected a JSON list of examples or an object of examples, found nothing")
        where = f"inside example {self.count}" if inside else (self._after() if self.count else "before the first example")
        raise self.error(at, f"the JSON ends {where}, before the closing bracket of the top level (a truncated file?)")


# ---------------------------------------------------------------- the scan


#: The statuses of :func:`_scan_read` other than 0: nesting deeper than the limit; a BOM outside a string.
_TOO_DEEP, _BOM = 1, 2
#: A run of this many digits outside a string may be an integer literal beyond the signed 64-bit range.
_LONG_RUN = 19


def _scan_read(data, base, depth, in_str, escaped, run, max_depth):
    """The compiled scan of one read (:meth:`JsonItems._scan`; plain Python over numpy arrays, compiled by
    :func:`perckit.core.counts._compiled`): one loop over the bytes of ``data`` (uint8, at offset ``base`` of the
    stream), from the state the previous read left (the depth, whether in a string, whether its last byte escapes
    this read's first, the digits it ended with outside a string).

    Returns ``(events, runs, depth, in_str, escaped, run, opened, status, at)``. ``events``: (offset in the read,
    byte, depth after it) of each bracket, colon, backslash and 0xEF outside strings at depth 1 or less (one of these
    or a quote that a backslash escapes is given as a backslash: the grammar refuses it), and of each bracket that
    opens depth 2, flat. ``runs``: the offset in the stream of the first digit of each run of :data:`_LONG_RUN`
    digits or more outside strings (maybe in a previous read). Then the state after the read, the offset in the read
    of the quote that opens the string the read ends in (-1: none, or it opened before), and a status: 0,
    :data:`_TOO_DEEP` (the scan stops there, ``at`` its offset) or :data:`_BOM` (``at``: the first byte-order mark
    outside a string that the read holds whole)."""
    n = data.shape[0]
    events = np.empty(3 * 64, dtype=np.int64)
    k = 0  # events found (3 values each)
    runs = np.empty(4, dtype=np.int64)
    m = 0  # runs found
    opened = -1
    bom = -1
    for i in range(n):
        c = data[i]
        if in_str:  # in a string only quotes and backslashes count (run is 0: the opening quote ended any run)
            if escaped:
                escaped = False
            elif c == 0x5C:
                escaped = True
            elif c == 0x22:
                in_str = 0
            continue
        if 0x30 <= c <= 0x39:  # a digit (escaped or not: the run counts it)
            escaped = False
            run += 1
            if run == _LONG_RUN:
                if m == runs.shape[0]:
                    grown = np.empty(2 * m, dtype=np.int64)
                    grown[:m] = runs
                    runs = grown
                runs[m] = base + i - (_LONG_RUN - 1)
                m += 1
            continue
        run = 0
        byte = np.int64(c)
        if escaped:  # (invalid JSON outside a string: the grammar or orjson refuses it)
            escaped = False
            if c == 0x22 or c == 0x5B or c == 0x5D or c == 0x7B or c == 0x7D or c == 0x3A or c == 0x5C or c == 0xEF:
                byte = 0x5C  # a bracket, quote, colon, backslash or 0xEF escaped: taken as a backslash
            else:
                continue
        elif c == 0x5C:
            escaped = True
        elif c == 0x22:
            in_str = 1
            opened = i
            continue
        elif c == 0x5B or c == 0x7B:
            depth += 1
            if depth > max_depth:
                return events[:3 * k], runs[:m], depth, in_str, escaped, run, -1, _TOO_DEEP, i
            if depth > 2:
                continue
        elif c == 0x5D or c == 0x7D:
            depth -= 1
        elif c == 0xEF:
            if bom < 0 and i + 2 < n and data[i + 1] == 0xBB and data[i + 2] == 0xBF:
                bom = i
        elif c != 0x3A:
            continue
        if depth > 1 and byte != 0x5B and byte != 0x7B:
            continue
        if 3 * k == events.shape[0]:
            grown = np.empty(2 * events.shape[0], dtype=np.int64)
            grown[:3 * k] = events
            events = grown
        events[3 * k] = i
        events[3 * k + 1] = byte
        events[3 * k + 2] = depth
        k += 1
    if not in_str:
        opened = -1
    return events[:3 * k], runs[:m], depth, in_str, escaped, run, opened, _BOM if bom >= 0 else 0, bom


class JsonItems:
    """The top-level items of the decompressed JSON of a native file, in order, each as
    ``(key, text, offset, long_ints)``: the key (an object file; None for a list), the item's bytes, the offset of its
    first byte in the decompressed stream, and the offsets of its runs of 19 digits or more outside strings (maybe
    integers beyond 64 bits; usually none).

    Reads of :data:`READ_BYTES` are scanned as they come (:meth:`_scan`; see the module docstring). An item or a
    string longer than :data:`MAX_EXAMPLE_BYTES` is refused before it is buffered, nesting deeper than
    :data:`MAX_JSON_DEPTH` as it is read; the top level is checked by :class:`_TopLevel`. Iterate once."""

    def __init__(self, raw: BinaryIO, where: str, read_bytes: int = READ_BYTES) -> None:
        self._raw, self.where, self._read_bytes = raw, where, read_bytes
        self._depth = self._in_str = self._tail_digits = 0
        self._escaped = False
        self._str_open = 0  # offset of the opening quote of the string the scan is in
        #: bytes of the decompressed stream read so far (the skipped BOM included)
        self.offset = 0
        self._long: collections.deque = collections.deque()  # offsets of 19+ digit runs outside strings, not yet given

    def _reads(self) -> Iterator[bytes]:
        first = True
        while True:
            data = self._raw.read(self._read_bytes)
            if first and data:
                first = False
                while len(data) < len(UTF8_BOM) and UTF8_BOM.startswith(data):
                    more = self._raw.read(len(UTF8_BOM))
                    if not more:
                        break
                    data += more
                if data.startswith(UTF8_BOM):
                    self.offset += len(UTF8_BOM)
                    data = data[len(UTF8_BOM):] or self._raw.read(self._read_bytes)
            if not data:
                return
            yield data
            self.offset += len(data)

    def _too_long(self, what: str) -> ReleaseFormatError:
        return ReleaseFormatError(
            f"{self.where}: {what} is longer than {MAX_EXAMPLE_BYTES} bytes of decompressed JSON; expected M4Seg "
            "examples of a few KB (a corrupt file or a decompression bomb)"
        )

    def _scan(self, data: bytes, base: int) -> list:
        """Scan one read (at offset ``base``) by the compiled loop :func:`_scan_read`: the depth, BOM and digit-run
        checks, and the brackets and colons at depth 1 and the brackets that open depth 2, as ``[offset in the read,
        byte, depth after it]``."""
        events, runs, depth, in_str, escaped, run, opened, status, at = _kernels._compiled(_scan_read)(
            np.frombuffer(data, dtype=np.uint8), base, self._depth, self._in_str, self._escaped, self._tail_digits,
            MAX_JSON_DEPTH)
        if status == _TOO_DEEP:
            raise ReleaseFormatError(
                f"{self.where}: JSON nested more than {MAX_JSON_DEPTH} levels deep; expected M4Seg examples "
                "(about 7 levels: list, example, groundings, img_k, grounding, mask, counts)"
            )
        if status == _BOM:
            raise ReleaseFormatError(
                f"{self.where}: a UTF-8 byte-order mark at byte {base + at} of the decompressed JSON, "
                "outside a string; expected one only at the very start of the stream (where it is skipped)"
            )
        if runs.size:
            self._long.extend(runs.tolist())
        self._depth, self._in_str, self._escaped, self._tail_digits = depth, in_str, escaped, run
        if opened >= 0:
            self._str_open = base + opened
        return events.reshape(-1, 3).tolist()

    def _long_ints(self, start: int, end: int) -> tuple:
        q = self._long
        while q and q[0] < start:
            q.popleft()
        found = []
        while q and q[0] < end:
            found.append(q.popleft())
        return tuple(found)

    def __iter__(self) -> Iterator[tuple]:
        top = _TopLevel(self.where)
        after_value = _AFTER_VALUE
        start = -1  # offset of the item being read (-1: none)
        pieces: list[bytes] = []  # its bytes in the reads before
        gap_from = 0  # offset of the first byte after the last thing the grammar took
        carry = b""  # the end of the previous read the grammar has not taken (it starts at gap_from)
        for data in self._reads():
            base = self.offset
            for p, t, d in self._scan(data, base):
                at = base + p
                if start >= 0:  # the item's closing bracket (nothing at depth 1 comes before it)
                    if pieces:
                        if at + 1 - start > MAX_EXAMPLE_BYTES:
                            raise self._too_long("an example")
                        pieces.append(data[:p + 1])
                        text = b"".join(pieces)
                        pieces = []
                    else:
                        text = data[start - base:p + 1]
                    s, start, gap_from = start, -1, at + 1
                    top.state = after_value[top.state]
                    top.count += 1
                    yield top.key, text, s, self._long_ints(s, at + 1) if self._long else ()
                    continue
                if carry or at > gap_from:  # the bytes since the last bracket: a comma (or keys, scalar items)
                    g = data[gap_from - base if gap_from > base else 0:p]
                    if carry:
                        g, carry = carry + g, b""
                    if top.state == _L_SEP and (g == b",\n" or g.strip(_WS) == b","):
                        top.state = _L_VALUE
                    else:
                        for k, s_text, s in top.gap(g, gap_from):
                            yield k, s_text, s, self._long_ints(s, s + len(s_text))
                if d == 2:  # an item opens
                    if top.state not in after_value:
                        raise top.unexpected(at, data[p:p + 20])
                    start = at
                elif t == 0x3A:
                    top.colon(at)
                    gap_from = at + 1
                else:
                    top.bracket(at, t)
                    gap_from = at + 1
            end = base + len(data)
            if start >= 0:
                if self._in_str and end - self._str_open > MAX_EXAMPLE_BYTES:
                    raise self._too_long("a JSON string")
                if end - start > MAX_EXAMPLE_BYTES:
                    raise self._too_long("an example")
                pieces.append(data[start - base if start > base else 0:])
                continue
            # the bytes since the last bracket: taken now but for a string or a scalar the read cuts
            rest = data[gap_from - base if gap_from > base else 0:]
            text = carry + rest if carry else rest
            if self._in_str or b'"' in text:
                cut = 0
            else:
                cut = max(text.rfind(c) for c in (b" ", b"\t", b"\n", b"\r", b",")) + 1
            if cut:
                for k, s_text, s in top.gap(text[:cut], gap_from):
                    yield k, s_text, s, self._long_ints(s, s + len(s_text))
            carry, gap_from = text[cut:], gap_from + cut
            if len(carry) > MAX_EXAMPLE_BYTES:
                raise self._too_long("a JSON string" if self._in_str and end - self._str_open > MAX_EXAMPLE_BYTES else "an example")
        if start < 0 and carry:
            for k, s_text, s in top.gap(carry, gap_from):
                yield k, s_text, s, self._long_ints(s, s + len(s_text))
        top.end(self.offset, start >= 0)


# ---------------------------------------------------------------- parsing the items


def _json_error(where: str, at: int, text: bytes, e: Exception, what: str) -> ReleaseFormatError:
    """orjson's refusal of ``text`` (``what`` it is, at offset ``at``) as a ReleaseFormatError naming the byte."""
    try:
        s = text.decode("utf-8")
    except UnicodeDecodeError as u:
        return ReleaseFormatError(
            f"{where}: {what}: invalid JSON at byte {at + u.start} of the decompressed JSON: bytes that are not UTF-8 "
            f"({text[u.start:u.start + 4]!r}); expected UTF-8 text"
        )
    msg = getattr(e, "msg", None) or str(e)
    pos = getattr(e, "pos", None)
    byte = at + len(s[:pos].encode("utf-8", "surrogatepass")) if isinstance(pos, int) else at
    if "surrogate" in msg:
        msg += " (a lone UTF-16 surrogate escape, which is not text)"
    elif "infinity" in msg:
        msg += " (a floating point overflow)"
    return ReleaseFormatError(f"{where}: {what}: invalid JSON at byte {byte} of the decompressed JSON: {msg}")


def _parse_key(text: bytes, where: str, at: int) -> str:
    """The key (a JSON string, quotes included) of an item of an object file."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise _json_error(where, at, text, e, "a key of the top-level object") from None


def _check_ints(text: bytes, at: int, runs: Sequence[int], where: str, what: str) -> None:
    """Refuse an integer literal outside the signed 64-bit range at one of ``runs`` (offsets of digit runs outside
    strings in ``text``, which starts at ``at``): orjson reads one as a float or an unsigned value."""
    digits = b"0123456789"
    for r in runs:
        i = j = r - at
        while i > 0 and text[i - 1] in digits:
            i -= 1
        while j < len(text) and text[j] in digits:
            j += 1
        s = i - 1 if i > 0 and text[i - 1] == 0x2D else i  # a minus sign
        if (s > 0 and text[s - 1] in b".eE+-") or (j < len(text) and text[j] in b".eE"):
            continue  # part of a number with a fraction or an exponent: a float
        literal = text[s:j]
        if j - i > 19 or not _INT64[0] <= int(literal) <= _INT64[1]:
            raise ReleaseFormatError(
                f"{where}: {what}: invalid JSON at byte {at + s} of the decompressed JSON: an integer of {j - i} digits "
                f"({_short(literal.decode())}) outside the signed 64-bit range (integer overflow); expected M4Seg ids, "
                "sizes and counts"
            )


def parse_item(text: bytes, where: str, index: int, at: int, key: str | None = None, long_ints: Sequence[int] = ()) -> Any:
    """An item of :class:`JsonItems` (``text`` at offset ``at``, example ``index``) parsed by orjson; invalid JSON
    raises :class:`ReleaseFormatError` naming the example and the byte."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        what = f"example {index}" + (f" ({key!r})" if key is not None else "")
        if long_ints:  # (orjson reads an integer of more than 20 digits as a float, and refuses it when infinite)
            _check_ints(text, at, long_ints, where, what)
        raise _json_error(where, at, text, e, what) from None
    if long_ints:
        _check_ints(text, at, long_ints, where, f"example {index}" + (f" ({key!r})" if key is not None else ""))
    return value


def _example_label(key: Any, ex: Any) -> str:
    if key is not None:
        return f" ({str(key)!r})"
    if isinstance(ex, Mapping):
        for k in ("example_id", "pair_id", "id"):
            v = ex.get(k)
            if v is not None and not isinstance(v, (dict, list)):
                return f" ({_short(v)})"
    return ""


def _keys_match(text: bytes, value: Any) -> bool:
    """Whether the objects of ``value`` (orjson's parse of ``text``) hold every key of ``text``: then its
    ``orjson.dumps`` holds as many colons as ``text`` (one per key, and those of the strings: a key and value dropped
    for a repeated key take at least one colon with them). Not told (False) when ``text`` may escape a colon
    (``\\u003a``), which orjson writes as a colon."""
    if b"\\u003" in text:
        return False
    try:
        out = orjson.dumps(value)
    except TypeError:  # pragma: no cover - what orjson.loads gives it can write
        return False
    return out.count(b":") == text.count(b":")


def _repeated_key(text: bytes) -> tuple[bool, Any]:
    """``(True, key)`` for a key an object of ``text`` (valid JSON) repeats, else ``(False, None)``."""
    found: list = []

    def pairs(items: list) -> dict:
        if not found:
            seen = set()
            for k, _ in items:
                if k in seen:
                    found.append(k)
                    break
                seen.add(k)
        return dict(items)

    json.loads(text.decode("utf-8"), object_pairs_hook=pairs)
    return (True, found[0]) if found else (False, None)


def _check_keys(text: bytes, value: Any, where: str, index: int, key: Any) -> None:
    """Refuse an example in which an object repeats a key (orjson keeps the last value silently, so a second
    ``example_id`` or ``image_paths`` would otherwise replace the first). The count of :func:`_keys_match` first; only
    when it cannot vouch for the example, the slow path (``json`` with a hook on every object's pairs) looks for the
    key and names it."""
    if _keys_match(text, value):
        return
    repeated, k = _repeated_key(text)
    if repeated:
        raise ReleaseFormatError(
            f"{where}: example {index}{_example_label(key, value)}: a JSON object repeats the key {k!r}; expected every "
            "key once (parsers disagree on which value wins)"
        )


def native_items(fileobj: BinaryIO, where: str) -> JsonItems:
    """The top-level items of a native file (see :class:`JsonItems`)."""
    return JsonItems(gzip.GzipFile(fileobj=fileobj, mode="rb"), where)


def top_level_kind(fileobj: BinaryIO, where: str) -> str:
    """``"list"`` or ``"object"``: the first non-blank character of the decompressed file (after a BOM)."""
    try:
        head = gzip.GzipFile(fileobj=fileobj, mode="rb").read(4096)
    except GZIP_ERRORS as e:
        raise ReleaseFormatError(f"{where}: expected a gzip-compressed JSON file, found unreadable data ({type(e).__name__}: {e})") from None
    if head.startswith(UTF8_BOM):
        head = head[len(UTF8_BOM):]
    head = head.lstrip(_WS)
    kind = {b"[": "list", b"{": "object"}.get(head[:1])
    if kind is None:
        raise ReleaseFormatError(f"{where}: expected a JSON list of examples or an object of examples, found {head[:40]!r}")
    return kind


#: Examples converted together (their masks by one :func:`perckit.rle.to_rles`, their boxes by one pycocotools call).
ROWS_PER_BATCH = 1000


def read_examples(opener: Callable, path: str, where: str, start: int = 0) -> Iterator[tuple[str | None, Any]]:
    """``(key, example)`` of every top-level item of the file at ``path`` in order (``key`` None for a list) from
    item ``start`` on (the items before it are only scanned), parsed by :func:`parse_item`.

    An object anywhere in an example that repeats a key raises :class:`ReleaseFormatError` naming the example
    (its index and its id) and the key (:func:`_check_keys`). (A repeated top-level key of an object file is a
    repeated example id, which the id check refuses.)"""
    with opener(path, "rb") as f:
        items = native_items(f, where)
        for i, (key, text, at, long_ints) in enumerate(items):
            if i < start:
                continue
            ex = parse_item(text, where, i, at, key, long_ints)
            if b":" in text:
                _check_keys(text, ex, where, i, key)
            yield key, ex


@dataclass
class NativeScan:
    """What the prepass over a native file learnt (only run when needed: see the builder)."""

    kind: str  #: "list" or "object"
    count: int | None = None
    #: per example: -1 or the occurrence of a repeated pair_id (only when the examples have no example_id)
    occurrence: np.ndarray | None = None
    id_key: str | None = None  #: the key the prepass read ("example_id" or a pair-id alias)
    #: stable_hash of that key's value for every example: the reader checks it sees the same examples
    id_hashes: np.ndarray | None = field(default=None, repr=False)


def first_example(opener: Callable, path: str, where: str) -> tuple[str, Mapping | None, str | None]:
    """(top-level kind, the first example or None, its key when the top level is an object)."""
    with opener(path, "rb") as f:
        kind = top_level_kind(f, where)
    for key, ex in pull_translating(read_examples(opener, path, where), *reading_error(where)):
        return kind, ex, None if key is None else str(key)
    return kind, None, None


def scan_native(opener: Callable, path: str, split: str, need_count: bool = False, size_order: str = "auto") -> NativeScan:
    """The prepass over a native file, run only when it is needed.

    It reads the first example. When the examples have an ``example_id`` and no count is needed (``num_proc`` <= 1),
    that is all. Otherwise it parses every example (:class:`JsonItems`, :func:`parse_item`) for one field, keeping 8
    bytes per example: the ``example_id`` (checked unique over the whole split) or, without ids, the pair id, from
    which the occurrence of every repeated pair_id is derived. Invalid JSON anywhere in the file is refused here,
    before any row. The reader verifies every example against the prepass (``id_hashes``)."""
    where = f"M4Seg {split} split, {Path(path).name}"
    kind, first, first_key = first_example(opener, path, where)
    if first is not None and not isinstance(first, Mapping):
        raise ReleaseFormatError(f"{where}: example 0: expected an object, found {_short(first)}")
    if first is not None:
        # The first example converted (and dropped) here: a file of another format fails before generation.
        native_to_row(first, ConvertState(split, Path(path).name, size_order, quiet=True), first_key)
    if kind != "list" or first is None:
        return NativeScan(kind=kind, count=None if first is not None else 0)
    if first.get("example_id") is not None:
        if not need_count:
            return NativeScan(kind=kind)
        key = "example_id"
    else:
        key = next((k for k in EXAMPLE_ALIASES["pair_id"] if first.get(k) is not None), None)
        if key is None:
            raise ReleaseFormatError(f"{where}: example 0: expected an 'example_id' or a 'pair_id'/'id', found neither (keys {sorted(first)})")

    hashes = array("q")  # 8 bytes per example (int64 hashes)
    guard = IdGuard(where)
    dup: list[ReleaseFormatError] = []  # a repeated example_id is raised once the whole file has parsed

    def ids() -> Iterator[Any]:
        with opener(path, "rb") as f:
            for i, (_, text, at, long_ints) in enumerate(native_items(f, where)):
                ex = parse_item(text, where, i, at, None, long_ints)
                yield ex.get(key) if type(ex) is dict else None

    for v in pull_translating(ids(), *reading_error(where)):
        if v is None:  # (not an object, or no id: the reader refuses the example, whatever is kept here)
            hashes.append(0)
            continue
        v = str(v)
        hashes.append(stable_hash(v))
        if key == "example_id" and not dup:
            try:
                guard.add(v)
            except ReleaseFormatError as e:
                dup.append(e)
    if key == "example_id" and not dup:
        guard.flush()
    if dup:
        raise dup[0]
    arr = np.array(hashes, dtype=np.int64)
    occ = occurrence_index(arr) if key != "example_id" else None
    return NativeScan(kind=kind, count=int(arr.size), occurrence=occ, id_key=key, id_hashes=arr)


@dataclass
class NativeShard:
    """Examples ``[start, stop)`` of one native file (``stop=None``: to the end)."""

    path: str
    start: int = 0
    stop: int | None = None
    kind: str = "list"
    #: occurrence of repeated pair_ids for examples start..stop (None: ids come from the file)
    occurrence: np.ndarray | None = field(default=None, repr=False)
    #: the key the prepass read and the stable_hash of its value for examples start..stop
    id_key: str | None = None
    id_hashes: np.ndarray | None = field(default=None, repr=False)


def iter_native(opener: Callable, shards: Sequence[NativeShard], split: str, size_order: str = "auto") -> Iterator[dict]:
    """Rows of contiguous shards of one native file, parsed item by item in one pass (:func:`read_examples`). The
    examples before the first shard are scanned and skipped, not parsed; every example is checked against the
    prepass's id hashes when there are some."""
    if not shards:
        return
    ctx = _Reading(shards, split, size_order)
    start, stop, where = ctx.start, ctx.stop, ctx.where

    def examples() -> Iterator[tuple[int, Any, Any]]:
        for i, (key, ex) in enumerate(read_examples(opener, ctx.path, where, start), start):
            if stop is not None and i >= stop:
                return
            yield i, key, ex

    # Only pulling the next example translates reading errors, and the ``yield`` is outside any ``try``
    # (:func:`pull_translating`): a consumer that never exhausts the iterator leaves it suspended until
    # interpreter exit, and closing it then must not evaluate ``except`` clauses.
    items = pull_translating(examples(), *reading_error(where))
    while True:
        parts, error, n = [], None, 0
        try:  # a batch of examples, converted together (:func:`native_rows`) ...
            for item in itertools.islice(items, ROWS_PER_BATCH):
                n += 1
                parts.append(ctx.convert(*item))
        except PerckitError as e:  # ... up to the first that cannot be read or refused: raised after the rows before it
            error = e
        yield from native_rows(parts, ctx.state)
        if error is not None:
            raise error
        if n < ROWS_PER_BATCH:
            break
    ctx.state.finish()


class _Reading:
    """What the reader keeps over a run of shards: the range, the prepass's ids and the conversion."""

    def __init__(self, shards: Sequence[NativeShard], split: str, size_order: str) -> None:
        self.shards = shards
        self.path = shards[0].path
        self.start, self.stop = shards[0].start, shards[-1].stop
        occ_parts = [s.occurrence for s in shards]
        self.occurrence = np.concatenate(occ_parts) if all(o is not None for o in occ_parts) else None
        hash_parts = [s.id_hashes for s in shards]
        self.id_hashes = np.concatenate(hash_parts) if all(h is not None for h in hash_parts) else None
        self.id_key = shards[0].id_key
        self.state = ConvertState(split, Path(self.path).name, size_order)
        self.where = f"M4Seg {split} split, {Path(self.path).name}"

    def convert(self, i: int, key: Any, ex: Any) -> tuple:
        """Example ``i`` (``key``: its key in an object file) checked against the prepass, as :func:`native_parts`."""
        j = i - self.start
        id_hashes, id_key = self.id_hashes, self.id_key
        if id_hashes is not None and isinstance(ex, _MAPS):
            v = ex.get(id_key)
            if j >= len(id_hashes) or v is None or stable_hash(str(v)) != id_hashes[j]:
                raise ReleaseFormatError(
                    f"{self.where}: example {i} does not have the {id_key} the prepass read there ({v!r}); the file "
                    "changed during the build or defeats the prepass: build it with num_proc=1"
                )
        fallback = None
        if key is not None:
            fallback = str(key)
        elif isinstance(ex, _MAPS) and ex.get("example_id") is None:
            pid = _alias(ex, EXAMPLE_ALIASES["pair_id"])
            if pid is not None:
                if self.occurrence is None:
                    raise ReleaseFormatError(
                        f"{self.state.where(str(pid))}: has no 'example_id' while the file's first example has one; "
                        "give every example an example_id or none"
                    )
                fallback = derived_example_id(str(pid), int(self.occurrence[j]))
        return native_parts(ex, self.state, fallback)


#: Cost of skipping an example before a shard (scanning it, not parsing it: :func:`read_examples`), relative to reading
#: and converting it (0.07 measured with the compiled scan: the 50,000 examples of the bench's release, 0.42 s against
#: 6.1 s of CPU, best of 3; 0.10 with the NumPy scan before it, 0.24 when a skipped example was parsed by ijson).
SKIP_COST_PARSE = 0.07


def shard_bounds(n: int, num_shards: int, skip_cost: float = SKIP_COST_PARSE) -> list[int]:
    """Boundaries of ``num_shards`` contiguous ranges over ``n`` examples with equal expected work.

    Shard j skips its ``b_j`` predecessors (cost ``skip_cost`` each) and converts its own: equal work T gives len_j
    = T - skip_cost * b_j, so b_{j+1} = (1 - r) b_j + T and T = n r / (1 - (1 - r)^num_shards)."""
    r = float(skip_cost)
    t = n / num_shards if r <= 0 else n * r / (1 - (1 - r) ** num_shards)
    bounds, b = [0], 0.0
    for _ in range(num_shards - 1):
        b = (1 - r) * b + t
        bounds.append(int(round(b)))
    bounds.append(n)
    return bounds


def native_shards(path: str, scan: NativeScan | None, num_shards: int) -> list[NativeShard]:
    """Split a native file into ``num_shards`` contiguous example ranges (one shard when the count is unknown).

    The last range is open-ended, so every example is read even if the count were off."""
    scan = scan or NativeScan(kind="list")  # no prepass: one shard of a list file
    occ, hashes = scan.occurrence, scan.id_hashes
    if scan.count is None or num_shards <= 1 or scan.count < 2 or scan.kind != "list":
        return [NativeShard(path, 0, None, scan.kind, occ, scan.id_key, hashes)]
    n = scan.count
    bounds = shard_bounds(n, min(num_shards, n), SKIP_COST_PARSE)
    return [NativeShard(path, a, None if j == len(bounds) - 2 else b, scan.kind, None if occ is None else occ[a:b], scan.id_key,
                        None if hashes is None else hashes[a:b]) for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
