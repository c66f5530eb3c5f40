"""Reading release files with errors that name the file and the expectation."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .errors import PerckitError, ReleaseFormatError, ReleaseNotFoundError


def require_file(root: str | os.PathLike, rel: str, what: str = "release file") -> Path:
    """``root/rel`` when it is a file, else :class:`ReleaseNotFoundError` naming the expected path."""
    root = Path(root)
    if not root.is_dir():
        raise ReleaseNotFoundError(f"release folder {str(root)!r} does not exist (expected the release root)")
    path = root / rel
    if not path.is_file():
        raise ReleaseNotFoundError(f"{what} {rel!r} not found under {str(root)!r}")
    return path


def read_json(
    path: str | os.PathLike,
    error: type[Exception] = ReleaseFormatError,
    not_found: type[Exception] = ReleaseNotFoundError,
    unique_keys: bool = False,
) -> Any:
    """Parse a JSON file; a missing or malformed file raises an error naming it.

    With ``unique_keys``, an object with a repeated key (which ``json`` would
    silently collapse to the last value) raises ``error`` naming the key.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise not_found(f"{str(path)!r}: file not found") from None
    hook = None
    if unique_keys:
        def hook(pairs: list) -> dict:
            out: dict = {}
            for k, v in pairs:
                if k in out:
                    raise error(f"{str(path)!r}: duplicate key {k!r} in a JSON object")
                out[k] = v
            return out
    try:
        return json.loads(data, object_pairs_hook=hook)
    except PerckitError:
        raise  # the duplicate-key error of ``hook``
    except (ValueError, RecursionError) as e:
        # ValueError covers JSONDecodeError, UnicodeDecodeError and Python's limit on the digits of an
        # integer literal (4300); RecursionError an array or object nested thousands of levels deep.
        raise error(f"{str(path)!r}: expected valid JSON, got a parse error: {type(e).__name__}: {e}") from None


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
