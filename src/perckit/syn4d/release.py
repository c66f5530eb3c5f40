"""Readers of the Syn4D benchmark release: tracking NPYs, the sequence index, depth EXRs, camera CSVs.

Layout (Hub folder ``benchmark/``; ``challenge_eval/`` either inside it or beside it)::

    benchmark/data/tracking_gt/<variant>/<scene>/<sequence>.npy   syn4d-tracking-gt-v1, 0-d structured
    benchmark/sequences.jsonl, protocol.json, baselines.json, SHA256SUMS
    challenge_eval/<variant>/<scene>/mp4/<sequence>.mp4
    challenge_eval/<variant>/<scene>/exr_layers/depth/<sequence>/<sequence>_<FFFF>_depth.exr   (cm)
    challenge_eval/<variant>/<scene>/ground_truth/meta_exr_csv/<sequence>_camera.csv         (Unreal cm, deg)

NPYs are read with ``allow_pickle=False`` only; object dtypes are refused.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO

import numpy as np

from ..errors import ReleaseFormatError, ReleaseNotFoundError, check_choice
from ..io.jsonio import decode_text, parse_int
from ..io.jsonio import iter_json_lines
from ..io.paths import check_relative, open_regular_file, read_regular_file, resolve_under
from .geometry import unreal_rows_to_c2w
from .resolve import PLAIN_RELATIVE
from .resolve import PathResolver
from .resolve import real_path

SCHEMA = "syn4d-tracking-gt-v1"
VARIANTS = ("mixed", "mixed_no_bedlam", "og", "sim")
SCENES = ("antiquity", "dream", "gothic", "office", "outpost", "space", "street", "triplex")
FRAME_INDICES = tuple(range(0, 192, 6))
NPY_FIELDS = ("schema", "sequence_id", "tracks_ref0", "visibility", "dynamic", "query_uv", "frame_indices", "intrinsics", "image_size")
EXR_CHANNELS = ("Depth", "Z", "R", "Y")
CSV_COLUMNS = ("x", "y", "z", "yaw", "pitch", "roll")
INDEX_NAMES = ("sequences.jsonl", "manifest.jsonl")
#: Largest text file of a release read (the sequence index, ``SHA256SUMS``, a camera CSV); the real index
#: of 512 sequences is under 1 MB, a camera CSV a few KB. Larger files are refused before they are read.
MAX_TEXT_BYTES = 256 << 20
#: the largest sequence video read (a preview's first frame; the file is opened as a regular file under this cap)
MAX_VIDEO_BYTES = 1 << 31


@dataclass(frozen=True)
class ReleasePaths:
    """Resolved folders of a release (spec: ``resolve_release``)."""

    root: Path
    benchmark: Path
    tracking_gt: Path
    challenge: Path | None
    index: Path | None
    checksums: Path | None


def resolve_release(
    data_dir: str | Path,
    tracking_gt_dir: str | Path | None = None,
    challenge_dir: str | Path | None = None,
    index_file: str | Path | None = None,
) -> ReleasePaths:
    """B = ``data_dir`` if it holds ``data/tracking_gt/`` else ``data_dir/benchmark``; C = ``B/challenge_eval``
    or ``data_dir/challenge_eval``; index = ``B/sequences.jsonl``, ``data_dir/sequences.jsonl``,
    ``data_dir/manifest.jsonl`` or ``B/manifest.jsonl``. The three options override."""
    root = Path(data_dir)
    if not root.is_dir():
        raise ReleaseNotFoundError(
            f"Syn4D release folder {str(root)!r} does not exist; pass data_dir=<the folder that holds benchmark/ "
            "(or data/tracking_gt/) and challenge_eval/>"
        )
    bench = root if (root / "data" / "tracking_gt").is_dir() else root / "benchmark"
    if not bench.is_dir() and not challenge_dir and is_challenge_tree(root):
        # The official evaluator's data root (SYN4D_DATA_ROOT) is the challenge tree itself,
        # e.g. benchmark/challenge_eval: the benchmark folder is then its parent.
        challenge_dir = root
        bench = root.parent if (root.parent / "data" / "tracking_gt").is_dir() else root
    tracking = Path(tracking_gt_dir) if tracking_gt_dir else bench / "data" / "tracking_gt"
    if challenge_dir:
        challenge: Path | None = Path(challenge_dir)
        if not challenge.is_dir():
            raise ReleaseNotFoundError(f"Syn4D challenge folder {str(challenge)!r} (challenge_dir) does not exist")
    else:
        challenge = next((c for c in (bench / "challenge_eval", root / "challenge_eval") if c.is_dir()), None)
    if index_file:
        index: Path | None = Path(index_file)
        if not index.is_file():
            raise ReleaseNotFoundError(f"Syn4D sequence index {str(index)!r} (index_file) not found")
    else:
        candidates = (bench / "sequences.jsonl", root / "sequences.jsonl", root / "manifest.jsonl", bench / "manifest.jsonl")
        index = next((c for c in candidates if c.is_file()), None)
        if index is not None:  # found in the release: a symbolic link planted there must not leave it
            resolve_under(index.parent, index.name, f"Syn4D release {str(root)!r}: sequence index")
    sums = bench / "SHA256SUMS"
    if sums.is_file():
        resolve_under(bench, sums.name, f"Syn4D release {str(root)!r}: checksums")
    return ReleasePaths(root, bench, tracking, challenge, index, sums if sums.is_file() else None)


def is_challenge_tree(path: Path) -> bool:
    """``<variant>/<scene>/{exr_layers,ground_truth,mp4}`` below ``path``."""
    return any(
        (path / v).is_dir() and any((s / sub).is_dir() for s in (path / v).iterdir() if s.is_dir() for sub in ("exr_layers", "ground_truth", "mp4"))
        for v in VARIANTS
    )


# ---------------------------------------------------------------- index


@dataclass(frozen=True)
class SequenceRecord:
    sequence_id: str
    variant: str
    scene: str
    sequence: str
    camera: int
    frame_indices: tuple[int, ...]
    depth_dir: Path | None
    camera_csv: Path | None
    video: Path | None
    width: int = 1280
    height: int = 720

    def tracking_npy(self, tracking_gt: Path, resolver: PathResolver | None = None) -> Path:
        """``<tracking_gt>/<variant>/<scene>/<sequence>.npy``, refused when a symbolic link leads out of
        ``tracking_gt`` (``resolver``: a :class:`PathResolver` of ``tracking_gt`` for a pass over many records)."""
        rel = f"{self.variant}/{self.scene}/{self.sequence}.npy"
        where = f"Syn4D sequence {self.sequence_id!r}: tracking NPY {rel!r}"
        if resolver is not None and resolver.base == Path(tracking_gt):
            return resolver(rel, where)
        return resolve_under(tracking_gt, rel, where)


def _resolve(path: str | None, base: Path | None, where: str, resolver: PathResolver | None = None) -> Path | None:
    """A path of the index (``depth_dir``, ``camera_csv``), relative to the challenge folder and inside it
    (:func:`perckit.io.paths.resolve_under`): an absolute path, a ``..`` component or a symbolic link out of
    it raises naming ``where``. Without a challenge folder nothing is read from it: ``None``."""
    if not path:
        return None
    if base is None:
        check_relative(path, where)
        return None
    return resolver(path, where) if resolver is not None and resolver.base == base else resolve_under(base, path, where)


def check_sequence_id(sid: object, where: str, error: type[Exception] = ReleaseFormatError) -> tuple[str, str, str]:
    """``(variant, scene, sequence)`` of ``'<variant>/<scene>/<sequence>'``; each part names one folder or
    file, so an empty part, ``.``, ``..`` or a backslash is refused (the ids build the NPY, video and NPZ paths)."""
    parts = sid.split("/") if isinstance(sid, str) else []
    if len(parts) != 3 or any(p in ("", ".", "..") or "\\" in p or "\x00" in p for p in parts):
        raise error(f"{where}: expected 'sequence_id' = '<variant>/<scene>/<sequence>' (three folder names), got {sid!r}"[:400])
    return parts[0], parts[1], parts[2]


def _challenge_file(challenge: Path | None, rel: str, where: str, resolver: PathResolver | None = None) -> Path | None:
    if challenge is None:
        return None
    return resolver(rel, where) if resolver is not None and resolver.base == challenge else resolve_under(challenge, rel, where)


def read_text(path: Path, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """A release text file (index, checksums, CSV) under the BOM rule: a regular file of at most ``limit``
    bytes (:func:`perckit.io.paths.read_regular_file`), decoded by :func:`perckit.io.jsonio.decode_text`."""
    where = repr(str(path))
    return decode_text(read_regular_file(path, where, limit), where, ReleaseFormatError, what)


def _camera_of(sequence: str) -> int:
    try:
        return int(sequence.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return 0


def read_index(path: Path, challenge: Path | None) -> list[SequenceRecord]:
    """``sequences.jsonl`` (or the official manifest): one JSON object a line; relative paths resolve against C."""
    records = []
    seen: set[str] = set()
    resolver = PathResolver(challenge) if challenge is not None else None
    # The one JSON Lines reader: a regular file under MAX_TEXT_BYTES, a leading BOM skipped, one object a line.
    for _, where, obj in iter_json_lines(path, limit=MAX_TEXT_BYTES):
        sid = obj.get("sequence_id")
        variant, scene, sequence = check_sequence_id(sid, where)
        if sid in seen:
            raise ReleaseFormatError(f"{where}: duplicate sequence_id {sid!r}")
        seen.add(sid)
        for key, expected in (("variant", variant), ("scene", scene), ("sequence", sequence)):
            if key in obj and obj[key] != expected:
                raise ReleaseFormatError(f"{where}: {key!r} is {obj[key]!r} but sequence_id {sid!r} says {expected!r}")
        frames = obj.get("frame_indices", list(FRAME_INDICES))
        if not isinstance(frames, list) or not all(isinstance(f, int) and not isinstance(f, bool) for f in frames):
            raise ReleaseFormatError(f"{where}: expected 'frame_indices' to be a list of ints, got {frames!r}"[:300])
        if tuple(frames) != FRAME_INDICES:
            raise ReleaseFormatError(f"{where}: expected frame_indices range(0, 192, 6), got {frames[:6]}...")
        camera = parse_int(obj.get("camera", _camera_of(sequence)), f"{where}: 'camera'")
        width = parse_int(obj.get("width", 1280), f"{where}: 'width'")
        height = parse_int(obj.get("height", 720), f"{where}: 'height'")
        for key in ("depth_dir", "camera_csv"):
            if obj.get(key) is not None and not isinstance(obj[key], str):
                raise ReleaseFormatError(f"{where}: expected {key!r} to be a path string, got {obj[key]!r}"[:300])
        records.append(SequenceRecord(
            sequence_id=sid, variant=variant, scene=scene, sequence=sequence,
            camera=camera, frame_indices=tuple(frames),
            depth_dir=_resolve(obj.get("depth_dir"), challenge, f"{where}: 'depth_dir'", resolver),
            camera_csv=_resolve(obj.get("camera_csv"), challenge, f"{where}: 'camera_csv'", resolver),
            video=_challenge_file(challenge, f"{variant}/{scene}/mp4/{sequence}.mp4", f"{where}: video of {sid!r}", resolver),
            width=width, height=height,
        ))
    return records


def records_from_tracking_gt(tracking_gt: Path, challenge: Path | None) -> list[SequenceRecord]:
    """No index file: one record per tracking NPY (sorted), with the default challenge paths."""
    if not tracking_gt.is_dir():
        raise ReleaseNotFoundError(f"Syn4D: no sequence index and no tracking folder {str(tracking_gt)!r}")
    records = []
    for p in sorted(tracking_gt.glob("*/*/*.npy")):
        variant, scene, sequence = p.parent.parent.name, p.parent.name, p.stem
        records.append(default_record(variant, scene, sequence, challenge))
    if not records:
        raise ReleaseNotFoundError(f"Syn4D: no '<variant>/<scene>/<sequence>.npy' under {str(tracking_gt)!r}")
    return records


def default_record(variant: str, scene: str, sequence: str, challenge: Path | None) -> SequenceRecord:
    sid = f"{variant}/{scene}/{sequence}"
    where = f"Syn4D sequence {sid!r}"
    check_sequence_id(sid, where)
    c = f"{variant}/{scene}"
    return SequenceRecord(
        sequence_id=sid, variant=variant, scene=scene, sequence=sequence,
        camera=_camera_of(sequence), frame_indices=FRAME_INDICES,
        depth_dir=_challenge_file(challenge, f"{c}/exr_layers/depth/{sequence}", f"{where}: depth folder"),
        camera_csv=_challenge_file(challenge, f"{c}/ground_truth/meta_exr_csv/{sequence}_camera.csv", f"{where}: camera CSV"),
        video=_challenge_file(challenge, f"{c}/mp4/{sequence}.mp4", f"{where}: video"),
    )


def select_records(
    records: Sequence[SequenceRecord],
    variants: Iterable[str] | None = None,
    scenes: Iterable[str] | None = None,
    cameras: Iterable[int] | None = None,
    limit: int | None = None,
) -> list[SequenceRecord]:
    """The official filters: variants, scenes, cameras, then the first ``limit`` (0, a negative number or
    None = all, as the official ``if args.limit > 0``)."""
    v = set(variants) if variants else None
    s = set(scenes) if scenes else None
    c = {int(x) for x in cameras} if cameras else None
    out = [r for r in records if (v is None or r.variant in v) and (s is None or r.scene in s) and (c is None or r.camera in c)]
    return out[:limit] if limit and limit > 0 else out


def load_records(paths: ReleasePaths) -> list[SequenceRecord]:
    return read_index(paths.index, paths.challenge) if paths.index else records_from_tracking_gt(paths.tracking_gt, paths.challenge)


# ---------------------------------------------------------------- tracking NPY

#: Largest array an NPY file (or an NPZ member) may declare, in bytes. A full-size Syn4D depth
#: prediction is 118 MB; the limit keeps a corrupt or hostile header from allocating without bound.
MAX_ARRAY_BYTES = 1 << 31
#: room for an NPY file's magic and header beyond its data (NumPy caps the header at 10,000 bytes)
MAX_NPY_HEADER_BYTES = 1 << 16


def check_npy_header(
    f: Any, size: int, where: str, error: type[Exception] = ReleaseFormatError, max_bytes: int = MAX_ARRAY_BYTES
) -> tuple[tuple[int, ...], bool, np.dtype, tuple[int, int]]:
    """Read the magic and header of the NPY stream ``f`` (``size`` bytes long) and check it before NumPy allocates.

    Raises ``error`` naming ``where`` for a stream that is not NPY, an object dtype (pickled data is never
    loaded), a declared array larger than ``max_bytes``, or fewer data bytes than the header declares
    (a truncated file). NumPy itself caps the header at 10,000 bytes. Returns the header's shape, Fortran
    order, dtype and format version (``f`` is left at the first data byte).
    """
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
        if arr is None:
            f.seek(0)
        try:
            if arr is None:
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
    out["tracks_ref0"] = tracks.astype(np.float32, copy=False)
    out["visibility"] = out["visibility"].astype(bool, copy=False)
    out["dynamic"] = out["dynamic"].astype(bool, copy=False)
    out["query_uv"] = out["query_uv"].astype(np.float32, copy=False)
    out["frame_indices"] = out["frame_indices"].astype(np.int32, copy=False)
    out["intrinsics"] = out["intrinsics"].astype(np.float64, copy=False)
    out["image_size"] = out["image_size"].astype(np.int32, copy=False)
    if expected_sequence_id is not None and out["sequence_id"] != expected_sequence_id:
        raise ReleaseFormatError(f"{where!r}: sequence_id inside is {out['sequence_id']!r}, but its path says {expected_sequence_id!r}")
    if tuple(int(x) for x in out["frame_indices"]) != FRAME_INDICES:
        raise ReleaseFormatError(f"{where!r}: expected frame_indices range(0, 192, 6), got {out['frame_indices'][:6].tolist()}...")
    return out


# ---------------------------------------------------------------- depth EXR

#: Largest depth frame (H * W pixels) read from an EXR: 256 MiB as float32. Syn4D frames are
#: 720 x 1280 = 0.9 M pixels; a corrupt dataWindow would otherwise make OpenEXR allocate gigabytes.
MAX_DEPTH_PIXELS = 1 << 26
#: the largest depth EXR file read (a frame at MAX_DEPTH_PIXELS of uncompressed float32 with room for its header
#: and tiles); checked on the open file before OpenEXR reads a byte
MAX_EXR_BYTES = 4 * MAX_DEPTH_PIXELS + (64 << 20)


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


def _open_exr(fh: BinaryIO, where: str) -> Any:
    """``OpenEXR.InputFile`` on the checked open file ``fh`` (OpenEXR reads the file object, never the path)."""
    import OpenEXR

    try:
        return OpenEXR.InputFile(fh)
    except (OSError, RuntimeError, TypeError, ValueError) as e:
        raise ReleaseFormatError(f"{where!r}: expected a readable OpenEXR file, got: {e}") from None


def exr_size(path: Path) -> tuple[int, int]:
    """(H, W) of an EXR from its header (dataWindow); the file is a regular file of at most :data:`MAX_EXR_BYTES`."""
    with open_regular_file(path, repr(str(path)), MAX_EXR_BYTES, what="EXR file") as fh:
        f = _open_exr(fh, str(path))
        try:
            return _exr_hw(f.header(), str(path))
        finally:
            f.close()


def read_depth_exr(path: Path, expected_hw: tuple[int, int] | None = None) -> np.ndarray:
    """Depth in metres, float32 [H, W]: the first of the Depth, Z, R, Y channels (centimetres) / 100."""
    where = str(path)
    if not path.exists():
        raise ReleaseNotFoundError(f"{where!r}: depth EXR not found")
    with open_regular_file(path, repr(where), MAX_EXR_BYTES, what="EXR file") as fh:
        return _read_depth(_open_exr(fh, where), where, expected_hw)


def _read_depth(f: Any, where: str, expected_hw: tuple[int, int] | None) -> np.ndarray:
    """The depth channel of the open EXR ``f`` (see :func:`read_depth_exr`); closes ``f``."""
    import Imath

    try:
        header = f.header()
        h, w = _exr_hw(header, where)
        if expected_hw is not None and (h, w) != tuple(expected_hw):
            raise ReleaseFormatError(f"{where!r}: expected depth size (H, W) = {tuple(expected_hw)}, got {(h, w)}; set the option depth_hw")
        channel = next((c for c in EXR_CHANNELS if c in header["channels"]), None)
        if channel is None:
            raise ReleaseFormatError(f"{where!r}: expected one of the channels {list(EXR_CHANNELS)}, got {sorted(header['channels'])}")
        try:
            raw = f.channel(channel, Imath.PixelType(Imath.PixelType.FLOAT))
        except OSError as e:
            raise ReleaseFormatError(f"{where!r}: cannot read channel {channel!r}: {e}") from None
    finally:
        f.close()
    data = np.frombuffer(raw, dtype=np.float32)
    if data.size != h * w:
        raise ReleaseFormatError(f"{where!r}: channel {channel!r} has {data.size} values, expected H*W = {h * w}")
    return data.reshape(h, w) / np.float32(100.0)


def depth_frame_paths(depth_dir: Path, sequence: str, frame_indices: Sequence[int]) -> list[Path]:
    """The EXR of every frame; one that is a symbolic link out of ``depth_dir`` is refused."""
    return [
        resolve_under(depth_dir, f"{sequence}_{int(t):04d}_depth.exr", f"depth folder {str(depth_dir)!r}: frame {t}")
        for t in frame_indices
    ]


def read_depth_sequence(record: SequenceRecord, hw: tuple[int, int] | None = None) -> np.ndarray | None:
    """[T, H, W] metres, or None when the sequence's depth folder is absent; a partial set raises."""
    if record.depth_dir is None or not record.depth_dir.is_dir():
        return None
    paths = depth_frame_paths(record.depth_dir, record.sequence, record.frame_indices)
    missing = [p.name for p in paths if not p.is_file()]
    if missing:
        raise ReleaseFormatError(
            f"{str(record.depth_dir)!r}: expected {len(paths)} depth EXRs, {len(missing)} missing (e.g. {missing[:3]})"
        )
    return np.stack([read_depth_exr(p, hw) for p in paths])


