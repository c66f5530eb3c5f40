"""How ``perckit convert`` replaces an export folder without losing or hiding anything it did not write.

Rules (issue 13, section 1):

- **Only into an export it owns.** :func:`check_output` runs before any build: the release folder, its
  parents, a folder inside it, the cache folder, a file, a dangling link, a read-only folder and a non-empty
  folder without a valid ``.perckit_export.json`` are refused.
- **One atomic step.** The new export is assembled in ``.<name>.tmp-<hex>`` beside the export: the new
  config's shards, hard links to the other configs' shards and to every file the user added inside the
  export (a copy where hard links are not possible), the card and the record. It then trades places with the
  export in one ``renameat2(RENAME_EXCHANGE)`` (Linux); where that call is missing, two renames (the export
  goes to ``.<name>.old-<hex>`` first). The card, the record and the shards therefore always change together.
- **Nothing of the user's is deleted.** The previous export, now under the temporary name, is taken apart
  by :func:`merge_back`: perckit's own files (those its record lists) are removed; a user file is removed
  only when the new export holds the very same file (same inode, or same bytes), otherwise it is moved into
  the new export; anything that cannot be placed stays where it is (and the record stays beside it, so the
  folder remains recognisable) and is reported.
- **Kills.** At any moment the export path shows a complete export (the previous one or the new one), except
  in the fallback's window between its two renames. The next run (under the lock) recovers: a dead build
  (``.perckit_build`` marker whose lock nobody holds) is removed, a lost export is renamed back from its
  ``.old-*`` copy, and any previous export left under a perckit name is merged back as above. Only folders
  with perckit's names *and* perckit's marker or record are touched.
- **One writer at a time.** :func:`export_lock` (``filelock`` on ``.perckit-<name>.lock`` beside the
  export) is held while the record is read and merged and the folders are swapped, not during the build, so
  two converts of different configs both land.

Every filesystem change of the swap and of the recovery goes through :func:`_do`, which calls
:func:`_checkpoint` first: the crash tests replace it to stop the process at every step.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import filecmp
import os
import re
import secrets
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterator

from ..errors import InputNotFoundError, OptionError, ReleaseFormatError
from .state import STATE_FILE, has_state, owned_files, read_state
from ..io.paths import is_inside, writable_folder

BUILD_MARKER = ".perckit_build"
#: seconds a convert waits for another one writing into the same export
LOCK_TIMEOUT = 600.0
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<tag>[0-9a-f]{12})$")

Log = Callable[[str], None]


def _checkpoint(label: str) -> None:
    """Called before every filesystem change of the swap and the recovery (a no-op; tests replace it)."""


def _do(label: str, fn: Callable, *args, **kwargs):
    _checkpoint(label)
    return fn(*args, **kwargs)


# --- renameat2 ------------------------------------------------------------------------------------------

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_renameat2_fn: object = None  # None: not looked up yet; False: unavailable


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """``renameat2(src, dst, flags)`` through libc: True when done, False when this system has no such call
    (or the filesystem does not support the flag); any other failure raises ``OSError``."""
    global _renameat2_fn
    if _renameat2_fn is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2_fn = fn
        except (OSError, AttributeError):
            _renameat2_fn = False
    if _renameat2_fn is False:
        return False
    if _renameat2_fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(src), None, str(dst))


def exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` atomically; False when the system cannot (then nothing changed)."""
    return _renameat2(a, b, _RENAME_EXCHANGE)


def _rename_noreplace(src: Path, dst: Path) -> None:
    """Rename ``src`` to ``dst``, which must not exist (an empty folder may be replaced where renameat2 is missing)."""
    if not _renameat2(src, dst, _RENAME_NOREPLACE):
        os.rename(src, dst)


# --- names, lock, staging folder --------------------------------------------------------------------------


def leftover_name(output: Path, kind: str) -> Path:
    return output.with_name(f".{output.name}.{kind}-{secrets.token_hex(6)}")


def _leftovers(output: Path) -> list[Path]:
    """Folders beside ``output`` named like perckit's temporary and old copies of it."""
    try:
        entries = list(os.scandir(output.parent))
    except OSError:
        return []
    return sorted(Path(e.path) for e in entries
                  if (m := _LEFTOVER.match(e.name)) and m.group("name") == output.name and e.is_dir(follow_symlinks=False))


def lock_path(output: Path) -> Path:
    return output.with_name(f".perckit-{output.name}.lock")


