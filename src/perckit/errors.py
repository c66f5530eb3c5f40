"""Exception types raised by perckit.

Every error subclasses a builtin (``ValueError`` or ``FileNotFoundError``) so
callers that catch the builtin keep working, and its message names the file or
field, what was expected and what was found.
"""

from __future__ import annotations


class PerckitError(Exception):
    """Base class of every error perckit raises on purpose."""


class InputNotFoundError(PerckitError, FileNotFoundError, ValueError):
    """A file or folder the user pointed at is missing.

    Both a ``FileNotFoundError`` and a ``ValueError``: the specs ask for a
    ``ValueError`` naming the missing file, Python users expect the former.
    """


class ReleaseNotFoundError(InputNotFoundError):
    """A release folder or a file the release layout requires is missing."""


class ReleaseFormatError(PerckitError, ValueError):
    """A release file exists but does not have the documented content."""


class RLEError(PerckitError, ValueError):
    """A COCO RLE (or something meant to become one) is malformed."""


class PredictionError(PerckitError, ValueError):
    """Predictions do not match the references or the declared schema."""


class OptionError(PerckitError, ValueError):
    """An option has a value outside the allowed set."""


def check_choice(name: str, value: object, allowed: tuple) -> None:
    """Raise :class:`OptionError` when ``value`` is not one of ``allowed``."""
    if value not in allowed:
        raise OptionError(f"option {name!r}: expected one of {list(allowed)}, got {value!r}")


def check_options(owner: str, given: object, allowed: object) -> None:
    """Raise :class:`OptionError` naming ``owner`` when ``given`` has a key outside ``allowed``."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise OptionError(f"{owner}: unknown option(s) {unknown}; expected some of {sorted(allowed)}")


def short_repr(obj: object, limit: int = 80) -> str:
    """``repr`` cut to ``limit`` characters, for error messages."""
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."
