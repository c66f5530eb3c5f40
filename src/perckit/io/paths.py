"""The one guard for every path that release data or a prediction file supplies, the checked readers, and the
one atomic writer.

A release (or a prediction folder) is a download from a stranger: a COCO ``file_name``, an M4Seg
``image_paths`` entry, a ReasonAVEdit sample ``id`` or CSV media column may be ``/etc/passwd``,
``../../.ssh/id_rsa`` or a symbolic link planted inside the release that points out of it. Reading such a
path would copy the bytes of an arbitrary local file into the rows (and ``convert`` / ``push`` would upload
them). :func:`resolve_under` is the only function that turns such a string into a filesystem path: every
reader calls it, and it refuses anything that does not stay inside its root.

Every file perckit reads goes through :func:`open_regular_file` / :func:`read_regular_file` (a regular file, its
size capped, checked on the open descriptor before any read), and every file it writes through
:func:`atomic_file` / :func:`write_atomic` (a temporary file beside the target, fsync, one rename; on any failure
the temporary file is removed and the target keeps its previous content).
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
import secrets
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from ..errors import OutputError, PerckitError, ReleaseFormatError, ReleaseNotFoundError

#: longest relative path accepted from data (Linux's PATH_MAX); longer strings are refused before any
#: filesystem call.
MAX_PATH_CHARS = 4096

_DRIVE = re.compile(r"^[A-Za-z]:")


def check_relative(rel: object, where: str, error: type[Exception] = ReleaseFormatError,
                   inside: str = "the release root") -> PurePosixPath:
    """``rel`` as a relative POSIX path, or ``error`` naming ``where``.

    Refused: a non-string or empty value, a NUL byte, more than :data:`MAX_PATH_CHARS` characters, an absolute
    path (``/x``, ``\\\\x``, a drive letter ``C:``), and any ``..`` component (``/`` and ``\\`` both count as
    separators, so ``..\\x`` is refused too). Purely lexical: no filesystem call. ``inside`` names the root in
    the messages ("the export folder")."""
    if not isinstance(rel, str) or not rel:
        raise error(f"{where}: expected a relative path string, got {rel!r}")
    if "\x00" in rel:
        raise error(f"{where}: expected a relative path, got one with a NUL byte: {rel[:200]!r}")
    if len(rel) > MAX_PATH_CHARS:
        raise error(f"{where}: expected a relative path of at most {MAX_PATH_CHARS} characters, got {len(rel)}")
    if rel.startswith(("/", "\\")) or _DRIVE.match(rel):
        raise error(f"{where}: expected a path relative to {inside}, got the absolute path {rel[:200]!r}")
    parts = re.split(r"[\\/]+", rel)
    if ".." in parts:
        raise error(f"{where}: expected a path inside {inside}, got {rel[:200]!r} (a '..' component leaves it)")
    return PurePosixPath(*[p for p in parts if p not in ("", ".")] or ["."])


def resolve_under(
    root: str | os.PathLike,
    rel: object,
    where: str,
    error: type[Exception] = ReleaseFormatError,
    inside: str = "the release root",
) -> Path:
    """``root / rel`` for a path string taken from release data (or a prediction file), checked to stay inside ``root``.

    ``rel`` must pass :func:`check_relative`; then the joined path, with every symbolic link resolved, must
    still lie under ``root`` (itself resolved): a link inside the release that points out of it is refused.
    The returned path is the joined one (not the resolved one), so messages show what the release named.
    ``where`` names the file, row and field for the message. The path need not exist: callers report a
    missing file with their own :class:`~perckit.errors.ReleaseNotFoundError`. ``inside`` names the root in
    the messages."""
    pure = check_relative(rel, where, error, inside)
    base = Path(root)
    path = base / pure
    real = os.path.realpath(path)
    if not is_inside(real, os.path.realpath(base)) and not _inside_hub_blobs(base, real):
        raise error(
            f"{where}: expected a path inside {inside} {str(base)!r}, got {rel[:200]!r}, which resolves "
            f"to {real!r} (a symbolic link leaves the root)"
        )
    return path


def is_inside(child: str, parent: str) -> bool:
    """``child`` is ``parent`` or lies under it (both already resolved: plain string comparison, no filesystem)."""
    return child == parent or child.startswith(parent.rstrip(os.sep) + os.sep)


def writable_folder(path: str | os.PathLike) -> bool:
    """``path`` can be written: ``os.access`` and the owner's write bit (root passes every ``os.access`` check, so
    a folder a user made read-only would otherwise be written by a tool run as root)."""
    st = os.stat(path)
    return os.access(path, os.W_OK | os.X_OK) and bool(st.st_mode & stat.S_IWUSR)


def _inside_hub_blobs(base: Path, real: str) -> bool:
    """``True`` when ``base`` lies in a Hugging Face cache snapshot (``<repo>/snapshots/<revision>/...`` beside
    ``<repo>/blobs/``) and ``real`` is one of that repository's blobs: ``huggingface_hub`` stores every file
    of a snapshot as a symbolic link into ``blobs/``, so a release downloaded from the Hub (or a ``data_dir``
    pointing into the cache) resolves there. Links to anything else still leave the root."""
    base = Path(os.path.abspath(base))
    for folder in (base, *base.parents):
        if folder.parent.name == "snapshots":
            blobs = folder.parent.parent / "blobs"
            return blobs.is_dir() and is_inside(real, os.path.realpath(blobs))
    return False


def _open_checked(
    path: str | os.PathLike, where: str, limit: int | None, error: type[Exception], not_found: type[Exception] | None, what: str
) -> tuple[int, os.stat_result]:
    """The descriptor and ``fstat`` of ``path`` once it is known to be a regular file of at most ``limit`` bytes
    (the checks of :func:`open_regular_file`; the caller closes the descriptor)."""
    missing = not_found or (ReleaseNotFoundError if error is ReleaseFormatError else error)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise missing(f"{where}: {what} {str(path)!r} not found") from None
    except OSError as e:
        raise error(f"{where}: {what} {str(path)!r} cannot be read: {e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
            raise error(f"{where}: expected a regular {what}, got {kind}: {str(path)!r}")
        if limit is not None and st.st_size > limit:
            raise error(f"{where}: {what} {str(path)!r} holds {st.st_size} bytes, more than the limit of {limit} bytes")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_checked(
    path: str | os.PathLike,
    where: str,
    limit: int | None = None,
    error: type[Exception] = ReleaseFormatError,
    not_found: type[Exception] | None = None,
    what: str = "file",
) -> BinaryIO:
    """``path`` opened for binary reading, once it is known to be a regular file (of at most ``limit`` bytes);
    the caller closes it (``with`` works).

    The file is opened without blocking and checked with ``fstat`` on the open descriptor (no race with a
    swapped path): a FIFO, a device, a socket or a folder is refused at once (reading ``/dev/zero`` would
    never end, opening a FIFO would block), and so is a file larger than ``limit``, before anything is read.
    A missing file raises ``not_found`` (default: :class:`ReleaseNotFoundError` for release errors, else
    ``error``) naming ``where``; ``what`` names the kind of file in the messages ("a regular .npy file")."""
    fd, _ = _open_checked(path, where, limit, error, not_found, what)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


#: the same, for ``with open_regular_file(...) as f`` (an open file is its own context manager)
open_regular_file = open_checked


#: the largest release file a builder opens through :func:`checked_opener` (readers bound what they read of it:
#: the Parquet page walk, the gzip and JSON limits, the tar member caps)
MAX_RELEASE_FILE_BYTES = 1 << 40


def is_remote(path: str | os.PathLike) -> bool:
    """``True`` for a URL-like path (``hf://``, ``https://``, ``zip://``...) that only ``datasets``' streaming
    opener can read; ``False`` for a local path."""
    return "://" in os.fspath(path)


def checked_opener(opener: Any, limit: int = MAX_RELEASE_FILE_BYTES, error: type[Exception] = ReleaseFormatError) -> Any:
    """The opener a builder hands to its readers: ``opener(path, "rb")`` (the module's ``open``, which
    ``datasets``' streaming mode replaces by ``xopen``) for a remote path, and :func:`open_checked` for a local
    one (a regular file of at most ``limit`` bytes, checked on the open descriptor: a FIFO planted in a
    release would otherwise block the build)."""

    def open_release_file(path: str | os.PathLike, mode: str = "rb") -> Any:
        if mode != "rb":
            raise ValueError(f"checked_opener opens release files for binary reading only, got mode {mode!r}")
        if is_remote(path):
            return opener(path, mode)
        return open_checked(path, repr(os.fspath(path)), limit, error)

    return open_release_file


@contextmanager
def open_media(value: Any, where: str, limit: int, error: type[Exception] = ReleaseFormatError) -> Iterator[BinaryIO | None]:
    """A ``{bytes, path}`` media value (datasets' storage of an image, audio or video) opened for a decoder:
    its ``bytes`` as an in-memory file, else its ``path`` through :func:`open_regular_file` (a regular file of at
    most ``limit`` bytes, checked before a byte is read); ``None`` when the value holds neither. Decoders (PyAV,
    Pillow, soundfile) read the file object they are given, never a path."""
    data = value.get("bytes") if isinstance(value, Mapping) else None
    path = value.get("path") if isinstance(value, Mapping) else None
    if data:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise error(f"{where}: expected the media 'bytes' as bytes, got {type(data).__name__}")
        yield io.BytesIO(bytes(data))
    elif path:
        if not isinstance(path, (str, os.PathLike)):
            raise error(f"{where}: expected the media 'path' as a string, got {type(path).__name__}")
        with open_regular_file(path, where, limit, error, what="media file") as f:
            yield f
    else:
        yield None


def read_regular_file(
    path: str | os.PathLike,
    where: str,
    limit: int,
    error: type[Exception] = ReleaseFormatError,
    not_found: type[Exception] | None = None,
) -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes (the checks of
    :func:`open_regular_file`; a file that grows while it is read is still cut at the cap).

    Read with ``os.read`` on the checked descriptor: first the file's size + 1 bytes (``read(limit + 1)``
    would allocate the whole cap, 64 MB for an image, per file), then on until the end of the file (a short
    read is not taken for the end) or past the cap. Without a buffered file object around it, a small
    file costs a third less than ``open().read()``: a build reads thousands of frame images this way."""
    fd, st = _open_checked(path, where, limit, error, not_found, "file")
    chunks: list[bytes] = []
    total = 0
    try:
        n = min(st.st_size, limit) + 1
        while total <= limit:
            chunk = os.read(fd, min(n, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            n = max(st.st_size + 1 - total, 1 << 16)  # the rest after a short read; past the size: the file grew
    except OSError as e:
        raise error(f"{where}: file {str(path)!r} cannot be read: {e}") from None
    finally:
        os.close(fd)
    if total > limit:
        raise error(f"{where}: file {str(path)!r} holds more than the limit of {limit} bytes")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def relative_label(path: str | os.PathLike, root: str | os.PathLike | None) -> str | None:
    """How a message names a file found under ``root``: its POSIX path relative to ``root``, or ``None`` when
    there is no root or ``path`` is not under it (lexically: nothing is resolved). The caller picks the
    fallback (the full path, or the name in its documented folder)."""
    if root is None:
        return None
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return None


#: most entries one pattern from data may match (:func:`glob_under`)
MAX_GLOB_MATCHES = 100_000
#: most folder entries :func:`glob_under` lists to expand one pattern
MAX_GLOB_ENTRIES = 1_000_000
#: deepest folder a ``**`` component descends to
MAX_GLOB_DEPTH = 32

_GLOB_MAGIC = re.compile(r"[*?\[]")


def glob_under(
    root: str | os.PathLike,
    pattern: object,
    where: str,
    error: type[Exception] = ReleaseFormatError,
    inside: str = "the release root",
) -> list[Path]:
    """The entries under ``root`` that ``pattern`` (a path pattern taken from data, e.g. a card's ``data_files``)
    names, sorted by their relative POSIX path; ``root / pattern`` checked like :func:`resolve_under`.

    The pattern passes :func:`check_relative` first (no absolute path, no ``..``, no NUL). It is matched one
    folder level at a time, as the glob ``datasets`` resolves ``data_files`` with: ``*``, ``?`` and ``[...]``
    match within one name (``fnmatch`` rules, case-sensitive), a ``**`` component matches any number of
    folders (none included); a wildcard matches a name that starts with ``.`` only when its own component
    does. A component without wildcards names one entry. Every folder is resolved under ``root`` before it is
    listed, and every match after: a symbolic link out of ``root`` is refused (``error`` naming ``where`` and
    the match), never followed and never skipped; ``**`` does not descend into linked folders. Folders never
    match; other entries (files, links to files, FIFOs) do, and the caller opens them with the checked
    readers. At most :data:`MAX_GLOB_MATCHES` matches, :data:`MAX_GLOB_ENTRIES` listed entries and
    :data:`MAX_GLOB_DEPTH` levels below a ``**``, else ``error``. An empty list when nothing matches: the
    caller says what it expected."""
    pure = check_relative(pattern, where, error, inside)
    base = Path(root)
    listed = 0

    def hidden_ok(name: str, component: str) -> bool:
        return not name.startswith(".") or component.startswith(".")

    def entries(folder: tuple[str, ...]) -> list[tuple[str, bool]]:
        """(name, is a real folder, not a link) of the entries of ``folder`` (checked under ``root``), sorted."""
        nonlocal listed
        rel = "/".join(folder) or "."
        path = resolve_under(base, rel, f"{where}: {rel!r}", error, inside)
        try:
            with os.scandir(path) as it:
                out = []
                for entry in it:
                    listed += 1
                    if listed > MAX_GLOB_ENTRIES:
                        raise error(f"{where}: expected a pattern that lists at most {MAX_GLOB_ENTRIES} folder entries, "
                                    f"got {str(pattern)[:200]!r}, which lists more")
                    out.append((entry.name, entry.is_dir(follow_symlinks=False)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as e:
            raise error(f"{where}: the folder {str(path)!r} cannot be listed: {e.strerror or e}") from None
        return sorted(out)

    folders: list[tuple[str, ...]] = [()]
    parts = [p for p in pure.parts if p != "."]
    for i, component in enumerate(parts):
        last = i == len(parts) - 1
        nxt: list[tuple[str, ...]] = []
        if component == "**":  # this folder and every folder below (a trailing '**': every file below)
            stack = [(f, 0) for f in reversed(folders)]
            while stack:
                folder, depth = stack.pop()
                if depth > MAX_GLOB_DEPTH:
                    raise error(f"{where}: expected a pattern whose '**' descends at most {MAX_GLOB_DEPTH} folders, "
                                f"got {str(pattern)[:200]!r}")
                listing = [(name, is_dir) for name, is_dir in entries(folder) if hidden_ok(name, "")]
                nxt += [folder + (name,) for name, is_dir in listing if not is_dir] if last else [folder]
                stack.extend((folder + (name,), depth + 1) for name, is_dir in reversed(listing) if is_dir)
        elif _GLOB_MAGIC.search(component):
            for folder in folders:
                nxt += [folder + (name,) for name, _ in entries(folder)
                        if hidden_ok(name, component) and fnmatch.fnmatchcase(name, component)]
        else:
            nxt = [folder + (component,) for folder in folders]
        folders = list(dict.fromkeys(nxt))
        if len(folders) > MAX_GLOB_MATCHES:
            raise error(f"{where}: expected a pattern matching at most {MAX_GLOB_MATCHES} entries, got "
                        f"{str(pattern)[:200]!r}, which matches more")
    matches: list[Path] = []
    for rel in sorted("/".join(f) for f in folders if f):
        path = resolve_under(base, rel, f"{where}: {rel!r}", error, inside)
        try:
            mode = os.stat(path).st_mode
        except OSError:
            continue  # missing (or a dangling link inside the root): no match
        if not stat.S_ISDIR(mode):
            matches.append(path)
    return matches


# ---------------------------------------------------------------- the one atomic writer


def _temp_beside(path: Path) -> tuple[int, Path]:
    """A new file beside ``path`` (``.<name>.perckit-tmp-<random>``), created exclusively with the mode a plain
    ``open(path, "w")`` would give it (0o666 less the umask); its descriptor and path."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = path.with_name(f".{path.name[:200]}.perckit-tmp-{secrets.token_hex(6)}")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {str(path)!r}")


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable where the OS allows it (best effort: not every filesystem can)."""
    with suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextmanager
def atomic_file(path: str | os.PathLike, where: str | None = None, replace: bool = True) -> Iterator[BinaryIO]:
    """A binary file object whose content becomes ``path`` in one step when the block ends without an error.

    The one writer of every file perckit writes: the data go to a new temporary file beside ``path`` (same
    folder, so the rename never crosses filesystems), which is flushed, ``fsync``-ed, closed and renamed over
    ``path`` (``os.replace``: a symbolic link at ``path`` is replaced, never written through). If anything fails
    (the block raises, the disk is full, a file-size limit is hit, the folder is read-only), the temporary file
    is removed and ``path`` keeps its previous content (or still does not exist). An ``OSError`` becomes an
    :class:`~perckit.errors.OutputError` naming ``where`` (default: the file) and the OS's reason; any other
    exception propagates unchanged. Whether ``path`` may be replaced at all is the caller's decision (perckit
    never replaces a file it did not write); with ``replace=False`` the file is published with a hard link,
    which fails when anything already exists at ``path`` (an :class:`~perckit.errors.OutputError`, nothing
    replaced, even if something appeared there while the data were written)."""
    target = Path(path)
    label = f"{where}: " if where else ""
    try:
        fd, tmp = _temp_beside(target)
    except OSError as e:
        raise OutputError(f"{label}cannot write {str(target)!r}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, target)
        else:
            os.link(tmp, target, follow_symlinks=False)  # FileExistsError when anything is there: never clobbered
            os.unlink(tmp)
    except BaseException as e:
        with suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and not isinstance(e, PerckitError):
            raise OutputError(f"{label}cannot write {str(target)!r}: {e.strerror or e}") from None
        raise
    _fsync_folder(target.parent)


def write_atomic(path: str | os.PathLike, data: bytes | str, where: str | None = None, encoding: str = "utf-8",
                 replace: bool = True) -> Path:
    """Write ``data`` (text is encoded with ``encoding``) to ``path`` through :func:`atomic_file`; returns ``path``."""
    raw = data.encode(encoding) if isinstance(data, str) else bytes(data)
    with atomic_file(path, where, replace) as f:
        f.write(raw)
    return Path(path)
