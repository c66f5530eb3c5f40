"""Weights files and model folders: the one place perckit reads the files of a model.

Weights are data, never code. A weights file comes from a download page, a model folder from the Hugging Face
Hub or a colleague's disk: both are untrusted input, read under these guards only.

- :func:`load_torch_checkpoint` reads a ``torch.save`` file (the zip format or the legacy one) with
  ``torch.load(weights_only=True)`` from the descriptor that :func:`perckit.io.paths.open_regular_file` checked:
  a regular file (a FIFO, a device such as ``/dev/zero``, a folder are refused before any read) of at most
  :data:`MAX_WEIGHTS_BYTES`. A zip archive is listed first (:func:`zip_records`): its index (central
  directory) must be at most :data:`MAX_WEIGHTS_INDEX_BYTES`, no record may be TorchScript's (``code/``,
  ``constants.pkl``: :func:`is_torchscript`), and every record must be stored uncompressed, as ``torch.save``
  writes them (:func:`check_stored`; torch inflates a compressed record whole before it checks its size, so a
  1 MB file could make it allocate gigabytes). A TorchScript archive is a program: ``torch.jit.load`` runs its code (its
  ``__setstate__`` when it is loaded, its ``forward`` at every call; that code can call
  ``torch.from_file(path, shared=True)`` and so write any file the user can write). perckit refuses it with a
  message naming the state-dict format to convert to, and nothing in perckit calls ``torch.jit.load``.
- :func:`check_model_folder` checks every file of a model folder before it is handed to a third-party loader
  that takes only a folder (``transformers``' ``from_pretrained``, ``SentenceTransformer``): every entry lies
  inside the folder once symbolic links are resolved (:func:`perckit.io.paths.resolve_under`; a Hugging Face
  cache snapshot's links into its own ``blobs/`` are accepted), is a folder or a regular file of at most
  :data:`MAX_WEIGHTS_BYTES`, and so is every shard a ``*.index.json`` names. The callers also turn off what
  would run code from the folder (``trust_remote_code=False``) and ask for ``model.safetensors``
  (``use_safetensors=True``), so no pickle from the folder is read either.
- :func:`folder_file` picks a named file of a weights folder (resolved inside it) and :func:`sha256_file`
  hashes a file through the same checked reader.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import struct
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import InputNotFoundError, OptionError
from .paths import check_relative, open_regular_file, read_regular_file, resolve_under

#: Largest weights file read (8 GiB): the largest a model entry reads is ImageBind's ``imagebind_huge.pth``
#: (about 4.5 GiB); the file is checked on its open descriptor before anything is read.
MAX_WEIGHTS_BYTES = 8 << 30
#: Largest index (zip central directory) of a weights archive (16 MiB): ``zipfile`` reads it whole and makes
#: an object per record, so an index of gigabytes would cost tens of gigabytes. A checkpoint holds one record
#: per tensor storage plus a handful (about 100 bytes of index each): 16 MiB is over 100 000 tensors.
MAX_WEIGHTS_INDEX_BYTES = 16 << 20
#: Most entries of a model folder walked by :func:`check_model_folder` (the MiniLM folder has 14, a CLIP 10).
MAX_FOLDER_ENTRIES = 10_000
#: Deepest folder level walked (a sentence-transformers folder has one level of module folders).
MAX_FOLDER_DEPTH = 8
#: Largest ``*.index.json`` (the shard map of a sharded checkpoint, a few hundred KB for the largest models).
MAX_SHARD_INDEX_BYTES = 64 << 20

_EOCD = b"PK\x05\x06"
_EOCD_SIZE = 22
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"


def open_weights(path: str | os.PathLike, where: str, error: type[Exception] = OptionError,
                 not_found: type[Exception] = InputNotFoundError) -> BinaryIO:
    """``path`` open for reading once it is known to be a regular file of at most :data:`MAX_WEIGHTS_BYTES`
    (:func:`perckit.io.paths.open_regular_file`); ``where`` names the option in messages (``models['fvd']``)."""
    return open_regular_file(path, where, MAX_WEIGHTS_BYTES, error, not_found, "weights file")


def _index_extent(f: BinaryIO, size: int) -> tuple[int, int] | None:
    """``(records, index bytes)`` that the end record of the zip archive in ``f`` declares, found where
    ``zipfile`` finds it (the last 22 bytes, else the last end-record signature in the final 64 KiB + 22), the
    Zip64 end record when the classic one points to it; ``None`` when there is none."""
    if size < _EOCD_SIZE:
        return None
    f.seek(size - _EOCD_SIZE)
    tail = f.read(_EOCD_SIZE)
    start = size - _EOCD_SIZE
    if not (tail[:4] == _EOCD and tail[-2:] == b"\0\0"):
        span = min(size, _EOCD_SIZE + 0xFFFF)
        f.seek(size - span)
        block = f.read(span)
        at = block.rfind(_EOCD)
        if at < 0 or len(block) - at < _EOCD_SIZE:
            return None
        tail = block[at:at + _EOCD_SIZE]
        start = size - span + at
    records, index_bytes = struct.unpack("<H", tail[10:12])[0], struct.unpack("<I", tail[12:16])[0]
    if start >= 20:
        f.seek(start - 20)
        locator = f.read(20)
        if locator[:4] == _ZIP64_LOCATOR:
            offset = struct.unpack("<Q", locator[8:16])[0]
            if offset + 56 <= size:
                f.seek(offset)
                record = f.read(56)
                if record[:4] == _ZIP64_EOCD:
                    records, index_bytes = struct.unpack("<QQ", record[32:48])
    return records, index_bytes


def zip_records(f: BinaryIO, where: str, error: type[Exception] = OptionError) -> list[zipfile.ZipInfo] | None:
    """The records of the zip archive in ``f`` (a ``torch.save`` / ``torch.jit.save`` file), or ``None`` when
    ``f`` does not start like one (a legacy ``torch.save`` pickle, or anything else). Refused with ``error``
    naming ``where``: an index over :data:`MAX_WEIGHTS_INDEX_BYTES` (checked on the end record, before
    ``zipfile`` reads the index), an archive ``zipfile`` cannot list. ``f`` is left at its start."""
    f.seek(0)
    if f.read(4) != b"PK\x03\x04":
        f.seek(0)
        return None
    size = f.seek(0, os.SEEK_END)
    extent = _index_extent(f, size)
    if extent is not None and extent[1] > MAX_WEIGHTS_INDEX_BYTES:
        raise error(f"{where}: expected a zip index (central directory) of at most {MAX_WEIGHTS_INDEX_BYTES} bytes, "
                    f"got one of {extent[1]} bytes ({extent[0]} records)")
    f.seek(0)
    try:
        with zipfile.ZipFile(f) as archive:
            return archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, struct.error) as e:
        raise error(f"{where}: expected a torch checkpoint (a zip archive torch.save wrote), got a zip archive that "
                    f"cannot be listed ({type(e).__name__}: {str(e)[:200]})") from None
    finally:
        f.seek(0)


def check_stored(records: list[zipfile.ZipInfo], where: str, error: type[Exception] = OptionError) -> None:
    """Every record of a ``torch.save`` archive is stored as is (``torch.save`` never compresses): torch would
    inflate a compressed record whole before checking its size (a 1 MB file made it allocate 1.2 GB in a
    test), so one is refused with ``error`` naming ``where`` and the record."""
    for info in records:
        if info.compress_type != zipfile.ZIP_STORED:
            raise error(f"{where}: expected the uncompressed records torch.save writes, got record {info.filename[:200]!r} "
                        f"compressed (method {info.compress_type}; {info.file_size} bytes once inflated); load it with "
                        "torch yourself and save it again with torch.save")


def is_torchscript(records: list[zipfile.ZipInfo] | list[str]) -> bool:
    """Whether zip records (or their names) are a TorchScript archive's: ``torch.jit.save`` writes
    ``<root>/constants.pkl`` and the program under ``<root>/code/`` (``torch.load`` tells the two formats apart
    by ``constants.pkl``); ``torch.save`` writes neither."""
    names = (record if isinstance(record, str) else record.filename for record in records)
    return any(len(p) >= 2 and (p[1] == "code" or p[1:] == ["constants.pkl"]) for p in (n.split("/") for n in names))


def _first_line(e: BaseException, limit: int = 200) -> str:
    return (str(e).strip().splitlines() or [""])[0][:limit]


def load_torch_checkpoint(path: str | os.PathLike, where: str, expected: str, hint: str = "", torchscript_hint: str = "",
                          error: type[Exception] = OptionError) -> Any:
    """What the weights file ``path`` holds, read as data: ``torch.load(f, map_location="cpu",
    weights_only=True)`` on the checked file object (see the module docstring for every check before it).
    Refused with ``error`` naming ``where`` and the file, saying what was ``expected`` (``hint``: where the
    right file comes from): what is not a regular file or is over the cap, a TorchScript archive (never
    loaded; ``torchscript_hint`` says what to convert it to), a compressed or oversized zip index, anything
    ``torch.load`` refuses with ``weights_only=True`` (a pickle of other objects, a truncated file). A missing
    file is an :class:`~perckit.errors.InputNotFoundError`."""
    import torch

    label = f"{where}: {str(path)!r}"
    with open_weights(path, where, error) as f:
        records = zip_records(f, label, error)
        if records is not None:
            if is_torchscript(records):
                raise error(f"{label}: expected {expected}, got a TorchScript archive (it holds code/ and constants.pkl); "
                            f"perckit never loads TorchScript, whose code runs when it is loaded and called{torchscript_hint}")
            check_stored(records, label, error)
        try:
            return torch.load(f, map_location="cpu", weights_only=True, mmap=False)
        except Exception as e:  # any unreadable / foreign file: pickle, zip, EOF, weights_only refusals, allocation
            raise error(f"{label} cannot be read as a torch checkpoint ({type(e).__name__}: {_first_line(e)}); "
                        f"expected {expected}{hint}") from None


def folder_file(folder: str | os.PathLike, name: str, where: str, error: type[Exception] = OptionError) -> Path | None:
    """``folder/name`` when it exists there (resolved inside ``folder``: a symbolic link out of it is refused
    with ``error`` naming ``where``), else ``None``. A folder's file is then read through the checked readers."""
    path = resolve_under(folder, name, where, error)
    return path if os.path.lexists(path) else None


