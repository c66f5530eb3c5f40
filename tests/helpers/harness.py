"""Helpers shared by the test modules: a deadline for calls that used to hang, and the walk from datasets'
``DatasetGenerationError`` down to the documented perckit error under it."""

from __future__ import annotations

import re
import signal
from contextlib import contextmanager

import pytest

from perckit.errors import PerckitError


@contextmanager
def deadline(seconds: int = 20):
    """Fail (TimeoutError) instead of hanging: before the issue-13 fixes, opening a FIFO blocked forever."""

    def fire(signum, frame):
        raise TimeoutError(f"still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
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


def expect(fn, error, *patterns):
    """Call ``fn``; the documented error under what it raises must be an ``error`` whose message matches every pattern."""
    with pytest.raises(Exception) as info:
        fn()
    err = cause(info.value)
    assert isinstance(err, error), f"expected {error.__name__}, got {type(err).__name__}: {err}"
    for p in patterns:
        assert re.search(p, str(err), re.S), f"{p!r} not in {str(err)!r}"
    return err
