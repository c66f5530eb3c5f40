"""Reading release files with errors that name the file and the expectation."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ReleaseFormatError, ReleaseNotFoundError, short_repr
from .paths import read_regular_file
from .prefetch import gc_paused


def require_file(root: str | os.PathLike, rel: str, what: str = "release file") -> Path:
    """``root/rel`` when it is a file, else :class:`ReleaseNotFoundError` naming the expected path."""
    root = Path(root)
    if not root.is_dir():
        raise ReleaseNotFoundError(f"release folder {str(root)!r} does not exist (expected the release root)")
    path = root / rel
    if not path.is_file():
        raise ReleaseNotFoundError(f"{what} {rel!r} not found under {str(root)!r}")
    return path


#: The one rule for a byte-order mark, in every text reader (JSON, JSON Lines, CSV, ``SHA256SUMS``): a UTF-8
#: BOM at the very start of a file is skipped; anywhere else it is an ordinary character (U+FEFF).
UTF8_BOM = b"\xef\xbb\xbf"


def decode_text(data: bytes, where: str, error: type[Exception] = ReleaseFormatError, what: str = "UTF-8 text") -> str:
    """``data`` as text under the BOM rule (:data:`UTF8_BOM` skipped at the start); bytes that are not UTF-8
    raise ``error`` naming ``where``."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{where}: expected {what}, got undecodable bytes ({e})") from None


class DuplicateKeyError(ValueError):
    """A JSON object repeats a key (``json`` would silently keep the last value). Readers that turn a
    ``ValueError`` of the parser into their own error report it with the key."""


def _unique_object(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):  # the rare failure path finds the key
        seen: set = set()
        for k, _ in pairs:
            if k in seen:
                raise DuplicateKeyError(f"duplicate key {k!r} in a JSON object (expected every key once)")
            seen.add(k)
    return out


#: :func:`loads`' decoder, built once (``json.loads`` with a hook builds one per call: a third of a short line's parse).
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_object)


def loads(text: str | bytes) -> Any:
    """``json.loads`` under the project's rules: a repeated key in any object raises :class:`DuplicateKeyError`
    (a ``ValueError``), and a leading UTF-8 BOM is skipped (:data:`UTF8_BOM`). Every JSON reader uses it.

    The one JSON loader: ``json`` with a hook that sees every object's pairs. (An ``orjson`` path beside it,
    proving its value equal by counting colons, parsed R4D-Bench's JSON files only 1.4x faster and went.)"""
    if isinstance(text, (bytes, bytearray)):
        text = text[len(UTF8_BOM):] if text.startswith(UTF8_BOM) else text
        text = text.decode(json.detect_encoding(text), "surrogatepass")  # what json.loads does with bytes
    elif text.startswith("\ufeff"):
        text = text[1:]
        if text.startswith("\ufeff"):  # a second one: json.loads' own error
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _DECODER.decode(text)


def parse_json(text: str | bytes, where: str, error: type[Exception] = ReleaseFormatError,
               expected: str = "valid JSON") -> Any:
    """:func:`loads` with every parse failure as ``error`` naming ``where``: a repeated key (the
    :class:`DuplicateKeyError` message), invalid JSON, undecodable bytes, an integer literal past Python's
    digit limit (``ValueError``) and nesting thousands of levels deep (``RecursionError``)."""
    try:
        return loads(text)
    except DuplicateKeyError as e:
        raise error(f"{where}: {e}") from None
    except (ValueError, RecursionError) as e:
        raise error(f"{where}: expected {expected}, got a parse error: {type(e).__name__}: {e}") from None


def read_json(
    path: str | os.PathLike,
    error: type[Exception] = ReleaseFormatError,
    not_found: type[Exception] = ReleaseNotFoundError,
    *,
    limit: int,
) -> Any:
    """Parse a JSON file; a missing or malformed file raises an error naming it.

    The file is read through :func:`perckit.io.paths.read_regular_file` under ``limit`` bytes (required: a FIFO,
    a device or a larger file raises ``error`` before anything is read), then parsed by :func:`parse_json` (the
    rules of :func:`loads`: a repeated key raises ``error`` naming the key, a leading UTF-8 BOM is skipped).
    """
    path = Path(path)
    if not path.exists():
        raise not_found(f"{str(path)!r}: file not found")
    data = read_regular_file(path, repr(str(path)), limit, error, not_found)
    with gc_paused():
        return parse_json(data, repr(str(path)), error)


#: Largest JSON Lines file :func:`iter_json_lines` reads when its caller names no cap of its own.
MAX_JSON_LINES_BYTES = 1 << 30


def iter_json_lines(
    source: str | os.PathLike | bytes,
    where: str | None = None,
    error: type[Exception] = ReleaseFormatError,
    limit: int = MAX_JSON_LINES_BYTES,
    not_found: type[Exception] = ReleaseNotFoundError,
) -> Iterator[tuple[int, str, dict]]:
    """The objects of a JSON Lines file (or of its bytes), as ``(line_number, where_of_the_line, object)``.

    The one JSON Lines reader, so every ``.jsonl`` file follows the same rules with the same messages:

    - a path is read as a regular file of at most ``limit`` bytes (:func:`perckit.io.paths.read_regular_file`:
      a FIFO, a device, a folder or a larger file raises ``error`` before anything is read); a path that does
      not exist raises ``not_found`` ("<file>: file not found");
    - lines end at ``\\n`` (a ``\\r`` before it is whitespace); a UTF-8 BOM at the very start of the data is
      skipped (:data:`UTF8_BOM`), one at the start of any later line is refused;
    - blank lines are skipped (they still count in the line numbers);
    - each line is UTF-8 holding one JSON object, parsed by the rules of :func:`loads` (a repeated key is
      refused); a parse error, including Python's limit on the digits of an integer literal (a
      ``ValueError``) and nesting thousands of levels deep (a ``RecursionError``), or a value that is not an
      object raises ``error``.

    Every message starts with ``where_of_the_line``, ``"<where> line <N>"`` (``where`` defaults to the
    ``repr`` of the path), which is also yielded for the caller's own checks of the object, and says what
    was expected and what was found: ``"'p.jsonl' line 2: expected a JSON object, got list: [1, 2]"``.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if where is None:
            where = "JSON Lines data"
    else:
        path = Path(source)
        if where is None:
            where = repr(str(path))
        if not path.exists():
            raise not_found(f"{where}: file not found")
        data = read_regular_file(path, where, limit, error, not_found)
    lines = io.BytesIO(data)  # (shares the bytes: no copy) read line by line, each ending at b"\n"
    lines.seek(len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0)
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        line_where = f"{where} line {n}"
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise error(f"{line_where}: expected UTF-8 JSON lines, got undecodable bytes ({e})") from None
        if line.lstrip(" \t\r").startswith("\ufeff"):
            raise error(
                f"{line_where}: expected a JSON object, got a byte-order mark (U+FEFF) at the start of the line "
                "(one is skipped only at the start of the file)"
            )
        obj = parse_json(line, line_where, error, "a JSON object")
        if not isinstance(obj, dict):
            raise error(f"{line_where}: expected a JSON object, got {type(obj).__name__}: {short_repr(obj)}")
        yield n, line_where, obj


def parse_int(value: Any, where: str, error: type[Exception] = ReleaseFormatError) -> int:
    """An int, or a string of ASCII digits, as int; anything else raises ``error`` naming ``where``."""
    if isinstance(value, bool):
        raise error(f"{where}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        return int(value.strip())
    raise error(f"{where}: expected an integer (or a string of digits), got {value!r}")
