"""Official per-sequence NPZ predictions for a Syn4D sample release, as a model would write them.

Unlike the release writer (:mod:`perckit.samples.syn4d`), which spells the layout itself, this reads the written
release back with the Syn4D readers: it is a consumer of the release, like the metric."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..syn4d.layout import resolve_release
from ..syn4d.read import load_records, read_camera_csv, read_depth_sequence, read_tracking_npy, write_prediction
from ..syn4d.rows import unreal_rows_to_c2w
from .syn4d import Syn4DSampleRelease


def write_predictions(fixture: Syn4DSampleRelease, out: str | Path, seed: int = 1, noise: float = 0.0, skip: Sequence[str] = (), drop_keys: dict | None = None) -> Path:
    """Official NPZ predictions for a sample release (``fixture``, what :func:`perckit.samples.syn4d.write_release` returned): the GT
    (``noise=0``) or a perturbed version of it, read back from the release with the Syn4D readers.

    Tracks are given at half scale, depth at another scale, poses in another world frame, so that the metric's
    alignment steps are exercised (the parity fixture exercises the depth resize). ``skip`` leaves sequences out;
    ``drop_keys`` maps a sequence id to keys to omit."""
    rng = np.random.default_rng(seed)
    out = Path(out)
    paths = resolve_release(fixture.root)
    for r in load_records(paths):
        if r.sequence_id in skip:
            continue
        gt = read_tracking_npy(r.tracking_npy(paths.tracking_gt))
        tracks = np.nan_to_num(gt["tracks_ref0"], nan=0.0) * 0.5
        tracks = tracks + rng.normal(0, noise, tracks.shape) * 0.5
        depth = read_depth_sequence(r)
        # Another scale (recovered by the median alignment) and, with noise, multiplicative noise.
        # Full resolution: at half resolution the bilinear resize mixes the 655 m sky into its border
        # pixels, which is what the official metric then scores, but would swamp a demo's numbers.
        pred_depth = depth * 0.37 * (1 + rng.normal(0, noise, depth.shape)) if noise else depth * 0.37
        c2w = unreal_rows_to_c2w(read_camera_csv(r))
        c2w = np.linalg.inv(c2w[0]) @ c2w  # any world frame: relative to frame 0
        c2w[:, :3, 3] = c2w[:, :3, 3] * 2.0 + rng.normal(0, noise, (len(c2w), 3))
        arrays = {
            "tracking_xyz": tracks.astype(np.float32), "depth": pred_depth.astype(np.float32),
            "camera_c2w": c2w.astype(np.float32), "frame_indices": np.asarray(r.frame_indices, dtype=np.int32),
            "model": np.asarray("perckit-synthetic"),
        }
        for k in (drop_keys or {}).get(r.sequence_id, ()):
            arrays.pop(k)
        write_prediction(out, r.sequence_id, arrays)
    return out
