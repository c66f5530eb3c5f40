"""Readers of a Syn4D release (the sequence index, tracking NPYs, depth EXRs, camera CSVs, ``SHA256SUMS``, the model
input frames of an MP4), and the reader and writer of the official prediction NPZs; everything is read through the
checked readers: regular files under the caps of
:mod:`perckit.syn4d.layout`, NPYs and NPZ members read with ``allow_pickle=False`` only (object dtypes refused,
every NPY header checked before NumPy allocates)."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import logging
import lzma
import math
import os
import re
import struct
import zipfile
import zlib
from pathlib import Path
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO

import numpy as np

from ..errors import InferredShapeError, InputNotFoundError, PredictionError, ReleaseFormatError, ReleaseNotFoundError
from ..errors import inferred_reading, short_repr
from ..io.jsonio import decode_text, parse_int, iter_json_lines
from ..io.media import MAX_VIDEO_PIXELS, video_frames
from ..io.model_files import sha256_file
from ..io.paths import atomic_file, check_relative, open_regular_file, read_regular_file, resolve_under
from .layout import (
    ARRAY_DTYPES, CSV_COLUMNS, EXR_CHANNELS, FRAME_INDICES, MAX_ARRAY_BYTES, MAX_CHECKSUM_FILE_BYTES, MAX_DEPTH_PIXELS,
    MAX_EXR_BYTES, MAX_NPY_HEADER_BYTES, MAX_NPZ_BYTES, MAX_TEXT_BYTES, MAX_VIDEO_BYTES, NPY_FIELDS, PLAIN_RELATIVE,
    PREDICTION_KEYS, SCHEMA,
    PathResolver, ReleasePaths, SequenceRecord, check_sequence_id, default_record, depth_frame_paths, index_path,
    prediction_path, real_path, records_from_tracking_gt, tracking_checksums_path,
)

#: the logger of the warnings of Syn4D's [inferred] readings (the builder's and the file runner's)
logger = logging.getLogger(__name__)


# ---------------------------------------------------------------- index


def read_text(path: Path, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """A release text file (index, checksums, CSV) under the BOM rule: a regular file of at most ``limit``
    bytes (:func:`perckit.io.paths.read_regular_file`), decoded by :func:`perckit.io.jsonio.decode_text`."""
    where = repr(str(path))
    return decode_text(read_regular_file(path, where, limit), where, ReleaseFormatError, what)


class OneWarning:
    """The ``logger`` of :func:`~perckit.errors.inferred_reading` over the readings of one file: its first warning
    only, so a file gives one warning naming it however many of its lines or fields are ignored."""

    warned = False

    def warning(self, msg: str, *args: object) -> None:
        if not self.warned:
            self.warned = True
            logger.warning(msg, *args)


def _index_value(key: str, value: object, challenge: Path | None, resolver: PathResolver | None, where: str) -> Any:
    """``camera``, ``depth_dir`` or ``camera_csv`` of an index line; :class:`InferredShapeError` for another shape
    (a path out of the challenge folder is still refused)."""
    if key == "camera":
        return parse_int(value, repr(key), InferredShapeError)
    if not isinstance(value, str):
        raise InferredShapeError(f"expected a path string, got {short_repr(value)}")
    return index_path(value, challenge, where, resolver)


def read_index(path: Path, challenge: Path | None) -> list[SequenceRecord]:
    """``sequences.jsonl`` (or the official manifest): one JSON object a line, the release's list of sequences.

    A line that is not an object, or without a ``'<variant>/<scene>/<sequence>'`` ``sequence_id``, or repeating one,
    raises :class:`ReleaseFormatError` (the card names no keys, but the build reads the sequences listed). The other
    keys read are [inferred]: ``camera``, ``depth_dir`` and ``camera_csv`` (relative to C; a path out of C is
    refused); absent or of another shape (then one warning naming the file: :class:`OneWarning`), each is the card's
    layout (:func:`~perckit.syn4d.layout.default_record`). No other key is read (the frames are the card's)."""
    records = []
    seen: set[str] = set()
    resolver = PathResolver(challenge) if challenge is not None else None
    once = OneWarning()
    # The one JSON Lines reader: a regular file under MAX_TEXT_BYTES, a leading BOM skipped, one object a line.
    for _, where, obj in iter_json_lines(path, limit=MAX_TEXT_BYTES):
        sid = obj.get("sequence_id")
        variant, scene, sequence = check_sequence_id(sid, where)
        if sid in seen:
            raise ReleaseFormatError(f"{where}: duplicate sequence_id {sid!r}")
        seen.add(sid)
        record = default_record(variant, scene, sequence, challenge, resolver)
        fields = {key: inferred_reading(lambda: _index_value(key, obj[key], challenge, resolver, f"{where}: {key!r}"),
                                        getattr(record, key), f"{where}: {key!r}", once)
                  for key in ("camera", "depth_dir", "camera_csv") if obj.get(key) is not None}
        records.append(dataclasses.replace(record, **fields))
    return records


def load_records(paths: ReleasePaths) -> list[SequenceRecord]:
    return read_index(paths.index, paths.challenge) if paths.index else records_from_tracking_gt(paths.tracking_gt, paths.challenge)


# ---------------------------------------------------------------- tracking NPY


def check_npy_header(
    f: Any, size: int, where: str, error: type[Exception] = ReleaseFormatError, max_bytes: int = MAX_ARRAY_BYTES
) -> tuple[tuple[int, ...], bool, np.dtype, tuple[int, int]]:
    """Read the magic and header of the NPY stream ``f`` (``size`` bytes long) and check it before NumPy allocates.

    Raises ``error`` naming ``where`` for a stream that is not NPY, an object dtype (pickled data is never loaded),
    a declared array larger than ``max_bytes``, or fewer data bytes than the header declares (a truncated file).
    NumPy itself caps the header at 10,000 bytes. Returns the header's shape, Fortran order, dtype and format
    version (``f`` is left at the first data byte)."""
    from numpy.lib import format as npf

    try:
        version = npf.read_magic(f)
        read_header = npf.read_array_header_1_0 if version == (1, 0) else npf.read_array_header_2_0
        shape, _fortran, dtype = read_header(f)
    except (ValueError, TypeError, SyntaxError, OSError, EOFError, struct.error) as e:
        raise error(f"{where}: expected a NumPy .npy array, got an unreadable header: {type(e).__name__}: {e}") from None
    if dtype.hasobject:
        raise error(f"{where}: expected a non-pickled NumPy array, got the object dtype {dtype} (pickled data is never loaded)")
    count = math.prod(int(n) for n in shape)
    nbytes = count * dtype.itemsize
    if nbytes > max_bytes:
        raise error(f"{where}: the header declares shape {tuple(shape)} of {dtype} = {nbytes} bytes, more than the limit of {max_bytes} bytes")
    remaining = size - f.tell()
    if remaining < nbytes:
        raise error(
            f"{where}: truncated: the header declares shape {tuple(shape)} of {dtype} ({nbytes} bytes of data), the file holds {remaining}"
        )
    return tuple(shape), bool(_fortran), dtype, version


def _read_npy_data(f: BinaryIO, shape: tuple[int, ...], fortran: bool, dtype: np.dtype) -> np.ndarray | None:
    """The data of the NPY whose header :func:`check_npy_header` just read (``f`` at its first data byte), as
    ``np.load`` reads it (``numpy.lib.format.read_array`` for a file without objects), or None when it cannot
    be read so (then ``np.load`` reads the file from the start, with its own errors)."""
    if dtype.hasobject or not isinstance(f, (io.FileIO, io.BufferedReader)):
        return None
    count = math.prod(shape)
    try:
        data = np.fromfile(f, dtype=dtype, count=count) if count else np.ndarray(count, dtype=dtype)
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    if data.size != count:
        return None
    if fortran:
        data.shape = shape[::-1]
        return data.transpose()
    data.shape = shape
    return data


def read_tracking_npy(path: Path, expected_sequence_id: str | None = None) -> dict[str, np.ndarray | str]:
    """A validated ``syn4d-tracking-gt-v1`` NPY as a dict of arrays (``schema``/``sequence_id`` as str)."""
    where = str(path)
    # Opened without blocking and checked on the descriptor: a FIFO or a device planted as the NPY is refused at
    # once (opening a FIFO would block, /dev/zero would never end); the same open file is loaded.
    with open_regular_file(path, repr(where), MAX_ARRAY_BYTES + MAX_NPY_HEADER_BYTES, what=".npy file") as f:
        st = os.fstat(f.fileno())
        shape, fortran, dtype, version = check_npy_header(f, st.st_size, f"{where!r} ({SCHEMA})")
        # the header read once (formats 1.0 and 2.0, which check_npy_header parses as np.load does); None: np.load
        arr = _read_npy_data(f, shape, fortran, dtype) if version in ((1, 0), (2, 0)) else None
        try:
            if arr is None:
                f.seek(0)
                arr = np.load(f, allow_pickle=False)
        except ValueError as e:  # "Object arrays cannot be loaded when allow_pickle=False" and bad headers
            raise ReleaseFormatError(f"{where!r}: expected a non-pickled structured NumPy array ({SCHEMA}), got: {e}") from None
        except (OSError, EOFError) as e:
            raise ReleaseFormatError(f"{where!r}: expected a readable .npy file, got: {e}") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.names is None:
        raise ReleaseFormatError(f"{where!r}: expected a structured array with fields {list(NPY_FIELDS)}, got dtype {getattr(arr, 'dtype', type(arr))}")
    if arr.dtype.hasobject:
        raise ReleaseFormatError(f"{where!r}: object fields are refused (never unpickled)")
    if arr.shape != ():
        raise ReleaseFormatError(f"{where!r}: expected a 0-d structured array (shape ()), got shape {arr.shape}")
    missing = [f for f in NPY_FIELDS if f not in arr.dtype.names]
    if missing:
        raise ReleaseFormatError(f"{where!r}: expected fields {list(NPY_FIELDS)}, missing {missing}")
    rec = arr[()]
    out: dict = {f: np.asarray(rec[f]) for f in NPY_FIELDS}
    schema = str(out["schema"])
    if schema != SCHEMA:
        raise ReleaseFormatError(f"{where!r}: expected schema {SCHEMA!r}, got {schema!r}")
    out["schema"] = schema
    out["sequence_id"] = str(out["sequence_id"])
    tracks = out["tracks_ref0"]
    if tracks.ndim != 3 or tracks.shape[2] != 3:
        raise ReleaseFormatError(f"{where!r}: expected tracks_ref0 of shape (T, Q, 3), got {tracks.shape}")
    t, q = tracks.shape[:2]
    expected = {"visibility": (t, q), "dynamic": (q,), "query_uv": (q, 2), "frame_indices": (t,), "intrinsics": (4,), "image_size": (2,)}
    for name, shape in expected.items():
        if out[name].shape != shape:
            raise ReleaseFormatError(f"{where!r}: expected {name} of shape {shape}, got {out[name].shape}")
        if not (np.issubdtype(out[name].dtype, np.number) or out[name].dtype == bool):
            raise ReleaseFormatError(f"{where!r}: expected {name} to be numeric, got dtype {out[name].dtype}")
    if not np.issubdtype(tracks.dtype, np.number):
        raise ReleaseFormatError(f"{where!r}: expected tracks_ref0 to be numeric, got dtype {tracks.dtype}")
    for name in NPY_FIELDS[2:]:  # the arrays, in the dtypes of the builder rows
        out[name] = out[name].astype(ARRAY_DTYPES[name], copy=False)
    if expected_sequence_id is not None and out["sequence_id"] != expected_sequence_id:
        raise ReleaseFormatError(f"{where!r}: sequence_id inside is {out['sequence_id']!r}, but its path says {expected_sequence_id!r}")
    if tuple(int(x) for x in out["frame_indices"]) != FRAME_INDICES:
        raise ReleaseFormatError(f"{where!r}: expected frame_indices range(0, 192, 6), got {out['frame_indices'][:6].tolist()}...")
    return out


# ---------------------------------------------------------------- depth EXR

def _exr_hw(header: Mapping, where: str) -> tuple[int, int]:
    """(H, W) of an EXR header's dataWindow, checked to be positive and at most :data:`MAX_DEPTH_PIXELS`."""
    dw = header["dataWindow"]
    h, w = dw.max.y - dw.min.y + 1, dw.max.x - dw.min.x + 1
    if h <= 0 or w <= 0 or h * w > MAX_DEPTH_PIXELS:
        raise ReleaseFormatError(
            f"{where!r}: the EXR dataWindow declares {h} x {w} pixels; expected a positive size of at most "
            f"{MAX_DEPTH_PIXELS} pixels (corrupt header?)"
        )
    return h, w


@contextlib.contextmanager
def _open_exr(path: Path) -> Iterator[Any]:
    """``OpenEXR.InputFile`` on ``path``, a regular file of at most :data:`MAX_EXR_BYTES` (OpenEXR reads the checked
    open file, never the path); closed on exit."""
    import OpenEXR

    with open_regular_file(path, repr(str(path)), MAX_EXR_BYTES, what="EXR file") as fh:
        try:
            f = OpenEXR.InputFile(fh)
        except (OSError, RuntimeError, TypeError, ValueError) as e:
            raise ReleaseFormatError(f"{str(path)!r}: expected a readable OpenEXR file, got: {e}") from None
        try:
            yield f
        finally:
            f.close()


def exr_size(path: Path) -> tuple[int, int]:
    """(H, W) of an EXR from its header (dataWindow); the file is a regular file of at most :data:`MAX_EXR_BYTES`."""
    with _open_exr(path) as f:
        return _exr_hw(f.header(), str(path))


def read_depth_exr(path: Path, expected_hw: tuple[int, int] | None = None) -> np.ndarray:
    """Depth in metres, float32 [H, W]: the first of the Depth, Z, R, Y channels (centimetres) / 100."""
    import Imath

    where = str(path)
    if not path.exists():
        raise ReleaseNotFoundError(f"{where!r}: depth EXR not found")
    with _open_exr(path) as f:
        header = f.header()
        h, w = _exr_hw(header, where)
        if expected_hw is not None and (h, w) != tuple(expected_hw):
            raise ReleaseFormatError(f"{where!r}: expected depth size (H, W) = {tuple(expected_hw)}, got {(h, w)}; set the option depth_hw")
        channel = next((c for c in EXR_CHANNELS if c in header["channels"]), None)
        if channel is None:  # [inferred] channel names
            raise InferredShapeError(f"{where!r}: expected one of the channels {list(EXR_CHANNELS)}, got {sorted(header['channels'])}")
        try:
            raw = f.channel(channel, Imath.PixelType(Imath.PixelType.FLOAT))
        except OSError as e:
            raise ReleaseFormatError(f"{where!r}: cannot read channel {channel!r}: {e}") from None
    data = np.frombuffer(raw, dtype=np.float32)
    if data.size != h * w:
        raise ReleaseFormatError(f"{where!r}: channel {channel!r} has {data.size} values, expected H*W = {h * w}")
    return data.reshape(h, w) / np.float32(100.0)


def read_depth_sequence(record: SequenceRecord, hw: tuple[int, int] | None = None) -> np.ndarray | None:
    """[T, H, W] metres, or None when the sequence's depth folder is absent; a partial set raises. The file names
    and channels are [inferred]: a folder without any of the 32 names, or an EXR without one of the channels,
    raises :class:`InferredShapeError`."""
    if record.depth_dir is None or not record.depth_dir.is_dir():
        return None
    paths = depth_frame_paths(record.depth_dir, record.sequence, record.frame_indices)
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise (InferredShapeError if len(missing) == len(paths) else ReleaseFormatError)(
            f"{str(record.depth_dir)!r}: expected {len(paths)} depth EXRs, {len(missing)} missing (e.g. {missing[:3]})"
        )
    return np.stack([read_depth_exr(p, hw) for p in paths])


# ---------------------------------------------------------------- camera CSV


def read_camera_csv(record: SequenceRecord) -> np.ndarray | None:
    """[T, 6] float64 (x_cm, y_cm, z_cm, yaw_deg, pitch_deg, roll_deg) of the evaluated frames, or None if absent.
    Its columns, row names and values are [inferred]: another shape raises :class:`InferredShapeError`; a file that
    is not UTF-8 or not CSV raises :class:`ReleaseFormatError`."""
    path = record.camera_csv
    if path is None or not path.is_file():
        return None
    where = str(path)
    rows: dict[str, list[float]] = {}
    text = read_text(path, "a UTF-8 CSV")  # a regular file under MAX_TEXT_BYTES; a leading BOM skipped
    try:
        with io.StringIO(text, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            lacking = [c for c in ("name",) + CSV_COLUMNS if c not in header]
            if lacking:
                raise InferredShapeError(f"{where!r}: expected the header name,x,y,z,yaw,pitch,roll, missing {lacking} (got {header})")
            for n, row in enumerate(reader, 2):
                try:
                    rows[Path(row["name"] or "").name] = [float(row[c]) for c in CSV_COLUMNS]
                except (TypeError, ValueError):
                    raise InferredShapeError(f"{where!r} line {n}: expected numbers in x,y,z,yaw,pitch,roll, got {row}") from None
    except csv.Error as e:  # a NUL byte, a field longer than csv.field_size_limit(), ...
        raise ReleaseFormatError(f"{where!r}: expected a CSV with the header name,x,y,z,yaw,pitch,roll, got a parse error: {e}") from None
    out = []
    for t in record.frame_indices:
        key = f"{record.sequence}_{int(t):04d}.png"
        if key not in rows:
            raise InferredShapeError(f"{where!r}: expected a row named {key!r} (frame {t}), not found")
        out.append(rows[key])
    arr = np.asarray(out, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise InferredShapeError(f"{where!r}: a camera row of an evaluated frame has a NaN or infinite value")
    return arr


# ---------------------------------------------------------------- checksums


def read_checksums(path: Path) -> dict[str, str]:
    """``sha256sum`` format: ``<64 hex>  <path>`` (``*`` binary marker allowed); path relative to ``benchmark/``.
    Other lines (the card names the tool, ``sha256sum --check``, not the lines perckit reads [inferred]) are
    ignored with one warning naming the file, as ``sha256sum --check`` warns of "improperly formatted" lines and
    checks the others; a listed path out of the release is refused."""
    out: dict[str, str] = {}
    text = read_text(path, "UTF-8 text ('<64 hex digits>  <path>' lines)")
    once = OneWarning()
    for n, line in enumerate(text.splitlines(), 1):
        where = f"{str(path)!r} line {n}"
        parts = inferred_reading(lambda: _checksum_line(line), None, where, once) if line.strip() else None
        if parts is None:
            continue
        name = parts[1].lstrip("*").strip().removeprefix("./")
        # Only compared with the files the builder reads, never opened; still, a listed path must be one
        # inside the release (no absolute path, no '..'): check_relative, unless the name is plainly one
        # (the regex accepts a subset of what check_relative accepts; anything else gets its verdict).
        if not PLAIN_RELATIVE.fullmatch(name):
            check_relative(name, f"{where}: path")
        out[name] = parts[0].lower()
    return out


_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def _checksum_line(line: str) -> list[str]:
    parts = line.split(None, 1)
    if len(parts) != 2 or not _HEX64.fullmatch(parts[0]):
        raise InferredShapeError(f"expected '<64 hex digits>  <path>', got {line[:120]!r}")
    return parts


class ChecksumVerifier:
    """Verifies each file the builder or the file runner reads against the ``SHA256SUMS`` found: ``B/SHA256SUMS``
    and the one beside a tracking GT given apart (:attr:`ReleasePaths.tracking_checksums`; read once when it is
    the same file). A file is checked against the first list whose folder holds it and names it (its benchmark
    folder or that folder's parent, where ``challenge_eval/`` may sit); files no list names are skipped."""

    def __init__(self, paths: ReleasePaths) -> None:
        #: (SHA256SUMS file, its entries, the folders its names are relative to)
        self.lists: list[tuple[Path, dict[str, str], tuple[Path, ...]]] = []
        seen: set[str] = set()
        for sums, bases in ((paths.checksums, (paths.benchmark, paths.root)),
                            (paths.tracking_checksums, (paths.tracking_checksums.parent, paths.tracking_checksums.parent.parent)
                             if paths.tracking_checksums is not None else ())):
            if sums is not None and os.path.realpath(sums) not in seen:
                seen.add(os.path.realpath(sums))
                self.lists.append((sums, read_checksums(sums), bases))

    @staticmethod
    def _key_of_real(real: Path, real_bases: Sequence[Path], sums: Mapping[str, str]) -> str | None:
        """The listed name of the real path ``real``: relative to one of the real bases."""
        for base in real_bases:
            try:
                rel = real.relative_to(base).as_posix()
            except ValueError:
                continue
            if rel in sums:
                return rel
        return None

    def check_all(self, paths: Iterable[Path]) -> int:
        """Verify every existing file of ``paths`` (before anything is scored or generated, so that a
        mismatch reaches the user as its own error); returns how many were listed and verified."""
        n = 0
        lists = [(source, sums, [b.resolve() for b in bases]) for source, sums, bases in self.lists if sums]
        if not lists:
            return n
        real_dirs: dict[str, str] = {}
        for path in paths:
            if path is not None and path.is_file():
                real = real_path(path, real_dirs)
                for source, sums, real_bases in lists:
                    rel = self._key_of_real(real, real_bases, sums)
                    if rel is not None:
                        actual = sha256_file(path, repr(str(path)), ReleaseFormatError, MAX_CHECKSUM_FILE_BYTES)
                        if actual != sums[rel]:
                            raise ReleaseFormatError(
                                f"{str(path)!r}: SHA-256 mismatch with {str(source)!r}: expected {sums[rel]}, got {actual}")
                        n += 1
                        break
        return n


#: Why a tracking GT folder has no SHA256SUMS where the card puts it (``{!r}``: the folder).
_NOT_TRACKING_GT = "the tracking GT folder {!r} is not a 'data/tracking_gt' folder, beside which the card puts SHA256SUMS"


def _run_checksums(paths: ReleasePaths, tracking: bool) -> tuple[Path | None, Path | None]:
    """(where the card puts the run's ``SHA256SUMS``, the file found there): beside the ``data/tracking_gt`` read
    when ``tracking`` (:func:`~perckit.syn4d.layout.tracking_checksums_path`; ``None`` when the folder is not a
    ``data/tracking_gt`` folder), else ``B/SHA256SUMS``."""
    if not tracking:
        return paths.benchmark / "SHA256SUMS", paths.checksums
    return tracking_checksums_path(paths.tracking_gt), paths.tracking_checksums


def checksum_verifier(paths: ReleasePaths, verify: bool | None, hint: str = "", tracking: bool = True) -> ChecksumVerifier | None:
    """The option ``verify_checksums`` of the builder and the file runner, written once: ``None`` verifies when
    ``SHA256SUMS`` is found (``B/SHA256SUMS``, or beside a tracking GT given apart), ``True`` requires the one where
    the card puts it for the files read (beside the ``data/tracking_gt`` read when ``tracking``, else
    ``B/SHA256SUMS``; else :class:`~perckit.errors.ReleaseNotFoundError` naming it, then ``hint``), ``False``
    skips. Returns the verifier to run over the files read, or ``None`` when there is nothing to verify."""
    if verify:
        expected, found = _run_checksums(paths, tracking)
        if expected is None:
            raise ReleaseNotFoundError(f"verify_checksums=True but {_NOT_TRACKING_GT.format(str(paths.tracking_gt))}{hint}")
        if found is None:
            raise ReleaseNotFoundError(f"verify_checksums=True but {str(expected)!r} does not exist{hint}")
    if verify is False or (paths.checksums is None and paths.tracking_checksums is None):
        return None
    return ChecksumVerifier(paths)


def unverified_reason(paths: ReleasePaths, verify: bool | None, tracking: bool = True) -> str | None:
    """Why a run reading ``paths`` (its tracking GT when ``tracking``) is not verified, in one sentence naming
    where ``SHA256SUMS`` was looked for, or ``None`` when it is: ``verify=False``, or no ``SHA256SUMS`` where the
    card puts it (see :func:`checksum_verifier`). When only ``B/SHA256SUMS`` was found, the sentence says that
    the files it lists are still verified."""
    if verify is False:
        return "checksum verification is off"
    expected, found = _run_checksums(paths, tracking)
    if found is not None:
        return None
    if expected is None:
        text = _NOT_TRACKING_GT.format(str(paths.tracking_gt))
    else:
        text = f"no SHA256SUMS at {str(expected)!r}, beside data/tracking_gt where the card puts it"
    if paths.checksums is not None:
        text += f" (only the files listed in {str(paths.checksums)!r} are verified)"
    return text


# ---------------------------------------------------------------- model inputs


def model_inputs(source: Mapping | str | os.PathLike, root: str | os.PathLike | None = None) -> np.ndarray:
    """A sequence's model input as the official adapters make it (``image_paths``, ``adapters/common.py`` of
    jzr99/Syn4D_benchmark): the frames :data:`~.layout.FRAME_INDICES` (0, 6, ..., 186) of its MP4, counted from 0 in
    decoding order, as RGB uint8 ``[32, H, W, 3]``. ``source``: a ``challenge`` row, or an MP4 path resolved under
    ``root``, the release root (:func:`perckit.io.paths.resolve_under`); read by :func:`perckit.io.media.video_frames`
    (at most :data:`~.layout.MAX_VIDEO_BYTES`, the header checked) up to frame 186. No video, no ``root``, a frame over
    the pixel cap or of another size than frame 0, a video ending early: :class:`~perckit.errors.ReleaseFormatError`."""
    if isinstance(source, Mapping):
        video, where = source.get("video"), f"Syn4D sequence {source.get('sequence_id')!r}: video"
    elif root is None:
        raise ReleaseFormatError(f"Syn4D model_inputs: the video path {os.fspath(source)!r} needs root=<the release root>")
    else:
        where = f"Syn4D video {os.fspath(source)!r}"
        video = {"bytes": None, "path": str(resolve_under(root, os.fspath(source), where))}
    picked: list[np.ndarray] = []
    with video_frames(video, where, MAX_VIDEO_BYTES) as frames:
        if frames is None:
            raise ReleaseFormatError(f"{where}: no video (expected a challenge row whose MP4 is present, or an MP4 path)")
        for i, frame in zip(range(FRAME_INDICES[-1] + 1), frames):
            if i in FRAME_INDICES:
                size = (frame.height, frame.width)
                if size[0] * size[1] > MAX_VIDEO_PIXELS or (picked and size != picked[0].shape[:2]):
                    raise ReleaseFormatError(f"{where}: frame {i} is {size[1]} x {size[0]}; expected the size of frame 0, at "
                                             f"most {MAX_VIDEO_PIXELS} pixels (perckit.io.media.MAX_VIDEO_PIXELS)")
                picked.append(frame.to_ndarray(format="rgb24"))
    if len(picked) < len(FRAME_INDICES):
        raise ReleaseFormatError(f"{where}: the video ends before frame {FRAME_INDICES[len(picked)]}; expected the "
                                 f"{len(FRAME_INDICES)} frames 0, 6, ..., {FRAME_INDICES[-1]}")
    return np.stack(picked)


# ---------------------------------------------------------------- prediction NPZs


#: What reading a corrupt NPZ can raise (zipfile, zlib, bz2 / lzma members, NumPy's parser).
_READ_ERRORS = (
    ValueError, OSError, EOFError, KeyError, RuntimeError, NotImplementedError, struct.error,
    zipfile.BadZipFile, zlib.error, lzma.LZMAError,
)


def read_npz(path: str | Path) -> dict[str, np.ndarray | None]:
    """The prediction arrays of one NPZ (``allow_pickle=False``); an absent key is None, extra keys are ignored.

    Every member that is read has its NPY header checked first (:func:`check_npy_header`): object dtypes, arrays
    declaring more than ``MAX_ARRAY_BYTES`` and members shorter than their header declares raise
    :class:`PredictionError` before NumPy allocates anything."""
    path = Path(path)
    where = repr(str(path))
    # opened without blocking and checked on the descriptor (a FIFO would block np.load, /dev/zero would never
    # end, an oversize file is refused before a byte is read); NumPy reads the same open file
    with open_regular_file(path, where, MAX_NPZ_BYTES, PredictionError, InputNotFoundError, what=".npz file") as fh:
        try:
            loaded = np.load(fh, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):  # np.load reads a plain .npy too
                raise PredictionError(f"{where}: expected an .npz archive, got a single array")
            with loaded as z:
                out = dict.fromkeys(PREDICTION_KEYS)  # an absent key stays None
                for k in PREDICTION_KEYS:
                    if k not in z.files:
                        continue
                    names = z.zip.namelist()
                    member = f"{k}.npy" if f"{k}.npy" in names else k
                    info = z.zip.getinfo(member)
                    with z.zip.open(member) as f:
                        check_npy_header(f, info.file_size, f"{where}: member {member!r}", PredictionError)
                    out[k] = np.asarray(z[k])
        except PredictionError:
            raise
        except _READ_ERRORS as e:
            raise PredictionError(f"{where}: expected a readable .npz of numeric arrays (no pickles), got: {type(e).__name__}: {e}") from None
    for k, v in out.items():
        if v is not None and not (np.issubdtype(v.dtype, np.number) or v.dtype == bool):
            raise PredictionError(f"{where}: {k!r} must be numeric, got dtype {v.dtype}")
    return out


def load_prediction_row(npz_path: str | Path, sequence_id: str, as_lists: bool = True) -> dict:
    """A ``syn4d`` metric prediction row from an official NPZ; every array is None when the file is missing.

    ``as_lists`` (default) gives nested lists: datasets 5.x's Arrow writer (which evaluate uses) cannot convert a
    multi-dimensional numpy array in a batch whose first value is None. The values are exact (float32 -> Python
    float is lossless). The core functions accept numpy arrays as they are."""
    path = Path(npz_path)
    arrays = read_npz(path) if path.is_file() else dict.fromkeys(PREDICTION_KEYS)
    if as_lists:
        arrays = {k: (v.tolist() if v is not None else None) for k, v in arrays.items()}
    return {"sequence_id": sequence_id, **arrays}


def load_prediction_rows(predictions_dir: str | Path, sequence_ids: list[str], as_lists: bool = True) -> list[dict]:
    return [load_prediction_row(prediction_path(predictions_dir, sid), sid, as_lists) for sid in sequence_ids]


#: the official NPZ's arrays and the builder-row fields holding their ground truth
GT_ARRAYS = {"tracking_xyz": "tracks_ref0", "depth": "depth_m", "camera_c2w": "camera_c2w", "frame_indices": "frame_indices"}


def write_prediction(predictions_dir: str | Path, sequence_id: str, arrays: Mapping[str, np.ndarray]) -> Path:
    """One official NPZ, ``<predictions_dir>/<variant>/<scene>/<sequence>.npz`` (:func:`.layout.prediction_path`),
    written atomically to a new path (a file already there is never replaced)."""
    path = prediction_path(predictions_dir, sequence_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, repr(str(path)), replace=False) as f:
        np.savez(f, **arrays)
    return path


def write_gt_predictions(rows: Iterable[Mapping], predictions_dir: str | Path) -> int:
    """The ground truth of builder rows as the official NPZ of each sequence (the ``tracking`` config: the tracks;
    ``challenge``: the tracks, depth and poses), which scores as perfect; returns how many NPZs were written."""
    count = 0
    for count, row in enumerate(rows, 1):
        arrays = {k: np.asarray(row[f], ARRAY_DTYPES[f]) for k, f in GT_ARRAYS.items() if f in row}
        write_prediction(predictions_dir, row["sequence_id"], arrays)
    return count