def sha256_file(path: str | os.PathLike, where: str, error: type[Exception] = OptionError,
                limit: int = MAX_WEIGHTS_BYTES) -> str:
    """The sha256 of ``path``, read in 1 MiB blocks through :func:`perckit.io.paths.open_regular_file` (a regular
    file of at most ``limit`` bytes; a missing file: :class:`~perckit.errors.ReleaseNotFoundError` when ``error`` is
    :class:`~perckit.errors.ReleaseFormatError`, else ``error``)."""
    h = hashlib.sha256()
    with open_regular_file(path, where, limit, error) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_model_folder(folder: str | os.PathLike, where: str, error: type[Exception] = OptionError) -> list[str]:
    """Check every file a loader could read from the model folder ``folder`` (see the module docstring);
    returns the relative POSIX paths of its regular files, sorted. Entries whose name starts with a dot
    (``.git``, ``.cache``) are not walked: no model loader reads them. Refused with ``error`` naming ``where``
    and the entry: a link out of the folder, a FIFO / socket / device, a file over :data:`MAX_WEIGHTS_BYTES`,
    more than :data:`MAX_FOLDER_ENTRIES` entries or :data:`MAX_FOLDER_DEPTH` levels, a shard named by a
    ``*.index.json`` that is not such a file inside the folder."""
    root = Path(folder)
    files: list[str] = []
    pending: list[tuple[str, int]] = [("", 0)]
    seen = 0
    while pending:
        rel, depth = pending.pop()
        try:
            with os.scandir(root / rel if rel else root) as it:
                names = sorted(entry.name for entry in it)
        except OSError as e:
            raise error(f"{where}: the model folder {str(root / rel)!r} cannot be listed: {e.strerror or e}") from None
        for name in names:
            if name.startswith("."):
                continue
            seen += 1
            if seen > MAX_FOLDER_ENTRIES:
                raise error(f"{where}: the model folder {str(root)!r} holds more than {MAX_FOLDER_ENTRIES} entries; "
                            "expected a model folder (config, tokenizer and weights files)")
            child = f"{rel}/{name}" if rel else name
            path = resolve_under(root, child, f"{where}: model folder {str(root)!r}", error)
            try:
                st = os.stat(path)
            except OSError as e:
                raise error(f"{where}: {str(path)!r} in the model folder cannot be read: {e.strerror or e}") from None
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 > MAX_FOLDER_DEPTH:
                    raise error(f"{where}: the model folder {str(root)!r} nests folders deeper than {MAX_FOLDER_DEPTH} levels at {child!r}")
                pending.append((child, depth + 1))
            elif not stat.S_ISREG(st.st_mode):
                kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
                raise error(f"{where}: expected a regular file in the model folder, got {kind}: {str(path)!r}")
            elif st.st_size > MAX_WEIGHTS_BYTES:
                raise error(f"{where}: {str(path)!r} holds {st.st_size} bytes, more than the limit of {MAX_WEIGHTS_BYTES} bytes")
            else:
                files.append(child)
    files.sort()
    for rel in files:
        if rel.endswith(".index.json"):
            _check_shard_index(root, rel, files, where, error)
    return files