# ---------------------------------------------------------------- camera CSV


def read_camera_csv(record: SequenceRecord) -> np.ndarray | None:
    """[T, 6] float64 (x_cm, y_cm, z_cm, yaw_deg, pitch_deg, roll_deg) of the evaluated frames, or None if absent."""
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
                raise ReleaseFormatError(f"{where!r}: expected the header name,x,y,z,yaw,pitch,roll, missing {lacking} (got {header})")
            for n, row in enumerate(reader, 2):
                try:
                    rows[Path(row["name"] or "").name] = [float(row[c]) for c in CSV_COLUMNS]
                except (TypeError, ValueError):
                    raise ReleaseFormatError(f"{where!r} line {n}: expected numbers in x,y,z,yaw,pitch,roll, got {row}") from None
    except csv.Error as e:  # a NUL byte, a field longer than csv.field_size_limit(), ...
        raise ReleaseFormatError(f"{where!r}: expected a CSV with the header name,x,y,z,yaw,pitch,roll, got a parse error: {e}") from None
    out = []
    for t in record.frame_indices:
        key = f"{record.sequence}_{int(t):04d}.png"
        if key not in rows:
            raise ReleaseFormatError(f"{where!r}: expected a row named {key!r} (frame {t}), not found")
        out.append(rows[key])
    arr = np.asarray(out, dtype=np.float64)
    if not np.isfinite(arr).all():
        raise ReleaseFormatError(f"{where!r}: a camera row of an evaluated frame has a NaN or infinite value")
    return arr


