"""The decompressed stream of a native M⁴Seg file (``annotations/m4seg_{split}.json.gz``) and its parse.

Everything here is bounded by documented limits, whatever the file holds:

- :class:`JsonGuard` refuses nesting deeper than :data:`MAX_JSON_DEPTH` and an example or a string longer
  than :data:`MAX_EXAMPLE_BYTES` before the parser sees them; it skips one UTF-8 byte-order mark at the very
  start of the stream (the project's one BOM rule, :data:`perckit.io.jsonio.UTF8_BOM`) and refuses one anywhere
  else outside a string, naming its byte offset.
- :func:`iter_items` parses examples with ijson and refuses a JSON object that repeats a key (ijson, like
  ``json``, would keep only the last value).
"""

from __future__ import annotations

import gzip
import re
import zlib
from contextlib import contextmanager
from typing import Any, BinaryIO, Callable, Iterator, Mapping

import numpy as np

from ..errors import ReleaseFormatError
from ..errors import short_repr as _short
from ..io.jsonio import UTF8_BOM

#: Deepest JSON nesting accepted in a native file (an example is about 7 levels deep). ijson keeps one
#: prefix string per level, each as long as the path to it: 100,000 levels would need tens of gigabytes.
MAX_JSON_DEPTH = 64
#: Largest decompressed JSON accepted for one example, and for one string (real examples are a few KB).
MAX_EXAMPLE_BYTES = 64 << 20
#: Errors of a corrupt or truncated gzip stream (``BadGzipFile`` is an ``OSError``, a cut stream an ``EOFError``).
GZIP_ERRORS = (OSError, EOFError, zlib.error)

_ESCAPE = re.compile(rb"\\.", re.S)
#: Every byte but the JSON structure a depth scan needs: quotes and brackets.
_NOT_TOKENS = bytes(c for c in range(256) if c not in b'"[]{}')
_STEP = np.zeros(256, dtype=np.int64)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


def ijson_module():
    try:
        import ijson
    except ImportError as e:  # pragma: no cover - ijson is a core dependency
        raise ImportError("reading the native M4Seg JSON needs ijson: pip install ijson") from e
    return ijson


def json_error(e: Exception) -> str:
    """ijson's parse error as one line of text (yajl gives bytes with the context on several lines)."""
    msg = e.args[0] if e.args else e
    if isinstance(msg, bytes):
        msg = msg.decode("utf-8", "replace")
    return " ".join(str(msg).split())


def pull_translating(items: Iterator, errors: tuple, convert: Callable[[BaseException], Exception]) -> Iterator:
    """The items of ``items``; an exception of ``errors`` raised while *pulling* the next item is raised as
    ``convert(e)``. The ``yield`` sits outside the ``try``: an exception the consumer throws in (GeneratorExit
    when it closes the iterator) is never matched against ``errors``, so it passes through unchanged, and a
    reader left suspended until interpreter exit (a streaming ``next(iter(ds))``) closes quietly. (A
    ``yield`` inside ``try ... except ijson.JSONError`` evaluates that clause at finalisation, when module
    globals are already None: "Exception ignored ... TypeError: catching classes that do not inherit from
    BaseException".)"""
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except errors as e:
            raise convert(e) from None
        yield item


def reading_error(ijson_mod: Any, where: str) -> tuple[tuple, Callable[[BaseException], Exception]]:
    """``(errors, convert)`` for :func:`pull_translating`: ijson's and gzip's errors as
    :class:`ReleaseFormatError` naming ``where`` (the messages of :func:`read_errors`)."""

    def convert(e: BaseException) -> Exception:
        if isinstance(e, ijson_mod.JSONError):
            return ReleaseFormatError(f"{where}: invalid JSON: {json_error(e)}")
        return ReleaseFormatError(f"{where}: unreadable gzip data ({type(e).__name__}: {e})")

    return (ijson_mod.JSONError, *GZIP_ERRORS), convert


