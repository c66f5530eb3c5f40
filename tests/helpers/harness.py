"""Helpers shared by the test modules: a deadline for calls that used to hang, and the walk from datasets'
``DatasetGenerationError`` down to the documented perckit error under it.

Two lookups, one walker (:func:`chain`): :func:`cause` finds the perckit error anywhere under what was
raised; :func:`documented_error` is the bad-input matrix's stricter rule (the error itself, or the cause of
datasets' ``DatasetGenerationError`` and nothing else may escape). :func:`expect` takes either.
"""

from __future__ import annotations

import re
import signal
from contextlib import contextmanager
from typing import Callable, Iterable

import datasets
import pytest

from perckit.errors import PerckitError


@contextmanager
def deadline(seconds: float = 20):
    """Fail (TimeoutError) instead of hanging: before the issue-13 fixes, opening a FIFO blocked forever, and a
    fuzz input could loop in a parser. A real-time interval timer (SIGALRM; the main thread only, not nested)."""

    def fire(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s (a hang)")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def chain(exc: BaseException | None):
    """``exc`` and the exceptions under it (``__cause__``, else ``__context__``), each once."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def messages(exc: BaseException | None) -> list[str]:
    """The messages of an exception and of every exception under it (datasets wraps generation errors)."""
    return [str(e) for e in chain(exc)]


def cause(exc: BaseException) -> BaseException:
    """The perckit error itself, or the one under datasets' DatasetGenerationError (its ``__cause__`` / ``__context__``)."""
    e = next((e for e in chain(exc) if isinstance(e, PerckitError)), None)
    assert isinstance(e, PerckitError), f"undocumented {type(exc).__name__}: {exc!r}"
    return e


def documented_error(exc: BaseException) -> PerckitError:
    """The documented error behind ``exc``: ``exc`` itself, or the cause of datasets' DatasetGenerationError.
    Any other exception type escaping is a failure, as is a DatasetGenerationError without a perckit error under it."""
    if isinstance(exc, PerckitError):
        return exc
    assert isinstance(exc, datasets.exceptions.DatasetGenerationError), f"undocumented {type(exc).__name__} escaped: {exc!r}"
    e = next((e for e in chain(exc) if isinstance(e, PerckitError)), None)
    if e is None:
        raise AssertionError(f"DatasetGenerationError without a documented error in its cause chain: {exc!r}")
    return e


def check(err: BaseException, error: type, patterns: Iterable[str]) -> None:
    """``err`` is an ``error`` whose message matches every regular expression of ``patterns`` (``re.S``)."""
    assert isinstance(err, error), f"expected {error.__name__}, got {type(err).__name__}: {err}"
    for p in patterns:
        assert re.search(p, str(err), re.S), f"{p!r} not found in the message {str(err)!r}"


def expect(fn: Callable[[], object], error: type, *patterns: str,
           find: Callable[[BaseException], BaseException] = cause) -> BaseException:
    """Call ``fn``; the documented error under what it raises (``find``: :func:`cause`, or the stricter
    :func:`documented_error`) must be an ``error`` whose message matches every pattern. Returns that error (a
    PerckitError and an ``error`` already: asserting either again cannot fail, tests/test_suite_harness.py finds it)."""
    with pytest.raises(Exception) as info:
        fn()
    err = find(info.value)
    check(err, error, patterns)
    return err
