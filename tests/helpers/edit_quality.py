"""What the av_edit_quality test modules share: RGB-lossless clips, hand-made references, and fake model metrics.

``rgb_mp4`` writes frames with libx264rgb at qp 0 (RGB, no chroma subsampling: decodes to the very same pixels),
so an edit made in the frames reaches the metric unchanged; the sample releases' ``encode_mp4(lossless=True)``
is yuv420p and not pixel-exact in RGB (fine for a 0/255 mask video).
"""

from __future__ import annotations

import numpy as np

from perckit.reason_av_edit import features as feats
from perckit.samples.reason_av_edit import encode_rgb_mp4
from perckit.reason_av_edit.quality.models import ModelUnavailable
from perckit.samples.base import encode_mp4

NOT = feats.NOT_PROVIDED_MEDIA
SR = 16000


def rgb_mp4(frames: np.ndarray, fps: int = 25, audio: np.ndarray | None = None, sample_rate: int = SR) -> bytes:
    """``frames`` as an RGB-lossless mp4 (:func:`perckit.samples.reason_av_edit.encode_rgb_mp4`)."""
    return encode_rgb_mp4(frames, fps, audio, sample_rate)


def mask_mp4(region: np.ndarray, fps: int = 25) -> bytes:
    """A bool ``(T, H, W)`` region as a white-on-black lossless mask video (as the release writes them)."""
    frames = np.repeat((region.astype(np.uint8) * 255)[..., None], 3, axis=-1)
    return encode_mp4(frames, fps, lossless=True)


def clip(t: int = 5, h: int = 32, w: int = 32, seed: int = 0) -> np.ndarray:
    """A deterministic textured clip (random pixels, so that SSIM and PSNR react to every change)."""
    return np.random.default_rng(seed).integers(0, 256, size=(t, h, w, 3), dtype=np.uint8)


def box_region(t: int, h: int, w: int, box: tuple[int, int, int, int] = (8, 8, 20, 20)) -> np.ndarray:
    """The box ``[x0, y0, x1, y1)`` on every frame."""
    x0, y0, x1, y1 = box
    r = np.zeros((t, h, w), dtype=bool)
    r[:, y0:y1, x0:x1] = True
    return r


def reference(sid: str = "s", frames: np.ndarray | None = None, region: np.ndarray | None = None, category: str = "where_only",
              sub_track: str = "W1_same_class_pair", audio: bytes | None = None, video: bytes | None = None,
              instruction: str = "Replace the red object with a dog.", language: str = "en", orientation: str = "landscape") -> dict:
    """A reference dict of the av_edit_quality schema from arrays (the source as an RGB-lossless mp4)."""
    frames = clip() if frames is None else frames
    return {
        "sample_id": sid, "category": category, "sub_track": sub_track, "instruction": instruction, "language": language,
        "orientation": orientation,
        "video": {"bytes": video if video is not None else rgb_mp4(frames), "path": ""},
        "audio": {"bytes": audio, "path": ""} if audio is not None else dict(NOT),
        "mask_video": {"bytes": mask_mp4(region), "path": ""} if region is not None else dict(NOT),
        "ref_image": dict(NOT), "edit_window_s": [0.0, 0.2], "fps": 25.0, "num_frames": int(frames.shape[0]),
    }


def edit_box(frames: np.ndarray, box: tuple[int, int, int, int], value: int = 0) -> np.ndarray:
    """``frames`` with the box ``[x0, y0, x1, y1)`` painted ``value`` on every frame."""
    x0, y0, x1, y1 = box
    out = frames.copy()
    out[:, y0:y1, x0:x1] = value
    return out


# ---------------------------------------------------------------- fake model metrics (the protocol, no network)


class MeanMetric:
    """A mean of a per-sample number: the edited audio's RMS (keys ``("pq",)``, needs audio), or of any function."""

    def __init__(self, keys=("pq",), fn=None):
        self.keys = tuple(keys)
        self.fn = fn or (lambda s: float(np.sqrt(np.mean(np.square(s.edited.audio)))))
        self.seen = []

    def measure(self, sample):
        self.seen.append(sample)
        return {"value": self.fn(sample)}

    def reduce(self, records):
        vals = [r["value"] for r in records]
        return {k: (float(np.mean(vals)) if vals else None) for k in self.keys}


class SetMetric:
    """A set-level statistic (like FVD): the spread (max - min) of the per-sample mean edited pixel over the
    records, ``None`` for fewer than two; order independent."""

    def __init__(self, keys=("fvd",)):
        self.keys = tuple(keys)
        self.reduced = []

    def measure(self, sample):
        return {"mean": float(sample.edited.frames.mean()), "id": sample.sample_id}

    def reduce(self, records):
        self.reduced.append(sorted(r["id"] for r in records))
        if len(records) < 2:
            return {k: None for k in self.keys}
        vals = [r["mean"] for r in records]
        return {k: float(max(vals) - min(vals)) for k in self.keys}


def unavailable_factory(weights, options):
    """A model factory whose weights are absent."""
    raise ModelUnavailable("no weights for the fake model: pass models={'fvd': <path>}")
