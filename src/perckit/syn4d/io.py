"""Official Syn4D prediction files: one NPZ per sequence, ``<predictions>/<variant>/<scene>/<sequence>.npz``."""

from __future__ import annotations

import lzma
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..errors import InputNotFoundError, PredictionError
from ..io.paths import open_regular_file, resolve_under
from .release import MAX_ARRAY_BYTES, check_npy_header, check_sequence_id

PREDICTION_KEYS = ("tracking_xyz", "depth", "camera_c2w", "frame_indices")
#: the largest prediction NPZ read: room for its four arrays at the per-array cap (each member's NPY header is
#: checked against ``MAX_ARRAY_BYTES`` too, so a small compressed member cannot declare more)
MAX_NPZ_BYTES = 4 * MAX_ARRAY_BYTES


def prediction_path(predictions_dir: str | Path, sequence_id: str) -> Path:
    """``<predictions_dir>/<variant>/<scene>/<sequence>.npz``; the id's parts must be folder names (no ``..``,
    no ``.``, no backslash) and the file must not be a symbolic link out of ``predictions_dir``."""
    variant, scene, sequence = check_sequence_id(sequence_id, "sequence_id", PredictionError)
    rel = f"{variant}/{scene}/{sequence}.npz"
    return resolve_under(predictions_dir, rel, f"prediction of sequence_id {sequence_id!r}", PredictionError)


#: What reading a corrupt NPZ can raise (zipfile, zlib, bz2 / lzma members, NumPy's parser).
_READ_ERRORS = (
    ValueError, OSError, EOFError, KeyError, RuntimeError, NotImplementedError, struct.error,
    zipfile.BadZipFile, zlib.error, lzma.LZMAError,
)


def read_npz(path: str | Path) -> dict[str, np.ndarray | None]:
    """The prediction arrays of one NPZ (``allow_pickle=False``); an absent key is None, extra keys are ignored.

    Every member that is read has its NPY header checked first (:func:`perckit.syn4d.release.check_npy_header`):
    object dtypes, arrays declaring more than ``MAX_ARRAY_BYTES`` and members shorter than their header
    declares raise :class:`PredictionError` before NumPy allocates anything.
    """
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
                out = {}
                for k in PREDICTION_KEYS:
                    if k not in z.files:
                        out[k] = None
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

    ``as_lists`` (default) gives nested lists: datasets 5.x's Arrow writer (which evaluate uses) cannot
    convert a multi-dimensional numpy array in a batch whose first value is None. The values are exact
    (float32 -> Python float is lossless). The core functions accept numpy arrays as they are.
    """
    path = Path(npz_path)
    arrays = read_npz(path) if path.is_file() else dict.fromkeys(PREDICTION_KEYS)
    if as_lists:
        arrays = {k: (v.tolist() if v is not None else None) for k, v in arrays.items()}
    return {"sequence_id": sequence_id, **arrays}


def load_prediction_rows(predictions_dir: str | Path, sequence_ids: list[str], as_lists: bool = True) -> list[dict]:
    return [load_prediction_row(prediction_path(predictions_dir, sid), sid, as_lists) for sid in sequence_ids]