# ---------------------------------------------------------------- one sequence's ground truth

#: The builder-row fields of the ground truth of each task (tracking: the fields of the NPY).
GT_FIELDS = {
    "tracking": ("schema", "image_size_hw", "intrinsics_fx_fy_cx_cy", "query_uv_px", "tracks_ref0_m", "visibility", "dynamic"),
    "depth": ("depth_m",),
    "pose": ("camera_unreal", "camera_c2w"),
}


def read_sequence_gt(
    record: SequenceRecord, paths: ReleasePaths, task: str, hw: tuple[int, int] | None = None, required: bool = False,
    resolver: PathResolver | None = None,
) -> dict[str, Any]:
    """The ground truth of one task of one sequence, read from the release, as the builder's row fields
    (:data:`GT_FIELDS`); the one reader of it, for the builder and the file runner.

    ``tracking``: the NPY (:func:`read_tracking_npy`, its ``sequence_id`` checked against the record's):
    ``tracks_ref0_m``, ``visibility``, ``query_uv_px`` as arrays, ``dynamic``, ``image_size_hw`` and
    ``intrinsics_fx_fy_cx_cy`` as lists, and ``schema``. ``depth``: ``depth_m`` [T, H, W] in metres
    (:func:`read_depth_sequence`; every frame of size ``hw`` when given). ``pose``: ``camera_unreal`` [T, 6]
    (:func:`read_camera_csv`) and ``camera_c2w`` [T, 4, 4].

    ``resolver``: a :class:`PathResolver` of ``paths.tracking_gt`` for a pass over many records.

    An absent NPY, depth folder or camera CSV gives every field ``None`` or, with ``required``, raises
    :class:`~perckit.errors.ReleaseNotFoundError` naming it; a partial or malformed one always raises."""
    check_choice("task", task, tuple(GT_FIELDS))
    if task == "tracking":
        npy = record.tracking_npy(paths.tracking_gt, resolver)
        if not required and not npy.is_file():
            return dict.fromkeys(GT_FIELDS[task])
        gt = read_tracking_npy(npy, record.sequence_id)  # a missing file: ReleaseNotFoundError naming it
        return {
            "schema": gt["schema"], "image_size_hw": gt["image_size"].tolist(),
            "intrinsics_fx_fy_cx_cy": gt["intrinsics"].tolist(), "query_uv_px": gt["query_uv"],
            "tracks_ref0_m": gt["tracks_ref0"], "visibility": gt["visibility"], "dynamic": gt["dynamic"].tolist(),
        }
    if task == "depth":
        depth = read_depth_sequence(record, hw)
        if depth is None and required:
            raise ReleaseNotFoundError(f"depth folder {str(record.depth_dir)!r} not found")
        return {"depth_m": depth}
    unreal = read_camera_csv(record)
    if unreal is None and required:
        raise ReleaseNotFoundError(f"camera CSV {str(record.camera_csv)!r} not found")
    return {"camera_unreal": unreal, "camera_c2w": unreal_rows_to_c2w(unreal) if unreal is not None else None}


