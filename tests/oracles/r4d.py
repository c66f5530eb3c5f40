"""Reference implementations of R4D-Bench's release readers, the plain way: one Python dict per row and per
annotation, every value through its checked converter, every path resolved component by component.

They are what ``perckit.r4d_bench`` computed beside its production paths before issue 29 left one path per
rule: the ``frames`` rows (``scenes.frame_rows``, now :func:`frame_rows`), the folder of a frame image
(``scenes._resolve_image_name``, now :func:`image_name`) and the mask of a dense-GT frame
(``masks.frame_mask_reference``, now :func:`frame_mask`). The tests compare the production paths with these on
the sample releases and on hand-made quirks: the same values, or the same error (type and message).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from perckit import rle as rle_ops
from perckit.errors import ReleaseFormatError
from perckit.io.paths import resolve_under
from perckit.r4d_bench import read as r4d_read
from perckit.r4d_bench import rows as r4d_rows


def image_name(folder: Path, file_name: object, where: str = "COCO image file_name") -> str:
    """``file_name`` under ``images/`` first, then under the scene folder, each through ``resolve_under``."""
    resolve_under(folder, file_name, where)
    if resolve_under(folder / "images", file_name, where).exists():
        return f"images/{file_name}"
    return str(file_name)


def frame_rows(info: r4d_read.SceneInfo, track_id_precedence: str = "coco", images=None) -> Iterator[tuple[str, dict]]:
    """``("<scene>/<frame_id:06d>", row)`` for every COCO image of a scene, by frame id, a frame's annotations
    checked before the next frame's image is read."""
    scene = r4d_rows.scene_annotations(info, track_id_precedence)
    for fid, fr, _path, data, where in r4d_read.frame_images(info, images):
        anns = annotations(info, scene, fr, track_id_precedence, where)
        yield f"{info.name}/{fid:06d}", {
            "scene": info.name,
            "frame_id": fid,
            "image": {"bytes": data, "path": fr.file_name},
            "file_name": fr.coco_file_name,
            "id": fr.coco_image_id,
            "height": fr.height,
            "width": fr.width,
            "annotations": anns,
        }


def annotations(info: r4d_read.SceneInfo, scene: r4d_rows.SceneAnnotations, fr: r4d_read.FrameInfo, track_id_precedence: str,
                where: str) -> list[dict]:
    """The ``annotations`` of one frame row, by annotation id, every value checked (errors name ``where``)."""
    hashable = (int, str)
    out = []
    for a in sorted(scene.by_image.get(fr.coco_image_id, []), key=lambda a: r4d_rows._annotation_int(a, "id", where)):
        awhere = f"{where}: annotation {a.get('id')}"
        seg = a.get("segmentation")
        mask = None
        if seg not in (None, [], {}):
            mask = rle_ops.to_rle(seg, size=(fr.height, fr.width), where=f"{awhere}.segmentation")
        out.append({
            "id": r4d_rows._annotation_int(a, "id", where),
            "category_id": r4d_rows._annotation_int(a, "category_id", where),
            "category_name": r4d_rows._json_text(scene.cats.get(a.get("category_id")) if isinstance(a.get("category_id"), hashable) else None),
            "track_id": r4d_read.resolve_track_id(a, info.track_links, track_id_precedence, r4d_rows._annotation_int(a, "id", where)),
            "bbox": r4d_rows._annotation_numbers(a.get("bbox") or [], f"{awhere}.bbox"),
            "area": r4d_rows._annotation_numbers([a["area"]], f"{awhere}.area")[0] if a.get("area") is not None else None,
            "iscrowd": bool(a.get("iscrowd", 0)),
            "segmentation": mask,
        })
    return out


def frame_mask(masks: Sequence[Mapping], size: tuple[int, int] | None, where: str) -> dict:
    """The OR of a dense-GT frame's masks: every mask through ``rle.to_rle``, then ``rle.union``."""
    segs = [m.get("segmentation") if isinstance(m, Mapping) else None for m in masks]
    rle_sizes = set()
    for s in segs:
        if isinstance(s, Mapping):
            sz = s.get("size")
            if isinstance(sz, (list, tuple)) and len(sz) == 2 and type(sz[0]) is int and type(sz[1]) is int:
                rle_sizes.add((sz[0], sz[1]))
    if len(rle_sizes) > 1:
        raise ReleaseFormatError(f"{where}: masks of one frame have different sizes {sorted(rle_sizes)}")
    if rle_sizes:
        rsize = next(iter(rle_sizes))
        if size is not None and tuple(size) != rsize:
            raise ReleaseFormatError(f"{where}: RLE size {list(rsize)} differs from the frame size {list(size)} of the COCO image")
        size = rsize
    parts = []
    for k, seg in enumerate(segs):
        if seg is None or (isinstance(seg, (list, dict)) and len(seg) == 0):
            continue
        if isinstance(seg, list) and size is None:
            raise ReleaseFormatError(f"{where}: masks[{k}] is a polygon and the frame size is unknown (no COCO image, no RLE)")
        parts.append(rle_ops.to_rle(seg, size=size, where=f"{where}: masks[{k}].segmentation"))
    if size is None:
        raise ReleaseFormatError(f"{where}: cannot build the frame mask: frame size unknown (no COCO image and no RLE)")
    return rle_ops.union(parts, size=size, where=where)
