"""Guarded file access of the R4D-Bench readers: every path the release (or a prediction file) names goes
through :func:`perckit.paths.resolve_under`, and every file is read through
:func:`perckit.paths.read_regular_file` under one of the byte limits below.

A COCO ``file_name``, a ``mask_image`` / ``combined_mask_image`` of the ``_with_paths`` ground truth, a scene
name, a planted symbolic link: each could otherwise copy an arbitrary local file into the rows, and a FIFO
or ``/dev/zero`` planted as a frame image would hang the build.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..errors import PerckitError, ReleaseFormatError, ReleaseNotFoundError
from ..paths import read_regular_file

#: Largest JSON file of a release read (dense GT, query metadata, track GT, COCO files). The real
#: ``all_queries`` dense GT is tens of MB.
MAX_JSON_BYTES = 1 << 30
#: Largest frame image file (``frames`` config). Real frames are JPEGs of a few hundred KB.
MAX_IMAGE_BYTES = 64 << 20
#: Largest mask PNG file (``mask_source="mask_image"`` and prediction files). Real masks are a few KB.
MAX_MASK_PNG_BYTES = 64 << 20


def read_ahead(paths: Sequence[str | os.PathLike], limit: int = MAX_IMAGE_BYTES, depth: int = 16) -> Iterator[tuple[Path, bytes | Exception]]:
    """``(path, bytes)`` of every file, in order, each read by :func:`perckit.paths.read_regular_file` under
    ``limit`` (a FIFO, a device, a folder or a larger file gives its error in place of the bytes, before any
    read). As :func:`perckit.jsonio.read_ahead`, the kernel is asked to read ``depth`` files ahead; the hint
    opens without blocking and only regular files get it."""
    import stat

    paths = [Path(p) for p in paths]
    advise = getattr(os, "posix_fadvise", None)

    def hint(p: Path) -> None:
        try:
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return  # reported by the read itself
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                advise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)

    if advise is not None:
        for p in paths[:depth]:
            hint(p)
    for i, p in enumerate(paths):
        if advise is not None and i + depth < len(paths):
            hint(paths[i + depth])
        try:
            data: bytes | Exception = read_regular_file(p, "image file", limit, ReleaseFormatError, ReleaseNotFoundError)
        except PerckitError as e:
            data = e
        yield p, data