# ---------------------------------------------------------------- checksums


def read_checksums(path: Path) -> dict[str, str]:
    """``sha256sum`` format: ``<64 hex>  <path>`` (``*`` binary marker allowed); path relative to ``benchmark/``."""
    out: dict[str, str] = {}
    text = read_text(path, "UTF-8 text ('<64 hex digits>  <path>' lines)")
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(None, 1)
        if len(parts) != 2 or len(parts[0]) != 64 or not _HEX64.fullmatch(parts[0]):
            raise ReleaseFormatError(f"{str(path)!r} line {n}: expected '<64 hex digits>  <path>', got {line[:120]!r}")
        name = parts[1].lstrip("*").strip().removeprefix("./")
        # Only compared with the files the builder reads, never opened; still, a listed path must be one
        # inside the release (no absolute path, no '..'): check_relative, unless the name is plainly one
        # (the regex accepts a subset of what check_relative accepts; anything else gets its verdict).
        if not PLAIN_RELATIVE.fullmatch(name):
            check_relative(name, f"{str(path)!r} line {n}: path")
        out[name] = parts[0].lower()
    return out


_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


#: the largest release file hashed against ``SHA256SUMS`` (read in 1 MiB blocks: memory stays flat)
MAX_CHECKSUM_FILE_BYTES = 1 << 36


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """The hex SHA-256 of ``path``, a regular file of at most :data:`MAX_CHECKSUM_FILE_BYTES`."""
    h = hashlib.sha256()
    with open_regular_file(path, repr(str(path)), MAX_CHECKSUM_FILE_BYTES) as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class ChecksumVerifier:
    """Verifies each file the builder reads against ``SHA256SUMS`` (files it does not list are skipped)."""

    def __init__(self, paths: ReleasePaths) -> None:
        self.sums = read_checksums(paths.checksums) if paths.checksums else {}
        self.bases = [paths.benchmark, paths.root]
        self.source = paths.checksums

    def key(self, path: Path, real_bases: Sequence[Path] | None = None) -> str | None:
        """The listed name of ``path``: its real path relative to a real base (``real_bases``: the bases
        already resolved, for a pass over many files)."""
        return self._key_of_real(path.resolve(), real_bases or [b.resolve() for b in self.bases])

    def _key_of_real(self, real: Path, real_bases: Sequence[Path]) -> str | None:
        for base in real_bases:
            try:
                rel = real.relative_to(base).as_posix()
            except ValueError:
                continue
            if rel in self.sums:
                return rel
        return None

    def check_all(self, paths: Iterable[Path]) -> int:
        """:meth:`check` every existing file of ``paths`` (before anything is scored or generated, so that a
        mismatch reaches the user as its own error); returns how many were listed and verified."""
        n = 0
        if not self.sums:
            return n
        real_bases = [b.resolve() for b in self.bases]
        real_dirs: dict[str, str] = {}
        for path in paths:
            if path is not None and path.is_file():
                rel = self._key_of_real(real_path(path, real_dirs), real_bases)
                if rel is not None:
                    self._check(path, rel)
                    n += 1
        return n

    def check(self, path: Path) -> None:
        if not self.sums:
            return
        rel = self.key(path)
        if rel is not None:
            self._check(path, rel)

    def _check(self, path: Path, rel: str) -> None:
        actual = sha256_file(path)
        if actual != self.sums[rel]:
            raise ReleaseFormatError(
                f"{str(path)!r}: SHA-256 mismatch with {str(self.source)!r}: expected {self.sums[rel]}, got {actual}"
            )


