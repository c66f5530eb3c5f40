"""The safe extractor of the ReasonAVEdit-Bench media tars, for users and tests (the builder never extracts).

:func:`extract_archives` unpacks ``archives/*.tar`` the way the card's shell loop does, but checks every
member of every archive before anything is written: the member guard of :mod:`.archives` (names,
collisions within and across the archives, sizes), then the member's place in the destination (links that
leave it, device and FIFO members, a path through a symbolic link, a place that already holds something
other than the same bytes). No existing file is ever replaced, and no link is ever created.
"""

from __future__ import annotations

import contextlib
import os
import tarfile
from pathlib import Path

from ..errors import ReleaseFormatError
from ..io.paths import open_regular_file, read_regular_file, write_atomic
from .archives import MAX_ARCHIVE_BYTES, MAX_MEMBER_BYTES, TAR_ERRORS, MemberGuard, _unreadable, archive_label, find_archives, scan


def _check_member(member: tarfile.TarInfo, name: str, dest: Path, label: str) -> None:
    target = (dest / name).resolve()
    if not target.is_relative_to(dest):
        raise ReleaseFormatError(f"archive {label!r}: member {member.name!r} would be written outside {str(dest)!r}")
    if member.issym() or member.islnk():
        link = member.linkname.replace("\\", "/")
        base = target.parent if member.issym() else dest
        absolute = link.startswith("/") or (len(link) > 1 and link[1] == ":")
        resolved = (base / link).resolve() if not absolute else Path(link).resolve()
        if absolute or not resolved.is_relative_to(dest):
            raise ReleaseFormatError(
                f"archive {label!r}: member {member.name!r} is a link to {member.linkname!r}, which leaves {str(dest)!r}; refusing to extract"
            )
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise ReleaseFormatError(f"archive {label!r}: member {member.name!r} is a special file (device or FIFO); refusing to extract")


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo, label: str) -> bytes:
    """The data of a regular member (at most :data:`archives.MAX_MEMBER_BYTES` + 1 bytes read); a read that
    fails is a truncated or corrupt archive, named with the member."""
    try:
        return tar.extractfile(member).read(MAX_MEMBER_BYTES + 1)
    except TAR_ERRORS as e:
        raise _unreadable(label, member.name, e) from None


def _same_content(tar: tarfile.TarFile, member: tarfile.TarInfo, path: Path, label: str) -> bool:
    if path.stat().st_size != member.size:
        return False
    data = _member_bytes(tar, member, label)
    return read_regular_file(path, f"archive {label!r}: member {member.name!r}", MAX_MEMBER_BYTES) == data


def _check_target(tar: tarfile.TarFile, member: tarfile.TarInfo, name: str, dest: Path, label: str) -> bool:
    """Whether the file of ``member`` must be written: ``False`` when ``dest`` already holds the same bytes.
    Anything else already at its place (another file, a folder, a link, a special file) is refused: no
    file of the user's is ever replaced."""
    out = dest / name
    if not os.path.lexists(out):
        return True
    where = f"archive {label!r}: member {member.name!r}"
    if member.isdir():
        if out.is_dir() and not out.is_symlink():
            return False
        raise ReleaseFormatError(f"{where}: {str(out)!r} already exists and is not a folder; refusing to extract (nothing is overwritten)")
    if out.is_symlink() or not out.is_file():
        raise ReleaseFormatError(f"{where}: {str(out)!r} already exists and is not a regular file; refusing to extract (nothing is overwritten)")
    if not _same_content(tar, member, out, label):
        raise ReleaseFormatError(f"{where}: {str(out)!r} already exists with other content; refusing to extract (nothing is overwritten)")
    return False


def extract_archives(root: str | os.PathLike, dest: str | os.PathLike | None = None) -> list[str]:
    """Unpack every ``archives/*.tar`` into ``dest`` (default: the root), as the card's shell loop does.

    Every member of every archive is checked first, by :class:`MemberGuard` (names, collisions within and
    across the archives, sizes) and for its place in ``dest``: links that leave ``dest`` (links are never
    created), device and FIFO members, members that would be written through a symbolic link, and members
    whose place already holds something other than the same bytes (no existing file is ever replaced).
    Any refusal raises :class:`ReleaseFormatError` naming the archive and the member before anything is
    written. Files are written through a temporary name in their folder and renamed into place. Returns the
    member paths of the regular files now in ``dest`` (written, or already there with the same bytes)."""
    root = Path(root)
    dest = Path(dest or root).resolve()
    guard = MemberGuard("", suffix="; refusing to extract")
    opened: list[tuple[str, tarfile.TarFile, list]] = []
    out: list[str] = []
    stack = contextlib.ExitStack()  # the archives' checked open files, closed after their tars
    try:
        for path in find_archives(root):
            label = archive_label(path, root)
            guard.label = label
            raw = stack.enter_context(open_regular_file(path, f"archive {label!r}", MAX_ARCHIVE_BYTES))
            try:
                tar = tarfile.open(fileobj=raw, mode="r:")
            except TAR_ERRORS as e:
                raise ReleaseFormatError(f"archive {label!r} is not a readable tar (truncated or corrupt): {type(e).__name__}: {e}") from None
            opened.append((label, tar, []))
            length = os.fstat(raw.fileno()).st_size
            for m, name in scan(tar, guard, length):
                if name is None:
                    continue
                _check_member(m, name, dest, label)
                if m.isfile():
                    if _check_target(tar, m, name, dest, label):
                        opened[-1][2].append((m, name))
                    out.append(name)
                elif m.isdir() and _check_target(tar, m, name, dest, label):
                    opened[-1][2].append((m, name))
        for label, tar, todo in opened:
            for m, name in todo:
                target = dest / name
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                data = _member_bytes(tar, m, label)
                if len(data) != m.size:
                    raise ReleaseFormatError(f"archive {label!r} is truncated: member {m.name!r} has {len(data)} bytes, its header says {m.size}")
                if os.path.lexists(target):  # appeared since the check: never replaced
                    raise ReleaseFormatError(f"archive {label!r}: member {m.name!r}: {str(target)!r} appeared while extracting; refusing to overwrite it")
                # the one atomic writer, publishing without replacing (a file that appears meanwhile is kept)
                write_atomic(target, data, f"archive {label!r}: member {m.name!r}", replace=False)
    finally:
        for _, tar, _ in opened:
            tar.close()
        stack.close()
    return out
