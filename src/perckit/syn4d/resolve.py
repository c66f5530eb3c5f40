"""Path look-ups of a pass over many release files, with the answers of :func:`perckit.io.paths.resolve_under`
and ``Path.resolve`` (each folder's real path looked up once; anything unusual handed to those functions)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import ReleaseFormatError
from ..io.paths import is_inside
from ..io.paths import resolve_under


#: Relative path strings that :func:`perckit.io.paths.check_relative` accepts, plainly: path-safe characters only
#: (no NUL, backslash or colon), not starting with ``/``, no empty component, no component of dots only, at most
#: 4096 characters. A subset: anything else goes to ``check_relative`` for its verdict.
PLAIN_RELATIVE = re.compile(r"(?!/)(?!.{4097})(?:(?!\.+(?:/|$))[A-Za-z0-9_.+\-]+/?)+", re.DOTALL)


class PathResolver:
    """:func:`perckit.io.paths.resolve_under` of many paths under one ``base``, for one pass over a release.

    The same answers (the same path, the same errors): for a plain relative path (:data:`PLAIN_RELATIVE`)
    the real path of its folder is looked up once per resolver, and the last component joined to it when it
    is not a symbolic link (which is what ``os.path.realpath`` does component by component); a link, any other
    string, or a real path outside the real ``base`` is handed to ``resolve_under`` itself. Make one per pass
    (the cache is not refreshed): a folder swapped for a link between two passes is seen by the next one."""

    def __init__(self, base: str | os.PathLike) -> None:
        self.base = Path(base)
        self._real_base = os.path.realpath(self.base)
        self._real_dirs: dict[str, str] = {}

    def __call__(self, rel: object, where: str, error: type[Exception] = ReleaseFormatError) -> Path:
        if not isinstance(rel, str) or not PLAIN_RELATIVE.fullmatch(rel):
            return resolve_under(self.base, rel, where, error)
        rel = rel.rstrip("/")
        folder, _, leaf = rel.rpartition("/")
        real_dir = self._real_dirs.get(folder)
        if real_dir is None:
            real_dir = self._real_dirs[folder] = os.path.realpath(self.base / folder) if folder else self._real_base
        real = os.path.join(real_dir, leaf)
        if os.path.islink(real) or not is_inside(real, self._real_base):
            return resolve_under(self.base, rel, where, error)
        return self.base / rel


def real_path(path: Path, real_dirs: dict[str, str]) -> Path:
    """``path.resolve()``, with the real path of its folder taken from (or added to) ``real_dirs``: the folder's
    real path joined with the last component when that is not a symbolic link (``os.path.realpath`` resolves
    component by component, so the answer is the same); a link or a path with a ``..`` is resolved in full."""
    folder, name = str(path.parent), path.name
    if name in ("", ".", "..") or ".." in path.parts:
        return path.resolve()
    real_dir = real_dirs.get(folder)
    if real_dir is None:
        real_dir = real_dirs[folder] = os.path.realpath(folder)
    real = os.path.join(real_dir, name)
    return path.resolve() if os.path.islink(real) else Path(real)
