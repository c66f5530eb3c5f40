"""Exception types raised by perckit.

Every error subclasses a builtin (``ValueError`` or ``FileNotFoundError``) so
callers that catch the builtin keep working, and its message names the file or
field, what was expected and what was found.
"""

from __future__ import annotations

import logging
import numbers
import os
from typing import Any, Callable, TypeVar

T = TypeVar("T")


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


class InferredShapeError(ReleaseFormatError):
    """A file or field whose layout no release card documents (perckit's reading of it is inferred, ``[inferred]``
    in the cards) has another shape than the one perckit reads. Its readers raise it and :func:`inferred_reading`
    turns it into one warning: only what a card documents may fail a build."""


class RLEError(PerckitError, ValueError):
    """A COCO RLE (or something meant to become one) is malformed."""


class PredictionError(PerckitError, ValueError):
    """Predictions do not match the references or the declared schema."""


class OptionError(PerckitError, ValueError):
    """An option has a value outside the allowed set."""


class OutputError(PerckitError, OSError):
    """A file perckit writes could not be written (a full disk, a file-size limit, a folder it may not write).

    Raised by the one atomic writer (:func:`perckit.io.paths.atomic_file`), which has then removed its temporary
    file: the target holds its previous content, or does not exist. Also an ``OSError``."""


class HubError(PerckitError, OSError):
    """The Hub could not be reached, has no valid login, or refused a call (``perckit push``). Also an ``OSError``."""


def inferred_reading(read: Callable[[], T], default: T, where: str, logger: logging.Logger | Any) -> T:
    """``read()``; when it raises :class:`InferredShapeError`, one warning naming ``where`` (the file, or the file
    and field) and ``default``: the inferred reading is ignored. Every other error propagates, so a hostile or
    broken file (too large, not JSON, a path out of the release) is still refused. ``logger``: a logger, or any
    object with its ``warning(msg, *args)`` (a reader that caps its warnings per file)."""
    try:
        return read()
    except InferredShapeError as e:
        logger.warning("%s: ignored: its layout is not documented by the release card and differs from the one perckit "
                       "infers (%s)", where, e)
        return default


def _same_choice(value: object, choice: object) -> bool:
    if value is choice:
        return True
    if isinstance(value, bool) != isinstance(choice, bool) or not isinstance(value, type(choice)):
        return False  # 1 is not True, 1.0 is not 1, an array is not a string
    return value == choice


def check_choice(name: str, value: object, allowed: tuple) -> None:
    """Raise :class:`OptionError` when ``value`` is not one of ``allowed`` (of the same type: ``True`` is not
    the choice ``1``, and a value that cannot be compared, such as an array, is refused, not an error)."""
    if not any(_same_choice(value, a) for a in allowed):
        raise OptionError(f"option {name!r}: expected one of {list(allowed)}, got {short_repr(value)}")


#: What each type name of :func:`check_option_type` accepts: as the message says it, and the test of a value
#: (``is_bool``: the value is a bool, numpy's included).
_OPTION_TYPES: dict[str, tuple[str, Callable[[Any, bool], bool]]] = {
    "bool": ("True or False", lambda v, is_bool: is_bool),
    "int": ("an integer", lambda v, is_bool: isinstance(v, numbers.Integral) and not is_bool),
    "number": ("a number", lambda v, is_bool: isinstance(v, numbers.Real) and not is_bool),
    "str": ("a string", lambda v, is_bool: isinstance(v, str)),
    "path": ("a path (a string or os.PathLike)", lambda v, is_bool: isinstance(v, (str, os.PathLike))),
    "strs": ("a list of strings", lambda v, is_bool: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)),
    "callable": ("a callable", lambda v, is_bool: callable(v)),
}


def _is_option_type(value: object, kind: str) -> bool:
    import numpy as np

    if kind not in _OPTION_TYPES:
        raise ValueError(f"check_option_type: unknown type name {kind!r}")
    return _OPTION_TYPES[kind][1](value, isinstance(value, (bool, np.bool_)))


def check_option_type(name: str, value: object, expected: str, owner: str | None = None) -> object:
    """Raise :class:`OptionError` naming the option when ``value`` is not of the ``expected`` type.

    ``expected`` is one or more of ``bool``, ``int``, ``number`` (int or float, never a bool), ``str``,
    ``path``, ``strs`` (a list or tuple of strings), ``callable`` and ``None``, joined by ``|``
    (``"str | None"``). No conversion is made: ``"0.5"`` is not a number, ``1`` is not ``True``.
    Returns ``value``, so a caller can check and assign in one step.
    """
    kinds = [k.strip() for k in expected.split("|")]
    if value is None and "None" in kinds:
        return value
    if any(k != "None" and _is_option_type(value, k) for k in kinds):
        return value
    what = " or ".join("None" if k == "None" else _OPTION_TYPES[k][0] for k in kinds)
    prefix = f"{owner}: " if owner else ""
    raise OptionError(f"{prefix}option {name!r}: expected {what}, got {type(value).__name__}: {short_repr(value)}")


def check_options(owner: str, given: object, allowed: object) -> None:
    """Raise :class:`OptionError` naming ``owner`` when ``given`` has a key outside ``allowed``."""
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise OptionError(f"{owner}: unknown option(s) {unknown}; expected some of {sorted(allowed)}")


def make_options(owner: str, cls: Callable[..., T], given: Any) -> T:
    """``cls(**given)`` once :func:`check_options` has found every key of ``given`` among the dataclass ``cls``'s fields."""
    check_options(owner, given, cls.__dataclass_fields__)  # type: ignore[attr-defined]
    return cls(**given)


def optional_field(value: object, default: T, kind: type | tuple[type, ...], expected: str, where: str,
                   error: type[Exception]) -> T:
    """A field read from data: ``default`` when it is None (absent or null), else ``value`` if it is a ``kind``,
    else ``error("<where>: expected <expected>, found <value>")``."""
    if value is None:
        return default
    if not isinstance(value, kind):
        raise error(f"{where}: expected {expected}, found {short_repr(value)}")
    return value  # type: ignore[return-value]


def short_repr(obj: object, limit: int = 80) -> str:
    """``repr`` cut to ``limit`` characters, for error messages."""
    text = repr(obj)
    return text if len(text) <= limit else text[: limit - 3] + "..."
