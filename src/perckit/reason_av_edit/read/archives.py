"""The media tars of a ReasonAVEdit-Bench release: finding them, the member guard, the bounded readers and the
safe extractor.

A release is a download from a stranger, so every tar is read under one guard (:class:`MemberGuard`),
the same in the three places that open a tar: the builder's local reader (:func:`iter_tar_file`), the
streaming reader behind ``dl_manager.iter_archive`` (:func:`iter_tar_members`) and the extractor for users
(:func:`extract_archives`). For every member header, before the tar is read any further, the guard refuses:

- a name that is not a relative path inside the archive (absolute, drive letter, a ``..`` component, a NUL
  byte: :func:`perckit.io.paths.check_relative`), a path component over :data:`MAX_NAME_COMPONENT_BYTES` bytes or
  a name over :data:`MAX_NAME_BYTES` bytes (the OS limits), and a member named ``.`` that is not a folder;
- a name that collides with another member: the same file twice, a file and a folder of one name, a file
  used as the parent folder of another member (``./a`` and ``a`` are the same name);
- a size field that is negative or over :data:`MAX_MEMBER_BYTES` (base-256 fields can declare up to 2^88
  bytes, and ``tarfile`` would then seek or read that far), counting a sparse member by its expanded size;
  and data that ends past the next header the archive gives;
- more than :data:`MAX_MEMBERS` members in one archive.

The builder readers read only the members a row names (``wanted``): the others are skipped without
reading their data. Every error is a :class:`~perckit.errors.ReleaseFormatError` naming the archive and
the member.

:func:`extract_archives` unpacks ``archives/*.tar`` for users and tests (the builder never extracts) the way the
card's shell loop does, but checks every member of every archive before anything is written: the member guard
(names, collisions within and across the archives, sizes), then the member's place in the destination (links that
leave it, device and FIFO members, a path through a symbolic link, a place that already holds something other than
the same bytes). No existing file is ever replaced, and no link is ever created.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from ...errors import ReleaseFormatError, ReleaseNotFoundError
from ...io.paths import check_relative, open_regular_file, read_regular_file, relative_label, write_atomic
from ..layout import ARCHIVE_PATTERN, ARCHIVES_DIR, MEDIA_FOLDERS, METADATA

#: Largest member a release tar may declare (its expanded size for a sparse member): a real clip is a
#: few MB, and a media value must stay under Arrow's 2 GiB binary limit. Checked on the header, before reading.
MAX_MEMBER_BYTES = 1 << 30
#: Most members one archive may hold (the real tars hold 150 to 1,200 each).
MAX_MEMBERS = 100_000
#: the largest archive file opened (a regular file, checked before tarfile reads it); what is read of it is
#: bounded by MAX_MEMBERS headers and MAX_MEMBER_BYTES per member
MAX_ARCHIVE_BYTES = 1 << 40
#: The OS limits on a path component (NAME_MAX) and a whole path (PATH_MAX), in bytes of UTF-8.
MAX_NAME_COMPONENT_BYTES = 255
MAX_NAME_BYTES = 4096

#: What ``tarfile`` raises on a corrupt header (ValueError / OverflowError: a PAX number of thousands of
#: digits, a seek past what an offset can hold).
TAR_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, ValueError, OverflowError)


def find_archives(root: str | os.PathLike) -> list[Path]:
    """``sorted(glob("archives/*.tar"))``; none raises naming the pattern."""
    archives = sorted(Path(root).glob(ARCHIVE_PATTERN))
    if not archives:
        raise ReleaseNotFoundError(f"no archive matches {ARCHIVE_PATTERN!r} under {str(root)!r}; expected the seven media tars "
                                   f"of the Hub layout (or the extracted folders {list(MEDIA_FOLDERS)} next to {METADATA}, with "
                                   f"source='extracted')")
    return archives


def archive_label(path: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """``archives/<name>.tar`` (relative to the root when possible) for messages."""
    return relative_label(path, root) or f"{ARCHIVES_DIR}/{Path(path).name}"


def _unreadable(label: str, member: str, e: BaseException) -> ReleaseFormatError:
    return ReleaseFormatError(f"archive {label!r} is truncated or corrupt: member {member!r} could not be read ({type(e).__name__}: {e})")


def _corrupt_header(label: str, last: str | None, e: BaseException) -> ReleaseFormatError:
    after = f"after member {last!r}" if last else "before its first member"
    return ReleaseFormatError(f"archive {label!r} is truncated or corrupt: reading the header {after} failed ({type(e).__name__}: {e})")


def _short(name: str) -> str:
    return name if len(name) <= 200 else name[:200] + "..."


def check_name(name: Any, where: str, suffix: str = "") -> str:
    """A member name or CSV media path as a normalised POSIX path (``./`` and backslashes removed, ``.`` for
    the root), checked by :func:`perckit.io.paths.check_relative` and against the OS limits: a component over
    :data:`MAX_NAME_COMPONENT_BYTES` bytes or a path over :data:`MAX_NAME_BYTES` bytes. Purely lexical."""
    try:
        norm = check_relative(name, where).as_posix()
    except ReleaseFormatError as e:
        raise ReleaseFormatError(f"{e}{suffix}") from None
    encoded = norm.encode("utf-8", "surrogateescape")
    if len(encoded) > MAX_NAME_BYTES:
        raise ReleaseFormatError(f"{where}: expected a name of at most {MAX_NAME_BYTES} bytes (the OS path limit), got {len(encoded)}{suffix}")
    for part in norm.split("/"):
        n = len(part.encode("utf-8", "surrogateescape"))
        if n > MAX_NAME_COMPONENT_BYTES:
            raise ReleaseFormatError(f"{where}: expected path components of at most {MAX_NAME_COMPONENT_BYTES} bytes (the OS "
                                     f"file-name limit), got one of {n}{suffix}")
    return norm


class MemberGuard:
    """The checks of every member header of the archives of one read (see the module docstring).

    ``suffix`` ends every message (the extractor adds "; refusing to extract"). One guard may span several
    archives (the extractor writes them into one folder, so their names must not collide either)."""

    def __init__(self, label: str, suffix: str = "") -> None:
        self.label = label
        self.suffix = suffix
        self.files: dict[str, str] = {}  # normalised name -> archive label
        self.dirs: set[str] = set()
        self.count = 0

    def error(self, name: str, what: str) -> ReleaseFormatError:
        return ReleaseFormatError(f"archive {self.label!r}: member {_short(name)!r} {what}{self.suffix}")

    def check(self, member: tarfile.TarInfo, next_offset: int | None = None) -> str | None:
        """The normalised name of ``member`` (``None`` for the archive root folder ``.``), or an error.

        ``next_offset``: where ``tarfile`` will read the next header (``TarFile.offset``); the member's
        stored data must end there, within :data:`MAX_MEMBER_BYTES` (plus the block padding)."""
        self.count += 1
        if self.count > MAX_MEMBERS:
            raise ReleaseFormatError(f"archive {self.label!r} has more than {MAX_MEMBERS} members (perckit.reason_av_edit.read.archives.MAX_MEMBERS){self.suffix}")
        name = member.name
        if member.size < 0:
            raise self.error(name, f"declares a negative size ({member.size}); expected a size >= 0 (a corrupt or hostile header)")
        # the bytes reading the member yields: its size, or for a sparse member the end of its sparse map if larger
        size = max([int(member.size), *(int(o) + int(n) for o, n in getattr(member, "sparse", None) or ())])
        if size > MAX_MEMBER_BYTES:
            raise self.error(name, f"declares {size} bytes, more than the limit of {MAX_MEMBER_BYTES} bytes "
                                   "(perckit.reason_av_edit.read.archives.MAX_MEMBER_BYTES)")
        if next_offset is not None:
            stored = next_offset - member.offset_data
            if stored < 0 or stored > MAX_MEMBER_BYTES + tarfile.BLOCKSIZE:
                raise self.error(name, f"has a header whose data would span {stored} bytes; expected 0 to {MAX_MEMBER_BYTES} (a corrupt or hostile header)")
        norm = check_name(name, f"archive {self.label!r}: member {_short(name)!r}", self.suffix)
        if norm == ".":
            if member.isdir():
                return None
            raise self.error(name, "is named '.' (the archive root itself) but is not a folder")
        parents = [p.as_posix() for p in PurePosixPath(norm).parents][:-1]
        for p in parents:
            if p in self.files:
                raise self.error(name, f"lies under {p!r}, which is a file in archive {self.files[p]!r}; expected {p!r} to be a folder")
        if member.isdir():
            if norm in self.files:
                raise self.error(name, f"is a folder, but archive {self.files[norm]!r} also has a file of that name")
            self.dirs.add(norm)
        else:
            if norm in self.files:
                raise self.error(name, f"appears twice (also in archive {self.files[norm]!r}); expected every member name once")
            if norm in self.dirs:
                raise self.error(name, "is a file, but the archive also has a folder of that name")
            self.files[norm] = self.label
        self.dirs.update(parents)
        return norm


def scan(tar: tarfile.TarFile, guard: MemberGuard, size: int | None = None) -> Iterator[tuple[tarfile.TarInfo, str | None]]:
    """``(member, normalised name)`` of every member of an open tar, each checked by ``guard`` before the
    tar is read further. ``size``: the archive's length when known (a member whose data ends past it is
    reported as truncated)."""
    last: str | None = None
    while True:
        try:
            m = tar.next()
        except TAR_ERRORS as e:
            raise _corrupt_header(guard.label, last, e) from None
        if m is None:
            return
        tar.members = []  # keep memory flat on archives of many members
        norm = guard.check(m, tar.offset)
        if size is not None and tar.offset > size + tarfile.BLOCKSIZE and (m.isreg() or m.size):
            raise _unreadable(guard.label, norm or m.name, EOFError(f"the member's data ends at byte {tar.offset}, past the end of the archive ({size} bytes)"))
        last = norm or m.name
        yield m, norm


def _selected(m: tarfile.TarInfo, norm: str | None, wanted: set | frozenset | None, skipped: list | None) -> bool:
    if norm is None or not m.isreg() or posixpath.basename(norm).startswith((".", "__")):  # hidden: as iter_archive skips
        return False
    if wanted is not None and norm not in wanted:
        if skipped is not None:
            skipped.append(norm)
        return False
    return True


def _read_selected(tf: tarfile.TarFile, label: str, wanted: set | frozenset | None, skipped: list | None,
                   length: int | None = None, raw: Any = None) -> Iterator[tuple[str, bytes]]:
    """The one loop of both tar readers: every header through a new :class:`MemberGuard` (:func:`scan`), the
    selected members read whole (a short read is a truncated archive) and yielded; closes ``tf``. ``raw``: the
    uncompressed tar's own file, whose non-sparse members are read with one ``read`` at their data offset;
    ``length``: its size."""
    guard = MemberGuard(label)
    with tf:
        for m, norm in scan(tf, guard, length):
            if not _selected(m, norm, wanted, skipped):
                continue
            try:
                if raw is not None and not m.issparse():
                    raw.seek(m.offset_data)
                    data = raw.read(m.size)
                else:
                    data = tf.extractfile(m).read(MAX_MEMBER_BYTES + 1)
                if len(data) != m.size:
                    raise EOFError(f"unexpected end of data: expected {m.size} bytes, got {len(data)}")
            except TAR_ERRORS as e:
                raise _unreadable(label, norm, e) from None
            yield norm, data


def iter_tar_file(path: str | Path, label: str, wanted: set | frozenset | None = None, skipped: list | None = None) -> Iterator[tuple[str, bytes]]:
    """``(member path, bytes)`` of the regular members of a local tar (all, or those in ``wanted``), in one pass.

    Every header goes through :class:`MemberGuard`; a member not in ``wanted`` is skipped without reading its
    data (its name is appended to ``skipped`` when given). Hidden ``.*`` / ``__*`` basenames are skipped like
    ``dl_manager.iter_archive`` does. Each member is one ``read`` at its data offset instead of tarfile's
    stream reader, which copies every member through 10 KB blocks (about half of a media build)."""
    with open_regular_file(path, f"archive {label!r}", MAX_ARCHIVE_BYTES) as f:
        try:
            tf = tarfile.open(fileobj=f, mode="r:*")
        except TAR_ERRORS as e:
            raise _corrupt_header(label, None, e) from None
        raw = tf.fileobj
        plain = raw is f  # an uncompressed tar: members are byte ranges of the file
        length = os.fstat(f.fileno()).st_size if plain else None
        yield from _read_selected(tf, label, wanted, skipped, length, raw if plain else None)


def iter_tar_stream(fileobj: BinaryIO, label: str, wanted: set | frozenset | None = None, skipped: list | None = None) -> Iterator[tuple[str, bytes]]:
    """The same as :func:`iter_tar_file` over a non-seekable stream (streaming mode): skipped members are
    read past, never kept."""
    try:
        tf = tarfile.open(fileobj=fileobj, mode="r|*")
    except TAR_ERRORS as e:
        raise _corrupt_header(label, None, e) from None
    yield from _read_selected(tf, label, wanted, skipped)


def _archive_source(members: Any) -> tuple[str, Any] | None:
    """``(urlpath, download_config)`` of a ``dl_manager.iter_archive(path)`` iterable, when it exposes them."""
    generator = getattr(members, "generator", None)
    args = getattr(members, "args", None)
    if not isinstance(args, tuple) or not args:
        return None
    kind = getattr(generator, "__name__", "")
    if kind == "_iter_from_urlpath" and isinstance(args[0], (str, os.PathLike)):
        return str(args[0]), (args[1] if len(args) > 1 else None)
    if kind == "_iter_from_fileobj" and hasattr(args[0], "read"):
        return args[0], None
    return None


def iter_tar_members(members: Iterable[tuple[str, Any]], label: str, wanted: set | frozenset | None = None,
                     skipped: list | None = None) -> Iterator[tuple[str, bytes]]:
    """``(member path, bytes)`` of the regular members of one tar given as ``dl_manager.iter_archive(tar)``.

    The iterable's own file (``datasets``' ``xopen``, so local and ``hf://`` paths both stream) is read with
    :func:`iter_tar_stream`, so every header, including those ``iter_archive`` would skip itself (folders,
    hidden names), is checked before the stream moves past it: ``iter_archive`` would otherwise read past
    a member declaring 2^80 bytes one block at a time, for ever. Any other iterable of ``(name, file
    object)`` pairs is read with the same name, collision and size checks, each read capped at
    :data:`MAX_MEMBER_BYTES`. A truncated or corrupt tar raises :class:`ReleaseFormatError` naming the
    archive and the member being read (or the last complete one)."""
    source = _archive_source(members)
    if source is not None:
        from datasets.utils.file_utils import xopen

        urlpath, download_config = source
        if not isinstance(urlpath, str):  # iter_archive(<file object>)
            yield from iter_tar_stream(urlpath, label, wanted, skipped)
            return
        try:
            f = xopen(urlpath, "rb", download_config=download_config, block_size=0)
        except TAR_ERRORS as e:
            raise _corrupt_header(label, None, e) from None
        with f:
            yield from iter_tar_stream(f, label, wanted, skipped)
        return
    guard = MemberGuard(label)
    last: str | None = None
    it = iter(members)
    while True:
        try:
            item = next(it)
        except StopIteration:
            return
        except TAR_ERRORS as e:
            raise _corrupt_header(label, last, e) from None
        name, fileobj = item
        info = tarfile.TarInfo(name)
        raw = getattr(fileobj, "raw", fileobj)
        info.size = int(getattr(raw, "size", 0) or 0)
        norm = guard.check(info)
        if not _selected(info, norm, wanted, skipped):  # info is a regular member: TarInfo's default type
            continue
        try:
            data = fileobj.read(MAX_MEMBER_BYTES + 1)
        except TAR_ERRORS as e:
            raise _unreadable(label, norm, e) from None
        if len(data) > MAX_MEMBER_BYTES:
            raise guard.error(name, f"holds more than the limit of {MAX_MEMBER_BYTES} bytes (perckit.reason_av_edit.read.archives.MAX_MEMBER_BYTES)")
        last = norm
        yield norm, data


# ---------------------------------------------------------------- the safe extractor


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
            raise ReleaseFormatError(f"archive {label!r}: member {member.name!r} is a link to {member.linkname!r}, which leaves "
                                     f"{str(dest)!r}; refusing to extract")
    if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
        raise ReleaseFormatError(f"archive {label!r}: member {member.name!r} is a special file (device or FIFO); refusing to extract")


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo, label: str) -> bytes:
    """The data of a regular member (at most :data:`MAX_MEMBER_BYTES` + 1 bytes read); a read that
    fails is a truncated or corrupt archive, named with the member."""
    try:
        return tar.extractfile(member).read(MAX_MEMBER_BYTES + 1)
    except TAR_ERRORS as e:
        raise _unreadable(label, member.name, e) from None


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
    if out.stat().st_size != member.size or _member_bytes(tar, member, label) != read_regular_file(out, where, MAX_MEMBER_BYTES):
        raise ReleaseFormatError(f"{where}: {str(out)!r} already exists with other content; refusing to extract (nothing is overwritten)")
    return False


def extract_archives(root: str | os.PathLike, dest: str | os.PathLike | None = None) -> list[str]:
    """Unpack every ``archives/*.tar`` into ``dest`` (default: the root), as the card's shell loop does, once every
    member of every archive has passed the checks of the module docstring (a refusal raises
    :class:`ReleaseFormatError` naming the archive and the member before anything is written). Files are written
    through a temporary name in their folder and renamed into place. Returns the member paths of the regular files
    now in ``dest`` (written, or already there with the same bytes)."""
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
                if (m.isfile() or m.isdir()) and _check_target(tar, m, name, dest, label):
                    opened[-1][2].append((m, name))
                if m.isfile():
                    out.append(name)
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
