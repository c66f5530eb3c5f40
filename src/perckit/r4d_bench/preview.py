"""The export preview of R4D-Bench (:mod:`perckit.draw.previews`).

``all_queries`` / ``subset_36``: the query's referred mask over its first annotated frame (the first entry of
``frames``; a negative query with no frame shows its scene's first frame with a note). The frame image is read from
the release (the builder's release root, ``data/scenes/<scene>/``) through the scene reader
(:func:`perckit.r4d_bench.read.read_scene`, each scene's COCO file read once) and
:func:`perckit.io.paths.read_regular_file`, so a missing or unreadable frame raises the perckit error naming it.
``frames``: every annotation's mask over the row's own image, one colour per track."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Mapping
from typing import Any

from PIL import Image

from ..draw import previews
from ..draw.figures import has_image
from ..io.paths import read_regular_file
from .layout import MAX_IMAGE_BYTES
from .read import read_scene


class _Frames:
    """The frame images of a release, one scene's COCO file read on first use; the last frame read is kept (the
    queries of a scene are consecutive rows, many on the same first frame)."""

    def __init__(self, builder: Any) -> None:
        self.builder = builder
        self.root: Path | None = None
        self.scenes: dict[str, Any] = {}
        self.last: tuple[Any, bytes] = (None, b"")

    def image(self, scene: str, frame_id: int | None) -> tuple[bytes | None, tuple[int, int] | None]:
        cfg = self.builder.config
        if self.root is None:  # the release root: data_dir, else the Hub snapshot the build already downloaded
            self.root = Path(cfg.data_dir) if cfg.data_dir else Path(self.builder._release_root())
        if scene not in self.scenes:
            self.scenes[scene] = read_scene(self.root, scene, cfg.coco_json_name, cfg.frame_id_pattern, aliases=cfg.scene_aliases)
        info = self.scenes[scene]
        if frame_id is None:
            frame_id = min(info.frames, default=None)
        fr = info.frames.get(frame_id)
        if fr is None:
            return None, None
        if self.last[0] != (scene, frame_id):
            where = f"R4D-Bench scene {scene!r} frame {frame_id}"
            self.last = ((scene, frame_id), read_regular_file(info.folder / fr.file_name, where, MAX_IMAGE_BYTES))
        return self.last[1], (fr.height, fr.width)


def make_previewer(builder: Any, config: str) -> previews.Previewer | None:
    """The previewer of ``config``."""
    if config == "frames":
        def frame_preview(row: Mapping[str, Any]) -> bytes:
            anns = [a for a in (row.get("annotations") or []) if isinstance(a, Mapping)]
            tracks = {t: i for i, t in enumerate(dict.fromkeys(a.get("track_id") for a in anns))}  # by first appearance
            h, w = row.get("height"), row.get("width")
            t = previews.masks_tile(row.get("image"), [a.get("segmentation") for a in anns], [h, w] if isinstance(h, int) and isinstance(w, int) else None,
                                    f"R4D-Bench frame {row.get('scene')!r}/{row.get('frame_id')!r}",
                                    colours=[previews.object_colour(tracks[a.get("track_id")]) for a in anns] or None)
            return previews.encode_tile(t, row.get("image"), "no image")

        return previews.Previewer(frame_preview, ("scene", "frame_id", "image", "annotations", "height", "width"), "r4d_bench/frames")
    if config not in ("all_queries", "subset_36"):
        return None
    frames = _Frames(builder)

    def query_preview(row: Mapping[str, Any]) -> bytes:
        entries = [f for f in (row.get("frames") or []) if isinstance(f, Mapping)]
        first = entries[0] if entries else None
        scene = row.get("scene")
        if not isinstance(scene, str):
            return previews.blank("no scene")
        data, size = frames.image(scene, first.get("frame_id") if first else None)
        where = f"R4D-Bench query {row.get('query_id')!r}"
        t = previews.masks_tile(data, [first.get("mask")] if first else [], list(size) if size else None, where)
        if t is None:
            return previews.blank("no frame")
        im = Image.fromarray(t)
        if first is None:
            im = previews.with_note(im, "negative query: no referred object")
        return previews.encode(im, has_image(data))

    return previews.Previewer(query_preview, ("query_id", "scene", "frames"), f"r4d_bench/{config}",
                              legend=lambda row: previews.mask_legend(["the referred object's mask on its first annotated frame"]))
