"""Guarded file access of the R4D-Bench readers: every path the release (or a prediction file) names goes
through :func:`perckit.io.paths.resolve_under`, and every file is read through
:func:`perckit.io.paths.read_regular_file` under one of the byte limits below.

A COCO ``file_name``, a ``mask_image`` / ``combined_mask_image`` of the ``_with_paths`` ground truth, a scene
name, a planted symbolic link: each could otherwise copy an arbitrary local file into the rows, and a FIFO
or ``/dev/zero`` planted as a frame image would hang the build.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from ..io import prefetch

#: Largest JSON file of a release read (dense GT, query metadata, track GT, COCO files). The real
#: ``all_queries`` dense GT is tens of MB.
MAX_JSON_BYTES = 1 << 30
#: Largest frame image file (``frames`` config). Real frames are JPEGs of a few hundred KB.
MAX_IMAGE_BYTES = 64 << 20
#: Largest mask PNG file (``mask_source="mask_image"`` and prediction files). Real masks are a few KB.
MAX_MASK_PNG_BYTES = 64 << 20


def read_ahead(paths: Sequence[str | os.PathLike], limit: int = MAX_IMAGE_BYTES) -> Iterator[tuple[Path, bytes | Exception]]:
    """:func:`perckit.io.prefetch.read_ahead` of the frame images, each a regular file under ``limit`` bytes."""
    return prefetch.read_ahead(paths, limit=limit, what="image file")