def checksum_verifier(paths: ReleasePaths, verify: bool | None, hint: str = "") -> ChecksumVerifier | None:
    """The option ``verify_checksums`` of the builder and the file runner, written once: ``None`` verifies when
    the release has ``SHA256SUMS``, ``True`` requires it (else :class:`~perckit.errors.ReleaseNotFoundError`
    naming it, then ``hint``), ``False`` skips. Returns the verifier to run over the files read, or ``None``
    when there is nothing to verify."""
    if verify and paths.checksums is None:
        raise ReleaseNotFoundError(f"verify_checksums=True but {str(paths.benchmark / 'SHA256SUMS')!r} does not exist{hint}")
    return ChecksumVerifier(paths) if verify is not False and paths.checksums is not None else None


def release_files(
    paths: ReleasePaths, records: Iterable[SequenceRecord], tracking: bool = True, depth: bool = False, camera: bool = False
) -> Iterator[Path]:
    """The release files a run reads for ``records``: the sequence index, then per record its tracking NPY,
    its 32 depth EXRs and its camera CSV (each only when asked for). Absent files are yielded too; callers
    skip them (a missing file is reported where it is read)."""
    if paths.index is not None:
        yield paths.index
    resolver = PathResolver(paths.tracking_gt)
    for r in records:
        if tracking:
            yield r.tracking_npy(paths.tracking_gt, resolver)
        if depth and r.depth_dir is not None and r.depth_dir.is_dir():
            yield from depth_frame_paths(r.depth_dir, r.sequence, r.frame_indices)
        if camera and r.camera_csv is not None:
            yield r.camera_csv
