"""Official Syn4D prediction files: one NPZ per sequence, ``<predictions>/<variant>/<scene>/<sequence>.npz``."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from ..errors import PredictionError

PREDICTION_KEYS = ("tracking_xyz", "depth", "camera_c2w", "frame_indices")


def prediction_path(predictions_dir: str | Path, sequence_id: str) -> Path:
    variant, scene, sequence = sequence_id.split("/")
    return Path(predictions_dir) / variant / scene / f"{sequence}.npz"


def read_npz(path: str | Path) -> dict[str, np.ndarray | None]:
    """The prediction arrays of one NPZ (``allow_pickle=False``); an absent key is None, extra keys are ignored."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile):
                raise PredictionError(f"{str(path)!r}: expected an .npz archive, got a single array")
            out = {}
            for k in PREDICTION_KEYS:
                out[k] = np.asarray(z[k]) if k in z.files else None
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise PredictionError(f"{str(path)!r}: expected a readable .npz of numeric arrays (no pickles), got: {e}") from None
    for k, v in out.items():
        if v is not None and not (np.issubdtype(v.dtype, np.number) or v.dtype == bool):
            raise PredictionError(f"{str(path)!r}: {k!r} must be numeric, got dtype {v.dtype}")
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
