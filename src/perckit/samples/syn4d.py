"""Synthetic Syn4D release mirroring the real layout.

Writes ``benchmark/`` (``data/tracking_gt/<variant>/<scene>/<sequence>.npy`` in the exact ``syn4d-tracking-gt-v1``
structured dtype, ``sequences.jsonl``, ``protocol.json``, ``baselines.json``, ``SHA256SUMS`` in ``sha256sum``
format, ``README.md``) and ``challenge_eval/`` beside it (or inside it with ``challenge_inside=True``): H.264 mp4
inputs of the 192 rendered frames (frame i shows i in binary in its top rows: 8 bands of 0 or 255, bit 0 left, so a
picked frame is recognised after lossy coding), 32 depth EXRs per sequence (one ``Depth`` FLOAT channel, ZIP,
centimetres, with sky, zero and NaN pixels) and 192-row Unreal camera CSVs.
:func:`perckit.samples.syn4d_predictions.write_predictions` writes official per-sequence NPZ predictions for it."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..io.paths import read_regular_file, write_atomic
from .base import ReleaseWriter, SampleRelease, encode_mp4

#: [card + code] the ``schema`` value of every tracking NPY.
SCHEMA = "syn4d-tracking-gt-v1"
#: [card] the four variants and [code] the eight scenes (folder names).
VARIANTS = ("mixed", "mixed_no_bedlam", "og", "sim")
SCENES = ("antiquity", "dream", "gothic", "office", "outpost", "space", "street", "triplex")
#: [card] the 32 scored source frames: 0, 6, ..., 186.
FRAME_INDICES = tuple(range(0, 192, 6))
#: The (H, W) the NPYs' ``image_size`` and ``sequences.jsonl`` give (the real renders' size).
NOMINAL_HW = (720, 1280)


@dataclass
class Syn4DSampleRelease(SampleRelease):
    sequence_ids: list[str]
    num_queries: int
    depth_hw: tuple[int, int]


def npy_dtype(t: int, q: int) -> np.dtype:
    """The exact structured dtype of the official writer."""
    return np.dtype([
        ("schema", "<U32"), ("sequence_id", "<U160"), ("tracks_ref0", "<f4", (t, q, 3)), ("visibility", "?", (t, q)),
        ("dynamic", "?", (q,)), ("query_uv", "<f4", (q, 2)), ("frame_indices", "<i4", (t,)), ("intrinsics", "<f8", (4,)),
        ("image_size", "<i4", (2,)),
    ])


def write_exr(path: Path, depth_cm: np.ndarray) -> None:
    import Imath
    import OpenEXR

    h, w = depth_cm.shape
    header = OpenEXR.Header(w, h)
    header["channels"] = {"Depth": Imath.Channel(Imath.PixelType(Imath.PixelType.FLOAT))}
    header["compression"] = Imath.Compression(Imath.Compression.ZIP_COMPRESSION)
    # OpenEXR writes only to a path: a private scratch file, then its bytes through the one atomic writer
    with tempfile.TemporaryDirectory(prefix="perckit-exr-") as tmp:
        scratch = os.path.join(tmp, "depth.exr")
        out = OpenEXR.OutputFile(scratch, header)
        out.writePixels({"Depth": np.ascontiguousarray(depth_cm, dtype=np.float32).tobytes()})
        out.close()
        write_atomic(path, read_regular_file(scratch, "EXR scratch file", 1 << 30))


def _camera_rows(rng: np.random.Generator, n: int = 192) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)
    start = rng.uniform(-300, 300, size=3)
    velocity = rng.uniform(-2, 2, size=3)
    pos = start + velocity * t[:, None] + 5 * np.sin(t / 20.0)[:, None]
    yaw = rng.uniform(-180, 180) + 0.15 * t
    pitch = 5 * np.sin(t / 30.0)
    roll = np.full(n, rng.uniform(-1, 1))
    return np.column_stack([pos, yaw, pitch, roll])


def protocol_json() -> dict:
    """``benchmark/protocol.json`` in the layout of the real release (the official repository's
    ``protocol.json``): the benchmark's frames, variants, scenes and cameras, then per task its ground truth,
    alignment rule, thresholds or valid range and reported metrics, then the aggregation. Its values are the
    real release's (the protocol is the benchmark's, whatever subset a sample release writes); ``input.root``, a
    path on the machine that wrote the real file, is given as ``challenge_eval``."""
    return {
        "name": "Syn4D Multi-Task Benchmark",
        "version": "1.0",
        "input": {
            "root": "challenge_eval", "frames": list(FRAME_INDICES),
            "variants": ["og", "sim", "mixed", "mixed_no_bedlam"], "scenes": list(SCENES), "cameras": [0, 1],
        },
        "tracking": {
            "ground_truth": "data/tracking_gt/<variant>/<scene>/<sequence>.npy",
            "ground_truth_schema": f"{SCHEMA} (structured NPY, allow_pickle=False)", "queries_per_sequence": 512,
            "query_frame": 0, "coordinate_system": "OpenCV frame-0 camera coordinates",
            "alignment": "one median scale per sequence", "thresholds_m": [0.1, 0.3, 0.5, 1.0],
            "dynamic_threshold_m": 0.01, "score": "0.5 * APD(all valid) + 0.5 * APD(dynamic valid)",
        },
        "depth": {
            "units": "meters", "alignment": "one median scale per sequence", "valid_range_m": [0.001, 300.0],
            "primary": "AbsRel",
            "reported": ["AbsRel", "SqRel", "RMSE", "RMSE-log", "SILog", "delta1", "delta2", "delta3"],
        },
        "pose": {
            "representation": "camera-to-world 4x4 matrices",
            "alignment": "normalize to frame 0, then one Sim(3) per sequence",
            "primary": ["ATE RMSE", "RPE translation RMSE", "RPE rotation mean degrees"],
            "reported": ["ATE", "position error", "rotation error", "RPE", "relative-pose AUC"],
        },
        "aggregation": "macro average over sequences; also report by variant and scene",
    }


def write_release(root: str | Path, seed: int = 0, variants: Sequence[str] = VARIANTS,
                  scenes: Sequence[str] = ("antiquity", "office"), base_sequences: int = 1,
                  cameras: Sequence[int] = (0, 1), num_queries: int = 32, depth_hw: tuple[int, int] = (18, 32),
                  video_hw: tuple[int, int] = (36, 64), challenge_inside: bool = False,
                  write_video: bool = True) -> Syn4DSampleRelease:
    """Write the release under ``root``. Defaults: 4 variants x 2 scenes x 1 sequence x 2 cameras = 16 sequences."""
    wr = ReleaseWriter(root, seed)
    rng = wr.rng
    bench = "benchmark"
    chall = "benchmark/challenge_eval" if challenge_inside else "challenge_eval"
    t, q = len(FRAME_INDICES), num_queries
    h, w = depth_hw
    index_lines, ids = [], []
    for variant in variants:
        for scene in scenes:
            for b in range(base_sequences):
                for cam in cameras:
                    seq = f"seq_{b:06d}_{cam}"
                    sid = f"{variant}/{scene}/{seq}"
                    ids.append(sid)
                    # --- tracking GT: points 2-10 m ahead; 40% of them move
                    p0 = np.column_stack([rng.uniform(-3, 3, q), rng.uniform(-2, 2, q), rng.uniform(2, 10, q)])
                    dynamic = rng.random(q) < 0.4
                    motion = rng.normal(0, 0.05, size=(q, 3)) * dynamic[:, None]
                    tracks = (p0[None] + np.arange(t)[:, None, None] * motion[None]).astype(np.float32)
                    visibility = rng.random((t, q)) > 0.2
                    visibility[0] = True
                    invalid = (~visibility) & (rng.random((t, q)) < 0.5)
                    tracks[invalid] = np.nan  # NaN GT where the correspondence is invalid
                    rec = np.zeros((), dtype=npy_dtype(t, q))
                    rec["schema"], rec["sequence_id"] = SCHEMA, sid
                    rec["tracks_ref0"], rec["visibility"], rec["dynamic"] = tracks, visibility, dynamic
                    fx = fy = 1000.0
                    cx, cy = NOMINAL_HW[1] / 2, NOMINAL_HW[0] / 2
                    rec["query_uv"] = np.column_stack([fx * p0[:, 0] / p0[:, 2] + cx, fy * p0[:, 1] / p0[:, 2] + cy]).astype(np.float32)
                    rec["frame_indices"] = FRAME_INDICES
                    rec["intrinsics"] = [fx, fy, cx, cy]
                    rec["image_size"] = NOMINAL_HW
                    with wr.open(f"{bench}/data/tracking_gt/{variant}/{scene}/{seq}.npy") as f:
                        np.save(f, rec, allow_pickle=False)
                    # --- depth EXRs (cm): a slanted plane with sky, zero and NaN pixels
                    base = f"{chall}/{variant}/{scene}"
                    yy, xx = np.mgrid[0:h, 0:w]
                    for k, fi in enumerate(FRAME_INDICES):
                        d = (300.0 + 20.0 * xx + 10.0 * yy + 5.0 * k + rng.uniform(0, 5, (h, w))).astype(np.float32)
                        d[: max(h // 6, 1)] = 65504.0  # sky: beyond 300 m
                        d[h - 1, 0] = 0.0
                        d[h - 1, 1] = np.nan
                        write_exr(wr.path(f"{base}/exr_layers/depth/{seq}/{seq}_{fi:04d}_depth.exr"), d)
                    # --- Unreal camera CSV, 192 rendered frames
                    cam_rows = _camera_rows(rng)
                    wr.csv(
                        f"{base}/ground_truth/meta_exr_csv/{seq}_camera.csv", ["name", "x", "y", "z", "yaw", "pitch", "roll"],
                        [[f"{seq}_{i:04d}.png", *[repr(float(v)) for v in row]] for i, row in enumerate(cam_rows)],
                    )
                    if write_video:
                        vh, vw = video_hw
                        noise = rng.integers(0, 255, size=(t, vh, vw, 3), dtype=np.uint8)  # one draw per evaluated frame
                        frames = np.repeat(noise, 6, axis=0)
                        bits = (np.arange(len(frames))[:, None] >> np.arange(8)) & 1
                        frames[:, : vh // 4, : 8 * (vw // 8)] = np.repeat(bits * 255, vw // 8, axis=1)[:, None, :, None]
                        wr.bytes(f"{base}/mp4/{seq}.mp4", encode_mp4(frames))
                    index_lines.append(json.dumps({
                        "camera": cam, "camera_csv": f"{variant}/{scene}/ground_truth/meta_exr_csv/{seq}_camera.csv",
                        "depth_dir": f"{variant}/{scene}/exr_layers/depth/{seq}", "frame_indices": list(FRAME_INDICES),
                        "height": NOMINAL_HW[0], "rgb_dir": f"{variant}/{scene}/png/{seq}", "scene": scene, "sequence": seq,
                        "sequence_id": sid, "tracking_safetensors": f"{variant}/{scene}/tracking_safetensors/{seq}.safetensors",
                        "variant": variant, "width": NOMINAL_HW[1],
                    }, sort_keys=True))
    wr.text(f"{bench}/sequences.jsonl", "\n".join(index_lines) + "\n")
    wr.json(f"{bench}/protocol.json", protocol_json())
    wr.json(f"{bench}/baselines.json", {
        "synthetic-baseline": {
            "display_name": "Synthetic baseline", "official_repo": "https://example.invalid/none", "revision": "0" * 40,
            "runner": "adapters/run_synthetic.py", "tasks": ["tracking", "depth", "pose"],
        },
    })
    wr.text(f"{bench}/README.md", "# Syn4D benchmark (synthetic sample release)\n\nWritten by perckit.samples.syn4d; mirrors the release layout.\n")
    # SHA256SUMS: paths relative to benchmark/ (challenge files beside it relative to the root)
    lines = []
    for rel in sorted(set(wr.files)):
        if rel.endswith("SHA256SUMS") or rel.endswith("README.md"):
            continue
        digest = hashlib.sha256(read_regular_file(wr.root / rel, "sample release file", 1 << 30)).hexdigest()
        name = rel[len(bench) + 1:] if rel.startswith(bench + "/") else rel
        lines.append(f"{digest}  {name}")
    wr.text(f"{bench}/SHA256SUMS", "\n".join(lines) + "\n")
    return Syn4DSampleRelease(Path(root), ids, q, (h, w), files=sorted(wr.files))