@contextmanager
def read_errors(ijson_mod: Any, where: str) -> Iterator[None]:
    """ijson's and gzip's errors as :class:`ReleaseFormatError` naming ``where``."""
    try:
        yield
    except ijson_mod.JSONError as e:
        raise ReleaseFormatError(f"{where}: invalid JSON: {json_error(e)}") from None
    except GZIP_ERRORS as e:
        raise ReleaseFormatError(f"{where}: unreadable gzip data ({type(e).__name__}: {e})") from None


class JsonGuard:
    """A read-only stream over decompressed JSON that refuses, before the parser sees them, the inputs that
    would make it allocate without bound: nesting deeper than :data:`MAX_JSON_DEPTH`, and an example (anything
    below the top level) or a string longer than :data:`MAX_EXAMPLE_BYTES`.

    A UTF-8 BOM as the first bytes of the stream is skipped; a BOM anywhere else outside a string raises,
    naming its offset in the decompressed stream (inside a string it is the character U+FEFF).

    Each read is scanned at C speed: escapes are removed by a regex, everything but quotes and brackets by
    ``bytes.translate``, and NumPy counts the brackets outside strings. The state (depth, inside a string, a
    pending escape) carries across reads. Invalid JSON is left to the parser.
    """

    def __init__(self, raw: BinaryIO, where: str) -> None:
        self._raw, self._where = raw, where
        self._depth = 0
        self._in_str = 0
        self._escaped = False
        self._item_bytes = 0
        self._str_bytes = 0
        self._started = False
        #: bytes of the decompressed stream read so far (the skipped BOM included)
        self.offset = 0

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        if not self._started and data:  # (ijson's read(0), to tell bytes from text, does not start the stream)
            self._started = True
            while data and len(data) < len(UTF8_BOM) and UTF8_BOM.startswith(data):
                more = self._raw.read(len(UTF8_BOM))
                if not more:
                    break
                data += more
            if data.startswith(UTF8_BOM):
                self.offset += len(UTF8_BOM)
                data = data[len(UTF8_BOM):] or self._raw.read(size)
        if data:
            self._scan_checked(data)
            self.offset += len(data)
        return data

    def _scan_checked(self, data: bytes) -> None:
        pos = data.find(UTF8_BOM)
        if pos < 0:
            self._scan(data)
            return
        start = 0
        while pos >= 0:
            if pos > start:
                self._scan(data[start:pos])
            if not self._in_str:
                raise ReleaseFormatError(
                    f"{self._where}: a UTF-8 byte-order mark at byte {self.offset + pos} of the decompressed JSON, outside "
                    "a string; expected one only at the very start of the stream (where it is skipped)"
                )
            start = pos
            pos = data.find(UTF8_BOM, pos + 1)
        self._scan(data[start:])

    def _too_long(self, what: str) -> ReleaseFormatError:
        return ReleaseFormatError(
            f"{self._where}: {what} is longer than {MAX_EXAMPLE_BYTES} bytes of decompressed JSON; expected M4Seg "
            "examples of a few KB (a corrupt file or a decompression bomb)"
        )

    def _scan(self, data: bytes) -> None:
        n = len(data)
        d = data
        if self._escaped:  # the first byte is escaped by a backslash that ended the previous read
            d = d[1:]
            self._escaped = False
        if b"\\" in d:
            d = _ESCAPE.sub(b"", d)
            if d.endswith(b"\\"):
                self._escaped = True
                d = d[:-1]
        tokens = np.frombuffer(d.translate(None, _NOT_TOKENS), dtype=np.uint8)
        quotes = tokens == 0x22
        inside = (np.cumsum(quotes) + self._in_str) & 1  # per token: 1 inside a string (a closing quote gives 0)
        brackets = tokens[~quotes & (inside == 0)]
        was_in_str = self._in_str
        self._in_str = int(inside[-1]) if tokens.size else self._in_str
        if self._in_str:
            last = d.rfind(b'"')
            self._str_bytes = (self._str_bytes + n) if last < 0 and was_in_str else len(d) - last
            if self._str_bytes > MAX_EXAMPLE_BYTES:
                raise self._too_long("a JSON string")
        else:
            self._str_bytes = 0
        if brackets.size:
            depth = self._depth + np.cumsum(_STEP[brackets])
            if int(depth.max()) > MAX_JSON_DEPTH:
                raise ReleaseFormatError(
                    f"{self._where}: JSON nested more than {MAX_JSON_DEPTH} levels deep; expected M4Seg examples "
                    "(about 7 levels: list, example, groundings, img_k, grounding, mask, counts)"
                )
            back_to_top = bool((depth <= 1).any())
            self._depth = int(depth[-1])
        else:
            back_to_top = self._depth <= 1
        self._item_bytes = n if back_to_top else self._item_bytes + n
        if self._item_bytes > MAX_EXAMPLE_BYTES:
            raise self._too_long("an example")


