"""The export preview of Syn4D (:mod:`perckit.draw.previews`): the query tracks, projected into frame 0 with the
row's intrinsics (``u = fx·x/z + cx``, ``v = fy·y/z + cy``; the tracks are in the frame-0 camera), drawn over the
first frame: the challenge row's video first frame when the row has its video (:func:`perckit.io.media.video_frames`,
after its declared size is checked), else a neutral canvas of ``image_size``.
Dynamic queries are orange, static ones sky blue; a dot marks each track's first visible point; only samples marked
visible are drawn."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from PIL import Image, ImageDraw

from ..draw import figures
from ..draw import previews
from ..io.media import video_frames
from .layout import MAX_VIDEO_BYTES

DYNAMIC_COLOUR = figures.ORANGE
STATIC_COLOUR = figures.SKY_BLUE
#: Most tracks drawn per preview.
MAX_TRACKS = 64


def first_frame(video: Any, where: str) -> Image.Image | None:
    """The first frame of a ``{bytes, path}`` video value (bytes first, else the file), None when there is none."""
    with video_frames(video, where, MAX_VIDEO_BYTES) as frames:
        frame = next(frames, None) if frames is not None else None
        return frame.to_image().convert("RGB") if frame is not None else None


def row_preview(row: Mapping[str, Any]) -> bytes:
    where = f"Syn4D sequence {row.get('sequence_id')!r}"
    hw = row.get("image_size")
    if not (isinstance(hw, list) and len(hw) == 2 and all(isinstance(v, int) and v > 0 for v in hw)):
        hw = [720, 1280]
    out_h, out_w = previews.fit_size(hw[0], hw[1])
    frame = first_frame(row.get("video"), where)
    im = frame.resize((out_w, out_h), Image.BILINEAR) if frame is not None else Image.new("RGB", (out_w, out_h), figures.NEUTRAL)
    draw = ImageDraw.Draw(im)
    k = row.get("intrinsics")
    tracks = row.get("tracks_ref0")
    if isinstance(k, list) and len(k) == 4 and all(isinstance(v, (int, float)) for v in k) and isinstance(tracks, list) and tracks:
        fx, fy, cx, cy = (float(v) for v in k)
        s = out_w / hw[1]
        p = np.asarray(tracks, dtype=np.float64)  # [T, Q, 3]
        if p.ndim == 3 and p.shape[-1] == 3:
            vis = row.get("visibility")
            valid = np.asarray(vis, dtype=bool) if isinstance(vis, list) and np.shape(vis) == p.shape[:2] else np.ones(p.shape[:2], bool)
            dyn = row.get("dynamic") if isinstance(row.get("dynamic"), list) else []
            z = p[..., 2]
            ok = valid & np.isfinite(p).all(-1) & (z > 1e-6)
            with np.errstate(divide="ignore", invalid="ignore"):
                u = s * (fx * p[..., 0] / z + cx)
                v = s * (fy * p[..., 1] / z + cy)
            for q in range(min(p.shape[1], MAX_TRACKS)):
                colour = DYNAMIC_COLOUR if q < len(dyn) and dyn[q] else STATIC_COLOUR
                pts = [(float(a), float(b)) for a, b, o in zip(u[:, q], v[:, q], ok[:, q]) if o]
                if len(pts) > 1:
                    draw.line(pts, fill=colour, width=2)
                if pts:
                    x, y = pts[0]
                    draw.ellipse([x - 3, y - 3, x + 3, y + 3], fill=colour, outline=figures.BLACK)
    return previews.encode(im, frame is not None)


def legend(row: Mapping[str, Any]) -> list:
    """The two track colours, the start dot, and the canvas entry for a row without its video."""
    return [("dynamic query's track", DYNAMIC_COLOUR), ("static query's track", STATIC_COLOUR),
            ("a dot with a black ring: where a track is first visible", figures.BLACK)] + [previews.NO_IMAGE] * (not row.get("video"))


def make_previewer(builder: Any, config: str) -> previews.Previewer | None:
    """The previewer of ``tracking`` and ``challenge``."""
    if config not in ("tracking", "challenge"):
        return None
    cols = ("sequence_id", "image_size", "intrinsics", "tracks_ref0", "visibility", "dynamic")
    return previews.Previewer(row_preview, cols + (("video",) if config == "challenge" else ()), f"syn4d/{config}", legend=legend)
