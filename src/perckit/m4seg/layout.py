"""Where the M⁴Seg release keeps each split: the native file, the Parquet shards, and which one a build reads.

Paths only: nothing here opens a file except to check it is a regular file inside the release
(:func:`confine_files`). The readers are :mod:`perckit.m4seg.read.native` and :mod:`perckit.m4seg.read.parquet`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from ..errors import ReleaseFormatError, ReleaseNotFoundError, check_choice
from ..io.paths import is_remote, resolve_under

SPLITS = ("train", "test")
SOURCES = ("auto", "native", "parquet")
NATIVE_FILE = "annotations/m4seg_{split}.json.gz"
PARQUET_GLOB = "data/{split}-*.parquet"


def native_path(root: str | Path, split: str) -> Path:
    return Path(root) / NATIVE_FILE.format(split=split)


def parquet_paths(root: str | Path, split: str, glob_fn: Callable[[str], list] | None = None) -> list[str]:
    """``sorted(glob("data/{split}-*.parquet"))`` under ``root``; ``glob_fn`` is the (streaming-patched)
    ``glob.glob``. A local root is a literal path (``glob.escape``): a release at ``.../m4seg[1]`` lists its own
    shards, not those of ``.../m4seg1``."""
    import glob as _glob

    base = Path(root) if is_remote(root) else Path(_glob.escape(str(Path(root))))
    return sorted((glob_fn or _glob.glob)(str(base / PARQUET_GLOB.format(split=split))))


def confine_files(root: str | Path, files: Sequence[str], split: str, links: bool = True) -> None:
    """Every local release file a split reads (the native file, the shards the glob found) is a regular file
    (a FIFO named ``data/test-0.parquet`` would block the build on open) and, with ``links``, lies inside
    ``root`` after symbolic links: a shard or ``data/`` linked out of a user-given release folder raises
    :class:`ReleaseFormatError` naming it (``perckit.io.paths.resolve_under``). The builder passes ``links=True``
    for a ``data_dir`` release; a Hub snapshot's files are links into the Hub cache made by huggingface_hub."""
    import stat

    base = os.path.abspath(root)
    for p in files:
        if "://" in str(p):  # a remote (streaming) path: nothing local to follow
            continue
        rel = os.path.relpath(os.path.abspath(p), base).replace(os.sep, "/")
        where = f"M4Seg {split} split: release file {rel!r}"
        if links:
            resolve_under(root, rel, where)
        try:
            mode = os.stat(p).st_mode
        except OSError as e:
            raise ReleaseFormatError(f"{where}: cannot be read ({e})") from None
        if not stat.S_ISREG(mode):
            raise ReleaseFormatError(f"{where}: expected a regular file, got {'a folder' if stat.S_ISDIR(mode) else 'a FIFO, device or socket'}")


def resolve_source(root: str | Path, split: str, source: str, glob_fn: Callable | None = None) -> str:
    """``"auto"`` -> ``"parquet"`` when ``data/{split}-*.parquet`` exists, else ``"native"``.

    The Parquet files are the Hub's rows and carry the release's own ``example_id`` and ``image_id``; a native
    file without them gets derived ids (``pair_id``, ``pair_id#k``) and path-stem image ids, which need not be
    the Hub's. So ``"auto"`` prefers the Parquet wherever both exist (issue 14) and reads the native file only
    for a split that has no Parquet shard.

    Raises :class:`ReleaseNotFoundError` naming both expected paths when the split has neither file."""
    check_choice("source", source, SOURCES)
    has_native = native_path(root, split).is_file()
    has_parquet = bool(parquet_paths(root, split, glob_fn))
    expected = f"{NATIVE_FILE.format(split=split)!r} (native) or {PARQUET_GLOB.format(split=split)!r} (Parquet)"
    if source == "auto":
        if has_parquet or has_native:
            return "parquet" if has_parquet else "native"
        raise ReleaseNotFoundError(f"M4Seg {split} split: neither {expected} found under the release root {str(root)!r}")
    native = source == "native"
    if not (has_native if native else has_parquet):
        missing = f"{NATIVE_FILE.format(split=split)!r} was not" if native else f"no {PARQUET_GLOB.format(split=split)!r} was"
        raise ReleaseNotFoundError(f"M4Seg {split} split: source={source!r} but {missing} found under {str(root)!r} (expected "
                                   f"{expected}; source='auto' picks whichever exists)")
    return source