def gunzip(fileobj: BinaryIO, where: str = "native M4Seg file") -> JsonGuard:
    """The decompressed stream of a native file, guarded (see :class:`JsonGuard`)."""
    return JsonGuard(gzip.GzipFile(fileobj=fileobj, mode="rb"), where)


def top_level_kind(fileobj: BinaryIO, where: str) -> str:
    """``"list"`` or ``"object"``: the first non-blank character of the decompressed file (after a BOM)."""
    gz = gunzip(fileobj, where)
    try:
        head = gz.read(4096).lstrip()
    except GZIP_ERRORS as e:
        raise ReleaseFormatError(f"{where}: expected a gzip-compressed JSON file, found unreadable data ({type(e).__name__}: {e})") from None
    if head[:1] == b"[":
        return "list"
    if head[:1] == b"{":
        return "object"
    raise ReleaseFormatError(f"{where}: expected a JSON list of examples or an object of examples, found {head[:40]!r}")


def _example_label(key: Any, ex: Any) -> str:
    if key is not None:
        return f" ({str(key)!r})"
    if isinstance(ex, Mapping):
        for k in ("example_id", "pair_id", "id"):
            v = ex.get(k)
            if v is not None and not isinstance(v, (dict, list)):
                return f" ({_short(v)})"
    return ""


def iter_items(ijson_mod: Any, gz: BinaryIO, kind: str, where: str = "native M4Seg file", first: int = 0) -> Iterator[tuple[str | None, Any]]:
    """``(key, example)`` of every top-level item (``key`` None for a list), parsed with ijson.

    An object anywhere in an example that repeats a key raises :class:`ReleaseFormatError` naming the example
    (its index from ``first`` and its id) and the key: ijson keeps the last value silently, so a second
    ``example_id`` or ``image_paths`` would otherwise replace the first. (A repeated top-level key of an
    object file is a repeated example id, which the id check refuses.)"""
    repeated: list = []  # set as soon as any object parsed so far repeats a key (ijson parses ahead)

    class _Object(dict):
        __slots__ = ("repeats",)

        def __setitem__(self, k: Any, v: Any) -> None:
            if k in self:
                self.repeats = k
                repeated.append(k)
            dict.__setitem__(self, k, v)

    if kind == "list":
        items = ((None, ex) for ex in ijson_mod.items(gz, "item", use_float=True, map_type=_Object))
    else:
        items = ijson_mod.kvitems(gz, "", use_float=True, map_type=_Object)
    for i, (key, ex) in enumerate(items, first):
        if repeated:  # rare: find out whether the repeat is in this example or in one parsed ahead
            k = _repeated_key(ex)
            if k is not None:
                raise ReleaseFormatError(
                    f"{where}: example {i}{_example_label(key, ex)}: a JSON object repeats the key {k!r}; expected "
                    "every key once (parsers disagree on which value wins)"
                )
        yield key, ex


def _repeated_key(value: Any) -> Any:
    """The key an object in ``value`` repeated (marked by :func:`iter_items`), or None."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            k = getattr(v, "repeats", None)
            if k is not None:
                return k
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None