@contextlib.contextmanager
def export_lock(output: Path, timeout: float | None = None) -> Iterator[None]:
    """Hold the lock of the export ``output`` (another convert into it waits, then gets an ``OptionError``)."""
    import filelock

    lock = filelock.FileLock(str(lock_path(output)), timeout=LOCK_TIMEOUT if timeout is None else timeout)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise OptionError(f"--output {str(output)!r}: another perckit convert has been writing into this export for "
                          f"{lock.timeout:.0f} s (lock {str(lock_path(output))!r}); expected it to finish, retry later") from None
    try:
        yield
    finally:
        lock.release()


class Staging:
    """The temporary folder a build writes into, marked by :data:`BUILD_MARKER`, whose lock is held for as long
    as the build may still need the folder (so a recovery in another process knows it is alive)."""

    def __init__(self, output: Path) -> None:
        import filelock

        for _ in range(100):
            path = leftover_name(output, "tmp")
            try:
                os.mkdir(path, 0o777)  # the umask applies: normal permissions, not mkdtemp's 0700
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover
            raise OptionError(f"--output {str(output)!r}: cannot create a temporary folder beside it")
        self.path, self.swapped = path, False
        self._lock = filelock.FileLock(str(path / BUILD_MARKER), timeout=0)
        try:
            self._lock.acquire()
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(path / BUILD_MARKER)
            with contextlib.suppress(OSError):
                os.rmdir(path)
            raise

    def drop_marker(self) -> None:
        """Before the swap (under the export lock): the folder becomes an export and needs no marker."""
        self._lock.release()
        with contextlib.suppress(FileNotFoundError):  # filelock's soft fallback removes its file itself
            _do("unlink build marker", os.unlink, self.path / BUILD_MARKER)

    def discard(self) -> None:
        """Remove the folder after a failure before the swap (its files are perckit's or links to the user's)."""
        if self.swapped:
            return
        _remove_build(self.path)
        if self._lock.is_locked:
            self._lock.release()


def _remove_build(path: Path) -> None:
    """Remove a build folder, its marker last (a kill midway leaves a folder still recognisable as a build)."""
    if not path.is_dir():
        return
    for entry in os.scandir(path):
        if entry.name == BUILD_MARKER:
            continue
        if entry.is_dir(follow_symlinks=False):
            _do("remove build subfolder", shutil.rmtree, entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                _do("remove build file", os.unlink, entry.path)
    with contextlib.suppress(FileNotFoundError):
        _do("remove build marker", os.unlink, path / BUILD_MARKER)
    with contextlib.suppress(OSError):
        _do("remove build folder", os.rmdir, path)


def _build_is_dead(path: Path) -> bool:
    """True when nobody holds the lock of the build marker in ``path`` (its convert was killed)."""
    import fcntl

    try:
        fd = os.open(path / BUILD_MARKER, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))  # never created here
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # held: a build in progress
    finally:
        os.close(fd)  # closing drops the probe's own lock
    return True


# --- checks before the build ------------------------------------------------------------------------------


def check_output(output: str | os.PathLike, data_dir: str | os.PathLike | None, cache_dir: str | os.PathLike | None = None) -> Path:
    """The export folder ``output`` as a real path, checked before any build (see the module docstring).

    Raises :class:`~perckit.errors.OptionError` for a refused ``--output`` and
    :class:`~perckit.errors.ReleaseFormatError` for an export whose ``.perckit_export.json`` is corrupt."""
    if output is None or str(output) == "":
        raise OptionError("--output: expected an export folder, got an empty path")
    given = str(output)
    if os.path.islink(given) and not os.path.exists(given):
        raise OptionError(f"--output {given!r}: expected a folder, got a symbolic link to a missing path ({os.readlink(given)!r})")
    real = os.path.realpath(given)
    for option, other in (("--data-dir", data_dir), ("--cache-dir", cache_dir)):
        if other is None:
            continue
        theirs = os.path.realpath(str(other))
        what = "the release folder" if option == "--data-dir" else "the cache folder"
        if is_inside(theirs, real):
            kind = "is" if theirs == real else "contains"
            raise OptionError(f"--output {given!r}: expected a folder of its own for the export, got one that {kind} "
                              f"{what} ({option} {str(other)!r}); convert replaces the export folder, so choose another one")
        if is_inside(real, theirs):
            raise OptionError(f"--output {given!r}: expected a folder outside {what} ({option} {str(other)!r}), got one inside "
                              f"it (the export would be written into {what}); choose another one")
    path = Path(real)
    if path.exists() and not path.is_dir():
        raise OptionError(f"--output {given!r}: expected a folder (new, empty or a perckit export), got a file")
    if path.is_dir():
        if not writable_folder(path):
            raise OptionError(f"--output {given!r}: expected a writable folder, got a read-only one; convert will not replace it")
        try:
            entries = os.listdir(path)
        except OSError as e:
            raise OptionError(f"--output {given!r}: expected a folder perckit can read, got {e.strerror}") from None
        if entries and not has_state(path):
            raise OptionError(f"--output {given!r}: expected a new or empty folder or a perckit export, got a non-empty folder "
                              f"without {STATE_FILE} ({len(entries)} entries, e.g. {sorted(entries)[0]!r}); convert writes only "
                              "into an export it owns: choose another folder")
    probe = path.parent
    while not probe.exists():  # the folders that will be created
        probe = probe.parent
    if not probe.is_dir():
        raise OptionError(f"--output {given!r}: expected a folder path, got one under the file {str(probe)!r}")
    if not writable_folder(probe):
        raise OptionError(f"--output {given!r}: expected a folder whose parent is writable, got {str(probe)!r}, which is "
                          "read-only (the new export is assembled beside it)")
    return path


