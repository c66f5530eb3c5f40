"""Where the files of a Syn4D release and of a run's predictions are: the layout, the names and the limits.

Layout (Hub folder ``benchmark/``; ``challenge_eval/`` either inside it or beside it)::

    benchmark/data/tracking_gt/<variant>/<scene>/<sequence>.npy   syn4d-tracking-gt-v1, 0-d structured
    benchmark/sequences.jsonl, protocol.json, baselines.json, SHA256SUMS
    challenge_eval/<variant>/<scene>/mp4/<sequence>.mp4
    challenge_eval/<variant>/<scene>/exr_layers/depth/<sequence>/<sequence>_<FFFF>_depth.exr   (cm)
    challenge_eval/<variant>/<scene>/ground_truth/meta_exr_csv/<sequence>_camera.csv         (Unreal cm, deg)
    <predictions>/<variant>/<scene>/<sequence>.npz                 one official prediction NPZ per sequence

Every path built from the index or a ``sequence_id`` stays inside its folder (:func:`perckit.io.paths.resolve_under`,
or a :class:`PathResolver` for a pass over many files). The readers are in :mod:`perckit.syn4d.read`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import PredictionError, ReleaseFormatError, ReleaseNotFoundError
from ..io.paths import check_relative, is_inside, resolve_under

SCHEMA = "syn4d-tracking-gt-v1"
VARIANTS = ("mixed", "mixed_no_bedlam", "og", "sim")
SCENES = ("antiquity", "dream", "gothic", "office", "outpost", "space", "street", "triplex")
FRAME_INDICES = tuple(range(0, 192, 6))
NPY_FIELDS = ("schema", "sequence_id", "tracks_ref0", "visibility", "dynamic", "query_uv", "frame_indices", "intrinsics", "image_size")
EXR_CHANNELS = ("Depth", "Z", "R", "Y")
CSV_COLUMNS = ("x", "y", "z", "yaw", "pitch", "roll")
#: Largest text file of a release read (the sequence index, ``SHA256SUMS``, a camera CSV); the real index
#: of 512 sequences is under 1 MB, a camera CSV a few KB. Larger files are refused before they are read.
MAX_TEXT_BYTES = 256 << 20
#: the largest sequence video read (a preview's first frame; the file is opened as a regular file under this cap)
MAX_VIDEO_BYTES = 1 << 31
#: Largest array an NPY file (or an NPZ member) may declare, in bytes. A full-size Syn4D depth
#: prediction is 118 MB; the limit keeps a corrupt or hostile header from allocating without bound.
MAX_ARRAY_BYTES = 1 << 31
#: room for an NPY file's magic and header beyond its data (NumPy caps the header at 10,000 bytes)
MAX_NPY_HEADER_BYTES = 1 << 16
#: Largest depth frame (H * W pixels) read from an EXR: 256 MiB as float32. Syn4D frames are
#: 720 x 1280 = 0.9 M pixels; a corrupt dataWindow would otherwise make OpenEXR allocate gigabytes.
MAX_DEPTH_PIXELS = 1 << 26
#: the largest depth EXR file read (a frame at MAX_DEPTH_PIXELS of uncompressed float32 with room for its header
#: and tiles); checked on the open file before OpenEXR reads a byte
MAX_EXR_BYTES = 4 * MAX_DEPTH_PIXELS + (64 << 20)
#: the largest release file hashed against ``SHA256SUMS`` (read in 1 MiB blocks: memory stays flat)
MAX_CHECKSUM_FILE_BYTES = 1 << 36
#: dtype of every array field of a builder row (what the NPY / EXR / CSV held; the NPY's arrays are read as these).
ARRAY_DTYPES = {
    "frame_indices": np.int32, "image_size": np.int32, "intrinsics": np.float64,
    "query_uv": np.float32, "tracks_ref0": np.float32, "visibility": np.bool_, "dynamic": np.bool_,
    "depth_m": np.float32, "camera_c2w": np.float64, "camera_unreal": np.float64,
}
#: the arrays of an official prediction NPZ (absent keys are None; extra keys are ignored)
PREDICTION_KEYS = ("tracking_xyz", "depth", "camera_c2w", "frame_indices")
#: the largest prediction NPZ read: room for its four arrays at the per-array cap (each member's NPY header is
#: checked against ``MAX_ARRAY_BYTES`` too, so a small compressed member cannot declare more)
MAX_NPZ_BYTES = 4 * MAX_ARRAY_BYTES


# ---------------------------------------------------------------- paths under a folder

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


@dataclass(frozen=True)
class ReleasePaths:
    """Resolved folders of a release (spec: ``resolve_release``). ``checksums`` is ``B/SHA256SUMS`` when it exists;
    ``tracking_checksums`` the ``SHA256SUMS`` beside the ``data/`` folder of the tracking GT read
    (:func:`tracking_checksums_path`) when it exists: the same file as ``checksums`` in the release's own layout,
    another one for a ``tracking_gt_dir`` given apart."""

    root: Path
    benchmark: Path
    tracking_gt: Path
    challenge: Path | None
    index: Path | None
    checksums: Path | None
    tracking_checksums: Path | None = None


def tracking_checksums_path(tracking_gt: Path) -> Path | None:
    """Where the card puts ``SHA256SUMS`` for a tracking GT folder: beside ``data/tracking_gt``, i.e.
    ``<benchmark>/SHA256SUMS`` for ``<benchmark>/data/tracking_gt`` (its names relative to ``<benchmark>``).
    ``None`` when the folder is not a ``data/tracking_gt`` folder: the card then puts no ``SHA256SUMS`` for it."""
    folder = Path(os.path.abspath(tracking_gt))
    return folder.parent.parent / "SHA256SUMS" if folder.name == "tracking_gt" and folder.parent.name == "data" else None


def resolve_release(data_dir: str | Path, tracking_gt_dir: str | Path | None = None,
                    challenge_dir: str | Path | None = None, index_file: str | Path | None = None) -> ReleasePaths:
    """B = ``data_dir`` if it holds ``data/tracking_gt/`` else ``data_dir/benchmark``; C = ``B/challenge_eval``
    or ``data_dir/challenge_eval``; index = ``B/sequences.jsonl``, ``data_dir/sequences.jsonl``,
    ``data_dir/manifest.jsonl`` or ``B/manifest.jsonl``. The three options override."""
    root = Path(data_dir)
    if not root.is_dir():
        raise ReleaseNotFoundError(f"Syn4D release folder {str(root)!r} does not exist; pass data_dir=<the folder that "
                                   "holds benchmark/ (or data/tracking_gt/) and challenge_eval/>")
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
    # The SHA256SUMS beside data/tracking_gt (the card's place): B's own in the release layout, another one when the
    # tracking GT is given apart (its benchmark folder's; a symbolic link out of that folder is refused).
    tracking_sums = tracking_checksums_path(tracking)
    if tracking_sums is not None and tracking_sums.is_file():
        resolve_under(tracking_sums.parent, tracking_sums.name, f"Syn4D tracking GT {str(tracking)!r}: checksums")
    else:
        tracking_sums = None
    return ReleasePaths(root, bench, tracking, challenge, index, sums if sums.is_file() else None, tracking_sums)


def is_challenge_tree(path: Path) -> bool:
    """``<variant>/<scene>/{exr_layers,ground_truth,mp4}`` below ``path``."""
    return any(
        (path / v).is_dir() and any((s / sub).is_dir() for s in (path / v).iterdir() if s.is_dir() for sub in ("exr_layers", "ground_truth", "mp4"))
        for v in VARIANTS
    )


# ---------------------------------------------------------------- records


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

    def tracking_npy(self, tracking_gt: Path, resolver: PathResolver | None = None) -> Path:
        """``<tracking_gt>/<variant>/<scene>/<sequence>.npy``, refused when a symbolic link leads out of
        ``tracking_gt`` (``resolver``: a :class:`PathResolver` of ``tracking_gt`` for a pass over many records)."""
        rel = f"{self.variant}/{self.scene}/{self.sequence}.npy"
        return file_under(Path(tracking_gt), rel, f"Syn4D sequence {self.sequence_id!r}: tracking NPY {rel!r}", resolver)


def index_path(path: str | None, base: Path | None, where: str, resolver: PathResolver | None = None) -> Path | None:
    """A path of the index (``depth_dir``, ``camera_csv``), relative to the challenge folder and inside it
    (:func:`perckit.io.paths.resolve_under`): an absolute path, a ``..`` component or a symbolic link out of
    it raises naming ``where``. Without a challenge folder nothing is read from it: ``None``."""
    if not path:
        return None
    if base is None:
        check_relative(path, where)
        return None
    return file_under(base, path, where, resolver)


def check_sequence_id(sid: object, where: str, error: type[Exception] = ReleaseFormatError) -> tuple[str, str, str]:
    """``(variant, scene, sequence)`` of ``'<variant>/<scene>/<sequence>'``; each part names one folder or
    file, so an empty part, ``.``, ``..`` or a backslash is refused (the ids build the NPY, video and NPZ paths)."""
    parts = sid.split("/") if isinstance(sid, str) else []
    if len(parts) != 3 or any(p in ("", ".", "..") or "\\" in p or "\x00" in p for p in parts):
        raise error(f"{where}: expected 'sequence_id' = '<variant>/<scene>/<sequence>' (three folder names), got {sid!r}"[:400])
    return parts[0], parts[1], parts[2]


def file_under(base: Path | None, rel: str, where: str, resolver: PathResolver | None = None) -> Path | None:
    if base is None:
        return None
    return resolver(rel, where) if resolver is not None and resolver.base == base else resolve_under(base, rel, where)


def camera_of(sequence: str) -> int:
    """The camera number of a sequence name (its last ``_<n>``), 0 without one."""
    try:
        return int(sequence.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return 0


def records_from_tracking_gt(tracking_gt: Path, challenge: Path | None) -> list[SequenceRecord]:
    """No index file: one record per tracking NPY (sorted), with the default challenge paths."""
    if not tracking_gt.is_dir():
        raise ReleaseNotFoundError(f"Syn4D: no sequence index and no tracking folder {str(tracking_gt)!r}")
    records = [default_record(p.parent.parent.name, p.parent.name, p.stem, challenge)  # <variant>/<scene>/<sequence>.npy
               for p in sorted(tracking_gt.glob("*/*/*.npy"))]
    if not records:
        raise ReleaseNotFoundError(f"Syn4D: no '<variant>/<scene>/<sequence>.npy' under {str(tracking_gt)!r}")
    return records


def default_record(variant: str, scene: str, sequence: str, challenge: Path | None,
                   resolver: PathResolver | None = None) -> SequenceRecord:
    """The record of a sequence in the card's layout (camera: the last integer of the name)."""
    sid = f"{variant}/{scene}/{sequence}"
    where = f"Syn4D sequence {sid!r}"
    check_sequence_id(sid, where)
    c = f"{variant}/{scene}"
    return SequenceRecord(
        sequence_id=sid, variant=variant, scene=scene, sequence=sequence, camera=camera_of(sequence), frame_indices=FRAME_INDICES,
        depth_dir=file_under(challenge, f"{c}/exr_layers/depth/{sequence}", f"{where}: depth folder", resolver),
        camera_csv=file_under(challenge, f"{c}/ground_truth/meta_exr_csv/{sequence}_camera.csv", f"{where}: camera CSV", resolver),
        video=file_under(challenge, f"{c}/mp4/{sequence}.mp4", f"{where}: video", resolver))


