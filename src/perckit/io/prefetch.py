"""Keeping the CPU busy while a build reads: read-ahead of many small files, a background reader thread, and
the garbage collector paused while a block builds millions of containers.

These helpers change only how fast a reader runs, never what it reads: :func:`read_ahead` yields the same bytes
(and the same errors) as reading each file in turn, :func:`in_background` the same items as the iterator it
wraps, and :func:`gc_paused` only defers collection. Import them from here.
"""

from __future__ import annotations

import gc
import itertools
import os
import queue
import stat
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..errors import ReleaseFormatError, ReleaseNotFoundError
from .paths import read_regular_file


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block that builds millions of containers (parsing and
    normalising a release's JSON): every collection pass in it would traverse all the containers that
    survived so far, about a third of the time of such a block. Parsed JSON holds no reference cycles, so
    nothing is left for the collector; it is re-enabled (if it was on) when the block ends."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def batched(items: Iterable, size: int) -> Iterator[list]:
    """``items`` in lists of ``size`` (the last one shorter), each taken when the previous one has been used."""
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


def read_ahead(
    paths: Sequence[str | os.PathLike],
    depth: int = 256,
    *,
    limit: int,
    what: str = "file",
    ahead_bytes: int = 32 << 20,
    refill: float = 0.5,
) -> Iterator[tuple[Path, bytes | Exception]]:
    """``(path, bytes)`` of every file, in order, asking the kernel to read up to ``depth`` files and
    ``ahead_bytes`` bytes ahead.

    A build that reads thousands of small files (frame images) otherwise waits for the storage device on
    each one between its CPU work. ``posix_fadvise(WILLNEED)`` starts the reads of the next files in the
    background (no threads, no GIL contention; a no-op for files already cached or where the OS has no
    such call); the hint opens without blocking and only regular files get it. A deep window keeps the
    device busy: on this project's bench VM a cold 3,600-image build runs about a quarter faster with 256
    files (25 MB) ahead than with 16. The byte budget bounds what is asked for however large the files are
    (a file is hinted while the window holds less than ``ahead_bytes``, or when it is the next one read),
    and a file over ``limit`` is never hinted. A file that cannot be read gives its error in place of the
    bytes, for the caller. Each file is read by :func:`perckit.io.paths.read_regular_file` under ``limit`` bytes
    (required), so a FIFO, a device or a folder is refused at once (``ReleaseFormatError``; a missing file
    ``ReleaseNotFoundError``). The hint opens a file only to call ``posix_fadvise`` on it: nothing is read there.
    """
    paths = [p if isinstance(p, Path) else Path(p) for p in paths]  # (re-parsing a Path costs as much as a str)
    advise = getattr(os, "posix_fadvise", None)
    sizes: list[int] = []  # bytes asked for, per file hinted so far (0: not hinted)
    window = 0  # bytes asked for of the files hinted and not yet read

    def top_up(i: int) -> None:
        """Hint files from the first one not hinted yet until the window is full (``i``: the next file read)."""
        nonlocal window
        while len(sizes) < len(paths) and len(sizes) - i < depth:
            try:
                fd = os.open(paths[len(sizes)], os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            except OSError:
                sizes.append(0)  # reported by the read itself
                continue
            try:
                st = os.fstat(fd)
                size = st.st_size if stat.S_ISREG(st.st_mode) and st.st_size <= limit else None
                if size is not None and window > 0 and window + size > ahead_bytes:
                    return  # full: asked again after the next read
                if size is not None:
                    advise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
                    window += size
                sizes.append(size or 0)
            except OSError:
                sizes.append(0)
            finally:
                os.close(fd)

    for i, p in enumerate(paths):
        if advise is not None and (len(sizes) - i <= depth * refill or window <= ahead_bytes * refill):
            top_up(i)
        data: bytes | Exception
        try:
            data = read_regular_file(p, what, limit, ReleaseFormatError, ReleaseNotFoundError)
        except (ReleaseFormatError, ReleaseNotFoundError, OSError) as e:
            data = e
        if i < len(sizes):
            window -= sizes[i]
        yield p, data


def in_background(items: Iterator[Any], depth: int = 4) -> Iterator[Any]:
    """The items of ``items``, produced ``depth`` ahead by a background thread.

    For readers whose work is mostly I/O and copies that release the GIL (a tar member's bytes): the next
    members are read while the caller converts and writes the current ones. An exception of the reader is
    raised here, at the item where it happened; closing this generator early stops the thread.
    """
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((done, None))
        except BaseException as e:  # handed to the consumer, raised there
            q.put((done, e))
        finally:
            close = getattr(items, "close", None)
            if close is not None and stop.is_set():
                close()

    thread = threading.Thread(target=produce, name="perckit-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = q.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on a full queue
            with suppress(queue.Empty):
                q.get_nowait()
            thread.join(timeout=0.05)