def create_parent(path: Path, given: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OptionError(f"--output {given!r}: expected a folder perckit can create, got {e.strerror} for {str(path.parent)!r}") from None


def start_staging(output: Path, given: str) -> Staging:
    """The staging folder beside ``output`` (an ``OptionError`` when it cannot be created, e.g. a read-only filesystem)."""
    try:
        return Staging(output)
    except OSError as e:
        raise OptionError(f"--output {given!r}: expected a place where perckit can write, got {e.strerror} creating a "
                          f"folder in {str(output.parent)!r}") from None


# --- assembling and swapping ------------------------------------------------------------------------------


class Conflict(OptionError):
    """A file the user put in the export has the name of a file the new export needs."""


def link_entries(export: Path, staging: Path, skip: set[str]) -> None:
    """Hard-link (copy where links fail) every entry of ``export`` into ``staging``, except the relative paths
    in ``skip`` (perckit's files that the new export replaces). Folders are re-created; symbolic links are
    re-created as links (never followed). A name the staging folder already uses is a :class:`Conflict`."""

    def walk(rel_dir: str) -> None:
        for entry in sorted(os.scandir(export / rel_dir), key=lambda e: e.name):
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if rel in skip:
                continue
            src, dst = export / rel, staging / rel
            is_dir = entry.is_dir(follow_symlinks=False)
            if os.path.lexists(dst) and not (is_dir and dst.is_dir() and not dst.is_symlink()):
                raise Conflict(f"{str(src)!r}: expected only files perckit wrote at this name, got a file it did not write "
                               f"(not in {STATE_FILE}) where the new export puts its own; move it away and convert again")
            if is_dir:
                if not dst.exists():
                    _do("mkdir", os.mkdir, dst)
                walk(rel)
                with contextlib.suppress(OSError):
                    shutil.copymode(src, dst)
            elif entry.is_symlink():
                _do("symlink", os.symlink, os.readlink(src), dst)
            else:
                try:
                    _do("link", os.link, src, dst, follow_symlinks=False)
                except OSError:
                    if not entry.is_file(follow_symlinks=False):
                        continue  # a FIFO or device on a filesystem without hard links: merge_back moves it
                    _do("copy", shutil.copy2, src, dst)

    walk("")


def _same(src: Path, dst: Path) -> bool:
    a, b = os.lstat(src), os.lstat(dst)
    if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
        return True
    if stat.S_ISLNK(a.st_mode) and stat.S_ISLNK(b.st_mode):
        return os.readlink(src) == os.readlink(dst)
    if stat.S_ISREG(a.st_mode) and stat.S_ISREG(b.st_mode) and a.st_size == b.st_size:
        return filecmp.cmp(src, dst, shallow=False)
    return False


def merge_back(old: Path, new: Path, owned: set[str], protected: set[str], prefer_old: bool, log: Log) -> bool:
    """Take apart ``old`` (a previous export, or an unswapped new one) into the export ``new``.

    Paths in ``owned`` (perckit's files in ``old``) are removed. Every other entry is the user's: removed when
    ``new`` holds the same file, else moved into ``new`` (over a differing copy only when ``prefer_old``, i.e.
    ``old`` is known to be the newer, just after a swap), never over a path in ``protected`` (perckit's files
    in ``new``). What cannot be placed is left in ``old`` with its record, and reported. True when ``old`` is gone."""
    kept: list[str] = []

    def place(src: Path, dst: Path, rel: str) -> None:
        if not os.path.lexists(dst):
            _do("mkdir for a user file", os.makedirs, dst.parent, exist_ok=True)
            _do("move a user file", os.rename, src, dst)
        elif not dst.is_dir() and _same(src, dst):
            _do("unlink a duplicate", os.unlink, src)
        elif prefer_old and rel not in protected and not dst.is_dir() and not src.is_dir():
            _do("replace a copy", os.replace, src, dst)
        else:
            kept.append(rel)

    def walk(rel_dir: str) -> None:
        for entry in sorted(os.scandir(old / rel_dir), key=lambda e: e.name):
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if rel == STATE_FILE:
                continue  # removed last: it marks the folder as perckit's
            src, dst = old / rel, new / rel
            try:
                if entry.is_dir(follow_symlinks=False):
                    if not os.path.lexists(dst) and not any(o.startswith(rel + "/") for o in owned):
                        place(src, dst, rel)  # a folder of the user's: moved whole
                        continue
                    walk(rel)
                    with contextlib.suppress(OSError):
                        _do("rmdir", os.rmdir, src)
                    if src.exists():
                        kept.append(rel + "/")
                elif rel in owned:
                    _do("unlink an old perckit file", os.unlink, src)
                else:
                    place(src, dst, rel)
            except OSError as e:
                kept.append(f"{rel} ({e.strerror})")

    walk("")
    kept = [k for k in kept if not k.endswith("/")] or kept
    if kept:
        log(f"perckit: kept {str(old)!r}: {len(kept)} file(s) there are not perckit's and could not be placed in "
            f"{str(new)!r} ({', '.join(kept[:5])}); move them yourself, then delete the folder")
        return False
    with contextlib.suppress(FileNotFoundError):
        _do("unlink old record", os.unlink, old / STATE_FILE)
    try:
        _do("rmdir old export", os.rmdir, old)
    except OSError:
        return False
    return True


def install(staging: Staging, output: Path, old_owned: set[str] | None, new_owned: set[str], log: Log) -> None:
    """Put the complete staging folder in place of ``output`` and take the previous export apart."""
    if old_owned is None:  # no previous export
        try:
            _do("rename staging into place", _rename_noreplace, staging.path, output)
            staging.swapped = True
            return
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        raise OptionError(f"--output {str(output)!r}: expected no folder there, got one created while the export was built; "
                          "convert again")
    old = staging.path
    if not _do("exchange", exchange, staging.path, output):
        old = leftover_name(output, "old")
        _do("rename export aside", os.rename, output, old)
        _do("rename staging into place", os.rename, staging.path, output)
    staging.swapped = True
    merge_back(old, output, old_owned, new_owned, prefer_old=True, log=log)


# --- recovery ---------------------------------------------------------------------------------------------


def _state_or_none(path: Path) -> dict | None:
    """The record of the export ``path`` (paths only), or None when it has none or a broken one."""
    try:
        return read_state(path, features=False)
    except (InputNotFoundError, ReleaseFormatError):
        return None


def recover(output: Path, log: Log) -> None:
    """Clean up after a killed convert into ``output`` (call with the export lock held). Touches only folders
    beside ``output`` named ``.<name>.tmp-<hex>`` / ``.<name>.old-<hex>`` that carry a build marker or a valid
    record; anything else with such a name is left alone."""
    exports: list[tuple[Path, dict]] = []
    for path in _leftovers(output):
        if os.path.lexists(path / BUILD_MARKER):
            if _build_is_dead(path):
                _remove_build(path)
            continue
        state = _state_or_none(path)
        if state is not None:
            exports.append((path, state))
        elif not any(path.iterdir()):
            with contextlib.suppress(OSError):
                _do("rmdir empty leftover", os.rmdir, path)
    if not exports:
        return
    if not output.exists():  # killed between the fallback's two renames: bring the previous export back
        exports.sort(key=lambda ps: (_LEFTOVER.match(ps[0].name).group("kind") == "old", (ps[0] / STATE_FILE).stat().st_mtime_ns))
        path, _ = exports.pop()
        _do("restore export", _rename_noreplace, path, output)
        log(f"perckit: restored the export {str(output)!r} from {path.name} (a convert was interrupted)")
    current = _state_or_none(output)
    if current is None:
        return  # the caller reports the export's own record
    for path, state in exports:
        merge_back(path, output, owned_files(state), owned_files(current), prefer_old=False, log=log)