def select_records(records: Sequence[SequenceRecord], variants: Iterable[str] | None = None,
                   scenes: Iterable[str] | None = None, cameras: Iterable[int] | None = None,
                   limit: int | None = None) -> list[SequenceRecord]:
    """The official filters: variants, scenes, cameras, then the first ``limit`` (0, a negative number or
    None = all, as the official ``if args.limit > 0``)."""
    v = set(variants) if variants else None
    s = set(scenes) if scenes else None
    c = {int(x) for x in cameras} if cameras else None
    out = [r for r in records if (v is None or r.variant in v) and (s is None or r.scene in s) and (c is None or r.camera in c)]
    return out[:limit] if limit and limit > 0 else out


def depth_frame_paths(depth_dir: Path, sequence: str, frame_indices: Sequence[int]) -> list[Path]:
    """The EXR of every frame; one that is a symbolic link out of ``depth_dir`` is refused."""
    return [resolve_under(depth_dir, f"{sequence}_{int(t):04d}_depth.exr", f"depth folder {str(depth_dir)!r}: frame {t}")
            for t in frame_indices]


def release_files(paths: ReleasePaths, records: Iterable[SequenceRecord], tracking: bool = True, depth: bool = False,
                  camera: bool = False) -> Iterator[Path]:
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


def prediction_path(predictions_dir: str | Path, sequence_id: str) -> Path:
    """``<predictions_dir>/<variant>/<scene>/<sequence>.npz``; the id's parts must be folder names (no ``..``,
    no ``.``, no backslash) and the file must not be a symbolic link out of ``predictions_dir``."""
    variant, scene, sequence = check_sequence_id(sequence_id, "sequence_id", PredictionError)
    rel = f"{variant}/{scene}/{sequence}.npz"
    return resolve_under(predictions_dir, rel, f"prediction of sequence_id {sequence_id!r}", PredictionError)