def _check_shard_index(root: Path, rel: str, files: list[str], where: str, error: type[Exception]) -> None:
    """The shards a ``*.index.json`` (``{"weight_map": {tensor: shard file}}``) names are files of the folder:
    ``transformers`` joins them to the folder as they are, so ``../x`` or an absolute path would leave it."""
    label = f"{where}: {str(root / rel)!r}"
    raw = read_regular_file(root / rel, label, MAX_SHARD_INDEX_BYTES, error, error)
    try:
        index = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise error(f"{label}: expected a JSON shard index, got text that does not parse ({type(e).__name__}: {_first_line(e)})") from None
    weight_map = index.get("weight_map") if isinstance(index, Mapping) else None
    if weight_map is None:
        return
    if not isinstance(weight_map, Mapping):
        raise error(f"{label} weight_map: expected an object {{tensor: shard file}}, got {type(weight_map).__name__}")
    base = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
    present = set(files)
    for shard in sorted({str(v) if isinstance(v, str) else "" for v in weight_map.values()}):
        shard_rel = check_relative(shard, f"{label} weight_map shard {shard[:200]!r}", error).as_posix()
        if f"{base}{shard_rel}" not in present:
            raise error(f"{label} weight_map: expected shard files inside the model folder, got {shard[:200]!r}, which is not one")


__all__ = [
    "MAX_FOLDER_DEPTH", "MAX_FOLDER_ENTRIES", "MAX_SHARD_INDEX_BYTES", "MAX_WEIGHTS_BYTES", "MAX_WEIGHTS_INDEX_BYTES",
    "check_model_folder", "check_stored", "folder_file", "is_torchscript", "load_torch_checkpoint", "open_weights", "sha256_file",
    "zip_records",
]
